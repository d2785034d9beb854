"""The engine-free thread processor under the Redis workers: segments, keys, watermark, replay."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_meta
import agui_meta.events
import agui_meta.redis
from agui_meta import _durable, aggregate_token_usage
from agui_meta._durable import Envelope, ThreadState, envelopes, run_local
from agui_meta._stage import Context
from agui_meta.redis import read_frames
from agui_meta.threads import ThreadSnapshot
from tests.helpers import cli

STREAMS = Path(__file__).parent.parent / "examples" / "streams"
NAMES = ["travel.sse", "support.jsonl", "broken.jsonl"]


def _cli_json(*args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(cli(*args).stdout)
    return data


def test_docstring_examples_run() -> None:
    # Found through the public module, which the objects name as theirs.
    result = doctest.testmod(agui_meta.redis)
    assert result.attempted >= 1
    assert result.failed == 0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch", [1, 5, 1000])
def test_the_thread_is_what_replay_assembles(name: str, batch: int) -> None:
    frames = read_frames(str(STREAMS / name))
    result = run_local(envelopes(frames, thread="t", source="s", batch=batch))
    expected = _cli_json("replay", "--json", "--keep-going", str(STREAMS / name))
    snap = result.threads["t"]
    assert snap.messages == expected["messages"]
    assert snap.state == expected["state"]
    runs = expected["ledger"]["runs"]
    assert snap.ledger.runs == len(runs)
    usage = [u for run in runs for u in run.get("usage", [])]
    assert msgspec.to_builtins(snap.ledger.usage) == msgspec.to_builtins(
        aggregate_token_usage(msgspec.convert(usage, list[agui_meta.events.TokenUsage]))
    )
    assert result.pending == {}
    assert result.usage["events"] == len(frames)
    keys = [o.key for o in result.outputs]
    assert len(keys) == len(set(keys))


def test_reports_are_those_validate_gives() -> None:
    frames = read_frames(str(STREAMS / "broken.jsonl"))
    result = run_local(envelopes(frames, thread="t", source="s", batch=4))
    reports = [o.data for o in result.outputs if o.kind == "report"]
    expected = subprocess.run(
        [sys.executable, "-m", "agui_meta", "validate", str(STREAMS / "broken.jsonl")],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    codes = [
        line.split("[", 1)[1].split("]", 1)[0] for line in expected.splitlines() if "[" in line
    ]
    assert [r["code"] for r in reports if r["code"] != "unprefixed-metadata-key"] == [
        c for c in codes if c != "unprefixed-metadata-key"
    ]
    located = [r for r in reports if "index" in r]
    assert located and all(r["source"] == "s" and r["seq"] >= 1 for r in located)


def test_envelopes_are_cut_at_the_batch_size_and_after_each_run_end() -> None:
    frames = read_frames(str(STREAMS / "support.jsonl"))
    cut = list(envelopes(frames, thread="t", source="s", batch=7, clock=lambda: 1.5))
    assert {e.received for e in cut} == {1500}
    assert [e.seq for e in cut] == list(range(1, len(cut) + 1))
    assert all(len(e.frames) <= 7 for e in cut)
    assert [f for e in cut for f in e.frames] == frames
    assert cut[-1].end and not cut[-1].frames
    for envelope in cut[:-1]:
        types = [json.loads(f)["type"] for f in envelope.frames]
        ends = [i for i, t in enumerate(types) if t in ("RUN_FINISHED", "RUN_ERROR")]
        assert ends in ([], [len(types) - 1])
    assert list(envelopes(frames, thread="t", source="s", batch=7, clock=lambda: 1.5)) == cut
    assert Envelope.decode(cut[0].encode()) == cut[0]
    assert not list(envelopes(frames, thread="t", source="s", end=False))[-1].end
    with pytest.raises(agui_meta.UsageError, match="at least 1"):
        list(envelopes(frames, thread="t", source="s", batch=0))


def test_a_retried_envelope_is_taken_once() -> None:
    frames = read_frames(str(STREAMS / "travel.sse"))
    cut = list(envelopes(frames, thread="t", source="s", batch=9))
    once = run_local(cut)
    twice = run_local(cut[:5] + cut[:8] + cut[3:] + cut)
    assert twice == once
    other = list(envelopes(frames[1:], thread="t", source="s", batch=9))
    with pytest.raises(
        agui_meta.redis.SourceConflict, match="source 's': envelope 1 differs"
    ) as info:
        run_local(cut + other)
    assert (info.value.source, info.value.seq, info.value.thread) == ("s", 1, "t")
    with pytest.raises(agui_meta.redis.SequenceGap, match="source 's' is at 0, got 2") as gap:
        run_local(cut[1:])
    assert type(gap.value) is agui_meta.redis.SequenceGap
    for seq in (0, -1):  # refused, as ingest refuses it (not read as a retry of the last one)
        numbered = msgspec.structs.replace(cut[1], seq=seq)
        with pytest.raises(agui_meta.DataError, match=f"start at 1, not {seq}"):
            run_local([*cut[:2], numbered])


def test_an_end_marker_closes_an_open_run_as_validate_would() -> None:
    frames = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"cut off"}',
    ]
    open_only = run_local(envelopes(frames, thread="t", source="s", end=False))
    assert open_only.pending == {"t": 1}
    assert open_only.threads == {}
    ticks = iter([100.0, 200.0])
    closed = run_local(envelopes(frames, thread="t", source="s", clock=lambda: next(ticks)))
    assert closed.pending == {}
    [record] = [o.data for o in closed.outputs if o.kind == "run"]
    # Events without a timestamp get their envelope's time of receipt; a run the end of the
    # source closes ends at the latest time it knew (the ledger's rule).
    assert (record["startedAt"], record["startedClock"]) == (100_000, "receipt")
    assert (record["endedAt"], record["endedClock"]) == (100_000, "receipt")
    kinds = [(o.kind, o.data.get("code") or o.data.get("status")) for o in closed.outputs]
    assert ("report", "stream-ended-open") in kinds
    assert ("run", "incomplete") in kinds
    assert closed.threads["t"].messages[0]["content"] == "cut off"
    assert closed.usage["runs|incomplete"] == 1
    assert all(o.key.startswith("t/s/2/") for o in closed.outputs)  # the marker's entry


def test_an_inactivity_close_is_keyed_after_the_last_entry() -> None:
    frames = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}',
    ]
    state = ThreadState(ThreadSnapshot(thread_id="t"))
    for n, envelope in enumerate(envelopes(frames, thread="t", source="s", end=False), 1):
        state.apply(f"1-{n}", envelope)
    assert state.open
    assert not state.take().acks
    state.close_idle()
    changes = state.take()
    assert not state.open
    assert changes.acks == ["1-1"]
    assert changes.snapshot is not None and changes.snapshot.version == 1
    assert {o.key.rsplit("/", 1)[0] for o in changes.outputs} == {"t/s/1/idle"}
    assert "stream-ended-open" in [o.data.get("code") for o in changes.outputs]


def _crash_run(
    cut: list[Envelope], crash_after: int
) -> tuple[list[Any], ThreadSnapshot | None, dict[str, int]]:
    """Process ``cut`` with a 'crash' after ``crash_after`` commits: a new ThreadState replays
    the pending entries onto the committed snapshot and watermark, as a new owner does."""
    committed_outputs: list[Any] = []
    snapshot = ThreadSnapshot(thread_id="t")
    watermark: str | None = None
    pending: list[tuple[str, Envelope]] = []
    usage: dict[str, int] = {}
    entries = [(f"5-{n}", e) for n, e in enumerate(cut, 1)]
    state = ThreadState(snapshot, watermark)
    for i, (entry_id, envelope) in enumerate(entries):
        if i == crash_after:
            state = ThreadState(snapshot, watermark)  # the new owner
            for old_id, old in pending:
                state.apply(old_id, old)
        state.apply(entry_id, envelope)
        pending.append((entry_id, envelope))
        changes = state.take()  # the commit
        committed_outputs += changes.outputs
        if changes.snapshot is not None:
            snapshot = changes.snapshot
        if changes.watermark is not None:
            watermark = changes.watermark
        pending = [p for p in pending if p[0] not in changes.acks]
        for k, v in changes.usage.items():
            usage[k] = usage.get(k, 0) + v
    return committed_outputs, snapshot, usage


@pytest.mark.parametrize("name", NAMES)
def test_a_new_owner_replays_pending_entries_and_emits_each_output_once(name: str) -> None:
    frames = read_frames(str(STREAMS / name))
    cut = list(envelopes(frames, thread="t", source="s", batch=3))
    expected = run_local(cut)
    for crash_after in range(len(cut) + 1):
        outputs, snapshot, usage = _crash_run(cut, crash_after)
        assert outputs == expected.outputs, crash_after
        assert snapshot == expected.threads["t"], crash_after
        assert usage == expected.usage, crash_after


def test_a_store_kept_across_runs_gives_what_one_rebuilt_from_each_snapshot_gives() -> None:
    # A thread of many runs, of every recorded stream in turn (broken ones too): a state that
    # keeps its store from run to run, and one rebuilt from the stored snapshot after each
    # run (as a new owner would be), give the same outputs, snapshots and counters.
    def ev(**fields: str) -> bytes:
        return json.dumps(fields).encode()

    # A run that fails with a message and a tool call open; later runs reuse their ids.
    failed = [
        ev(type="RUN_STARTED", threadId="t", runId="r1"),
        ev(type="TEXT_MESSAGE_START", messageId="m", role="assistant"),
        ev(type="TEXT_MESSAGE_CONTENT", messageId="m", delta="a"),
        ev(type="TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
        ev(type="RUN_ERROR", message="x"),
        ev(type="RUN_STARTED", threadId="t", runId="r2"),
        ev(type="TEXT_MESSAGE_START", messageId="m", role="assistant"),
        ev(type="TEXT_MESSAGE_CONTENT", messageId="m", delta="b"),
        ev(type="TEXT_MESSAGE_END", messageId="m"),
        ev(type="RUN_FINISHED", threadId="t", runId="r2"),
        ev(type="RUN_STARTED", threadId="t", runId="r3"),
        ev(type="TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
        ev(type="TOOL_CALL_END", toolCallId="c"),
        ev(type="RUN_FINISHED", threadId="t", runId="r3"),
    ]
    recorded = [f for name in NAMES for f in read_frames(str(STREAMS / name))]
    frames = recorded + failed + recorded
    cut = list(envelopes(frames, thread="t", source="s", batch=5))
    kept = ThreadState(ThreadSnapshot(thread_id="t"))
    rebuilt = ThreadState(ThreadSnapshot(thread_id="t"))
    reused = 0
    for n, envelope in enumerate(cut, 1):
        entry_id = f"1-{n}"
        kept.apply(entry_id, envelope)
        rebuilt.apply(entry_id, envelope)
        reused += kept._store is not None
        one, other = kept.take(), rebuilt.take()
        assert one == other, n
        if other.snapshot is not None:
            rebuilt = ThreadState(other.snapshot, entry_id)
    assert reused  # the store was kept across some runs (those that finished cleanly)


def test_entries_of_an_open_run_stay_pending_until_it_ends() -> None:
    frames = read_frames(str(STREAMS / "travel.sse"))
    cut = list(envelopes(frames, thread="t", source="s", batch=10, end=False))
    state = ThreadState(ThreadSnapshot(thread_id="t"))
    acked: list[str] = []
    for n, envelope in enumerate(cut, 1):
        state.apply(f"1-{n}", envelope)
        changes = state.take()
        acked += changes.acks
        assert (changes.snapshot is not None) == bool(changes.acks)
        assert changes.watermark == f"1-{n}"
    assert acked == [f"1-{n}" for n in range(1, len(cut) + 1)]
    assert not state.open


def _run_with_usage(run_id: str, *usage: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id, "usage": list(usage)},
    ]


def test_usage_counters_keep_any_provider_and_model_apart() -> None:
    """A ``|`` in a name, an empty name and an absent one are three different labels."""
    frames = [
        msgspec.json.encode(event)
        for event in [
            *_run_with_usage(
                "r1",
                {"provider": "a|b", "model": "c", "inputTokens": 1},
                {"provider": "a", "model": "b|c", "inputTokens": 2},
            ),
            *_run_with_usage(
                "r2",
                {"provider": "", "model": "m", "inputTokens": 4},
                {"model": "m", "inputTokens": 8},
                {"provider": "a|b", "model": "c", "outputTokens": 16},
            ),
        ]
    ]
    result = run_local(envelopes(frames, thread="t", source="s", batch=1))
    usage = _durable.usage_of(result.usage)
    assert usage["runs"] == {"finished": 2}
    assert sorted(usage["tokens"], key=json.dumps) == sorted(
        [
            {"provider": "a|b", "model": "c", "inputTokens": 1, "outputTokens": 16},
            {"provider": "a", "model": "b|c", "inputTokens": 2},
            {"provider": "", "model": "m", "inputTokens": 4},
            {"model": "m", "inputTokens": 8},
        ],
        key=json.dumps,
    )


def test_a_counter_name_agui_meta_never_writes_is_named() -> None:
    with pytest.raises(agui_meta.DataError, match=r"'tokens\|openai\|gpt\|inputTokens'"):
        _durable.usage_of({"tokens|openai|gpt|inputTokens": 3})


def test_a_segment_runs_on_the_drivers_fused_fast_path() -> None:
    state = ThreadState(ThreadSnapshot(thread_id="t"))
    frames = read_frames(str(STREAMS / "travel.sse"))
    state.apply("1-1", next(iter(envelopes(frames[:5], thread="t", source="s", end=False))))
    segment = state._segment
    assert segment is not None and segment.runner.fused >= 3


# -- the live store against the rebuild, over generated run sequences ----------------------------


def _runs_of(frames: list[bytes]) -> list[list[bytes]]:
    """A recorded stream cut into its runs (each ends with RUN_FINISHED or RUN_ERROR)."""
    runs: list[list[bytes]] = [[]]
    for frame in frames:
        runs[-1].append(frame)
        if _durable._terminal(frame):
            runs.append([])
    return [run for run in runs if run]


def _ev(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


#: Runs to draw from: the recorded streams' runs, and runs that fail, end early, reuse ids,
#: replace the history, or break the rules (so that the next segment must rebuild).
_RUNS: list[list[bytes]] = [
    *(run for name in NAMES for run in _runs_of(read_frames(str(STREAMS / name)))),
    [
        _ev(type="RUN_STARTED", threadId="t", runId="f"),
        _ev(type="TEXT_MESSAGE_START", messageId="m", role="assistant"),
        _ev(type="TEXT_MESSAGE_CONTENT", messageId="m", delta="open"),
        _ev(type="TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
        _ev(type="RUN_ERROR", message="failed"),
    ],
    [
        _ev(type="RUN_STARTED", threadId="t", runId="g"),
        _ev(type="TEXT_MESSAGE_START", messageId="m", role="assistant"),
        _ev(type="TEXT_MESSAGE_CONTENT", messageId="m", delta="again"),
        _ev(type="TEXT_MESSAGE_END", messageId="m"),
        _ev(type="TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
        _ev(type="TOOL_CALL_ARGS", toolCallId="c", delta="{}"),
        _ev(type="TOOL_CALL_END", toolCallId="c"),
        _ev(type="RUN_FINISHED", threadId="t", runId="g"),
    ],
    [
        _ev(type="RUN_STARTED", threadId="t", runId="s"),
        _ev(type="MESSAGES_SNAPSHOT", messages=[{"id": "u", "role": "user", "content": "new"}]),
        _ev(type="STATE_SNAPSHOT", snapshot={"n": 1}),
        _ev(type="STATE_DELTA", delta=[{"op": "add", "path": "/k", "value": [1]}]),
        _ev(type="RUN_FINISHED", threadId="t", runId="s"),
    ],
    [  # the rules broken: content of a message never started, a finish of another run
        _ev(type="RUN_STARTED", threadId="t", runId="b"),
        _ev(type="TEXT_MESSAGE_CONTENT", messageId="nope", delta="x"),
        _ev(type="RUN_FINISHED", threadId="t", runId="other"),
        _ev(type="RUN_FINISHED", threadId="t", runId="b"),
    ],
    [_ev(type="RUN_ERROR", message="after the end")],  # nothing open: a lone error
    [  # cut off: the run stays open until the source ends
        _ev(type="RUN_STARTED", threadId="t", runId="o"),
        _ev(type="TEXT_MESSAGE_START", messageId="o-m", role="assistant"),
        _ev(type="TEXT_MESSAGE_CONTENT", messageId="o-m", delta="cut"),
    ],
]


def _rebuilt_local(order: list[Envelope]) -> _durable.LocalResult:
    """run_local's results the way a new owner gets them: every thread's state built again from
    its last snapshot after each entry that closed a segment (no live store, ever)."""
    states: dict[str, ThreadState] = {}
    snapshots: dict[str, ThreadSnapshot] = {}
    outputs: list[Any] = []
    usage: dict[str, int] = {}
    pending: dict[str, int] = {}
    for n, envelope in enumerate(order, 1):
        thread = envelope.thread
        state = states.get(thread) or ThreadState(ThreadSnapshot(thread_id=thread), defer=False)
        entry_id = f"0-{n}"
        state.apply(entry_id, envelope)
        changes = state.take()
        outputs += changes.outputs
        for name, value in changes.usage.items():
            usage[name] = usage.get(name, 0) + value
        pending[thread] = pending.get(thread, 0) + 1 - len(changes.acks)
        if changes.snapshot is not None:
            snapshots[thread] = changes.snapshot
        if state.open:
            states[thread] = state
        else:  # rebuilt from what was stored, as a new owner would
            states[thread] = ThreadState(state.stored, entry_id, defer=False)
    return _durable.LocalResult(
        threads=snapshots,
        outputs=outputs,
        usage=usage,
        pending={t: n for t, n in pending.items() if n},
    )


def _interleaved(picks: list[tuple[int, int]], batch: int) -> tuple[list[Envelope], dict[int, int]]:
    """Runs (``(thread, run)`` picks of :data:`_RUNS`) interleaved, each thread's runs one
    source in ``batch``-event envelopes; with each thread's next sequence number."""
    seqs = {thread: 1 for thread, _ in picks}
    sequence: list[Envelope] = []
    for thread, run in picks:
        cut = list(
            envelopes(
                _RUNS[run],
                thread=f"t{thread}",
                source=f"s{thread}",
                batch=batch,
                first_seq=seqs[thread],
                end=False,
            )
        )
        seqs[thread] += len(cut)
        sequence += cut
    return sequence, seqs


