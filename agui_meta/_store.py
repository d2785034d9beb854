"""The keyed item store: messages in order, tool calls, activity and state.

Items are the store's own mutable objects — :class:`MessageItem` (any role, activity included)
and :class:`ToolCallItem` — built from events, from snapshots and from the initial history.
:meth:`MessageItem.to_wire` gives a frozen copy in AG-UI wire JSON; :meth:`Store.messages_wire`
gives the whole conversation the way the reference client holds it.

Data structures of :class:`Store`, chosen so that no event costs more as the history grows:

- message order is a doubly linked list of nodes: O(1) append, O(1) insertion after a given
  node, O(1) removal (eviction);
- ``id -> the message at the first position with that id`` and ``tool call id -> the first
  tool call with that id`` are dicts (tool calls have their own key space: a tool call id may
  equal a message id), and :meth:`Store.message` / :meth:`Store.tool_call` are their ``get``.
  "First" is in list order, as the reference's ``Array.find``; ids that occur more than once
  are remembered so that the rare operations that could change which one is first (an
  insertion in the middle, a removal) re-derive it, at O(n), only for those ids;
- a TOOL_CALL_RESULT goes right after its owner and the tool messages already behind it; each
  owner node caches the last node of that run, so placing a result is O(1) amortised however
  many results the owner already has;
- text and argument deltas are appended to a list and joined when read (the join is cached);
- MESSAGES_SNAPSHOT is O(history + snapshot) by nature: the list and indices are rebuilt.

The reference keeps message objects in a plain array and sometimes holds one object at two
positions (a snapshot message replacing two local messages with the same id); nodes point to
items, so the same can happen here, with the same effect on later updates.

:class:`ItemStore` is the small protocol the accumulator uses; :class:`Store` is the in-memory
implementation and the embedded default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from . import _speedups
from ._events import Interrupt, Message
from ._exceptions import DecodeError, UsageError
from ._js import js_string
from ._metadata import copy_json
from ._partial_json import parse_partial_json
from ._tally import ToolCallTally

__all__ = ["ItemStore", "MessageItem", "Store", "ToolCallItem"]


_NO_NULLS: frozenset[str] = frozenset()
_decode_json = msgspec.json.Decoder().decode


#: With the C core, a :class:`MessageItem` holding no tool calls is not tracked by the cyclic
#: collector: nothing it holds refers back to it (its fields, content and metadata are JSON
#: values it owns), so it cannot be part of a reference cycle, and a store of many messages
#: costs each full collection no walk of them. A message holding calls is tracked (each call's
#: ``owner`` is the message): the ``tool_calls`` setter tracks it again. The Python path leaves
#: every message tracked; the difference is the collector's work, never a result. (A member
#: made to refer back to its own message by hand would make a cycle nobody collects.)
_UNTRACK: Callable[[Any], None] | None = (
    None if _speedups.NATIVE is None else _speedups.NATIVE.untrack_message
)
_TRACK: Callable[[Any], None] | None = (
    None if _speedups.NATIVE is None else _speedups.NATIVE.track_message
)


def _nulls_of(fields: Mapping[str, Any], names: tuple[str, ...]) -> frozenset[str]:
    """Which of ``names`` a history's wire object holds as ``null`` (absent ones read None too)."""
    found = [name for name in names if name in fields and fields[name] is None]
    return frozenset(found) if found else _NO_NULLS


