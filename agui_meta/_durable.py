"""A thread processed entry by entry, with results that a crash can neither lose nor repeat.

This is the engine-free core of the Redis workers (:mod:`agui_meta.redis`): it knows nothing of
Redis, so the same code runs a worker's shards and the single-process reference run
(:func:`run_local`) that the workers' results are tested against.

Input arrives as :class:`Envelope`s: a frame-aligned batch of one thread's events (their JSON
text) with the source that sent it and that source's sequence number, or an end-of-source
marker. A thread is processed in *segments*: a segment starts from the thread's last snapshot
with a fresh pipeline (``enforce → expand_chunks → verify → accumulate → ledger``, keep-going
mode, unfinished runs reported as ``validate`` reports them) and takes whole entries until, after
an entry, no run is open; then it closes, and the thread's next snapshot is taken. An end marker
or an inactivity timeout closes an open segment early, with the reports ``validate`` gives for a
stream that ends there.

Every entry yields :class:`Output`s: each completed item with its merged metadata (``"item"``),
each ended run's ledger record (``"run"``) and each report (``"report"``), keyed
``{thread}/{source}/{seq}/{n}`` (``…/{seq}/idle/{n}`` for a timeout's close): the same entries
give the same keys and values however often they are processed. :class:`ThreadState` tracks an
*emitted-up-to* watermark (the last entry whose outputs were committed): an entry at or below it
is processed again only to rebuild the run, its outputs and counters suppressed.
"""

from __future__ import annotations

import hashlib
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Literal

import msgspec

from ._decode import Enforce
from ._defaults import DefaultStages
from ._driver import Runner
from ._exceptions import DataError, Report, SequenceGap, SourceConflict, UsageError
from ._ledger import Ledger, RunRecord
from ._metadata import enc_hook
from ._stage import Context, building_for
from ._store import Store, wire_item
from ._threads import LedgerSummary, ThreadSnapshot
from ._verify import Verify

__all__ = [
    "Changes",
    "Envelope",
    "LocalResult",
    "Output",
    "ThreadState",
    "entry_key",
    "envelopes",
    "run_local",
    "usage_fields",
    "usage_of",
]

OutputKind = Literal["item", "run", "report"]


class Envelope(msgspec.Struct, array_like=True, frozen=True):
    """One stream entry: a batch of ``thread``'s events, or its source's end (``end=True``).

    ``frames`` are the events' JSON text, in order, as the source framed them. ``seq`` numbers
    the source's envelopes from 1, so that a producer's retry of an envelope is recognised.
    ``received`` is when ingest cut it (milliseconds since the Unix epoch): the time of receipt
    the ledger gives events without a ``timestamp``, the same however often it is processed.
    """

    thread: str
    source: str
    seq: int
    frames: list[bytes] = msgspec.field(default_factory=list)
    end: bool = False
    received: int = 0

    def encode(self) -> bytes:
        return _pack(self)

    @classmethod
    def decode(cls, data: bytes) -> Envelope:
        return _unpack(data)

    def digest(self) -> bytes:
        """16 bytes that identify what was sent: thread, seq, events and end (not the source's
        name, not ``received``). Ingest keeps it per source and ``seq`` and compares a retry's."""
        return _digest_of(self._content())

    def _content(self) -> bytes:
        """What :meth:`digest` hashes (:func:`run_local` keeps it, and hashes it on a retry)."""
        return _pack_content((self.thread, self.seq, self.frames, self.end))


def _digest_of(content: bytes) -> bytes:
    return hashlib.blake2b(content, digest_size=16).digest()


_pack = msgspec.msgpack.Encoder().encode
_unpack = msgspec.msgpack.Decoder(Envelope).decode
_pack_content = msgspec.msgpack.Encoder().encode


