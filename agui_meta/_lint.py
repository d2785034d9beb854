"""Lints: what the reference client accepts but a well-behaved producer does not send.

Reported, never rejected, never rewritten. :class:`LintMetadataKeys` reports the metadata keys
without a vendor prefix (the specification's SHOULD: severity ``"info"``, code
``"unprefixed-metadata-key"``), wherever a metadata object sits in the event. :class:`Lint`
runs the hygiene rules of :data:`RULES` (ids reused after their end, arguments that are not
JSON, results of unknown calls, …), each with a stable code and a default severity, for
``agui-meta validate`` and the pytest plugin.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec
from msgspec import UNSET

from ._accumulate import Update
from ._events import (
    EVENT_TYPES,
    CustomEvent,
    Event,
    Message,
    MessagesSnapshotEvent,
    RawEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ._exceptions import Severity, UsageError
from ._metadata import AGUI_METADATA_KEY, is_prefixed, iter_metadata, key_path
from ._stage import CONTENT_DELTAS, Transducer, handler_table

__all__ = ["RULES", "Lint", "LintMetadataKeys", "Rule"]

_decode_json = msgspec.json.Decoder().decode

# Events whose nested objects may carry metadata of their own.
_NESTED_CARRIERS = (MessagesSnapshotEvent, RunStartedEvent, RunFinishedEvent)


def _unprefixed(key: str) -> str:
    return (
        f"metadata key {key!r} has no vendor prefix: producers SHOULD prefix the keys they "
        f"create (for example 'vendor.{key}'); {AGUI_METADATA_KEY!r} is reserved for the protocol"
    )


class LintMetadataKeys(Transducer[Event, Event]):
    """Report application metadata keys without a vendor prefix; pass every event through.

    A key counts as prefixed when it is the protocol's ``"ag-ui"`` or names a vendor first:
    ``"acme.latency"``, ``"acme/latency"``, ``"acme:latency"`` or ``"@scope/pkg"`` (see
    :func:`agui_meta.vendor_keys` for the producer side). Every carrier is checked: the event's
    own metadata, messages and tool calls inside MESSAGES_SNAPSHOT and RUN_STARTED.input, tools
    and resume entries, and interrupts. Each finding is a report of severity ``"info"`` (which
    strict mode does not turn into an error) with the JSON path of the key.
    """

    takes_events = True

    def feed(self, item: Event) -> None:
        if item.metadata is not UNSET or isinstance(item, _NESTED_CARRIERS):
            self._lint(item)
        self.emit(item)

    def _lint(self, event: Event) -> None:
        report = self.ctx.report
        for path, metadata in iter_metadata(event):
            for key in metadata:
                if not is_prefixed(key):
                    report(
                        "unprefixed-metadata-key",
                        _unprefixed(key),
                        path=key_path(path, key),
                        severity="info",
                        event_type=event.type,
                    )


# ---------------------------------------------------------------------------------------------
# Stream hygiene: what the reference client accepts but a well-behaved producer does not send


class Rule(msgspec.Struct, frozen=True):
    """A hygiene rule of :class:`Lint`: its stable code, default severity and one-line summary."""

    code: str
    severity: Severity
    summary: str


#: The hygiene rules, by code, in the order the documentation lists them. The reference
#: client's own rules (``run.*``, ``text.*``, ``tool-call.not-open`` …) stay errors and are
#: not listed here.
RULES: Final[dict[str, Rule]] = {
    rule.code: rule
    for rule in (
        Rule("message.id-reused", "warning", "a message id started again after its end"),
        Rule("tool-call.id-reused", "warning", "a tool-call id started again after its end"),
        Rule(
            "tool-call.arguments-not-json",
            "warning",
            "a tool call's streamed arguments, joined, are not JSON",
        ),
        Rule(
            "tool-call.result-before-end",
            "warning",
            "a TOOL_CALL_RESULT for a call whose arguments are still streaming",
        ),
        Rule(
            "tool-call.result-unknown-call",
            "warning",
            "a TOOL_CALL_RESULT for a tool call the stream never showed",
        ),
        Rule(
            "tool-call.unknown-parent-message",
            "info",
            "a TOOL_CALL_START whose parentMessageId names no message the stream showed",
        ),
        Rule(
            "run.finished-ids-mismatch",
            "warning",
            "RUN_FINISHED names another run or thread than its RUN_STARTED",
        ),
        Rule(
            "state.delta-without-snapshot",
            "info",
            "a STATE_DELTA before any state snapshot: its base is not in the stream",
        ),
        Rule("raw.wraps-typed-event", "info", "a RAW event wraps an event the protocol types"),
        Rule(
            "custom.name-not-namespaced",
            "info",
            "a CUSTOM event name without a vendor prefix ('vendor.name')",
        ),
        Rule(
            "stream-ended-open",
            "warning",
            "the stream ends inside a run, with what is still open (messages, calls, steps)",
        ),
        Rule(
            "stream-ended-empty",
            "warning",
            "the stream ends without any event (no run was verified)",
        ),
        Rule(
            "metadata.reserved-key",
            "warning",
            f"a producer wrote the {AGUI_METADATA_KEY!r} metadata key, reserved for the protocol",
        ),
        Rule(
            "unprefixed-metadata-key",
            "warning",
            "a metadata key without a vendor prefix (reported once per key)",
        ),
        Rule(
            "protocol-version.newer",
            "warning",
            "RUN_STARTED declares a protocolVersion newer than 1.0",
        ),
        Rule(
            "protocol-version.unknown",
            "info",
            "RUN_STARTED declares a protocolVersion that is not a version number",
        ),
    )
}

#: The protocol version this library implements.
PROTOCOL_VERSION: Final = (1, 0)

_NO_PARTS: Final[list[str]] = []
#: The content deltas (exact classes): most of a stream, checked on a short path.
_DELTAS: Final[frozenset[type]] = frozenset(CONTENT_DELTAS)


class _Seen:
    """A bounded insertion-ordered set of ids: past ``limit`` the oldest is forgotten.

    ``forgot`` tells whether anything was forgotten, so that a check needing a complete record
    (an unknown id) can stand down instead of reporting a false finding.
    """

    __slots__ = ("forgot", "ids", "limit")

    def __init__(self, limit: int | None) -> None:
        self.ids: OrderedDict[str, int] = OrderedDict()
        self.limit = limit
        self.forgot = False

    def add(self, key: str, index: int) -> None:
        ids = self.ids
        if key in ids:
            ids.move_to_end(key)
        ids[key] = index
        if self.limit is not None and len(ids) > self.limit:
            ids.popitem(last=False)
            self.forgot = True

    def unknown(self, key: str) -> bool:
        """Known not to be there: absent, and nothing was ever forgotten."""
        return not self.forgot and key not in self.ids


class Lint(Transducer[Any, Any]):
    """The hygiene rules (:data:`RULES`): reports, never rejects, passes every item on.

    Meant after the default stages (it takes events, or the :class:`~agui_meta.Update` the
    accumulator wraps them in), so that it sees only the events the verifier accepted and
    the ones chunks expand to. Each finding is a report through the pipeline's context (the
    event's index, line and byte offset attached), with the rule's code and severity. Each
    event costs O(1) (plus its metadata keys, and the arguments of a call once, at its end);
    the records kept of ended or known ids hold the latest ``max_closed_ids`` of each kind
    (as :class:`~agui_meta.Verify`), and once one was forgotten, the checks that need a
    complete record (an unknown call, an unknown parent message) stand down. The arguments
    of open calls are held until their end (references to the deltas, which the store keeps
    anyway). The stream-end rule (``stream-ended-open``) belongs to
    ``Verify(report_unfinished=True)``.
    """

    takes_events = True

    def __init__(self, *, max_closed_ids: int | None = 10_000) -> None:
        if max_closed_ids is not None and max_closed_ids < 0:
            raise UsageError(f"max_closed_ids must be >= 0 or None, got {max_closed_ids}")
        self._limit = max_closed_ids
        #: How many events the stream had up to the last one this stage saw (by index).
        self.events = 0
        self._ended_messages = _Seen(max_closed_ids)
        self._ended_calls = _Seen(max_closed_ids)
        self._known_messages = _Seen(max_closed_ids)
        self._known_calls = _Seen(max_closed_ids)
        self._done_keys: dict[str, None] = {}  # metadata keys judged (prefixed or reported)
        self._reserved_seen: set[str] = set()  # event types reported for the 'ag-ui' key
        self._open_calls: dict[str, list[str]] = {}
        self._run: tuple[str, str] | None = None  # (thread id, run id) of the run started
        self._state_seen = False
        self._handlers: dict[str, Callable[[Lint, Any], None]] = handler_table(
            type(self), _HANDLERS
        )

    def feed(self, item: Any) -> None:
        event: Event = item.event if type(item) is Update else item
        self.events = self.ctx.index + 1
        cls = type(event)
        if cls in _DELTAS:  # most events: a few lookups
            if cls is ToolCallArgsEvent:
                parts = self._open_calls.get(event.tool_call_id)  # type: ignore[attr-defined]
                if parts is not None and event.delta:  # type: ignore[attr-defined]
                    parts.append(event.delta)  # type: ignore[attr-defined]
            metadata = event.metadata
            if metadata is not UNSET:
                self._keys_of(metadata, "$.metadata", event)
            self.emit(item)
            return
        handler = self._handlers.get(event.type)
        if handler is not None:
            handler(self, event)
        if event.metadata is not UNSET or isinstance(event, _NESTED_CARRIERS):
            self._metadata(event)
        self.emit(item)

    def _report(self, code: str, message: str, event: Event, path: str | None = None) -> None:
        self.ctx.report(
            code, message, path=path, severity=RULES[code].severity, event_type=event.type
        )

    # Runs

    def _run_started(self, event: RunStartedEvent) -> None:
        self._run = (event.thread_id, event.run_id)
        index = self.ctx.index
        run_input = event.input
        if run_input is not UNSET:
            if run_input.state is not UNSET:
                self._state_seen = True
            self._harvest(run_input.messages, index)
        version = event.protocol_version
        if version is not UNSET:
            parsed = _version(version)
            if parsed is None:
                self._report(
                    "protocol-version.unknown",
                    f"protocolVersion {version!r} is not a version number (this consumer "
                    "implements 1.0)",
                    event,
                    "$.protocolVersion",
                )
            elif parsed > PROTOCOL_VERSION:
                self._report(
                    "protocol-version.newer",
                    f"protocolVersion {version!r} is newer than 1.0, the version this consumer "
                    "implements: what it added is read as 1.0 reads it",
                    event,
                    "$.protocolVersion",
                )

    def _run_finished(self, event: RunFinishedEvent) -> None:
        if self._run is None:
            return
        thread_id, run_id = self._run
        for field, expected, actual in (
            ("threadId", thread_id, event.thread_id),
            ("runId", run_id, event.run_id),
        ):
            if actual != expected:
                self._report(
                    "run.finished-ids-mismatch",
                    f"RUN_FINISHED has {field} {actual!r}, but RUN_STARTED had {expected!r}",
                    event,
                    f"$.{field}",
                )
        self._run = None

    # Messages

    def _message_start(self, event: Any) -> None:
        message_id: str = event.message_id
        ended = self._ended_messages.ids.get(message_id)
        if ended is not None:
            self._report(
                "message.id-reused",
                f"message id {message_id!r} is started again after it ended (event {ended}): "
                "a new message needs a new id",
                event,
                "$.messageId",
            )
        self._known_messages.add(message_id, self.ctx.index)

    def _message_end(self, event: Any) -> None:
        self._ended_messages.add(event.message_id, self.ctx.index)

    def _messages_snapshot(self, event: MessagesSnapshotEvent) -> None:
        self._harvest(event.messages, self.ctx.index)

    def _harvest(self, messages: list[Message], index: int) -> None:
        """Ids a history or snapshot shows: known messages and tool calls (O(messages))."""
        for message in messages:
            self._known_messages.add(message.id, index)
            calls = getattr(message, "tool_calls", UNSET)
            if calls is not UNSET:
                for call in calls:
                    self._known_calls.add(call.id, index)

    # Tool calls

    def _call_start(self, event: ToolCallStartEvent) -> None:
        call_id = event.tool_call_id
        index = self.ctx.index
        ended = self._ended_calls.ids.get(call_id)
        if ended is not None:
            self._report(
                "tool-call.id-reused",
                f"tool call id {call_id!r} is started again after it ended (event {ended}): "
                "a new call needs a new id",
                event,
                "$.toolCallId",
            )
        parent = event.parent_message_id
        if parent is not UNSET and self._known_messages.unknown(parent):
            self._report(
                "tool-call.unknown-parent-message",
                f"parentMessageId {parent!r} names no message shown so far in the stream",
                event,
                "$.parentMessageId",
            )
        open_calls = self._open_calls
        open_calls[call_id] = []
        if self._limit is not None and len(open_calls) > self._limit:  # no verifier before
            del open_calls[next(iter(open_calls))]
        self._known_calls.add(call_id, index)

    def _call_end(self, event: ToolCallEndEvent) -> None:
        call_id = event.tool_call_id
        parts = self._open_calls.pop(call_id, _NO_PARTS)
        self._ended_calls.add(call_id, self.ctx.index)
        if not parts:  # no arguments at all: a tool without parameters
            return
        arguments = "".join(parts)
        try:
            _decode_json(arguments)
        except msgspec.DecodeError as exc:
            self._report(
                "tool-call.arguments-not-json",
                f"the arguments of tool call {call_id!r} ({len(arguments)} characters) are "
                f"not JSON: {exc}",
                event,
            )

    def _call_result(self, event: ToolCallResultEvent) -> None:
        call_id = event.tool_call_id
        if call_id in self._open_calls:
            self._report(
                "tool-call.result-before-end",
                f"result for tool call {call_id!r} before its TOOL_CALL_END",
                event,
                "$.toolCallId",
            )
        elif self._known_calls.unknown(call_id):
            self._report(
                "tool-call.result-unknown-call",
                f"result for tool call {call_id!r}, which the stream never showed",
                event,
                "$.toolCallId",
            )
        self._known_messages.add(event.message_id, self.ctx.index)

    # State, RAW, CUSTOM

    def _state_snapshot(self, event: Event) -> None:
        self._state_seen = True

    def _state_delta(self, event: Event) -> None:
        if not self._state_seen:
            self._state_seen = True  # once: the first delta tells it
            self._report(
                "state.delta-without-snapshot",
                "STATE_DELTA before any STATE_SNAPSHOT (or RUN_STARTED.input.state): the state "
                "it patches is not in the stream",
                event,
            )

    def _raw(self, event: RawEvent) -> None:
        wrapped = event.event
        kind = wrapped.get("type") if isinstance(wrapped, dict) else None
        if isinstance(kind, str) and kind in EVENT_TYPES:
            self._report(
                "raw.wraps-typed-event",
                f"RAW wraps a {kind} event, which the protocol types: send it as itself",
                event,
                "$.event.type",
            )

    def _custom(self, event: CustomEvent) -> None:
        name = event.name
        if not is_prefixed(name) or name == AGUI_METADATA_KEY:
            self._report(
                "custom.name-not-namespaced",
                f"CUSTOM event name {name!r} has no vendor prefix (for example 'vendor.{name}')",
                event,
                "$.name",
            )

    # Metadata

    def _metadata(self, event: Event) -> None:
        for path, metadata in iter_metadata(event):
            self._keys_of(metadata, path, event)

    def _keys_of(self, metadata: dict[str, Any], path: str, event: Event) -> None:
        """Judge each key once: prefixed, or reported (a bounded record: past ``max_closed_ids``
        distinct keys it starts again, so a key may be reported once more)."""
        done = self._done_keys
        for key in metadata:
            if key in done:
                continue
            if key == AGUI_METADATA_KEY:
                # Once per event type; the client's input echoed in RUN_STARTED is not the
                # producer's.
                if path.startswith("$.input.") or event.type in self._reserved_seen:
                    continue
                self._reserved_seen.add(event.type)
                self._report(
                    "metadata.reserved-key",
                    f"metadata key {AGUI_METADATA_KEY!r} is reserved for the protocol: a "
                    f"producer must not write it (reported once per event type)",
                    event,
                    key_path(path, key),
                )
                continue
            if self._limit is not None and len(done) >= self._limit:
                done.clear()
            done[key] = None
            if not is_prefixed(key):
                self._report(
                    "unprefixed-metadata-key", _unprefixed(key), event, key_path(path, key)
                )


def _version(text: str) -> tuple[int, ...] | None:
    """``"1.0"`` -> ``(1, 0)``; ``None`` for what is not dot-separated numbers."""
    parts = text.split(".")
    if not all(part.isdigit() and part.isascii() and len(part) <= 9 for part in parts):
        return None
    numbers = [int(part) for part in parts]
    while len(numbers) > 2 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


#: The handler of each event type, by method name (see ``handler_table``).
_HANDLERS: Final[Mapping[str, str]] = {
    "RUN_STARTED": "_run_started",
    "RUN_FINISHED": "_run_finished",
    "TEXT_MESSAGE_START": "_message_start",
    "REASONING_MESSAGE_START": "_message_start",
    "TEXT_MESSAGE_END": "_message_end",
    "REASONING_MESSAGE_END": "_message_end",
    "TOOL_CALL_START": "_call_start",
    "TOOL_CALL_END": "_call_end",
    "TOOL_CALL_RESULT": "_call_result",
    "MESSAGES_SNAPSHOT": "_messages_snapshot",
    "STATE_SNAPSHOT": "_state_snapshot",
    "STATE_DELTA": "_state_delta",
    "RAW": "_raw",
    "CUSTOM": "_custom",
}
