"""Event-order verification: the reference client's ``verifyEvents``, rule for rule.

:class:`Verify` is a transducer that passes every event through unchanged and raises a
:class:`~agui_meta.VerifyError` at the first event that breaks the protocol's ordering rules,
accepting and rejecting exactly the streams ``verifyEvents`` of ``@ag-ui/client`` 1.0.0 accepts
and rejects. The rules, each named by the ``rule`` of the error it raises:

Runs
    ``run.first-event`` the first event must be ``RUN_STARTED`` or ``RUN_ERROR``;
    ``run.already-active`` no ``RUN_STARTED`` while a run is active;
    ``run.after-finished`` after ``RUN_FINISHED`` only ``RUN_STARTED`` or ``RUN_ERROR``;
    ``run.after-error`` after ``RUN_ERROR`` only ``RUN_STARTED``;
    ``run.finished-open-steps``, ``run.finished-open-text-messages``,
    ``run.finished-open-reasoning-messages``, ``run.finished-open-reasoning-spans``,
    ``run.finished-open-tool-calls``, ``run.finished-open-subagents``: ``RUN_FINISHED`` while
    something is still open (checked in this order). ``RUN_ERROR`` may end a run at any time.
    A new ``RUN_STARTED`` forgets everything the previous run left behind.
Streams (text messages, tool calls, reasoning spans, reasoning messages)
    ``text.already-open`` / ``text.not-open``, ``tool-call.already-open`` /
    ``tool-call.not-open``, ``reasoning-span.already-open`` / ``reasoning-span.not-open``,
    ``reasoning-message.already-open`` / ``reasoning-message.not-open``: an opener for an id that
    is open, or a continuation or close for an id that is not. A closed id may be opened again.
Steps (keyed by owner and name: a parent and a subagent may both have "tools" open)
    ``step.already-open``, ``step.not-open``, and ``step.wrong-owner`` for a step finished
    under another owner than the one that started it.
Subagents
    ``subagent.already-active``, ``subagent.id-reused`` (an id finished earlier in the run: ids
    are per invocation), ``subagent.unknown-parent`` (``parentSubagentRunId`` not started in
    this run), ``subagent.not-active`` (``SUBAGENT_FINISHED`` / ``SUBAGENT_ERROR`` for an id that
    is not active).
Ownership (who may continue an entity; owners kept per entity kind for the whole run)
    ``owner.mismatch`` an event whose ``subagentRunId`` disagrees with the recorded owner of the
    message, tool call, reasoning message or activity it continues (or reopens). An absent tag
    never disagrees; an untagged opener records the parent agent as owner, so a tagged
    continuation of it disagrees. ``owner.tool-call-parent`` a ``TOOL_CALL_START`` whose tag
    disagrees with the owner of its ``parentMessageId``; ``owner.tool-call-reparented`` an
    untagged reopen of a tool call under a parent message owned by someone else.

How owners are recorded, as in the reference: the first opener of an id records its tag (a
later untagged reopen changes nothing); ``TOOL_CALL_RESULT`` records its message's owner every
time; ``ACTIVITY_SNAPSHOT`` records its owner when the activity is new or when it replaces
(``replace`` absent or true); ``MESSAGES_SNAPSHOT`` records the owner of every message it holds
(and of their tool calls) over what was recorded; ``RUN_STARTED.input`` records owners only for
ids nothing has claimed yet. A tool call opened without a tag inherits the owner of its parent
message. ``REASONING_ENCRYPTED_VALUE`` is checked against the owner of a tool call or of a
message (text or reasoning), as its ``subtype`` says.

Not checked, as in the reference: whether a tag names a started subagent (attribution-only
streams are valid), whether ``TOOL_CALL_RESULT`` names a known call, whether ``ACTIVITY_DELTA``
names a known activity. ``CUSTOM``, ``RAW``, ``STATE_*`` and ``*_CHUNK`` events are only subject
to the run rules.

The end of the stream is not checked either, as in the reference 1.0.0: a run never finished,
or a message never closed, is accepted. Nothing is lost by that (the accumulator keeps an open
message as it stands), so by default nothing is reported; callers that want to know (a
``validate`` command, a test) ask :meth:`Verify.open_items`, or create the stage with
``report_unfinished=True`` to get a ``"stream-ended-open"`` / ``"stream-ended-empty"`` warning
report when the stream ends inside a run or carries no event at all. (Later upstream versions
reject such streams; this option gives that check without departing from 1.0.0.)

The reference's ``null`` and shape checks are not repeated here: the event model cannot hold
what they look for, so decoding has already rejected it (as the reference's enforcement stage
does before its verifier runs). They are ``subagentRunId: null`` on any event, on a message of a
``MESSAGES_SNAPSHOT`` or of ``RUN_STARTED.input``, or on an interrupt of ``RUN_FINISHED``;
``null`` in the optional lifecycle fields ``description``, ``parentSubagentRunId``,
``parentToolCallId``, ``parentMessageId``, ``outcome`` and ``code``; ``outcome.interruptIds``
that is ``null`` or holds a non-string; a ``SUBAGENT_*`` event without ``subagentRunId``,
``SUBAGENT_STARTED`` without ``name``, ``SUBAGENT_ERROR`` without ``message``. An ``outcome``
whose ``type`` is neither ``success`` nor ``suspended`` is stripped by decoding with a report,
as the reference's enforcement strips it, so its verifier never sees one either. (Structs built
in Python are trusted to follow their type hints: msgspec does not check them at construction.)

In keep-going mode a rejected event is skipped and leaves the verifier's state as it was: the
state always describes the accepted events. (The reference stops at the first error.)

Bounds (the reference has none; these keep one endless run in bounded memory):

``max_open_items`` (10,000)
    text messages, reasoning messages and spans, tool calls, steps and subagents open at once,
    all kinds together. An opener past it is rejected with rule ``limit.open-items`` (the
    error names the id, the run and how many of each kind are open; in keep-going mode the
    opener is skipped, so what it would have opened is never held, and its continuations are
    rejected as ``*.not-open``).
``max_closed_ids`` (10,000)
    the records kept of items that are not open, per kind (the owners of messages, tool
    calls, reasoning messages and activities, and the subagents finished in the run: their
    START and the event that ended them, see :meth:`Verify.subagents`), so
    that a closed item costs nothing once it is that old. Past it the oldest record is
    forgotten (counted in :attr:`Verify.forgotten_ids`; the first of each run is reported,
    code ``"verify-forgot-ids"``, severity ``"info"``), and for the rest of the run the
    checks that would need a forgotten record accept the event: an ``owner.mismatch``
    against a forgotten owner, ``subagent.id-reused`` for a forgotten id and
    ``subagent.unknown-parent`` (once a subagent id was forgotten) are not raised. Owners of
    open items are never forgotten. ``None`` turns either bound off.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Container, Mapping
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ._events import (
    ActivityDeltaEvent,
    ActivityMessage,
    ActivitySnapshotEvent,
    AssistantMessage,
    Event,
    Message,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ._exceptions import UsageError, VerifyError
from ._speedups import new_ordered
from ._stage import Transducer, handler_table

__all__ = ["OpenItems", "OwnerKind", "RunState", "Verify"]

#: Who owns an entity: a subagent run id, or ``UNSET`` for the parent agent.
_Owner = str | UnsetType
_Ids = dict[str, None]  # an insertion-ordered set (error messages list ids in opening order)
_Owners = OrderedDict[str, _Owner]  # first recorded first: the oldest is forgotten first
_SubagentEnd = SubagentFinishedEvent | SubagentErrorEvent
#: What the verifier keeps of a subagent: the order it started in the run, and its START.
_Started = tuple[int, SubagentStartedEvent]

#: The kinds of entity an owner is recorded for (see :meth:`Verify.owner`).
OwnerKind = Literal["message", "tool-call", "reasoning", "activity"]

_RUN_STARTED = "RUN_STARTED"
_RUN_ERROR = "RUN_ERROR"

#: ``"none"`` before any run, ``"active"`` inside one, ``"finished"`` / ``"errored"`` after one.
RunState = Literal["none", "active", "finished", "errored"]


class _Absent(enum.Enum):
    ABSENT = 0


_ABSENT = _Absent.ABSENT


def _who(owner: _Owner) -> str:
    return "(the parent agent)" if owner is UNSET else owner


class OpenItems(msgspec.Struct, frozen=True, kw_only=True):
    """What a :class:`Verify` holds open, as returned by :meth:`Verify.open_items`.

    Ids are listed in the order they were opened. ``steps`` pairs a step name with its owner
    (a subagent run id, or ``None`` for the parent agent). After ``RUN_FINISHED`` everything is
    empty (the verifier insists on it); after ``RUN_ERROR`` the lists keep what was open when the
    run failed, until the next ``RUN_STARTED`` forgets it.
    """

    run: RunState
    text_messages: tuple[str, ...] = ()
    tool_calls: tuple[str, ...] = ()
    reasoning_messages: tuple[str, ...] = ()
    reasoning_spans: tuple[str, ...] = ()
    steps: tuple[tuple[str, str | None], ...] = ()
    subagents: tuple[str, ...] = ()

    def describe(self) -> str:
        """The open items in words (``""`` when nothing is open)."""
        parts = []
        for label, ids in (
            ("steps", [n if o is None else f"{n} (subagent '{o}')" for n, o in self.steps]),
            ("text messages", self.text_messages),
            ("reasoning messages", self.reasoning_messages),
            ("reasoning spans", self.reasoning_spans),
            ("tool calls", self.tool_calls),
            ("subagents", self.subagents),
        ):
            if ids:
                parts.append(f"{label}: {', '.join(ids)}")
        return "; ".join(parts)


class Verify(Transducer[Event, Event]):
    """Check the order of events as the reference client's ``verifyEvents`` does.

    Events pass through unchanged; the first one that breaks a rule raises
    :class:`~agui_meta.VerifyError` (its ``rule`` names the rule, see the module documentation)
    and is not passed on. The state is per stream: use one instance per pipeline. Each event
    costs O(1) (a few dict lookups); owner seeding from ``MESSAGES_SNAPSHOT`` and
    ``RUN_STARTED.input`` costs O(messages).

    ``max_open_items`` and ``max_closed_ids`` bound its memory within one run (see the module
    documentation: an opener past the first is rejected with rule ``limit.open-items``; past
    the second the oldest records of closed items are forgotten, with a report).

    Like the reference, nothing is checked when the stream ends: a run left open, or a message
    never closed, is not an error. :meth:`open_items` tells what is open at any time; with
    ``report_unfinished=True``, a stream that ends inside a run (or with no event at all) gets a
    report through the pipeline's context (code ``"stream-ended-open"`` or
    ``"stream-ended-empty"``, severity ``"warning"``; an error in strict mode).
    """

    takes_events = True

    def __init__(
        self,
        *,
        report_unfinished: bool = False,
        max_open_items: int | None = 10_000,
        max_closed_ids: int | None = 10_000,
    ) -> None:
        for name, limit in (("max_open_items", max_open_items), ("max_closed_ids", max_closed_ids)):
            if limit is not None and limit < 0:
                raise UsageError(f"{name} must be >= 0 or None, got {limit}")
        self.report_unfinished = report_unfinished
        self.max_open_items = max_open_items
        self.max_closed_ids = max_closed_ids
        #: Ids whose record the verifier forgot to respect ``max_closed_ids``, over the stream.
        self.forgotten_ids = 0
        self._forgot_in_run = False  # a report was made for this run
        # Per table, whether it forgot something in this run (its checks are lenient since).
        self._forgot_messages = False
        self._forgot_subagents = False
        # Run lifecycle. ``_gate`` is true while the cheap path is not enough: before the first
        # event and after a run ended (only run events may follow).
        self._seen_first = False
        self._run_started = False
        self._run_finished = False
        self._run_error = False
        self._gate = True
        self._run_id: str | None = None
        # "Is it open?" sets, one per streamed kind.
        self._text: _Ids = {}
        self._tool_calls: _Ids = {}
        self._reasoning_spans: _Ids = {}
        self._reasoning_messages: _Ids = {}
        self._open_deltas: Mapping[type, Container[str] | None] = {
            TextMessageContentEvent: self._text,
            ReasoningMessageContentEvent: self._reasoning_messages,
            ToolCallArgsEvent: self._tool_calls,
        }
        # The fast path (see ``_stage``): an untagged delta of an open item, inside a run. By
        # content delta class, the ids open now, while a run is active (else none, kept
        # current with the gate): feed begins by letting an untagged delta of one pass.
        self.fast_passes: Mapping[type, Container[str] | None] = _NO_DELTA
        # Owners per entity kind, kept for the run (a continuation may follow a close): those
        # of open items always, of the others the latest ``max_closed_ids`` per kind.
        self._message_owners: _Owners = new_ordered()
        self._tool_call_owners: _Owners = new_ordered()
        self._activity_owners: _Owners = new_ordered()
        self._reasoning_owners: _Owners = new_ordered()
        # owner -> open step names (nested, so the parent never collides with a subagent "").
        # An owner with no open step is removed; ``_open_steps`` counts the names.
        self._steps: dict[_Owner, _Ids] = {}
        self._open_steps = 0
        # Active subagents, and those finished in the run (the latest ``max_closed_ids``), by
        # id: the order they started in and their SUBAGENT_STARTED (and how each one ended).
        self._subagents: dict[str, _Started] = {}
        self._closed_subagents: OrderedDict[str, tuple[_Started, _SubagentEnd]] = new_ordered()
        self._subagents_started = 0
        self._handlers: dict[str, Callable[[Verify, Any], None]] = handler_table(
            type(self), _HANDLERS
        )

    # -----------------------------------------------------------------------------------------
    # Driving

    def feed(self, item: Event) -> None:
        if self._gate:
            self._check_gate(item.type)
        else:
            ids = self._open_deltas.get(type(item))
            if ids is not None:
                delta: Any = item
                if (
                    delta.subagent_run_id is UNSET
                    and (
                        delta.tool_call_id if type(delta) is ToolCallArgsEvent else delta.message_id
                    )
                    in ids
                ):
                    self.emit(item)
                    return
        handler = self._handlers.get(item.type)
        if handler is not None:
            handler(self, item)
        self.emit(item)

    def close(self) -> None:
        if not self.report_unfinished:
            return
        if not self._seen_first:
            self.ctx.report(
                "stream-ended-empty",
                "The stream ended without emitting 'RUN_STARTED' (no run was verified).",
            )
        elif self._run_started and not self._run_finished and not self._run_error:
            opened = self.open_items().describe()
            self.ctx.report(
                "stream-ended-open",
                f"The stream ended without 'RUN_FINISHED' or 'RUN_ERROR': run "
                f"'{self._run_id}' is still active"
                + (f" (still open: {opened})." if opened else "."),
            )

    @property
    def run_state(self) -> RunState:
        """Where the stream is: before any run, inside one, or after one ended."""
        if self._run_error:
            return "errored"
        if self._run_finished:
            return "finished"
        return "active" if self._run_started else "none"

    def open_items(self) -> OpenItems:
        """Everything the verifier holds open now (the run state and the open ids)."""
        return OpenItems(
            run=self.run_state,
            text_messages=tuple(self._text),
            tool_calls=tuple(self._tool_calls),
            reasoning_messages=tuple(self._reasoning_messages),
            reasoning_spans=tuple(self._reasoning_spans),
            steps=tuple(
                (name, None if owner is UNSET else owner)
                for owner, names in self._steps.items()
                for name in names
            ),
            subagents=tuple(self._subagents),
        )

    def owner(self, kind: OwnerKind, entity_id: str) -> str | None:
        """The owner recorded for an entity in the current run: a subagent run id, or
        ``None`` for the parent agent (or when nothing is recorded, or it was forgotten).

        ``kind`` is the table, as the reference keeps them: ``"message"`` (text and tool
        messages), ``"tool-call"``, ``"reasoning"`` (reasoning messages and spans, which
        share their ids' records) or ``"activity"``. The owner of an open item is always
        recorded.
        """
        table = {
            "message": self._message_owners,
            "tool-call": self._tool_call_owners,
            "reasoning": self._reasoning_owners,
            "activity": self._activity_owners,
        }[kind]
        owner = table.get(entity_id)
        return None if owner is None or owner is UNSET else owner

    def subagents(
        self,
    ) -> list[tuple[SubagentStartedEvent, SubagentFinishedEvent | SubagentErrorEvent | None]]:
        """The subagents of the current run that the verifier remembers, in the order they
        started: each one's ``SUBAGENT_STARTED`` and the ``SUBAGENT_FINISHED`` or
        ``SUBAGENT_ERROR`` that ended it (``None`` while it is active). Those finished
        longest ago are forgotten past ``max_closed_ids``. O(subagents) per call.
        """
        found: list[tuple[int, SubagentStartedEvent, _SubagentEnd | None]] = [
            (order, start, end) for (order, start), end in self._closed_subagents.values()
        ]
        found += [(order, start, None) for order, start in self._subagents.values()]
        found.sort(key=lambda entry: entry[0])
        return [(start, end) for _, start, end in found]

    # -----------------------------------------------------------------------------------------
    # Run lifecycle

    def _check_gate(self, kind: str) -> None:
        if self._run_error and kind != _RUN_STARTED:
            raise VerifyError(
                f"Cannot send event type '{kind}': The run has already errored with "
                "'RUN_ERROR'. No further events can be sent until a new run starts with "
                "'RUN_STARTED'.",
                rule="run.after-error",
            )
        if self._run_finished and kind != _RUN_ERROR and kind != _RUN_STARTED:
            raise VerifyError(
                f"Cannot send event type '{kind}': The run has already finished with "
                "'RUN_FINISHED'. Start a new run with 'RUN_STARTED'.",
                rule="run.after-finished",
            )
        if not self._seen_first and kind != _RUN_STARTED and kind != _RUN_ERROR:
            raise VerifyError(
                f"First event must be 'RUN_STARTED' (or 'RUN_ERROR'), not '{kind}'",
                rule="run.first-event",
            )

    def _update_gate(self) -> None:
        self._gate = gate = not self._seen_first or self._run_finished or self._run_error
        self.fast_passes = _NO_DELTA if gate else self._open_deltas

    def _run_started_event(self, ev: RunStartedEvent) -> None:
        if self._seen_first:
            if self._run_started and not self._run_finished and not self._run_error:
                raise VerifyError(
                    f"Cannot send 'RUN_STARTED' while a run is still active (run "
                    f"'{self._run_id}'; the new run is '{ev.run_id}'). The previous run must end "
                    "with 'RUN_FINISHED' or 'RUN_ERROR' before a new run starts.",
                    rule="run.already-active",
                )
            if self._run_finished or self._run_error:
                self._reset()
        self._seen_first = True
        self._run_started = True
        self._run_id = ev.run_id
        self._update_gate()
        if ev.input is not UNSET:
            self._seed(ev.input.messages, authoritative=False)

    def _renew(self) -> None:
        """Be as a new verifier with the same settings is (a pipeline kept for the next
        stream: see ``_durable``). The tables are cleared in place: the fast path's mappings
        hold them."""
        self._reset()
        self.forgotten_ids = 0
        self._seen_first = False
        self._run_started = False
        self._gate = True
        self._run_id = None
        self.fast_passes = _NO_DELTA

    def _reset(self) -> None:
        # One call per table, not a loop over a tuple of them: once per run.
        self._text.clear()
        self._tool_calls.clear()
        self._reasoning_spans.clear()
        self._reasoning_messages.clear()
        self._message_owners.clear()
        self._tool_call_owners.clear()
        self._activity_owners.clear()
        self._reasoning_owners.clear()
        self._steps.clear()
        self._subagents.clear()
        self._closed_subagents.clear()
        self._subagents_started = 0
        self._open_steps = 0
        self._forgot_in_run = self._forgot_messages = self._forgot_subagents = False
        self._run_finished = False
        self._run_error = False

    def _run_finished_event(self, ev: RunFinishedEvent) -> None:
        if (
            self._steps
            or self._text
            or self._reasoning_messages
            or self._reasoning_spans
            or self._tool_calls
            or self._subagents
        ):
            self._refuse_open()
        self._run_finished = True
        self._update_gate()

    def _refuse_open(self) -> None:
        """RUN_FINISHED with something open (a step, a message, a call...): say what, or
        return when nothing is (a step table whose owners hold no name)."""
        if any(self._steps.values()):
            steps = ", ".join(
                name if owner is UNSET else f"{name} (subagent '{owner}')"
                for owner, names in self._steps.items()
                for name in names
            )
            self._refuse_finish("steps", steps, "run.finished-open-steps")
        for label, ids, rule in (
            ("text messages", self._text, "run.finished-open-text-messages"),
            (
                "reasoning messages",
                self._reasoning_messages,
                "run.finished-open-reasoning-messages",
            ),
            ("reasoning spans", self._reasoning_spans, "run.finished-open-reasoning-spans"),
            ("tool calls", self._tool_calls, "run.finished-open-tool-calls"),
            ("subagents", self._subagents, "run.finished-open-subagents"),
        ):
            if ids:
                self._refuse_finish(label, ", ".join(ids), rule)

    @staticmethod
    def _refuse_finish(label: str, which: str, rule: str) -> None:
        raise VerifyError(
            f"Cannot send 'RUN_FINISHED' while {label} are still active: {which}", rule=rule
        )

    def _run_error_event(self, ev: RunErrorEvent) -> None:
        self._seen_first = True
        self._run_error = True
        self._update_gate()

    # -----------------------------------------------------------------------------------------
    # Ownership

    @staticmethod
    def _check_owner(
        kind: str, tag: _Owner, owner: _Owner | _Absent, entity: str, entity_id: str
    ) -> None:
        """A tagged event must agree with the recorded owner (when there is one)."""
        if tag is not UNSET and owner is not _ABSENT and owner != tag:
            raise VerifyError(
                f"Cannot send '{kind}': subagentRunId '{tag}' does not match the {entity} "
                f"'{entity_id}' opener's subagent '{_who(owner)}'.",
                rule="owner.mismatch",
            )

    # -----------------------------------------------------------------------------------------
    # Bounds: open items, and the records of closed ones

    def _room(self, kind: str, entity: str, entity_id: str) -> None:
        """Refuse to open one more item when ``max_open_items`` are open already."""
        limit = self.max_open_items
        if limit is None:
            return
        # The common case first, in a few bytecodes: room left (what ``counts`` below sums).
        if (
            len(self._text)
            + len(self._tool_calls)
            + len(self._reasoning_messages)
            + len(self._reasoning_spans)
            + self._open_steps
            + len(self._subagents)
            < limit
        ):
            return
        counts = (
            ("text messages", len(self._text)),
            ("tool calls", len(self._tool_calls)),
            ("reasoning messages", len(self._reasoning_messages)),
            ("reasoning spans", len(self._reasoning_spans)),
            ("steps", self._open_steps),
            ("subagents", len(self._subagents)),
        )
        total = sum(n for _, n in counts)
        if total < limit:
            return
        held = ", ".join(f"{label} {n:,}" for label, n in counts if n)
        raise VerifyError(
            f"Cannot send '{kind}' for {entity} '{entity_id}': {total:,} items are already "
            f"open in run '{self._run_id}' ({held}), the most this verifier holds "
            f"(Verify(max_open_items={limit})). Close some first, or raise the limit.",
            rule="limit.open-items",
        )

    def _record(self, table: _Owners, key: str, owner: _Owner) -> None:
        """Record an owner; past ``max_closed_ids`` closed ones, forget the oldest."""
        table[key] = owner
        limit = self.max_closed_ids
        if limit is not None and len(table) > limit:
            self._trim(table, limit)

    def _trim(self, table: _Owners, limit: int) -> None:
        if table is self._message_owners:
            opens: tuple[_Ids, ...] = (self._text,)
            entity = "message"
        elif table is self._tool_call_owners:
            opens, entity = (self._tool_calls,), "tool call"
        elif table is self._reasoning_owners:
            opens = (self._reasoning_messages, self._reasoning_spans)
            entity = "reasoning message"
        else:
            opens, entity = (), "activity"
        bound = limit + sum(len(ids) for ids in opens)
        while len(table) > bound:
            key, owner = table.popitem(last=False)
            if any(key in ids for ids in opens):
                table[key] = owner  # the owner of an open item is never forgotten
                continue
            if table is self._message_owners:
                self._forgot_messages = True
            self._forgot(entity, key)

    def _forgot(self, entity: str, key: str) -> None:
        """Count a forgotten record, and report the first of the run (severity ``"info"``)."""
        self.forgotten_ids += 1
        if self._forgot_in_run:
            return
        self._forgot_in_run = True
        self.ctx.report(
            "verify-forgot-ids",
            f"Run '{self._run_id}' has more than {self.max_closed_ids:,} closed {entity} ids "
            f"(Verify(max_closed_ids={self.max_closed_ids})): the verifier forgets the oldest "
            f"records from now on, starting with {entity} '{key}'. Until the run ends, an event "
            "that continues or reopens a forgotten id is not checked for ownership, a reused "
            "subagent id is not detected, and an unknown parent subagent is not rejected.",
            severity="info",
        )

    def _seed(self, messages: list[Message], *, authoritative: bool) -> None:
        """Record the owners of replayed messages (and of their tool calls)."""
        tool_call_owners = self._tool_call_owners
        record = self._record
        for msg in messages:
            if isinstance(msg, ReasoningMessage):
                bucket = self._reasoning_owners
            elif isinstance(msg, ActivityMessage):
                bucket = self._activity_owners
            else:
                bucket = self._message_owners
            owner = msg.subagent_run_id
            if authoritative or msg.id not in bucket:
                record(bucket, msg.id, owner)
            if isinstance(msg, AssistantMessage) and msg.tool_calls is not UNSET:
                for call in msg.tool_calls:
                    if authoritative or call.id not in tool_call_owners:
                        record(tool_call_owners, call.id, owner)

    def _messages_snapshot(self, ev: MessagesSnapshotEvent) -> None:
        self._seed(ev.messages, authoritative=True)

    # -----------------------------------------------------------------------------------------
    # Text messages

    def _text_start(self, ev: TextMessageStartEvent) -> None:
        mid = ev.message_id
        if mid in self._text:
            raise VerifyError(
                f"Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{mid}' is "
                "already in progress. Complete it with 'TEXT_MESSAGE_END' first.",
                rule="text.already-open",
            )
        tag = ev.subagent_run_id
        owner = self._message_owners.get(mid, _ABSENT)
        self._check_owner("TEXT_MESSAGE_START", tag, owner, "message", mid)
        self._room("TEXT_MESSAGE_START", "text message", mid)
        self._text[mid] = None
        if owner is _ABSENT:
            self._record(self._message_owners, mid, tag)

    def _text_continue(self, ev: TextMessageContentEvent | TextMessageEndEvent) -> None:
        mid = ev.message_id
        if mid not in self._text:
            raise VerifyError(
                f"Cannot send '{ev.type}' event: No active text message found with ID "
                f"'{mid}'. "
                + (
                    "Start a text message with 'TEXT_MESSAGE_START' first."
                    if ev.type == "TEXT_MESSAGE_CONTENT"
                    else "A 'TEXT_MESSAGE_START' event must be sent first."
                ),
                rule="text.not-open",
            )
        tag = ev.subagent_run_id
        if tag is not UNSET:
            self._check_owner(ev.type, tag, self._message_owners.get(mid, _ABSENT), "message", mid)

    def _text_end(self, ev: TextMessageEndEvent) -> None:
        self._text_continue(ev)
        del self._text[ev.message_id]

    # -----------------------------------------------------------------------------------------
    # Tool calls

    def _tool_call_start(self, ev: ToolCallStartEvent) -> None:
        tid = ev.tool_call_id
        if tid in self._tool_calls:
            raise VerifyError(
                f"Cannot send 'TOOL_CALL_START' event: A tool call with ID '{tid}' is already "
                "in progress. Complete it with 'TOOL_CALL_END' first.",
                rule="tool-call.already-open",
            )
        tag = ev.subagent_run_id
        parent = ev.parent_message_id
        inherited: _Owner | _Absent = _ABSENT
        if parent is not UNSET:
            inherited = self._message_owners.get(parent, _ABSENT)
            if inherited is not _ABSENT and tag is not UNSET and tag != inherited:
                raise VerifyError(
                    f"Cannot send 'TOOL_CALL_START': subagentRunId '{tag}' does not match its "
                    f"parent message '{parent}' owner '{_who(inherited)}'. A tool call belongs "
                    "to the message that carries it.",
                    rule="owner.tool-call-parent",
                )
        owner = self._tool_call_owners.get(tid, _ABSENT)
        if owner is not _ABSENT:
            self._check_owner("TOOL_CALL_START", tag, owner, "tool call", tid)
            if tag is UNSET and inherited is not _ABSENT and inherited != owner:
                raise VerifyError(
                    f"Cannot send 'TOOL_CALL_START': tool call '{tid}' is owned by "
                    f"'{_who(owner)}' but its parent message '{parent}' is owned by "
                    f"'{_who(inherited)}'. A tool call belongs to the message that carries it.",
                    rule="owner.tool-call-reparented",
                )
        self._room("TOOL_CALL_START", "tool call", tid)
        self._tool_calls[tid] = None
        if owner is _ABSENT:
            if tag is not UNSET:
                self._record(self._tool_call_owners, tid, tag)
            elif inherited is not _ABSENT:
                self._record(self._tool_call_owners, tid, inherited)
            elif parent is UNSET or not self._forgot_messages:
                self._record(self._tool_call_owners, tid, UNSET)
            # else: the parent message's owner may have been forgotten: record none (lenient).

    def _tool_call_continue(self, ev: ToolCallArgsEvent | ToolCallEndEvent) -> None:
        tid = ev.tool_call_id
        if tid not in self._tool_calls:
            raise VerifyError(
                f"Cannot send '{ev.type}' event: No active tool call found with ID '{tid}'. "
                + (
                    "Start a tool call with 'TOOL_CALL_START' first."
                    if ev.type == "TOOL_CALL_ARGS"
                    else "A 'TOOL_CALL_START' event must be sent first."
                ),
                rule="tool-call.not-open",
            )
        tag = ev.subagent_run_id
        if tag is not UNSET:
            owner = self._tool_call_owners.get(tid, _ABSENT)
            self._check_owner(ev.type, tag, owner, "tool call", tid)

    def _tool_call_end(self, ev: ToolCallEndEvent) -> None:
        self._tool_call_continue(ev)
        del self._tool_calls[ev.tool_call_id]

    def _tool_call_result(self, ev: ToolCallResultEvent) -> None:
        # It mints a tool message: the newest result's owner is recorded, whoever came before.
        self._record(self._message_owners, ev.message_id, ev.subagent_run_id)

    # -----------------------------------------------------------------------------------------
    # Reasoning: spans (REASONING_START/END) and messages (REASONING_MESSAGE_*) are opened and
    # closed separately (one id may name both), but share one owner record.

    def _reasoning_open(
        self, ev: ReasoningStartEvent | ReasoningMessageStartEvent, is_open: _Ids
    ) -> None:
        mid = ev.message_id
        if mid in is_open:
            if ev.type == "REASONING_START":
                raise VerifyError(
                    f"Cannot send 'REASONING_START' event: A reasoning span with ID '{mid}' is "
                    "already in progress. Complete it with 'REASONING_END' first.",
                    rule="reasoning-span.already-open",
                )
            raise VerifyError(
                f"Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID "
                f"'{mid}' is already in progress. Complete it with 'REASONING_MESSAGE_END' first.",
                rule="reasoning-message.already-open",
            )
        tag = ev.subagent_run_id
        owner = self._reasoning_owners.get(mid, _ABSENT)
        self._check_owner(ev.type, tag, owner, "reasoning message", mid)
        self._room(
            ev.type,
            "reasoning span" if ev.type == "REASONING_START" else "reasoning message",
            mid,
        )
        is_open[mid] = None
        if owner is _ABSENT:
            self._record(self._reasoning_owners, mid, tag)

    def _reasoning_continue(
        self,
        ev: ReasoningEndEvent | ReasoningMessageContentEvent | ReasoningMessageEndEvent,
        is_open: _Ids,
    ) -> None:
        mid = ev.message_id
        if mid not in is_open:
            if ev.type == "REASONING_END":
                raise VerifyError(
                    f"Cannot send 'REASONING_END' event: No active reasoning span found with ID "
                    f"'{mid}'. A 'REASONING_START' event must be sent first.",
                    rule="reasoning-span.not-open",
                )
            raise VerifyError(
                f"Cannot send '{ev.type}' event: No active reasoning message found with ID "
                f"'{mid}'. Start a reasoning message with 'REASONING_MESSAGE_START' first.",
                rule="reasoning-message.not-open",
            )
        tag = ev.subagent_run_id
        if tag is not UNSET:
            owner = self._reasoning_owners.get(mid, _ABSENT)
            self._check_owner(ev.type, tag, owner, "reasoning message", mid)

    def _reasoning_span_start(self, ev: ReasoningStartEvent) -> None:
        self._reasoning_open(ev, self._reasoning_spans)

    def _reasoning_message_start(self, ev: ReasoningMessageStartEvent) -> None:
        self._reasoning_open(ev, self._reasoning_messages)

    def _reasoning_message_continue(self, ev: ReasoningMessageContentEvent) -> None:
        self._reasoning_continue(ev, self._reasoning_messages)

    def _reasoning_message_end(self, ev: ReasoningMessageEndEvent) -> None:
        self._reasoning_continue(ev, self._reasoning_messages)
        del self._reasoning_messages[ev.message_id]

    def _reasoning_span_end(self, ev: ReasoningEndEvent) -> None:
        self._reasoning_continue(ev, self._reasoning_spans)
        del self._reasoning_spans[ev.message_id]

    def _encrypted_value(self, ev: ReasoningEncryptedValueEvent) -> None:
        tag = ev.subagent_run_id
        if tag is UNSET:
            return
        eid = ev.entity_id
        if ev.subtype == "tool-call":
            owner = self._tool_call_owners.get(eid, _ABSENT)
            self._check_owner(ev.type, tag, owner, "tool call", eid)
        else:  # "message": a text or a reasoning message (ids are unique per kind)
            owner = self._message_owners.get(eid, _ABSENT)
            if owner is _ABSENT:
                owner = self._reasoning_owners.get(eid, _ABSENT)
            self._check_owner(ev.type, tag, owner, "message", eid)

    # -----------------------------------------------------------------------------------------
    # Activity

    def _activity_snapshot(self, ev: ActivitySnapshotEvent) -> None:
        # Only a snapshot that (re)creates the activity (re)owns it; no check either way.
        mid = ev.message_id
        if ev.replace is not False or mid not in self._activity_owners:
            self._record(self._activity_owners, mid, ev.subagent_run_id)

    def _activity_delta(self, ev: ActivityDeltaEvent) -> None:
        tag = ev.subagent_run_id
        if tag is not UNSET:
            mid = ev.message_id
            owner = self._activity_owners.get(mid, _ABSENT)
            self._check_owner(ev.type, tag, owner, "activity", mid)

    # -----------------------------------------------------------------------------------------
    # Steps

    def _step_started(self, ev: StepStartedEvent) -> None:
        name, owner = ev.step_name, ev.subagent_run_id
        names = self._steps.get(owner)
        if names is not None and name in names:
            raise VerifyError(
                f"Step \"{name}\" is already active for 'STEP_STARTED'"
                + ("" if owner is UNSET else f" in subagent '{owner}'"),
                rule="step.already-open",
            )
        self._room("STEP_STARTED", "step", name)
        if names is None:
            names = self._steps[owner] = {}
        names[name] = None
        self._open_steps += 1

    def _step_finished(self, ev: StepFinishedEvent) -> None:
        name, owner = ev.step_name, ev.subagent_run_id
        names = self._steps.get(owner)
        if names is None or name not in names:
            for other, held in self._steps.items():
                if other != owner and name in held:
                    raise VerifyError(
                        f"Cannot send 'STEP_FINISHED' for step \"{name}\" attributed to "
                        f"{_step_owner(owner)}: that step is open under {_step_owner(other)}. "
                        "A step must be finished by whoever started it.",
                        rule="step.wrong-owner",
                    )
            raise VerifyError(
                f"Cannot send 'STEP_FINISHED' for step \"{name}\" that was not started"
                + ("" if owner is UNSET else f" by subagent '{owner}'"),
                rule="step.not-open",
            )
        del names[name]
        self._open_steps -= 1
        if not names:
            del self._steps[owner]

    # -----------------------------------------------------------------------------------------
    # Subagents

    def _subagent_started(self, ev: SubagentStartedEvent) -> None:
        sid = ev.subagent_run_id
        if sid in self._subagents:
            raise VerifyError(
                f"Cannot send 'SUBAGENT_STARTED': subagent '{sid}' is already active. Finish it "
                "with 'SUBAGENT_FINISHED' first.",
                rule="subagent.already-active",
            )
        if sid in self._closed_subagents:
            raise VerifyError(
                f"Cannot send 'SUBAGENT_STARTED': subagent '{sid}' has already finished in this "
                "run. Subagent IDs are per-invocation and cannot be reused.",
                rule="subagent.id-reused",
            )
        parent = ev.parent_subagent_run_id
        if (
            parent is not UNSET
            and parent not in self._subagents
            and parent not in self._closed_subagents
            and not self._forgot_subagents
        ):
            raise VerifyError(
                f"Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{parent}' has not been "
                f"started in this run (subagent '{sid}').",
                rule="subagent.unknown-parent",
            )
        self._room("SUBAGENT_STARTED", "subagent", sid)
        self._subagents[sid] = (self._subagents_started, ev)
        self._subagents_started += 1

    def _subagent_ended(self, ev: SubagentFinishedEvent | SubagentErrorEvent) -> None:
        sid = ev.subagent_run_id
        if sid not in self._subagents:
            raise VerifyError(
                f"Cannot send '{ev.type}': no active subagent found with ID '{sid}'. A "
                "'SUBAGENT_STARTED' event must be sent first.",
                rule="subagent.not-active",
            )
        closed = self._closed_subagents
        closed[sid] = (self._subagents.pop(sid), ev)
        limit = self.max_closed_ids
        if limit is not None and len(closed) > limit:
            forgotten, _ = closed.popitem(last=False)
            self._forgot_subagents = True
            self._forgot("subagent", forgotten)


def _step_owner(owner: _Owner) -> str:
    return "the parent agent" if owner is UNSET else f"subagent '{owner}'"


Verify.fast_feed = Verify.feed
_NO_DELTA: Final[Mapping[type, Container[str] | None]] = {}


#: The handler of each event type, by method name (see ``handler_table``).
_HANDLERS: Final[Mapping[str, str]] = {
    "TEXT_MESSAGE_START": "_text_start",
    "TEXT_MESSAGE_CONTENT": "_text_continue",
    "TEXT_MESSAGE_END": "_text_end",
    "TOOL_CALL_START": "_tool_call_start",
    "TOOL_CALL_ARGS": "_tool_call_continue",
    "TOOL_CALL_END": "_tool_call_end",
    "TOOL_CALL_RESULT": "_tool_call_result",
    "REASONING_START": "_reasoning_span_start",
    "REASONING_END": "_reasoning_span_end",
    "REASONING_MESSAGE_START": "_reasoning_message_start",
    "REASONING_MESSAGE_CONTENT": "_reasoning_message_continue",
    "REASONING_MESSAGE_END": "_reasoning_message_end",
    "REASONING_ENCRYPTED_VALUE": "_encrypted_value",
    "ACTIVITY_SNAPSHOT": "_activity_snapshot",
    "ACTIVITY_DELTA": "_activity_delta",
    "STEP_STARTED": "_step_started",
    "STEP_FINISHED": "_step_finished",
    "SUBAGENT_STARTED": "_subagent_started",
    "SUBAGENT_FINISHED": "_subagent_ended",
    "SUBAGENT_ERROR": "_subagent_ended",
    "MESSAGES_SNAPSHOT": "_messages_snapshot",
    "RUN_STARTED": "_run_started_event",
    "RUN_FINISHED": "_run_finished_event",
    "RUN_ERROR": "_run_error_event",
}
