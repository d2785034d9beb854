"""One JSON array of events: each element a frame, the array never held whole."""

from __future__ import annotations

import re

from .._exceptions import FramingError, UsageError
from ._common import (
    BOM,
    DEFAULT_MAX_FRAME_SIZE,
    Frame,
    Ignored,
    InvalidUtf8,
    Unterminated,
    check_options,
    not_utf8,
)

__all__ = ["JsonArrayDecoder"]

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
        check_options(max_frame_size, unterminated, invalid_utf8)
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
            if len(head) < 3 and BOM.startswith(head):
                return []
            chunk = bytes(head)
            self._head = None
            if chunk.startswith(BOM):
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
                            f"unexpected {chunk[i : i + 1]!r} after the JSON array's closing "
                            "']' (one array is the whole stream)",
                            i,
                            chunk,
                        )
                    if state == _OPEN:
                        if byte != 0x5B:
                            raise self._fail(
                                f"a JSON array stream must begin with '[', not "
                                f"{chunk[i : i + 1]!r}",
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
                                f"JSON array, not {chunk[i : i + 1]!r}",
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
                error = not_utf8("JSON array element", data, exc, start, line)
                if not self._tolerant:
                    raise error from None
                frames.append(Frame(data, start, line, error=error))
                return
        frames.append(Frame(data, start, line))