class Output(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One result, with a key that stays the same however often its entry is processed.

    Not tracked by the cyclic garbage collector (``data`` is JSON data: no cycle goes
    through an output), which every output kept would otherwise cost at each full collection.
    """

    key: str
    thread: str
    kind: OutputKind
    data: Any

    def encode(self) -> bytes:
        return _json(self.data)


_json = msgspec.json.Encoder(enc_hook=enc_hook).encode


class _Type(msgspec.Struct):
    type: str = ""


_peek_type = msgspec.json.Decoder(_Type).decode
_TERMINAL = frozenset({"RUN_FINISHED", "RUN_ERROR"})
_BYTES: Final = frozenset({bytes})


def _terminal(frame: bytes) -> bool:
    try:
        return _peek_type(frame).type in _TERMINAL
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False


def envelopes(
    frames: Iterable[bytes],
    *,
    thread: str,
    source: str,
    batch: int = 64,
    first_seq: int = 1,
    end: bool = True,
    clock: Callable[[], float] = time.time,
) -> Iterator[Envelope]:
    """Cut a thread's frames into envelopes of at most ``batch`` frames, numbered from ``first_seq``.

    An envelope also ends after each ``RUN_FINISHED`` or ``RUN_ERROR``, so that a run's end
    never shares an entry with the next run's start (the entry can be acknowledged at once).
    With ``end=True`` an end-of-source marker follows the last envelope. The cut depends only
    on the frames and ``batch``: a retry with the same arguments yields envelopes with the same
    numbers and events (``clock()``, in seconds, stamps each with its time of receipt).

    >>> frames = [b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
    ...           b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}']
    >>> [(e.seq, len(e.frames), e.end) for e in envelopes(frames, thread="t", source="s")]
    [(1, 2, False), (2, 0, True)]
    """
    if batch < 1:
        raise UsageError(f"batch must be at least 1, not {batch}")
    seq = first_seq
    held: list[bytes] = []
    for frame in frames:
        held.append(frame)
        if len(held) >= batch or _terminal(frame):
            yield Envelope(thread, source, seq, held, received=int(clock() * 1000))
            seq += 1
            held = []
    if held:
        yield Envelope(thread, source, seq, held, received=int(clock() * 1000))
        seq += 1
    if end:
        yield Envelope(thread, source, seq, end=True, received=int(clock() * 1000))


def entry_key(entry_id: str) -> tuple[int, int]:
    """A stream entry id (``"1700000000000-3"``) as a comparable pair."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def usage_fields(records: Iterable[RunRecord]) -> dict[str, int]:
    """The usage counters the ended runs ``records`` add: tokens per provider/model, runs per status.

    Run counters are named ``runs|{status}``; token counters ``tokens|`` followed by the JSON
    array ``[provider, model, count]`` (``null`` for an absent provider or model, ``count`` as
    on the wire: ``inputTokens``…), so that no provider or model name can be mistaken for
    another, whatever characters it holds. :func:`usage_of` reads them back.
    """
    out: dict[str, int] = {}
    for record in records:
        name = f"runs|{record.status}"
        out[name] = out.get(name, 0) + 1
        for entry in record.usage:
            provider, model = entry.provider, entry.model
            for count, value in msgspec.to_builtins(entry).items():
                if count in ("provider", "model"):
                    continue
                key = (provider, model, count)
                token = _TOKEN_NAMES.get(key)
                if token is None:
                    if len(_TOKEN_NAMES) >= _TOKEN_NAMES_KEPT:
                        _TOKEN_NAMES.clear()
                    token = _TOKEN_NAMES[key] = (
                        "tokens|" + _ENCODE([provider, model, count]).decode()
                    )
                out[token] = out.get(token, 0) + value
    return out


_ENCODE: Final = msgspec.json.Encoder().encode
#: The token counter names made so far, by (provider, model, count): a run's usage names the
#: same few again and again (at most this many kept: the names come from the events).
_TOKEN_NAMES: Final[dict[tuple[str | None, str | None, str], str]] = {}
_TOKEN_NAMES_KEPT: Final = 4096
_TOKEN_NAME: Final = msgspec.json.Decoder(tuple[str | None, str | None, str]).decode


def usage_of(counters: dict[str, int]) -> dict[str, Any]:
    """The usage counters (as :func:`usage_fields` names them, summed) as data:
    ``{"entries", "events", "runs": {status: n}, "tokens": [usage entries in wire JSON]}``.

    :raises DataError: a counter name that none of agui-meta's writers gives, named.
    """
    runs: dict[str, int] = {}
    tokens: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    for name, value in sorted(counters.items()):
        kind, _, rest = name.partition("|")
        if kind == "runs":
            runs[rest] = value
        elif kind == "tokens":
            try:
                provider, model, count = _TOKEN_NAME(rest)
            except msgspec.DecodeError:
                raise DataError(f"not a token counter agui-meta writes: {name!r}") from None
            entry = tokens.get((provider, model))
            if entry is None:
                entry = tokens[provider, model] = {}
                if provider is not None:
                    entry["provider"] = provider
                if model is not None:
                    entry["model"] = model
            entry[count] = value
    return {
        "entries": counters.get("entries", 0),
        "events": counters.get("events", 0),
        "runs": runs,
        "tokens": list(tokens.values()),
    }


def _report_data(report: Report, at: tuple[str, int, int] | None) -> dict[str, Any]:
    data = {
        k: v
        for k, v in msgspec.to_builtins(report, enc_hook=enc_hook).items()
        if v is not None and k not in ("offset", "line")
    }
    if at is not None:
        data["source"], data["seq"], data["frame"] = at
    return data


def _ignore(update: Any) -> None:
    pass


class _Segment:
    """One segment of a thread: a fresh pipeline over the entries since the last snapshot.

    The events go through the driver's :class:`~agui_meta._driver.Runner` (the fused fast path
    of the stages), one frame at a time, numbered from 0 per segment.
    """

    def __init__(self, store: Store, *, quiet: bool = False) -> None:
        self.store = store
        #: Whether no item or run output is made (a replay, read for its snapshot only): the
        #: runs are still noted in :attr:`ended`, the reports still kept.
        self.quiet = quiet
        self.ended: dict[int, RunRecord] = {}
        self.now = 0  # the time of receipt of the entry being processed
        self.ctx = Context("keep_going", self._report)
        with building_for(self.ctx):  # no context of their own: they are connected to it
            ledger: Ledger[Any] = Ledger(on_run=self._run, max_runs=0, clock=lambda: self.now)
            self.stages = DefaultStages(
                self.store, verify=Verify(report_unfinished=True), ledger=ledger
            )
            self.enforce = Enforce()
        self.runner = Runner(
            [self.enforce, *self.stages], self.ctx, _ignore if quiet else self._update
        )
        self.runner.discard_fast = True  # _update takes completed items only
        self.events = 0
        self.entry_ids: list[str] = []
        self.envelopes: list[Envelope] = []
        self.starts: list[int] = []  # per envelope: the index of its first event
        self.out: list[tuple[OutputKind, Any]] = []

    def renew(self) -> None:
        """Make the segment as a new one on the same store is, its pipeline kept: each stage
        that holds per-stream state, the context and the runner as new (see their
        ``_renew``). Only after a clean segment (:attr:`clean`, :attr:`reported`): a stream
        that failed or was reported may leave state a new pipeline would not have."""
        self.ended = {}
        self.now = 0
        self.enforce.decoder.reset()
        stages = self.stages
        stages.expand_chunks._renew()
        verify = stages.verify
        assert verify is not None
        verify._renew()
        stages.ledger._renew()  # the accumulator holds nothing but the store
        self.ctx.renew()
        self.runner._renew()
        self.events = 0
        self.entry_ids = []
        self.envelopes = []
        self.starts = []
        self.out = []

    @property
    def reported(self) -> bool:
        """Whether anything was reported (of any severity)."""
        return any(kind == "report" for kind, _ in self.out)

    def _update(self, update: Any) -> None:
        item = update.item
        if update.done and item is not None:
            # item.to_wire() (in C when the core is in use): the output owns its
            # containers, which no later event can reach
            wire = wire_item(item)
            self.out.append(("item", {"event": update.event.type, "item": wire}))

    def _run(self, record: RunRecord) -> None:
        self.ended[id(record)] = record
        if not self.quiet:
            self.out.append(("run", msgspec.to_builtins(record, enc_hook=enc_hook)))

    def _report(self, report: Report) -> None:
        self.out.append(("report", _report_data(report, self._where(report.index))))

    def _where(self, index: int | None) -> tuple[str, int, int] | None:
        """Where the segment's event ``index`` came from: (source, seq, frame), or None."""
        if index is None or not 0 <= index < self.events:
            return None
        n = bisect_right(self.starts, index) - 1
        envelope = self.envelopes[n]
        return envelope.source, envelope.seq, index - self.starts[n]

    @property
    def open(self) -> bool:
        return self.stages.ledger.current is not None

    @property
    def clean(self) -> bool:
        """Whether the store holds what a store rebuilt from the closing snapshot would: the
        segment took nothing, or its run ended with ``RUN_FINISHED`` (the verifier insists that
        nothing is left open then) and no error was reported (then the next segment may keep the store rather than rebuild it; after a
        failed run, items it left open would behave otherwise than rebuilt closed ones)."""
        if not self.events:
            return True
        verify = self.stages.verify
        return (
            verify is not None
            and verify.run_state == "finished"
            and not any(
                kind == "report" and data.get("severity") == "error" for kind, data in self.out
            )
        )

    def take(self, envelope: Envelope) -> None:
        frames = envelope.frames
        self.envelopes.append(envelope)
        self.starts.append(self.events)  # (an end marker's is its successor's: bisect_right)
        self.now = envelope.received
        self.events += len(frames)
        if set(map(type, frames)) <= _BYTES:  # (a C loop: no generator step per frame)
            self.runner.feed_batch(frames)  # the fast path's loop over the whole envelope
        else:
            feed = self.runner.feed
            for frame in frames:
                feed(frame)

    def close(self) -> bool:
        """End the segment; whether it took any event (an end marker with nothing before it
        closes nothing: no new version)."""
        if not self.events:
            return False
        self.runner.close()
        return True


class Changes(msgspec.Struct, kw_only=True):
    """What processing entries changed, to be committed at once (then :meth:`ThreadState.take`).

    ``snapshot`` is the thread's new snapshot when a segment closed (``None`` otherwise),
    ``acks`` the entries that closed segments covered (all of them, acknowledged together),
    ``watermark`` the last entry whose outputs are in ``outputs`` (``None``: unchanged),
    ``usage`` the counters to add. ``cuts`` marks where each entry counted for the first time
    ends, as ``(entry id, end of its outputs in outputs, its events)``: a commit may be split
    after any of them (the outputs up to a cut, with that entry as the watermark and its entry
    and event counters) without ever emitting an output twice.
    """

    outputs: list[Output] = msgspec.field(default_factory=list)
    cuts: list[tuple[str, int, int]] = msgspec.field(default_factory=list)
    acks: list[str] = msgspec.field(default_factory=list)
    snapshot: ThreadSnapshot | None = None
    watermark: str | None = None
    usage: dict[str, int] = msgspec.field(default_factory=dict)


class ThreadState:
    """One thread between commits: its last snapshot, the open segment, the watermark.

    :param snapshot: the thread's stored snapshot (``ThreadSnapshot(thread_id=…)`` when none).
    :param watermark: the id of the last entry whose outputs were committed (``None``: none).
    :param store: a :class:`~agui_meta.Store` holding ``snapshot``'s content (built by the
        caller, say to check the snapshot), which the first segment starts from.

    The thread's store stays **live** from one segment to the next while its runs finish
    cleanly (see :attr:`_Segment.clean`): the next segment goes on with it instead of
    rebuilding it from the snapshot. The snapshot a segment closes on is taken only when it is
    read (:meth:`take`, :meth:`snapshot`), so a thread whose several runs close between two
    reads is copied once. When it is read while a later segment is open (the store has moved
    on), it is rebuilt: the last snapshot taken, with the entries of the segments closed since
    processed again (at most ``MAX_REPLAY`` events: past them, the snapshot is taken before
    the next segment starts). ``defer=False`` takes every snapshot before the next segment
    starts instead (the way to check the rebuild). :meth:`unload` drops the live store (the
    next segment rebuilds it from the snapshot), which is how a bounded set of live threads
    evicts one.

    With the store, a thread keeps the last segment's **pipeline** (``reuse=True``): when that
    segment was clean and reported nothing, the next one renews it (each stage, the context
    and the runner made as new ones would be, see :meth:`_Segment.renew`) instead of building
    a pipeline, which costs about as much as a short run's events. Anything else (a failed or
    reported run, an unloaded store, a store rebuilt from a snapshot) builds a new one.
    ``reuse=False`` builds one for every segment (the results are the same; the tests compare).
    ``quiet=True`` makes no item or run outputs and counts no usage: the state a snapshot is
    rebuilt with (:meth:`_replayed`), read for that snapshot only.
    """

    def __init__(
        self,
        snapshot: ThreadSnapshot,
        watermark: str | None = None,
        *,
        store: Store | None = None,
        defer: bool = True,
        reuse: bool = True,
        quiet: bool = False,
    ) -> None:
        self.thread_id = snapshot.thread_id
        self._defer = defer
        self._reuse = reuse
        self._quiet = quiet  # no item or run outputs, no usage: a replay (see _replayed)
        self._store = store
        # The pipeline of the last segment, kept for the next one while the store is live and
        # the segment was clean and reported nothing (``reuse``): renewed, not rebuilt.
        self._pipeline: _Segment | None = None
        #: The snapshot in the store (what the next commit's compare-and-set expects).
        self.stored = snapshot
        self._latest = snapshot
        # A closed segment's snapshot not taken yet: its store (live, unchanged since), its
        # version and its ledger summary.
        self._unsaved: tuple[Store, int, LedgerSummary] | None = None
        self._moved = False  # a segment has changed the unsaved snapshot's store since
        # The entries of the segments closed since ``_latest`` (all clean), and their events.
        self._since: list[Envelope] = []
        self._since_events = 0
        self._version = snapshot.version
        self._ledger = snapshot.ledger
        self._watermark = entry_key(watermark) if watermark else (-1, -1)
        self._segment: _Segment | None = None
        self._changes = Changes()
        self._closed = False  # a segment closed since the last take()
        self._last: tuple[str, int] | None = None

    @property
    def open(self) -> bool:
        """Whether entries are held in an open segment (so are still pending)."""
        return self._segment is not None

    @property
    def live(self) -> bool:
        """Whether a live store is kept for the next segment (no rebuild from the snapshot)."""
        return self._store is not None

    @property
    def held(self) -> list[str]:
        """The ids of the entries in the open segment (pending until it closes)."""
        return [] if self._segment is None else list(self._segment.entry_ids)

    def snapshot(self) -> ThreadSnapshot:
        """The thread's latest snapshot (at the last segment's close), taken now if not yet."""
        unsaved = self._unsaved
        if unsaved is not None:
            store, version, ledger = unsaved
            if self._moved:
                self._latest = self._replayed()
            else:
                self._latest = ThreadSnapshot.from_store(
                    self.thread_id, store, version=version, ledger=ledger
                )
            assert self._latest.version == version
            self._unsaved = None
            self._moved = False
            self._since = []
            self._since_events = 0
        return self._latest

    def _replayed(self) -> ThreadSnapshot:
        """The last closed segment's snapshot, from the last one taken and the entries since
        (the store has moved on): they are processed again on a store rebuilt from it."""
        again = ThreadState(self._latest, defer=False, quiet=True)  # read for its snapshot
        for envelope in self._since:
            again.apply("0-0", envelope)
        assert again._segment is None  # every one of those segments closed
        return again.snapshot()

    def unload(self) -> None:
        """Drop the live store (its snapshot taken first): the next segment rebuilds it.
        Nothing happens while a segment is open (its entries need its store)."""
        if self._segment is None:
            self.snapshot()
            self._store = None
            self._pipeline = None

    def apply(self, entry_id: str, envelope: Envelope) -> None:
        """Process one entry (in stream order); its changes join those of :meth:`take`."""
        segment = self._segment
        if segment is None:
            if self._unsaved is not None:
                if self._defer and self._since_events < MAX_REPLAY:
                    self._moved = True  # taken later, if read, by processing _since again
                else:
                    self.snapshot()  # the store is about to change: its copy first
            store = self._store
            kept, self._pipeline = self._pipeline, None
            if store is None:
                segment = _Segment(self._latest.to_store(), quiet=self._quiet)
            elif kept is not None and kept.store is store:
                kept.renew()
                segment = kept
            else:
                segment = _Segment(store, quiet=self._quiet)
            self._segment = segment
            self._store = None
        segment.entry_ids.append(entry_id)
        fresh = entry_key(entry_id) > self._watermark
        mark = len(segment.out)
        segment.take(envelope)
        self._last = (envelope.source, envelope.seq)
        if envelope.end or not segment.open:
            self._close(segment)
        self._collect(segment, mark, fresh, f"{self.thread_id}/{envelope.source}/{envelope.seq}")
        if fresh:
            changes = self._changes
            changes.watermark = entry_id
            changes.usage["entries"] = changes.usage.get("entries", 0) + 1
            changes.usage["events"] = changes.usage.get("events", 0) + len(envelope.frames)
            changes.cuts.append((entry_id, len(changes.outputs), len(envelope.frames)))
            self._watermark = entry_key(entry_id)

    def close_idle(self) -> None:
        """Close the open segment as if its source had ended (the inactivity timeout)."""
        segment = self._segment
        if segment is None:
            return
        mark = len(segment.out)
        self._close(segment)
        source, seq = self._last or ("", 0)
        self._collect(segment, mark, True, f"{self.thread_id}/{source}/{seq}/idle")

    def _collect(self, segment: _Segment, mark: int, fresh: bool, prefix: str) -> None:
        if not fresh:
            return
        thread, outputs = self.thread_id, self._changes.outputs
        for n, (kind, data) in enumerate(segment.out[mark:]):
            outputs.append(Output(key=f"{prefix}/{n}", thread=thread, kind=kind, data=data))

    def _close(self, segment: _Segment) -> None:
        self._segment = None
        changes = self._changes
        changes.acks.extend(segment.entry_ids)
        if segment.close():
            runs = segment.ended.values()
            self._version += 1
            self._ledger = self._ledger.add(runs)
            self._unsaved = (segment.store, self._version, self._ledger)
            self._moved = False  # the store is this snapshot's again
            self._closed = True
            if not self._quiet:
                for name, value in usage_fields(runs).items():
                    changes.usage[name] = changes.usage.get(name, 0) + value
        else:
            self._moved = False  # it took no event: the store is as the last segment left it
        if segment.clean:
            self._store = segment.store  # the next segment goes on with it
            self._since += segment.envelopes
            self._since_events += segment.events
            if self._reuse and not segment.reported:
                self._pipeline = segment  # and with its pipeline, renewed
        else:
            self.snapshot()  # taken before the store is dropped

    def take(self, *, snapshot: bool = True) -> Changes:
        """The changes since the last call (the caller commits them, all or nothing).

        ``snapshot=False`` leaves the snapshot out of the changes (``None``) without taking
        it: for a caller that reads only the last one, with :meth:`snapshot` (:func:`run_local`).
        """
        changes, self._changes = self._changes, Changes()
        if snapshot:
            if self._closed:
                changes.snapshot = self.snapshot()
            self.stored = self.snapshot()
            self._closed = False
        return changes


class LocalResult(msgspec.Struct, kw_only=True):
    """What :func:`run_local` produced: thread snapshots, outputs in order, usage counters."""

    threads: dict[str, ThreadSnapshot]
    outputs: list[Output]
    usage: dict[str, int]
    pending: dict[str, int]


#: The most events a thread processes again to rebuild a snapshot (see :class:`ThreadState`).
MAX_REPLAY: Final = 4096

#: How many threads :func:`run_local` (and a worker) keep live stores for, by default.
MAX_LIVE_THREADS: Final = 1024


class LiveThreads:
    """The threads kept live between runs, least recently used first, at most ``limit``.

    :meth:`touch` marks a thread used, with no open segment; past the limit the least recently
    used are given to ``evict`` (which unloads or forgets them). A thread whose segment is open
    is not counted (:meth:`discard` it): its entries need its store whatever the bound.
    """

    def __init__(self, limit: int, evict: Callable[[str], object]) -> None:
        if limit < 0:
            raise UsageError(f"the number of live threads must be >= 0, got {limit}")
        self.limit = limit
        self._evict = evict
        self._order: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._order)

    def touch(self, thread_id: str) -> None:
        order = self._order
        order.pop(thread_id, None)
        order[thread_id] = None
        if len(order) > self.limit:
            self._shrink()

    def discard(self, thread_id: str) -> None:
        self._order.pop(thread_id, None)

    def _shrink(self) -> None:
        order = self._order
        while len(order) > self.limit:
            thread_id = next(iter(order))
            del order[thread_id]
            self._evict(thread_id)


