"""The pipeline: wrap a source of AG-UI events and run it through composable stages.

A *stage* is either

- a :class:`~agui_meta.Transducer` (a synchronous object with ``feed``/``close``); every
  built-in stage is one, and runs of consecutive transducers are connected directly and run by
  one :class:`~agui_meta._driver.Runner` loop per segment; or
- any callable taking an async iterator and returning an async iterator, such as a plain
  ``async def stage(events): async for e in events: yield e`` generator function.

Stages compose left to right, the first listed nearest the source. Decoding comes first and is
implicit: whatever the source yields (``bytes``/``str`` chunks of SSE or JSON lines, dicts,
:class:`~agui_meta.events.Event` objects, ``ag_ui.core`` models) is turned into validated events
before the first stage sees it.

Lifecycle. ``wrap()`` returns a single-use :class:`Pipeline`, to be iterated inside its
``async with`` block. When the block exits (normally, by ``break``, an exception or
cancellation) every iterator of the chain, from the consumer's end back to the source, is
closed, shielded from cancellation (asyncio's own included: see :func:`uninterrupted`), before
``__aexit__`` returns (a chain whose generators all ran to their end has nothing to close); a
source interrupted inside an ``await`` (the prefetch task stopped while it waits for its next
item) sees the cancellation there, as any awaiting code does. Without
``prefetch`` no task is spawned at all: the chain is pulled by the consumer, so a slow consumer
slows the source. With ``prefetch=n`` the source and the first fused run of stages work ahead
in one background task, at most ``n`` batches ahead, inside a task group owned by the ``async
with`` block.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from types import AsyncGeneratorType, TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union, cast, overload

import anyio
import anyio.abc
from anyio.lowlevel import checkpoint
from anyio.streams.memory import MemoryObjectSendStream

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found,unused-ignore]

from ._decode import Enforce
from ._driver import Runner
from ._exceptions import (
    PipelineClosed,
    PipelineConsumed,
    Report,
    UsageError,
)
from ._framing import DEFAULT_MAX_FRAME_SIZE, SLICE
from ._stage import Context, Mode, ReportHandler, Transducer

if TYPE_CHECKING:
    from ._accumulate import Update
    from ._defaults import InDefaultStages
    from ._events import Event
    from ._otel import OTelStage

__all__ = ["AsyncStage", "Pipeline", "Stage", "wrap"]

T = TypeVar("T")

#: An async stage: takes the upstream async iterator, returns an async iterator.
AsyncStage = Callable[[AsyncIterator[Any]], AsyncIterator[Any]]
#: Anything ``wrap()`` accepts as a stage.
Stage = Union[Transducer[Any, Any], AsyncStage]
#: A stage whose outputs are ``T``s: how ``wrap()``'s overloads read the type of a pipeline's
#: items off its last stage.
Out = Union[Transducer[Any, T], Callable[[AsyncIterator[Any]], AsyncIterator[T]]]

_SYNC_CHECKPOINT_EVERY = 256


def _note(exc: BaseException, ctx: Context) -> None:
    """Attach where an error happened, without changing its type or wrapping it.

    ``exc.agui_event_index`` is the index of the event being processed (``None`` at the end of
    the stream); on Python 3.11+ a note says the same in words, shown in the traceback.
    """
    if isinstance(exc, (GeneratorExit, anyio.get_cancelled_exc_class())):
        return  # closing and cancelling are not errors of an event
    if hasattr(exc, "agui_event_index"):
        return  # noted by the stage nearest to where it was raised
    index = ctx.index if ctx.index >= 0 else None
    try:
        exc.agui_event_index = index  # type: ignore[attr-defined]
    except AttributeError:  # exceptions with __slots__
        return
    if sys.version_info >= (3, 11):
        exc.add_note(
            f"agui-meta: raised while processing event {index}"
            if index is not None
            else "agui-meta: raised at the end of the stream"
        )


def _long(item: Any) -> bool:
    """Whether a source item is a chunk longer than one slice of the framer."""
    return isinstance(item, (bytes, bytearray, memoryview, str)) and len(item) > SLICE


class Pipeline(Generic[T]):
    """A running pipeline; create it with :func:`wrap` and use it as ``async with``.

    Iterate it (``async for item in stream``) for one output at a time, or
    :meth:`batches` for lists of outputs (the fastest way through), or :meth:`drain` to run it
    to the end. ``reports`` lists what was reported so far; ``context`` is the shared
    :class:`~agui_meta.Context`.
    """

    def __init__(
        self,
        source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
        stages: tuple[Stage, ...],
        *,
        mode: Mode,
        on_report: ReportHandler | None,
        format: str,
        max_frame_size: int,
        prefetch: int,
        fuse: bool = True,
    ) -> None:
        if format not in ("auto", "sse", "jsonl", "json-array", "json"):
            raise UsageError(
                f"format must be 'auto', 'sse', 'jsonl', 'json-array' or 'json', got {format!r}"
            )
        if prefetch < 0:
            raise UsageError(f"prefetch must be >= 0, got {prefetch}")
        for stage in stages:
            if not isinstance(stage, Transducer) and not callable(stage):
                raise UsageError(
                    f"a stage must be a Transducer or a callable taking an async iterator, "
                    f"got {stage!r}"
                )
        self.context = Context(mode, on_report)
        if isinstance(source, str):
            _not_a_path(source)
        if isinstance(source, (bytes, bytearray, memoryview, str)):
            source = [source]  # one whole stream given at once
        elif isinstance(source, os.PathLike):
            source = _read_file(source)  # framed like any byte stream
        elif isinstance(source, io.IOBase) and callable(getattr(source, "read", None)):
            source = _read_chunks(source)  # an open file: chunks, not lines
        self._source = source
        self._source_iterator: AsyncIterator[Any] | None = None
        self._segments = self._plan([Enforce(), *stages])
        self._framing = None if format == "json" else format
        self._max_frame_size = max_frame_size
        self._fuse = fuse
        self._prefetch = prefetch
        self._state = "new"
        self._iterators: list[Any] = []
        self._output: AsyncIterator[list[Any]] | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._send: MemoryObjectSendStream[Any] | None = None
        # The source segment's runner, and whether its outputs go to drain() alone.
        self._runner: Runner | None = None
        self._discard = False

    @property
    def reports(self) -> list[Any]:
        """Every report delivered so far, in order."""
        return self.context.reports

    @staticmethod
    def _plan(stages: list[Stage]) -> list[list[Transducer[Any, Any]] | AsyncStage]:
        """Group consecutive transducers into fused runs, keep async stages apart."""
        plan: list[list[Transducer[Any, Any]] | AsyncStage] = []
        for stage in stages:
            if isinstance(stage, Transducer):
                if plan and isinstance(plan[-1], list):
                    plan[-1].append(stage)
                else:
                    plan.append([stage])
            else:
                plan.append(stage)
        return plan

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Pipeline[T]:
        if self._state != "new":
            raise UsageError("a pipeline can be entered only once; call wrap() again")
        self._state = "open"
        if hasattr(self._source, "__aiter__"):
            self._source_iterator = self._track(cast(AsyncIterable[Any], self._source).__aiter__())
        first, *rest = self._segments
        if self._prefetch:
            # The prefetch task numbers the events it works ahead on in a context of its own.
            # When stages follow on the consumer's side, each batch travels with its index,
            # which that side takes on as it receives the batch (one shared index would be the
            # prefetch task's, ahead).
            ahead = _TaskContext(self.context)
            source_batches = self._track(self._source_batches(cast(list[Any], first), ahead))
            tg = anyio.create_task_group()
            await tg.__aenter__()
            self._task_group = tg
            send, receive = anyio.create_memory_object_stream[Any](self._prefetch)
            self._send = send
            tg.start_soon(self._pump, source_batches, send, ahead if rest else None)
            self._iterators.append(receive)
            batches: AsyncIterator[list[Any]] = (
                self._track(self._received(receive)) if rest else receive.__aiter__()
            )
        else:
            batches = self._track(self._source_batches(cast(list[Any], first), self.context))
        for segment in rest:
            if isinstance(segment, list):
                batches = self._track(self._fused(batches, segment))
            else:
                batches = self._track(self._async_stage(batches, segment))
        self._output = batches
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._state = "closed"
        try:
            if self._task_group is not None:
                # Stop the pump first: its generators cannot be closed while it runs them.
                tg, self._task_group = self._task_group, None
                tg.cancel_scope.cancel()
                try:
                    await tg.__aexit__(exc_type, exc, tb)
                except BaseExceptionGroup as group:
                    error = _unwrap(group, exc)
                    if error is not exc:
                        raise error from None
        finally:
            if self._send is not None:
                self._send.close()
            if any(map(_may_await_closing, self._iterators)):
                await uninterrupted(self._close_chain)
            else:  # all ran to their end (drain() did): nothing to close, no task to close it
                self._iterators.clear()
            self.context.finish()
        return None

    async def _close_chain(self) -> None:
        """Close every iterator from the consumer's end back to the source."""
        while self._iterators:
            it = self._iterators.pop()
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                await aclose()

    def _track(self, it: Any) -> Any:
        self._iterators.append(it)
        return it

    # -- iteration ---------------------------------------------------------------------------

    def _claim(self) -> AsyncIterator[list[Any]]:
        if self._state == "new":
            raise UsageError(
                "iterate a pipeline inside its context: "
                "`async with agui_meta.wrap(source, ...) as stream: async for x in stream: ...`"
            )
        if self._state == "closed":
            raise PipelineClosed()
        if self._state == "iterating":
            raise PipelineConsumed()
        self._state = "iterating"
        assert self._output is not None
        return self._output

    def __aiter__(self) -> AsyncIterator[T]:
        return cast(AsyncIterator[T], self._track(self._items(self._claim())))

    async def _items(self, batches: AsyncIterator[list[Any]]) -> AsyncIterator[T]:
        async for batch in batches:
            for item in batch:
                yield item

    def batches(self) -> AsyncIterator[list[T]]:
        """Iterate lists of outputs, as many as one source item produced (never empty)."""
        return cast(AsyncIterator[list[T]], self._claim())  # tracked already

    async def drain(self) -> int:
        """Run the pipeline to the end, discarding outputs; returns how many there were.

        Outputs nobody reads are not built where the C core can avoid it (the fast path's
        updates, when no stage follows the source's chain): they are counted instead.
        """
        batches = self._claim()
        if len(self._segments) == 1:
            self._discard = True
            if self._runner is not None:
                self._runner.discard = True
        count = 0
        async for batch in batches:
            count += len(batch)
        return count + (0 if self._runner is None else self._runner.discarded)

    # -- segments ----------------------------------------------------------------------------

    async def _source_batches(
        self, chain: list[Transducer[Any, Any]], ctx: Context
    ) -> AsyncIterator[list[Any]]:
        # A framing error at the end of the stream (an event cut off or too large) ends it in
        # every mode, keep-going included: close_errors="raise".
        runner = Runner(
            chain,
            ctx,
            fuse=self._fuse,
            framing=self._framing,
            max_frame_size=self._max_frame_size,
            close_errors="raise",
        )
        runner.discard = self._discard
        self._runner = runner
        out = runner.out
        feed = runner.feed
        # A chunk longer than one slice is framed a slice per step: its outputs taken, and
        # cancellation honoured, between slices.
        framed = self._framing is not None
        try:
            if self._source_iterator is not None:
                async for item in self._source_iterator:
                    if not framed or not _long(item):
                        feed(item)
                    else:
                        for _ in runner.steps(item):
                            if out:
                                batch = out[:]
                                out.clear()
                                yield batch
                            await checkpoint()
                    if out:
                        batch = out[:]
                        out.clear()
                        yield batch
            else:
                for n, item in enumerate(cast(Iterable[Any], self._source), 1):
                    if not framed or not _long(item):
                        feed(item)
                    else:
                        for _ in runner.steps(item):
                            if out:
                                batch = out[:]
                                out.clear()
                                yield batch
                            await checkpoint()
                    if out:
                        batch = out[:]
                        out.clear()
                        yield batch
                    if n % _SYNC_CHECKPOINT_EVERY == 0:
                        await checkpoint()
            runner.close()
            if out:
                yield out
        except BaseException as exc:
            _note(exc, ctx)
            raise

    async def _fused(
        self, upstream: AsyncIterator[list[Any]], chain: list[Transducer[Any, Any]]
    ) -> AsyncIterator[list[Any]]:
        ctx = self.context
        # The event index is the one the upstream segments set.
        runner = Runner(chain, ctx, fuse=self._fuse, number=False)
        out = runner.out
        feed = runner.feed
        try:
            async for batch in upstream:
                for item in batch:
                    feed(item)
                if out:
                    batch = out[:]
                    out.clear()
                    yield batch
            runner.close()
            if out:
                yield out
        except BaseException as exc:
            _note(exc, ctx)
            raise

    def _async_stage(
        self, upstream: AsyncIterator[list[Any]], stage: AsyncStage
    ) -> AsyncIterator[list[Any]]:
        items = self._track(self._items(upstream))
        produced = stage(items)
        if not hasattr(produced, "__anext__"):
            raise UsageError(f"stage {stage!r} must return an async iterator, got {produced!r}")
        self._track(produced)
        return self._rebatch(produced)

    async def _rebatch(self, produced: AsyncIterator[Any]) -> AsyncIterator[list[Any]]:
        try:
            async for item in produced:
                yield [item]
        except BaseException as exc:
            _note(exc, self.context)
            raise

    async def _pump(
        self,
        batches: AsyncIterator[list[Any]],
        send: anyio.abc.ObjectSendStream[Any],
        indexed: Context | None,
    ) -> None:
        # Only a source that really ended closes the stream (the consumer then sees its end).
        # On failure or cancellation it stays open: the task group cancels the consumer and
        # __aexit__ raises the real error, so a broken source never looks like a short one.
        if indexed is None:
            async for batch in batches:
                await send.send(batch)
        else:
            async for batch in batches:
                await send.send((indexed.index, batch))
        await send.aclose()

    async def _received(
        self, receive: anyio.abc.ObjectReceiveStream[Any]
    ) -> AsyncIterator[list[Any]]:
        ctx = self.context
        async for index, batch in receive:
            ctx.index = index
            yield batch


