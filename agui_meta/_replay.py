"""The ``replay`` and ``validate`` commands: one recorded stream through the default pipeline.

Both read a file (or standard input) of SSE or JSON lines, detected from its first bytes, split
it into frames here (so that every report can name the line and byte where its event began),
and run the frames through :func:`agui_meta.wrap` with :class:`agui_meta.DefaultStages`.

- ``replay`` shows the result as a person reads it: the conversation, the state, the run ledger
  and the reports (``--json``: the same as data).
- ``validate`` runs in keep-going mode with the metadata key lint and the end-of-stream check,
  and prints every problem with its location, then a summary.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from array import array
from collections.abc import Callable, Generator, Iterator
from typing import IO, Any, Literal, TextIO

import anyio
import msgspec

from ._defaults import DefaultStages
from ._exceptions import DataError, FramingError, Report
from ._framing import Format, Frame, make_decoder
from ._lint import LintMetadataKeys
from ._pipeline import wrap
from ._render import (
    Style,
    format_report,
    pretty_json,
    render_ledger,
    render_transcript,
)
from ._stage import Mode
from ._store import Store
from ._verify import Verify

__all__ = ["add_replay", "add_validate", "run_replay", "run_validate"]

_encode = msgspec.json.Encoder().encode

#: Bytes read at a time.
CHUNK_SIZE = 1 << 16
#: Inputs larger than this get a progress indicator (when standard error is a terminal).
PROGRESS_THRESHOLD = 1 << 20
#: Seconds between two redraws of the progress indicator.
PROGRESS_INTERVAL = 0.1
#: Reports kept for the end of ``replay`` (more are counted, not kept).
MAX_REPORTS = 10_000

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


class _Input:
    """A file (or standard input) read in chunks and split into frames.

    Remembers where every frame began (``line``, ``offset``), by event index, so that reports
    raised far from the bytes (the verifier's, the accumulator's) can name the place too.
    """

    def __init__(self, name: str, format: Format | Literal["auto"]) -> None:
        self.name = name
        self.format = format
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
        self._progress = _Progress(sys.stderr, label, size) if _isatty(sys.stderr) else None

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
        read, done = self._file.read, 0
        try:
            while True:
                try:
                    chunk = read(CHUNK_SIZE)
                except OSError as exc:
                    raise InputError(f"cannot read {self.name}: {exc.strerror or exc}") from None
                batch = decoder.feed(chunk) if chunk else decoder.close()
                for frame in batch:
                    lines.append(frame.line)
                    offsets.append(frame.offset)
                    yield frame
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


def _isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # closed
        return False


def _run_stream(
    args: argparse.Namespace,
    *,
    mode: Mode,
    on_report: Callable[[Report], None],
    lint: bool = False,
    report_unfinished: bool = False,
) -> tuple[_Input, DefaultStages[Store], Report | None]:
    """Run the file named by ``args.file`` through the default pipeline.

    Returns the input (its event count), the stages (the store, the ledger) and the error that
    stopped the pipeline (``None`` when it ran to the end).
    """
    source = _Input(args.file, args.format)
    stages = DefaultStages(verify=Verify(report_unfinished=report_unfinished))
    first = [LintMetadataKeys()] if lint else []

    def deliver(report: Report) -> None:
        on_report(source.locate(report))

    async def run() -> None:
        frames = source.frames(deliver if mode == "keep_going" else None)
        try:
            async with wrap(frames, *first, *stages, mode=mode, on_report=deliver) as stream:
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


def _add_common_arguments(parser: argparse.ArgumentParser) -> None:
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


def _color(args: argparse.Namespace) -> bool:
    if args.color is not None:
        return bool(args.color)
    return (
        _isatty(sys.stdout) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ---------------------------------------------------------------------------------------------
# replay


class _Reports:
    """Reports in arrival order (the first :data:`MAX_REPORTS`), counted by severity."""

    def __init__(self) -> None:
        self.items: list[Report] = []
        self.dropped = 0
        self.counts = {"error": 0, "warning": 0, "info": 0}

    def add(self, report: Report) -> None:
        self.counts[report.severity] = self.counts.get(report.severity, 0) + 1
        if len(self.items) < MAX_REPORTS:
            self.items.append(report)
        else:
            self.dropped += 1


def add_replay(commands: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "replay",
        help="show a recorded stream as a conversation, with metadata and the run ledger",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Run a recorded AG-UI stream (SSE or JSON lines, detected) through the default\n"
            "pipeline (decode, expand chunks, verify, accumulate, ledger) and show it: every\n"
            "message by role with its merged metadata, tool calls with their arguments and\n"
            "results, reasoning, activity, the final state, then the run ledger (outcome,\n"
            "token usage, run metadata) and anything reported on the way.\n\n"
            "Exit status: 0 on success; 1 when the stream has errors (in --keep-going mode:\n"
            "when any error was reported); 2 when the input cannot be read."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta replay examples/streams/travel.sse\n"
            "  curl -sN -X POST http://localhost:8000/agent | agui-meta replay -\n"
            "  agui-meta replay --json examples/streams/support.jsonl | jq '.ledger.runs[].usage'\n"
            "  agui-meta replay --keep-going examples/streams/broken.jsonl"
        ),
    )
    _add_common_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print {messages, state, ledger, reports} as JSON instead (messages in wire JSON)",
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--keep-going",
        action="store_true",
        help="report each bad event and skip it, instead of stopping at the first",
    )
    modes.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first report, warnings included",
    )
    return parser


def run_replay(args: argparse.Namespace) -> int:
    mode: Mode = "strict" if args.strict else "keep_going" if args.keep_going else "default"
    reports = _Reports()
    try:
        source, stages, error = _run_stream(args, mode=mode, on_report=reports.add)
    except InputError as exc:
        print(f"agui-meta: {exc}", file=sys.stderr)
        return 2
    if error is not None:
        print(f"agui-meta: {format_report(args.file, error, Style(False))}", file=sys.stderr)
        return 1
    if args.json:
        result = {
            "messages": stages.store.messages_wire(),
            "state": stages.store.state,
            "ledger": msgspec.Raw(stages.ledger.to_json()),
            "reports": [_report_json(r) for r in reports.items],
        }
        sys.stdout.buffer.write(_encode(result) + b"\n")
        sys.stdout.buffer.flush()
    else:
        style = Style(_color(args))
        lines = list(_replay_lines(args.file, source, stages, reports, style))
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    return 1 if reports.counts["error"] else 0


def _report_json(report: Report) -> dict[str, Any]:
    return {k: v for k, v in msgspec.to_builtins(report).items() if v is not None}


def _section(title: str, style: Style) -> str:
    return style.bold(f"--- {title} ---")


def _replay_lines(
    file: str, source: _Input, stages: DefaultStages[Store], reports: _Reports, style: Style
) -> Iterator[str]:
    store = stages.store
    messages = len(store)
    yield _section(f"conversation ({_plural(messages, 'message')})", style)
    if messages:
        yield from render_transcript(store, style)
    else:
        yield style.dim("(no messages)")
    if store.state not in ({}, None):
        yield ""
        yield _section("state", style)
        yield from pretty_json(store.state)
    runs = stages.ledger.runs
    yield ""
    yield _section(f"runs ({len(runs)})", style)
    if runs:
        yield from render_ledger(runs, style)
    else:
        yield style.dim("(no runs)")
    if reports.items:
        yield ""
        yield _section("reports", style)
        for report in reports.items:
            yield format_report(file, report, style)
        if reports.dropped:
            yield style.dim(f"... and {reports.dropped} more")
    calls = sum(len(item.tool_calls or ()) for item in store.messages())
    yield ""
    yield style.dim(
        f"{_plural(messages, 'message')}, {_plural(calls, 'tool call')}, "
        f"{_plural(len(runs), 'run')} from {_plural(source.events, 'event')}; "
        f"{_plural(reports.counts['error'], 'error')}, "
        f"{_plural(reports.counts['warning'], 'warning')}"
    )


# ---------------------------------------------------------------------------------------------
# validate

#: Lint findings shown (and counted) as warnings by ``validate``.
_PROMOTED = frozenset({"unprefixed-metadata-key"})


def add_validate(commands: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "validate",
        help="check a recorded stream and list every problem with its location",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Check a recorded AG-UI stream (SSE or JSON lines, detected) against the\n"
            "specification and the reference client: framing, JSON, event and field types,\n"
            "null metadata, event order (runs, messages, tool calls, steps, subagents), what\n"
            "the reference strips or warns about, metadata keys without a vendor prefix\n"
            "(a SHOULD of the specification: warnings), and items still open when the stream\n"
            "ends. Bad events are skipped, so every problem is listed, one a line:\n\n"
            "  FILE:LINE:BYTE: event N: SEVERITY: [CODE] message (at JSON path)\n\n"
            "then a summary. Exit status: 0 when there is no error (warnings allowed, unless\n"
            "--strict); 1 when there are errors; 2 when the input cannot be read."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta validate examples/streams/broken.jsonl\n"
            "  agui-meta validate --strict recording.sse && echo clean\n"
            "  cat recording.jsonl | agui-meta validate -"
        ),
    )
    _add_common_arguments(parser)
    parser.add_argument(
        "--strict", action="store_true", help="count warnings as errors (exit status 1)"
    )
    return parser


def run_validate(args: argparse.Namespace) -> int:
    style = Style(_color(args))
    counts = {"error": 0, "warning": 0, "info": 0}
    out = sys.stdout

    def show(report: Report) -> None:
        severity = "warning" if report.code in _PROMOTED else report.severity
        counts[severity] = counts.get(severity, 0) + 1
        out.write(format_report(args.file, report, style, severity) + "\n")

    try:
        source, _, error = _run_stream(
            args, mode="keep_going", on_report=show, lint=True, report_unfinished=True
        )
    except InputError as exc:
        print(f"agui-meta: {exc}", file=sys.stderr)
        return 2
    if error is not None:  # keep-going mode stops only for a framing error
        show(error)
    errors, warnings = counts["error"], counts["warning"]
    verdict = style.severity("error", "invalid") if errors else style.paint("32", "valid")
    out.write(
        f"{args.file}: {verdict}: {_plural(source.events, 'event')} checked, "
        f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}\n"
    )
    out.flush()
    return 1 if errors or (args.strict and warnings) else 0