def run_local(
    envelopes: Iterable[Envelope], *, max_live: int = MAX_LIVE_THREADS, reuse: bool = True
) -> LocalResult:
    """Process envelopes in one process, in order: the reference the workers must equal.

    A source's envelope whose ``seq`` was already taken is a retry and is skipped, as ingest
    skips it, if it holds what was taken (its :meth:`Envelope.digest`); one that differs is
    refused, as ingest refuses it. ``pending`` counts, per thread, the entries of a run still
    open at the end.

    At most ``max_live`` threads keep their store live between runs (the least recently used
    beyond are unloaded to their snapshot and rebuilt from it when their next entry comes);
    the results are the same whatever the bound. A live thread keeps its pipeline too, renewed
    for its next run rather than built again (``reuse=False`` builds one per run: the same
    results, which the tests compare).

    :raises SourceConflict: an envelope at a sequence number its source took with another.
    :raises SequenceGap: an envelope past its source's next number (a gap, as ingest refuses it).
    :raises DataError: an envelope numbered below 1 (as ingest refuses it).
    """
    threads: dict[str, ThreadState] = {}

    def unload(thread_id: str) -> None:
        threads[thread_id].unload()

    live = LiveThreads(max_live, unload)
    # Per source, what each envelope taken held (Envelope._content): its digest is taken only
    # when a retry comes (most never do), the same as ingest's at that sequence number.
    taken: dict[str, list[bytes]] = {}
    closed: dict[str, ThreadState] = {}  # the threads that have a snapshot, in that order
    outputs: list[Output] = []
    usage: dict[str, int] = {}
    pending: dict[str, int] = {}
    for n, envelope in enumerate(envelopes, 1):
        contents = taken.setdefault(envelope.source, [])
        if envelope.seq < 1:
            raise DataError(
                f"source {envelope.source!r}: sequence numbers start at 1, not {envelope.seq}"
            )
        if envelope.seq <= len(contents):
            if _digest_of(contents[envelope.seq - 1]) != envelope.digest():
                raise SourceConflict(
                    f"source {envelope.source!r}: envelope {envelope.seq} differs from the "
                    "one this source sent there before",
                    source=envelope.source,
                    seq=envelope.seq,
                    thread=envelope.thread,
                )
            continue
        if envelope.seq != len(contents) + 1:
            raise SequenceGap(
                f"source {envelope.source!r} is at {len(contents)}, got {envelope.seq}"
            )
        contents.append(envelope._content())
        state = threads.get(envelope.thread)
        if state is None:
            state = threads[envelope.thread] = ThreadState(
                ThreadSnapshot(thread_id=envelope.thread), reuse=reuse
            )
        state.apply(f"0-{n}", envelope)
        if state.open:
            live.discard(envelope.thread)
        else:
            live.touch(envelope.thread)
        changes = state.take(snapshot=False)  # only the last snapshot is read, at the end
        outputs.extend(changes.outputs)
        if changes.acks and state._version:
            closed[envelope.thread] = state
        for name, value in changes.usage.items():
            usage[name] = usage.get(name, 0) + value
        pending[envelope.thread] = pending.get(envelope.thread, 0) + 1 - len(changes.acks)
    return LocalResult(
        threads={thread_id: state.snapshot() for thread_id, state in closed.items()},
        outputs=outputs,
        usage=usage,
        pending={t: n for t, n in pending.items() if n},
    )
