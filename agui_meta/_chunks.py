"""Chunk expansion: ``*_CHUNK`` shorthand events become START / CONTENT (ARGS) / END events.

This is the stage the reference client (``@ag-ui/client`` 1.0.0) calls ``transformChunks``, with
the same behaviour event for event:

- **Lanes.** Each lane (a ``subagentRunId``; the parent agent when absent) assembles at most one
  stream at a time: a text message, a tool call or a reasoning message. A chunk that opens a new
  stream in a lane first closes whatever that lane had open, of any kind.
- **Choosing a lane.** A chunk whose id is already open in some lane continues there (a tag
  naming another lane is an error). An id nobody holds opens in the lane its own tag names. An
  id-less chunk goes to the lane its tag names; an id-less untagged chunk continues the parent
  lane's stream of its kind, else the only open stream of its kind anywhere (two or more is an
  error: the chunk is ambiguous).
- **Synthesized events.** An opening chunk becomes a START (text: ``role`` ``"assistant"`` only
  when the chunk has none; reasoning: ``role`` ``"reasoning"``). A chunk with a ``delta`` or a
  ``rawEvent`` becomes a CONTENT / ARGS event (``delta`` ``""`` when absent) that carries the
  ``rawEvent``. The chunk's ``metadata`` is stamped on both; never on the END that closes the
  *previous* stream. A continuation with neither ``delta`` nor ``rawEvent`` but with
  ``metadata`` becomes a CONTENT / ARGS event with an empty delta, so the metadata still reaches
  the item; otherwise it becomes nothing. ``timestamp`` is not carried onto any synthesized event
  (as the reference builds them), but while the stage emits them the context's ``timestamp``
  holds that of the event they come from (the chunk; for an END, the event that closes its
  stream), so the ledger and ``otel()`` time them by the stream's clock, not at receipt.
- **Closing.** The synthesized END carries only the id and the opener's ``subagentRunId``. It is
  emitted just before the event that closes the stream: explicit text, tool-call, state, custom,
  step and reasoning events (except ``REASONING_ENCRYPTED_VALUE``) close their own lane;
  ``RUN_STARTED`` / ``RUN_FINISHED`` / ``RUN_ERROR`` / ``MESSAGES_SNAPSHOT`` close every lane, in
  the order the streams opened; ``SUBAGENT_FINISHED`` / ``SUBAGENT_ERROR`` close that subagent's
  lane; ``RAW``, ``ACTIVITY_*``, ``REASONING_ENCRYPTED_VALUE`` and ``SUBAGENT_STARTED`` close
  nothing.
- **Completion.** A stream still open when the source ends gets **no** END: the reference builds
  those END events at completion and discards them, and this stage does the same (it only forgets
  its state).

The reference also carries unknown chunk properties over to the synthesized events (its
"remainder", for enforcement to strip later). Here unknown properties never reach this stage:
the decoder reports and strips them first, so there is no remainder to carry.

All lookups are by key, so each event costs O(1) whatever the number of open lanes.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import Any, Final, Literal, NoReturn

from msgspec import UNSET, UnsetType

from ._events import (
    EVENT_TYPES,
    Event,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ._exceptions import ChunkError
from ._stage import CONTENT_DELTAS, Transducer

__all__ = ["ExpandChunks"]

_Kind = Literal["text", "tool", "reasoning"]
_Chunk = TextMessageChunkEvent | ToolCallChunkEvent | ReasoningMessageChunkEvent

# What an event does to the open lanes (a chunk event is expanded instead).
_PASS = 0  # closes nothing
_CLOSE_OWN = 1  # closes the lane its own tag names (the parent lane when untagged)
_CLOSE_ALL = 2  # closes every lane, in the order the streams opened
_CLOSE_SUBAGENT = 3  # closes the lane of the subagent it names
_TEXT_CHUNK = 4  # the routes from here on are the chunk events (feed tests ``route < 4``)
_TOOL_CHUNK = 5
_REASONING_CHUNK = 6

#: The routes other than ``_CLOSE_OWN`` (every other event: the message, tool call, reasoning,
#: state, step and CUSTOM events), by wire type.
_ROUTE_OF_TYPE: Final[Mapping[str, int]] = {
    "RUN_STARTED": _CLOSE_ALL,
    "RUN_FINISHED": _CLOSE_ALL,
    "RUN_ERROR": _CLOSE_ALL,
    "MESSAGES_SNAPSHOT": _CLOSE_ALL,
    "SUBAGENT_FINISHED": _CLOSE_SUBAGENT,
    "SUBAGENT_ERROR": _CLOSE_SUBAGENT,
    "RAW": _PASS,
    "ACTIVITY_SNAPSHOT": _PASS,
    "ACTIVITY_DELTA": _PASS,
    "REASONING_ENCRYPTED_VALUE": _PASS,
    "SUBAGENT_STARTED": _PASS,
    "TEXT_MESSAGE_CHUNK": _TEXT_CHUNK,
    "TOOL_CALL_CHUNK": _TOOL_CHUNK,
    "REASONING_MESSAGE_CHUNK": _REASONING_CHUNK,
}
_ROUTES: dict[type[Any], int] = {
    cls: _ROUTE_OF_TYPE.get(kind, _CLOSE_OWN) for kind, cls in EVENT_TYPES.items()
}


#: The routes from which on an event is a chunk (for the driver: see ``chunk_route``).
CHUNK_ROUTES = _TEXT_CHUNK


def chunk_route(cls: type[Any]) -> int:
    """How :class:`ExpandChunks` routes events of class ``cls``: below
    :data:`CHUNK_ROUTES`, ``feed`` emits them as they are when no chunk stream is open."""
    return _ROUTES.get(cls) if cls in _ROUTES else _route_of(cls)  # type: ignore[return-value]


def _route_of(cls: type[Any]) -> int:
    """The route of a class not in the table (a subclass of an event class): by its bases."""
    for base in cls.__mro__[1:]:
        route = _ROUTES.get(base)
        if route is not None:
            break
    else:
        route = _PASS
    _ROUTES[cls] = route
    return route


class _Stream:
    """A stream one lane is assembling from chunks, with what its opener established."""

    __slots__ = ("entity_id", "kind", "lane", "name", "parent_message_id", "role", "tag")

    def __init__(
        self,
        kind: _Kind,
        entity_id: str,
        tag: str | UnsetType,
        *,
        role: str = "",
        name: str | UnsetType = UNSET,
        parent_message_id: str | UnsetType = UNSET,
    ) -> None:
        self.kind = kind
        self.entity_id = entity_id
        # The opener's subagentRunId, which is also the lane's key (None: the parent lane).
        self.tag = tag
        self.lane: str | None = None if tag is UNSET else tag
        self.role = role  # text: the role the START carried
        self.name = name  # text: name; tool: toolCallName
        self.parent_message_id = parent_message_id  # tool only


_ID_FIELD = {"text": "messageId", "tool": "toolCallId", "reasoning": "messageId"}
_ENTITY = {"text": "text message", "tool": "tool call", "reasoning": "reasoning message"}


def _lane_name(lane: str | None) -> str:
    return "'(the parent agent)'" if lane is None else repr(lane)


class ExpandChunks(Transducer[Event, Event]):
    """Expand ``TEXT_MESSAGE_CHUNK``, ``TOOL_CALL_CHUNK`` and ``REASONING_MESSAGE_CHUNK`` events.

    Every other event passes through unchanged, preceded by the END of each chunk stream it
    closes (see the module documentation for which events close which lanes). Errors, each a
    :class:`~agui_meta.ChunkError` raised before the chunk changes anything (so in keep-going
    mode a rejected chunk is simply skipped):

    - a chunk that must open a stream but has no id (``messageId`` / ``toolCallId``), or a
      tool-call chunk that opens a stream without ``toolCallName``;
    - a continuation that repeats its opener's ``role`` or ``name`` (text), ``toolCallName`` or
      ``parentMessageId`` (tool call) with a different value;
    - a chunk whose id is open in another lane than its ``subagentRunId`` names;
    - an id-less, untagged chunk when two or more lanes (none of them the parent's) have a
      stream of its kind open.

    When the source ends, streams still open get no END (as in the reference); :meth:`close`
    only forgets them.
    """

    takes_events = True

    def __init__(self) -> None:
        # Lane key (None for the parent agent) -> the stream it is assembling, in the order
        # the streams opened (reopening a lane moves it to the end, as a Map delete+set does).
        self._lanes: dict[str | None, _Stream] = {}
        # Per kind, the open streams by id. An id is open in at most one lane per kind (a chunk
        # naming an open id always continues it), so this also counts the open streams of a kind.
        self._by_id: dict[str, dict[str, _Stream]] = {"text": {}, "tool": {}, "reasoning": {}}
        # The fast path (see ``_stage``): every content delta, whatever its id, while no chunk
        # stream is open (kept current where lanes open and close): feed emits a delta
        # unchanged unless it must close its lane's chunk stream first.
        self.fast_passes: Mapping[type, Container[str] | None] = _EVERY_DELTA

    # -- dispatch ------------------------------------------------------------------------------

    def feed(self, item: Event) -> None:
        route = _ROUTES.get(item.__class__)
        if route is None:
            route = _route_of(item.__class__)
        if route < 4:  # not a chunk (the fast path: one lookup, then emit)
            if route and self._lanes:
                self._stamped(self._close_for, route, item)
            self.emit(item)
        elif route == _TEXT_CHUNK:
            self._stamped(self._text, item)
        elif route == _TOOL_CHUNK:
            self._stamped(self._tool, item)
        else:
            self._stamped(self._reasoning, item)

    def _stamped(self, expand: Callable[..., None], *args: Any) -> None:
        """Run ``expand`` with the source event's ``timestamp`` in the context: the events it
        synthesizes carry none (as the reference's), but they happened at the event's time."""
        ctx = self.ctx
        stamp = args[-1].timestamp
        ctx.timestamp = None if stamp is UNSET else stamp
        try:
            expand(*args)
        finally:
            ctx.timestamp = None

    def _close_for(self, route: int, event: Event) -> None:
        """Emit the END of each stream ``event`` closes (by its route), before the event."""
        if route == _CLOSE_OWN:
            tag = event.subagent_run_id  # type: ignore[attr-defined]
            stream = self._lanes.get(None if tag is UNSET else tag)
            if stream is not None:
                self._end(stream)
        elif route == _CLOSE_ALL:
            for stream in list(self._lanes.values()):
                self._end(stream)
        else:  # _CLOSE_SUBAGENT
            stream = self._lanes.get(event.subagent_run_id)  # type: ignore[attr-defined]
            if stream is not None:
                self._end(stream)

    def close(self) -> None:
        # The reference builds END events for the streams still open when its source completes
        # and discards them (its finalize callback cannot emit). So: no END, just forget them.
        self._lanes.clear()
        self.fast_passes = _EVERY_DELTA
        for streams in self._by_id.values():
            streams.clear()

    def _renew(self) -> None:
        """Be as a new stage is (a pipeline kept for the next stream: see ``_durable``)."""
        self.close()

    # -- lanes ---------------------------------------------------------------------------------

    def _end(self, stream: _Stream) -> None:
        """Close ``stream``: forget it and emit its END (no metadata, no timestamp)."""
        del self._lanes[stream.lane]
        if not self._lanes:
            self.fast_passes = _EVERY_DELTA
        del self._by_id[stream.kind][stream.entity_id]
        end: Event
        if stream.kind == "text":
            end = TextMessageEndEvent(message_id=stream.entity_id, subagent_run_id=stream.tag)
        elif stream.kind == "tool":
            end = ToolCallEndEvent(tool_call_id=stream.entity_id, subagent_run_id=stream.tag)
        else:
            end = ReasoningMessageEndEvent(message_id=stream.entity_id, subagent_run_id=stream.tag)
        self.emit(end)

    def _open(self, stream: _Stream) -> None:
        """Make ``stream`` its lane's stream, ending whatever the lane had open before."""
        previous = self._lanes.get(stream.lane)
        if previous is not None:
            self._end(previous)
        self._lanes[stream.lane] = stream
        self.fast_passes = _NO_DELTA
        self._by_id[stream.kind][stream.entity_id] = stream

    def _continued(
        self, kind: _Kind, entity_id: str | UnsetType, tag: str | UnsetType, chunk_type: str
    ) -> _Stream | None:
        """The open stream a chunk of ``kind`` continues, or None when the chunk must open one.

        Raises :class:`ChunkError` for a tag contradicting the lane its id is open in, and for an
        ambiguous id-less untagged chunk.
        """
        if entity_id is not UNSET:
            held = self._by_id[kind].get(entity_id)
            if held is None:
                return None  # an id nobody holds opens a new stream, in the lane its tag names
            if tag is not UNSET and tag != held.lane:
                raise ChunkError(
                    f"Cannot continue {_ENTITY[kind]} {entity_id!r}: chunk subagentRunId "
                    f"{tag!r} does not match the open stream's subagent {_lane_name(held.lane)}.",
                    path="$.subagentRunId",
                )
            return held
        if tag is not UNSET:
            stream = self._lanes.get(tag)
        else:
            stream = self._lanes.get(None)
            if stream is None or stream.kind != kind:
                # Untagged and the parent lane has no stream of this kind: the only open
                # stream of this kind anywhere, if there is exactly one.
                open_streams = self._by_id[kind]
                if len(open_streams) > 1:
                    lanes = ", ".join(_lane_name(s.lane) for s in open_streams.values())
                    raise ChunkError(
                        f"Ambiguous {chunk_type}: it carries neither a {_ID_FIELD[kind]} nor a "
                        f"subagentRunId, but {len(open_streams)} lanes have an open "
                        f"{_ENTITY[kind]} (subagents {lanes}). Attribute the chunk to the "
                        f"subagent it belongs to."
                    )
                return next(iter(open_streams.values())) if open_streams else None
        return stream if stream is not None and stream.kind == kind else None

    def _find(
        self, kind: _Kind, entity_id: str | UnsetType, tag: str | UnsetType, chunk_type: str
    ) -> _Stream | None:
        """The open stream a chunk continues (see :meth:`_continued`), the common case first:
        a chunk naming its open stream, untagged or tagged alike."""
        stream = None if entity_id is UNSET else self._by_id[kind].get(entity_id)
        if stream is None or (tag is not UNSET and tag != stream.lane):
            stream = self._continued(kind, entity_id, tag, chunk_type)
        return stream

    def _expand(self, stream: _Stream, start: Event | None, chunk: _Chunk) -> None:
        """A chunk's events: ``start`` when the chunk opened ``stream``, then its content.

        A chunk that opens a stream with neither a delta nor a raw event gives only the start;
        a continuing one gives content when it has a delta, a raw event or metadata. The
        content event's tag is the stream's: the chunk's own, else the opener's, which name
        the same lane (a contradicting tag was rejected before).
        """
        if start is not None:
            self._open(stream)
            self.emit(start)
            if chunk.delta is UNSET and chunk.raw_event is UNSET:
                return
        if chunk.delta is UNSET and chunk.raw_event is UNSET and chunk.metadata is UNSET:
            return
        delta = "" if chunk.delta is UNSET else chunk.delta
        kind = stream.kind
        content: Event
        if kind == "tool":
            content = ToolCallArgsEvent(
                tool_call_id=stream.entity_id,
                delta=delta,
                subagent_run_id=stream.tag,
                metadata=chunk.metadata,
                raw_event=chunk.raw_event,
            )
        else:
            cls = TextMessageContentEvent if kind == "text" else ReasoningMessageContentEvent
            content = cls(
                message_id=stream.entity_id,
                delta=delta,
                subagent_run_id=stream.tag,
                metadata=chunk.metadata,
                raw_event=chunk.raw_event,
            )
        self.emit(content)

    # -- the three chunk kinds -----------------------------------------------------------------

    def _text(self, chunk: TextMessageChunkEvent) -> None:
        tag = chunk.subagent_run_id
        stream = self._find("text", chunk.message_id, tag, "TEXT_MESSAGE_CHUNK")
        start = None
        if stream is not None:
            if chunk.role is not UNSET and chunk.role != stream.role:
                _disagree(stream, "role", chunk.role, stream.role)
            if chunk.name is not UNSET and chunk.name != stream.name:
                _disagree(stream, "name", chunk.name, stream.name)
        else:
            if chunk.message_id is UNSET:
                raise ChunkError(
                    "First TEXT_MESSAGE_CHUNK must have a messageId", path="$.messageId"
                )
            role = "assistant" if chunk.role is UNSET else chunk.role
            stream = _Stream("text", chunk.message_id, tag, role=role, name=chunk.name)
            start = TextMessageStartEvent(
                message_id=chunk.message_id,
                role=role,
                name=chunk.name,
                subagent_run_id=tag,
                metadata=chunk.metadata,
            )
        self._expand(stream, start, chunk)

    def _tool(self, chunk: ToolCallChunkEvent) -> None:
        tag = chunk.subagent_run_id
        stream = self._find("tool", chunk.tool_call_id, tag, "TOOL_CALL_CHUNK")
        start = None
        if stream is not None:
            if chunk.tool_call_name is not UNSET and chunk.tool_call_name != stream.name:
                _disagree(stream, "toolCallName", chunk.tool_call_name, stream.name)
            parent = chunk.parent_message_id
            if parent is not UNSET and parent != stream.parent_message_id:
                _disagree(stream, "parentMessageId", parent, stream.parent_message_id)
        else:
            if chunk.tool_call_id is UNSET:
                raise ChunkError(
                    "First TOOL_CALL_CHUNK must have a toolCallId", path="$.toolCallId"
                )
            if chunk.tool_call_name is UNSET:
                raise ChunkError(
                    f"First TOOL_CALL_CHUNK must have a toolCallName "
                    f"(tool call {chunk.tool_call_id!r})",
                    path="$.toolCallName",
                )
            stream = _Stream(
                "tool",
                chunk.tool_call_id,
                tag,
                name=chunk.tool_call_name,
                parent_message_id=chunk.parent_message_id,
            )
            start = ToolCallStartEvent(
                tool_call_id=chunk.tool_call_id,
                tool_call_name=chunk.tool_call_name,
                parent_message_id=chunk.parent_message_id,
                subagent_run_id=tag,
                metadata=chunk.metadata,
            )
        self._expand(stream, start, chunk)

    def _reasoning(self, chunk: ReasoningMessageChunkEvent) -> None:
        tag = chunk.subagent_run_id
        stream = self._find("reasoning", chunk.message_id, tag, "REASONING_MESSAGE_CHUNK")
        start = None
        if stream is None:
            if chunk.message_id is UNSET:
                raise ChunkError(
                    "First REASONING_MESSAGE_CHUNK must have a messageId", path="$.messageId"
                )
            stream = _Stream("reasoning", chunk.message_id, tag)
            start = ReasoningMessageStartEvent(
                message_id=chunk.message_id,
                role="reasoning",
                subagent_run_id=tag,
                metadata=chunk.metadata,
            )
        self._expand(stream, start, chunk)


ExpandChunks.fast_feed = ExpandChunks.feed
_EVERY_DELTA: Final[Mapping[type, Container[str] | None]] = dict.fromkeys(CONTENT_DELTAS)
_NO_DELTA: Final[Mapping[type, Container[str] | None]] = {}


def _disagree(stream: _Stream, field: str, incoming: str, established: str | UnsetType) -> NoReturn:
    """A continuation may repeat a field its opener established, but only with the same value."""
    was = "(absent)" if established is UNSET else repr(established)
    raise ChunkError(
        f"Cannot continue {_ENTITY[stream.kind]} {stream.entity_id!r}: chunk {field} "
        f"{incoming!r} does not match the open stream's {field} {was}.",
        path=f"$.{field}",
    )