@given(
    picks=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, len(_RUNS) - 1)), min_size=1, max_size=12
    ),
    batch=st.integers(1, 40),
    ends=st.booleans(),
    max_live=st.integers(0, 3),
    every=st.integers(1, 6),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_live_stores_give_what_rebuilding_from_each_snapshot_gives(
    picks: list[tuple[int, int]], batch: int, ends: bool, max_live: int, every: int
) -> None:
    # Runs of three threads interleaved, each thread's runs one source; with live stores
    # (bounded: the least recently used evicted to their snapshot) and with a rebuild from
    # the stored snapshot after every segment: the same outputs, snapshots, usage, pending.
    sequence, seqs = _interleaved(picks, batch)
    if ends:
        sequence += [Envelope(f"t{t}", f"s{t}", seqs[t], end=True) for t in sorted(seqs)]
    reference = _rebuilt_local(sequence)
    live = run_local(sequence, max_live=max_live)
    unbounded = run_local(sequence)
    assert live == reference
    assert unbounded == reference
    # A commit every few entries (a worker's batches): a snapshot read while a later segment
    # is open is rebuilt from the last one taken and the entries since.
    first = sequence[0].thread
    state = ThreadState(ThreadSnapshot(thread_id=first))
    rebuilt = ThreadState(ThreadSnapshot(thread_id=first), defer=False)
    for n, envelope in enumerate((e for e in sequence if e.thread == first), 1):
        state.apply(f"1-{n}", envelope)
        rebuilt.apply(f"1-{n}", envelope)
        if n % every == 0:
            assert state.take() == rebuilt.take()
    assert state.take() == rebuilt.take()


