"""The run ledger: what a stream says about its runs, recorded without changing the stream.

The specification gives the metadata of run, step, subagent, RAW and CUSTOM events no merge
destination: "A consumer MAY surface it (for example a run's RUN_FINISHED metadata in its own
ledger)". :class:`Ledger` is that consumer. It passes every item through untouched and keeps,
per run, a :class:`RunRecord`: the run's ids, the metadata of RUN_STARTED, RUN_FINISHED and
RUN_ERROR, the outcome (with the pending tool calls of a success, derived as the reference
client derives them, or the interrupts and their metadata), token usage as sent and summed per
provider and model, steps, subagent runs, the RAW and CUSTOM events, and event counts.

Where it sits: anywhere in a pipeline. It accepts events and anything carrying one in an
``.event`` attribute (the accumulator's ``Update``); other items pass through unrecorded.

How runs are delimited:

- a run opens at RUN_STARTED and ends at RUN_FINISHED or RUN_ERROR; ``on_run(record)`` is called
  when it ends, after the terminal event has gone downstream (the ledger emits first, records
  second: stages after the ledger see its state as of the previous item);
- a RUN_ERROR right after a RUN_FINISHED (the verifier allows it: "RUN_ERROR can happen at any
  time") belongs to the run that just finished: the record gets the error, its status becomes
  ``"error"`` and ``on_run`` is called again with the same record;
- events outside a run (a stream that starts with RUN_ERROR, or events before the first
  RUN_STARTED on an unverified stream) get a record of their own, without ids (RUN_FINISHED,
  which carries ids, fills them in); a RUN_STARTED while a run is open, and the end of the
  stream (:meth:`Ledger.close`), end the open record with status ``"incomplete"``.

Times: every run, step, subagent and tool call records when it started and ended, in
milliseconds since the Unix epoch: the event's own ``timestamp`` when it has one, else the time
the ledger received it (``clock``, :func:`time.time` by default), and says which (``"event"``
or ``"receipt"`` in the ``*_clock`` field beside each time). A record ended by the end of the
stream or by another RUN_STARTED takes the latest time the ledger knew in its run. The events
``expand_chunks`` synthesizes carry no ``timestamp`` (as the reference builds them); they are
timed by the chunk they come from (an END by the event that closed its stream), which
``expand_chunks`` puts in the context while it emits them, so a ledger behind it and one before
it give the same times.

Tool calls: each TOOL_CALL_START (or TOOL_CALL_CHUNK naming a new call) gets a
:class:`ToolCallRecord`: id, name, parent message, subagent, the size of its arguments, its
merged metadata, and the tool message its TOOL_CALL_RESULT created (id and metadata). Behind the
accumulator (``Update`` items), size and metadata are the store's own, as of TOOL_CALL_END;
on bare events they are the ledger's sum and merge of the TOOL_CALL_ARGS deltas it saw. When
the run ends, ``pending`` says whether the call is still waiting for its result: named by the
outcome's ``pendingToolCallIds`` when it names some, else not answered in the run.

Memory: the ledger keeps at most ``max_runs`` ended runs (the oldest are dropped and counted in
``dropped_runs``), plus the open one. Within a run, the step, subagent, tool-call, RAW and CUSTOM lists
keep at most ``max_entries`` entries each (the rest are counted in ``dropped_entries``); usage
lists are those the terminal events carry. The tool-call tally used to derive pending calls
holds the calls started and not yet answered, and the ids answered, at most ``max_entries`` of
each (see :mod:`agui_meta._tally`): a started call past it is not tracked (the derived pending
list holds the first ``max_entries``) and the oldest answered id is forgotten (a later start of
it would count as pending), each counted in ``dropped_entries``. The store's tool call behind a
record is held from its START to its END only. Per-run memory is therefore bounded by
``max_entries``, however many items the run has; ``max_entries=None`` bounds nothing.

Nothing is copied per event: records share the events' own metadata dicts, interrupts and
usage entries (treat them as read-only, like the events). A content event costs a dict lookup
(two when wrapped in an ``Update``) and a counter increment.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final, Literal, TypeVar, Union

import msgspec
from msgspec import UNSET, UnsetType

from ._events import (
    EVENT_TYPES,
    CustomEvent,
    Event,
    Interrupt,
    JsonValue,
    Metadata,
    RawEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    protocol_class,
)
from ._exceptions import UsageError
from ._metadata import MergedMetadata, enc_hook
from ._prices import PriceTable
from ._speedups import new_list
from ._stage import CONTENT_DELTAS, Transducer, default_context, handler_table
from ._tally import ToolCallTally
from ._tokens import Usage, aggregate_token_usage

__all__ = [
    "CustomRecord",
    "Ledger",
    "LedgerSnapshot",
    "RawRecord",
    "RunCancelled",
    "RunInterrupted",
    "RunOutcome",
    "RunRecord",
    "RunStatus",
    "RunSuccess",
    "StepRecord",
    "SubagentRecord",
    "TimeSource",
    "ToolCallRecord",
]

T = TypeVar("T")
_V = TypeVar("_V")

#: ``"running"`` while open; ``"finished"`` after RUN_FINISHED; ``"error"`` after RUN_ERROR;
#: ``"incomplete"`` when the stream ended, or another run started, before either.
RunStatus = Literal["running", "finished", "error", "incomplete"]
StepStatus = Literal["running", "finished", "incomplete"]
SubagentStatus = Literal["running", "finished", "error", "incomplete"]
#: ``"started"`` while its arguments stream; ``"ended"`` after TOOL_CALL_END; ``"answered"``
#: after its TOOL_CALL_RESULT; ``"incomplete"`` when the run ended before its TOOL_CALL_END.
ToolCallStatus = Literal["started", "ended", "answered", "incomplete"]
#: Where a time comes from: the event's ``timestamp``, or the time the ledger received it.
TimeSource = Literal["event", "receipt"]


# ---------------------------------------------------------------------------------------------
# Records


def _encoded(value: _V) -> _V:
    """A field default that the records' ``omit_defaults`` still encodes.

    msgspec omits a field at its default only when it can tell: a plain default, or an empty
    list, dict or set from those factories; never a value from another factory. So absent
    fields (``None``) are omitted from ``to_json()`` while ``"status": "running"``, ``0``
    counts and empty lists are written, as they always were.
    """
    return msgspec.field(default_factory=lambda: value)


def _listed(*parts: Iterable[_V]) -> list[_V]:
    """The items of ``parts`` in a list of :func:`new_list`'s, for a record to hold."""
    out = new_list()
    for part in parts:
        out.extend(part)
    return out


