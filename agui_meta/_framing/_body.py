"""The bytes of an ``httpx`` response body, content encoding undone in bounded steps.

httpx's ``aiter_bytes()`` inflates each network read at once, whatever it grows to: a 130 KB
gzip body of blank lines becomes gigabytes in one step. :func:`aiter_body` reads the raw bytes
(``aiter_raw()``) and inflates them itself, at most :data:`~agui_meta._framing.SLICE` bytes per
step (``zlib``'s ``max_length``), so a body costs the framer's bounds whatever its compression
ratio: a decompression bomb is streamed within bounds, and yields to cancellation between
steps. The encodings undone are ``gzip`` (``x-gzip``) and ``deflate`` (zlib-wrapped or raw, as
servers send it); :data:`ACCEPT_ENCODING` asks for those only. Any other encoding (``br``,
``zstd``, several stacked) is refused with :class:`~agui_meta.FramingError`, as is a body whose
compressed bytes are corrupt.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Final

from anyio.lowlevel import checkpoint

from .._exceptions import FramingError
from ._framer import SLICE

if TYPE_CHECKING:
    import httpx

__all__ = ["ACCEPT_ENCODING", "aiter_body"]

#: The ``Accept-Encoding`` request header: the content encodings :func:`aiter_body` undoes.
ACCEPT_ENCODING: Final = "gzip, deflate"


async def aiter_body(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body of a streaming response, decoded, in chunks of at most one slice once inflated.

    An identity body comes as httpx reads it. Close the generator (``contextlib.aclosing``)
    when done with it early.

    :raises ~agui_meta.FramingError: the body's content encoding is not one undone here, or
        its compressed bytes are corrupt.
    """
    header = response.headers.get("content-encoding", "")
    encodings = [e for e in (p.strip().lower() for p in header.split(",")) if e != "identity"]
    encodings = [e for e in encodings if e]
    raw = response.aiter_raw()
    try:
        if not encodings:
            async for chunk in raw:
                if chunk:
                    yield chunk
            return
        if len(encodings) > 1 or encodings[0] not in ("gzip", "x-gzip", "deflate"):
            raise FramingError(
                f"the response body's content encoding {header!r} is not one agui-meta decodes "
                f"(it asks for {ACCEPT_ENCODING}, one of them, with Accept-Encoding)"
            )
        inflate = _Inflate(encodings[0])
        async for chunk in raw:
            data = chunk
            while data:
                out, data = inflate.step(data)
                if out:
                    yield out
                if data:  # more to inflate from this read: a long one yields between steps
                    await checkpoint()
        inflate.finish()
    finally:
        await raw.aclose()  # type: ignore[attr-defined]


class _Inflate:
    """One gzip or deflate stream, inflated at most one slice per step."""

    __slots__ = ("_encoding", "_first", "_inflater", "_read")

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        gzip = encoding != "deflate"
        self._inflater = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
        self._first = not gzip  # deflate: zlib-wrapped, or raw if the first bytes say so
        self._read = 0  # compressed bytes taken so far

    def step(self, data: bytes) -> tuple[bytes, bytes]:
        """Inflate from ``data``: at most one slice out, and the compressed bytes left."""
        inflater = self._inflater
        try:
            try:
                out = inflater.decompress(data, SLICE)
            except zlib.error:
                if not self._first:
                    raise
                # A deflate body without its zlib header (some servers send raw deflate).
                self._inflater = inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                out = inflater.decompress(data, SLICE)
        except zlib.error as exc:
            raise self._corrupt(exc) from None
        rest = inflater.unconsumed_tail
        if self._read + len(data) - len(rest) >= 2:
            self._first = False  # zlib has read the header it would refuse
        if inflater.eof and inflater.unused_data.strip(b"\0"):
            raise FramingError(
                f"the response body has {len(inflater.unused_data)} bytes after the end of its "
                f"{self._encoding} stream"
            )
        self._read += len(data) - len(rest)
        return out, rest

    def finish(self) -> None:
        """At the end of the body: the stream must have ended too (an empty body may)."""
        if not self._inflater.eof and self._read:
            raise FramingError(
                f"the response body ends inside its {self._encoding} stream (after "
                f"{self._read} compressed bytes): it is truncated"
            )

    def _corrupt(self, exc: zlib.error) -> FramingError:
        return FramingError(
            f"the response body is not valid {self._encoding} data (from compressed byte "
            f"{self._read}: {exc})"
        )
