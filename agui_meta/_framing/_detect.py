"""Which format a stream is: by its first bytes, or by its media type; the decoder for it."""

from __future__ import annotations

from typing import Any, Final, Literal

from .._exceptions import FramingError, UsageError
from ._array import JsonArrayDecoder
from ._common import (
    BOM,
    DEFAULT_MAX_FRAME_SIZE,
    JSON_WS,
    Format,
    Frame,
    FrameDecoder,
    Ignored,
    InvalidUtf8,
    PayloadRun,
    Unterminated,
    check_options,
    line_at,
)
from ._jsonl import JsonLinesDecoder
from ._sse import SSE_FIELDS, SSEDecoder

__all__ = [
    "ACCEPT",
    "JSONL_MEDIA_TYPE",
    "JSONL_MEDIA_TYPES",
    "PROTOBUF_MEDIA_TYPE",
    "SSE_MEDIA_TYPE",
    "AutoDecoder",
    "detect_format",
    "make_decoder",
    "media_format",
    "media_type",
]


def _sniff(buf: bytes, begin: int) -> tuple[Format | None, int]:
    """Decide the format of a stream starting with ``buf``; see :func:`detect_format`.

    ``begin`` is where to resume (bytes before it are known BOM or whitespace); returns the
    format, or ``None`` when more bytes are needed, and the new resume point.
    """
    if begin == 0:
        if len(buf) < 3 and BOM.startswith(buf):
            return None, 0
        if buf.startswith(BOM):
            begin = 3
    rest = buf[begin:]
    text = rest.lstrip(JSON_WS)
    begin += len(rest) - len(text)
    if not text:
        return None, begin
    first = text[0]
    if first == 0x7B:
        return "jsonl", begin
    if first == 0x5B:
        return "json-array", begin
    if first == 58:
        return "sse", begin
    for name in SSE_FIELDS:
        if text.startswith(name):
            after = text[len(name) : len(name) + 1]
            if not after:
                return None, begin
            if after in (b":", b"\r", b"\n"):
                return "sse", begin
        elif name.startswith(text):
            return None, begin
    # Quoted: the bytes that decided it (the same however the stream is chunked).
    decided = 1 + max(_common(text, name) for name in SSE_FIELDS)
    raise FramingError(
        "cannot tell the stream's format: it starts with "
        f"{text[:decided]!r}, which begins neither a JSON line ('{{'), a JSON array ('[') nor an "
        "SSE line "
        "(':' or a data, event, id or retry field)",
        offset=begin,
        line=line_at(buf, begin),
    )


def _common(text: bytes, name: bytes) -> int:
    """How many first bytes ``text`` and ``name`` share."""
    n = 0
    for a, b in zip(text, name, strict=False):
        if a != b:
            break
        n += 1
    return n


def detect_format(prefix: bytes) -> Format | None:
    """Tell an SSE stream from a JSON-lines stream by its first bytes.

    After an optional UTF-8 BOM and JSON whitespace (space, tab, CR, LF), a ``{`` means JSON
    lines, a ``[`` one JSON array of events (``"json-array"``); a ``:`` (a comment) or one of the SSE fields ``data``, ``event``, ``id``,
    ``retry`` followed by ``:`` or a line end means SSE. Returns ``None`` when ``prefix`` is too
    short to tell (empty, only BOM and whitespace, or a beginning of a field name).

    :raises ~agui_meta.FramingError: the bytes begin neither format (with the ``offset`` of
        the first significant byte).
    """
    return _sniff(bytes(prefix), 0)[0]


