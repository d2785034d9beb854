"""The fused fast path of the built-in stages (``agui_meta._fuse``) against the stages one by one.

The conformance and differential tests compare the stages one by one with the reference
client; these compare the fused path with the stages one by one, on the same bytes: every
output (the update, the item exactly as of that update, the event index), every report, the
error that ends a stream, the store and the ledger must be equal.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_meta
from agui_meta import _fuse
from agui_meta._stage import Context, Transducer, close_chain, connect_chain
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
                agui_meta.encode_event(event),
                None if getattr(item, "item", None) is None else item.item.to_wire(),
                getattr(item, "done", None),
                getattr(item, "metadata", None),
            )
        )
        self.emit(item)


def _history(case: dict[str, Any]) -> agui_meta.Store:
    return agui_meta.Store(case.get("messages") or [], case.get("state") or {})


def _run(
    frames: list[bytes],
    *,
    fused: bool,
    mode: str = "default",
    ledger: bool = True,
    case: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The frames through enforce and the default stages; everything observable about it."""
    _fuse.ENABLED = fused
    minted = (uuid.UUID(int=n) for n in itertools.count())  # ids minted for THINKING_* events
    try:
        mock.patch.object(uuid, "uuid4", minted.__next__).start()
        reports: list[str] = []
        # A fixed clock: the ledger's receipt times are the same in both runs.
        led = agui_meta.ledger(clock=lambda: 0.0)
        stages = agui_meta.default_stages(_history(case or {}), ledger=led)
        chain: list[Transducer[Any, Any]] = [agui_meta.enforce(), *stages, _Record()]
        if not ledger:
            chain.remove(stages.ledger)
        ctx = Context(mode, lambda r: reports.append(repr(r)))  # type: ignore[arg-type]
        head, chain = connect_chain(chain, lambda _: None, ctx)
        assert (head == chain[0].feed) is not fused  # the fused path is in use, or not
        error = None
        try:
            for index, frame in enumerate(frames):
                ctx.index = index
                try:
                    head(frame)
                except agui_meta.DataError as exc:
                    ctx.skip(exc)
            close_chain(chain, ctx)
        except agui_meta.AguiMetaError as exc:
            error = (type(exc).__name__, str(exc), ctx.index)
        return {
            "outputs": chain[-1].seen,  # type: ignore[attr-defined]
            "reports": reports,
            "error": error,
            "messages": stages.store.messages_wire(),
            "state": stages.store.state,
            "ledger": stages.ledger.to_builtins() if ledger else None,
        }
    finally:
        mock.patch.stopall()
        _fuse.ENABLED = True


def _assert_same(frames: list[bytes], **kw: Any) -> dict[str, Any]:
    fused = _run(frames, fused=True, **kw)
    assert fused == _run(frames, fused=False, **kw)
    return fused


def _frames(events: list[Any]) -> list[bytes]:
    return [json.dumps(e).encode() if isinstance(e, dict) else e for e in events]


def _golden() -> Iterator[dict[str, Any]]:
    with open(GOLDEN / "cases.jsonl", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def test_the_default_chain_is_fused() -> None:
    stages = [agui_meta.enforce(), *agui_meta.default_stages()]
    head, chain = connect_chain(stages, lambda _: None, Context())
    assert head != chain[0].feed
    # A subclass of a built-in stage may do anything: no fusion.

    class MyVerify(agui_meta.Verify):
        pass

    stages = [agui_meta.enforce(), agui_meta.expand_chunks(), MyVerify(), agui_meta.accumulate()]
    head, chain = connect_chain(stages, lambda _: None, Context())
    assert head == chain[0].feed


@pytest.mark.parametrize("mode", MODES)
def test_golden_cases(mode: str) -> None:
    fast_paths = 0
    for case in _golden():
        frames = _frames(case["events"])
        for ledger in (True, False):
            result = _assert_same(frames, mode=mode, ledger=ledger, case=case)
        fast_paths += sum(1 for out in result["outputs"] if b"_CONTENT" in out[2])
    assert fast_paths > 100


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("history", [0, 50])
def test_generated_workloads(chunked: bool, history: int) -> None:
    frames = workload.frames(3000, seed=7, chunked=chunked, history=history)
    result = _assert_same(frames)
    assert result["error"] is None and result["messages"]


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(case=cases(), mode=st.sampled_from(MODES))
def test_generated_streams(case: dict[str, Any], mode: str) -> None:
    _assert_same(_frames(case["events"]), mode=mode, case=case)


@SETTINGS
@given(case=misordered_cases(), mode=st.sampled_from(MODES))
def test_misordered_streams(case: dict[str, Any], mode: str) -> None:
    _assert_same(_frames(case["events"]), mode=mode, case=case)


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
    for name, events in streams.items():
        result = _assert_same(_frames(events), mode=mode)
        if name in ("open", "many-brackets"):
            assert result["error"] is None and not result["reports"]
        elif name in ("nested-too-deep", "not-json", "not-open", "before-the-run", "after-the-run"):
            assert (result["error"] is None) is (mode == "keep_going")
            assert bool(result["reports"]) is (mode == "keep_going")


def test_a_frame_source_through_the_pipeline() -> None:
    """From SSE bytes through wrap(): frames, event indexes and offsets as without fusion."""
    frames = workload.frames(2000, seed=3)
    frames.insert(1500, b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": 1}')
    sse = b"".join(b"data: " + f + b"\n\n" for f in frames)

    async def run(fused: bool) -> tuple[Any, ...]:
        _fuse.ENABLED = fused
        try:
            stages = agui_meta.default_stages(ledger=agui_meta.ledger(clock=lambda: 0.0))
            reports: list[agui_meta.Report] = []
            async with agui_meta.wrap(
                [sse[i : i + 4096] for i in range(0, len(sse), 4096)],
                *stages,
                mode="keep_going",
                on_report=reports.append,
            ) as stream:
                updates = [(u.event, u.done, u.metadata) async for u in stream]
            return (
                msgspec.json.encode([u[0] for u in updates]),
                [u[1:] for u in updates],
                reports,
                stages.store.messages_wire(),
                stages.ledger.to_builtins(),
            )
        finally:
            _fuse.ENABLED = True

    fused = anyio.run(run, True)
    assert fused == anyio.run(run, False)
    (report,) = fused[2]
    assert report.index == 1500 and report.offset is not None
