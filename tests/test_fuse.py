"""The fast path the built-in stages describe, run by the driver, against their own ``feed``s.

The conformance and differential tests compare the stages one by one with the reference
client; these compare the fast path (``Runner(..., fuse=True)``) with the stages one by one
(``fuse=False``), on the same input, for every chain of built-in stages the driver fuses: every
output (the update, the item exactly as of that update, the event index), every report, the
error that ends a stream, the store and the ledger must be equal, and the fast path must have
been taken.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_meta
from agui_meta._driver import Runner
from agui_meta._stage import Context, Transducer
from benchmarks import workload
from tests.strategies import cases, misordered_cases

GOLDEN = Path(__file__).parent / "golden"
MODES = ("default", "keep_going", "strict")


class _Record(Transducer[Any, Any]):
    """Records each output as it is emitted: the item is frozen then, as later events change it."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def feed(self, item: Any) -> None:
        event = item.event if isinstance(item, agui_meta.Update) else item
        self.seen.append(
            (
                self.ctx.index,
                type(item).__name__,
                agui_meta.events.encode_event(event),
                None if getattr(item, "item", None) is None else item.item.to_wire(),
                getattr(item, "done", None),
                getattr(item, "metadata", None),
            )
        )
        self.emit(item)


def _history(case: dict[str, Any]) -> agui_meta.Store:
    return agui_meta.Store(case.get("messages") or [], case.get("state") or {})


#: Every chain of built-in stages after enforce that makes sense: any subset of the four, in
#: any order where accumulate (whose outputs are updates) comes after expand_chunks and verify.
NAMES = ("expand", "verify", "accumulate", "ledger")
CHAINS = [
    chain
    for size in range(len(NAMES) + 1)
    for chain in itertools.permutations(NAMES, size)
    if "accumulate" not in chain
    or all(chain.index(n) < chain.index("accumulate") for n in ("expand", "verify") if n in chain)
]
DEFAULT = ("expand", "verify", "accumulate", "ledger")


def _stages(names: tuple[str, ...], store: agui_meta.Store) -> dict[str, Transducer[Any, Any]]:
    made: dict[str, Callable[[], Transducer[Any, Any]]] = {
        "expand": agui_meta.ExpandChunks,
        "verify": agui_meta.Verify,
        "accumulate": lambda: agui_meta.Accumulate(store),
        # A fixed clock: the ledger's receipt times are the same in both runs.
        "ledger": lambda: agui_meta.Ledger(clock=lambda: 0.0),
    }
    return {name: made[name]() for name in names}


def _run(
    frames: list[bytes],
    *,
    fuse: bool,
    mode: str = "default",
    chain: tuple[str, ...] = DEFAULT,
    case: dict[str, Any] | None = None,
    sse: bool = False,
    decoded: bool = False,
    batch: bool = False,
) -> dict[str, Any]:
    """The frames through enforce and the stages; everything observable about it.

    ``sse``: the frames as one SSE stream in 1 KiB chunks (the driver's batch loop), else one
    frame per item; ``decoded``: events decoded beforehand, fed without enforce; ``batch``:
    the frames in batches of 7 through ``Runner.feed_batch`` (a Redis worker's envelopes).
    """
    minted = (uuid.UUID(int=n) for n in itertools.count())  # ids minted for THINKING_* events
    try:
        mock.patch.object(uuid, "uuid4", minted.__next__).start()
        reports: list[str] = []
        store = _history(case or {})
        stages = _stages(chain, store)
        calls = [0]
        for stage in stages.values():  # count the calls of each stage's own feed
            stage.feed = _counting(stage.feed, calls)  # type: ignore[method-assign]
        record = _Record()
        items: list[Any] = frames
        head: list[Transducer[Any, Any]] = [agui_meta.Enforce()]
        if decoded:
            head = []
            items = _decoded(frames)
        elif sse:
            data = b"".join(b"data: " + f + b"\n\n" for f in frames)
            items = [data[i : i + 1024] for i in range(0, len(data), 1024)]
        ctx = Context(mode, lambda r: reports.append(repr(r)))  # type: ignore[arg-type]
        runner = Runner(
            [*head, *stages.values(), record], ctx, fuse=fuse, framing="sse" if sse else None
        )
        error = None
        try:
            if batch:
                for i in range(0, len(items), 7):
                    runner.feed_batch(items[i : i + 7])
            else:
                for item in items:
                    runner.feed(item)
            runner.close()
        except agui_meta.AguiMetaError as exc:
            error = (type(exc).__name__, str(exc), ctx.index)
        ledger = stages.get("ledger")
        return {
            "outputs": record.seen,
            "reports": reports,
            "error": error,
            "messages": store.messages_wire(),
            "state": store.state,
            "ledger": None if ledger is None else ledger.to_builtins(),  # type: ignore[attr-defined]
            "calls": calls[0],
            "fused": runner.fused,
        }
    finally:
        mock.patch.stopall()


