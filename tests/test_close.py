"""Closing a pipeline whose source awaits in its cleanup, and when two parts fail at once.

What docs/concepts.md promises (section Lifecycle), checked here on asyncio and trio:

- A source suspended between two items when the ``async with`` block exits (a ``break``, an
  error in the block, a cancellation of the block) is closed after the block, shielded: its
  cleanup runs to its end however long it awaits, with or without ``prefetch``.
- A cancellation that arrives while the pipeline closes (an anyio/trio cancel scope, and on
  asyncio also ``Task.cancel()`` and ``asyncio.timeout``) waits for the close to end and is then
  raised, unchanged.
- A source interrupted while it awaits its next item (the prefetch task stopped under it, or
  the block cancelled while it waits on the source) sees the cancellation where it awaits, as
  any awaiting code does; cleanup that must await shields itself, and then completes.
- One exception reaches the caller, never an ``ExceptionGroup``: when the block and a
  prefetching source both fail, the block's own error, with a note naming the source's.

The sources' cleanup waits on a gate the test opens, so nothing here depends on timing.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any, Literal

import anyio
import pytest
from anyio.lowlevel import checkpoint

import agui_meta

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found,unused-ignore]

pytestmark = pytest.mark.anyio

RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
ITEMS = 12
#: Steps the test lets the event loop take while it waits for something to happen.
PATIENCE = 1000

Between = Literal["nothing", "sleep"]


class Source:
    """An async generator source whose cleanup awaits (``cleanup`` steps of ``sleep(0)``).

    ``between="sleep"`` awaits between two items (a network source does), so that a prefetch
    task running ahead is almost always inside the source. ``shielded`` makes the cleanup
    shield itself, as code that must await in its cleanup does.
    """

    def __init__(self, *, between: Between = "nothing", shielded: bool = False) -> None:
        self.between = between
        self.shielded = shielded
        self.pulled = 0
        self.log: list[str] = []
        self.gate: anyio.Event | None = None  # when set, the cleanup also waits for it

    async def __call__(self) -> AsyncIterator[dict[str, Any]]:
        try:
            yield RUN
            for i in range(ITEMS):
                self.pulled += 1
                if self.between == "sleep":
                    await checkpoint()
                yield {"type": "CUSTOM", "name": "n", "value": i}
            await anyio.sleep_forever()  # a live stream: no end in sight
        except BaseException as exc:
            self.log.append(f"interrupted by {type(exc).__name__}")
            raise
        finally:
            self.log.append("cleanup started")
            if self.shielded:
                with anyio.CancelScope(shield=True):
                    await self._cleanup()
            else:
                await self._cleanup()
            self.log.append("cleanup done")

    async def _cleanup(self) -> None:
        for _ in range(5):
            await checkpoint()
        if self.gate is not None:
            await self.gate.wait()


async def settle(source: Source, received: int, prefetch: int) -> None:
    """Wait until the prefetch task is blocked on its full buffer (the source at a yield)."""
    if not prefetch:
        return
    for _ in range(PATIENCE):
        if source.pulled >= received + prefetch:
            break
        await checkpoint()
    for _ in range(20):
        await checkpoint()


class Broke(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# The source waits at a yield when the block exits: its cleanup completes, every way out


@pytest.mark.parametrize("prefetch", [0, 1, 3])
@pytest.mark.parametrize("exit", ["break", "error", "cancel"])
async def test_a_source_between_items_finishes_its_cleanup(prefetch: int, exit: str) -> None:
    source = Source()
    with anyio.CancelScope() as scope:
        try:
            async with agui_meta.wrap(source(), prefetch=prefetch) as stream:
                received = 0
                async for _ in stream:
                    received += 1
                    if received == 3:
                        await settle(source, received, prefetch)
                        if exit == "break":
                            break
                        if exit == "error":
                            raise Broke
                        scope.cancel()
                        await checkpoint()  # the cancellation lands here
                        pytest.fail("not cancelled")
        except Broke:
            pass
    assert source.log == ["interrupted by GeneratorExit", "cleanup started", "cleanup done"]
    assert scope.cancelled_caught == (exit == "cancel")


# ---------------------------------------------------------------------------------------------
# A cancellation during the close waits for it, then goes on


@pytest.mark.parametrize("prefetch", [0, 2])
async def test_a_cancel_scope_cancelled_during_the_close_waits_for_the_cleanup(
    prefetch: int,
) -> None:
    source = Source()
    source.gate = anyio.Event()
    done = anyio.Event()

    async def consume(scope: anyio.CancelScope) -> None:
        with scope:
            async with agui_meta.wrap(source(), prefetch=prefetch) as stream:
                async for _ in stream:
                    await settle(source, 1, prefetch)
                    break
        done.set()

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(consume, scope)
        await wait_for(lambda: "cleanup started" in source.log)
        scope.cancel()  # while the close awaits the gate
        for _ in range(20):
            await checkpoint()
        assert source.log[-1] == "cleanup started"  # still closing
        source.gate.set()
        await done.wait()
    assert source.log[-1] == "cleanup done"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize("how", ["Task.cancel", "asyncio.timeout"])
async def test_asyncio_cancellation_during_the_close_waits_for_the_cleanup(
    prefetch: int, how: str
) -> None:
    if how == "asyncio.timeout" and sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is new in Python 3.11")
    source = Source()
    source.gate = anyio.Event()
    timeouts: list[Any] = []

    async def consume() -> None:
        async with agui_meta.wrap(source(), prefetch=prefetch) as stream:
            async for _ in stream:
                await settle(source, 1, prefetch)
                break

    async def consume_with_timeout() -> None:
        async with asyncio.timeout(None) as timeout:
            timeouts.append(timeout)
            await consume()

    task = asyncio.ensure_future(consume() if how == "Task.cancel" else consume_with_timeout())
    await wait_for(lambda: "cleanup started" in source.log)
    if how == "Task.cancel":
        task.cancel()
    else:
        timeouts[0].reschedule(asyncio.get_running_loop().time())  # expires now
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done() and source.log[-1] == "cleanup started"
    source.gate.set()
    expected: type[BaseException] = asyncio.CancelledError if how == "Task.cancel" else TimeoutError
    with pytest.raises(expected):
        await task
    assert source.log[-1] == "cleanup done"


# ---------------------------------------------------------------------------------------------
# The source is interrupted inside an await: it sees the cancellation there


@pytest.mark.parametrize("exit", ["break", "error"])
async def test_a_source_stopped_inside_an_await_sees_the_cancellation_and_may_shield(
    exit: str,
) -> None:
    """With prefetch the source usually works ahead, inside its own awaits, when the block
    exits. The exit does not wait for its next item (that could take forever): the wait is
    cancelled. A cleanup that shields itself completes; the block exits either way."""
    for shielded in (False, True):
        source = Source(between="sleep", shielded=shielded)
        try:
            async with agui_meta.wrap(source(), prefetch=2) as stream:
                received = 0
                async for _ in stream:
                    received += 1
                    if received == ITEMS + 1:  # the source now waits forever for more
                        if exit == "break":
                            break
                        raise Broke
        except Broke:
            pass
        cancelled = anyio.get_cancelled_exc_class().__name__
        assert source.log[:2] == [f"interrupted by {cancelled}", "cleanup started"]
        assert (source.log[-1] == "cleanup done") is shielded


# ---------------------------------------------------------------------------------------------
# Two failures at once: one exception for the caller


class SourceBroke(Exception):
    pass


@pytest.mark.parametrize("prefetch", [1, 3])
async def test_the_block_and_a_prefetching_source_both_fail_one_error_reaches_the_caller(
    prefetch: int,
) -> None:
    failed = anyio.Event()

    async def source() -> AsyncIterator[dict[str, Any]]:
        yield RUN
        failed.set()
        raise SourceBroke("the source broke")

    with pytest.raises(Broke) as caught:
        async with agui_meta.wrap(source(), prefetch=prefetch) as stream:
            async for _ in stream:
                with anyio.CancelScope(shield=True):
                    await failed.wait()  # the source has failed by now
                raise Broke("the block broke")
    assert not isinstance(caught.value, BaseExceptionGroup)
    assert str(caught.value) == "the block broke"
    if sys.version_info >= (3, 11):
        assert any("SourceBroke('the source broke')" in n for n in caught.value.__notes__)


@pytest.mark.parametrize("prefetch", [0, 2])
async def test_a_source_failing_alone_still_reaches_the_caller_as_itself(prefetch: int) -> None:
    async def source() -> AsyncIterator[dict[str, Any]]:
        yield RUN
        raise SourceBroke("the source broke")

    with pytest.raises(SourceBroke):
        async with agui_meta.wrap(source(), prefetch=prefetch) as stream:
            async for _ in stream:
                pass


async def wait_for(condition: Any) -> None:
    for _ in range(PATIENCE):
        if condition():
            return
        await checkpoint()
    pytest.fail("the condition never came true")
