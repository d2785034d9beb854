"""The accumulate stage: every event, with the item it built and that item's merged metadata.

``Accumulate(store)`` is a transducer from :class:`~agui_meta.events.Event` to :class:`Update`. For
each event it does what the reference client's ``defaultApplyEvents`` (1.0.0) does to its
messages and state, then emits ``Update(event, item, done, metadata)``:

- ``event`` is the event exactly as received: the same object, its metadata untouched;
- ``item`` is the item the event built, after the event's metadata was merged into it — the
  text or reasoning message, the tool call itself (never its parent message), the tool message
  a TOOL_CALL_RESULT creates, the activity message — or ``None`` for an event that builds
  nothing (run, step, state, snapshot, raw, custom, REASONING_START/END/ENCRYPTED_VALUE and
  subagent events) or whose target is missing or collides (see below). The item is the live
  store item: it keeps changing as later events arrive; call ``item.to_wire()`` for a frozen
  copy;
- ``done`` is true when the event completed the item: TEXT_MESSAGE_END and
  REASONING_MESSAGE_END (the message), TOOL_CALL_END (the call), TOOL_CALL_RESULT (the tool
  message is complete when it arrives), ACTIVITY_SNAPSHOT and ACTIVITY_DELTA (each leaves a
  complete activity, which a later one may supersede). Otherwise false;
- ``metadata`` is the item's merged metadata as of this event, a read-only mapping (``None``
  when there is none): exact however late it is read, at no cost. An item's metadata is a
  :class:`~agui_meta.MergedMetadata`, of which each update holds the version as of its event;
  a merge costs O(1) amortised per key it writes, in time and memory, however many keys the
  item has and however many updates are held.

Metadata is merged by :func:`~agui_meta.merge_metadata` (key by key, last write wins, never
recursively), and values are copied, so a later mutation of the event cannot reach the store.
An event without metadata costs no copy; ``metadata: {}`` creates ``{}`` on an item that had
none, as the reference does.

Where the reference only warns and carries on (a missing target, an id that collides with an
activity message, a renamed tool call, a parent that is not an assistant message, a failing
patch), the stage does the same and reports through the pipeline's ``on_report``. The only
errors are the reference's: a raw ``*_CHUNK`` event raises :class:`~agui_meta.ApplyError`.

Per-event cost does not depend on the history length (see :mod:`agui_meta._store`); merging
metadata adds O(keys the event carries), never O(keys the item has):

- TEXT/REASONING_MESSAGE_*, TOOL_CALL_START/ARGS/END, REASONING_ENCRYPTED_VALUE: O(1) (a dict
  lookup; deltas are appended to a list and joined when read);
- TOOL_CALL_RESULT: O(1) amortised (the run of tool messages behind each owner is cached);
- STATE_DELTA, ACTIVITY_DELTA: the containers on the paths the patch touches
  (:mod:`agui_meta._patch`), where the reference deep-clones the whole document per delta;
- STATE_SNAPSHOT, ACTIVITY_SNAPSHOT, RUN_STARTED input: their own size (values are copied);
- MESSAGES_SNAPSHOT: history + snapshot (the order and indices are rebuilt);
- rare anomalies only: O(history) to re-derive which of two messages with the same id comes
  first, or when an activity snapshot replaces a message that holds tool calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MethodType
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from . import _speedups
from ._events import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    CustomEvent,
    Event,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    protocol_class,
)
from ._exceptions import ApplyError, UsageError
from ._js import js_string
from ._metadata import CLIENT_METADATA_KEY, MergedMetadata, copy_json, merge_metadata
from ._patch import PatchError, apply_patch
from ._stage import Transducer, handler_table
from ._store import ItemStore, MessageItem, Store, ToolCallItem

__all__ = ["Accumulate", "Update", "authoritative_activity_types"]


class Update(msgspec.Struct, frozen=True, gc=False):
    """One event and what it built: ``Update(event, item, done, metadata)``.

    - ``event``: the event as received (the same object);
    - ``item``: ``None`` for an event that builds nothing; otherwise the live store item (a
      :class:`~agui_meta.MessageItem` or :class:`~agui_meta.ToolCallItem`), which later
      events keep changing. A consumer across an ``await`` may see changes of later events of
      the same batch already applied; ``item.to_wire()`` in a stage right after accumulate
      (a transducer, run as each update is emitted) freezes it exactly as of this event;
    - ``done``: the event completed the item;
    - ``metadata``: the item's merged metadata exactly as of this event, a read-only mapping
      (``None`` when the item has none, or when there is no item). It is a version of the
      item's :class:`~agui_meta.MergedMetadata`: it needs no copy, stays true however far the
      consumer lags, and costs O(1) per key the event wrote however large the item's metadata
      grows; ``dict(update.metadata)`` gives a plain dict.
    """

    event: Event
    item: MessageItem | ToolCallItem | None = None
    done: bool = False
    metadata: Mapping[str, Any] | None = None


def _merged(existing: Any, incoming: dict[str, Any]) -> MergedMetadata:
    """``{...existing, ...incoming}`` with incoming's values copied: :func:`merge_metadata`
    into the item's :class:`MergedMetadata` (made on the item's first merge).

    The C core, when in use, does the common case (the same record written, see
    ``_native.c``'s ``merge``); what it leaves (``None``) is done here.
    """
    native = _speedups.NATIVE
    if native is not None:
        done = native.merge(existing, incoming)
        if done is not None:
            return done  # type: ignore[no-any-return]
    base: MergedMetadata
    if type(existing) is MergedMetadata:
        base = existing
    elif isinstance(existing, dict):
        base = MergedMetadata(existing)
    elif isinstance(existing, (list, str)):
        # A history may hold a non-object metadata value: spread it as JavaScript would.
        base = MergedMetadata({str(i): v for i, v in enumerate(existing)})
    else:
        base = MergedMetadata()
    for value in incoming.values():
        if isinstance(value, (dict, list)):  # copied, so the event's containers stay its own
            incoming = {
                k: copy_json(v) if isinstance(v, (dict, list)) else v for k, v in incoming.items()
            }
            break
    return merge_metadata(base, incoming)


def authoritative_activity_types(metadata: Any) -> list[str] | Any | None:
    """The activity types a MESSAGES_SNAPSHOT declares it owns (the reference's rule).

    Returns ``UNSET`` (no declaration: owns activity only when it carries some), ``None``
    (owns every type) or a list of types (owns those; ``[]`` for an invalid declaration).
    """
    if not isinstance(metadata, dict) or CLIENT_METADATA_KEY not in metadata:
        return UNSET
    value = metadata[CLIENT_METADATA_KEY]
    if not isinstance(value, dict):
        return []
    if "authoritativeActivityTypes" not in value:
        return UNSET
    types = value["authoritativeActivityTypes"]
    if types is None:
        return None
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        return types
    return []


class Accumulate(Transducer[Event, Update]):
    """The accumulate stage as a transducer (see :func:`accumulate`). ``store`` is its store."""

    takes_events = True

    def __init__(self, store: ItemStore | None = None) -> None:
        self.store: ItemStore = store if store is not None else Store()
        # Bound once: the per-event lookups, and whether completed items are evicted (read
        # from the store when the stage is made).
        self._message = self.store.message
        self._tool_call = self.store.tool_call
        self._evict = self.store.evict_completed
        #: The content deltas' handlers, which :meth:`feed` tries first (the fast path's
        #: conversions, see ``_stage``; ``fast_converts`` gives them bound), and the others'.
        self._converts: dict[type, Callable[[Accumulate, Any], Update]] = handler_table(
            type(self), _CONVERTS
        )
        self._handlers: dict[type, Callable[[Accumulate, Any], Update]] = handler_table(
            type(self), _HANDLERS
        )

    @property
    def fast_converts(self) -> dict[type, Callable[[Any], Update]]:
        """The content deltas' handlers, bound (the fast path's conversions, see ``_stage``):
        a new dict each time, held by whoever asked, so that the stage holds none of its own
        bound methods."""
        return {cls: MethodType(f, self) for cls, f in self._converts.items()}

    def _handler_of(self, event: Any) -> Callable[[Accumulate, Any], Update]:
        """The handler of an event class not in the table: a subclass of an AG-UI event class."""
        cls = protocol_class(type(event))
        if cls is None:
            raise UsageError(
                f"Accumulate takes agui_meta.events.Event objects, got "
                f"{type(event).__module__}.{type(event).__qualname__}: decode what is not an "
                "event yet first (wrap() and run_sync() do; in a hand-built chain put "
                "agui_meta.Enforce() first)"
            )
        handler = self._handlers.get(cls) or self._converts[cls]
        self._handlers[type(event)] = handler
        return handler

    def feed(self, event: Event) -> None:
        convert = self._converts.get(type(event))
        if convert is not None:
            self.emit(convert(self, event))
            return
        try:
            handler = self._handlers[type(event)]
        except KeyError:
            handler = self._handler_of(event)
        update = handler(self, event)
        self.emit(update)
        if self._evict:
            if update.done:
                self._release(update.item)
            elif isinstance(event, (RunFinishedEvent, RunErrorEvent)):
                self.store.evict_idle()

    # -- helpers

    def _warn(self, code: str, message: str, event: Event, path: str | None = None) -> None:
        self.ctx.report(code, message, event_type=event.type, path=path)

    def _release(self, item: MessageItem | ToolCallItem | None) -> None:
        """Evict what a done update completed (``Store(evict_completed=True)``)."""
        store = self.store
        if isinstance(item, ToolCallItem):
            owner = item.owner
            if not owner._streaming and not owner._open_calls:
                store.evict(owner)
        elif item is not None and item.role != "activity" and not item._open_calls:
            store.evict(item)

    def _missing(self, event: Any) -> Update:
        if hasattr(event, "tool_call_id"):
            what = f"message found containing tool call with ID '{event.tool_call_id}'"
            path = "$.toolCallId"
        else:
            what = f"message found with ID '{event.message_id}'"
            path = "$.messageId"
        self._warn("missing-target", f"{event.type}: No {what}", event, path)
        return Update(event, None, False)

    def _collides(self, event: Any, kind: str) -> Update:
        self._warn(
            "activity-collision",
            f"{event.type}: Message '{event.message_id}' is an activity message — message ids "
            f"must be unique across activity and {kind} messages",
            event,
            "$.messageId",
        )
        return Update(event, None, False)

    # -- handlers

    def _no_item(self, event: Event) -> Update:
        return Update(event, None, False)

    def _raw_chunk(self, event: Event) -> Update:
        raise ApplyError(f"{event.type} must be transformed before being applied")

    def _text_start(self, event: TextMessageStartEvent) -> Update:
        role = "assistant" if event.role is UNSET else event.role
        return self._start(event, role, event.name, "text")

    def _reasoning_start(self, event: ReasoningMessageStartEvent) -> Update:
        return self._start(event, "reasoning", UNSET, "reasoning")

    def _start(
        self,
        event: TextMessageStartEvent | ReasoningMessageStartEvent,
        role: str,
        name: str | UnsetType,
        kind: str,
    ) -> Update:
        """Open (or reopen) a streamed text or reasoning message."""
        store = self.store
        item = store.message(event.message_id)
        if item is None:
            fields: dict[str, Any] = {}
            if name is not UNSET:
                fields["name"] = name
            if event.subagent_run_id is not UNSET:
                fields["subagentRunId"] = event.subagent_run_id
            item = MessageItem(event.message_id, role, "", fields=fields)
            store.append(item)
        elif item.role == "activity":
            return self._collides(event, kind)
        elif item.role != role or (name is not UNSET and item.name != name):
            self._reopened(event, item, role, name)
        if event.metadata is not UNSET:
            item.metadata = _merged(item.metadata, event.metadata)
        item._streaming = True
        return Update(event, item, False, (None if item.metadata is UNSET else item.metadata))

    def _reopened(
        self,
        event: TextMessageStartEvent | ReasoningMessageStartEvent,
        item: MessageItem,
        role: str,
        name: str | UnsetType,
    ) -> None:
        """A START for a message that exists: the reference keeps its role and name; say so."""
        new = [f"role '{role}'"] if item.role != role else []
        if name is not UNSET and item.name != name:
            new.append(f"name '{name}'")
        had = f"'{item.role}' message" + (f" named '{item.name}'" if item.name is not None else "")
        self._warn(
            "reopened-message",
            f"{event.type}: message '{event.message_id}' already exists as a {had}: it is "
            f"reopened as it is, and the event's {' and '.join(new)} not applied",
            event,
            "$.role"
            if item.role != role and type(event) is TextMessageStartEvent
            else ("$.name" if name is not UNSET and item.name != name else "$.messageId"),
        )

    def _text_content(
        self, event: TextMessageContentEvent | ReasoningMessageContentEvent
    ) -> Update:
        item = self._message(event.message_id)
        if item is None:
            return self._missing(event)
        if item.role == "activity":
            kind = "text" if isinstance(event, TextMessageContentEvent) else "reasoning"
            return self._collides(event, kind)
        # MessageItem.append_content, inlined: this is the most frequent event.
        parts = item._parts
        if not parts:
            if type(item._content) is not str:
                item._content = ""
            item._parts = [event.delta]
        else:
            parts.append(event.delta)
        if event.metadata is not UNSET:
            item.metadata = _merged(item.metadata, event.metadata)
        metadata = item.metadata  # None for UNSET: what Update.metadata holds
        return Update(event, item, False, None if metadata is UNSET else metadata)

    def _text_end(self, event: TextMessageEndEvent | ReasoningMessageEndEvent) -> Update:
        item = self._message(event.message_id)
        if item is None:
            return self._missing(event)
        if item.role == "activity":
            kind = "text" if isinstance(event, TextMessageEndEvent) else "reasoning"
            return self._collides(event, kind)
        if event.metadata is not UNSET:
            item.metadata = _merged(item.metadata, event.metadata)
        item._streaming = False
        if item._parts:
            # The deltas joined now, once: a message kept after its end holds one string, not
            # a list of them (which the cyclic collector would walk again on every pass).
            item.content  # noqa: B018
        return Update(event, item, True, (None if item.metadata is UNSET else item.metadata))

    def _tool_start(self, event: ToolCallStartEvent) -> Update:
        self._started(event)
        return self._start_call(event)

    def _start_call(self, event: ToolCallStartEvent) -> Update:
        """The store's part of a TOOL_CALL_START (after the tally's): the call made, or
        updated when it exists. The C core calls it too (``_starts.h``), when what it checked
        before the tally's part no longer holds."""
        store = self.store
        call_id = event.tool_call_id
        call = store.tool_call(call_id)
        if call is not None:
            # A replayed start: the call is updated in place, never appended twice.
            if call.function_fields is None:
                raise ApplyError(
                    f"TOOL_CALL_START: tool call '{call_id}' in the history has no function object"
                )
            if call.name != event.tool_call_name:
                self._warn(
                    "tool-call-renamed",
                    f"TOOL_CALL_START: tool call '{call_id}' already exists with name "
                    f"'{call.name}' — updating it to '{event.tool_call_name}'",
                    event,
                    "$.toolCallName",
                )
                call.name = event.tool_call_name
            if event.metadata is not UNSET:
                call.metadata = _merged(call.metadata, event.metadata)
            return Update(event, call, False, (None if call.metadata is UNSET else call.metadata))

        parent_id = event.parent_message_id
        owner = store.message(parent_id) if parent_id else None
        if owner is None or owner.role != "assistant":
            if owner is not None:
                self._warn(
                    "parent-not-assistant",
                    f"TOOL_CALL_START: parentMessageId '{parent_id}' matches a '{owner.role}' "
                    "message, not assistant — falling back to toolCallId",
                    event,
                    "$.parentMessageId",
                )
            new_id = parent_id if parent_id and owner is None else call_id
            was_new = store.message(new_id) is None
            owner = MessageItem(new_id, "assistant")
            owner.tool_calls = []
            if was_new and event.subagent_run_id is not UNSET:
                owner.fields["subagentRunId"] = event.subagent_run_id
            store.append(owner)
        call = ToolCallItem(call_id, event.tool_call_name, owner)
        if event.metadata is not UNSET:
            call.metadata = _merged(UNSET, event.metadata)
        store.add_tool_call(owner, call)
        call._open = True
        owner._open_calls += 1
        return Update(event, call, False, (None if call.metadata is UNSET else call.metadata))

    def _tool_args(self, event: ToolCallArgsEvent) -> Update:
        call = self._tool_call(event.tool_call_id)
        if call is None:
            return self._missing(event)
        if call.function_fields is None:
            raise ApplyError(
                f"TOOL_CALL_ARGS: tool call '{event.tool_call_id}' in the history has no "
                "function object"
            )
        parts = call._arg_parts  # ToolCallItem.append_arguments, inlined
        if not parts:
            if type(call._args) is not str:
                call._args = js_string(call._args)
            call._arg_parts = [event.delta]
        else:
            parts.append(event.delta)
        if event.metadata is not UNSET:
            call.metadata = _merged(call.metadata, event.metadata)
        metadata = call.metadata  # None for UNSET: what Update.metadata holds
        return Update(event, call, False, None if metadata is UNSET else metadata)

    def _started(self, event: ToolCallStartEvent) -> None:
        """The call started in the store's tally of the run (reported when a bounded tally has
        no room to list it as pending). The C core calls it too (``_starts.h``)."""
        note = self.store.tool_call_started(event.tool_call_id)
        if note is not None:
            self._warn("tool-call-tally-full", note, event, "$.toolCallId")

    def _answered(self, event: ToolCallResultEvent) -> None:
        """The call answered in the store's tally of the run (reported when a bounded tally
        forgets an answered call). The C core calls it too (``_results.h``)."""
        note = self.store.tool_call_answered(event.tool_call_id)
        if note is not None:
            self.ctx.report(
                "tool-call-tally-forgot",
                note,
                event_type=event.type,
                path="$.toolCallId",
                severity="info",
            )

    def _tool_end(self, event: ToolCallEndEvent) -> Update:
        call = self._tool_call(event.tool_call_id)
        if call is None:
            return self._missing(event)
        if event.metadata is not UNSET:
            call.metadata = _merged(call.metadata, event.metadata)
        if call._open:
            call._open = False
            call.owner._open_calls -= 1
        if call._arg_parts:
            call.arguments  # noqa: B018  (joined once, as for a message's content)
        return Update(event, call, True, (None if call.metadata is UNSET else call.metadata))

    def _tool_result(self, event: ToolCallResultEvent) -> Update:
        store = self.store
        call_id = event.tool_call_id
        self._answered(event)
        fields: dict[str, Any] = {"toolCallId": call_id}
        if event.subagent_run_id is not UNSET:
            fields["subagentRunId"] = event.subagent_run_id
        content = event.content
        if not isinstance(content, str):
            content = msgspec.to_builtins(content)
        item = MessageItem(event.message_id, event.role or "tool", content, fields=fields)
        if event.metadata is not UNSET:
            item.metadata = _merged(UNSET, event.metadata)
        store.insert_result(item, store.assistant_owner(call_id))
        return Update(event, item, True, (None if item.metadata is UNSET else item.metadata))

    def _state_snapshot(self, event: StateSnapshotEvent) -> Update:
        self.store.state = copy_json(event.snapshot)
        return Update(event, None, False)

    def _state_delta(self, event: StateDeltaEvent) -> Update:
        store = self.store
        try:
            store.state = apply_patch(store.state, event.delta)
        except PatchError as exc:
            self._warn(
                "patch-failed",
                f"Failed to apply state patch: {exc}",
                event,
                f"$.delta[{exc.index}]",
            )
        return Update(event, None, False)

    def _messages_snapshot(self, event: MessagesSnapshotEvent) -> Update:
        store = self.store
        incoming = [MessageItem.from_message(m) for m in event.messages]
        by_id = {item.id: item for item in incoming}
        has_activity = any(item.role == "activity" for item in incoming)
        has_reasoning = any(item.role == "reasoning" for item in incoming)
        scope = authoritative_activity_types(event.metadata)

        def preserved(item: MessageItem) -> bool:
            if item.role == "activity":
                if isinstance(scope, list):
                    return item.activity_type not in scope
                return scope is not None and not has_activity
            return item.role == "reasoning" and not has_reasoning

        kept: list[MessageItem] = []
        for item in store.messages():
            key = item.id
            replacement = by_id.get(key) if isinstance(key, str) else None
            if replacement is not None:
                kept.append(replacement)
            elif preserved(item):
                kept.append(item)
        present = {item.id for item in kept if isinstance(item.id, str)}
        kept.extend(item for item in incoming if item.id not in present)
        store.reset(kept)
        return Update(event, None, False)

    def _new_activity(self, event: ActivitySnapshotEvent) -> MessageItem:
        fields: dict[str, Any] = {"activityType": event.activity_type}
        if event.subagent_run_id is not UNSET:
            fields["subagentRunId"] = event.subagent_run_id
        return MessageItem(event.message_id, "activity", copy_json(event.content), fields=fields)

    def _activity_snapshot(self, event: ActivitySnapshotEvent) -> Update:
        store = self.store
        existing = store.message(event.message_id)
        replace = event.replace is not False
        if existing is None:
            item = self._new_activity(event)
            store.append(item)
        elif existing.role == "activity":
            item = existing
            if replace:
                if item._refs > 1:
                    item = existing.copy()
                    store.replace(existing, item)
                item.fields["activityType"] = event.activity_type
                item.content = copy_json(event.content)
                if event.subagent_run_id is UNSET:
                    item.fields.pop("subagentRunId", None)
                else:
                    item.fields["subagentRunId"] = event.subagent_run_id
        elif replace:
            item = self._new_activity(event)
            store.replace(existing, item)
        else:
            return Update(event, None, False)
        if event.metadata is not UNSET:
            item.metadata = _merged(item.metadata, event.metadata)
        return Update(event, item, True, (None if item.metadata is UNSET else item.metadata))

    def _activity_delta(self, event: ActivityDeltaEvent) -> Update:
        store = self.store
        item = store.message(event.message_id)
        if item is None:
            lost = (
                "its patch and its metadata are" if event.metadata is not UNSET else "its patch is"
            )
            self._warn(
                "missing-target",
                f"ACTIVITY_DELTA: No activity message found with ID '{event.message_id}': "
                f"{lost} not applied to anything",
                event,
                "$.messageId",
            )
            return Update(event, None, False)
        if item.role != "activity":
            self._warn(
                "not-activity",
                f"ACTIVITY_DELTA: Message '{event.message_id}' is not an activity message",
                event,
                "$.messageId",
            )
            return Update(event, None, False)
        # Merged before the patch, so that a failing patch does not lose it.
        if event.metadata is not UNSET:
            item.metadata = _merged(item.metadata, event.metadata)
        base = item.content
        if base is UNSET or base is None:
            base = {}
        try:
            content = apply_patch(base, event.patch)
        except PatchError as exc:
            self._warn(
                "patch-failed",
                f"Failed to apply activity patch for '{event.message_id}': {exc}",
                event,
                f"$.patch[{exc.index}]",
            )
            return Update(event, item, True, (None if item.metadata is UNSET else item.metadata))
        if item._refs > 1:
            shared, item = item, item.copy()
            store.replace(shared, item)
        item.content = content
        item.fields["activityType"] = event.activity_type
        return Update(event, item, True, (None if item.metadata is UNSET else item.metadata))

    def _run_started(self, event: RunStartedEvent) -> Update:
        store = self.store
        store.begin_run()
        if event.input is not UNSET:
            for message in event.input.messages:
                if store.message(message.id) is None:
                    store.append(MessageItem.from_message(message))
        return Update(event, None, False)

    def _run_finished(self, event: RunFinishedEvent) -> Update:
        outcome = event.outcome
        if isinstance(outcome, RunFinishedInterruptOutcome):
            self.store.finish_run(list(outcome.interrupts), UNSET)
        elif isinstance(outcome, RunFinishedCancelledOutcome) or outcome is UNSET:
            self.store.finish_run([], UNSET)
        else:
            self.store.finish_run([], outcome.pending_tool_call_ids)
        return Update(event, None, False)

    def _encrypted_value(self, event: ReasoningEncryptedValueEvent) -> Update:
        store = self.store
        entity = event.entity_id
        if event.subtype == "tool-call":
            # The first call with this id held by an assistant message.
            call = self._tool_call(entity)
            if call is not None and call.owner.role != "assistant":
                owner = store.assistant_owner(entity)
                call = None
                if owner is not None:
                    call = next(c for c in owner.tool_calls or () if c.id == entity)
            if call is not None:
                call.fields["encryptedValue"] = event.encrypted_value
            else:
                self._dropped(event, f"no assistant message holds a tool call with ID '{entity}'")
        else:
            item = store.message(entity)
            if item is not None and item.role != "activity":
                item.fields["encryptedValue"] = event.encrypted_value
            else:
                what = "is an activity message" if item is not None else "does not exist"
                self._dropped(event, f"message '{entity}' {what}")
        return Update(event, None, False)

    def _dropped(self, event: ReasoningEncryptedValueEvent, why: str) -> None:
        self._warn(
            "missing-target",
            f"REASONING_ENCRYPTED_VALUE: {why}: the encrypted value is not stored anywhere",
            event,
            "$.entityId",
        )