class ToolCallItem:
    """A tool call of an assistant message, as the store holds it.

    Absent members are ``None`` (``id``, ``name``, ``arguments``, ``metadata``,
    ``encrypted_value``); :meth:`to_wire` still tells an absent member from a ``null`` one a
    history held. ``owner`` is the message whose ``toolCalls`` holds it. ``metadata`` is
    ``None`` or the merged metadata: a :class:`~agui_meta.MergedMetadata` once an event merged into it (a new
    version after every merge, so a reference taken earlier keeps the value it had), else the
    history's dict. ``arguments`` joins the streamed deltas on demand. The item keeps changing as
    later events arrive; :meth:`to_wire` gives a frozen copy.
    """

    __slots__ = (
        "_arg_parts",
        "_args",
        "_nulls",
        "_open",
        "evicted",
        "fields",
        "function_fields",
        "id",
        "metadata",
        "name",
        "owner",
    )

    def __init__(
        self,
        id: str,
        name: str,
        owner: MessageItem,
        *,
        arguments: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.id: Any = id
        self.name: Any = name
        self.owner = owner
        self.metadata: Any = metadata
        self._nulls = _NO_NULLS
        #: Other wire members of the call (``type``, ``encryptedValue``, unknown keys).
        self.fields: dict[str, Any] = {"type": "function"}
        #: Wire members of ``function`` other than name and arguments (``None``: ``function``
        #: is not an object in the history this call came from).
        self.function_fields: dict[str, Any] | None = {}
        self._args: Any = arguments
        # The streamed deltas not yet joined into _args: None, or a list of at least one.
        self._arg_parts: list[str] | None = None
        self._open = False
        #: Whether the store dropped this call (see ``Store(evict_completed=True)``).
        self.evicted = False

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], owner: MessageItem) -> ToolCallItem:
        """Build a call from wire JSON (not copied: pass data you own)."""
        call = cls.__new__(cls)
        call.owner = owner
        call._arg_parts = None
        call._open = False
        call.evicted = False
        fields = dict(data)
        call._nulls = _nulls_of(fields, ("id", "metadata"))
        call.id = fields.pop("id", None)
        call.metadata = fields.pop("metadata", None)
        function = fields.pop("function", UNSET)
        if isinstance(function, dict):
            function = dict(function)
            if function.get("name", 0) is None:
                call._nulls = call._nulls | {"name"}
            call.name = function.pop("name", None)
            call._args = function.pop("arguments", UNSET)
            call.function_fields = function
        else:
            call.name = None
            call._args = UNSET
            call.function_fields = None
            if function is not UNSET:
                fields["function"] = function
        call.fields = fields
        return call

    @property
    def arguments(self) -> Any:
        """The arguments streamed so far (a JSON string, usually incomplete until the end;
        ``None`` when a history's call has none)."""
        parts = self._arg_parts
        if parts:
            self._args = self._args + "".join(parts)
            self._arg_parts = None
        args = self._args
        return None if args is UNSET else args

    @property
    def streaming(self) -> bool:
        """Whether the call's arguments are still streaming (started, not ended)."""
        return self._open

    def partial_arguments(self) -> Any:
        """The arguments parsed so far: what has streamed, completed into JSON as the reference
        client completes its ``partialToolCallArgs`` (an open string closed, an unfinished
        member dropped, open objects and arrays closed), then decoded; ``None`` when nothing
        parses yet. Never raises; computed on each call (O(length)), never per event.

        >>> call = ToolCallItem("c1", "weather", None)  # type: ignore[arg-type]
        >>> call.append_arguments('{"city": "Lis')
        >>> call.partial_arguments()
        {'city': 'Lis'}
        """
        arguments = self.arguments
        return parse_partial_json(arguments) if isinstance(arguments, str) else None

    def arguments_json(self) -> Any:
        """The arguments decoded from their JSON, once the call has ended (``None`` when the
        call has no arguments member; ``{}`` for empty arguments, as the reference reads them).

        :raises UsageError: the arguments are still streaming (see :meth:`partial_arguments`).
        :raises DecodeError: the arguments are not JSON.
        """
        if self._open:
            raise UsageError(
                f"the arguments of tool call {self.id!r} are still streaming: "
                "partial_arguments() gives what has arrived"
            )
        arguments = self.arguments
        if arguments is None or not isinstance(arguments, str):
            return arguments
        if not arguments:
            return {}
        try:
            return _decode_json(arguments)
        except msgspec.DecodeError as exc:
            raise DecodeError(
                f"the arguments of tool call {self.id!r} are not JSON: {exc}"
            ) from None
        except RecursionError:
            raise DecodeError(
                f"the arguments of tool call {self.id!r} nest deeper than the JSON decoder goes "
                "(about a thousand levels)"
            ) from None

    def append_arguments(self, delta: str) -> None:
        """Append an arguments delta (O(1); joined when :attr:`arguments` is read)."""
        parts = self._arg_parts
        if not parts:
            if type(self._args) is not str:
                self._args = js_string(self._args)
            self._arg_parts = [delta]
        else:
            parts.append(delta)

    @property
    def encrypted_value(self) -> str | None:
        return self.fields.get("encryptedValue")

    def to_wire(self) -> dict[str, Any]:
        """A frozen copy in wire JSON (camelCase, absent members omitted)."""
        out: dict[str, Any] = {}
        nulls = self._nulls
        if self.id is not None or "id" in nulls:
            out["id"] = self.id
        out.update(copy_json(self.fields))
        if self.function_fields is not None:
            function = {}
            if self.name is not None or "name" in nulls:
                function["name"] = self.name
            self.arguments  # noqa: B018  (joins the streamed deltas)
            if self._args is not UNSET:
                function["arguments"] = self._args
            function.update(copy_json(self.function_fields))
            out["function"] = function
        if self.metadata is not None or "metadata" in nulls:
            out["metadata"] = copy_json(self.metadata)
        return out

    def _wire_view(self) -> dict[str, Any]:
        """:meth:`to_wire`'s members, in its order, without its copies: the item's own
        containers and merged metadata, for a caller that copies them at once
        (``msgspec.to_builtins`` with ``enc_hook``: see ``_durable``). Kept in step with
        :meth:`to_wire` (``tests/test_durable.py`` compares the two)."""
        nulls = self._nulls
        out: dict[str, Any] = {"id": self.id} if self.id is not None or "id" in nulls else {}
        fields = self.fields
        if fields:
            out.update(fields)
        function_fields = self.function_fields
        if function_fields is not None:
            function: dict[str, Any] = (
                {"name": self.name} if self.name is not None or "name" in nulls else {}
            )
            if self._arg_parts:
                self.arguments  # noqa: B018  (joins the streamed deltas)
            if self._args is not UNSET:
                function["arguments"] = self._args
            if function_fields:
                function.update(function_fields)
            out["function"] = function
        if self.metadata is not None or "metadata" in nulls:
            out["metadata"] = self.metadata
        return out

    def __repr__(self) -> str:
        return f"ToolCallItem(id={self.id!r}, name={self.name!r}, arguments={self.arguments!r})"


