"""The driver: connects a chain of transducers, runs a stream through it and closes it.

:class:`Runner` is the one loop every way of running stages goes through (``wrap()``'s
segments, the one-call runners of ``_runners``: ``run_sync``, ``transduce``,
``compact_events``, the conformance runner; the tests): it frames byte chunks when asked to
(with the framing's one owner, ``_framing.Framer``, a slice at a time), numbers the events
(``ctx.index``), attaches where a data error happened (event index; byte offset and line for
a frame), skips it in keep-going mode, and closes the chain at the end. Events from no byte
stream come one at a time (:meth:`Runner.feed`) or in batches (:meth:`Runner.feed_batch`).

It also runs the fast path the stages describe (see ``_stage``): when the chain begins with a
run of stages that offer one, a content delta of an open item that every one of them lets pass
goes from its frame to the end of that run in one step, in a loop over the chunk's frames,
without a call per stage. Everything else goes through the stages' ``feed``. ``fuse=False``
connects the stages one by one (the tests compare both ways).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, cast

import msgspec
from msgspec import UNSET

from . import _speedups
from ._accumulate import Accumulate, Update
from ._chunks import CHUNK_ROUTES, ExpandChunks, chunk_route
from ._events import (
    EVENT_TYPES,
    ActivityDeltaEvent,
    Metadata,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ._exceptions import DataError, FramingError
from ._fastdecode import TYPED_DECODE, fast_decode
from ._framing import (
    DEFAULT_MAX_FRAME_SIZE,
    Frame,
    Framer,
    Ignored,
    PayloadRun,
    ignored_report,
)
from ._ledger import Ledger, StepRecord, ToolCallRecord, ledger_counts
from ._metadata import MergedMetadata, MetadataWrites
from ._stage import CONTENT_DELTAS, Context, Transducer
from ._store import MessageItem, Store, ToolCallItem
from ._verify import Verify

__all__ = ["Runner"]

if _speedups.NATIVE is not None:
    _speedups.NATIVE.configure(
        Update,
        MessageItem,
        ToolCallItem,
        ToolCallArgsEvent,
        UNSET,
        CONTENT_DELTAS,
        Context,
        MergedMetadata,
        MetadataWrites,
        msgspec.json.Decoder(Metadata).decode,
    )
    _speedups.NATIVE.configure_steps(StepStartedEvent, StepFinishedEvent, StepRecord)

#: The content handlers of :class:`Accumulate` the C core does itself in the common case
#: (``_native.c``'s ``content_update``), by the kind it knows them as, and the store lookup
#: each one uses.
_NATIVE_CONVERTS: Mapping[Any, tuple[int, str]] = {
    Accumulate._text_content: (1, "_message"),
    Accumulate._tool_args: (2, "_tool_call"),
}


#: How many sets of plans a fast path keeps (a stage switches between a few mappings).
_PLANS_KEPT = 16


def _connect_chain(
    transducers: Iterable[Transducer[Any, Any]], sink: Callable[[Any], None], ctx: Context
) -> tuple[Callable[[Any], None], list[Transducer[Any, Any]]]:
    """Connect transducers first-to-last into ``sink``; returns the head's feed and the list."""
    chain = list(transducers)
    emit = sink
    for t in reversed(chain):
        emit = t.connect(emit, ctx)
    return emit, chain


class _AllOf:
    """Several stages' open ids: an id passes when every one holds it."""

    __slots__ = ("sets",)

    def __init__(self, sets: tuple[Container[str], ...]) -> None:
        self.sets = sets  # the same tuple as the core's plan holds

    def __contains__(self, key: object) -> bool:
        return all(key in s for s in self.sets)