def _may_await_closing(it: Any) -> bool:
    """Whether closing ``it`` may run code: anything with ``aclose`` but an async generator
    that ran to its end (its ``aclose()`` returns at once)."""
    if type(it) is AsyncGeneratorType:
        return it.ag_frame is not None
    return hasattr(it, "aclose")


class _TaskContext(Context):
    """The context of the prefetch task: an event index of its own, the pipeline's reports."""

    def __init__(self, pipeline: Context) -> None:
        super().__init__(pipeline.mode, pipeline.on_report, max_reports=pipeline.max_reports)
        self._pipeline = pipeline

    def deliver(self, report: Report) -> None:
        self._pipeline.deliver(self.locate(report))


def _read_chunks(file: Any, chunk_size: int = 65536) -> Iterator[bytes | str]:
    """An open file (binary or text), read in chunks: iterating it would give it line by line.

    The file stays open: whoever opened it closes it.
    """
    read = file.read
    while chunk := read(chunk_size):
        yield chunk


def _not_a_path(source: str) -> None:
    """A ``str`` source is the stream's text: say so when it names a file instead."""
    if len(source) < 4096 and "\n" not in source and os.path.isfile(source):
        raise UsageError(
            f"the source {source!r} is a str, which wrap() reads as the stream's own text, "
            f"but it names a file: did you mean Path({source!r})? (from pathlib import Path)"
        )


