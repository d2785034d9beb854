"""What ``replay`` and ``validate`` share: a recorded stream read through the default pipeline.

The input is a file (or standard input) of SSE or JSON lines, detected from its first bytes. It
is split into frames here (so that every report can name the line and byte where its event
began) and the frames go through :func:`agui_meta.wrap` with
:func:`agui_meta.DefaultStages`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from array import array
from collections.abc import Callable, Generator, Sequence
from typing import IO, Any, Literal, TextIO

import anyio
import msgspec

from .._defaults import DefaultStages
from .._exceptions import DataError, FramingError, Report
from .._framing import Format, Frame, Ignored, ignored_report, make_decoder
from .._lint import LintMetadataKeys
from .._pipeline import wrap
from .._stage import Mode
from .._store import Store
from .._verify import Verify

__all__ = [
    "InputError",
    "StreamInput",
    "add_stream_arguments",
    "isatty",
    "plural",
    "run_stream",
    "use_color",
]

#: Bytes read at a time.
CHUNK_SIZE = 1 << 16
#: Inputs larger than this get a progress indicator (when standard error is a terminal).
PROGRESS_THRESHOLD = 1 << 20
#: Seconds between two redraws of the progress indicator.
PROGRESS_INTERVAL = 0.1

_FILE_HELP = "an SSE or JSON-lines file of AG-UI events ('-' for standard input)"
_FORMAT_HELP = "the input's format (default: detected from its first bytes)"


class InputError(Exception):
    """The input cannot be opened or read (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# Input


class _Progress:
    """``reading FILE: 12.0 of 40.0 MB (30%), 81234 events`` on a terminal, redrawn in place."""

    def __init__(self, out: TextIO, label: str, total: int | None) -> None:
        self._out = out
        self._label = label
        self._total = total
        self._next = 0.0
        self._drawn = False

    def update(self, done: int, events: int) -> None:
        if max(done, self._total or 0) <= PROGRESS_THRESHOLD:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + PROGRESS_INTERVAL
        text = f"reading {self._label}: {done / 1e6:.1f}"
        if self._total:
            text += f" of {self._total / 1e6:.1f} MB ({100 * done // self._total}%)"
        else:
            text += " MB"
        self._out.write(f"\r{text}, {events} events\x1b[K")
        self._out.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self._out.write("\r\x1b[K")
            self._out.flush()
            self._drawn = False


class StreamInput:
    """A file (or standard input) read in chunks and split into frames.

    Remembers where every frame began (``line``, ``offset``), by event index, so that reports
    raised far from the bytes (the verifier's, the accumulator's) can name the place too.
    """

    def __init__(self, name: str, format: Format | Literal["auto"]) -> None:
        self.name = name
        self.format = format
        #: Where reports of lines the framer ignored go (set by :func:`run_stream`).
        self.on_note: Callable[[Report], None] | None = None
        self._lines = array("q")
        self._offsets = array("q")
        self._file: IO[bytes]
        try:
            if name == "-":
                self._file = sys.stdin.buffer
                size = None
            else:
                self._file = open(name, "rb")  # noqa: SIM115 - closed by close()
                info = os.fstat(self._file.fileno())
                size = info.st_size if info.st_size > 0 else None
        except OSError as exc:
            raise InputError(f"cannot read {name}: {exc.strerror or exc}") from None
        label = "standard input" if name == "-" else name
        self._progress = _Progress(sys.stderr, label, size) if isatty(sys.stderr) else None

    @property
    def events(self) -> int:
        """How many frames were read so far."""
        return len(self._lines)

    def frames(
        self, on_framing_error: Callable[[Report], None] | None
    ) -> Generator[Frame, None, None]:
        """The frames, in order. A framing error ends them: raised, or handed to the callback."""
        # In keep-going mode a frame that is not UTF-8 comes with its error set, and the
        # pipeline skips it as one bad event; otherwise the decoder raises.
        tolerant = on_framing_error is not None
        decoder = make_decoder(self.format, invalid_utf8="frame" if tolerant else "raise")
        lines, offsets, progress = self._lines, self._offsets, self._progress
        # Standard input is read as its bytes arrive (read1), so that they are shown live.
        read = (
            getattr(self._file, "read1", self._file.read) if self.name == "-" else self._file.read
        )
        done = 0
        try:
            while True:
                try:
                    chunk = read(CHUNK_SIZE)
                except OSError as exc:
                    raise InputError(f"cannot read {self.name}: {exc.strerror or exc}") from None
                batch = decoder.feed(chunk) if chunk else decoder.close()
                notes = list(decoder.ignored)
                decoder.ignored.clear()
                for i, frame in enumerate(batch):
                    while notes and notes[0].before <= i:
                        self._ignored(notes.pop(0), len(lines))
                    lines.append(frame.line)
                    offsets.append(frame.offset)
                    yield frame
                for note in notes:
                    self._ignored(note, len(lines))
                if not chunk:
                    break
                done += len(chunk)
                if progress is not None:
                    progress.update(done, len(lines))
        except FramingError as exc:
            exc.locate(index=len(lines))
            if on_framing_error is None:
                raise
            on_framing_error(exc.to_report())
        finally:
            if progress is not None:
                progress.close()

    def _ignored(self, note: Ignored, index: int) -> None:
        """A line the framer ignored, as the pipeline reports it (``sse-unknown-field``)."""
        if self.on_note is not None:
            self.on_note(ignored_report(note, index))

    def locate(self, report: Report) -> Report:
        """``report`` with the line and byte of its event filled in, when they were missing."""
        index = report.index
        if index is None or report.line is not None or report.offset is not None:
            return report
        if 0 <= index < len(self._lines):
            return msgspec.structs.replace(
                report, line=self._lines[index], offset=self._offsets[index]
            )
        return report

    def close(self) -> None:
        if self._file is not sys.stdin.buffer:
            self._file.close()


def isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # closed
        return False


def run_stream(
    args: argparse.Namespace,
    *,
    mode: Mode,
    on_report: Callable[[Report], None],
    lint: bool = False,
    report_unfinished: bool = False,
    last: Sequence[Any] = (),
) -> tuple[StreamInput, DefaultStages[Store], Report | None]:
    """Run the file named by ``args.file`` through the default pipeline (then ``last``).

    Returns the input (its event count), the stages (the store, the ledger) and the error that
    stopped the pipeline (``None`` when it ran to the end).
    """
    source = StreamInput(args.file, args.format)
    stages = DefaultStages(verify=Verify(report_unfinished=report_unfinished))
    first = [LintMetadataKeys()] if lint else []

    def deliver(report: Report) -> None:
        on_report(source.locate(report))

    source.on_note = deliver

    async def run() -> None:
        frames = source.frames(deliver if mode == "keep_going" else None)
        try:
            async with wrap(frames, *first, *stages, *last, mode=mode, on_report=deliver) as stream:
                await stream.drain()
        finally:
            frames.close()  # erases the progress indicator before anything is printed

    error = None
    try:
        anyio.run(run)
    except DataError as exc:
        error = source.locate(exc.to_report())
    finally:
        source.close()
    return source, stages, error


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help=_FILE_HELP)
    parser.add_argument(
        "--format", choices=("auto", "sse", "jsonl"), default="auto", help=_FORMAT_HELP
    )
    parser.add_argument(
        "--color",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="colour the output (default: when standard output is a terminal and NO_COLOR is "
        "not set)",
    )


def use_color(args: argparse.Namespace) -> bool:
    if args.color is not None:
        return bool(args.color)
    return (
        isatty(sys.stdout) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