Accumulate.fast_feed = Accumulate.feed


#: The content deltas' handlers, by method name (see ``handler_table``).
_CONVERTS: Final[Mapping[type, str]] = {
    TextMessageContentEvent: "_text_content",
    ReasoningMessageContentEvent: "_text_content",
    ToolCallArgsEvent: "_tool_args",
}
#: The other events' handlers, by method name.
_HANDLERS: Final[Mapping[type, str]] = {
    TextMessageStartEvent: "_text_start",
    TextMessageEndEvent: "_text_end",
    ReasoningMessageStartEvent: "_reasoning_start",
    ReasoningMessageEndEvent: "_text_end",
    ToolCallStartEvent: "_tool_start",
    ToolCallEndEvent: "_tool_end",
    ToolCallResultEvent: "_tool_result",
    StateSnapshotEvent: "_state_snapshot",
    StateDeltaEvent: "_state_delta",
    MessagesSnapshotEvent: "_messages_snapshot",
    ActivitySnapshotEvent: "_activity_snapshot",
    ActivityDeltaEvent: "_activity_delta",
    RunStartedEvent: "_run_started",
    RunFinishedEvent: "_run_finished",
    ReasoningEncryptedValueEvent: "_encrypted_value",
    TextMessageChunkEvent: "_raw_chunk",
    ToolCallChunkEvent: "_raw_chunk",
    ReasoningMessageChunkEvent: "_raw_chunk",
    RunErrorEvent: "_no_item",
    RawEvent: "_no_item",
    CustomEvent: "_no_item",
    StepStartedEvent: "_no_item",
    StepFinishedEvent: "_no_item",
    ReasoningStartEvent: "_no_item",
    ReasoningEndEvent: "_no_item",
    SubagentStartedEvent: "_no_item",
    SubagentFinishedEvent: "_no_item",
    SubagentErrorEvent: "_no_item",
}
