"""Server-Sent Events: the decoder (WHATWG "event stream interpretation") and the encoder."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import accumulate, repeat
from typing import Final

from .._exceptions import FramingError, Report, UsageError
from .._speedups import new_list
from ._common import (
    DEFAULT_MAX_FRAME_SIZE,
    Frame,
    Ignored,
    InvalidUtf8,
    LineDecoder,
    PayloadRun,
    Unterminated,
    is_utf8,
    not_utf8,
    sse_run,
)

__all__ = ["RETRY_MAX", "SSE_FIELDS", "SSEDecoder", "encode_sse", "ignored_report"]

SSE_FIELDS = (b"data", b"event", b"id", b"retry")
_LINE_ENDS = (10, 13)

#: The largest reconnection time kept exactly (ms, about 31.7 million years); a longer
#: ``retry`` value saturates to it. ``int()`` of producer text is never given more digits than
#: this, so the interpreter's int-string limit (4,300 digits) can never be reached.
RETRY_MAX: Final = 10**18 - 1


def _retry_ms(digits: bytes) -> int:
    """An SSE ``retry`` value (ASCII digits, any length), saturated at :data:`RETRY_MAX`."""
    digits = digits.lstrip(b"0") or b"0"
    return int(digits) if len(digits) <= 18 else RETRY_MAX


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


class SSEDecoder(LineDecoder):
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
        "_spelt",
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
        self._data: list[bytes] = new_list()  # bytes only: untracked with the C core
        self._data_len = 0  # bytes held in _data, one more per value (the joining LFs)
        self._event: str | None = None
        self._id: str | None = None
        self._start_pos = -1  # offset of the current event's first field line; -1: none yet
        self._start_line = 0
        # The frames the PayloadRuns in this call's list stand for beyond one each (feed_runs):
        # an ignored line's place counts frames, as feed gives them.
        self._spelt = 0

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
            and (chunk.isascii() or is_utf8(chunk))
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
        self._spelt = 0
        try:
            pending = self._pending
            if (
                pending
                and self._start_pos < 0
                and pending.startswith(b"data: ")
                and b"\r" not in chunk
            ):
                # The common case of a read that cut an event's one data line: between events,
                # the held start of that line goes in front of the chunk, which then starts at
                # a line start with "data: " (the held bytes are not yet counted in _pos), for
                # _run_simple below to take with the rest, as if no read had cut it.
                chunk = b"".join((pending, chunk))
                pending.clear()
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
            # The chunk now starts at a line start. Between events, blank lines dispatch
            # nothing: a run of them is skipped at once, only counted.
            if self._start_pos < 0 and chunk[0] in _LINE_ENDS:
                rest = chunk.lstrip(b"\r\n")
                blank = chunk[: len(chunk) - len(rest)]
                self._pos += len(blank)
                self._lineno += blank.count(b"\n") + blank.count(b"\r") - blank.count(b"\r\n")
                if not rest:
                    self._cr = blank[-1] == 13  # its LF may open the next chunk
                    return frames
                chunk = rest
            # Fast path for runs of blocks of exactly one "data: <payload>" line (see
            # _run_simple), taken between events.
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

    def close(self) -> list[Frame]:
        """End of stream: returns the last event if its data was not followed by a blank line.

        :raises ~agui_meta.FramingError: the stream ended inside an event and
            ``unterminated="error"`` was given.
        """
        self._check_usable()
        self._closed = True
        frames: list[Frame] = []
        self._spelt = 0  # this call's list: the last feed's runs are not in it
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
        run = sse_run(chunk, self._limit)
        if run is None:
            return chunk  # let _run frame it line by line (and report what is wrong)
        payloads, end = run
        count = len(payloads)
        lineno = self._lineno
        last_id = self._id
        if self._runs:
            frames.append(PayloadRun(payloads, self._pos, lineno, last_id))  # type: ignore[arg-type]
            self._spelt += count - 1
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
                            self.ignored.append(Ignored(len(frames) + self._spelt, name, here, ln))
                    except UnicodeDecodeError as exc:
                        what = "SSE event type" if name == b"event" else "SSE event id"
                        if not self._tolerant:
                            raise not_utf8(what, value, exc, here, ln) from None
                        if bad is None:
                            bad = not_utf8(what, value, exc, here, ln)
                    continue
            if not value.isascii():
                try:
                    value.decode()
                except UnicodeDecodeError as exc:
                    if not self._tolerant:
                        raise not_utf8("SSE data", value, exc, here, ln) from None
                    if bad is None:
                        bad = not_utf8("SSE data", value, exc, here, ln)
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


def encode_sse(data: bytes, *, event: str | None = None, id: str | None = None) -> bytes:
    """Encode one event as SSE: ``data: <data>\\n\\n``, after optional ``event`` and ``id`` lines.

    Data with line ends becomes several ``data`` lines, so that decoding gives ``data`` back.
    SSE joins data lines with LF, so a CR or CRLF in ``data`` decodes as LF (for JSON text,
    where raw line ends can only be whitespace, the meaning is unchanged).

    :raises UsageError: ``event`` or ``id`` contains a line end, or ``id`` contains NUL (the
        decoder would ignore it).
    """
    head = b""
    if event is not None:
        if "\n" in event or "\r" in event:
            raise UsageError(f"an SSE event type cannot contain a line end: {event!r}")
        head = b"event: " + event.encode() + b"\n"
    if id is not None:
        if "\n" in id or "\r" in id or "\0" in id:
            raise UsageError(f"an SSE id cannot contain a line end or NUL: {id!r}")
        head += b"id: " + id.encode() + b"\n"
    if b"\n" not in data and b"\r" not in data:
        return head + b"data: " + data + b"\n\n"
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return head + b"data: " + b"\ndata: ".join(lines) + b"\n\n"