class MessageItem:
    """A message of any role (activity included), as the store holds it.

    Absent members are ``None`` (:meth:`to_wire` still tells an absent member from a ``null``
    one a history held). ``id`` and ``role`` are the wire values. ``content`` is the text
    (deltas joined on demand), the content parts, or an activity's object; ``None`` when
    absent (an assistant message made for tool calls has none). ``tool_calls`` is ``None``
    when the message has no ``toolCalls`` member. ``metadata`` is ``None`` or the merged
    metadata (see
    :class:`ToolCallItem`). ``fields`` holds the other wire members under their wire names
    (``name``, ``subagentRunId``, ``encryptedValue``, ``toolCallId``, ``activityType``,
    ``error`` and, for a history the client supplied, any unknown member).

    The item keeps changing as later events arrive; :meth:`to_wire` gives a frozen copy.
    """

    __slots__ = (
        "_content",
        "_nulls",
        "_open_calls",
        "_parts",
        "_refs",
        "_streaming",
        "_tool_calls",
        "evicted",
        "fields",
        "id",
        "metadata",
        "role",
    )

    def __init__(
        self,
        id: str,
        role: str,
        content: Any = UNSET,
        *,
        fields: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._nulls = _NO_NULLS
        self.id: Any = id
        self.role: Any = role
        self._content: Any = content
        # The streamed deltas not yet joined into _content: None, or a list of at least one
        # (a message kept after its end holds one string, not a list the cyclic collector
        # would walk on every pass).
        self._parts: list[str] | None = None
        self.fields: dict[str, Any] = fields if fields is not None else {}
        self.metadata: Any = metadata
        self._tool_calls: list[ToolCallItem] | None = None
        self._refs = 0
        self._streaming = False
        self._open_calls = 0
        #: Whether the store dropped this message (see ``Store(evict_completed=True)``).
        self.evicted = False
        if _UNTRACK is not None and type(self) is MessageItem:
            _UNTRACK(self)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], *, copy: bool = True) -> MessageItem:
        """Build a message from wire JSON; ``copy=False`` takes ownership of ``data``'s values."""
        fields: dict[str, Any] = copy_json(dict(data)) if copy else dict(data)
        item = cls.__new__(cls)
        item._nulls = _nulls_of(fields, ("id", "role", "metadata"))
        item.id = fields.pop("id", None)
        item.role = fields.pop("role", None)
        item._content = fields.pop("content", UNSET)
        item._parts = None
        item.metadata = fields.pop("metadata", None)
        item._tool_calls = None
        calls = fields.pop("toolCalls", UNSET)
        if isinstance(calls, list) and all(isinstance(call, dict) for call in calls):
            item._tool_calls = [ToolCallItem.from_wire(call, item) for call in calls]
        elif calls is not UNSET:
            fields["toolCalls"] = calls
        item.fields = fields
        item._refs = 0
        item._streaming = False
        item._open_calls = 0
        item.evicted = False
        if _UNTRACK is not None and type(item) is MessageItem:  # left tracked with calls
            _UNTRACK(item)
        return item

    @property
    def tool_calls(self) -> list[ToolCallItem] | None:
        """The message's calls (``toolCalls``), or ``None`` when it has no such member."""
        return self._tool_calls

    @tool_calls.setter
    def tool_calls(self, calls: list[ToolCallItem] | None) -> None:
        self._tool_calls = calls
        if calls is not None and _TRACK is not None and type(self) is MessageItem:
            _TRACK(self)  # its calls refer back to it: a cycle is the collector's to find

    @classmethod
    def from_message(cls, message: Message) -> MessageItem:
        """Build a message from a wire-model Struct (its containers are copied)."""
        return cls.from_wire(msgspec.to_builtins(message), copy=False)

    @property
    def content(self) -> Any:
        """The content: text (deltas joined now), content parts, an activity's object, or None."""
        parts = self._parts
        if parts:
            self._content = self._content + "".join(parts)
            self._parts = None
        content = self._content
        return None if content is UNSET else content

    @content.setter
    def content(self, value: Any) -> None:
        self._parts = None
        self._content = value

    def append_content(self, delta: str) -> None:
        """Append a text delta (O(1)). Content that is not a string is replaced, as the reference does."""
        parts = self._parts
        if not parts:
            if type(self._content) is not str:
                self._content = ""
            self._parts = [delta]
        else:
            parts.append(delta)

    @property
    def name(self) -> str | None:
        return self.fields.get("name")

    @property
    def subagent_run_id(self) -> str | None:
        return self.fields.get("subagentRunId")

    @property
    def encrypted_value(self) -> str | None:
        return self.fields.get("encryptedValue")

    @property
    def activity_type(self) -> str | None:
        return self.fields.get("activityType")

    @property
    def tool_call_id(self) -> str | None:
        return self.fields.get("toolCallId")

    def to_wire(self) -> dict[str, Any]:
        """A frozen copy in wire JSON (camelCase, absent members omitted)."""
        out: dict[str, Any] = {}
        nulls = self._nulls
        if self.id is not None or "id" in nulls:
            out["id"] = self.id
        if self.role is not None or "role" in nulls:
            out["role"] = self.role
        self.content  # noqa: B018  (joins the streamed deltas)
        if self._content is not UNSET:
            out["content"] = copy_json(self._content)
        out.update(copy_json(self.fields))
        if self.tool_calls is not None:
            out["toolCalls"] = [call.to_wire() for call in self.tool_calls]
        if self.metadata is not None or "metadata" in nulls:
            out["metadata"] = copy_json(self.metadata)
        return out

    def _wire_view(self) -> dict[str, Any]:
        """:meth:`to_wire`'s members, in its order, without its copies (see
        :meth:`ToolCallItem._wire_view`)."""
        nulls = self._nulls
        out: dict[str, Any] = {"id": self.id} if self.id is not None or "id" in nulls else {}
        if self.role is not None or "role" in nulls:
            out["role"] = self.role
        if self._parts:
            self.content  # noqa: B018  (joins the streamed deltas)
        if self._content is not UNSET:
            out["content"] = self._content
        fields = self.fields
        if fields:
            out.update(fields)
        calls = self.tool_calls
        if calls is not None:
            out["toolCalls"] = [call._wire_view() for call in calls]
        if self.metadata is not None or "metadata" in nulls:
            out["metadata"] = self.metadata
        return out

    def copy(self) -> MessageItem:
        """An independent copy (used where the reference puts a new object in one position)."""
        clone = MessageItem.from_wire(self.to_wire(), copy=False)
        clone._streaming = self._streaming
        return clone

    def __repr__(self) -> str:
        return f"MessageItem(id={self.id!r}, role={self.role!r}, content={self.content!r})"