# -- a pipeline kept and renewed across runs, against one built per run --------------------------


def _shape(value: Any, owner: object) -> Any:
    """A stage's state as plain data: bound methods by function, the stage itself by name."""
    if value is owner:
        return "<self>"
    func = getattr(value, "__func__", None)
    if func is not None:
        return ("method", func, _shape(value.__self__, owner))
    if isinstance(value, dict):
        return (type(value), {k: _shape(v, owner) for k, v in value.items()})
    if isinstance(value, (list, tuple, set, frozenset)) or type(value).__name__ == "deque":
        return (type(value), [_shape(v, owner) for v in value], getattr(value, "maxlen", None))
    if type(value).__module__.startswith("agui_meta") and not isinstance(value, type):
        names = list(getattr(value, "__dict__", ())) + list(getattr(value, "__slots__", ()))
        return (type(value), {k: _shape(getattr(value, k), owner) for k in names})
    return value


def _state_of(stage: Any, fresh: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both stages' attributes (their own, and their class's the other set), as plain data."""
    names = (set(vars(stage)) | set(vars(fresh))) - {"ctx", "emit", "on_run", "_clock", "store"}
    return (
        {k: _shape(getattr(stage, k), stage) for k in sorted(names)},
        {k: _shape(getattr(fresh, k), fresh) for k in sorted(names)},
    )


@pytest.mark.parametrize("name", NAMES)
def test_renewed_stages_are_as_new_ones(name: str) -> None:
    # After runs of every kind (failed, reported, cut off), each stage a durable segment
    # renews holds exactly what a new one holds.
    frames = [f for run in _RUNS for f in run] + read_frames(str(STREAMS / name))
    segment = _durable._Segment(agui_meta.Store())
    segment.take(Envelope("t", "s", 1, frames))
    segment.close()
    segment.renew()
    fresh = _durable._Segment(agui_meta.Store())
    for attr in ("expand_chunks", "verify", "ledger"):
        renewed, new = _state_of(getattr(segment.stages, attr), getattr(fresh.stages, attr))
        assert renewed == new, attr
    assert _shape(segment.enforce.decoder._compat, None) == _shape(
        fresh.enforce.decoder._compat, None
    )
    ctx, new_ctx = segment.ctx, fresh.ctx
    assert [getattr(ctx, k) for k in Context.__slots__ if k != "on_report"] == [
        getattr(new_ctx, k) for k in Context.__slots__ if k != "on_report"
    ]
    assert segment.runner._count == 0 and not segment.runner.out
    assert (segment.out, segment.envelopes, segment.starts, segment.events) == ([], [], [], 0)


@given(
    picks=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, len(_RUNS) - 1)), min_size=1, max_size=20
    ),
    batch=st.integers(1, 40),
    max_live=st.integers(0, 4),
    restores=st.sets(st.integers(1, 60), max_size=4),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_pipeline_renewed_across_runs_gives_what_one_built_per_run_gives(
    picks: list[tuple[int, int]], batch: int, max_live: int, restores: set[int]
) -> None:
    # Many runs of five threads interleaved (failed runs, reported ones, runs cut off among
    # them), bounded live threads (evictions), and a thread now and then restored from its
    # stored snapshot, as a worker that loads it again: a ThreadState that renews its
    # pipeline and one that builds one per segment give the same changes after every entry
    # (outputs, snapshots, counters), the same stores and the same results of run_local.
    sequence, _ = _interleaved(picks, batch)
    assert run_local(sequence, max_live=max_live) == run_local(
        sequence, max_live=max_live, reuse=False
    )
    pairs: dict[str, tuple[ThreadState, ThreadState]] = {}
    for n, envelope in enumerate(sequence, 1):
        thread_id = envelope.thread
        pair = pairs.get(thread_id)
        if pair is None:
            snapshot = ThreadSnapshot(thread_id=thread_id)
            pair = pairs[thread_id] = (ThreadState(snapshot), ThreadState(snapshot, reuse=False))
        reused, built = pair
        reused.apply(f"1-{n}", envelope)
        built.apply(f"1-{n}", envelope)
        assert reused.take() == built.take(), n
        assert reused.live == built.live
        if reused.live:
            one, other = reused._store, built._store
            assert one is not None and other is not None
            assert one.messages_wire() == other.messages_wire()
            assert one.state == other.state
        if n in restores and not reused.open:  # loaded again from what was stored
            stored, mark = reused.stored, f"1-{n}"
            pairs[thread_id] = (
                ThreadState(stored, mark, store=stored.to_store()),
                ThreadState(stored, mark, store=stored.to_store(), reuse=False),
            )
        elif n % 7 == 0:  # evicted
            reused.unload()
            built.unload()
    for reused, built in pairs.values():
        reused.close_idle()
        built.close_idle()
        assert reused.take() == built.take()


def test_a_clean_run_renews_the_pipeline_and_an_unclean_one_rebuilds_it() -> None:
    clean, failed = _RUNS[-5], _RUNS[-6]  # RUN_FINISHED with nothing reported; RUN_ERROR
    state = ThreadState(ThreadSnapshot(thread_id="t"))
    seq = 0

    def run(frames: list[bytes]) -> Any:
        nonlocal seq
        seq += 1
        state.apply(f"1-{seq}", Envelope("t", "s", seq, frames))
        state.take()
        return state._pipeline

    first = run(clean)
    assert first is not None and run(clean) is first  # renewed
    assert run(failed) is None  # the next run builds one
    again = run(clean)
    assert again is not None and again is not first
    state.unload()
    assert state._pipeline is None


def _typed(value: Any) -> Any:
    """A value as plain data with every type in it: equal only if equal with the same types."""
    if isinstance(value, dict):
        return (type(value), [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value), [_typed(v) for v in value])
    return (type(value), value)


def _all_runs() -> list[bytes]:
    return [f for run in _RUNS for f in run] + [
        f for name in NAMES for f in read_frames(str(STREAMS / name))
    ]


def test_an_item_output_is_the_items_wire_form_as_of_its_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The item outputs are built from the store's own containers copied in one go
    # (MessageItem._wire_view, copy_wire; in C when the core is in use): each is to_wire()
    # exactly, types included, taken when its event completed the item.
    checked = []
    update_of = _durable._Segment._update

    def _update(self: Any, update: Any) -> None:
        update_of(self, update)
        if update.done and update.item is not None:
            kind, data = self.out[-1]
            assert kind == "item"
            want = {"event": update.event.type, "item": update.item.to_wire()}
            assert _typed(data) == _typed(want)
            assert _typed(agui_meta._metadata.copy_wire(update.item._wire_view())) == _typed(
                want["item"]
            )
            checked.append(update.event.type)

    monkeypatch.setattr(_durable._Segment, "_update", _update)
    for batch in (1, 7, 64):
        run_local(envelopes(_all_runs(), thread="t", source=f"s{batch}", batch=batch))
    assert {"TEXT_MESSAGE_END", "TOOL_CALL_END", "TOOL_CALL_RESULT", "ACTIVITY_DELTA"} <= set(
        checked
    )


def test_no_later_event_or_change_reaches_an_output_already_given() -> None:
    # Outputs own their containers: the events after them (reopened messages, activity
    # deltas patching content, metadata merged again) leave them as they were given, and
    # changing an output changes nothing in the thread.
    frames = _all_runs() * 2  # the same ids again: every item reopened, patched, merged
    state = ThreadState(ThreadSnapshot(thread_id="t"))
    given: list[tuple[Any, bytes]] = []
    for n, envelope in enumerate(envelopes(frames, thread="t", source="s", batch=5), 1):
        state.apply(f"0-{n}", envelope)
        outputs = state.take(snapshot=False).outputs
        given += [(o, msgspec.json.encode(o.data)) for o in outputs]
    assert given
    for output, encoded in given:
        assert msgspec.json.encode(output.data) == encoded, output.key

    def scribble(value: Any) -> None:
        if isinstance(value, dict):
            for v in list(value.values()):
                scribble(v)
            value["scribbled"] = True
        elif isinstance(value, list):
            for v in value:
                scribble(v)
            value.append("scribbled")

    before = msgspec.json.encode(state.snapshot())
    again = ThreadState(ThreadSnapshot(thread_id="t"))
    for n, envelope in enumerate(envelopes(frames, thread="t", source="s", batch=5), 1):
        again.apply(f"0-{n}", envelope)
        for output in again.take(snapshot=False).outputs:
            scribble(output.data)
    assert msgspec.json.encode(again.snapshot()) == before


def test_a_retry_is_compared_with_what_was_taken_not_with_a_list_changed_since() -> None:
    # run_local keeps what each envelope held when it was taken and digests it on a retry:
    # a list the caller changed since does not make the retry of what was taken a conflict.
    frames = read_frames(str(STREAMS / "travel.sse"))
    cut = list(envelopes(frames, thread="t", source="s", batch=9))
    want = run_local(cut)
    first = msgspec.structs.replace(cut[0], frames=list(cut[0].frames))

    def then_changed() -> Any:
        yield first
        yield from cut[1:]
        first.frames.append(b'{"type":"RUN_STARTED","threadId":"t","runId":"x"}')
        yield cut[0]  # a retry of what was taken

    got = run_local(then_changed())
    assert (got.outputs, got.usage, got.pending) == (want.outputs, want.usage, want.pending)


native_only = pytest.mark.skipif(
    agui_meta._speedups.NATIVE is None, reason="the C core is not in use"
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


@native_only
@given(
    value=_JSON,
    merges=st.lists(st.dictionaries(st.text(max_size=2), _JSON, max_size=3), max_size=4),
    older=st.booleans(),
)
def test_the_c_copy_wire_is_the_python_one(value: Any, merges: list[Any], older: bool) -> None:
    from agui_meta._metadata import MergedMetadata, copy_wire, merge_metadata

    native = agui_meta._speedups.NATIVE
    assert native is not None
    versions = [MergedMetadata()]
    for incoming in merges:
        versions.append(merge_metadata(versions[-1], incoming))
    if older and len(versions) > 1:
        versions.append(merge_metadata(versions[0], {"k": 1}))  # an older version, its record
    wired = {"value": value, "metadata": versions[-1], "all": [value, *versions]}

    class Sub(dict):  # type: ignore[type-arg]
        pass

    for case in (wired, value, versions[-1], [Sub(a=[value])], {"s": Sub(b=value)}):
        got, want = native.copy_wire(case, copy_wire), copy_wire(case)
        assert _typed(got) == _typed(want)

        assert not _containers(got) & _containers(case)  # every container a new one


def _containers(value: Any) -> set[int]:
    """The ids of the dicts and lists in value (in merged metadata's values too)."""
    from agui_meta._metadata import MergedMetadata

    if type(value) is MergedMetadata:
        return set().union(*map(_containers, value._plain_dict().values()))
    if isinstance(value, dict):
        return {id(value)}.union(*map(_containers, value.values()))
    if isinstance(value, list):
        return {id(value)}.union(*map(_containers, value))
    return set()


@native_only
def test_the_c_wire_item_is_the_python_one_on_history_items_too() -> None:
    # Items the C core hands back (nulls a history held, deltas not joined yet, odd members)
    # and those it does itself: each is to_wire(), types included.
    from agui_meta._store import MessageItem

    native = agui_meta._speedups.NATIVE
    assert native is not None
    wire: list[dict[str, Any]] = [
        {"id": None, "role": "assistant", "content": None, "metadata": None},
        {"id": "m", "role": "assistant", "toolCalls": [{"id": None, "type": "function"}]},
        {
            "id": "m",
            "role": "assistant",
            "toolCalls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}},
                {"id": "d", "type": "function", "function": "not an object", "x": [1]},
                {"id": "e", "type": "function", "function": {"name": None, "extra": [2]}},
            ],
            "metadata": {"a": {"b": [1]}},
            "extra": {"k": [None, 1.5, True]},
        },
        {"id": "t", "role": "tool", "content": "r", "toolCallId": "c"},
        {"id": "p", "role": "activity", "content": {"steps": [{"s": 1}]}, "activityType": "P"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"id": "x", "role": "assistant", "toolCalls": "odd"},
    ]
    for data in wire:
        for streaming in (False, True):
            item = MessageItem.from_wire(data)
            if streaming and isinstance(item.content, str):
                item.append_content(" more")  # left to join
            if streaming and item.tool_calls:
                item.tool_calls[0].append_arguments("{")
            got = native.wire_item(item, agui_meta._store._to_wire)
            assert _typed(got) == _typed(item.to_wire())
            owned = [item.fields, item._content, item.metadata]
            for call in item.tool_calls or []:
                owned += [call.fields, call.function_fields, call._args, call.metadata]
            assert not _containers(got) & _containers(owned)  # the store's own: none shared
