"""What the stream commands share: a recorded stream read through the default pipeline.

The input is a file (or standard input) of SSE or JSON lines. :func:`run_stream` hands its
bytes to :func:`agui_meta.wrap` with :class:`agui_meta.DefaultStages`, as any client of the
library does: the pipeline frames them (detecting the format unless it is forced) and every
report and error carries the line and byte offset of its event from the pipeline's context.
Before that, a forced format the input plainly is not is an error naming the one it looks
like; after it, input that held something but no event is one too.

:meth:`StreamInput.frames` frames the input here instead, for commands that drive the stages
synchronously (``compact``); :meth:`StreamInput.locate` then names the place of a report.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from array import array
from collections.abc import Callable, Generator, Sequence
from typing import IO, Any, Literal, TextIO

import anyio
import msgspec

from .._defaults import DefaultStages
from .._exceptions import DataError, FramingError, Report
from .._framing import Format, Frame, Framer, Ignored, detect_format, ignored_report
from .._lint import LintMetadataKeys
from .._pipeline import wrap
from .._stage import Mode
from .._store import Store
from .._verify import Verify
from ._render import json_for_terminal

__all__ = [
    "FORMAT_NAMES",
    "InputError",
    "StreamInput",
    "StreamResult",
    "add_stream_arguments",
    "check_forced_format",
    "isatty",
    "no_event",
    "plural",
    "run_async",
    "run_stream",
    "use_color",
    "use_escapes",
    "write_json",
]

#: Bytes read at a time.
CHUNK_SIZE = 1 << 16
#: Inputs larger than this get a progress indicator (when standard error is a terminal).
PROGRESS_THRESHOLD = 1 << 20
#: Seconds between two redraws of the progress indicator.
PROGRESS_INTERVAL = 0.1

_FILE_HELP = "an SSE or JSON-lines file of AG-UI events ('-' for standard input)"
_FORMAT_HELP = "the input's format (default: detected from its first bytes)"


#: How formats are named for people.
FORMAT_NAMES = {"sse": "SSE", "jsonl": "JSON lines", "json-array": "JSON array"}
_JSON_WS = b" \t\r\n"


class InputError(Exception):
    """The input cannot be opened or read, or a forced format is wrong (exit status 2)."""


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
        #: Bytes read so far, and the first chunk (to tell what the input looks like).
        self.read = 0
        self.head = b""
        self._pending: bytes | None = None
        #: Where :meth:`frames` sends reports of lines the framer ignored (``sse-unknown-field``).
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
        read1 = getattr(self._file, "read1", None) if name == "-" else None
        self._read1: Callable[[int], bytes] = read1 or self._file.read
        label = "standard input" if name == "-" else name
        self._progress = _Progress(sys.stderr, label, size) if isatty(sys.stderr) else None

    @property
    def events(self) -> int:
        """How many frames :meth:`frames` read so far."""
        return len(self._lines)

    def _read(self) -> bytes:
        try:
            # Standard input is read as its bytes arrive (read1), so that they are shown live.
            chunk = self._read1(CHUNK_SIZE)
        except OSError as exc:
            raise InputError(f"cannot read {self.name}: {exc.strerror or exc}") from None
        if not self.read:
            self.head = chunk
        self.read += len(chunk)
        return chunk

    def peek(self) -> bytes:
        """The first chunk, read now if nothing was read yet (:meth:`chunks` yields it first)."""
        if not self.read:
            self._pending = self._read()
        return self.head

    def chunks(self, events: Callable[[], int]) -> Generator[bytes, None, None]:
        """The input's bytes, chunk by chunk; ``events()`` counts events for the progress line."""
        progress = self._progress
        try:
            chunk, self._pending = self._pending, None
            while True:
                if chunk is None:
                    chunk = self._read()
                if not chunk:
                    return
                yield chunk
                chunk = None
                if progress is not None:
                    progress.update(self.read, events())
        finally:
            if progress is not None:
                progress.close()

    def frames(
        self, on_framing_error: Callable[[Report], None] | None
    ) -> Generator[Frame, None, None]:
        """The frames, in order. A framing error ends them: raised, or handed to the callback."""
        # In keep-going mode a frame that is not UTF-8 comes with its error set, and the
        # pipeline skips it as one bad event; otherwise the decoder raises.
        tolerant = on_framing_error is not None
        framer = Framer(self.format, invalid_utf8="frame" if tolerant else "raise")
        lines, offsets, progress = self._lines, self._offsets, self._progress
        done = 0
        try:
            while True:
                chunk = self._read()
                for piece in framer.slices(chunk) if chunk else (None,):
                    batch = framer.close() if piece is None else framer.feed(piece)
                    notes = list(framer.ignored)
                    framer.ignored.clear()
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