def _to_wire(item: MessageItem | ToolCallItem) -> dict[str, Any]:
    return item.to_wire()


#: The C core's ``wire_item(item, fallback)`` when it is in use: ``item.to_wire()``, the
#: common items copied in C (a thread's snapshot copies every message), the others given to
#: ``fallback``. None without the core: :meth:`MessageItem.to_wire` is the specification.
_WIRE_ITEM: Callable[[Any, Callable[[Any], Any]], dict[str, Any]] | None = (
    None if _speedups.NATIVE is None else _speedups.NATIVE.wire_item
)


def wire_item(item: MessageItem | ToolCallItem) -> dict[str, Any]:
    """``item.to_wire()``: the common items copied in C when the core is in use. The one
    choice between the two, for every copy the package makes (``messages_wire()``, a durable
    run's outputs)."""
    wire = _WIRE_ITEM
    return item.to_wire() if wire is None else wire(item, _to_wire)


class _Node(msgspec.Struct, gc=False, eq=False):
    """A position in the message order.

    The order is a singly linked list: the store holds its head and tail, a node the next one,
    its item and ``tail``, and the store finds an item's first node by the item's ``id()``.
    Every link points forward, so a store holds no reference cycle and a store nobody refers
    to is freed by reference counting, not left for the cyclic garbage collector (a tool call
    and the message holding it still point at each other); and no position costs a weak
    reference. Nothing a node reaches refers back to a node, so no node can be part of a
    cycle: nodes are not tracked by the collector (``gc=False``), one object fewer for each
    of its passes to walk per message kept. A node taken out of the order is marked dead
    (``alive`` false); the head drops at once, one further on stays linked, skipped by every
    walk, until there are more of them than live ones (then one pass drops them all); a dead
    node holds no item.
    """

    item: MessageItem
    next: _Node | None = None
    alive: bool = True
    # The last node of the run of tool messages behind this node, as of `tail_epoch`.
    tail: _Node | None = None
    tail_epoch: int = -1

    def __repr__(self) -> str:  # not the default's: it would walk the rest of the list
        return f"_Node({getattr(self, 'item', None)!r}, alive={self.alive})"


