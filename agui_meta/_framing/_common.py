"""What the decoders share: the frame, the options, the limits, the UTF-8 proof, the line base."""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate, repeat
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

import msgspec

from .._exceptions import FramingError, UsageError
from .._speedups import NATIVE

__all__ = [
    "BOM",
    "DEFAULT_MAX_FRAME_SIZE",
    "JSON_WS",
    "Format",
    "Frame",
    "FrameDecoder",
    "Ignored",
    "InvalidUtf8",
    "LineDecoder",
    "PayloadRun",
    "Unterminated",
    "check_options",
    "is_utf8",
    "jsonl_run",
    "line_at",
    "not_utf8",
    "py_jsonl_run",
    "py_sse_run",
    "sse_run",
]

#: The default bound of ``max_frame_size``: 10 MiB.
DEFAULT_MAX_FRAME_SIZE = 10 * 1024 * 1024

Format = Literal["sse", "jsonl", "json-array"]
Unterminated = Literal["frame", "error"]
InvalidUtf8 = Literal["raise", "frame"]

BOM = b"\xef\xbb\xbf"
JSON_WS = b" \t\r\n"


class Frame(msgspec.Struct, frozen=True, gc=False):
    """The JSON text of one event, with where it came from.

    - ``data``: the payload bytes (SSE: the ``data`` lines joined with ``\\n``; JSON lines:
      the line without its line end). Valid UTF-8, not yet parsed.
    - ``offset``: the byte offset, in the whole stream, of the frame's first line (for SSE, the
      event's first field line; a leading BOM counts).
    - ``line``: the 1-based line number of that line (SSE counts CR, LF and CRLF as line
      ends; JSON lines counts LF).
    - ``event``: the SSE event type (``None`` when unset or empty, meaning ``"message"``).
    - ``id``: the SSE last event ID when the event was dispatched (``None`` when empty).
    - ``final_unterminated``: the frame was cut off by the end of the stream (SSE: no blank line
      after it; JSON lines: no newline). If its JSON is invalid, the stream was truncated.
    - ``error``: only from a decoder made with ``invalid_utf8="frame"``: the
      :class:`FramingError` (never raised itself) saying which line of the frame is not UTF-8.
      Such a frame's ``data`` is not valid UTF-8 and must not be decoded.
    """

    data: bytes
    offset: int
    line: int
    event: str | None = None
    id: str | None = None
    final_unterminated: bool = False
    error: FramingError | None = None


class PayloadRun(NamedTuple):
    """Consecutive frames of the common shape, without a Frame each: one-line
    ``data: <payload>`` SSE blocks, or adjacent non-blank JSON lines.

    :meth:`SSEDecoder.feed_runs` and :meth:`JsonLinesDecoder.feed_runs` give these for the
    common shape of a stream, so that a consumer that needs a frame's place only when
    something is wrong does not pay for a :class:`Frame` per event. Frame ``k`` is
    ``Frame(payloads[k], offset + sum(len(p) + sep for p in payloads[:k]), line + lines * k,
    None, id)``: ``sep`` is the bytes around a payload (8 for SSE's ``data: `` and blank line,
    1 for a JSON line's LF), ``lines`` the lines a payload takes (2 for SSE, 1 for JSON
    lines). :meth:`frames` builds them all.
    """

    payloads: list[bytes]
    offset: int
    line: int
    id: str | None
    sep: int = 8
    lines: int = 2

    def frames(self) -> list[Frame]:
        """The frames of the run, as the decoder's ``feed`` gives them."""
        payloads = self.payloads
        count = len(payloads)
        step = self.lines
        return list(
            map(
                Frame,
                payloads,
                accumulate(map(self.sep.__add__, map(len, payloads)), initial=self.offset),
                range(self.line, self.line + step * count, step),
                repeat(None, count),
                repeat(self.id, count),
            )
        )


def py_sse_run(chunk: bytes, limit: int) -> tuple[list[bytes], int] | None:
    """The run of simple SSE blocks that ``chunk`` (at a line start, between events) holds.

    When all of ``chunk`` up to just after its last ``\\n\\n`` (``end``) is blocks
    ``data: <payload>\\n\\n``, each payload free of CR and LF, of valid UTF-8 and with
    ``len(payload) + 6 <= limit``: ``(payloads, end)``; else ``None`` (the decoder frames the
    chunk line by line, and reports what is wrong). The C core's ``sse_run`` does the same.
    """
    end = chunk.rfind(b"\n\n") + 2
    if end < 8 or not chunk.startswith(b"data: "):
        return None
    inner = chunk[6 : end - 2]
    payloads = inner.split(b"\n\ndata: ")
    # The separators hold two LFs each and the last blank line two more: any other LF
    # would start a line that is not "data: ..." or a second line in a block.
    if chunk.count(b"\n", 0, end) != 2 * len(payloads) or b"\r" in inner:
        return None
    if end > limit and max(map(len, payloads)) + 6 > limit:
        return None
    if not inner.isascii() and not is_utf8(inner):
        return None
    return payloads, end


def py_jsonl_run(chunk: bytes, limit: int) -> tuple[list[bytes], int] | None:
    """The run of JSON lines that ``chunk`` (at a line start) holds.

    When all of ``chunk`` up to just after its last LF (``end``) is lines each free of CR,
    not only spaces and tabs, of valid UTF-8 and of at most ``limit`` bytes:
    ``(lines, end)``; else ``None`` (the decoder frames the chunk line by line, skipping blank
    lines and reporting what is wrong). The C core's ``jsonl_run`` does the same.
    """
    end = chunk.rfind(b"\n") + 1
    if not end:
        return None
    head = chunk[: end - 1]
    if b"\r" in head:
        return None
    lines = head.split(b"\n")
    for line in lines:
        if len(line) > limit or not line.strip(b" \t"):
            return None
    if not head.isascii() and not is_utf8(head):
        return None
    return lines, end


