"""``agui-meta validate FILE… [--format text|json|sarif|junit]``: a linter for AG-UI streams.

Each recorded stream goes through the default pipeline (see :mod:`agui_meta.cli._stream`) in
keep-going mode, with the end-of-stream check, then through the hygiene rules of
:class:`agui_meta._lint.Lint`. The reference client's rules are errors; the hygiene rules are
warnings or information, each with a stable code (``--rule CODE=error|warning|info|off``
changes a code's severity). Every finding names its event, line and byte offset.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TextIO

from .._exceptions import Report
from .._lint import RULES, Lint
from ._command import Commands
from ._findings import FileFindings, json_document, junit_document, sarif_document
from ._render import Style, escape_controls, format_report
from ._stream import (
    InputError,
    add_color_argument,
    plural,
    run_stream,
    use_color,
    use_escapes,
)

__all__ = ["add_parser", "run"]

#: Problems kept and printed at most per file, by default (``--max-errors``).
MAX_SHOWN = 100

_SEVERITIES = ("error", "warning", "info", "off")
_CODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _rule_table() -> str:
    width = max(len(code) for code in RULES)
    return "\n".join(
        f"  {code:<{width}}  {rule.severity:<7}  {rule.summary}" for code, rule in RULES.items()
    )


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "validate",
        help="lint recorded streams and list every problem with its location",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Check recorded AG-UI streams (SSE or JSON lines, detected) against the\n"
            "specification and the reference client: framing, JSON, event and field types,\n"
            "null metadata, event order (runs, messages, tool calls, steps, subagents), what\n"
            "the reference strips or warns about: errors and warnings as the reference client\n"
            "gives them. Then the hygiene rules, warnings or information (--rule changes\n"
            "them):\n\n"
            + _rule_table()
            + "\n\nBad events are skipped, so every problem is listed, one a line:\n\n"
            "  FILE:LINE:BYTE: event N: SEVERITY: [CODE] message (at JSON path)\n\n"
            "then a summary per file (--format json, sarif or junit for machines). Exit\n"
            "status: 0 when there is no error (warnings allowed, unless --strict); 1 when\n"
            "there are errors; 2 when an input cannot be read."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta validate examples/streams/broken.jsonl\n"
            "  agui-meta validate --strict recording.sse other.jsonl && echo clean\n"
            "  agui-meta validate --format sarif --rule custom.name-not-namespaced=off *.sse\n"
            "  cat recording.jsonl | agui-meta validate -"
        ),
    )
    parser.add_argument(
        "files",
        metavar="FILE",
        nargs="+",
        help="an SSE or JSON-lines file of AG-UI events ('-' for standard input, once)",
    )
    parser.add_argument(
        "--input-format",
        choices=("auto", "sse", "jsonl", "json-array"),
        default="auto",
        help="the inputs' format (default: detected from each one's first bytes)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "sarif", "junit"),
        default="text",
        help="the report's format (default: text, one finding a line)",
    )
    parser.add_argument(
        "--rule",
        metavar="CODE=SEVERITY",
        action="append",
        type=_rule,
        default=[],
        help="report CODE as error, warning or info, or not at all (off); repeatable",
    )
    add_color_argument(parser)
    parser.add_argument(
        "--strict", action="store_true", help="count warnings as errors (exit status 1)"
    )
    parser.add_argument(
        "--max-errors",
        metavar="N",
        type=_count,
        default=MAX_SHOWN,
        help=f"show at most N problems per file (default {MAX_SHOWN}; 0: all); every one is "
        "counted",
    )
    return parser


def _rule(text: str) -> tuple[str, str]:
    code, sep, severity = text.partition("=")
    code, severity = code.strip(), severity.strip().lower()
    if not sep or not _CODE.fullmatch(code) or severity not in _SEVERITIES:
        raise argparse.ArgumentTypeError(
            f"not CODE=SEVERITY: {text!r} (SEVERITY: {', '.join(_SEVERITIES)})"
        )
    return code, severity


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a count: {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    if args.files.count("-") > 1:
        print("agui-meta: standard input ('-') can be read once only", file=sys.stderr)
        return 2
    overrides: dict[str, str] = dict(args.rule)
    text = args.format == "text"
    style = Style(use_color(args), use_escapes(args)) if text else Style(False, False)
    found = [_check(name, args, overrides, style if text else None) for name in args.files]
    out = sys.stdout
    if args.format == "json":
        sys.stdout.buffer.write(json_document(found, args.strict))
    elif args.format == "sarif":
        sys.stdout.buffer.write(sarif_document(found, _version()))
    elif args.format == "junit":
        sys.stdout.buffer.write(junit_document(found, args.strict))
    elif len(found) > 1:
        errors = sum(f.counts["error"] for f in found)
        warnings = sum(f.counts["warning"] for f in found)
        out.write(
            f"{plural(len(found), 'file')}: {plural(errors, 'error')}, "
            f"{plural(warnings, 'warning')}\n"
        )
    out.flush()
    if any(f.unreadable is not None for f in found):
        return 2
    return 1 if any(f.failed(args.strict) for f in found) else 0


def _version() -> str:
    from . import _version as version

    return version()


def _check(
    name: str, args: argparse.Namespace, overrides: dict[str, str], style: Style | None
) -> FileFindings:
    """Lint one input; with ``style`` (text output) print its findings as they come."""
    found = FileFindings(name)
    counts = found.counts
    limit = args.max_errors
    out: TextIO = sys.stdout

    shown = 0

    def show(report: Report) -> None:
        nonlocal shown
        severity = overrides.get(report.code, report.severity)
        if severity == "off":
            return
        counts[severity] += 1
        if limit and shown >= limit:
            found.hidden += 1
            return
        shown += 1
        if style is not None:  # printed as it comes, not kept
            out.write(format_report(name, report, style, severity) + "\n")
        else:
            found.findings.append((report, severity))

    stream_args = argparse.Namespace(
        file=name, format=args.input_format, format_option="--input-format"
    )
    try:
        result = run_stream(
            stream_args, mode="keep_going", on_report=show, report_unfinished=True, last=[Lint()]
        )
    except InputError as exc:
        found.unreadable = str(exc)
        if style is not None:
            print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
        return found
    if result.error is not None:  # a framing error, or input with no event at all
        show(result.error)
    found.events = result.events
    if style is None:
        return found
    hidden = found.hidden
    if hidden:
        out.write(
            style.dim(
                f"{name}: {plural(hidden, 'more problem')} not shown "
                f"(--max-errors {limit}; 0 shows all)"
            )
            + "\n"
        )
    errors, warnings = counts["error"], counts["warning"]
    verdict = style.severity("error", "invalid") if errors else style.paint("32", "valid")
    out.write(
        f"{style.text(name)}: {verdict}: {plural(result.events, 'event')} checked, "
        f"{plural(errors, 'error')}, {plural(warnings, 'warning')}\n"
    )
    return found