class _FastPath:
    """The fast path of the run of stages at the head of a chain that offer one."""

    def __init__(self, chain: list[Transducer[Any, Any]], sink: Callable[[Any], None]) -> None:
        i = 0
        self.decode: Callable[[Any], Any] | None = None
        if chain and _offers(chain[0]) and chain[0].fast_decode is not None:
            self.decode = chain[0].fast_decode
            i = 1
        #: Where a decoded event goes when it does not take the fast path.
        self.after_decode: Callable[[Any], None] = chain[i].feed if i < len(chain) else sink
        self.filters: list[Transducer[Any, Any]] = []
        self.converts: Mapping[type, Callable[[Any], Any]] | None = None
        while i < len(chain):
            t = chain[i]
            if not _offers(t):
                break
            converts = t.fast_converts
            if converts is not None:
                if self.converts is not None:
                    break  # one conversion per run: what follows sees its outputs
                self.converts = converts
            elif t.fast_passes is None or (self.converts is not None and not t.fast_wrapped):
                break
            else:
                self.filters.append(t)
            i += 1
        self.size = i
        #: How the C core takes an event off the fast path through the stages, when the run
        #: of stages is the default chain's: the routes by event class and the pipeline's own
        #: objects they are taken with (see ``_routes``); else None.
        self.routes = _routes(chain[1 if self.decode is not None else 0 : i])
        #: Where a candidate goes once the run let it pass.
        self.tail: Callable[[Any], None] = chain[i - 1].emit if i else sink
        #: By candidate class: (the open ids, or None for any; the conversion, or None).
        self.plans: dict[type, tuple[Container[str] | None, Callable[[Any], Any] | None]] = {}
        #: The plans as the C core takes them: (the tuple of the open ids' containers, or None;
        #: convert, kind, lookup) (see _native.c).
        self.native_plans: dict[type, tuple[Any, Any, int, Any]] = {}
        self.tallies: list[dict[str, int]] = []
        # The members the plans were made from: each filter's fast_passes and fast_tally.
        self._held: list[Any] = []
        # The plans made so far, by the identities of the filters' fast_passes (see _plan).
        self._made: dict[tuple[int, ...], tuple[list[Any], dict[type, Any], dict[type, Any]]] = {}
        self.useful = bool(self.filters) or self.converts is not None
        self._plan()

    def refresh(self) -> None:
        """Read the stages' fast-path members again (after an event they saw themselves), when
        one of them changed: compared by identity with those held, nothing built."""
        held = self._held
        i = 0
        for f in self.filters:
            if f.fast_passes is not held[i] or f.fast_tally is not held[i + 1]:
                self._plan()
                return
            i += 2

    def replanned(self) -> tuple[dict[type, Any], list[Any], list[dict[str, int]]]:
        """For the C loop, which found a filter's members changed (as :meth:`refresh` would)
        and no plans kept for them (it takes those it finds in ``_made`` itself, setting the
        members :meth:`_plan` sets): the plans made again, and the members they were made
        from, as the loop takes them."""
        self._plan()
        return self.native_plans, self._held, self.tallies

    def _plan(self) -> None:
        """The plans from the stages' members as they are now.

        A stage gives a new ``fast_passes`` mapping whenever what it lets pass changes (the
        contract, see ``_stage``), so the plans made from the same mappings are the same: they
        are kept, by the mappings' identities (the mappings held with them), and made once.
        """
        # Both lists are refilled in place (as the C core's plans_kept does): a replan, a few
        # a run, makes no object that would outlive the chunk.
        held = self._held
        tallies = self.tallies
        held.clear()
        tallies.clear()
        for f in self.filters:
            tally = f.fast_tally
            held += (f.fast_passes, tally)
            if tally is not None:
                tallies.append(tally)
        passes = held[::2]
        key = tuple(map(id, passes))
        made = self._made.get(key)
        if made is None:
            if len(self._made) >= _PLANS_KEPT:
                self._made.clear()
            made = self._made[key] = (passes, *self._make(passes))
        # Each kept plan is its own pair of dicts, never changed: taken as they are (a loop
        # that holds them reads them again after a refresh).
        _, self.plans, self.native_plans = made

    def _make(
        self, passes: list[Mapping[type, Container[str] | None] | None]
    ) -> tuple[dict[type, Any], dict[type, tuple[Any, Any, int, Any]]]:
        """The plans, and the C core's, from the filters' ``fast_passes``."""
        plans: dict[type, tuple[Container[str] | None, Callable[[Any], Any] | None]] = {}
        converts = self.converts
        held_by: dict[type, tuple[Container[str], ...] | None] = {}
        for cls in CONTENT_DELTAS:
            ids: list[Container[str]] = []
            for p in passes:
                if p is None or cls not in p:
                    break
                held = p[cls]
                if held is not None:
                    ids.append(held)
            else:
                convert = None
                if converts is not None:
                    convert = converts.get(cls)
                    if convert is None:
                        continue
                sets = tuple(ids) if ids else None
                plans[cls] = (
                    None if sets is None else sets[0] if len(sets) == 1 else _AllOf(sets),
                    convert,
                )
                held_by[cls] = sets
        native: dict[type, tuple[Any, Any, int, Any]] = {}
        for candidate, (_, handler) in plans.items():
            kind, lookup = 0, None
            func = getattr(handler, "__func__", None)
            owner = getattr(handler, "__self__", None)
            if func in _NATIVE_CONVERTS and type(owner) is Accumulate:
                kind, name = _NATIVE_CONVERTS[func]
                lookup = getattr(owner, name)
            native[candidate] = (held_by[candidate], handler, kind, lookup)
        return plans, native

    def count(self, cls: type, n: int = 1) -> None:
        """Add ``n`` candidates of class ``cls`` that passed to the stages' tallies."""
        kind = cls.type  # type: ignore[attr-defined]
        for tally in self.tallies:
            tally[kind] = tally.get(kind, 0) + n


