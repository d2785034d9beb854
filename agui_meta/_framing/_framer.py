"""Chunks to frames: the one way every source of bytes is framed.

A :class:`Framer` takes the chunks of a source as they come (``bytes``, ``bytearray``,
``memoryview`` or ``str``) and gives its decoder's frames. Every source goes through one:
the pipeline's driver, :func:`~agui_meta.framing.aiter_frames` and the other async sources,
the HTTP client, :func:`~agui_meta.compact_events`, the command line and the Redis ingest. So
the same bytes give the same frames, and the same bad bytes the same error (class, message,
offset and line), whichever way they came in.

What it adds to a decoder:

- **One rule for text.** A ``str`` chunk is encoded as UTF-8 with its lone surrogates kept
  as the bytes they would be (``surrogatepass``), which the decoder then refuses as it
  refuses them in bytes, naming the line.
- **Bounded work per step.** A chunk longer than :data:`SLICE` is fed to the decoder one
  slice at a time (:meth:`Framer.slices`), and the caller runs a slice's frames before it
  asks for the next: the lists a decoder builds (lines, frames) are a slice's, never a whole
  chunk's, so memory stays within a few times ``max_frame_size`` plus the read size whatever
  the chunk holds (64 MiB of blank lines included), and an async caller can yield to
  cancellation between slices.
- **Lines without their line ending** (``lines=True``; see :meth:`Framer._line_ending`):
  httpx's ``aiter_lines()`` or a list of ``json.dumps(event)`` strings give lines, not a byte
  stream; they are told apart from pieces of a byte stream and given their line endings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final, Literal

import msgspec

from .._speedups import new_list
from ._common import BOM, DEFAULT_MAX_FRAME_SIZE, Format, Frame, Ignored, InvalidUtf8
from ._detect import AutoDecoder, make_decoder
from ._sse import SSE_FIELDS, SSEDecoder

__all__ = ["SLICE", "Framer"]

#: The most bytes a decoder is fed at once (64 KiB): a longer chunk is fed in slices.
SLICE: Final = 1 << 16


class Framer:
    """The frames of one stream, from its chunks (see the module documentation).

    Feed a chunk with ``for piece in framer.slices(chunk): frames = framer.feed(piece)``,
    running each piece's frames before taking the next piece; at the end, the pieces of
    :meth:`rest` the same way, then :meth:`close`. A
    :class:`~agui_meta.FramingError` is raised as the decoder raises it (with its offset and
    line; the caller adds the event index it knows).

    :param format: ``"auto"`` (detected from the first bytes), ``"sse"``, ``"jsonl"`` or
        ``"json-array"``.
    :param invalid_utf8: ``"frame"``: a frame that is not UTF-8 comes with its ``error`` set
        (keep-going consumers), instead of raising.
    :param lines: chunks may be whole lines given without their line ending.
    :param runs: :meth:`feed` gives runs of one-line ``data:`` SSE blocks as
        :class:`PayloadRun` (see :meth:`SSEDecoder.feed_runs`).
    """

    __slots__ = (
        "_added",
        "_first",
        "_held",
        "_held_size",
        "_lines",
        "_mid_line",
        "_split_lines",
        "decoder",
        "feed",
        "max_frame_size",
        "runs",
    )

    def __init__(
        self,
        format: Format | Literal["auto"] = "auto",
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        unterminated: Literal["frame", "error"] = "frame",
        invalid_utf8: InvalidUtf8 = "raise",
        lines: bool = False,
        runs: bool = False,
    ) -> None:
        decoder: Any = make_decoder(
            format,
            max_frame_size=max_frame_size,
            unterminated=unterminated,
            invalid_utf8=invalid_utf8,
        )
        #: The decoder (its ``retry``, ``last_event_id`` and ``buffered``, for the HTTP client).
        self.decoder = decoder
        self.max_frame_size = max_frame_size
        #: Decode one piece :meth:`slices` gave; returns the frames it completed.
        #: Whether :meth:`feed` may give :class:`PayloadRun` values (else frames only).
        self.runs = runs and hasattr(decoder, "feed_runs")
        self.feed: Any = decoder.feed_runs if self.runs else decoder.feed
        self._split_lines = lines
        # The line-ending state (see _line_ending): whether the last chunk left a line open;
        # whether chunks are known to be lines; the chunks that look like SSE lines held until
        # the next chunk tells; whether the bytes fed end with a line ending added here;
        # whether no chunk came yet.
        self._mid_line = False
        self._lines = False
        self._held: list[bytes] = new_list()  # bytes only: untracked with the C core
        self._held_size = 0
        self._added = False
        self._first = True

    @property
    def ignored(self) -> list[Ignored]:
        """The lines the decoder read and ignored (see :attr:`SSEDecoder.ignored`)."""
        ignored: list[Ignored] = self.decoder.ignored
        return ignored

    @property
    def buffered(self) -> int:
        """Bytes held for the frame being read."""
        return int(self.decoder.buffered) + self._held_size

    def slices(self, chunk: bytes | bytearray | memoryview | str) -> Iterable[bytes]:
        """The pieces to :meth:`feed` for one chunk of the source, in order.

        One piece for a chunk of up to :data:`SLICE` bytes, none while the chunk is held (a
        possible line without its ending), else the chunk cut in slices of :data:`SLICE`
        bytes (an iterator: a slice is cut when it is asked for).
        """
        if type(chunk) is not bytes:
            # A str chunk's lone surrogates become the bytes they would be (CESU-8), which the
            # decoder refuses as it refuses them in bytes: one rule for every source.
            chunk = (
                chunk.encode("utf-8", "surrogatepass") if isinstance(chunk, str) else bytes(chunk)
            )
        if self._split_lines:
            whole = self._line_ending(chunk)
            if whole is None:
                return ()
            chunk = whole
        if len(chunk) <= SLICE:
            return (chunk,)
        return _cut(chunk)

    def rest(self) -> Iterable[bytes]:
        """At the end of the stream, before :meth:`close`: the pieces still to :meth:`feed`
        (with ``lines=True``, the chunks held as possible lines, now lines)."""
        if not self._held:
            return ()
        held = self._held_lines()
        return (held,) if len(held) <= SLICE else _cut(held)

    def close(self) -> list[Frame]:
        """End of stream, after :meth:`rest`: the decoder's last frames."""
        frames: list[Frame] = self.decoder.close()
        return frames

    # -- lines given without their line ending ----------------------------------------------

    def _line_ending(self, chunk: bytes) -> bytes | None:
        """What to feed the decoder for a source chunk (``None``: nothing yet, it is held).

        A chunk with no line ending may be one whole line given without its ending (httpx's
        ``aiter_lines()``, a list of ``json.dumps(event)`` strings) or a piece of a byte
        stream. When it starts a line (the chunk before it ended one):

        - a JSON value (``{``, ``[`` or a blank first) is taken as a whole line at once: it
          gets a line ending, and chunks without one are lines from then on;
        - a chunk that looks like an SSE line (``:`` a comment, or a ``data``, ``event``,
          ``id`` or ``retry`` field) is held, with any such chunks after it, until a chunk
          tells: an empty one (the blank line ``aiter_lines()`` gives between SSE events) or
          the end of the stream makes them lines, and chunks without a line ending are lines
          from then on; one holding a line ending, or one that starts no SSE line (the rest of
          a line), makes them pieces of a byte stream, fed as they came. Holding costs an SSE
          stream nothing: its event is dispatched at the blank line anyway.

        Once chunks are lines, none is decoded to decide. A chunk holding a line ending is a
        byte stream's; when it starts with the LF of a line that already got an ending here
        (a byte stream split right before its line ending), that LF is dropped, so offsets
        and line numbers stay those of the stream (of a CRLF the CR is kept, at the next
        line's start where it is JSON whitespace; in SSE it is kept as it was). In line mode,
        offsets count one byte per line ending.
        """
        first = self._first
        self._first = False
        if b"\n" in chunk or b"\r" in chunk:
            if self._held:
                chunk = b"".join(self._held) + chunk
                self._held.clear()
                self._held_size = 0
            elif self._added:
                if chunk[:1] == b"\n":
                    chunk = chunk[1:]
                elif chunk[:2] == b"\r\n" and not self._sse():
                    chunk = b"\r" + chunk[2:]
            self._lines = self._added = False
            self._mid_line = not chunk.endswith((b"\n", b"\r"))
            return chunk
        if self._mid_line:
            self._added = False
            return chunk
        if self._lines:
            self._added = True
            return chunk + b"\n"
        probe = chunk[3:] if first and chunk.startswith(BOM) else chunk
        if self._held:
            if not chunk:
                self._lines = self._added = True
                return self._held_lines() + b"\n"
            if not _sse_line(probe):  # the rest of the held line: a byte stream's pieces
                chunk = b"".join(self._held) + chunk
                self._held.clear()
                self._held_size = 0
                self._mid_line = True
                return chunk
        elif not chunk:
            return chunk
        if _sse_line(probe):
            self._held.append(chunk)
            self._held_size += len(chunk) + 1
            if self._held_size > self.max_frame_size:  # bounded: lines (the decoder judges)
                self._lines = self._added = True
                return self._held_lines()
            return None
        if probe[:1] in (b"{", b" ", b"\t", b"["):
            try:
                msgspec.json.decode(probe)
            except (msgspec.DecodeError, RecursionError):
                pass
            else:
                self._lines = self._added = True
                return chunk + b"\n"
        self._mid_line = True
        self._added = False
        return chunk

    def _held_lines(self) -> bytes:
        """The held chunks as lines, each with its line ending."""
        held = self._held
        out = b"\n".join(held) + b"\n"
        held.clear()
        self._held_size = 0
        return out

    def _sse(self) -> bool:
        """Whether the decoder reads SSE."""
        decoder = self.decoder
        if isinstance(decoder, AutoDecoder):
            return decoder.format == "sse"
        return isinstance(decoder, SSEDecoder)


def _cut(chunk: bytes) -> Iterator[bytes]:
    """``chunk`` in slices of :data:`SLICE` bytes, each cut when it is asked for."""
    for start in range(0, len(chunk), SLICE):
        yield chunk[start : start + SLICE]


def _sse_line(chunk: bytes) -> bool:
    """Whether ``chunk`` begins like an SSE line: a comment, or a known field."""
    return chunk[:1] == b":" or chunk.partition(b":")[0] in SSE_FIELDS
