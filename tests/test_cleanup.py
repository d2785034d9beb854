"""Cancellation and cleanup through the whole default stage list, with a store, on both backends.

Every scenario (the consumer breaking out early, a timeout cancelling mid-stream, the source
raising, a user stage raising, a slow consumer), with and without prefetch, asserts:

- the chain was closed in the right order, each iterator by the time the ``async with`` block
  ends (the closes are recorded in ``finally`` blocks of the source and of the user stages);
- no task outlives the pipeline (``anyio.get_running_tasks()`` before and after);
- no ResourceWarning and no coroutine left un-awaited, even after ``gc.collect()``;
- the store holds exactly what the events that reached the accumulator build: the same as a
  synchronous run (``agui_meta.run_sync``) over that prefix of the stream. The prefix is known
  exactly: with the accumulator in the first fused run, every source item pulled is processed
  before anything else happens (there is no ``await`` between the two); with a user stage in
  front of it, every event that stage yields is.

Two layouts: ``fused`` (``expand_chunks, verify, accumulate, <outer stage>``: the accumulator
runs with the source, in the prefetch task when there is one) and ``split`` (``<inner stage>,
expand_chunks, verify, accumulate, <outer stage>``: it runs in the consumer's task).
"""

from __future__ import annotations

import gc
import json
import sys
import warnings
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import pytest

import agui_meta
from agui_meta import Accumulate, ExpandChunks, Report, Update, Verify
from agui_meta.events import Event
from tests.helpers import sse

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found,unused-ignore]

pytestmark = pytest.mark.anyio

Layout = Literal["fused", "split"]

RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
EVENTS: list[dict[str, Any]] = [
    RUN,
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "metadata": {"acme.model": "a"}},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hel"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "lo"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1", "metadata": {"acme.tokens": 2}},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f", "parentMessageId": "m1"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q":'},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "1}"},
    {"type": "TOOL_CALL_END", "toolCallId": "c1", "metadata": {"acme.ms": 3}},
    {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "ok"},
    {"type": "STATE_SNAPSHOT", "snapshot": {"n": 0}},
    {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 1}]},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "delta": "a"},
    {"type": "TEXT_MESSAGE_CHUNK", "delta": "b", "metadata": {"acme.x": 1}},
    {"type": "TEXT_MESSAGE_CHUNK", "delta": "c"},
    {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": "a1",
        "activityType": "progress",
        "content": {"done": 1},
    },
    {"type": "TEXT_MESSAGE_START", "messageId": "m3"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m3", "delta": "bye"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m3"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]
#: The events of EVENTS that are no chunk: each builds exactly one update.
PLAIN = [e for e in EVENTS if not e["type"].endswith("_CHUNK")]