async def _read_file(path: os.PathLike[str], chunk_size: int = 65536) -> AsyncIterator[bytes]:
    """The bytes of a file, read with anyio in chunks; the file is closed when this ends."""
    async with await anyio.open_file(path, "rb") as file:
        while chunk := await file.read(chunk_size):
            yield chunk


def _unwrap(group: BaseExceptionGroup[BaseException], body: BaseException | None) -> BaseException:
    """The one error for the caller, rather than the prefetch task group's group.

    Cancellations are dropped. When the ``async with`` block raised ``body`` and the prefetch
    task failed too, ``body`` is the caller's error (it is what the caller's code did), with a
    note naming the other; otherwise the prefetch task's error.
    """
    cancelled = anyio.get_cancelled_exc_class()
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        error = pending.pop()
        if isinstance(error, BaseExceptionGroup):
            pending.extend(reversed(error.exceptions))
        else:
            leaves.append(error)
    real = [e for e in leaves if not isinstance(e, cancelled)] or leaves
    first = body if body is not None and any(e is body for e in real) else real[0]
    if sys.version_info >= (3, 11):
        for other in real:
            if other is not first:
                first.add_note(f"agui-meta: the source failed too: {other!r}")
    return first


async def uninterrupted(close: Callable[[], Awaitable[None]]) -> None:
    """Run ``close`` to its end whatever cancellation arrives meanwhile, then let that through.

    A shielded cancel scope holds back anyio's and trio's cancellations. asyncio's own
    (``Task.cancel()``, ``asyncio.timeout``) pass through anyio's shields, so on asyncio the
    close runs in a task of its own, awaited to its end; a cancellation that arrived meanwhile
    is raised afterwards (``asyncio.timeout`` then turns it into its ``TimeoutError``).
    """
    asyncio = sys.modules.get("asyncio")
    if asyncio is None or anyio.get_cancelled_exc_class() is not asyncio.CancelledError:
        with anyio.CancelScope(shield=True):
            await close()
        return
    with anyio.CancelScope(shield=True):
        task = asyncio.ensure_future(close())
        interrupted = False
        while True:
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.done():
                    raise
                interrupted = True
            else:
                break
    if interrupted:
        raise asyncio.CancelledError