class AutoDecoder:
    """A decoder that detects the format with :func:`detect_format`, then delegates.

    It holds the first bytes until the format is known (a few bytes past any leading
    whitespace), then feeds them to an :class:`SSEDecoder`, a :class:`JsonLinesDecoder` or a
    :class:`JsonArrayDecoder`.
    ``format`` is ``None`` until then. An empty or all-whitespace stream gives no frames. A
    stream whose format cannot be told from its first ``max_frame_size`` bytes (whitespace
    that long) raises :class:`FramingError`.
    """

    __slots__ = (
        "_begin",
        "_buf",
        "_closed",
        "_delegate",
        "_error",
        "_invalid_utf8",
        "_unterminated",
        "max_frame_size",
    )

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        unterminated: Unterminated = "frame",
        invalid_utf8: InvalidUtf8 = "raise",
    ) -> None:
        check_options(max_frame_size, unterminated, invalid_utf8)
        self.max_frame_size = max_frame_size
        self._unterminated: Unterminated = unterminated
        self._invalid_utf8: InvalidUtf8 = invalid_utf8
        self._buf = bytearray()
        self._begin = 0
        self._closed = False
        self._error: FramingError | None = None
        self._delegate: SSEDecoder | JsonLinesDecoder | JsonArrayDecoder | None = None

    @property
    def format(self) -> Format | None:
        """The detected format, or ``None`` while undecided."""
        delegate = self._delegate
        if delegate is None:
            return None
        if isinstance(delegate, SSEDecoder):
            return "sse"
        return "jsonl" if isinstance(delegate, JsonLinesDecoder) else "json-array"

    @property
    def ignored(self) -> list[Ignored]:
        """The delegate's :attr:`SSEDecoder.ignored` (``[]`` while undecided)."""
        return [] if self._delegate is None else self._delegate.ignored

    @property
    def buffered(self) -> int:
        """Bytes held: those of the undecided start, or the delegate's."""
        return len(self._buf) if self._delegate is None else self._delegate.buffered

    def feed(self, chunk: bytes) -> list[Frame]:
        """Decode the next chunk; see :meth:`SSEDecoder.feed` and :meth:`JsonLinesDecoder.feed`."""
        if self._delegate is not None:
            return self._delegate.feed(chunk)
        self._check_usable()
        limit = self.max_frame_size
        self._buf += chunk
        buf = bytes(self._buf)
        try:
            # Only the first max_frame_size bytes are looked at, however they are chunked.
            fmt, self._begin = _sniff(buf[:limit], self._begin)
            if fmt is None and len(buf) >= limit:
                raise FramingError(
                    f"cannot tell the stream's format within its first max_frame_size={limit} "
                    "bytes",
                    offset=0,
                    line=1,
                )
        except FramingError as exc:
            self._buf.clear()
            self._error = exc
            raise
        if fmt is None:
            return []
        self._buf.clear()
        cls = _DECODERS[fmt]
        self._delegate = cls(
            max_frame_size=self.max_frame_size,
            unterminated=self._unterminated,
            invalid_utf8=self._invalid_utf8,
        )
        return self._delegate.feed(buf)

    def feed_runs(self, chunk: bytes) -> list[Frame | PayloadRun]:
        """:meth:`feed`, with runs of simple SSE blocks or of JSON lines as :class:`PayloadRun`
        (see :meth:`SSEDecoder.feed_runs`, :meth:`JsonLinesDecoder.feed_runs`) once the format
        is known to be one of these."""
        delegate = self._delegate
        if type(delegate) is SSEDecoder or type(delegate) is JsonLinesDecoder:
            return delegate.feed_runs(chunk)
        return self.feed(chunk)  # type: ignore[return-value]

    def close(self) -> list[Frame]:
        """End of stream; see :meth:`SSEDecoder.close` and :meth:`JsonLinesDecoder.close`."""
        if self._delegate is not None:
            return self._delegate.close()
        self._check_usable()
        self._closed = True
        buf = bytes(self._buf)
        self._buf.clear()
        begin = self._begin
        if begin < len(buf):
            # A partial BOM or the beginning of a field name, and then nothing.
            self._error = FramingError(
                f"cannot tell the stream's format: it ends after {buf[begin:]!r}",
                offset=begin,
                line=line_at(buf, begin),
            )
            raise self._error
        return []

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise UsageError("this decoder is closed; create a new one for another stream")


_DECODERS: dict[str, type[SSEDecoder | JsonLinesDecoder | JsonArrayDecoder]] = {
    "sse": SSEDecoder,
    "jsonl": JsonLinesDecoder,
    "json-array": JsonArrayDecoder,
}


def make_decoder(
    format: Format | Literal["auto"] = "auto",
    *,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    unterminated: Unterminated = "frame",
    invalid_utf8: InvalidUtf8 = "raise",
) -> FrameDecoder:
    """A new decoder for ``format``: ``"sse"``, ``"jsonl"``, ``"json-array"`` or ``"auto"``
    (detect it)."""
    kw: dict[str, Any] = {
        "max_frame_size": max_frame_size,
        "unterminated": unterminated,
        "invalid_utf8": invalid_utf8,
    }
    if format == "sse":
        return SSEDecoder(**kw)
    if format == "jsonl":
        return JsonLinesDecoder(**kw)
    if format == "json-array":
        return JsonArrayDecoder(**kw)
    if format == "auto":
        return AutoDecoder(**kw)
    raise UsageError(f"format must be 'auto', 'sse', 'jsonl' or 'json-array', got {format!r}")


#: The media type of an SSE body.
SSE_MEDIA_TYPE: Final = "text/event-stream"
#: The media type agui-meta asks for and serves JSON lines with.
JSONL_MEDIA_TYPE: Final = "application/jsonl"
#: The media types read as JSON lines (the names in use for the format).
JSONL_MEDIA_TYPES: Final = frozenset(
    {
        JSONL_MEDIA_TYPE,
        "application/x-jsonl",
        "application/jsonlines",
        "application/x-jsonlines",
        "application/json-lines",
        "application/ndjson",
        "application/x-ndjson",
    }
)
#: The AG-UI protobuf media type, which agui-meta does not decode.
PROTOBUF_MEDIA_TYPE: Final = "application/vnd.ag-ui.event+proto"
#: The ``Accept`` header that asks for each format.
ACCEPT: Final = {"sse": SSE_MEDIA_TYPE, "jsonl": JSONL_MEDIA_TYPE}


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` value: its essence, in lower case (``""``: none)."""
    return (content_type or "").partition(";")[0].strip().lower()


def media_format(content_type: str | None) -> Format | None:
    """The format a ``Content-Type`` value names: ``"sse"``, ``"jsonl"``, or ``None`` (detect
    it from the bytes)."""
    media = media_type(content_type)
    if media == SSE_MEDIA_TYPE:
        return "sse"
    if media in JSONL_MEDIA_TYPES:
        return "jsonl"
    return None