def payload(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()


class SourceBroke(Exception):
    pass


class StageBroke(Exception):
    pass


@dataclass
class Probe:
    """What the source and the user stages did, in order."""

    events: list[dict[str, Any]] = field(default_factory=lambda: list(EVENTS))
    log: list[str] = field(default_factory=list)
    pulled: int = 0  # source items handed over
    yielded: int = 0  # events the inner stage handed over

    async def source(
        self, *, stop_at: int | None = None, how: Literal["block", "raise"] = "block"
    ) -> AsyncIterator[bytes]:
        try:
            for i, event in enumerate(self.events):
                if i == stop_at:
                    if how == "block":
                        await anyio.sleep_forever()
                    raise SourceBroke(f"source broke at {i}")
                self.pulled += 1
                yield sse([event])  # one SSE event per read, as a server flushes them
        finally:
            self.log.append("source closed")

    def inner(self, *, fail_at: int | None = None) -> Any:
        async def stage(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
            try:
                async for event in events:
                    if self.yielded == fail_at:
                        raise StageBroke("inner broke")
                    self.yielded += 1
                    yield event
            finally:
                self.log.append("inner closed")

        return stage

    def outer(self, *, fail_at: int | None = None) -> Any:
        async def stage(updates: AsyncIterator[Update]) -> AsyncIterator[Update]:
            seen = 0
            try:
                async for update in updates:
                    if seen == fail_at:
                        raise StageBroke("outer broke")
                    seen += 1
                    yield update
            finally:
                self.log.append("outer closed")

        return stage

    def closes(self) -> list[str]:
        return [entry for entry in self.log if "closed" in entry or "ended" in entry]


def stages(
    probe: Probe,
    store: agui_meta.Store,
    layout: Layout,
    *,
    inner_fails_at: int | None = None,
    outer_fails_at: int | None = None,
) -> list[Any]:
    chain: list[Any] = [
        ExpandChunks(),
        Verify(),
        Accumulate(store),
        probe.outer(fail_at=outer_fails_at),
    ]
    if layout == "split":
        chain.insert(0, probe.inner(fail_at=inner_fails_at))
    return chain


def reached(probe: Probe, layout: Layout) -> int:
    """How many source events reached the accumulator (see the module docstring)."""
    return probe.pulled if layout == "fused" else probe.yielded


def assert_store_is_the_prefix(
    store: agui_meta.Store, events: list[dict[str, Any]], n: int
) -> None:
    expected = agui_meta.Store()
    agui_meta.run_sync(
        [agui_meta.Enforce(), ExpandChunks(), Verify(), Accumulate(expected)],
        [payload(e) for e in events[:n]],
    )
    assert store.messages_wire() == expected.messages_wire()
    assert store.state == expected.state


@contextmanager
def no_leaks() -> Iterator[None]:
    """No task outlives the block; nothing is left for the garbage collector to finish.

    Checked after ``gc.collect()``: no ResourceWarning (trio's for an async generator never
    closed), no RuntimeWarning (a coroutine never awaited), and no async generator finalized
    by the collector instead of closed (asyncio's event loop would close it later, silently,
    in a task of its own: the event loop's finalizer hook is wrapped to see that).
    """
    before = {task.id for task in anyio.get_running_tasks()}
    hooks = sys.get_asyncgen_hooks()
    collected: list[str] = []

    def finalizer(agen: Any) -> None:
        collected.append(agen.__qualname__)
        if hooks.finalizer is not None:
            hooks.finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
            gc.collect()
            gc.collect()
    finally:
        sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=hooks.finalizer)
    assert {task.id for task in anyio.get_running_tasks()} <= before
    leaks = [w for w in caught if issubclass(w.category, (ResourceWarning, RuntimeWarning))]
    assert leaks == [], [str(w.message) for w in leaks]
    assert collected == [], f"async generators left to the garbage collector: {collected}"


LAYOUTS = pytest.mark.parametrize("layout", ["fused", "split"])
PREFETCH = pytest.mark.parametrize("prefetch", [0, 1, 3])


# ---------------------------------------------------------------------------------------------
# The consumer breaks out early


@LAYOUTS
@PREFETCH
@pytest.mark.parametrize("after", [1, 7, 13])
async def test_break_closes_everything_in_order_and_keeps_what_was_assembled(
    layout: Layout, prefetch: int, after: int
) -> None:
    probe = Probe()
    store = agui_meta.Store()
    reports: list[Report] = []
    with no_leaks():
        async with agui_meta.wrap(
            probe.source(),
            *stages(probe, store, layout),
            prefetch=prefetch,
            on_report=reports.append,
        ) as stream:
            seen = 0
            async for _ in stream:
                seen += 1
                if seen == after:
                    break
        probe.log.append("block ended")
    expected = ["outer closed", "source closed", "block ended"]
    if layout == "split":
        expected.insert(1, "inner closed")
    assert probe.closes() == expected
    n = reached(probe, layout)
    assert_store_is_the_prefix(store, probe.events, n)
    assert n >= 1 and reports == []
    # The source was not pulled further than the buffers allow.
    assert probe.pulled <= after + prefetch + 2


# ---------------------------------------------------------------------------------------------
# A timeout cancels mid-stream


@LAYOUTS
@PREFETCH
async def test_a_timeout_mid_stream_closes_everything_and_keeps_what_was_assembled(
    layout: Layout, prefetch: int
) -> None:
    probe = Probe()
    store = agui_meta.Store()
    stop = 9  # the source waits forever before its 10th event
    got: list[str] = []
    with no_leaks():
        with anyio.move_on_after(0.05) as scope:
            async with agui_meta.wrap(
                probe.source(stop_at=stop), *stages(probe, store, layout), prefetch=prefetch
            ) as stream:
                async for update in stream:
                    got.append(update.event.type)
        probe.log.append("block ended")
    assert scope.cancelled_caught
    assert got == [e["type"] for e in EVENTS[:stop]]
    closes = probe.closes()
    assert closes[-1] == "block ended"
    if prefetch:
        # The source waits in the prefetch task, the stages in the consumer's: both are
        # cancelled at once, and within the consumer's task the chain unwinds upwards.
        assert sorted(closes[:-1]) == sorted(
            ["source closed", "outer closed"] + (["inner closed"] if layout == "split" else [])
        )
        assert (
            closes.index("outer closed") > closes.index("inner closed")
            if layout == "split"
            else True
        )
    else:
        # The cancellation is delivered where the chain waits, in the source: it unwinds from
        # there to the consumer.
        assert closes[:-1] == ["source closed"] + (
            ["inner closed"] if layout == "split" else []
        ) + ["outer closed"]
    assert reached(probe, layout) == stop
    assert_store_is_the_prefix(store, probe.events, stop)


@PREFETCH
async def test_fail_after_raises_timeout_error_itself(prefetch: int) -> None:
    probe = Probe()
    store = agui_meta.Store()
    with no_leaks(), pytest.raises(TimeoutError):
        with anyio.fail_after(0.05):
            async with agui_meta.wrap(
                probe.source(stop_at=5), *stages(probe, store, "split"), prefetch=prefetch
            ) as stream:
                async for _ in stream:
                    pass
    assert sorted(probe.closes()) == ["inner closed", "outer closed", "source closed"]
    assert_store_is_the_prefix(store, probe.events, 5)


# ---------------------------------------------------------------------------------------------
# The source raises


@LAYOUTS
@PREFETCH
async def test_a_source_error_reaches_the_caller_and_keeps_what_was_assembled(
    layout: Layout, prefetch: int
) -> None:
    probe = Probe()
    store = agui_meta.Store()
    with no_leaks():
        with pytest.raises(SourceBroke, match="source broke at 11") as info:
            async with agui_meta.wrap(
                probe.source(stop_at=11, how="raise"),
                *stages(probe, store, layout),
                prefetch=prefetch,
            ) as stream:
                async for _ in stream:
                    pass
        probe.log.append("block ended")
    assert not isinstance(info.value, BaseExceptionGroup)
    # Raised inside the source, which therefore finishes first; the error then passes up
    # through every stage, each closing as it does.
    expected = ["source closed", "outer closed", "block ended"]
    if layout == "split":
        expected.insert(1, "inner closed")
    assert probe.closes() == expected
    n = reached(probe, layout)
    if layout == "split" and prefetch:
        # Batches still in the prefetch buffer when the source failed never reach the
        # accumulator, which runs in the consumer's task here (cancelled by the failure).
        assert n <= 11
    else:
        assert n == 11
    assert_store_is_the_prefix(store, probe.events, n)


# ---------------------------------------------------------------------------------------------
# A user stage raises


@PREFETCH
@pytest.mark.parametrize("where", ["inner", "outer"])
async def test_a_user_stage_error_reaches_the_caller_and_keeps_what_was_assembled(
    prefetch: int, where: str
) -> None:
    probe = Probe()
    store = agui_meta.Store()
    fail = {"inner_fails_at": 8} if where == "inner" else {"outer_fails_at": 8}
    with no_leaks():
        with pytest.raises(StageBroke, match=f"{where} broke") as info:
            async with agui_meta.wrap(
                probe.source(), *stages(probe, store, "split", **fail), prefetch=prefetch
            ) as stream:
                async for _ in stream:
                    pass
        probe.log.append("block ended")
    assert not isinstance(info.value, BaseExceptionGroup)
    assert isinstance(info.value.agui_event_index, int)  # type: ignore[attr-defined]
    if where == "inner":
        # The inner stage finishes as it raises, the outer one as the error passes through it;
        # the source, suspended, is closed last, from the consumer's end.
        assert probe.closes() == ["inner closed", "outer closed", "source closed", "block ended"]
        # The inner stage had handed over 8 events: exactly those were assembled.
        assert probe.yielded == 8
    else:
        assert probe.closes() == ["outer closed", "inner closed", "source closed", "block ended"]
        # The outer stage failed on its 9th update: the accumulator had built at least that
        # far, and exactly as far as the inner stage had handed over.
        assert probe.yielded >= 9
    assert_store_is_the_prefix(store, probe.events, probe.yielded)


# ---------------------------------------------------------------------------------------------
# A slow consumer


@LAYOUTS
@PREFETCH
async def test_a_slow_consumer_holds_the_source_back(layout: Layout, prefetch: int) -> None:
    """Back-pressure: the source is never more than the buffers ahead of the consumer.

    One source item (one SSE event without chunks) makes one update, so the consumer's count
    is the number of source items it has seen. Ahead of it there can be: ``prefetch`` batches
    in the buffer, one in the prefetch task's hands, and in the split layout one item in each
    async stage.
    """
    probe = Probe(events=PLAIN)
    store = agui_meta.Store()
    consumed = 0
    ahead = prefetch + 1 + (2 if layout == "split" else 1)
    with no_leaks():
        async with agui_meta.wrap(
            probe.source(), *stages(probe, store, layout), prefetch=prefetch
        ) as stream:
            async for _ in stream:
                consumed += 1
                for _ in range(5):  # a slow consumer: every chance for the others to run
                    await anyio.lowlevel.checkpoint()
                assert probe.pulled <= consumed + ahead
                # Whatever the lag, the store is exactly the prefix that reached it.
                assert_store_is_the_prefix(store, probe.events, reached(probe, layout))
        probe.log.append("block ended")
    assert consumed == len(PLAIN)
    expected = ["source closed", "outer closed", "block ended"]
    if layout == "split":
        expected.insert(1, "inner closed")
    assert probe.closes() == expected
    assert_store_is_the_prefix(store, probe.events, len(PLAIN))


async def test_the_prefix_comparison_can_fail() -> None:
    """The store check is not vacuous: a store one event short is told apart."""
    store = agui_meta.Store()
    agui_meta.run_sync(
        [agui_meta.Enforce(), ExpandChunks(), Verify(), Accumulate(store)],
        [payload(e) for e in EVENTS[:3]],
    )
    with pytest.raises(AssertionError):
        assert_store_is_the_prefix(store, EVENTS, 4)
    assert_store_is_the_prefix(store, EVENTS, 3)


@pytest.mark.parametrize("iterate", [False, True])
def test_a_finished_pipeline_is_freed_without_the_cycle_collector(iterate: bool) -> None:
    # The stages hold none of their own bound methods (handler_table, fast_converts): once
    # nothing refers to a finished pipeline, reference counting frees its stages, its stream
    # and a store without messages; the cyclic collector (off here) is not needed for them.
    frames = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"STEP_STARTED","stepName":"s"}',
        b'{"type":"STEP_FINISHED","stepName":"s"}',
        b'{"type":"CUSTOM","name":"x","value":1}',
        b'{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
    ]
    data = b"".join(b"data: " + f + b"\n\n" for f in frames)

    def run() -> list[weakref.ref[Any]]:
        stages = agui_meta.DefaultStages(agui_meta.Store())
        refs: list[weakref.ref[Any]] = [weakref.ref(s) for s in stages]
        refs.append(weakref.ref(stages.store))

        async def main() -> None:
            async with agui_meta.wrap([data], *stages) as stream:
                refs.append(weakref.ref(stream))
                if iterate:
                    async for _ in stream:
                        pass
                else:
                    await stream.drain()

        anyio.run(main)
        assert stages.ledger.runs[0].event_counts["STEP_STARTED"] == 1
        return refs

    gc.collect()
    gc.disable()
    try:
        refs = run()
        alive = [type(r()).__name__ for r in refs if r() is not None]
    finally:
        gc.enable()
    assert len(refs) == 6 and alive == []


