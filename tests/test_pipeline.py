"""The pipeline: composition, sources, single use, cleanup order, cancellation, back-pressure."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import agui_meta
from agui_meta import DataError, PipelineClosed, PipelineConsumed, Report, Transducer, UsageError
from agui_meta.events import Event, RunStartedEvent, TextMessageContentEvent
from tests import needs
from tests.helpers import sse

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

pytestmark = pytest.mark.anyio

RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
END = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def text(mid: str, *deltas: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": mid},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": d} for d in deltas),
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
    ]


STREAM = [RUN, *text("m1", "Hel", "lo"), END]


async def collect(source: Any, *stages: Any, **kw: Any) -> list[Any]:
    async with agui_meta.wrap(source, *stages, **kw) as stream:
        return [x async for x in stream]


class Log:
    """Records what happened, in order, to check cleanup order."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def __call__(self, entry: str) -> None:
        self.entries.append(entry)


def source_gen(log: Log, events: list[dict[str, Any]], *, fail_at: int | None = None):
    async def gen() -> AsyncIterator[dict[str, Any]]:
        try:
            for i, e in enumerate(events):
                if i == fail_at:
                    raise KeyError("source broke")
                log(f"source yields {i}")
                yield e
        finally:
            log("source closed")

    return gen()


def user_stage(log: Log, name: str, *, fail_on: str | None = None):
    async def stage(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        try:
            async for e in events:
                if e.type == fail_on:
                    raise ZeroDivisionError(f"{name} broke")
                yield e
        finally:
            log(f"{name} closed")

    return stage


# -- sources -----------------------------------------------------------------------------------


async def test_sources_of_every_kind_give_the_same_events() -> None:
    expected = [e["type"] for e in STREAM]
    lines = [json.dumps(e) for e in STREAM]

    async def agen() -> AsyncIterator[dict[str, Any]]:
        for e in STREAM:
            yield e

    events = [agui_meta.events.decode_event(e) for e in STREAM]
    blob = sse(STREAM)
    for source, kw in [
        (STREAM, {}),
        (agen(), {}),
        (events, {}),
        ([blob], {}),
        ([blob[i : i + 7] for i in range(0, len(blob), 7)], {}),
        (blob, {}),
        ("\n".join(lines) + "\n", {}),
        ([line + "\r\n" for line in lines], {}),
        (lines, {"format": "json"}),
        ([line.encode() for line in lines], {"format": "json"}),
    ]:
        got = await collect(source, **kw)
        assert [e.type for e in got] == expected, (source, kw)
        assert all(isinstance(e, Event) for e in got)


async def test_ag_ui_core_models_are_accepted() -> None:
    core = needs.module("ag_ui.core")
    models = [
        core.RunStartedEvent(thread_id="t", run_id="r"),
        core.TextMessageStartEvent(message_id="m", role="assistant"),
        core.TextMessageContentEvent(message_id="m", delta="hi"),
    ]
    got = await collect(models)
    assert isinstance(got[2], TextMessageContentEvent)
    assert got[2].delta == "hi"


# -- composition -------------------------------------------------------------------------------


class Upper(Transducer[Event, Event]):
    def feed(self, item: Event) -> None:
        if isinstance(item, TextMessageContentEvent):
            item = msgspec.structs.replace(item, delta=item.delta.upper())
        self.emit(item)


async def test_stages_compose_left_to_right_first_nearest_the_source() -> None:
    seen: list[str] = []

    def recorder(name: str):
        async def stage(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
            async for e in events:
                seen.append(f"{name}:{e.type}")
                yield e

        return stage

    got = await collect([RUN], recorder("a"), Upper(), recorder("b"))
    assert [e.type for e in got] == ["RUN_STARTED"]
    assert seen == ["a:RUN_STARTED", "b:RUN_STARTED"]


async def test_user_transducers_fuse_with_async_stages() -> None:
    async def double(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        async for e in events:
            yield e
            if isinstance(e, TextMessageContentEvent):
                yield e

    got = await collect(STREAM, double, Upper())
    deltas = [e.delta for e in got if isinstance(e, TextMessageContentEvent)]
    assert deltas == ["HEL", "HEL", "LO", "LO"]


async def test_batches_and_drain() -> None:
    async with agui_meta.wrap([sse(STREAM)]) as stream:
        batches = [b async for b in stream.batches()]
    assert [e.type for b in batches for e in b] == [e["type"] for e in STREAM]
    assert all(batches)
    async with agui_meta.wrap(STREAM) as stream:
        assert await stream.drain() == len(STREAM)


async def test_middleware_adapter_function_and_class() -> None:
    async def tag(input: Any, next: Any) -> AsyncIterator[Event]:
        async for e in next.run(input):
            if isinstance(e, RunStartedEvent):
                e = msgspec.structs.replace(e, metadata={"mw.tag": 1})
            yield e

    class Drop(agui_meta.Middleware):
        async def run(self, input: Any, next: Any) -> AsyncIterator[Event]:  # type: ignore[override]
            async for e in self.run_next(input, next):
                if e.type != "TEXT_MESSAGE_END":
                    yield e

    chunked = [RUN, {"type": "TEXT_MESSAGE_CHUNK", "messageId": "c", "delta": "x"}, END]
    got = await collect(chunked, agui_meta.middleware(tag), agui_meta.middleware(Drop()))
    assert got[0].metadata == {"mw.tag": 1}
    # run_next expanded the chunk; the expansion's END (closing the lane at RUN_FINISHED) is
    # removed by the class middleware.
    assert [e.type for e in got] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "RUN_FINISHED",
    ]


async def test_middleware_next_run_is_single_use() -> None:
    async def twice(input: Any, next: Any) -> AsyncIterator[Event]:
        next.run(input)
        async for e in next.run(input):
            yield e

    with pytest.raises(UsageError, match="twice"):
        await collect([RUN], agui_meta.middleware(twice))


# -- tool-call filter (the reference's MW-FILTER tests, ported) ---------------------------------


def tool_call(cid: str, name: str) -> list[dict[str, Any]]:
    return [
        {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": name},
        {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": cid},
        {"type": "TOOL_CALL_RESULT", "messageId": f"r-{cid}", "toolCallId": cid, "content": "ok"},
    ]


FILTER_STREAM = [RUN, *tool_call("a", "calc"), *tool_call("b", "weather"), END]


async def test_should_filter_out_disallowed_tool_calls() -> None:
    reports: list[Report] = []
    got = await collect(
        FILTER_STREAM,
        agui_meta.FilterToolCalls(disallowed=["calc"]),
        on_report=reports.append,
    )
    ids = {getattr(e, "tool_call_id", None) for e in got} - {None}
    assert ids == {"b"}
    assert [r.code for r in reports] == ["tool-call-filtered"] * 4


async def test_should_allow_only_allowed_tool_calls_when_using_allowlist() -> None:
    got = await collect(
        FILTER_STREAM, agui_meta.FilterToolCalls(allowed=["calc"]), on_report=lambda r: None
    )
    assert {getattr(e, "tool_call_id", None) for e in got} - {None} == {"a"}


async def test_filter_forgets_an_id_after_its_first_result() -> None:
    stream = [*FILTER_STREAM[:-1], FILTER_STREAM[4], END]  # a second result for call "a"
    got = await collect(
        stream, agui_meta.FilterToolCalls(disallowed=["calc"]), on_report=lambda r: None
    )
    assert [e.type for e in got if getattr(e, "tool_call_id", None) == "a"] == ["TOOL_CALL_RESULT"]


def test_filter_needs_exactly_one_list() -> None:
    with pytest.raises(UsageError, match="both"):
        agui_meta.FilterToolCalls(allowed=["a"], disallowed=["b"])
    with pytest.raises(UsageError, match="either"):
        agui_meta.FilterToolCalls()


# -- single use --------------------------------------------------------------------------------


async def test_iterating_twice_is_a_clear_error() -> None:
    async with agui_meta.wrap(STREAM) as stream:
        [x async for x in stream]
        with pytest.raises(PipelineConsumed, match="single-use"):
            [x async for x in stream]


async def test_iterating_after_close_is_a_clear_error() -> None:
    async with agui_meta.wrap(STREAM) as stream:
        pass
    with pytest.raises(PipelineClosed):
        [x async for x in stream]


async def test_iterating_outside_the_context_is_a_clear_error() -> None:
    stream = agui_meta.wrap(STREAM)
    with pytest.raises(UsageError, match="async with"):
        [x async for x in stream]


async def test_entering_twice_is_a_clear_error() -> None:
    stream = agui_meta.wrap(STREAM)
    async with stream:
        pass
    with pytest.raises(UsageError):
        async with stream:
            pass


def test_bad_arguments() -> None:
    with pytest.raises(UsageError, match="format"):
        agui_meta.wrap([], format="xml")
    with pytest.raises(UsageError, match="prefetch"):
        agui_meta.wrap([], prefetch=-1)
    with pytest.raises(UsageError, match="stage"):
        agui_meta.wrap([], 42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="mode must be 'default', 'strict' or 'keep_going'"):
        agui_meta.wrap([], mode="lenient")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="mode"):
        agui_meta.run_sync([], [], mode="lenient")  # type: ignore[arg-type]


async def test_a_str_that_names_a_file_is_not_read_as_the_stream(tmp_path: Path) -> None:
    path = tmp_path / "run.sse"
    path.write_bytes(b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n')
    with pytest.raises(UsageError, match=r"did you mean Path\('.*run\.sse'\)"):
        agui_meta.wrap(str(path))
    async with agui_meta.wrap(path) as events:  # what it meant
        assert [e.type async for e in events] == ["RUN_STARTED"]
    # A str that is the stream's text is read as it always was.
    async with agui_meta.wrap(path.read_text()) as events:
        assert [e.type async for e in events] == ["RUN_STARTED"]


# -- cleanup -----------------------------------------------------------------------------------


@pytest.mark.parametrize("prefetch", [0, 2])
async def test_break_closes_every_stage_then_the_source_before_the_block_ends(
    prefetch: int,
) -> None:
    log = Log()
    events = [RUN, *text("m", *"abcdefghij"), END]
    async with agui_meta.wrap(
        source_gen(log, events),
        user_stage(log, "inner"),
        Upper(),
        user_stage(log, "outer"),
        prefetch=prefetch,
    ) as stream:
        async for e in stream:
            if e.type == "TEXT_MESSAGE_CONTENT":
                break
    log("block ended")
    closes = [x for x in log.entries if "closed" in x or "ended" in x]
    assert closes == ["outer closed", "inner closed", "source closed", "block ended"]
    gc.collect()  # an async generator left to the collector would warn (warnings are errors)


@pytest.mark.parametrize("prefetch", [0, 3])
async def test_source_error_reaches_the_caller_as_itself_with_the_event_index(
    prefetch: int,
) -> None:
    log = Log()
    with pytest.raises(KeyError, match="source broke") as info:
        async with agui_meta.wrap(
            source_gen(log, STREAM, fail_at=3), user_stage(log, "stage"), prefetch=prefetch
        ) as stream:
            async for _ in stream:
                pass
    assert info.value.agui_event_index == 2  # type: ignore[attr-defined]
    if sys.version_info >= (3, 11):
        assert "agui-meta: raised while processing event 2" in info.value.__notes__
    # The error is raised inside the source, which therefore finishes first; the stage sees
    # the error pass through it and closes next.
    assert log.entries[-2:] == ["source closed", "stage closed"]


@pytest.mark.parametrize("prefetch", [0, 1])
async def test_user_stage_error_reaches_the_caller_as_itself(prefetch: int) -> None:
    log = Log()
    with pytest.raises(ZeroDivisionError, match="outer broke") as info:
        async with agui_meta.wrap(
            source_gen(log, STREAM),
            user_stage(log, "inner"),
            user_stage(log, "outer", fail_on="TEXT_MESSAGE_CONTENT"),
            prefetch=prefetch,
        ) as stream:
            async for _ in stream:
                pass
    assert not isinstance(info.value, BaseExceptionGroup)
    assert isinstance(info.value.agui_event_index, int)  # type: ignore[attr-defined]
    closes = [x for x in log.entries if "closed" in x]
    assert closes == ["outer closed", "inner closed", "source closed"]


async def test_data_error_names_the_event_index() -> None:
    bad = [RUN, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"}]  # delta missing
    with pytest.raises(DataError) as info:
        await collect(bad)
    assert info.value.index == 1
    assert "delta" in str(info.value)


async def test_keep_going_skips_the_bad_event_and_reports_it() -> None:
    bad = [RUN, {"type": "TEXT_MESSAGE_START"}, *text("m", "x"), END]
    reports: list[Report] = []
    got = await collect(bad, mode="keep_going", on_report=reports.append)
    assert [e.type for e in got] == [e["type"] for e in [RUN, *text("m", "x"), END]]
    assert [(r.severity, r.index) for r in reports] == [("error", 1)]


@pytest.mark.parametrize("prefetch", [0, 2])
async def test_timeout_cancels_mid_stream_and_cleans_up(prefetch: int) -> None:
    log = Log()

    async def slow() -> AsyncIterator[dict[str, Any]]:
        try:
            yield RUN
            await anyio.sleep_forever()
            yield END  # pragma: no cover
        finally:
            log("source closed")

    got: list[str] = []
    with anyio.move_on_after(0.05) as scope:
        async with agui_meta.wrap(slow(), user_stage(log, "stage"), prefetch=prefetch) as stream:
            async for e in stream:
                got.append(e.type)
    assert scope.cancelled_caught
    assert got == ["RUN_STARTED"]
    # Without prefetch the cancellation is delivered where the chain waits, in the source, which
    # therefore finishes first. With prefetch the source waits in the pump task and the stage in
    # the consumer's task, both cancelled at once: either may finish first. Either way both are
    # closed before the block ends.
    closes = [x for x in log.entries if "closed" in x]
    if prefetch:
        assert sorted(closes) == ["source closed", "stage closed"]
    else:
        assert closes == ["source closed", "stage closed"]


async def test_cancellation_is_not_swallowed() -> None:
    async def forever() -> AsyncIterator[dict[str, Any]]:
        yield RUN
        await anyio.sleep_forever()

    cancelled = anyio.get_cancelled_exc_class()
    raised = False
    with anyio.CancelScope() as scope:
        try:
            async with agui_meta.wrap(forever()) as stream:
                async for _ in stream:
                    scope.cancel()
        except cancelled:
            raised = True
            raise
    assert raised and scope.cancelled_caught


@pytest.mark.parametrize("prefetch", [0, 1, 4])
async def test_slow_consumer_slows_the_source(prefetch: int) -> None:
    pulled = 0

    async def counting() -> AsyncIterator[dict[str, Any]]:
        nonlocal pulled
        yield RUN
        for i in range(200):
            pulled += 1
            yield {"type": "CUSTOM", "name": str(i), "value": i}

    consumed = 0
    async with agui_meta.wrap(counting(), prefetch=prefetch) as stream:
        async for _ in stream:
            consumed += 1
            for _ in range(3):
                await anyio.lowlevel.checkpoint()  # give a prefetching task every chance
            # the source is never more than the buffer (plus the batch in hand) ahead
            assert pulled <= consumed + prefetch + 1
    assert consumed == 201


async def test_no_task_outlives_the_pipeline() -> None:
    if anyio.get_current_task().name is None:  # pragma: no cover
        pytest.skip("no task names")
    before = {t.id for t in anyio.get_running_tasks()}
    async with agui_meta.wrap(STREAM, prefetch=2) as stream:
        async for _ in stream:
            break
    after = {t.id for t in anyio.get_running_tasks()}
    assert after <= before


async def test_a_path_is_read_as_a_file(tmp_path: Any) -> None:
    path = tmp_path / "stream.sse"
    path.write_bytes(sse(STREAM))
    got = await collect(path)
    assert [e.type for e in got] == [e["type"] for e in STREAM]
    # a plain str is data, not a path: one that names a file is a mistake, said so
    with pytest.raises(UsageError, match="did you mean Path"):
        await collect(str(path))


async def test_a_stage_that_gives_no_async_iterator_is_a_usage_error() -> None:
    def not_a_stage(items: AsyncIterator[Any]) -> list[Any]:
        return []

    with pytest.raises(UsageError, match="must return an async iterator, got \\[\\]"):
        async with agui_meta.wrap(STREAM, not_a_stage) as stream:  # type: ignore[arg-type]
            await stream.drain()
