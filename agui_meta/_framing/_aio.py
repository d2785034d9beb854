"""Async sources of frames: any byte stream, a file, an ``httpx`` response."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterable
from typing import TYPE_CHECKING, Literal

import anyio
from anyio.lowlevel import checkpoint

from ._body import aiter_body
from ._common import DEFAULT_MAX_FRAME_SIZE, Format, Frame, Unterminated
from ._detect import media_format
from ._framer import SLICE, Framer

if TYPE_CHECKING:
    import httpx

__all__ = ["aiter_file_frames", "aiter_frames", "aiter_httpx_frames"]


async def aiter_frames(
    source: AsyncIterable[bytes | str],
    *,
    format: Format | Literal["auto"] = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    unterminated: Unterminated = "frame",
) -> AsyncGenerator[Frame, None]:
    """Decode the frames of an async byte (or text) stream.

    ``str`` chunks are encoded as UTF-8; offsets then count bytes of that encoding (a lone
    surrogate in one is refused as the bytes it would be are: a line that is not UTF-8). The
    iterator of ``source`` is closed (``aclose()``, when it has one) when this generator ends,
    fails or is closed. Use it with :func:`contextlib.aclosing` to close it promptly.

    :param format: ``"auto"`` (see :func:`detect_format`), ``"sse"``, ``"jsonl"`` or
        ``"json-array"``.
    :raises ~agui_meta.FramingError: see the decoders.
    """
    framer = Framer(format, max_frame_size=max_frame_size, unterminated=unterminated)
    chunks = aiter(source)
    try:
        async for chunk in chunks:
            long = len(chunk) > SLICE
            for piece in framer.slices(chunk):
                for frame in framer.feed(piece):
                    yield frame
                if long:  # a long chunk yields to cancellation between its slices
                    await checkpoint()
        for frame in framer.close():
            yield frame
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()


async def aiter_file_frames(
    path: str | os.PathLike[str],
    *,
    format: Format | Literal["auto"] = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    unterminated: Unterminated = "frame",
    chunk_size: int = 65536,
) -> AsyncGenerator[Frame, None]:
    """Decode the frames of a file, read with anyio in chunks of ``chunk_size`` bytes.

    The file is closed when this generator ends, fails or is closed.
    """
    framer = Framer(format, max_frame_size=max_frame_size, unterminated=unterminated)
    file = await anyio.open_file(path, "rb")
    try:
        while chunk := await file.read(chunk_size):
            long = len(chunk) > SLICE
            for piece in framer.slices(chunk):
                for frame in framer.feed(piece):
                    yield frame
                if long:
                    await checkpoint()
    finally:
        with anyio.CancelScope(shield=True):  # closing runs in a thread: not cancellable
            await file.aclose()
    for frame in framer.close():
        yield frame


async def aiter_httpx_frames(
    response: httpx.Response,
    *,
    format: Format | Literal["auto"] = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    unterminated: Unterminated = "frame",
) -> AsyncGenerator[Frame, None]:
    """Decode the frames of a streaming :class:`httpx.Response` (``client.stream(...)``).

    With ``format="auto"``, a ``text/event-stream`` content type means SSE and a JSON-lines
    one (``application/jsonl``, ``application/x-ndjson``, ...) means JSON lines; otherwise
    the format is detected from the body. The body is read raw and its ``gzip`` or ``deflate``
    content encoding undone here, a slice at a time, so that memory stays bounded whatever
    the compression ratio; another encoding (``br``, ``zstd``) raises
    :class:`~agui_meta.FramingError`: ask for ``Accept-Encoding: gzip, deflate``. Closing the
    response stays the caller's job.
    """
    if format == "auto":
        format = media_format(response.headers.get("content-type")) or "auto"
    async with contextlib.aclosing(
        aiter_frames(
            aiter_body(response),
            format=format,
            max_frame_size=max_frame_size,
            unterminated=unterminated,
        )
    ) as frames:
        async for frame in frames:
            yield frame