def _decoded(frames: list[bytes]) -> list[Any]:
    decoder = agui_meta.EventDecoder(on_report=lambda r: None)
    return [decoder.decode(f) for f in frames]


def _decodes(frames: list[bytes]) -> bool:
    try:
        return None not in _decoded(frames)
    except agui_meta.DataError:
        return False


def _counting(feed: Callable[[Any], None], calls: list[int]) -> Callable[[Any], None]:
    def counted(item: Any) -> None:
        calls[0] += 1
        feed(item)

    return counted


def _assert_same(frames: list[bytes], **kw: Any) -> dict[str, Any]:
    fused = _run(frames, fuse=True, **kw)
    unfused = _run(frames, fuse=False, **kw)
    assert fused.pop("fused") == len(kw.get("chain", DEFAULT)) + (not kw.get("decoded"))
    assert unfused.pop("fused") == 0
    fused_calls, unfused_calls = fused.pop("calls"), unfused.pop("calls")
    assert fused == unfused
    assert fused_calls <= unfused_calls
    fused["skipped_calls"] = unfused_calls - fused_calls
    return fused


def _frames(events: list[Any]) -> list[bytes]:
    return [json.dumps(e).encode() if isinstance(e, dict) else e for e in events]


def _golden() -> Iterator[dict[str, Any]]:
    with open(GOLDEN / "cases.jsonl", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def test_which_chains_are_fused() -> None:
    store = agui_meta.Store()
    default = Runner([agui_meta.Enforce(), *agui_meta.DefaultStages(store)], Context())
    assert default.fused == 5
    unverified = Runner([agui_meta.Enforce(), *agui_meta.DefaultStages(verify=False)], Context())
    assert unverified.fused == 4
    assert Runner([*agui_meta.DefaultStages()], Context()).fused == 4
    assert Runner([*agui_meta.DefaultStages()], Context(), fuse=False).fused == 0

    # A subclass that overrides feed offers no fast path: the run ends before it.
    class MyVerify(agui_meta.Verify):
        def feed(self, item: Any) -> None:
            super().feed(item)

    mine = [agui_meta.Enforce(), agui_meta.ExpandChunks(), MyVerify(), agui_meta.Accumulate()]
    assert Runner(mine, Context()).fused == 2
    # A subclass that changes nothing keeps it.

    class Quiet(agui_meta.Verify):
        pass

    quiet = [agui_meta.Enforce(), agui_meta.ExpandChunks(), Quiet(), agui_meta.Accumulate()]
    assert Runner(quiet, Context()).fused == 4
    # A user transducer ends the run; so does a stage that takes events after accumulate.
    user = [agui_meta.Enforce(), agui_meta.ExpandChunks(), _Record(), agui_meta.Accumulate()]
    assert Runner(user, Context()).fused == 2
    after = [agui_meta.Enforce(), agui_meta.Accumulate(), agui_meta.Verify()]
    assert Runner(after, Context()).fused == 2


@pytest.mark.parametrize("mode", MODES)
def test_golden_cases(mode: str) -> None:
    skipped = 0
    for case in _golden():
        frames = _frames(case["events"])
        for chain in (DEFAULT, ("expand", "accumulate", "ledger"), ("expand", "accumulate")):
            skipped += _assert_same(frames, mode=mode, chain=chain, case=case)["skipped_calls"]
        _assert_same(frames, mode=mode, case=case, sse=True)
        if _decodes(frames):
            _assert_same(frames, mode=mode, case=case, decoded=True)
    assert skipped > 100


@pytest.mark.parametrize("chain", CHAINS, ids="-".join)
def test_every_chain_on_the_golden_cases(chain: tuple[str, ...]) -> None:
    skipped = 0
    for case in itertools.islice(_golden(), 0, None, 4):  # a quarter of them, for every chain
        result = _assert_same(_frames(case["events"]), chain=chain, case=case)
        skipped += result["skipped_calls"]
    assert skipped > 0 or not chain


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("history", [0, 50])
def test_generated_workloads(chunked: bool, history: int) -> None:
    frames = workload.frames(3000, seed=7, chunked=chunked, history=history)
    result = _assert_same(frames, sse=True)
    assert result["error"] is None and result["messages"]
    assert result["skipped_calls"] > 1000 or chunked  # chunk streams stay open


@pytest.mark.parametrize("chain", CHAINS, ids="-".join)
def test_every_chain_on_a_generated_workload(chain: tuple[str, ...]) -> None:
    frames = workload.frames(600, seed=11, chunked=True, history=5)
    _assert_same(frames, chain=chain, sse=True)


SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(case=cases(), mode=st.sampled_from(MODES), chain=st.sampled_from(CHAINS))
def test_generated_streams(case: dict[str, Any], mode: str, chain: tuple[str, ...]) -> None:
    _assert_same(_frames(case["events"]), mode=mode, case=case, chain=chain)


@SETTINGS
@given(case=misordered_cases(), mode=st.sampled_from(MODES), chain=st.sampled_from(CHAINS))
def test_misordered_streams(case: dict[str, Any], mode: str, chain: tuple[str, ...]) -> None:
    _assert_same(_frames(case["events"]), mode=mode, case=case, chain=chain)


@pytest.mark.parametrize("mode", MODES)
def test_batches_of_events_from_no_byte_stream(mode: str) -> None:
    # Runner.feed_batch (a Redis worker's envelopes): the fast path's loop over a batch, with
    # every output, report and error of the stages one event at a time.
    for case in _golden():
        frames = _frames(case["events"])
        batched = _run(frames, fuse=True, mode=mode, case=case, batch=True)
        assert batched.pop("fused") == len(DEFAULT) + 1
        one_by_one = _run(frames, fuse=False, mode=mode, case=case)
        batched.pop("calls"), one_by_one.pop("calls"), one_by_one.pop("fused")
        assert batched == one_by_one, case.get("name")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(misordered_cases(), st.sampled_from(MODES))
def test_batches_of_misordered_events(case: dict[str, Any], mode: str) -> None:
    frames = _frames(case["events"])
    batched = _run(frames, fuse=True, mode=mode, case=case, batch=True)
    one_by_one = _run(frames, fuse=False, mode=mode, case=case)
    for got in (batched, one_by_one):
        got.pop("calls"), got.pop("fused")
    assert batched == one_by_one


def _delta(kind: str, id: str, **extra: Any) -> dict[str, Any]:
    if kind == "TOOL_CALL_ARGS":
        return {"type": kind, "toolCallId": id, "delta": "{", **extra}
    return {"type": kind, "messageId": id, "delta": "d", **extra}


START = {
    "TEXT_MESSAGE_CONTENT": {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    "REASONING_MESSAGE_CONTENT": {
        "type": "REASONING_MESSAGE_START",
        "messageId": "m",
        "role": "reasoning",
    },
    "TOOL_CALL_ARGS": {"type": "TOOL_CALL_START", "toolCallId": "m", "toolCallName": "f"},
}
RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}


@pytest.mark.parametrize("kind", sorted(START))
@pytest.mark.parametrize("mode", MODES)
def test_every_precondition_of_the_fast_path(kind: str, mode: str) -> None:
    """Each way a content delta leaves the fast path gives what the stages give."""
    brackets: dict[str, Any] = {"a": [[[[[[[[[[]]]]]]]]]] * 40}  # many, not deep
    deep: Any = []
    for _ in range(agui_meta.MAX_NESTING):
        deep = [deep]
    streams: dict[str, list[Any]] = {
        "open": [RUN, START[kind], _delta(kind, "m"), _delta(kind, "m", metadata={"k": 1})],
        "before-the-run": [_delta(kind, "m")],
        "after-the-run": [RUN, START[kind], {**RUN, "type": "RUN_FINISHED"}, _delta(kind, "m")],
        "not-open": [RUN, _delta(kind, "other")],
        "tagged": [RUN, START[kind], _delta(kind, "m", subagentRunId="s")],
        "chunk-open": [
            RUN,
            START[kind],
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "c", "delta": "x"},
            _delta(kind, "m"),
        ],
        "many-brackets": [RUN, START[kind], _delta(kind, "m", metadata=brackets)],
        "nested-too-deep": [RUN, START[kind], _delta(kind, "m", metadata={"a": deep})],
        "not-json": [RUN, START[kind], b'{"type": "TEXT_MESSAGE_CONTENT",'],
        "unknown-member": [RUN, START[kind], _delta(kind, "m", extra=1)],
        "null-metadata": [RUN, START[kind], _delta(kind, "m", metadata=None)],
    }
    for (name, events), sse in itertools.product(streams.items(), (False, True)):
        result = _assert_same(_frames(events), mode=mode, sse=sse)
        if name in ("open", "many-brackets"):
            assert result["error"] is None and not result["reports"]
        if name == "open":  # every kind of delta of an open item takes it, to the ledger
            assert result["skipped_calls"] >= 2 * len(DEFAULT), (kind, result["skipped_calls"])
        elif name in ("nested-too-deep", "not-json", "not-open", "before-the-run", "after-the-run"):
            assert (result["error"] is None) is (mode == "keep_going")
            assert bool(result["reports"]) is (mode == "keep_going")


