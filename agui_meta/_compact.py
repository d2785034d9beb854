"""Event compaction: the official client's ``compactEvents`` (``@ag-ui/client`` 1.0.0).

A stored history of events is made shorter for storage or replay while every item it builds
keeps the same content and the same merged metadata. The rules, as the reference applies them
(``../shared/reference/agui-rules-0.0.58.md`` §7 and the 1.0 changes in
``agui-1.0-release.md``; the differential tests run the reference itself):

- **text messages** are grouped by ``messageId`` and **tool calls** by ``toolCallId``. A group
  opens at the first START, CONTENT/ARGS or END of its id and is written out at its END: the
  START (if any), one CONTENT/ARGS whose delta is every delta joined (empty ones included), the
  END as received, then the events it held back (below). The joined event carries only the id,
  the delta and the merged metadata of the deltas (no ``timestamp``, ``rawEvent`` or
  ``subagentRunId``), and no ``metadata`` when none carried any;
- a START repeated **before** any delta replaces the earlier one, with both metadata merged
  (the later key winning); repeated **after** a delta, its fields replace the earlier START's
  but the START keeps the earlier metadata, and the repeat's metadata is merged into the
  joined delta's, in arrival order;
- every other event except state and run events (tool results, snapshots, steps, activity,
  reasoning — never compacted —, chunks, RAW, CUSTOM, subagents) is **held back** by the first
  open text message that has a START (in order of opening), else by the first such tool call,
  and written after that group; with none open it is written at once;
- ``RUN_STARTED``, ``RUN_FINISHED`` and ``RUN_ERROR`` are never held back: each is written at
  once, after the state window below is written out;
- the **state** events (``STATE_SNAPSHOT``, ``STATE_DELTA``) between two run events form a
  window written just before the next run event (or at the end). A window with no snapshot is
  written as it came; otherwise it becomes one ``STATE_SNAPSHOT``: the last snapshot of the
  window with the deltas after it applied (a delta that cannot be applied is reported,
  ``patch-failed``, and skipped, as the reference warns and skips), carrying the metadata of
  every state event of the window merged in order;
- at the end, the groups still open are written in order of opening (text messages first,
  then tool calls: START and joined delta, no END, then what they held back), then the state.

Events are passed through as the same objects where the reference passes them by reference.
:func:`~agui_meta.compact_events` runs the rules over a whole history; :class:`Compact` is the same as a
stage (it writes each group as soon as it is complete, the rest when the stream ends).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar, Union

import msgspec
from msgspec import UNSET, UnsetType

from ._events import (
    Event,
    Metadata,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    protocol_class,
)
from ._metadata import copy_json, merge_wire
from ._patch import PatchError, apply_patch
from ._stage import Transducer

__all__ = ["Compact"]

S = TypeVar("S", TextMessageStartEvent, ToolCallStartEvent)
_StateEvent = Union[StateSnapshotEvent, StateDeltaEvent]
_RUN_EVENTS = (RunStartedEvent, RunFinishedEvent, RunErrorEvent)


class _Group(Generic[S]):
    """One open text message or tool call: its START, deltas, END and held-back events."""

    __slots__ = ("deltas", "held", "metadata", "start")

    def __init__(self) -> None:
        self.start: S | None = None
        self.deltas: list[str] = []
        # The merged metadata of the deltas (and of STARTs repeated after a delta).
        self.metadata: Metadata | UnsetType = UNSET
        self.held: list[Event] = []

    def restart(self, event: S) -> None:
        previous = self.start
        if not self.deltas:
            # Before any delta: the new START, with the earlier START's metadata under its own.
            if previous is None:
                self.start = event
            else:
                merged = merge_wire(previous.metadata, event.metadata)
                self.start = (
                    event
                    if isinstance(merged, UnsetType)
                    else msgspec.structs.replace(event, metadata=merged)
                )
            return
        # After a delta: the new START's fields with the earlier START's metadata (or none);
        # the new metadata goes with the deltas', in arrival order.
        kept = UNSET if previous is None else previous.metadata
        self.start = msgspec.structs.replace(event, metadata=kept)
        self.metadata = merge_wire(self.metadata, event.metadata)

    def add(self, delta: str, metadata: Metadata | UnsetType) -> None:
        self.deltas.append(delta)
        self.metadata = merge_wire(self.metadata, metadata)


class Compact(Transducer[Event, Event]):
    """A stage that compacts the events of a stream as ``compactEvents`` does (see the module).

    Groups are written out as they complete, so what is emitted is what the reference returns,
    in the same order; what is still open is written by :meth:`close`.

    >>> from agui_meta import run_sync
    >>> from agui_meta.events import TextMessageContentEvent as Content
    >>> out = run_sync([Compact()], [Content(message_id="m", delta="Hel", metadata={"a": 1}),
    ...                              Content(message_id="m", delta="lo", metadata={"b": 2})])
    >>> out
    [TextMessageContentEvent(timestamp=UNSET, raw_event=UNSET, metadata={'a': 1, 'b': 2}, subagent_run_id=UNSET, message_id='m', delta='Hello')]
    """

    takes_events = True

    def __init__(self) -> None:
        self._texts: dict[str, _Group[TextMessageStartEvent]] = {}
        self._tools: dict[str, _Group[ToolCallStartEvent]] = {}
        self._state: list[_StateEvent] = []
        self._state_index: list[int] = []  # the source index of each event in the window

    def feed(self, item: Event) -> None:
        cls = protocol_class(type(item))
        if cls is TextMessageContentEvent:
            assert isinstance(item, TextMessageContentEvent)
            self._text(item.message_id).add(item.delta, item.metadata)
        elif cls is ToolCallArgsEvent:
            assert isinstance(item, ToolCallArgsEvent)
            self._tool(item.tool_call_id).add(item.delta, item.metadata)
        elif cls is TextMessageStartEvent:
            assert isinstance(item, TextMessageStartEvent)
            self._text(item.message_id).restart(item)
        elif cls is ToolCallStartEvent:
            assert isinstance(item, ToolCallStartEvent)
            self._tool(item.tool_call_id).restart(item)
        elif cls is TextMessageEndEvent:
            assert isinstance(item, TextMessageEndEvent)
            group = self._texts.pop(item.message_id, None) or _Group()
            self._write(group, item, partial(TextMessageContentEvent, message_id=item.message_id))
        elif cls is ToolCallEndEvent:
            assert isinstance(item, ToolCallEndEvent)
            tool = self._tools.pop(item.tool_call_id, None) or _Group()
            self._write(tool, item, partial(ToolCallArgsEvent, tool_call_id=item.tool_call_id))
        elif isinstance(item, _RUN_EVENTS):
            self._write_state()
            self.emit(item)
        elif isinstance(item, (StateSnapshotEvent, StateDeltaEvent)):
            self._state.append(item)
            self._state_index.append(self.ctx.index)
        else:
            holder = self._holder()
            if holder is None:
                self.emit(item)
            else:
                holder.append(item)

    def close(self) -> None:
        texts, self._texts = self._texts, {}
        for message_id, group in texts.items():
            self._write(group, None, partial(TextMessageContentEvent, message_id=message_id))
        tools, self._tools = self._tools, {}
        for call_id, tool in tools.items():
            self._write(tool, None, partial(ToolCallArgsEvent, tool_call_id=call_id))
        self._write_state()

    # -- groups ----------------------------------------------------------------------------

    def _text(self, message_id: str) -> _Group[TextMessageStartEvent]:
        group = self._texts.get(message_id)
        if group is None:
            group = self._texts[message_id] = _Group()
        return group

    def _tool(self, call_id: str) -> _Group[ToolCallStartEvent]:
        group = self._tools.get(call_id)
        if group is None:
            group = self._tools[call_id] = _Group()
        return group

    def _holder(self) -> list[Event] | None:
        """Where an interleaved event waits: the first open text with a START, else tool."""
        for text in self._texts.values():
            if text.start is not None:
                return text.held
        for tool in self._tools.values():
            if tool.start is not None:
                return tool.held
        return None

    def _write(
        self,
        group: _Group[Any],
        end: TextMessageEndEvent | ToolCallEndEvent | None,
        joined: Callable[..., Event],
    ) -> None:
        """Emit a group: its START, its deltas joined into one ``joined(delta=, metadata=)``
        event, its END, then what it held back."""
        emit = self.emit
        if group.start is not None:
            emit(group.start)
        if group.deltas:
            emit(joined(delta="".join(group.deltas), metadata=group.metadata))
        if end is not None:
            emit(end)
        for held in group.held:
            emit(held)

    # -- state -----------------------------------------------------------------------------

    def _write_state(self) -> None:
        window, self._state = self._state, []
        indexes, self._state_index = self._state_index, []
        if not window:
            return
        last = -1
        for i in range(len(window) - 1, -1, -1):
            if type(window[i]) is StateSnapshotEvent:
                last = i
                break
        if last < 0:
            for event in window:
                self.emit(event)
            return
        snapshot = window[last]
        assert isinstance(snapshot, StateSnapshotEvent)
        state: Any = copy_json(snapshot.snapshot)
        for position in range(last + 1, len(window)):
            delta = window[position]
            assert isinstance(delta, StateDeltaEvent)
            try:
                state = apply_patch(state, delta.delta)
            except PatchError as exc:
                index = indexes[position]
                self.ctx.report(
                    "patch-failed",
                    f"Failed to apply state patch while compacting (the patch is skipped): {exc}",
                    path=f"$.delta[{exc.index}]",
                    event_type="STATE_DELTA",
                    index=index if index >= 0 else None,
                )
        metadata: Metadata | UnsetType = UNSET
        for event in window:
            metadata = merge_wire(metadata, event.metadata)
        self.emit(StateSnapshotEvent(snapshot=state, metadata=metadata))
