"""``agui-meta validate FILE|-``: list every problem of a recorded stream with its location.

The stream goes through the default pipeline (see :mod:`agui_meta.cli._stream`) in keep-going
mode, with the metadata key lint and the end-of-stream check; every problem is printed with its
location, then a summary.
"""

from __future__ import annotations

import argparse
import sys

from .._exceptions import Report
from ._command import Commands
from ._render import Style, format_report
from ._stream import InputError, add_stream_arguments, plural, run_stream, use_color

__all__ = ["add_parser", "run"]

#: Lint findings shown (and counted) as warnings by ``validate``.
_PROMOTED = frozenset({"unprefixed-metadata-key"})


def add_parser(commands: Commands) -> argparse.ArgumentParser:
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
    add_stream_arguments(parser)
    parser.add_argument(
        "--strict", action="store_true", help="count warnings as errors (exit status 1)"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    style = Style(use_color(args))
    counts = {"error": 0, "warning": 0, "info": 0}
    out = sys.stdout

    def show(report: Report) -> None:
        severity = "warning" if report.code in _PROMOTED else report.severity
        counts[severity] = counts.get(severity, 0) + 1
        out.write(format_report(args.file, report, style, severity) + "\n")

    try:
        source, _, error = run_stream(
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
        f"{args.file}: {verdict}: {plural(source.events, 'event')} checked, "
        f"{plural(errors, 'error')}, {plural(warnings, 'warning')}\n"
    )
    out.flush()
    return 1 if errors or (args.strict and warnings) else 0