def _routes(
    run: list[Transducer[Any, Any]],
) -> tuple[dict[type, tuple[Any, ...]], tuple[Any, ...]] | None:
    """The C core's routes for events off the fast path, when the run of stages is exactly
    ``ExpandChunks``, ``Verify``, ``Accumulate`` and ``Ledger`` (or the same without
    ``ExpandChunks``), each of its own class: the core then does what their feeds do. None when
    the run is another.

    A pair: the routes by event class (see :func:`_make_routes`), which depend on the stages'
    classes only and are shared by every pipeline of those classes; and what this pipeline
    takes them with, its own objects (``_steps.h``'s ``O_...``): ``(chunks or None, verify,
    accumulate, ledger, the store, its message lookup, its tool-call lookup)``. A running
    pipeline then holds one tuple for the cyclic collector to walk, not a table of routes of
    its own.
    """
    kinds = [type(t) for t in run]
    if kinds == [ExpandChunks, Verify, Accumulate, Ledger]:
        chunks, verify, accumulate, ledger = run
    elif kinds == [Verify, Accumulate, Ledger]:
        chunks = None
        verify, accumulate, ledger = run
    else:
        return None
    assert isinstance(verify, Verify) and isinstance(accumulate, Accumulate)
    assert isinstance(ledger, Ledger)
    store = accumulate.store
    own = (chunks, verify, accumulate, ledger, store, accumulate._message, accumulate._tool_call)
    # What the routes are made from: the classes, whether the store evicts, and the handler
    # tables (one per class, see handler_table; a stage given another is not shared with).
    key = (type(verify), type(accumulate), type(ledger), type(store), accumulate._evict)
    tables = (verify._handlers, accumulate._handlers, accumulate._converts, ledger._handlers)
    shared = _SHARED_ROUTES.get(key)
    if shared is not None and all(a is b for a, b in zip(shared[1], tables, strict=True)):
        return shared[0], own
    routes = _make_routes(verify, accumulate, ledger)
    if shared is None and len(_SHARED_ROUTES) < _MOST_SHARED:
        _SHARED_ROUTES[key] = (routes, tables)
    return routes, own


#: The routes made so far, by what they are made from (see :func:`_routes`), with the tables
#: they were made from; at most ``_MOST_SHARED`` kinds of chain (more are made anew each time).
_SHARED_ROUTES: dict[tuple[Any, ...], tuple[dict[type, tuple[Any, ...]], tuple[Any, ...]]] = {}
_MOST_SHARED: Final = 64