def test_a_store_of_messages_is_freed_without_the_cycle_collector() -> None:
    # The store's order holds no cycle (weak back-links, see _store._Node): once nothing
    # refers to it, reference counting frees its messages and their positions. (A tool call
    # and the message holding it point at each other: this stream has none.)
    from agui_meta._store import _Node

    frames = [b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}']
    for i in range(20):
        frames += [
            b'{"type":"TEXT_MESSAGE_START","messageId":"m%d","metadata":{"k":%d}}' % (i, i),
            b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m%d","delta":"x"}' % i,
            b'{"type":"TEXT_MESSAGE_END","messageId":"m%d","metadata":{"u":1}}' % i,
        ]
    frames += [
        b'{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"p","content":{"n":1}}',
        (
            b'{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m0","role":"user","content":"hi"},'
            b'{"id":"m1","role":"assistant","content":"yo"},{"id":"m0","role":"user","content":"x"}]}'
        ),
        b'{"type":"TEXT_MESSAGE_START","messageId":"m9"}',
        b'{"type":"TEXT_MESSAGE_END","messageId":"m9"}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
    ]
    data = b"".join(b"data: " + f + b"\n\n" for f in frames)

    def live() -> int:
        return sum(type(o) in (agui_meta.MessageItem, _Node) for o in gc.get_objects())

    def run() -> int:
        stages = agui_meta.DefaultStages(agui_meta.Store())

        async def main() -> None:
            async with agui_meta.wrap([data], *stages) as stream:
                await stream.drain()

        anyio.run(main)
        return len(stages.store)

    gc.collect()
    gc.disable()
    try:
        before = live()
        held = run()
        after = live()
    finally:
        gc.enable()
    assert held == 4 and after == before


async def test_a_chain_that_ran_to_its_end_is_closed_without_a_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Closing a chain whose generators all ran to their end runs no code: the pipeline's exit
    # spawns no task for it (on asyncio, uninterrupted() closes in a task of its own). A chain
    # left in the middle (a consumer breaking out) is still closed, its source's finally run.
    from agui_meta import _pipeline

    closes: list[object] = []
    real = _pipeline.uninterrupted

    async def counted(close: Any) -> None:
        closes.append(close)
        await real(close)

    monkeypatch.setattr(_pipeline, "uninterrupted", counted)
    finished: list[str] = []
    frames = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
              {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}]  # fmt: skip

    async def source() -> AsyncIterator[bytes]:
        try:
            for frame in frames:
                yield sse([frame])
        finally:
            finished.append("source")

    async with agui_meta.wrap(source(), *agui_meta.DefaultStages()) as stream:
        assert await stream.drain() == 2
    assert finished == ["source"] and closes == []
    async with agui_meta.wrap(source(), *agui_meta.DefaultStages()) as stream:
        async for _ in stream:
            break
    assert finished == ["source", "source"] and len(closes) == 1
