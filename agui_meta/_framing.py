"""Byte-level framing: SSE and JSON-lines byte streams to frames (the JSON text of one event).

Sans-IO: :class:`SSEDecoder`, :class:`JsonLinesDecoder` and :class:`AutoDecoder` are fed
``bytes`` chunks of any size, split anywhere, and return the frames completed so far; thin
async wrappers (:func:`aiter_frames`, :func:`aiter_file_frames`, :func:`aiter_httpx_frames`)
drive them from an async byte source. :func:`encode_sse` and :func:`encode_jsonl` go the other
way. Decoding a frame's JSON into an event is the next layer's job.

Policies shared by the decoders (``max_frame_size`` and ``unterminated`` are keywords of each):

- **Invalid UTF-8 is an error.** The standards decode with replacement characters; we report
  instead, because a replaced character is silently changed input. Payload bytes are kept as
  ``bytes`` (so the JSON decoder reads them without a copy) and validated where they are
  framed: ``bytes.isascii()`` (a fast C scan) accepts the common case, and only a non-ASCII
  line is decoded strictly to prove it is UTF-8. A failure raises :class:`FramingError` with
  the ``offset`` and ``line`` of the offending line. With ``invalid_utf8="frame"`` (what a
  keep-going pipeline uses) the decoder raises nothing for it: the frame is returned as
  received, with ``Frame.error`` set to that error, and decoding carries on with the next one.
- **Bounded memory.** The bytes held for the frame being read (the SSE data collected so far
  plus the line not finished yet; for JSON lines, the line) never exceed ``max_frame_size``
  (default 10 MiB, the limit of the reference client's SSE buffer). Input that would need more
  raises :class:`FramingError` at once, even before the line's end has arrived. The limit is
  applied to whole lines, so the outcome never depends on how the input was chunked.
- **Nothing is silently dropped at the end.** A final frame that is not terminated (SSE data
  with no blank line after it, a JSON line with no newline) is returned by ``close()`` with
  ``Frame.final_unterminated`` set, so that a JSON error in it can say "truncated". This is what
  the reference client does for SSE (``parseSSEStream`` parses the remaining buffer when the
  response completes), although the WHATWG rules would discard such an event. Pass
  ``unterminated="error"`` to get a :class:`FramingError` instead.
- **Errors come after the frames before them.** When a chunk completes some frames and then
  hits a :class:`FramingError`, ``feed()`` returns those frames and the next call raises the
  error, so the frames delivered never depend on how the input was chunked. A decoder that
  raised is unusable: every later call raises the same error. After ``close()``, feeding
  raises :class:`UsageError`.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncGenerator, AsyncIterable, Iterable
from itertools import accumulate, repeat
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, Protocol

import anyio
import msgspec

from ._exceptions import FramingError, Report, UsageError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "AutoDecoder",
    "Format",
    "Frame",
    "FrameDecoder",
    "Ignored",
    "InvalidUtf8",
    "JsonArrayDecoder",
    "JsonLinesDecoder",
    "SSEDecoder",
    "Unterminated",
    "aiter_file_frames",
    "aiter_frames",
    "aiter_httpx_frames",
    "detect_format",
    "encode_jsonl",
    "encode_sse",
    "make_decoder",
]

#: The default bound of ``max_frame_size``: 10 MiB.
DEFAULT_MAX_FRAME_SIZE = 10 * 1024 * 1024

Format = Literal["sse", "jsonl", "json-array"]
Unterminated = Literal["frame", "error"]
InvalidUtf8 = Literal["raise", "frame"]

_BOM = b"\xef\xbb\xbf"
_JSON_WS = b" \t\r\n"


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
    """Consecutive frames of one-line ``data: <payload>`` SSE blocks, without a Frame each.

    :meth:`SSEDecoder.feed_runs` gives these for the common shape of a stream, so that a
    consumer that needs a frame's place only when something is wrong does not pay for a
    :class:`Frame` per event. Frame ``k`` is ``Frame(payloads[k], offset + sum(len(p) + 8 for
    p in payloads[:k]), line + 2 * k, None, id)``; :meth:`frames` builds them all.
    """

    payloads: list[bytes]
    offset: int
    line: int
    id: str | None

    def frames(self) -> list[Frame]:
        """The frames of the run, as :meth:`SSEDecoder.feed` gives them."""
        payloads = self.payloads
        count = len(payloads)
        return list(
            map(
                Frame,
                payloads,
                accumulate(map((8).__add__, map(len, payloads)), initial=self.offset),
                range(self.line, self.line + 2 * count, 2),
                repeat(None, count),
                repeat(self.id, count),
            )
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


def ignored_report(note: Ignored, index: int | None) -> Report:
    """The report for a line the framer ignored (code ``sse-unknown-field``, a warning).

    ``index`` is the index the next event will have (the one the line sat in, when it has
    data lines of its own).
    """
    field = note.field.decode("utf-8", "backslashreplace")
    return Report(
        code="sse-unknown-field",
        message=f"SSE line with the unknown field {field[:40]!r} ignored (the fields are data, "
        "event, id and retry, in lower case): what it carried is not part of any event",
        index=index,
        offset=note.offset,
        line=note.line,
    )


def _not_utf8(
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


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True


def _check_options(max_frame_size: int, unterminated: str, invalid_utf8: str = "raise") -> None:
    if not isinstance(max_frame_size, int) or max_frame_size < 1:
        raise ValueError(f"max_frame_size must be a positive int, got {max_frame_size!r}")
    if unterminated not in ("frame", "error"):
        raise ValueError(f"unterminated must be 'frame' or 'error', got {unterminated!r}")
    if invalid_utf8 not in ("raise", "frame"):
        raise ValueError(f"invalid_utf8 must be 'raise' or 'frame', got {invalid_utf8!r}")


class _LineDecoder:
    """What both line-based decoders share: BOM skipping, the partial line, error latching."""

    __slots__ = (
        "_at_start",
        "_closed",
        "_error",
        "_limit",
        "_lineno",
        "_pending",
        "_pos",
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
        _check_options(max_frame_size, unterminated, invalid_utf8)
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

    @property
    def offset(self) -> int:
        """Bytes consumed so far: the stream offset of the first byte not yet part of a line."""
        return self._pos

    def _start(self, chunk: bytes) -> bytes:
        """Strip a BOM at stream start; returns b"" while the chunk may still be part of one."""
        if self._pending:
            chunk = bytes(self._pending) + chunk
            self._pending.clear()
        if len(chunk) < 3 and _BOM.startswith(chunk):
            self._pending += chunk
            return b""
        self._at_start = False
        if chunk.startswith(_BOM):
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


class SSEDecoder(_LineDecoder):
    """Incremental Server-Sent Events decoder (WHATWG HTML, "event stream interpretation").

    Lines end with CRLF, LF or CR, also when the CR and the LF arrive in different chunks. A
    leading BOM is skipped. Lines starting with ``:`` are comments (keep-alives). ``data``
    lines are collected and joined with ``\\n``; ``event`` sets the event type; ``id`` sets the
    last event ID unless its value contains NUL; ``retry`` with ASCII digits only sets
    :attr:`retry`; other fields are ignored and listed in :attr:`ignored` (the caller clears it). A blank line dispatches the event as a
    :class:`Frame` when data was collected (even empty data: ``data:`` alone gives a frame with
    ``data == b""``), and always resets the event type.

    Compared with the reference client's ``parseSSEStream``, which splits events at ``\\n\\n``
    only and reads only ``data:`` lines, this decoder also honours CR and CRLF line ends, a
    ``data`` line without a colon, and the ``event``, ``id`` and ``retry`` fields; on streams
    written by the AG-UI encoders (``data: <json>\\n\\n``) the frames are the same.

    Deviations from the standard, all on purpose: invalid UTF-8 in a ``data``, ``event`` or
    ``id`` value raises :class:`FramingError` instead of becoming U+FFFD; the last event's data,
    if the stream ends before its blank line, is still returned by :meth:`close` (as the
    reference client does), flagged ``final_unterminated``; ``max_frame_size`` bounds memory.

    :param max_frame_size: the most bytes held for one event (see the module docstring).
    :param unterminated: ``"frame"`` (default) or ``"error"``: what :meth:`close` does with
        data not followed by a blank line.
    :param invalid_utf8: ``"raise"`` (default) or ``"frame"``: an event with a ``data``,
        ``event`` or ``id`` value that is not UTF-8 is then still dispatched (with empty
        ``data`` if it had none), ``Frame.error`` telling the first such line.
    """

    __slots__ = (
        "_bad",
        "_cr",
        "_data",
        "_data_len",
        "_event",
        "_id",
        "_runs",
        "_start_line",
        "_start_pos",
        "last_event_id",
        "retry",
    )

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        unterminated: Unterminated = "frame",
        invalid_utf8: InvalidUtf8 = "raise",
    ) -> None:
        super().__init__(
            max_frame_size=max_frame_size, unterminated=unterminated, invalid_utf8=invalid_utf8
        )
        self._bad: FramingError | None = None  # the event's first non-UTF-8 line (tolerant)
        #: The reconnection time in milliseconds set by the last valid ``retry`` field
        #: (saturated at :data:`RETRY_MAX`).
        self.retry: int | None = None
        #: The last event ID as of the last dispatch (blank line); ``""`` when none.
        self.last_event_id = ""
        self._cr = False  # the last chunk ended with CR: a leading LF of the next one is skipped
        self._data: list[bytes] = []
        self._data_len = 0  # bytes held in _data, one more per value (the joining LFs)
        self._event: str | None = None
        self._id: str | None = None
        self._start_pos = -1  # offset of the current event's first field line; -1: none yet
        self._start_line = 0
        self._runs = False  # feed_runs: runs of simple blocks as PayloadRuns, not Frames

    @property
    def buffered(self) -> int:
        """Bytes held for the event being read: its data so far plus the unfinished line."""
        return self._data_len + len(self._pending)

    def feed(self, chunk: bytes) -> list[Frame]:
        """Decode the next chunk of the stream; returns the events it completed.

        :raises ~agui_meta.FramingError: invalid UTF-8, or more than ``max_frame_size`` bytes.
        """
        if self._error is not None or self._closed:
            self._check_usable()
        if type(chunk) is not bytes:
            chunk = bytes(chunk)
        if self._at_start:
            chunk = self._start(chunk)
        if not chunk:
            return []
        if self._cr:
            self._cr = False
            if chunk[0] == 10:  # the LF of a CRLF split between chunks
                self._pos += 1
                chunk = chunk[1:]
                if not chunk:
                    return []
        if (
            # Fast path: the chunk is exactly one "data: <payload>\n\n" event.
            chunk.endswith(b"\n\n")
            and chunk.startswith(b"data: ")
            and not self._pending
            and not self._data
            and chunk.count(b"\n") == 2
            and b"\r" not in chunk
            and len(chunk) - 2 <= self._limit
            and (chunk.isascii() or _is_utf8(chunk))
        ):
            start = self._start_pos
            if start < 0:
                frame = Frame(chunk[6:-2], self._pos, self._lineno, self._event, self._id)
            else:  # field lines came first (maybe one that is not UTF-8, when tolerant)
                frame = Frame(
                    chunk[6:-2], start, self._start_line, self._event, self._id, error=self._bad
                )
                self._bad = None
            self._pos += len(chunk)
            self._lineno += 2
            self._event = None
            self._start_pos = -1
            self.last_event_id = self._id or ""
            return [frame]
        frames: list[Frame] = []
        try:
            pending = self._pending
            if pending:
                # Finish the pending line with the first line end of this chunk.
                lf = chunk.find(b"\n")
                cr = chunk.find(b"\r", 0, lf if lf >= 0 else len(chunk))
                if cr >= 0:
                    end = cr
                    sep = 2 if chunk[cr + 1 : cr + 2] == b"\n" else 1
                elif lf >= 0:
                    end, sep = lf, 1
                else:
                    self._hold(chunk)
                    return frames
                if self._data_len + len(pending) + end > self._limit:
                    raise self._too_big(self._pos, self._lineno)
                pending += memoryview(chunk)[:end]
                head = bytes(pending)
                pending.clear()
                chunk = chunk[end + sep :]
                self._run((head,), (sep,), frames)
                if not chunk:
                    if sep == 1 and cr >= 0:
                        self._cr = True
                    return frames
            # The chunk now starts at a line start. Fast path for runs of blocks of exactly one
            # "data: <payload>" line (see _run_simple), taken between events.
            if b"\r" not in chunk:
                if self._start_pos >= 0 or not chunk.startswith(b"data: "):
                    # An event (or comments) in progress: finish it line by line up to its
                    # blank line, if a "data: " line follows that.
                    end = 1 if chunk[0] == 10 else chunk.find(b"\n\n") + 2  # 1 if none
                    if (end > 1 or chunk[0] == 10) and chunk.startswith(b"data: ", end):
                        lines = chunk[:end].split(b"\n")
                        lines.pop()
                        self._run(lines, repeat(1), frames)
                        chunk = chunk[end:]
                if self._start_pos < 0 and chunk.startswith(b"data: "):
                    chunk = self._run_simple(chunk, frames)
                    if not chunk:
                        return frames
            if b"\r" in chunk:
                lines = chunk.splitlines()
                seps: Iterable[int] = [
                    len(raw) - len(line)
                    for raw, line in zip(chunk.splitlines(True), lines, strict=True)
                ]
                last = chunk[-1]
                if last == 13:
                    self._cr = True
                    tail = b""
                elif last == 10:
                    tail = b""
                else:
                    tail = lines.pop()
            else:
                lines = chunk.split(b"\n")
                tail = lines.pop()
                seps = repeat(1)
            self._run(lines, seps, frames)
            if tail:
                self._hold(tail)
        except FramingError as exc:
            return self._fail(exc, frames)
        return frames

    def feed_runs(self, chunk: bytes) -> list[Frame | PayloadRun]:
        """:meth:`feed`, with each run of one-line ``data:`` blocks as one :class:`PayloadRun`.

        The frames are the same as :meth:`feed` gives, in the same order (a run's
        :meth:`PayloadRun.frames`); errors are the same.
        """
        self._runs = True
        try:
            return self.feed(chunk)  # type: ignore[return-value]
        finally:
            self._runs = False

    def close(self) -> list[Frame]:
        """End of stream: returns the last event if its data was not followed by a blank line.

        :raises ~agui_meta.FramingError: the stream ended inside an event and
            ``unterminated="error"`` was given.
        """
        self._check_usable()
        self._closed = True
        frames: list[Frame] = []
        try:
            if self._pending:
                line = bytes(self._pending)
                self._pending.clear()
                self._run((line,), (0,), frames)
            if self._data or self._bad is not None:
                if self._unterminated == "error":
                    raise FramingError(
                        "stream ended in the middle of an SSE event (its data is not "
                        "followed by a blank line)",
                        offset=self._start_pos,
                        line=self._start_line,
                    )
                data = self._data
                frames.append(
                    Frame(
                        b"\n".join(data) if len(data) != 1 else data[0],
                        self._start_pos,
                        self._start_line,
                        self._event,
                        self._id,
                        True,
                        self._bad,
                    )
                )
                data.clear()
                self._data_len = 0
                self._bad = None
        except FramingError as exc:
            self._error = exc
            raise
        return frames

    def _hold(self, tail: bytes) -> None:
        if self._data_len + len(self._pending) + len(tail) > self._limit:
            raise self._too_big(self._pos, self._lineno)
        self._pending += tail

    def _run_simple(self, chunk: bytes, frames: list[Frame]) -> bytes:
        """Dispatch the leading ``data: <payload>\\n\\n`` blocks of ``chunk`` at once.

        Called between events (no data, no field line, no partial line held) with a chunk that
        holds no CR and starts with ``data: ``. It applies only when all of the chunk up to its
        last ``\\n\\n`` is such blocks, each payload free of LF, of valid UTF-8 and within
        ``max_frame_size``: these are then exactly the frames :meth:`_run` would give, line by
        line. Returns the rest of the chunk (all of it when the fast path does not apply).
        """
        end = chunk.rfind(b"\n\n") + 2
        if end < 8:
            return chunk
        inner = chunk[6 : end - 2]
        payloads = inner.split(b"\n\ndata: ")
        count = len(payloads)
        # The separators hold two LFs each and the last blank line two more: any other LF
        # would start a line that is not "data: ..." or a second line in a block.
        if chunk.count(b"\n", 0, end) != 2 * count:
            return chunk
        limit = self._limit
        if end > limit and max(map(len, payloads)) + 6 > limit:
            return chunk  # let _run report the line over the limit
        if not inner.isascii() and not _is_utf8(inner):
            return chunk  # let _run report the line that is not UTF-8
        lineno = self._lineno
        last_id = self._id
        if self._runs:
            frames.append(PayloadRun(payloads, self._pos, lineno, last_id))  # type: ignore[arg-type]
        else:
            frames += map(
                Frame,
                payloads,
                accumulate(map((8).__add__, map(len, payloads)), initial=self._pos),
                range(lineno, lineno + 2 * count, 2),
                repeat(None, count),
                repeat(last_id, count),
            )
        self._pos += end
        self._lineno = lineno + 2 * count
        self.last_event_id = last_id or ""
        return chunk[end:]

    def _too_big(self, offset: int, line: int) -> FramingError:
        return FramingError(
            f"SSE event too large: this line and the data before it in the event exceed "
            f"max_frame_size={self._limit} bytes",
            offset=offset,
            line=line,
        )

    def _run(self, lines: Iterable[bytes], seps: Iterable[int], frames: list[Frame]) -> None:
        """Interpret complete lines (without their line ends; ``seps`` are the ends' lengths)."""
        pos = self._pos
        lineno = self._lineno
        data = self._data
        data_len = self._data_len
        event = self._event
        last_id = self._id
        start = self._start_pos
        start_line = self._start_line
        limit = self._limit
        append = frames.append
        bad = self._bad
        for line, sep in zip(lines, seps, strict=False):
            here = pos
            ln = lineno
            n = len(line)
            pos += n + sep
            lineno += 1
            if not n:  # a blank line dispatches
                if data:
                    append(
                        Frame(
                            data[0] if len(data) == 1 else b"\n".join(data),
                            start,
                            start_line,
                            event,
                            last_id,
                        )
                        if bad is None
                        else Frame(b"\n".join(data), start, start_line, event, last_id, error=bad)
                    )
                    data.clear()
                    data_len = 0
                elif bad is not None:
                    append(Frame(b"", start, start_line, event, last_id, error=bad))
                bad = None
                event = None
                start = -1
                self.last_event_id = last_id or ""
                continue
            if data_len + n > limit:
                raise self._too_big(here, ln)
            if line[0] == 58:  # ":" starts a comment
                continue
            if start < 0:
                start = here
                start_line = ln
            if line.startswith(b"data:"):
                value = line[6:] if n > 5 and line[5] == 32 else line[5:]
            else:
                colon = line.find(b":")
                if colon < 0:
                    name, value = line, b""
                else:
                    name = line[:colon]
                    colon += 1
                    value = line[colon + 1 :] if line[colon : colon + 1] == b" " else line[colon:]
                if name != b"data":
                    try:
                        if name == b"event":
                            event = value.decode() or None
                        elif name == b"id":
                            if b"\0" not in value:
                                last_id = value.decode() or None
                        elif name == b"retry":
                            if value.isdigit():
                                self.retry = _retry_ms(value)
                        else:
                            self.ignored.append(Ignored(len(frames), name, here, ln))
                    except UnicodeDecodeError as exc:
                        what = "SSE event type" if name == b"event" else "SSE event id"
                        if not self._tolerant:
                            raise _not_utf8(what, value, exc, here, ln) from None
                        if bad is None:
                            bad = _not_utf8(what, value, exc, here, ln)
                    continue
            if not value.isascii():
                try:
                    value.decode()
                except UnicodeDecodeError as exc:
                    if not self._tolerant:
                        raise _not_utf8("SSE data", value, exc, here, ln) from None
                    if bad is None:
                        bad = _not_utf8("SSE data", value, exc, here, ln)
            data.append(value)
            data_len += len(value) + 1
        self._pos = pos
        self._lineno = lineno
        self._data_len = data_len
        self._event = event
        self._id = last_id
        self._start_pos = start
        self._start_line = start_line
        self._bad = bad


class JsonLinesDecoder(_LineDecoder):
    """Incremental JSON-lines decoder: one JSON value per line.

    Lines end with LF; the CR of a CRLF is removed. A lone CR is not a line end (it is JSON
    whitespace), not even at the very end of the stream. Blank lines (only spaces, tabs or CR)
    are skipped. A leading BOM is skipped. The last line may lack its newline: :meth:`close`
    returns it with ``final_unterminated`` set. Frames are not parsed here, so a line that is
    not JSON still becomes a frame.

    :param max_frame_size: the longest line accepted, in bytes, counting a CR before the LF.
    :param unterminated: ``"frame"`` (default) or ``"error"``: what :meth:`close` does with a
        non-blank last line that has no newline.
    :param invalid_utf8: ``"raise"`` (default) or ``"frame"``: a line that is not UTF-8 is then
        returned as a frame whose ``error`` says so.
    """

    __slots__ = ()

    @property
    def buffered(self) -> int:
        """Bytes held for the line being read."""
        return len(self._pending)

    def feed(self, chunk: bytes) -> list[Frame]:
        """Decode the next chunk of the stream; returns the frames of the lines it completed.

        :raises ~agui_meta.FramingError: invalid UTF-8, or a line over ``max_frame_size``.
        """
        self._check_usable()
        if type(chunk) is not bytes:
            chunk = bytes(chunk)
        if self._at_start:
            chunk = self._start(chunk)
            if not chunk:
                return []
        frames: list[Frame] = []
        try:
            pending = self._pending
            if pending:
                end = chunk.find(b"\n")
                if end < 0:
                    self._hold(chunk)
                    return frames
                if len(pending) + end > self._limit:
                    raise self._too_long(self._pos, self._lineno)
                pending += memoryview(chunk)[:end]
                head = bytes(pending)
                pending.clear()
                chunk = chunk[end + 1 :]
                self._run((head,), frames, True)
            lines = chunk.split(b"\n")
            tail = lines.pop()
            self._run(lines, frames, b"\r" in chunk)
            if tail:
                self._hold(tail)
        except FramingError as exc:
            return self._fail(exc, frames)
        return frames

    def close(self) -> list[Frame]:
        """End of stream: returns the last line if it had no newline and is not blank.

        :raises ~agui_meta.FramingError: as :meth:`feed`; or the last line has no newline and
            ``unterminated="error"`` was given.
        """
        self._check_usable()
        self._closed = True
        frames: list[Frame] = []
        if not self._pending:
            return frames
        line = bytes(self._pending)
        self._pending.clear()
        try:
            self._run((line,), frames, False, True)
            if frames and self._unterminated == "error":
                raise FramingError(
                    "stream ended in the middle of a JSON line (no newline after it)",
                    offset=frames[0].offset,
                    line=frames[0].line,
                )
        except FramingError as exc:
            self._error = exc
            raise
        return frames

    def _hold(self, tail: bytes) -> None:
        if len(self._pending) + len(tail) > self._limit:
            raise self._too_long(self._pos, self._lineno)
        self._pending += tail

    def _too_long(self, offset: int, line: int) -> FramingError:
        return FramingError(
            f"JSON line longer than max_frame_size={self._limit} bytes", offset=offset, line=line
        )

    def _run(
        self, lines: Iterable[bytes], frames: list[Frame], crlf: bool, final: bool = False
    ) -> None:
        pos = self._pos
        lineno = self._lineno
        limit = self._limit
        append = frames.append
        for line in lines:
            here = pos
            ln = lineno
            n = len(line)
            pos += n + 1
            lineno += 1
            if n > limit:
                raise self._too_long(here, ln)
            if crlf and line.endswith(b"\r"):
                line = line[:-1]
            if not line.strip(_JSON_WS):
                continue
            if not line.isascii():
                try:
                    line.decode()
                except UnicodeDecodeError as exc:
                    if not self._tolerant:
                        raise _not_utf8("JSON line", line, exc, here, ln) from None
                    error = _not_utf8("JSON line", line, exc, here, ln)
                    append(Frame(line, here, ln, None, None, final, error))
                    continue
            append(Frame(line, here, ln, None, None, final) if final else Frame(line, here, ln))
        self._pos = pos
        self._lineno = lineno


_NON_WS = re.compile(rb"[^ \t\r\n]")
_STRUCTURE = re.compile(rb'[][{}"]')
_IN_STRING = re.compile(rb'["\\]')
_SCALAR_END = re.compile(rb"[ \t\r\n,\]]")

# JsonArrayDecoder states: what the next significant byte may be.
_OPEN, _FIRST, _NEXT, _AFTER, _ELEMENT, _DONE = range(6)


class JsonArrayDecoder:
    """Incremental decoder of one JSON array of events (``[{...}, {...}]``, any whitespace).

    Each element of the array is a frame (its JSON text, not parsed here), given as soon as
    its last byte arrives: the array is never held whole, only the element being read, which
    ``max_frame_size`` bounds. A leading BOM is skipped; lines count LF. Anything but an
    array — a first significant byte other than ``[``, a missing ``,`` between elements, a
    trailing comma, bytes after the closing ``]``, a stream that ends before it — raises
    :class:`FramingError` with the ``offset`` and ``line`` of the byte at fault (after the
    frames before it, as the other decoders do). An element that is not an object is still
    a frame: decoding it says what is wrong. Nesting is counted, never recursed into.

    :param max_frame_size: the largest element accepted, in bytes.
    :param unterminated: accepted for symmetry with the other decoders; an array cut off is
        always an error (its ``]`` is missing), with ``"frame"`` too.
    :param invalid_utf8: ``"raise"`` (default) or ``"frame"``: an element that is not UTF-8
        is then returned as a frame whose ``error`` says so.
    """

    __slots__ = (
        "_closed",
        "_count",
        "_depth",
        "_elem",
        "_elem_line",
        "_elem_start",
        "_error",
        "_escape",
        "_head",
        "_in_string",
        "_limit",
        "_lineno",
        "_pos",
        "_scalar",
        "_state",
        "_tolerant",
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
        _check_options(max_frame_size, unterminated, invalid_utf8)
        self.max_frame_size = max_frame_size
        #: Always empty: an array has no lines to ignore (there for :class:`FrameDecoder`).
        self.ignored: list[Ignored] = []
        self._limit = max_frame_size
        self._tolerant = invalid_utf8 == "frame"
        self._head: bytearray | None = bytearray()  # the first bytes, while maybe a BOM
        self._state = _OPEN
        self._pos = 0  # stream offset of the next byte to read
        self._lineno = 1
        self._elem = bytearray()  # the element being read
        self._elem_start = 0
        self._elem_line = 0
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._scalar = False
        self._count = 0  # elements completed
        self._closed = False
        self._error: FramingError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for the element being read."""
        return len(self._elem) + (len(self._head) if self._head else 0)

    def feed(self, chunk: bytes) -> list[Frame]:
        """Decode the next chunk; returns the frames of the elements it completed.

        :raises ~agui_meta.FramingError: the bytes are not a JSON array, an element is over
            ``max_frame_size`` or not UTF-8.
        """
        self._check_usable()
        chunk = bytes(chunk)
        head = self._head
        if head is not None:
            head += chunk
            if len(head) < 3 and _BOM.startswith(head):
                return []
            chunk = bytes(head)
            self._head = None
            if chunk.startswith(_BOM):
                self._pos = 3
                chunk = chunk[3:]
        frames: list[Frame] = []
        try:
            self._scan(chunk, frames)
        except FramingError as exc:
            self._error = exc
            if frames:
                return frames
            raise
        return frames

    def close(self) -> list[Frame]:
        """End of stream: nothing more may come after the closing ``]``.

        :raises ~agui_meta.FramingError: the stream ended before the array's ``]`` (naming
            the element it ended in, or the end), or began with a partial BOM only.
        """
        self._check_usable()
        self._closed = True
        state = self._state
        if state in (_OPEN, _DONE) and not self._head:
            return []
        if state == _ELEMENT:
            error = FramingError(
                f"the stream ended inside element {self._count} of the JSON array (it starts "
                "here and is not complete): the array is truncated",
                offset=self._elem_start,
                line=self._elem_line,
            )
        elif state == _OPEN:
            error = FramingError(
                "the stream ended after a partial BOM", offset=self._pos, line=self._lineno
            )
        else:
            error = FramingError(
                f"the stream ended after {self._count} elements of the JSON array, before "
                "its closing ']': the array is truncated",
                offset=self._pos,
                line=self._lineno,
            )
        self._error = error
        raise error

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise UsageError("this decoder is closed; create a new one for another stream")

    def _fail(self, what: str, i: int, chunk: bytes) -> FramingError:
        pos = self._pos + i
        line = self._lineno + chunk.count(b"\n", 0, i)
        return FramingError(what, offset=pos, line=line)

    def _scan(self, chunk: bytes, frames: list[Frame]) -> None:
        """Read ``chunk`` (the next bytes of the stream); ``self._pos`` is its offset."""
        i = 0
        n = len(chunk)
        base = self._pos  # the chunk's offset: self._pos and self._lineno move at the end
        lineno = self._lineno
        done = 0  # bytes of the chunk whose LFs are counted in lineno
        state = self._state
        try:
            while i < n:
                if state != _ELEMENT:
                    match = _NON_WS.search(chunk, i)
                    if match is None:
                        i = n
                        break
                    i = match.start()
                    byte = chunk[i]
                    if state == _DONE:
                        raise self._fail(
                            f"unexpected {chunk[i : i + 16]!r} after the JSON array's closing "
                            "']' (one array is the whole stream)",
                            i,
                            chunk,
                        )
                    if state == _OPEN:
                        if byte != 0x5B:
                            raise self._fail(
                                f"a JSON array stream must begin with '[', not "
                                f"{chunk[i : i + 16]!r}",
                                i,
                                chunk,
                            )
                        state = _FIRST
                        i += 1
                        continue
                    if state == _AFTER:
                        if byte == 0x2C:  # ","
                            state = _NEXT
                        elif byte == 0x5D:  # "]"
                            state = _DONE
                        else:
                            raise self._fail(
                                f"expected ',' or ']' after element {self._count - 1} of the "
                                f"JSON array, not {chunk[i : i + 16]!r}",
                                i,
                                chunk,
                            )
                        i += 1
                        continue
                    if byte == 0x5D:  # "]"
                        if state == _NEXT:
                            raise self._fail(
                                "a trailing ',' before the JSON array's closing ']'", i, chunk
                            )
                        state = _DONE
                        i += 1
                        continue
                    if byte == 0x2C:
                        raise self._fail(
                            f"a ',' where element {self._count} of the JSON array should be",
                            i,
                            chunk,
                        )
                    # An element starts here.
                    lineno += chunk.count(b"\n", done, i)
                    done = i
                    self._elem_start = base + i
                    self._elem_line = lineno
                    self._depth = 0
                    self._escape = False
                    self._in_string = byte == 0x22
                    self._scalar = byte not in (0x7B, 0x5B)
                    state = _ELEMENT
                    self._elem.append(byte)
                    if byte != 0x22:
                        self._depth = 0 if self._scalar else 1
                    i += 1
                    continue
                # Inside an element: find where it ends.
                start = i
                end = -1  # the index just past the element's last byte, once found
                while i < n:
                    if self._escape:
                        self._escape = False
                        i += 1
                        continue
                    if self._in_string:
                        match = _IN_STRING.search(chunk, i)
                        if match is None:
                            i = n
                            break
                        i = match.end()
                        if chunk[i - 1] == 0x5C:  # a backslash escapes the next byte
                            self._escape = True
                            continue
                        self._in_string = False
                        if self._scalar:  # a string element ends with its quote
                            end = i
                            break
                        continue
                    if self._scalar:
                        match = _SCALAR_END.search(chunk, i)
                        if match is None:
                            i = n
                            break
                        end = i = match.start()
                        break
                    match = _STRUCTURE.search(chunk, i)
                    if match is None:
                        i = n
                        break
                    i = match.end()
                    byte = chunk[i - 1]
                    if byte == 0x22:
                        self._in_string = True
                    elif byte in (0x7B, 0x5B):
                        self._depth += 1
                    else:
                        self._depth -= 1
                        if not self._depth:
                            end = i
                            break
                stop = i if end < 0 else end
                if len(self._elem) + stop - start > self._limit:
                    raise FramingError(
                        f"element {self._count} of the JSON array is larger than "
                        f"max_frame_size={self._limit} bytes",
                        offset=self._elem_start,
                        line=self._elem_line,
                    )
                self._elem += memoryview(chunk)[start:stop]
                if end < 0:
                    break
                self._emit(frames)
                state = _AFTER
                i = end
        finally:
            self._state = state
        self._lineno = lineno + chunk.count(b"\n", done, n)
        self._pos = base + n

    def _emit(self, frames: list[Frame]) -> None:
        data = bytes(self._elem)
        self._elem.clear()
        start, line = self._elem_start, self._elem_line
        self._count += 1
        if not data.isascii():
            try:
                data.decode()
            except UnicodeDecodeError as exc:
                error = _not_utf8("JSON array element", data, exc, start, line)
                if not self._tolerant:
                    raise error from None
                frames.append(Frame(data, start, line, error=error))
                return
        frames.append(Frame(data, start, line))


_SSE_FIELDS = (b"data", b"event", b"id", b"retry")

#: The largest reconnection time kept exactly (ms, about 31.7 million years); a longer
#: ``retry`` value saturates to it. ``int()`` of producer text is never given more digits than
#: this, so the interpreter's int-string limit (4,300 digits) can never be reached.
RETRY_MAX: Final = 10**18 - 1


def _retry_ms(digits: bytes) -> int:
    """An SSE ``retry`` value (ASCII digits, any length), saturated at :data:`RETRY_MAX`."""
    digits = digits.lstrip(b"0") or b"0"
    return int(digits) if len(digits) <= 18 else RETRY_MAX


def _sniff(buf: bytes, begin: int) -> tuple[Format | None, int]:
    """Decide the format of a stream starting with ``buf``; see :func:`detect_format`.

    ``begin`` is where to resume (bytes before it are known BOM or whitespace); returns the
    format, or ``None`` when more bytes are needed, and the new resume point.
    """
    if begin == 0:
        if len(buf) < 3 and _BOM.startswith(buf):
            return None, 0
        if buf.startswith(_BOM):
            begin = 3
    rest = buf[begin:]
    text = rest.lstrip(_JSON_WS)
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
    for name in _SSE_FIELDS:
        if text.startswith(name):
            after = text[len(name) : len(name) + 1]
            if not after:
                return None, begin
            if after in (b":", b"\r", b"\n"):
                return "sse", begin
        elif name.startswith(text):
            return None, begin
    raise FramingError(
        "cannot tell the stream's format: it starts with "
        f"{text[:16]!r}, which begins neither a JSON line ('{{'), a JSON array ('[') nor an "
        "SSE line "
        "(':' or a data, event, id or retry field)",
        offset=begin,
        line=_line_at(buf, begin),
    )


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
        _check_options(max_frame_size, unterminated, invalid_utf8)
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
        """:meth:`feed`, with runs of simple SSE blocks as :class:`PayloadRun` (see
        :meth:`SSEDecoder.feed_runs`) once the format is known to be SSE."""
        delegate = self._delegate
        if type(delegate) is SSEDecoder:
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
                line=_line_at(buf, begin),
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
    raise ValueError(f"format must be 'auto', 'sse', 'jsonl' or 'json-array', got {format!r}")


def encode_sse(data: bytes, *, event: str | None = None, id: str | None = None) -> bytes:
    """Encode one event as SSE: ``data: <data>\\n\\n``, after optional ``event`` and ``id`` lines.

    Data with line ends becomes several ``data`` lines, so that decoding gives ``data`` back.
    SSE joins data lines with LF, so a CR or CRLF in ``data`` decodes as LF (for JSON text,
    where raw line ends can only be whitespace, the meaning is unchanged).

    :raises ValueError: ``event`` or ``id`` contains a line end, or ``id`` contains NUL (the
        decoder would ignore it).
    """
    head = b""
    if event is not None:
        if "\n" in event or "\r" in event:
            raise ValueError(f"an SSE event type cannot contain a line end: {event!r}")
        head = b"event: " + event.encode() + b"\n"
    if id is not None:
        if "\n" in id or "\r" in id or "\0" in id:
            raise ValueError(f"an SSE id cannot contain a line end or NUL: {id!r}")
        head += b"id: " + id.encode() + b"\n"
    if b"\n" not in data and b"\r" not in data:
        return head + b"data: " + data + b"\n\n"
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return head + b"data: " + b"\ndata: ".join(lines) + b"\n\n"


def encode_jsonl(data: bytes) -> bytes:
    """Encode one JSON text as a JSON line: ``data`` followed by LF.

    :raises ValueError: ``data`` contains a raw CR or LF (JSON never needs one: inside strings
        they are written ``\\r`` and ``\\n``).
    """
    if b"\n" in data or b"\r" in data:
        raise ValueError(
            "a JSON line cannot contain a raw line end (CR or LF); encode the JSON compactly"
        )
    return data + b"\n"


async def aiter_frames(
    source: AsyncIterable[bytes | str],
    *,
    format: Format | Literal["auto"] = "auto",
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    unterminated: Unterminated = "frame",
) -> AsyncGenerator[Frame, None]:
    """Decode the frames of an async byte (or text) stream.

    ``str`` chunks are encoded as UTF-8; offsets then count bytes of that encoding. The
    iterator of ``source`` is closed (``aclose()``, when it has one) when this generator ends,
    fails or is closed. Use it with :func:`contextlib.aclosing` to close it promptly.

    :param format: ``"auto"`` (see :func:`detect_format`), ``"sse"``, ``"jsonl"`` or
        ``"json-array"``.
    :raises ~agui_meta.FramingError: see the decoders.
    """
    decoder = make_decoder(format, max_frame_size=max_frame_size, unterminated=unterminated)
    chunks = aiter(source)
    fed = 0
    try:
        async for chunk in chunks:
            if isinstance(chunk, str):
                text = chunk
                try:
                    chunk = text.encode()
                except UnicodeEncodeError as exc:
                    raise FramingError(
                        "a text chunk is not encodable as UTF-8 (it holds a lone surrogate)",
                        offset=fed + len(text[: exc.start].encode()),
                    ) from None
            fed += len(chunk)
            for frame in decoder.feed(chunk):
                yield frame
        for frame in decoder.close():
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
    decoder = make_decoder(format, max_frame_size=max_frame_size, unterminated=unterminated)
    file = await anyio.open_file(path, "rb")
    try:
        while chunk := await file.read(chunk_size):
            for frame in decoder.feed(chunk):
                yield frame
    finally:
        with anyio.CancelScope(shield=True):  # closing runs in a thread: not cancellable
            await file.aclose()
    for frame in decoder.close():
        yield frame


_JSONL_MEDIA_TYPES = frozenset(
    {
        "application/jsonl",
        "application/x-jsonl",
        "application/jsonlines",
        "application/x-jsonlines",
        "application/json-lines",
        "application/ndjson",
        "application/x-ndjson",
    }
)


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
    the format is detected from the body. The body is read with ``response.aiter_bytes()``
    (content encodings undone). Closing the response stays the caller's job.
    """
    if format == "auto":
        media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type == "text/event-stream":
            format = "sse"
        elif media_type in _JSONL_MEDIA_TYPES:
            format = "jsonl"
    async with contextlib.aclosing(
        aiter_frames(
            response.aiter_bytes(),
            format=format,
            max_frame_size=max_frame_size,
            unterminated=unterminated,
        )
    ) as frames:
        async for frame in frames:
            yield frame


def _line_at(buf: bytes, offset: int) -> int:
    head = buf[:offset]
    return 1 + head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n")