class ItemStore(Protocol):
    """What :class:`agui_meta.Accumulate` needs from a store.

    Lookups return the *first* item in message order with the id, as the reference's
    ``Array.find`` does. Implementations must keep per-event operations independent of the
    history length to preserve the accumulator's guarantees, and keep the placement fields of
    the items they hold up to date (``MessageItem._refs``: how many positions hold the item;
    ``evicted``), which the accumulator reads.
    """

    #: The shared state (any JSON value).
    state: Any
    #: Whether completed items are dropped after their update (bounded memory).
    evict_completed: bool
    #: The interrupts the last RUN_FINISHED left open (``[]`` when none).
    pending_interrupts: list[Interrupt]

    def message(self, message_id: str) -> MessageItem | None:
        """The first message with this id."""

    def tool_call(self, tool_call_id: str) -> ToolCallItem | None:
        """The first tool call with this id (in message order)."""

    def assistant_owner(self, tool_call_id: str) -> MessageItem | None:
        """The first *assistant* message holding a tool call with this id."""

    def append(self, item: MessageItem) -> None:
        """Add a message at the end."""

    def insert_result(self, item: MessageItem, owner: MessageItem | None) -> None:
        """Add a tool message right after ``owner`` and the tool messages behind it (or append)."""

    def add_tool_call(self, owner: MessageItem, call: ToolCallItem) -> None:
        """Append ``call`` to ``owner``'s tool calls."""

    def replace(self, old: MessageItem, new: MessageItem) -> None:
        """Put ``new`` in ``old``'s first position."""

    def reset(self, items: Iterable[MessageItem]) -> None:
        """Replace the whole message order (a snapshot merge); an item may appear twice."""

    def evict(self, item: MessageItem) -> None:
        """Drop a message (and its tool calls) from the order and the indices."""

    def evict_idle(self) -> None:
        """Drop every message with no open stream and no open tool call."""

    def messages(self) -> Iterator[MessageItem]:
        """The messages in order: an iterator of the live :class:`~agui_meta.MessageItem`
        objects (later events keep changing them); :meth:`messages_wire` gives wire JSON."""

    def begin_run(self) -> None:
        """A run starts: the tool-call tally restarts."""

    def tool_call_started(self, tool_call_id: str) -> str | None:
        """Record a TOOL_CALL_START of the current run.

        Returns ``None``, or a message that the accumulator reports (code
        ``"tool-call-tally-full"``, a warning) when a bounded tally could not track the call.
        """

    def tool_call_answered(self, tool_call_id: str) -> str | None:
        """Record a TOOL_CALL_RESULT of the current run.

        Returns ``None``, or a message that the accumulator reports (code
        ``"tool-call-tally-forgot"``, severity ``"info"``) when a bounded tally had to forget
        an answered call.
        """

    def finish_run(self, interrupts: list[Interrupt], named_pending: list[str] | UnsetType) -> None:
        """A RUN_FINISHED: record its interrupts and (success only) its named pending calls."""


