"""``agui-meta compact FILE|- [-o OUT]``: a recorded stream compacted, as JSON lines.

The stream is read and framed as for ``replay`` (see :mod:`agui_meta.cli._stream`), decoded,
and compacted by :func:`agui_meta.compact_events` (the official client's ``compactEvents``
1.0.0): one event a line, camelCase, absent fields omitted. Reports (a state patch that cannot
be applied, what decoding strips) go to standard error with their location; a bad event stops
the command with one line naming it (exit status 1), unless ``--keep-going``.
"""

from __future__ import annotations

import argparse
import sys

from .._decode import encode_event
from .._exceptions import DataError, Report
from .._runners import compact_events
from .._stage import Mode
from ._command import Commands
from ._render import Style, format_report
from ._stream import (
    InputError,
    StreamInput,
    add_stream_arguments,
    check_forced_format,
    isatty,
    no_event,
    write_json,
)

__all__ = ["add_parser", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "compact",
        help="compact a recorded stream as the official client's compactEvents does",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Read a recorded AG-UI stream (SSE or JSON lines, detected) and write it compacted,\n"
            "one JSON event a line: the deltas of each text message and tool call joined into\n"
            "one event with their merged metadata, the events inside an open message moved\n"
            "after it, the state events between run events folded into one STATE_SNAPSHOT.\n"
            "Replaying the result builds the same messages with the same metadata.\n"
            "Exit status: 0 when compacted; 1 on a bad event (with --keep-going: when any error\n"
            "was reported; what could be compacted is written); 2 when the input cannot be read\n"
            "or OUT cannot be written, or an argument is wrong."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta compact examples/streams/travel.sse -o travel.compact.jsonl\n"
            "  agui-meta compact recording.jsonl | agui-meta replay -"
        ),
    )
    add_stream_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        default="-",
        help="where to write (default: standard output)",
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="skip bad events (each reported) instead of stopping at the first",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    # Reports go to standard error: coloured when asked, the stream's text escaped on a terminal.
    style = Style(bool(args.color), bool(args.color) or isatty(sys.stderr))
    errors = 0

    try:
        source = StreamInput(args.file, args.format)
    except InputError as exc:
        print(f"agui-meta: {style.text(str(exc))}", file=sys.stderr)
        return 2

    def show(report: Report) -> None:
        nonlocal errors
        errors += report.severity == "error"
        sys.stderr.write(format_report(args.file, source.locate(report), style) + "\n")

    source.on_note = show
    mode: Mode = "keep_going" if args.keep_going else "default"
    try:
        if args.format != "auto":  # a forced format the input plainly is not: one line
            check_forced_format(source, args.format)
        frames = source.frames(show if args.keep_going else None)
        events = compact_events(frames, mode=mode, on_report=show)
        if not events and source.head.strip():  # something, but no event: say what it was
            show(no_event(source, args.format))
    except InputError as exc:
        print(f"agui-meta: {style.text(str(exc))}", file=sys.stderr)
        return 2
    except DataError as exc:
        show(exc.to_report())
        return 1
    finally:
        source.close()
    data = b"".join(encode_event(event) + b"\n" for event in events)
    if args.output == "-":
        write_json(data)
    else:
        try:
            with open(args.output, "wb") as out:
                out.write(data)
        except OSError as exc:
            print(f"agui-meta: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    return 1 if errors else 0
