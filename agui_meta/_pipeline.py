"""The pipeline: wrap a source of AG-UI events and run it through composable stages.

A *stage* is either

- a :class:`~agui_meta.Transducer` (a synchronous object with ``feed``/``close``); every
  built-in stage is one, and runs of consecutive transducers are fused into a single loop; or
- any callable taking an async iterator and returning an async iterator, such as a plain
  ``async def stage(events): async for e in events: yield e`` generator function.

Stages compose left to right, the first listed nearest the source. Decoding comes first and is
implicit: whatever the source yields (``bytes``/``str`` chunks of SSE or JSON lines, dicts,
:class:`~agui_meta.events.Event` objects, ``ag_ui.core`` models) is turned into validated events
before the first stage sees it.

Lifecycle. ``wrap()`` returns a single-use :class:`Pipeline`, to be iterated inside its
``async with`` block. When the block exits (normally, by ``break``, an exception or
cancellation) every iterator of the chain, from the consumer's end back to the source, is
closed, shielded from cancellation (asyncio's own included: see :func:`_uninterrupted`), before
``__aexit__`` returns; a source interrupted inside an ``await`` (the prefetch task stopped while
it waits for its next item) sees the cancellation there, as any awaiting code does. Without
``prefetch`` no task is spawned at all: the chain is pulled by the consumer, so a slow consumer
slows the source. With ``prefetch=n`` the source and the first fused run of stages work ahead
in one background task, at most ``n`` batches ahead, inside a task group owned by the ``async
with`` block.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, Generic, TypeVar, Union, cast

import anyio
import anyio.abc
from anyio.lowlevel import checkpoint
from anyio.streams.memory import MemoryObjectSendStream

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found,unused-ignore]

from ._exceptions import (
    DataError,
    FramingError,
    PipelineClosed,
    PipelineConsumed,
    Report,
    UsageError,
)
from ._framing import (
    DEFAULT_MAX_FRAME_SIZE,
    AutoDecoder,
    Frame,
    FrameDecoder,
    Ignored,
    InvalidUtf8,
    ignored_report,
    make_decoder,
)
from ._stage import Context, Mode, ReportHandler, Transducer, close_chain, connect_chain

__all__ = ["AsyncStage", "Pipeline", "Stage", "wrap"]

T = TypeVar("T")

#: An async stage: takes the upstream async iterator, returns an async iterator.
AsyncStage = Callable[[AsyncIterator[Any]], AsyncIterator[Any]]
#: Anything ``wrap()`` accepts as a stage.
Stage = Union[Transducer[Any, Any], AsyncStage]

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


class _Entry(Transducer[Any, Any]):
    """Splits byte/text chunks into frames, numbers events, isolates per-event data errors.

    Every frame or object that enters gets the next event index (``ctx.index``); in keep-going
    mode a data error raised anywhere downstream in the fused run skips that one event. A data
    error raised for a frame gets the frame's byte offset and line as well as its index; a
    framing error (which ends the stream) gets the index the next frame would have had. In
    keep-going mode a frame that is not UTF-8 is one bad event, reported and skipped like any
    other, rather than the end of the stream.
    """

    def __init__(self, format: str, max_frame_size: int) -> None:
        self._format = format
        self._max_frame_size = max_frame_size
        self._framer: FrameDecoder | None = None
        self._count = 0

    def _frames(self) -> FrameDecoder:
        if self._framer is None:
            fmt = self._format
            invalid_utf8: InvalidUtf8 = "frame" if self.ctx.mode == "keep_going" else "raise"
            self._framer = (
                AutoDecoder(max_frame_size=self._max_frame_size, invalid_utf8=invalid_utf8)
                if fmt == "auto"
                else make_decoder(
                    fmt,  # type: ignore[arg-type]
                    max_frame_size=self._max_frame_size,
                    invalid_utf8=invalid_utf8,
                )
            )
        return self._framer

    def _one(self, item: Any) -> None:
        ctx = self.ctx
        ctx.index = self._count
        self._count += 1
        try:
            self.emit(item)
        except DataError as exc:
            if type(item) is Frame:
                exc.locate(offset=item.offset, line=item.line)
            ctx.skip(exc)

    def _deliver(self, frames: list[Frame]) -> None:
        ctx = self.ctx
        if ctx.mode != "keep_going":  # frames with an error come only in keep-going mode
            # _one() inlined for frames: one Python call less per event on the common path.
            # Outside keep-going mode a data error ends the stream: one try for the batch.
            emit = self.emit
            index = self._count
            try:
                for frame in frames:
                    ctx.index = index
                    index += 1
                    emit(frame)
            except DataError as exc:
                exc.locate(offset=frame.offset, line=frame.line)
                ctx.skip(exc)
            finally:
                self._count = index
            return
        for frame in frames:
            if frame.error is None:
                self._one(frame)
            else:
                self._bad_frame(frame)

    def _bad_frame(self, frame: Frame) -> None:
        """A frame that is not UTF-8: one bad event (raised unless in keep-going mode)."""
        error = frame.error
        assert error is not None
        self.ctx.index = self._count
        self._count += 1
        # Report a fresh copy: the frame's own is never raised.
        self.ctx.skip(FramingError(error.reason, offset=error.offset, line=error.line))

    def _located(self, exc: DataError) -> DataError:
        return exc.locate(index=self._count)

    def _deliver_noted(self, frames: list[Frame], ignored: list[Ignored]) -> None:
        """Deliver ``frames`` with a report for each line the framer ignored, in stream order."""
        notes = list(ignored)
        ignored.clear()
        done = 0
        for note in notes:
            self._deliver(frames[done : note.before])
            done = max(done, note.before)
            self.ctx.deliver(ignored_report(note, self._count))
        self._deliver(frames[done:])

    def feed(self, item: Any) -> None:
        if isinstance(item, (bytes, bytearray, memoryview, str)) and self._format != "json":
            # A str chunk's lone surrogates become the bytes they would be (CESU-8), which the
            # framer refuses as it refuses them in bytes: one rule for every source.
            chunk = item.encode("utf-8", "surrogatepass") if isinstance(item, str) else bytes(item)
            framer = self._frames()
            try:
                frames = framer.feed(chunk)
            except FramingError as exc:
                raise self._located(exc) from None
            if framer.ignored:
                self._deliver_noted(frames, framer.ignored)
            else:
                self._deliver(frames)
        elif type(item) is Frame and item.error is not None:  # a frame decoded by the caller
            self._bad_frame(item)
        else:
            self._one(item)

    def close(self) -> None:
        if self._framer is not None:
            try:
                frames = self._framer.close()
            except FramingError as exc:
                raise self._located(exc) from None
            if self._framer.ignored:
                self._deliver_noted(frames, self._framer.ignored)
            else:
                self._deliver(frames)


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
    ) -> None:
        from ._decode import Enforce

        if format not in ("auto", "sse", "jsonl", "json"):
            raise ValueError(f"format must be 'auto', 'sse', 'jsonl' or 'json', got {format!r}")
        if prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        for stage in stages:
            if not isinstance(stage, Transducer) and not callable(stage):
                raise TypeError(
                    f"a stage must be a Transducer or a callable taking an async iterator, "
                    f"got {stage!r}"
                )
        self.context = Context(mode, on_report)
        if isinstance(source, (bytes, bytearray, memoryview, str)):
            source = [source]  # one whole stream given at once
        elif isinstance(source, os.PathLike):
            source = _read_file(source)  # framed like any byte stream
        self._source = source
        self._source_iterator: AsyncIterator[Any] | None = None
        self._segments = self._plan([_Entry(format, max_frame_size), Enforce(), *stages])
        self._prefetch = prefetch
        self._state = "new"
        self._iterators: list[Any] = []
        self._output: AsyncIterator[list[Any]] | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._send: MemoryObjectSendStream[Any] | None = None

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
            await _uninterrupted(self._close_chain)
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
        """Run the pipeline to the end, discarding outputs; returns how many there were."""
        count = 0
        async for batch in self._claim():
            count += len(batch)
        return count

    # -- segments ----------------------------------------------------------------------------

    async def _source_batches(
        self, chain: list[Transducer[Any, Any]], ctx: Context
    ) -> AsyncIterator[list[Any]]:
        out: list[Any] = []
        head, chain = connect_chain(chain, out.append, ctx)
        source = self._source
        try:
            if self._source_iterator is not None:
                async for item in self._source_iterator:
                    head(item)
                    if out:
                        batch = out[:]
                        out.clear()
                        yield batch
            else:
                for n, item in enumerate(cast(Iterable[Any], source), 1):
                    head(item)
                    if out:
                        batch = out[:]
                        out.clear()
                        yield batch
                    if n % _SYNC_CHECKPOINT_EVERY == 0:
                        await checkpoint()
            # Not close_chain(): a framing error at the end of the stream (an event cut off
            # or too large) ends it in every mode, keep-going included.
            ctx.index = -1
            for t in chain:
                t.close()
            if out:
                yield out
        except BaseException as exc:
            _note(exc, ctx)
            raise

    async def _fused(
        self, upstream: AsyncIterator[list[Any]], chain: list[Transducer[Any, Any]]
    ) -> AsyncIterator[list[Any]]:
        out: list[Any] = []
        ctx = self.context
        head, chain = connect_chain(chain, out.append, ctx)
        try:
            async for batch in upstream:
                for item in batch:
                    try:
                        head(item)
                    except DataError as exc:
                        ctx.skip(exc)
                if out:
                    batch = out[:]
                    out.clear()
                    yield batch
            close_chain(chain, ctx)
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
            raise TypeError(f"stage {stage!r} must return an async iterator, got {produced!r}")
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


class _TaskContext(Context):
    """The context of the prefetch task: an event index of its own, the pipeline's reports."""

    def __init__(self, pipeline: Context) -> None:
        super().__init__(pipeline.mode, pipeline.on_report, max_reports=pipeline.max_reports)
        self._pipeline = pipeline

    def deliver(self, report: Report) -> None:
        self._pipeline.deliver(report)


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


async def _uninterrupted(close: Callable[[], Awaitable[None]]) -> None:
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


def wrap(
    source: AsyncIterable[Any] | Iterable[Any] | os.PathLike[str],
    *stages: Stage,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    format: str = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = 0,
) -> Pipeline[Any]:
    """Wrap a source of AG-UI events in a pipeline of stages.

    ``source`` may be an async or a sync iterable of events, dicts, ``ag_ui.core`` models, or
    ``bytes``/``str`` chunks of an SSE or JSON-lines stream, or a file's path (a
    :class:`pathlib.Path`: a plain ``str`` is data, not a path) (``format="auto"`` detects which
    from the first bytes; ``"sse"`` and ``"jsonl"`` force one; ``"json"`` takes every
    ``bytes``/``str`` item as one whole JSON event). ``mode`` is ``"default"`` (the reference
    client's behaviour), ``"strict"`` (every report raises) or ``"keep_going"`` (data errors
    are reported and the event skipped; only a frame over ``max_frame_size`` and a byte stream
    whose format cannot be told still raise, as nothing after them can be read). ``on_report``
    receives every :class:`Report`; without it reports are issued as :class:`AguiWarning`.

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
    )