def _make_routes(
    verify: Verify, accumulate: Accumulate, ledger: Ledger[Any]
) -> dict[type, tuple[Any, ...]]:
    """The routes by event class. A route's first member is its kind (``_DIRECT`` …
    ``_ACTIVITY``), which says what the rest is; a handler in it is its class's plain function,
    which the core calls with the pipeline's own stage or store (see :func:`_routes`):

    STEP_STARTED and STEP_FINISHED: ``(_STEP,)``, done in C (``_steps.h``).
    TEXT_MESSAGE_END, REASONING_MESSAGE_END and TOOL_CALL_END: ``(_END, the name of verify's
    table of open ids, the type the ledger counts or None, the item's kind (1 a message, 2 a
    tool call), the ledger's handler or None)``, done in C (``_ends.h``).
    TEXT_MESSAGE_START and REASONING_MESSAGE_START: ``(_START, the names of verify's tables of
    open ids and of owners, the store's append, the type the ledger counts, the message's role
    or None for the event's)``, done in C (``_starts.h``) for a message the store has not seen.
    TOOL_CALL_RESULT: ``(_RESULT, the name of verify's table of owners, accumulate's _answered,
    the store's assistant_owner and insert_result, the ledger's handler, the tool message's
    role when the event has none, the field naming the call)``, done in C (``_results.h``) for
    text content.
    TOOL_CALL_START: ``(_TOOL_START, accumulate's _started and _start_call, the store's append
    and add_tool_call, the ledger's handler, its ToolCallRecord)``, done in C (``_starts.h``)
    for a call the store has not seen.
    ACTIVITY_DELTA: ``(_ACTIVITY, the type the ledger counts, the field of the activity's
    type)``, done in C (``_activity.h``) when every operation of its patch is the commonest
    kind.
    Any other event the stages handle without a chunk or a content delta (both have their
    own ways in the feeds): the stages' handlers, called without their feeds (``_direct.h``):
    ``(_DIRECT, True, or None when the verifier's gate lets it through (RUN_STARTED), verify's
    handler or None, accumulate's handler, the type the ledger counts or None, the ledger's
    handler or None)``.
    """
    routes: dict[type, tuple[Any, ...]] = {}
    # A store that evicts: accumulate's feed does more than its handler, so no direct route.
    converts = accumulate._converts
    accumulates, records, checks = accumulate._handlers, ledger._handlers, verify._handlers
    for cls, kind in () if accumulate._evict else _DIRECT_CLASSES:
        if cls in converts:
            continue
        handle = accumulates.get(cls)
        if handle is None or handle is Accumulate._raw_chunk:
            continue
        record = None if kind is not None else records.get(cls)
        if kind is None and record is None:
            continue
        check = checks.get(cls.type)
        # Verify.feed's gate (before the first run, after one ended) lets RUN_STARTED through
        # always (_check_gate): None, its route does not wait for the gate.
        gated = None if cls is RunStartedEvent else True
        routes[cls] = (_DIRECT, gated, check, handle, kind, record)
    steps = (
        verify._handlers.get("STEP_STARTED") is Verify._step_started
        and verify._handlers.get("STEP_FINISHED") is Verify._step_finished
        and ledger._handlers.get(StepStartedEvent) is Ledger._step_started
        and ledger._handlers.get(StepFinishedEvent) is Ledger._step_finished
        and all(accumulate._handlers.get(cls) is Accumulate._no_item for cls in _STEPS)
    )
    if steps:
        routes.update(dict.fromkeys(_STEPS, (_STEP,)))
    if accumulate._evict:
        return routes
    for cls, table, check in (
        (TextMessageEndEvent, "_text", Verify._text_end),
        (ReasoningMessageEndEvent, "_reasoning_messages", Verify._reasoning_message_end),
    ):
        kind = ledger_counts(cls)
        if (
            verify._handlers.get(cls.type) is check
            and accumulate._handlers.get(cls) is Accumulate._text_end
            and kind is not None
        ):
            routes[cls] = (_END, table, kind, 1, None)
    stored = type(accumulate.store) is Store
    for cls, table, owners, check, handle, role in (
        (TextMessageStartEvent, "_text", "_message_owners", Verify._text_start,
         Accumulate._text_start, None),
        (ReasoningMessageStartEvent, "_reasoning_messages", "_reasoning_owners",
         Verify._reasoning_message_start, Accumulate._reasoning_start, "reasoning"),
    ):  # fmt: skip
        kind = ledger_counts(cls)
        if (
            verify._handlers.get(cls.type) is check
            and accumulate._handlers.get(cls) is handle
            and kind is not None
            and stored
        ):
            routes[cls] = (_START, table, owners, Store.append, kind, role)
    if (
        verify._handlers.get(ToolCallResultEvent.type) is Verify._tool_call_result
        and accumulate._handlers.get(ToolCallResultEvent) is Accumulate._tool_result
        and stored
        and ledger_counts(ToolCallResultEvent) is None
        and ledger._handlers.get(ToolCallResultEvent) is Ledger._tool_call_result
    ):
        routes[ToolCallResultEvent] = (
            _RESULT,
            "_message_owners",
            Accumulate._answered,
            Store.assistant_owner,
            Store.insert_result,
            Ledger._tool_call_result,
            "tool",
            "toolCallId",
        )
    if (
        verify._handlers.get(ToolCallStartEvent.type) is Verify._tool_call_start
        and accumulate._handlers.get(ToolCallStartEvent) is Accumulate._tool_start
        and stored
        and ledger_counts(ToolCallStartEvent) is None
        and ledger._handlers.get(ToolCallStartEvent) is Ledger._tool_call_start
    ):
        routes[ToolCallStartEvent] = (
            _TOOL_START,
            Accumulate._started,
            Accumulate._start_call,
            Store.append,
            Store.add_tool_call,
            Ledger._tool_call_start,
            ToolCallRecord,
        )
    kind = ledger_counts(ActivityDeltaEvent)
    if (
        verify._handlers.get(ActivityDeltaEvent.type) is Verify._activity_delta
        and accumulate._handlers.get(ActivityDeltaEvent) is Accumulate._activity_delta
        and stored
        and kind is not None
    ):
        routes[ActivityDeltaEvent] = (_ACTIVITY, kind, "activityType")
    if (
        verify._handlers.get(ToolCallEndEvent.type) is Verify._tool_call_end
        and accumulate._handlers.get(ToolCallEndEvent) is Accumulate._tool_end
        and ledger_counts(ToolCallEndEvent) is None
        and ledger._handlers.get(ToolCallEndEvent) is Ledger._tool_call_end
    ):
        routes[ToolCallEndEvent] = (_END, "_tool_calls", None, 2, Ledger._tool_call_end)
    return routes