class StreamResult:
    """What :func:`run_stream` gives: the stages (store, ledger), the event count, the error."""

    def __init__(self, source: StreamInput, stages: DefaultStages[Store]) -> None:
        self.source = source
        self.stages = stages
        #: Events the pipeline numbered (frames read, bad ones included).
        self.events = 0
        #: The error that stopped the pipeline, as a report (``None``: it ran to the end).
        self.error: Report | None = None


def run_async(function: Callable[[], Any]) -> None:
    """``anyio.run(function)``, with Ctrl-C raising :exc:`KeyboardInterrupt` at once.

    asyncio turns Ctrl-C into a cancellation of the main task, which waits for the next
    ``await``: a command blocked reading a terminal would ignore it until end of input. The
    default handler is restored inside the loop instead, and :func:`agui_meta.cli.main` turns
    the interrupt into exit status 130 and one line.
    """

    async def main() -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        await function()

    anyio.run(main)


def _events(context: Any) -> int:
    """How many events the pipeline has numbered so far (its current batch of frames ends it)."""
    return int(context.frames_start) + len(context.frames)


def run_stream(
    args: argparse.Namespace,
    *,
    mode: Mode,
    on_report: Callable[[Report], None],
    lint: bool = False,
    report_unfinished: bool = False,
    last: Sequence[Any] = (),
) -> StreamResult:
    """Run the file named by ``args.file`` through the default pipeline (then ``last``).

    :raises InputError: the input cannot be read, or it plainly is not in the forced format.
    """
    source = StreamInput(args.file, args.format)
    result = StreamResult(source, DefaultStages(verify=Verify(report_unfinished=report_unfinished)))
    first = [LintMetadataKeys()] if lint else []
    try:
        if args.format != "auto":
            check_forced_format(source, args.format, getattr(args, "format_option", "--format"))
        made: list[Any] = []  # the pipeline, whose context counts events for the progress line
        chunks = source.chunks(lambda: _events(made[0].context) if made else 0)
        pipeline = wrap(
            chunks,
            *first,
            *result.stages,
            *last,
            mode=mode,
            on_report=on_report,
            format=args.format,
        )
        made.append(pipeline)
        context = pipeline.context

        async def run() -> None:
            try:
                async with pipeline as stream:
                    await stream.drain()
            finally:
                chunks.close()  # erases the progress indicator before anything is printed

        try:
            run_async(run)
        except DataError as exc:
            result.error = exc.to_report()
        result.events = _events(context)
        if result.error is not None and result.error.index is not None:
            # Stopped at that event; in keep-going mode only a framing error stops, after the
            # frames before it.
            index = result.error.index
            result.events = max(result.events, index) if mode == "keep_going" else index + 1
        if result.events == 0 and result.error is None and source.head.strip(_JSON_WS):
            result.error = no_event(source, args.format)
    finally:
        source.close()
    return result


def _first_line(head: bytes) -> str:
    line = head.lstrip(_JSON_WS).split(b"\n", 1)[0][:40]
    return repr(line.decode("utf-8", "replace"))


def _looks_like(head: bytes) -> Format | None:
    try:
        return detect_format(head[:4096])
    except DataError:
        return None


def check_forced_format(source: StreamInput, forced: str, option: str = "--format") -> None:
    """A forced format the input plainly is not: one error naming the one it looks like."""
    head = source.peek()
    looks = _looks_like(head)
    if looks is not None and looks != forced:
        raise InputError(
            f"{source.name} looks like {FORMAT_NAMES[looks]}, not {FORMAT_NAMES[forced]} "
            f"(it begins {_first_line(head)}): leave {option} out to detect the format, or "
            f"use {option} {looks}"
        )


def no_event(source: StreamInput, format: str) -> Report:
    """The report for input that held something but gave no event."""
    looks = _looks_like(source.head)
    read_as = FORMAT_NAMES.get(format if format != "auto" else looks or "", "")
    message = f"no event in {source.read} bytes" + (f" read as {read_as}" if read_as else "")
    if looks == "sse":
        message += " (SSE with no `data:` field: an event is the `data:` lines before a blank line)"
    elif looks is None:
        message += f" (it begins {_first_line(source.head)}, which is neither SSE nor JSON lines)"
    return Report(code="no-event", message=message, severity="error")


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help=_FILE_HELP)
    parser.add_argument(
        "--format",
        choices=("auto", "sse", "jsonl", "json-array"),
        default="auto",
        help=_FORMAT_HELP,
    )
    add_color_argument(parser)


def add_color_argument(parser: argparse.ArgumentParser) -> None:
    """``--color`` / ``--no-color``, read by :func:`use_color`."""
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


def use_escapes(args: argparse.Namespace) -> bool:
    """Whether text from the stream is escaped: on a terminal, and whenever colour is on."""
    return use_color(args) or isatty(sys.stdout)


def write_json(data: bytes) -> None:
    """JSON to standard output as it is; on a terminal, with what a terminal may act on
    (C1 and bidirectional controls, which JSON leaves raw) written as ``\\u`` escapes."""
    if isatty(sys.stdout):
        data = json_for_terminal(data)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