@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    /,
    *,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[Event]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    /,
    *stages: InDefaultStages,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[Update]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    s1: Out[T],
    /,
    *,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[T]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    s1: Stage,
    s2: Out[T],
    /,
    *,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[T]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    s1: Stage,
    s2: Stage,
    s3: Out[T],
    /,
    *,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[T]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    s1: Stage,
    s2: Stage,
    s3: Stage,
    s4: Out[T],
    /,
    *,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[T]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    s1: Stage,
    /,
    *stages: InDefaultStages,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[Update]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    s1: Stage,
    s2: Stage,
    /,
    *stages: InDefaultStages,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[Update]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    /,
    *stages: InDefaultStages | OTelStage,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[Update]: ...
@overload
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    /,
    *stages: Stage,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[Any]: ...
def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    /,
    *stages: Stage,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
    fuse: bool = True,
) -> Pipeline[Any]:
    """Wrap a source of AG-UI events in a pipeline of stages.

    ``source`` may be an async or a sync iterable of events, dicts, ``ag_ui.core`` models, or
    ``bytes``/``str`` chunks of an SSE or JSON-lines stream or of one JSON array of events, or
    a file's path (a :class:`pathlib.Path`: a plain ``str`` is data, not a path)
    (``format="auto"`` detects which from the first bytes; ``"sse"``, ``"jsonl"`` and
    ``"json-array"`` force one; ``"json"`` takes every
    ``bytes``/``str`` item as one whole JSON event). ``mode`` is ``"default"`` (the reference
    client's behaviour), ``"strict"`` (every report raises) or ``"keep_going"`` (data errors
    are reported and the event skipped; only a frame over ``max_frame_size`` and a byte stream
    whose format cannot be told still raise, as nothing after them can be read). ``on_report``
    receives every :class:`Report`; without it reports are issued as :class:`AguiWarning`.
    ``fuse=False`` runs every stage's own ``feed``, without the fast path the built-in stages
    describe (the tests compare both ways; the results are the same).

    >>> import anyio, agui_meta
    >>> async def main():
    ...     events = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    ...     async with agui_meta.wrap(events) as stream:
    ...         return [e.type async for e in stream]
    >>> anyio.run(main)
    ['RUN_STARTED']
    """
    return Pipeline(
        source,
        stages,
        mode=mode,
        on_report=on_report,
        format=format,
        max_frame_size=max_frame_size,
        prefetch=prefetch,
        fuse=fuse,
    )