class Store:
    """The in-memory item store (the default of :class:`agui_meta.Accumulate`).

    :param messages: the client's history before the stream: wire JSON dicts (copied as they
        are, unknown members included, as the reference clones its history) or wire-model
        :class:`~agui_meta.events.Message` Structs.
    :param state: the state before the stream (copied); ``{}`` by default.
    :param evict_completed: drop each item once it is complete and its update has been
        emitted, so that an endless stream runs in bounded memory. What is kept: open items
        (a message between its START and END, an assistant message with a tool call still
        open) and, until the run ends (RUN_FINISHED or RUN_ERROR), activity messages and
        messages from snapshots or a run's input. What is lost, because the reference would
        have found the dropped item: a later START with an evicted id creates a new message; a
        TOOL_CALL_RESULT whose owner was evicted is appended; an ACTIVITY_DELTA after the run
        that made the activity is ignored; REASONING_ENCRYPTED_VALUE for an evicted entity does
        nothing; :meth:`messages_wire` holds only what is retained.
    :param max_tool_call_ids: the bound of the run's tool-call tally (see
        :attr:`pending_tool_call_ids`): at most this many pending ids and this many answered
        ids are remembered per run, so that a run with any number of tool calls costs bounded
        memory. Past it, a newly started call is not tracked (pending lists the first ones
        only: a ``"tool-call-tally-full"`` warning, once per run), and the oldest answered id
        is forgotten (a later start of it would count as pending: a
        ``"tool-call-tally-forgot"`` info report, once per run). ``None``: no bound.
    """

    def __init__(
        self,
        messages: Iterable[Mapping[str, Any] | Message] = (),
        state: Any = UNSET,
        *,
        evict_completed: bool = False,
        max_tool_call_ids: int | None = 10_000,
    ) -> None:
        self.state: Any = {} if state is UNSET else copy_json(state)
        self.evict_completed = evict_completed
        self.pending_interrupts: list[Interrupt] = []
        self._head: _Node | None = None
        self._tail: _Node | None = None
        self._count = 0  # live positions
        self._dead = 0  # dead nodes still linked (see _Node)
        # id(item) -> the node of the item's first position (the node holds the item, so the
        # id stays the item's while the entry is there).
        self._nodes: dict[int, _Node] = {}
        # id -> the item at the first position with that id; tool call id -> first call.
        self._by_id: dict[str, MessageItem] = {}
        self._calls: dict[str, ToolCallItem] = {}
        # The lookups of the hot path are the dicts' own (C) get methods. The dicts are never
        # rebound, only cleared and refilled.
        self.message: Callable[[str], MessageItem | None] = self._by_id.get
        self.tool_call: Callable[[str], ToolCallItem | None] = self._calls.get
        # Ids met more than once: dicts of strings, which the collector does not track (a
        # set it would, however empty).
        self._dup_ids: dict[str, None] = {}
        self._dup_calls: dict[str, None] = {}
        self._epoch = 0
        self._tally = ToolCallTally(max_tool_call_ids)
        self._named_pending: list[str] | None = None
        items = []
        for message in messages:
            if isinstance(message, Mapping):
                items.append(MessageItem.from_wire(message))
            else:
                items.append(MessageItem.from_message(message))
        if items:
            self.reset(items)

    def __del__(self) -> None:
        self._unchain()

    def _unchain(self) -> None:
        """Take every node out, each link cut on the way. The nodes are msgspec Structs, whose
        deallocation does not bound its depth as a Python object's does (the trashcan): a long
        list let go from its head would be freed one nested call per node, and overflow the C
        stack. Cut first, each node is freed on its own."""
        node = getattr(self, "_head", None)  # (absent when __init__ failed before it)
        self._head = self._tail = None
        while node is not None:
            node.alive = False
            node.next, node = None, node.next

    # -- lookups

    def __len__(self) -> int:
        """The number of positions in the message order."""
        return self._count

    def assistant_owner(self, tool_call_id: str) -> MessageItem | None:
        call = self._calls.get(tool_call_id)
        if call is None:
            return None
        if call.owner.role == "assistant":
            return call.owner
        # Rare: the first holder is not an assistant message (a history the client supplied).
        for item in self.messages():
            calls = item.tool_calls
            if item.role == "assistant" and calls and any(c.id == tool_call_id for c in calls):
                return item
        return None

    def messages(self) -> Iterator[MessageItem]:
        """The messages in order: an iterator of the live :class:`~agui_meta.MessageItem`
        objects (later events keep changing them; ``list(store.messages())`` keeps the ones
        there now). :meth:`messages_wire` gives them as wire JSON, ``to_agui_core(store)`` as
        ``ag_ui.core`` messages."""
        node = self._head
        while node is not None:
            if node.alive:
                yield node.item
            node = node.next

    def messages_wire(self) -> list[dict[str, Any]]:
        """The conversation in AG-UI wire JSON: what the reference client would hold."""
        wire = _WIRE_ITEM
        if wire is None:
            return [item.to_wire() for item in self.messages()]
        return [wire(item, _to_wire) for item in self.messages()]

    @property
    def tool_calls(self) -> dict[str, ToolCallItem]:
        """Tool calls by id (the first with each id, in message order). Read only."""
        return dict(self._calls)

    # -- the run tally (pendingToolCallIds)

    @property
    def max_tool_call_ids(self) -> int | None:
        """The bound of the run's tool-call tally (see the constructor)."""
        return self._tally.limit

    def begin_run(self) -> None:
        self._tally.reset()
        self._named_pending = None

    def tool_call_started(self, tool_call_id: str) -> str | None:
        tally = self._tally
        if tally.start(tool_call_id) or tally.refused != 1:
            return None
        return (
            f"TOOL_CALL_START: tool call '{tool_call_id}' is not tracked as pending: "
            f"{tally.limit:,} calls of this run are pending already "
            f"(Store(max_tool_call_ids={tally.limit})); the store's pending_tool_call_ids "
            "lists the first of them only (later ones are counted, not listed)"
        )

    def tool_call_answered(self, tool_call_id: str) -> str | None:
        tally = self._tally
        if tally.answer(tool_call_id) or tally.forgotten != 1:
            return None
        return (
            f"TOOL_CALL_RESULT: tool call '{tool_call_id}' makes more than {tally.limit:,} "
            f"answered calls in this run (Store(max_tool_call_ids={tally.limit})): the oldest "
            "answered ids are forgotten from now on, so a later TOOL_CALL_START of a forgotten "
            "id would count it as pending again"
        )

    def finish_run(self, interrupts: list[Interrupt], named_pending: list[str] | UnsetType) -> None:
        if interrupts or self.pending_interrupts:  # an empty list stays: none made per run
            self.pending_interrupts = interrupts
        self._named_pending = list(named_pending) if named_pending else None

    @property
    def pending_tool_call_ids(self) -> list[str]:
        """The tool calls the current (or last) run leaves for the client to answer.

        As the reference derives ``pendingToolCallIds`` for RUN_FINISHED: the non-empty list a
        success outcome names, if any; otherwise the calls this run started (first start first)
        that got no TOOL_CALL_RESULT. The tally restarts at each RUN_STARTED; it holds at most
        ``max_tool_call_ids`` pending and as many answered ids (see the constructor).
        """
        if self._named_pending is not None:
            return list(self._named_pending)
        return self._tally.pending()

    # -- structure

    def _first(self, item: MessageItem) -> _Node | None:
        """The node of ``item``'s first position, or ``None`` when it has none here."""
        return self._nodes.get(id(item))

    def _link_after(self, node: _Node, after: _Node | None) -> None:
        """Link ``node`` after ``after``, a linked node (``None``: at the end)."""
        if after is None or after is self._tail:
            tail = self._tail
            if tail is None:
                self._head = node
            else:
                tail.next = node
            self._tail = node
        else:
            node.next = after.next
            after.next = node
        self._count += 1

    def _unlink(self, node: _Node) -> None:
        """Take a live node out of the order (see :class:`_Node`)."""
        node.alive = False
        self._count -= 1
        key = id(node.item)
        if self._nodes.get(key) is node:
            del self._nodes[key]
        # Its item let go now, not when the node leaves the list: an item that is garbage at
        # its eviction (a tool call and its message refer to each other) is still young then,
        # and the collector's young passes free it.
        del node.item
        node.tail = None
        if node is self._head:
            head = node.next
            node.next = None
            while head is not None and not head.alive:
                self._dead -= 1
                head.next, head = None, head.next
            self._head = head
            if head is None:
                self._tail = None
        else:
            self._dead += 1
            if self._dead > self._count + 32:
                self._compact()

    def _compact(self) -> None:
        """Drop the dead nodes still linked (O(n), once per as many unlinks)."""
        node, last = self._head, None
        while node is not None:
            following = node.next
            if node.alive:
                if last is None:
                    self._head = node
                else:
                    last.next = node
                last = node
            else:
                node.next = None
            node = following
        if last is None:
            self._head = None
        else:
            last.next = None
        self._tail = last
        self._dead = 0

    def _index_calls(self, item: MessageItem) -> None:
        if item.tool_calls is None:
            return
        calls = self._calls
        for call in item.tool_calls:
            key = call.id
            if isinstance(key, str):
                if key in calls:
                    self._dup_calls[key] = None
                else:
                    calls[key] = call

    def _new_node(self, item: MessageItem) -> _Node:
        node = _Node(item)
        item._refs += 1
        self._nodes.setdefault(id(item), node)
        item.evicted = False
        return node

    def append(self, item: MessageItem) -> None:
        # _new_node and _link_after(node, None), inlined: a message is appended per start.
        node = _Node(item)
        item._refs += 1
        self._nodes.setdefault(id(item), node)
        item.evicted = False
        tail = self._tail
        if tail is None:
            self._head = node
        else:
            tail.next = node
        self._tail = node
        self._count += 1
        key = item.id
        if isinstance(key, str):
            if key in self._by_id:
                self._dup_ids[key] = None
            else:
                self._by_id[key] = item
        if item.tool_calls is not None:
            self._index_calls(item)

    def add_tool_call(self, owner: MessageItem, call: ToolCallItem) -> None:
        if owner.tool_calls is None:
            owner.tool_calls = []
        owner.tool_calls.append(call)
        call.owner = owner
        if id(owner) in self._nodes and isinstance(call.id, str):
            if call.id in self._calls:
                self._dup_calls[call.id] = None
                self._reindex()
            else:
                self._calls[call.id] = call

    def insert_result(self, item: MessageItem, owner: MessageItem | None) -> None:
        anchor = None if owner is None else self._nodes.get(id(owner))
        if anchor is None:
            self.append(item)
            return
        tail = anchor.tail
        if tail is None or not tail.alive or anchor.tail_epoch != self._epoch:
            tail = anchor
        # past the tool messages behind it (and the dead nodes among and after them)
        following = tail.next
        while following is not None and (not following.alive or following.item.role == "tool"):
            tail, following = following, following.next
        node = self._new_node(item)
        self._link_after(node, tail)
        anchor.tail = node
        anchor.tail_epoch = self._epoch
        key = item.id
        if isinstance(key, str):
            first = self._by_id.get(key)
            if first is None:
                self._by_id[key] = item
            else:
                self._dup_ids[key] = None
                # Rare: the id exists; the new node is first if the old one comes after it.
                walk = node.next
                first_node = self._nodes.get(id(first))
                while walk is not None and walk is not first_node:
                    walk = walk.next
                if walk is not None:
                    self._by_id[key] = item
        self._index_calls(item)

    def replace(self, old: MessageItem, new: MessageItem) -> None:
        node = self._nodes.pop(id(old), None)
        if node is None:
            return
        node.item = new
        old._refs -= 1
        new._refs += 1
        self._nodes.setdefault(id(new), node)
        self._epoch += 1  # the role at this position may have changed
        key = old.id
        if isinstance(key, str) and self._by_id.get(key) is old:
            self._by_id[key] = new
        if old._refs > 0 or new._refs > 1 or old.tool_calls or new.tool_calls or key != new.id:
            self._reindex()

    def reset(self, items: Iterable[MessageItem]) -> None:
        for item in self.messages():
            item._refs = 0
        self._unchain()
        self._count = self._dead = 0
        self._nodes.clear()
        order = []
        for item in items:
            item._refs = 0
            order.append(item)
        for item in order:
            self._link_after(self._new_node(item), None)
        self._reindex()

    def _reindex(self) -> None:
        """Rebuild both indices from the order (O(n); snapshots and rare cases only)."""
        self._epoch += 1
        self._by_id.clear()
        self._calls.clear()
        self._dup_ids = {}
        self._dup_calls = {}
        nodes = self._nodes
        nodes.clear()
        node = self._head
        while node is not None:
            if not node.alive:
                node = node.next
                continue
            item = node.item
            key = item.id
            if isinstance(key, str):
                if key in self._by_id:
                    self._dup_ids[key] = None
                else:
                    self._by_id[key] = item
            if id(item) not in nodes:
                nodes[id(item)] = node
                self._index_calls(item)
            node = node.next
        # A shared item's calls were indexed at its first position only, which is what a scan
        # in message order finds first.

    def evict(self, item: MessageItem) -> None:
        node = self._nodes.get(id(item))
        if item.evicted or node is None:
            return
        rare = item._refs > 1
        if rare:
            # every position first, then each taken out (which may drop linked dead nodes)
            doomed = []
            walk = self._head
            while walk is not None:
                if walk.alive and walk.item is item:
                    doomed.append(walk)
                walk = walk.next
            for walk in doomed:
                self._unlink(walk)
        else:
            self._unlink(node)
            key = item.id
            if isinstance(key, str) and self._by_id.get(key) is item:
                if key in self._dup_ids:
                    rare = True
                else:
                    del self._by_id[key]
            if item.tool_calls:
                for call in item.tool_calls:
                    if isinstance(call.id, str) and self._calls.get(call.id) is call:
                        if call.id in self._dup_calls:
                            rare = True
                        else:
                            del self._calls[call.id]
        for call in item.tool_calls or ():
            call.evicted = True
        self._nodes.pop(id(item), None)
        item._refs = 0
        item.evicted = True
        if rare:
            self._reindex()

    def evict_idle(self) -> None:
        """Drop every message with no open stream and no open tool call (end of a run)."""
        idle = [item for item in self.messages() if not item._streaming and not item._open_calls]
        for item in idle:
            self.evict(item)