_STEPS = (StepStartedEvent, StepFinishedEvent)
#: The classes a direct route may take (neither a content delta nor a chunk), each with the
#: type the ledger only counts it under (``None``: it records it with a handler).
_DIRECT_CLASSES: Final = tuple(
    (cls, ledger_counts(cls))
    for cls in EVENT_TYPES.values()
    if cls not in CONTENT_DELTAS and chunk_route(cls) < CHUNK_ROUTES
)
#: The kinds of the routes, their first member (``_loop.h``'s ROUTE_...).
_DIRECT, _STEP, _END, _START, _RESULT, _TOOL_START, _ACTIVITY = range(7)


def _offers(t: Transducer[Any, Any]) -> bool:
    """Whether a stage offers a fast path: its members describe the ``feed`` it has."""
    fast_feed = type(t).fast_feed
    return fast_feed is not None and type(t).feed is fast_feed


class _RunFrames(msgspec.Struct, gc=False):
    """The frames of a :class:`PayloadRun`, built the first time one is asked for.

    A chunk's last batch stays the context's while the pipeline waits for the next chunk (a
    report at the end is located in it), which in a process running many pipelines outlives
    young collections: this holds the run's fields rather than the run (a tuple holding a
    list, which the collector tracks), and is not tracked itself (``gc=False``; the payloads
    are bytes, the frames Frames, nothing leads back to it). With the C core the payloads'
    list is untracked too, so a waiting pipeline keeps nothing of its chunk the collector
    walks.
    """

    payloads: list[bytes]
    offset: int
    line: int
    id: str | None
    sep: int
    lines: int
    built: list[Frame] | None = None

    def __len__(self) -> int:
        return len(self.payloads)

    def __getitem__(self, i: Any) -> Any:
        if self.built is None:
            self.built = PayloadRun(
                self.payloads, self.offset, self.line, self.id, self.sep, self.lines
            ).frames()
        return self.built[i]