#: :func:`py_sse_run`, by the C core when it is in use (the Python function is its
#: specification).
sse_run: Callable[[bytes, int], tuple[list[bytes], int] | None] = (
    py_sse_run if NATIVE is None else NATIVE.sse_run
)
#: :func:`py_jsonl_run`, by the C core when it is in use.
jsonl_run: Callable[[bytes, int], tuple[list[bytes], int] | None] = (
    py_jsonl_run if NATIVE is None else NATIVE.jsonl_run
)


class Ignored(NamedTuple):
    """A line a decoder read and ignored (an SSE field none of ``data``, ``event``, ``id``,
    ``retry``: a misspelt ``DATA:`` loses its event), as :attr:`SSEDecoder.ignored` lists it.

    ``before`` is how many of the frames the same ``feed``/``close`` call returned come before
    the line; ``field`` the field name; ``offset`` and ``line`` where the line starts.
    """

    before: int
    field: bytes
    offset: int
    line: int


def not_utf8(
    what: str, value: bytes, exc: UnicodeDecodeError, offset: int, line: int
) -> FramingError:
    bad = value[exc.start : exc.start + 4]
    surrogate = len(bad) >= 3 and bad[0] == 0xED and 0xA0 <= bad[1] <= 0xBF
    why = (
        "a lone UTF-16 surrogate (as a str chunk holding one encodes)" if surrogate else exc.reason
    )
    return FramingError(
        f"{what} is not valid UTF-8 ({why} at byte {exc.start} of the value: {bad!r})",
        offset=offset,
        line=line,
    )


def is_utf8(value: bytes) -> bool:
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True


def check_options(max_frame_size: int, unterminated: str, invalid_utf8: str = "raise") -> None:
    if not isinstance(max_frame_size, int) or max_frame_size < 1:
        raise UsageError(f"max_frame_size must be a positive int, got {max_frame_size!r}")
    if unterminated not in ("frame", "error"):
        raise UsageError(f"unterminated must be 'frame' or 'error', got {unterminated!r}")
    if invalid_utf8 not in ("raise", "frame"):
        raise UsageError(f"invalid_utf8 must be 'raise' or 'frame', got {invalid_utf8!r}")


def line_at(buf: bytes, offset: int) -> int:
    head = buf[:offset]
    return 1 + head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n")


class FrameDecoder(Protocol):
    """What every decoder here offers: sans-IO, fed bytes, returning frames."""

    @property
    def buffered(self) -> int:
        """Bytes held for the frame being read."""
        ...

    @property
    def ignored(self) -> list[Ignored]:
        """Lines read and ignored since the caller last cleared this list."""
        ...

    def feed(self, chunk: bytes) -> list[Frame]:
        """Decode the next chunk of the stream; returns the frames it completed."""
        ...

    def close(self) -> list[Frame]:
        """End of stream: returns the frames still held."""
        ...


class LineDecoder:
    """What both line-based decoders share: BOM skipping, the partial line, error latching."""

    __slots__ = (
        "_at_start",
        "_closed",
        "_error",
        "_limit",
        "_lineno",
        "_pending",
        "_pos",
        "_runs",
        "_tolerant",
        "_unterminated",
        "ignored",
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
        #: Lines the decoder read and ignored, for the caller to report and then clear:
        #: :class:`Ignored` entries (SSE lines whose field is none of the four; never comments).
        self.ignored: list[Ignored] = []
        self._limit = max_frame_size
        self._unterminated = unterminated
        self._tolerant = invalid_utf8 == "frame"
        self._pending = bytearray()  # the line not finished yet
        self._pos = 0  # stream offset where the pending line starts
        self._lineno = 1  # its line number
        self._at_start = True
        self._closed = False
        self._error: FramingError | None = None
        self._runs = False  # feed_runs: runs of the common shape as PayloadRuns, not Frames

    @property
    def offset(self) -> int:
        """Bytes consumed so far: the stream offset of the first byte not yet part of a line."""
        return self._pos

    if TYPE_CHECKING:

        def feed(self, chunk: bytes) -> list[Frame]: ...  # each decoder's own

    def feed_runs(self, chunk: bytes) -> list[Frame | PayloadRun]:
        """``feed``, with each run of frames of the common shape (one-line ``data:`` SSE
        blocks, adjacent JSON lines) as one :class:`PayloadRun`.

        The frames are the same as ``feed`` gives, in the same order (a run's
        :meth:`PayloadRun.frames`); errors are the same.
        """
        self._runs = True
        try:
            return self.feed(chunk)  # type: ignore[return-value]
        finally:
            self._runs = False

    def _start(self, chunk: bytes) -> bytes:
        """Strip a BOM at stream start; returns b"" while the chunk may still be part of one."""
        if self._pending:
            chunk = bytes(self._pending) + chunk
            self._pending.clear()
        if len(chunk) < 3 and BOM.startswith(chunk):
            self._pending += chunk
            return b""
        self._at_start = False
        if chunk.startswith(BOM):
            self._pos = 3
            return chunk[3:]
        return chunk

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise UsageError("this decoder is closed; create a new one for another stream")

    def _fail(self, error: FramingError, frames: list[Frame]) -> list[Frame]:
        """Latch ``error``; raise it now, or on the next call if frames precede it."""
        self._error = error
        if frames:
            return frames
        raise error
