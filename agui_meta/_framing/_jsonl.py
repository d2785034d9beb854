"""JSON lines: one JSON value per line, the decoder and the encoder."""

from __future__ import annotations

from collections.abc import Iterable

from .._exceptions import FramingError, UsageError
from ._common import (
    JSON_WS,
    Frame,
    LineDecoder,
    PayloadRun,
    jsonl_run,
    not_utf8,
)

__all__ = ["JsonLinesDecoder", "encode_jsonl"]

_BLANK = (b"\n", b"\r", b" ", b"\t")


class JsonLinesDecoder(LineDecoder):
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
            if chunk[:1] in _BLANK:
                # Blank lines lead: skipped at once, only counted (when none of them can be
                # over the limit, which _run would report).
                ws = len(chunk) - len(chunk.lstrip(JSON_WS))
                skip = chunk.rfind(b"\n", 0, ws) + 1
                if 0 < skip <= self._limit:
                    self._lineno += chunk.count(b"\n", 0, skip)
                    self._pos += skip
                    chunk = chunk[skip:]
            if self._runs:
                # Adjacent non-blank lines, all of the chunk's (jsonl_run, in the C core when
                # it is in use): one PayloadRun; anything else line by line below.
                run = jsonl_run(chunk, self._limit)
                if run is not None:
                    payloads, end = run
                    frames.append(
                        PayloadRun(payloads, self._pos, self._lineno, None, 1, 1)  # type: ignore[arg-type]
                    )
                    self._pos += end
                    self._lineno += len(payloads)
                    chunk = chunk[end:]
                    if chunk:
                        self._hold(chunk)
                    return frames
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
            if not line.strip(JSON_WS):
                continue
            if not line.isascii():
                try:
                    line.decode()
                except UnicodeDecodeError as exc:
                    if not self._tolerant:
                        raise not_utf8("JSON line", line, exc, here, ln) from None
                    error = not_utf8("JSON line", line, exc, here, ln)
                    append(Frame(line, here, ln, None, None, final, error))
                    continue
            append(Frame(line, here, ln, None, None, final) if final else Frame(line, here, ln))
        self._pos = pos
        self._lineno = lineno


def encode_jsonl(data: bytes) -> bytes:
    """Encode one JSON text as a JSON line: ``data`` followed by LF.

    :raises UsageError: ``data`` contains a raw CR or LF (JSON never needs one: inside strings
        they are written ``\\r`` and ``\\n``).
    """
    if b"\n" in data or b"\r" in data:
        raise UsageError(
            "a JSON line cannot contain a raw line end (CR or LF); encode the JSON compactly"
        )
    return data + b"\n"