def test_a_frame_source_through_the_pipeline() -> None:
    """From SSE bytes through wrap(): frames, event indexes and offsets as without fusion."""
    frames = workload.frames(2000, seed=3)
    frames.insert(1500, b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": 1}')
    sse = b"".join(b"data: " + f + b"\n\n" for f in frames)

    async def run(fused: bool) -> tuple[Any, ...]:
        stages = agui_meta.DefaultStages(ledger=agui_meta.Ledger(clock=lambda: 0.0))
        reports: list[agui_meta.Report] = []
        async with agui_meta.wrap(
            [sse[i : i + 4096] for i in range(0, len(sse), 4096)],
            *stages,
            mode="keep_going",
            on_report=reports.append,
            fuse=fused,
        ) as stream:
            updates = [(u.event, u.done, u.metadata) async for u in stream]
        return (
            msgspec.json.encode([u[0] for u in updates]),
            [u[1:] for u in updates],
            reports,
            stages.store.messages_wire(),
            stages.ledger.to_builtins(),
        )

    fused = anyio.run(run, True)
    assert fused == anyio.run(run, False)
    (report,) = fused[2]
    assert report.index == 1500 and report.offset is not None


@pytest.mark.parametrize("size", [1, 7, 64, 1024, 16384])
def test_feed_runs_gives_the_frames_feed_gives(size: int) -> None:
    """SSEDecoder.feed_runs (what the driver's batch loop reads) against feed, any chunking."""
    from agui_meta._framing import AutoDecoder, PayloadRun, SSEDecoder

    frames = workload.frames(400, seed=5, chunked=True)
    sse = b"".join(b"data: " + f + b"\n\n" for f in frames[:200])
    sse += b"id: 7\n" + b"".join(b"data: " + f + b"\n\n" for f in frames[200:300])
    sse += b": keep-alive\n\n" + b"".join(b"data: " + f + b"\r\n\r\n" for f in frames[300:])
    chunks = [sse[i : i + size] for i in range(0, len(sse), size)]
    for make in (SSEDecoder, AutoDecoder):
        plain, runs = make(), make()
        want = [f for c in chunks for f in plain.feed(c)] + plain.close()
        got: list[Any] = []
        for c in chunks:
            for part in runs.feed_runs(c):
                got.extend(part.frames() if isinstance(part, PayloadRun) else [part])
        assert got + runs.close() == want
        assert len(want) == len(frames)