def new_dict() -> dict[str, Any]:
    """An empty dict default that is still encoded (see :func:`_encoded`)."""
    return {}


class _Record(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """Shared configuration: camelCase JSON; absent fields are ``None``, omitted from JSON.

    No record field has ``null`` as a value of its own: a ``result`` is a JSON value other
    than ``null`` (the protocol's type; a ``null`` on the wire is read as absent).

    Records are not tracked by the cyclic garbage collector (``gc=False``): a record holds
    JSON values and other records, never itself or its ledger, so it cannot be part of a
    reference cycle, and a process that keeps many ledgers has that many fewer objects for
    each collection to walk.
    """

    def to_json(self) -> bytes:
        """This record as JSON, in ``bytes`` (UTF-8): camelCase, absent fields omitted,
        metadata exactly as sent. ``msgspec.json.decode(data, type=...)`` reads it back."""
        return _ENCODER.encode(self)

    def to_builtins(self) -> dict[str, Any]:
        """This record as a ``dict`` of JSON types (``json.dumps`` takes it), shaped like
        :meth:`to_json`."""
        result: dict[str, Any] = msgspec.to_builtins(self, enc_hook=enc_hook)
        return result


class RunSuccess(_Record, tag_field="type", tag="success", kw_only=True):
    """The run finished with success (an absent outcome means success).

    ``pending_tool_call_ids`` is what the reference client hands its subscribers: the list the
    outcome names, if it names a non-empty one (``pending_from="outcome"``); otherwise the call
    ids that TOOL_CALL_START (or a TOOL_CALL_CHUNK) opened in this run and no TOOL_CALL_RESULT
    answered, in order of first appearance (``pending_from="stream"``).
    """

    type: ClassVar[str] = "success"
    result: JsonValue | None = None
    pending_tool_call_ids: list[str] = msgspec.field(default_factory=new_list)
    pending_from: Literal["outcome", "stream"] = _encoded("stream")


class RunInterrupted(_Record, tag_field="type", tag="interrupt", kw_only=True):
    """The run stopped on interrupts: the outcome's interrupts, as sent (with their metadata)."""

    type: ClassVar[str] = "interrupt"
    result: JsonValue | None = None
    interrupts: list[Interrupt] = msgspec.field(default_factory=new_list)


class RunCancelled(_Record, tag_field="type", tag="cancelled", kw_only=True):
    """The run was cancelled."""

    type: ClassVar[str] = "cancelled"
    result: JsonValue | None = None


RunOutcome = Union[RunSuccess, RunInterrupted, RunCancelled]


class StepRecord(_Record, kw_only=True):
    """A step: STEP_STARTED and the STEP_FINISHED with the same name and subagent tag.

    A STEP_FINISHED with no open step to match gets a record of its own, without start fields.
    ``*_index`` is the index of the event in the pipeline's source stream (``-1`` when the ledger
    is fed outside a pipeline).
    """

    name: str
    subagent_run_id: str | None = None
    status: StepStatus = _encoded("running")
    started_index: int | None = None
    finished_index: int | None = None
    started_metadata: Metadata | None = None
    finished_metadata: Metadata | None = None
    started_at: float | None = None
    started_clock: TimeSource | None = None
    ended_at: float | None = None
    ended_clock: TimeSource | None = None


class SubagentRecord(_Record, kw_only=True):
    """A subagent run: SUBAGENT_STARTED and the SUBAGENT_FINISHED or SUBAGENT_ERROR for its id.

    ``outcome`` is ``"success"`` (also when the event names none) or ``"suspended"`` (with the
    ``interrupt_ids`` it names). A FINISHED or ERROR for an id not started in this run gets a
    record without start fields.
    """

    subagent_run_id: str
    name: str | None = None
    description: str | None = None
    parent_subagent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    parent_message_id: str | None = None
    status: SubagentStatus = _encoded("running")
    started_index: int | None = None
    ended_index: int | None = None
    started_metadata: Metadata | None = None
    finished_metadata: Metadata | None = None
    error_metadata: Metadata | None = None
    outcome: Literal["success", "suspended"] | None = None
    interrupt_ids: list[str] | None = None
    result: JsonValue | None = None
    error_message: str | None = None
    error_code: str | None = None
    started_at: float | None = None
    started_clock: TimeSource | None = None
    ended_at: float | None = None
    ended_clock: TimeSource | None = None


class ToolCallRecord(_Record, kw_only=True):
    """A tool call of the run: TOOL_CALL_START, its arguments, TOOL_CALL_END and its result.

    ``arguments_length`` counts the characters (code points) of the arguments. ``metadata`` is
    the call's merged metadata (START, ARGS and END merged as the store merges them);
    ``result_message_id`` and ``result_metadata`` are those of the tool message its
    TOOL_CALL_RESULT created. ``pending`` is set when the run ends (see the module). A
    TOOL_CALL_RESULT for a call not started in this run gets a record without start fields.
    """

    tool_call_id: str
    name: str | None = None
    parent_message_id: str | None = None
    subagent_run_id: str | None = None
    status: ToolCallStatus = _encoded("started")
    pending: bool = _encoded(False)
    arguments_length: int = _encoded(0)
    metadata: Metadata | None = None
    result_message_id: str | None = None
    result_metadata: Metadata | None = None
    started_index: int | None = None
    ended_index: int | None = None
    result_index: int | None = None
    started_at: float | None = None
    started_clock: TimeSource | None = None
    ended_at: float | None = None
    ended_clock: TimeSource | None = None
    result_at: float | None = None
    result_clock: TimeSource | None = None


class RawRecord(_Record, kw_only=True):
    """A RAW event: where it was, its source and tag, and its metadata (not its payload)."""

    index: int
    source: str | None = None
    subagent_run_id: str | None = None
    metadata: Metadata | None = None


class CustomRecord(_Record, kw_only=True):
    """A CUSTOM event: where it was, its name and tag, and its metadata (not its value)."""

    index: int
    name: str
    subagent_run_id: str | None = None
    metadata: Metadata | None = None


class RunRecord(_Record, kw_only=True):
    """Everything the ledger knows about one run. Mutable while the run is open.

    ``thread_id``/``run_id`` are ``None`` on a record that no RUN_STARTED or RUN_FINISHED
    named (events outside a run). ``usage`` holds the entries of RUN_FINISHED and RUN_ERROR as
    sent (each a :class:`~agui_meta.Usage`: ``None`` for what was absent), ``aggregated_usage``
    their sum per provider and model (:func:`~agui_meta.aggregate_token_usage`); ``cost``
    their cost by the ledger's price table (``prices=``; the sum of the entries it prices,
    ``None`` without a table or when it prices none).
    ``event_counts`` counts the run's events by type, in order of first appearance.
    The input echoed by RUN_STARTED and the values of RAW and CUSTOM events are not kept.
    """

    thread_id: str | None = None
    run_id: str | None = None
    parent_run_id: str | None = None
    protocol_version: str | None = None
    status: RunStatus = _encoded("running")
    started_index: int | None = None
    finished_index: int | None = None
    error_index: int | None = None
    started_metadata: Metadata | None = None
    finished_metadata: Metadata | None = None
    error_metadata: Metadata | None = None
    outcome: RunOutcome | None = None
    error_message: str | None = None
    error_code: str | None = None
    usage: list[Usage] = msgspec.field(default_factory=new_list)
    aggregated_usage: list[Usage] = msgspec.field(default_factory=new_list)
    cost: float | None = None
    steps: list[StepRecord] = msgspec.field(default_factory=new_list)
    subagents: list[SubagentRecord] = msgspec.field(default_factory=new_list)
    tool_calls: list[ToolCallRecord] = msgspec.field(default_factory=new_list)
    raw_events: list[RawRecord] = msgspec.field(default_factory=new_list)
    custom_events: list[CustomRecord] = msgspec.field(default_factory=new_list)
    event_counts: dict[str, int] = msgspec.field(default_factory=new_dict)
    dropped_entries: int = _encoded(0)
    started_at: float | None = None
    started_clock: TimeSource | None = None
    ended_at: float | None = None
    ended_clock: TimeSource | None = None


class LedgerSnapshot(_Record, kw_only=True):
    """The ledger as data: the runs kept, oldest first (the open one last), and the drop count.

    ``msgspec.json.decode(ledger.to_json(), type=LedgerSnapshot)`` reads it back.
    """

    runs: list[RunRecord] = msgspec.field(default_factory=new_list)
    dropped_runs: int = _encoded(0)


_ENCODER = msgspec.json.Encoder(enc_hook=enc_hook)  # merged metadata as its object
_EVENT_CLASSES = frozenset(EVENT_TYPES.values())
_RECORDED = frozenset(
    {
        RunStartedEvent,
        RunFinishedEvent,
        RunErrorEvent,
        StepStartedEvent,
        StepFinishedEvent,
        SubagentStartedEvent,
        SubagentFinishedEvent,
        SubagentErrorEvent,
        RawEvent,
        CustomEvent,
        ToolCallStartEvent,
        ToolCallChunkEvent,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
    }
)
#: The events the ledger only counts, with their wire type.
_PLAIN: dict[type, str] = {cls: cls.type for cls in _EVENT_CLASSES if cls not in _RECORDED}


def ledger_counts(cls: type) -> str | None:
    """The type under which :meth:`Ledger.feed` only counts events of class ``cls`` in the
    open run (``None``: it records them, with a handler)."""
    return _PLAIN.get(cls)


def _discard(item: Any) -> None:
    pass


def _plain(metadata: Any) -> Any:
    """A store item's merged metadata as a plain dict of the record's own (``None`` if none).

    Taken at a tool call's START, END and the run's end only (O(keys) each), so that a record
    is plain data that any msgspec encoder writes, with or without the store's ``enc_hook``.
    """
    if metadata is None or isinstance(metadata, UnsetType):
        return None
    if type(metadata) is MergedMetadata:
        return metadata._plain_dict()
    return dict(metadata)


def _opt(value: _V | UnsetType) -> _V | None:
    """A wire field's value, ``None`` for absent (``UNSET``): what the records hold."""
    return None if isinstance(value, UnsetType) else value


def _result(value: JsonValue | UnsetType) -> JsonValue | None:
    """A wire ``result``, ``None`` for absent (never ``null`` itself: see ``JsonValue``)."""
    return None if isinstance(value, UnsetType) else value


def _now_ms() -> float:
    return time.time() * 1000.0


def _event_of(item: object) -> Event | None:
    """The event an item is or carries (``.event``), or None."""
    if isinstance(item, Event):
        return item
    event = getattr(item, "event", None)
    return event if isinstance(event, Event) else None


def _event_class(cls: type[Event]) -> type[Event]:
    """The AG-UI event class of ``cls`` (itself, or the one it subclasses)."""
    return protocol_class(cls) or cls


# ---------------------------------------------------------------------------------------------
# The stage


class Ledger(Transducer[T, T]):
    """A pass-through stage that records run metadata. See the module documentation.

    ``on_run(record)`` is called when a run ends: at RUN_FINISHED or RUN_ERROR, again when a
    RUN_ERROR follows its RUN_FINISHED, and with status ``"incomplete"`` when another
    RUN_STARTED or the end of the stream comes first. Exceptions it raises propagate.

    A ledger can also be fed directly (``feed(event)`` then ``close()``) outside a pipeline;
    event indexes are then ``-1``. ``clock()`` gives the time of receipt, in milliseconds since
    the Unix epoch, for events without a ``timestamp``. ``prices`` (a
    :class:`~agui_meta.PriceTable`) gives each run's usage a ``cost``.
    """

    def __init__(
        self,
        on_run: Callable[[RunRecord], object] | None = None,
        *,
        max_runs: int = 1000,
        max_entries: int | None = 10_000,
        clock: Callable[[], float] | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        if max_runs < 0:
            raise UsageError(f"max_runs must be >= 0, got {max_runs}")
        if max_entries is not None and max_entries < 0:
            raise UsageError(f"max_entries must be >= 0 or None, got {max_entries}")
        self.on_run = on_run
        #: The price table that gives each run its ``cost`` (``None``: no cost).
        self.prices = prices
        self.max_runs = max_runs
        self.max_entries = max_entries
        self.emit = _discard
        self.ctx = default_context()
        # Behind the accumulator: the store's own tool call of each record, read at its end.
        self._live: dict[str, Any] = {}
        # The fast path's candidates while a run is open: the deltas only counted, and the
        # arguments of a live call (its record reads the store's call at the end instead).
        self._passes: Mapping[type, Container[str] | None] = {
            **_EVERY_DELTA,
            ToolCallArgsEvent: self._live,
        }
        self._clock = clock or _now_ms
        self._handlers: dict[type, Callable[[Ledger[Any], Any], None]] = handler_table(
            type(self), _HANDLERS
        )
        self._renew()

    def _renew(self) -> None:
        """The state of one stream, as a new ledger starts it; called again to make a ledger
        as new (a pipeline kept for the next stream: see ``_durable``): no run kept or open,
        nothing learnt. ``_live`` is cleared in place (the fast path's mapping holds it)."""
        #: Ended runs dropped to respect ``max_runs``.
        self.dropped_runs = 0
        self._ended: deque[RunRecord] = deque(maxlen=self.max_runs)
        self._current: RunRecord | None = None
        self._counts: dict[str, int] | None = None  # the open run's event_counts
        # Classes of items seen carrying an event in ``.event`` (the accumulator's Update).
        self._wrappers: set[type] = set()
        # The record a trailing RUN_ERROR amends: the last run, while it ended with RUN_FINISHED
        # and nothing came after it.
        self._amendable: RunRecord | None = None
        # () when none (a shared empty tuple: not an object per run for the collector to walk).
        self._pending_interrupts: Sequence[Interrupt] = ()
        # Per open run: the tool-call tally (bounded like the lists), open steps and subagents.
        self._tally = ToolCallTally(self.max_entries)
        self._open_steps: dict[tuple[str | UnsetType, str], StepRecord] = {}
        self._open_subagents: dict[str, SubagentRecord] = {}
        self._tools: dict[str, ToolCallRecord] = {}  # this run's tool calls, by id
        self._live.clear()
        self.fast_passes: Mapping[type, Container[str] | None] = _NO_DELTA
        self.fast_tally = None
        # The latest time known in the open run (and its source), for records the stream ends.
        self._latest: tuple[float, TimeSource] | None = None
        self._item: object = None  # the item being observed (an event, or an Update)

    # -- reading ---------------------------------------------------------------------------

    @property
    def runs(self) -> list[RunRecord]:
        """The runs kept, oldest first; the open run, if any, is last."""
        runs = list(self._ended)
        if self._current is not None:
            runs.append(self._current)
        return runs

    @property
    def current(self) -> RunRecord | None:
        """The open run, or None between runs."""
        return self._current

    @property
    def pending_interrupts(self) -> list[Interrupt]:
        """The interrupts of the last RUN_FINISHED (empty unless its outcome was an interrupt).

        Like the reference client's ``agent.pendingInterrupts``.
        """
        return list(self._pending_interrupts)

    def snapshot(self) -> LedgerSnapshot:
        """The ledger as one Struct (records are shared, not copied)."""
        return LedgerSnapshot(runs=self.runs, dropped_runs=self.dropped_runs)

    def to_json(self) -> bytes:
        """The ledger as JSON, in ``bytes`` (UTF-8): ``{"runs": [...], "droppedRuns": n}``,
        camelCase, absent fields omitted, metadata exactly as sent (``null`` values, integers
        of any size). ``ledger.snapshot().to_json()`` is the same."""
        return _ENCODER.encode(self.snapshot())

    def to_builtins(self) -> dict[str, Any]:
        """The ledger as a ``dict`` of JSON types (``json.dumps`` takes it), shaped like
        :meth:`to_json`."""
        return self.snapshot().to_builtins()

    # -- the stage -------------------------------------------------------------------------

    # The fast path (see ``_stage``): while a run is open, every content delta, bare or in an
    # Update, passes and is counted in the run's event counts, but the TOOL_CALL_ARGS of a
    # call whose store item the ledger does not hold (it sums those itself).
    fast_wrapped = True

    def feed(self, item: T) -> None:
        self.emit(item)
        # The common case (a content event, bare or wrapped in a known wrapper such as
        # Update): one set test, one lookup and a count.
        event: Any = item.event if type(item) in self._wrappers else item  # type: ignore[attr-defined]
        kind = _PLAIN.get(type(event))
        if kind is None:
            handler = self._handlers.get(type(event))
            if handler is None:
                self._observe(item, event)
                return
            self._item = item
            handler(self, event)
            # Let go of it: the last event's update is not kept while the stream waits.
            self._item = None
            return
        counts = self._counts
        if counts is None:
            counts = self._open().event_counts
        counts[kind] = counts.get(kind, 0) + 1

    def _observe(self, item: object, event: object) -> None:
        """The events the ledger records (and wrappers and subclasses seen the first time)."""
        self._item = item
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(self, event)
            self._item = None
            return
        if not isinstance(event, Event):
            found = _event_of(item)
            if found is None:
                self._item = None
                return
            self._wrappers.add(type(item))
            event = found
        cls = _event_class(type(event))
        handler = self._handlers.get(cls)
        if handler is not None:
            handler(self, event)
        else:
            self._counted(cls.type)
        self._item = None

    def close(self) -> None:
        """End the open run, if any, as ``"incomplete"`` (calls ``on_run``). Idempotent."""
        if self._current is not None:
            self._end(self._current, "incomplete")

    # -- runs ------------------------------------------------------------------------------

    def _open(self, record: RunRecord | None = None) -> RunRecord:
        """Make ``record`` (a new id-less record by default) the open run."""
        if record is None:
            record = RunRecord()
        self._current = record
        self._counts = record.event_counts
        # While a run is open (see fast_wrapped above): text and reasoning deltas, and the
        # arguments of the calls whose store item is live, counted in the run's counts.
        self.fast_passes = self._passes
        self.fast_tally = self._counts
        self._amendable = None
        return record

    def _counted(self, kind: str) -> RunRecord:
        """The open run (opened if none), with one more event of ``kind`` counted."""
        record = self._current or self._open()
        counts = record.event_counts
        counts[kind] = counts.get(kind, 0) + 1
        return record

    def _time(self, event: Event) -> tuple[float, TimeSource]:
        """When ``event`` happened: its ``timestamp``, else now; remembered as the latest."""
        stamp: Any = event.timestamp
        # An event synthesized from a chunk: the chunk's time (see ``Context.timestamp``).
        if stamp is UNSET:
            stamp = self.ctx.timestamp
        when: tuple[float, TimeSource] = (
            (self._clock(), "receipt") if stamp is None else (stamp, "event")
        )
        self._latest = when
        return when

    def _end(self, record: RunRecord, status: RunStatus) -> None:
        if record.ended_at is None and self._latest is not None:
            record.ended_at, record.ended_clock = self._latest
        self._end_tools(record)
        record.status = status
        for step in self._open_steps.values():
            step.status = "incomplete"
        for sub in self._open_subagents.values():
            sub.status = "incomplete"
        self._open_steps.clear()
        self._open_subagents.clear()
        self._tally.reset()
        self._latest = None
        self._current = None
        self._counts = None
        self.fast_passes = _NO_DELTA
        self.fast_tally = None
        if len(self._ended) == self.max_runs:
            self.dropped_runs += 1
        self._ended.append(record)
        if self.on_run is not None:
            self.on_run(record)

    def _keep(self, record: RunRecord, entries: list[Any], entry: Any) -> bool:
        """Append ``entry`` unless the run's list is full (then count it as dropped)."""
        if self.max_entries is not None and len(entries) >= self.max_entries:
            record.dropped_entries += 1
            return False
        entries.append(entry)
        return True

    def _add_usage(self, record: RunRecord, usage: list[TokenUsage] | UnsetType) -> None:
        if isinstance(usage, UnsetType):
            return
        record.usage = _listed(record.usage, map(Usage.from_wire, usage))
        record.aggregated_usage = _listed(aggregate_token_usage(record.usage))
        if self.prices is not None:
            record.cost = self.prices.total(record.aggregated_usage)

    def _run_started(self, event: RunStartedEvent) -> None:
        if self._current is not None:
            self._end(self._current, "incomplete")
        started_at, started_clock = self._time(event)
        record = self._open(
            RunRecord(
                thread_id=event.thread_id,
                run_id=event.run_id,
                parent_run_id=(None if event.parent_run_id is UNSET else event.parent_run_id),
                protocol_version=(
                    None if event.protocol_version is UNSET else event.protocol_version
                ),
                started_index=self.ctx.index,
                started_metadata=(None if event.metadata is UNSET else event.metadata),
                started_at=started_at,
                started_clock=started_clock,
            )
        )
        record.event_counts["RUN_STARTED"] = 1

    def _run_finished(self, event: RunFinishedEvent) -> None:
        if self._current is None:
            # A RUN_FINISHED outside a run still names one.
            record = self._open(RunRecord(thread_id=event.thread_id, run_id=event.run_id))
        else:
            record = self._current
            if record.run_id is None:
                record.thread_id = event.thread_id
                record.run_id = event.run_id
        counts = record.event_counts
        counts["RUN_FINISHED"] = counts.get("RUN_FINISHED", 0) + 1
        record.finished_index = self.ctx.index
        record.finished_metadata = _opt(event.metadata)
        record.ended_at, record.ended_clock = self._time(event)
        outcome = event.outcome
        outcome_record: RunOutcome
        if isinstance(outcome, RunFinishedInterruptOutcome):
            outcome_record = RunInterrupted(
                result=_result(event.result), interrupts=_listed(outcome.interrupts)
            )
            self._pending_interrupts = outcome_record.interrupts
        elif isinstance(outcome, RunFinishedCancelledOutcome):
            outcome_record = RunCancelled(result=_result(event.result))
            self._pending_interrupts = ()
        else:
            named = UNSET if isinstance(outcome, UnsetType) else outcome.pending_tool_call_ids
            if isinstance(named, list) and named:
                outcome_record = RunSuccess(
                    result=_result(event.result),
                    pending_tool_call_ids=_listed(named),
                    pending_from="outcome",
                )
            else:
                outcome_record = RunSuccess(
                    result=_result(event.result),
                    pending_tool_call_ids=_listed(self._tally.pending()),
                )
            self._pending_interrupts = ()
        record.outcome = outcome_record
        self._add_usage(record, event.usage)
        self._end(record, "finished")
        self._amendable = record

    def _run_error(self, event: RunErrorEvent) -> None:
        record = self._current
        if record is None:
            record = self._amendable
            if record is None:
                record = self._open()
        self._amendable = None
        counts = record.event_counts
        counts["RUN_ERROR"] = counts.get("RUN_ERROR", 0) + 1
        record.error_index = self.ctx.index
        record.error_metadata = _opt(event.metadata)
        record.ended_at, record.ended_clock = self._time(event)
        record.error_message = event.message
        record.error_code = _opt(event.code)
        self._add_usage(record, event.usage)
        if record is self._current:
            self._end(record, "error")
        else:
            # The run already ended with RUN_FINISHED: amend it and report it again.
            record.status = "error"
            if self.on_run is not None:
                self.on_run(record)

    # -- steps, subagents, RAW, CUSTOM, tool calls -----------------------------------------

    def _step_started(self, event: StepStartedEvent) -> None:
        record = self._counted("STEP_STARTED")
        started_at, started_clock = self._time(event)
        step = StepRecord(
            name=event.step_name,
            subagent_run_id=(None if event.subagent_run_id is UNSET else event.subagent_run_id),
            started_index=self.ctx.index,
            started_metadata=(None if event.metadata is UNSET else event.metadata),
            started_at=started_at,
            started_clock=started_clock,
        )
        if self._keep(record, record.steps, step):
            self._open_steps[(event.subagent_run_id, event.step_name)] = step

    def _step_finished(self, event: StepFinishedEvent) -> None:
        record = self._counted("STEP_FINISHED")
        when = self._time(event)
        step = self._open_steps.pop((event.subagent_run_id, event.step_name), None)
        if step is None:
            step = StepRecord(
                name=event.step_name,
                subagent_run_id=(None if event.subagent_run_id is UNSET else event.subagent_run_id),
            )
            if not self._keep(record, record.steps, step):
                return
        step.status = "finished"
        step.finished_index = self.ctx.index
        step.finished_metadata = None if event.metadata is UNSET else event.metadata
        step.ended_at, step.ended_clock = when

    def _subagent_started(self, event: SubagentStartedEvent) -> None:
        record = self._counted("SUBAGENT_STARTED")
        sub = SubagentRecord(
            subagent_run_id=event.subagent_run_id,
            name=event.name,
            description=_opt(event.description),
            parent_subagent_run_id=_opt(event.parent_subagent_run_id),
            parent_tool_call_id=_opt(event.parent_tool_call_id),
            parent_message_id=_opt(event.parent_message_id),
            started_index=self.ctx.index,
            started_metadata=_opt(event.metadata),
        )
        sub.started_at, sub.started_clock = self._time(event)
        if self._keep(record, record.subagents, sub):
            self._open_subagents[event.subagent_run_id] = sub

    def _subagent_ended(
        self, record: RunRecord, subagent_run_id: str, event: Event
    ) -> SubagentRecord | None:
        when = self._time(event)
        sub = self._open_subagents.pop(subagent_run_id, None)
        if sub is None:
            sub = SubagentRecord(subagent_run_id=subagent_run_id)
            if not self._keep(record, record.subagents, sub):
                return None
        sub.ended_index = self.ctx.index
        sub.ended_at, sub.ended_clock = when
        return sub

    def _subagent_finished(self, event: SubagentFinishedEvent) -> None:
        record = self._counted("SUBAGENT_FINISHED")
        sub = self._subagent_ended(record, event.subagent_run_id, event)
        if sub is None:
            return
        sub.status = "finished"
        sub.finished_metadata = _opt(event.metadata)
        sub.result = _result(event.result)
        outcome = event.outcome
        if isinstance(outcome, SubagentFinishedSuspendedOutcome):
            sub.outcome = "suspended"
            sub.interrupt_ids = _opt(outcome.interrupt_ids)
        else:
            sub.outcome = "success"

    def _subagent_error(self, event: SubagentErrorEvent) -> None:
        record = self._counted("SUBAGENT_ERROR")
        sub = self._subagent_ended(record, event.subagent_run_id, event)
        if sub is None:
            return
        sub.status = "error"
        sub.error_metadata = _opt(event.metadata)
        sub.error_message = event.message
        sub.error_code = _opt(event.code)

    def _raw(self, event: RawEvent) -> None:
        record = self._counted("RAW")
        self._keep(
            record,
            record.raw_events,
            RawRecord(
                index=self.ctx.index,
                source=_opt(event.source),
                subagent_run_id=_opt(event.subagent_run_id),
                metadata=_opt(event.metadata),
            ),
        )

    def _custom(self, event: CustomEvent) -> None:
        record = self._counted("CUSTOM")
        self._keep(
            record,
            record.custom_events,
            CustomRecord(
                index=self.ctx.index,
                name=event.name,
                subagent_run_id=_opt(event.subagent_run_id),
                metadata=_opt(event.metadata),
            ),
        )

    def _tool_call_start(self, event: ToolCallStartEvent) -> None:
        record = self._counted("TOOL_CALL_START")
        self._tally_start(record, event.tool_call_id)
        tool = self._tool_started(record, event.tool_call_id, event)
        if tool is not None:
            tool.name = event.tool_call_name
            tool.parent_message_id = _opt(event.parent_message_id)
            self._tool_metadata(tool, event)

    def _tool_call_chunk(self, event: ToolCallChunkEvent) -> None:
        # Before chunk expansion: a chunk naming a call opens it (or continues it).
        record = self._counted("TOOL_CALL_CHUNK")
        call_id = event.tool_call_id
        if isinstance(call_id, UnsetType):
            return
        self._tally_start(record, call_id)
        tool = self._tools.get(call_id)
        if tool is None:
            tool = self._tool_started(record, call_id, event)
            if tool is None:
                return
            tool.name = _opt(event.tool_call_name)
            tool.parent_message_id = _opt(event.parent_message_id)
        if not isinstance(event.delta, UnsetType):
            tool.arguments_length += len(event.delta)
        self._tool_metadata(tool, event)

    def _tool_call_args(self, event: ToolCallArgsEvent) -> None:
        # Behind the accumulator, the store's tool call is read at the end instead (the fused
        # path counts these deltas without the ledger seeing them).
        self._counted("TOOL_CALL_ARGS")
        tool = self._tools.get(event.tool_call_id)
        if tool is not None and event.tool_call_id not in self._live:
            tool.arguments_length += len(event.delta)
            self._tool_metadata(tool, event)

    def _tool_call_end(self, event: ToolCallEndEvent) -> None:
        self._counted("TOOL_CALL_END")
        when = self._time(event)
        tool = self._tools.get(event.tool_call_id)
        if tool is None:
            return
        if tool.status == "started":
            tool.status = "ended"
        tool.ended_index = self.ctx.index
        tool.ended_at, tool.ended_clock = when
        live = self._live.pop(event.tool_call_id, None)
        if live is None:
            self._tool_metadata(tool, event)
        else:  # read once, then let go: an ended call costs the ledger its record only
            self._sync(tool, live)

    def _tool_call_result(self, event: ToolCallResultEvent) -> None:
        record = self._counted("TOOL_CALL_RESULT")
        if not self._tally.answer(event.tool_call_id):
            record.dropped_entries += 1
        when = self._time(event)
        tool = self._tools.get(event.tool_call_id)
        if tool is None:
            tool = ToolCallRecord(tool_call_id=event.tool_call_id)
            if not self._keep(record, record.tool_calls, tool):
                return
            self._tools[event.tool_call_id] = tool
        tool.status = "answered"
        tool.result_message_id = event.message_id
        tool.result_index = self.ctx.index
        tool.result_at, tool.result_clock = when
        item = self._item
        tool.result_metadata = (
            _opt(event.metadata)
            if item is event
            else _plain(getattr(item, "metadata", event.metadata))
        )

    def _tally_start(self, record: RunRecord, call_id: str) -> None:
        """Count a started call in the run's tally (one it cannot track is a dropped entry)."""
        if not self._tally.start(call_id):
            record.dropped_entries += 1

    def _tool_started(self, record: RunRecord, call_id: str, event: Event) -> ToolCallRecord | None:
        """The record of call ``call_id`` (a new one, kept if the run's list has room)."""
        when = self._time(event)
        tool = self._tools.get(call_id)
        if tool is not None:  # a START repeated in the same run
            live = getattr(self._item, "item", None)
            if hasattr(live, "arguments"):  # the store's call again, read at its next END
                self._live[call_id] = live
            return tool
        tool = ToolCallRecord(
            tool_call_id=call_id,
            subagent_run_id=_opt(getattr(event, "subagent_run_id", None)),
            started_index=self.ctx.index,
            started_at=when[0],
            started_clock=when[1],
        )
        if not self._keep(record, record.tool_calls, tool):
            return None
        self._tools[call_id] = tool
        live = getattr(self._item, "item", None)
        if hasattr(live, "arguments"):  # an Update with the store's tool call
            self._live[call_id] = live
        return tool

    @staticmethod
    def _sync(tool: ToolCallRecord, live: Any) -> None:
        """Size and merged metadata from the store's tool call."""
        arguments = live.arguments
        if isinstance(arguments, str):
            tool.arguments_length = len(arguments)
        tool.metadata = _plain(live.metadata)

    def _tool_metadata(self, tool: ToolCallRecord, event: Event) -> None:
        """The call's merged metadata: the store's (behind the accumulator), else merged here."""
        live = self._live.get(tool.tool_call_id)
        if live is not None:
            tool.metadata = _plain(live.metadata)
            return
        incoming = event.metadata
        if isinstance(incoming, UnsetType):
            return
        if tool.metadata is None:
            tool.metadata = dict(incoming)
        else:  # a dict of the ledger's own: merged in place
            tool.metadata.update(incoming)

    def _end_tools(self, record: RunRecord) -> None:
        """The run ends: which calls are still pending, which never ended."""
        outcome = record.outcome
        named: set[str] | None = None
        if isinstance(outcome, RunSuccess) and outcome.pending_from == "outcome":
            named = set(outcome.pending_tool_call_ids)
        live = self._live
        for tool in self._tools.values():
            if tool.status == "started":
                tool.status = "incomplete"
                item = live.get(tool.tool_call_id)
                if item is not None:
                    self._sync(tool, item)
            if named is not None:
                tool.pending = tool.tool_call_id in named
            else:
                tool.pending = tool.status != "answered"
        self._tools.clear()
        live.clear()


Ledger.fast_feed = Ledger.feed
#: The deltas :meth:`Ledger.feed` only counts, whatever their id (TOOL_CALL_ARGS, which it
#: records, is not in ``_PLAIN``: it passes for the live calls only, see ``Ledger._passes``).
_EVERY_DELTA: Final[Mapping[type, Container[str] | None]] = {
    cls: None for cls in CONTENT_DELTAS if cls in _PLAIN
}
_NO_DELTA: Final[Mapping[type, Container[str] | None]] = {}


#: The handler of each event class, by method name (see ``handler_table``).
_HANDLERS: Final[Mapping[type, str]] = {
    RunStartedEvent: "_run_started",
    RunFinishedEvent: "_run_finished",
    RunErrorEvent: "_run_error",
    StepStartedEvent: "_step_started",
    StepFinishedEvent: "_step_finished",
    SubagentStartedEvent: "_subagent_started",
    SubagentFinishedEvent: "_subagent_finished",
    SubagentErrorEvent: "_subagent_error",
    RawEvent: "_raw",
    CustomEvent: "_custom",
    ToolCallStartEvent: "_tool_call_start",
    ToolCallChunkEvent: "_tool_call_chunk",
    ToolCallArgsEvent: "_tool_call_args",
    ToolCallEndEvent: "_tool_call_end",
    ToolCallResultEvent: "_tool_call_result",
}