class Runner:
    """One stream through a chain of transducers: the loop every way of running stages uses.

    :meth:`feed` takes one source item: a byte/text chunk when ``framing`` is given (split into
    frames, each an event), else one event (a frame, JSON text, a dict, an Event …). Each event
    gets the next index in ``ctx.index`` (unless ``number=False``: a later segment of a pipeline
    keeps the index its upstream set). A data error raised while an event goes through the
    chain is located and skipped by :meth:`Context.skip` (raised unless in keep-going mode).
    Outputs go to ``sink``, by default appended to :attr:`out`. :meth:`close` ends the stream;
    with ``close_errors="raise"`` a data error while closing is raised in every mode (a
    pipeline's source: a stream cut off inside a frame ends it), else it is skipped too.

    >>> from agui_meta import DefaultStages, Enforce
    >>> runner = Runner([Enforce(), *DefaultStages()], Context(), framing="sse")
    >>> runner.feed(b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\\n\\n')
    >>> [update.event.type for update in runner.out]
    ['RUN_STARTED']
    """

    def __init__(
        self,
        transducers: Iterable[Transducer[Any, Any]],
        ctx: Context,
        sink: Callable[[Any], None] | None = None,
        *,
        fuse: bool = True,
        framing: str | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        number: bool = True,
        close_errors: str = "skip",
    ) -> None:
        self.ctx = ctx
        self.out: list[Any] = []
        #: Whether nobody reads the outputs (a pipeline's ``drain()``): the C core then counts
        #: the fast path's outputs in :attr:`discarded` instead of building them (the stages'
        #: effects on the store and the ledger are the same). Set any time; read per batch.
        self.discard = False
        #: Whether the sink ignores every update that completes nothing (a durable segment's,
        #: which takes completed items only): the fast path's outputs are content deltas, never
        #: done, so the C core counts them in :attr:`discarded` instead of building them, as
        #: with :attr:`discard`. Set any time; read per batch.
        self.discard_fast = False
        #: How many outputs were counted instead of built (see :attr:`discard`).
        self.discarded = 0
        self._to_out = sink is None
        sink = self.out.append if sink is None else sink
        self._head, self.chain = _connect_chain(transducers, sink, ctx)
        fast = _FastPath(self.chain, sink) if fuse and self.chain else None
        self._fast = fast if fast is not None and (fast.useful or fast.decode) else None
        self._framing = framing
        self._max_frame_size = max_frame_size
        self._framer: Framer | None = None
        self._number = number
        self._count = 0
        self._close_errors = close_errors
        #: The C core's batch loop (read once: ``_speedups`` says whether it is in use).
        self._native = _speedups.NATIVE

    @property
    def fused(self) -> int:
        """How many stages at the head of the chain run on the fast path (0: none)."""
        return 0 if self._fast is None else self._fast.size

    # -- feeding -----------------------------------------------------------------------------

    def feed(self, item: Any) -> None:
        """One source item through the chain (see the class documentation)."""
        if self._framing is not None and isinstance(item, (bytes, bytearray, memoryview, str)):
            framer = self._framer or self._new_framer()
            for piece in framer.slices(item):
                self._feed_piece(piece)
        elif type(item) is Frame:
            self._run_frames([item])
        else:
            self._one(item)

    def steps(self, item: Any) -> Iterator[None]:
        """:meth:`feed` one source chunk a slice of the framer at a time: one step per slice
        (the caller takes the outputs, and yields to cancellation, between steps)."""
        framer = self._framer or self._new_framer()
        for piece in framer.slices(item):
            self._feed_piece(piece)
            yield None

    def _feed_piece(self, piece: bytes) -> None:
        """A piece of the stream through the framer, its frames through the chain."""
        framer = self._framer
        assert framer is not None
        try:
            parts = framer.feed(piece)
        except FramingError as exc:
            raise exc.locate(index=self._count) from None
        if framer.ignored:  # the lines' places count frames: each frame of a run
            frames = [f for p in parts for f in (p.frames() if type(p) is PayloadRun else [p])]
            self._run_noted(frames, framer.ignored)
        elif not framer.runs:  # frames only (JSON lines, a JSON array): one batch
            if parts:
                self._run_frames(parts)
        else:  # runs of simple SSE blocks, and frames between them: a batch each
            batch: list[Frame] = []
            for part in parts:
                if type(part) is PayloadRun:
                    if batch:
                        self._run_frames(batch)
                        batch = []
                    self._run_payloads(part)
                else:
                    batch.append(part)
            if batch:
                self._run_frames(batch)

    def feed_batch(self, items: Sequence[bytes]) -> None:
        """A batch of events, each the JSON text of one event, from no byte stream (a Redis
        worker's envelope): as a chunk's frames go, through the fast path in one loop.

        Each is numbered and its data error located (by its index: it has no byte offset or
        line) and skipped in keep-going mode, else raised, as :meth:`feed` does one at a time;
        the outputs are the same. The chain must begin with a stage that decodes bytes
        (:class:`~agui_meta.Enforce`).
        """
        fast = self._fast
        if fast is None or fast.decode is None:
            for item in items:
                self._one(item)
        else:
            self._run_batch(items, items)

    def _run_noted(self, frames: list[Frame], ignored: list[Ignored]) -> None:
        """``frames`` with a report for each line the framer ignored, in stream order."""
        notes = list(ignored)
        ignored.clear()
        done = 0
        for note in notes:
            self._run_frames(frames[done : note.before])
            done = max(done, note.before)
            self.ctx.deliver(ignored_report(note, self._count))
        self._run_frames(frames[done:])

    def feed_all(self, items: Iterable[Any]) -> list[Any]:
        """Feed every item, close, and return (and clear) every output."""
        for item in items:
            self.feed(item)
        self.close()
        return self.take()

    def take(self) -> list[Any]:
        """The outputs collected in :attr:`out` so far (which is cleared)."""
        batch = self.out[:]
        self.out.clear()
        return batch

    def close(self) -> None:
        """End of stream: the frames still held, then each transducer's ``close``, in order."""
        ctx = self.ctx
        ctx.index = -1
        if self._framer is not None:
            for piece in self._framer.rest():
                self._feed_piece(piece)
            try:
                frames = self._framer.close()
            except FramingError as exc:
                raise exc.locate(index=self._count) from None
            if self._framer.ignored:
                self._run_noted(frames, self._framer.ignored)
            else:
                self._run_frames(frames)
        for t in self.chain:
            try:
                t.close()
            except DataError as exc:
                if self._close_errors == "raise":
                    raise
                ctx.skip(exc)

    def _renew(self) -> None:
        """Be as a new runner over the same chain is, once its stages and context have been
        made as new (a pipeline kept for the next stream: see ``_durable``): events numbered
        from 0 again, no framer, no outputs, the fast path's plans read again from the stages'
        members (the plans made before are kept: they are the same for the same members)."""
        self.out.clear()
        self.discarded = 0
        self._framer = None
        self._count = 0
        if self._fast is not None:
            self._fast._plan()

    # -- the loops ---------------------------------------------------------------------------

    def _new_framer(self) -> Framer:
        """The framer of the stream: runs of simple SSE blocks as PayloadRuns where it can."""
        self._framer = Framer(
            self._framing,  # type: ignore[arg-type]
            max_frame_size=self._max_frame_size,
            invalid_utf8="frame" if self.ctx.mode == "keep_going" else "raise",
            lines=True,
            runs=self._fast is not None and self._fast.decode is not None,
        )
        return self._framer

    def _one(self, item: Any) -> None:
        """One event that is not a frame."""
        ctx = self.ctx
        if self._number:
            ctx.index = self._count
            self._count += 1
        fast = self._fast
        try:
            if fast is None:
                self._head(item)
                return
            if fast.decode is not None:
                if type(item) is not bytes:
                    self._head(item)  # the decoding stage's own way
                    fast.refresh()
                    return
                event = fast.decode(item)
                if event is None:
                    self._head(item)  # the decoding stage says what is wrong, and where
                    fast.refresh()
                    return
            else:
                event = item
            cls = type(event)
            plan = fast.plans.get(cls)
            if plan is not None and event.subagent_run_id is UNSET:
                ids, convert = plan
                if (
                    ids is None
                    or (event.tool_call_id if cls is ToolCallArgsEvent else event.message_id) in ids
                ):
                    fast.tail(event if convert is None else convert(event))
                    fast.count(cls)
                    return
            fast.after_decode(event)
        except DataError as exc:
            ctx.skip(exc)
        if fast is not None:
            fast.refresh()

    def _run_frames(self, frames: list[Frame]) -> None:
        """A chunk's frames, as one batch (see :meth:`_run_batch`)."""
        if not frames:
            return  # the last batch stays the context's: reports at the end are located there
        fast = self._fast
        if fast is None or fast.decode is None:
            if self._number:  # reports of these events get their frame's offset and line
                self.ctx.frames = frames
                self.ctx.frames_start = self._count
            for frame in frames:
                self._frame_slow(frame, fast)
            return
        # A frame that is not UTF-8 (only in keep-going mode) has no data to decode: None.
        self._run_batch([f.data if f.error is None else None for f in frames], frames)

    def _run_payloads(self, run: PayloadRun) -> None:
        """A run of simple SSE blocks, as one batch: a Frame only when one is asked for."""
        self._run_batch(run.payloads, cast(Sequence[Frame], _RunFrames(*run)))

    def _run_batch(
        self, payloads: Sequence[bytes | None], frames: Sequence[Frame] | Sequence[bytes]
    ) -> None:
        """One batch of frames: the fast path inline, the rest through the stages.

        ``payloads[k]`` is the data of ``frames[k]`` (``None``: a frame that is not UTF-8);
        ``frames`` is ``payloads`` itself for events that come from no byte stream.
        The loop touches ``frames`` only for an event that leaves the fast path's decoder,
        fails, or is reported: its place in the stream.
        """
        fast = self._fast
        assert fast is not None and fast.decode is not None
        if self._native is not None and fast.decode is fast_decode:
            self._run_batch_native(payloads, frames)
            return
        ctx = self.ctx
        number = self._number
        index = start = self._count
        if number:  # reports of these events get their frame's offset and line
            ctx.frames = frames
            ctx.frames_start = start
        decode = fast.decode
        plans = fast.plans
        tail = fast.tail
        after_decode = fast.after_decode
        # The classes of the candidates that passed, counted into the stages' tallies in one
        # go (_tally) before the stages see their next event and when the batch ends.
        passed: list[type] = []
        note = passed.append if fast.tallies else None
        try:
            for data in payloads:
                if number:
                    ctx.index = index
                index += 1
                try:
                    event = None if data is None else decode(data)
                    if event is not None:
                        cls = type(event)
                        plan = plans.get(cls)
                        if plan is not None and event.subagent_run_id is UNSET:
                            ids, convert = plan
                            if (
                                ids is None
                                or (
                                    event.tool_call_id
                                    if cls is ToolCallArgsEvent
                                    else event.message_id
                                )
                                in ids
                            ):
                                tail(event if convert is None else convert(event))
                                if note is not None:
                                    note(cls)
                                continue
                    if passed:  # the stages see this event: their tallies first
                        self._tally(passed)
                    if event is not None:
                        after_decode(event)
                    elif data is None:  # only a frame of a byte stream has no data
                        self._bad_frame(frames[index - 1 - start])  # type: ignore[arg-type]
                    else:  # the decoding stage says what is wrong, and where
                        self._head(frames[index - 1 - start])
                except DataError as exc:
                    if passed:
                        self._tally(passed)
                    frame = frames[index - 1 - start]
                    if isinstance(frame, Frame):  # from a byte stream: its place in it
                        exc.locate(offset=frame.offset, line=frame.line)
                    ctx.skip(exc)
                fast.refresh()
                plans = fast.plans
                note = passed.append if fast.tallies else None
        finally:
            if passed:
                self._tally(passed)
            if number:
                self._count = index

    def _run_batch_native(
        self, payloads: Sequence[bytes | None], frames: Sequence[Frame] | Sequence[bytes]
    ) -> None:
        """:meth:`_run_batch`, its fast path in the C core (``_native.run_batch``).

        The C loop takes the events :meth:`_run_batch`'s loop sends down the fast path, in
        the same way. The others it gives to the stages' feeds itself, as :meth:`_run_batch`
        does (the candidates that passed tallied first), and it stops when one raises (this
        loop then handles the error exactly as :meth:`_run_batch` does), when a stage changed
        its fast-path members (this loop makes the plans again), or at an event that does not
        decode or has no data (this loop hands it to the decoding stage); then it goes on.
        """
        fast = self._fast
        native = self._native
        assert fast is not None and native is not None
        ctx = self.ctx
        number = self._number
        start = self._count
        if number:  # reports of these events get their frame's offset and line
            ctx.frames = frames
            ctx.frames_start = start
        todo = payloads if type(payloads) is list else list(payloads)
        run = native.run_batch
        decode = fast.decode
        after_decode = fast.after_decode
        passed: dict[type, int] = {}  # the core counts the candidates that passed by class
        k = 0
        n = len(todo)
        # None: the outputs of the fast path go nowhere but :attr:`out`, which nobody reads,
        # or to a sink that ignores them (discard_fast); the routes' outputs (events off the
        # fast path: some complete an item) only in the first case.
        whole = fast.size == len(self.chain)
        unread = self.discard and self._to_out and whole
        tail = None if unread or (self.discard_fast and whole) else fast.tail
        route_tail = None if unread else fast.tail
        try:
            while k < n:
                tallies = fast.tallies
                rest = (
                    (
                        after_decode,
                        fast.filters,
                        fast._held,
                        tallies,
                        fast.routes,
                        route_tail,
                        fast,
                    )
                    if all(type(t) is dict for t in tallies)
                    else None
                )
                k, event, raised, skipped, replan = run(
                    todo,
                    k,
                    number,
                    start,
                    ctx,
                    TYPED_DECODE,
                    decode,
                    fast.native_plans,
                    tail,
                    passed,  # counted even while no stage tallies (then into nothing)
                    rest,
                )
                self.discarded += skipped
                if replan:  # the events before k went through; a stage's members changed
                    fast.refresh()
                    continue
                if k == n:
                    break
                k += 1  # the event at k - 1 left the fast path (or its handler raised)
                try:
                    if raised is not None:
                        raise raised
                    if passed:  # the stages see this event: their tallies first
                        self._tally(passed)
                    if event is not None:
                        after_decode(event)
                    elif todo[k - 1] is None:  # only a frame of a byte stream has no data
                        self._bad_frame(frames[k - 1])
                    else:  # the decoding stage says what is wrong, and where
                        self._head(frames[k - 1])
                except DataError as exc:
                    if passed:
                        self._tally(passed)
                    frame = frames[k - 1]
                    if isinstance(frame, Frame):  # from a byte stream: its place in it
                        exc.locate(offset=frame.offset, line=frame.line)
                    ctx.skip(exc)
                fast.refresh()
        finally:
            if passed:
                self._tally(passed)
            if number:
                self._count = start + k

    def _tally(self, passed: list[type] | dict[type, int]) -> None:
        """Count the candidates that passed (their classes, or how many of each class) into
        the stages' tallies."""
        fast = self._fast
        assert fast is not None
        for cls, n in (passed if type(passed) is dict else Counter(passed)).items():
            fast.count(cls, n)
        passed.clear()

    def _frame_slow(self, frame: Frame, fast: _FastPath | None) -> None:
        ctx = self.ctx
        if self._number:
            ctx.index = self._count
            self._count += 1
        try:
            if frame.error is not None:
                self._bad_frame(frame)
            else:
                self._head(frame)
        except DataError as exc:
            exc.locate(offset=frame.offset, line=frame.line)
            ctx.skip(exc)
        if fast is not None:
            fast.refresh()

    def _bad_frame(self, frame: Frame) -> None:
        """A frame that is not UTF-8: one bad event (raised unless in keep-going mode)."""
        error = frame.error
        assert error is not None
        # Report a fresh copy: the frame's own is never raised.
        raise FramingError(error.reason, offset=error.offset, line=error.line)
