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
from collections.abc import Callable
from typing import Any, TextIO

import msgspec

from .._exceptions import Report
from .._lint import RULES, Lint
from .._validate import TRANSPORT_RULES, Findings, at_start
from .._version import __version__
from ._args import add_header_argument, http_url, limit, seconds
from ._command import Commands
from ._findings import FileFindings, json_document, junit_document, sarif_document
from ._render import Style, escape_controls, format_report
from ._stream import (
    InputError,
    add_color_argument,
    plural,
    run_async,
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
    rules = {**RULES, **TRANSPORT_RULES}
    width = max(len(code) for code in rules)
    return "\n".join(
        f"  {code:<{width}}  {rule.severity:<7}  {rule.summary}" for code, rule in rules.items()
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
            "gives them. Then the hygiene rules, warnings or information, and for an agent\n"
            "(a URL) the transport rules (--rule changes them):\n\n"
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
    agent = parser.add_argument_group(
        "an agent (FILE is an http:// or https:// URL: the agent is run once, and its "
        "transport checked too)"
    )
    agent.add_argument(
        "--input",
        metavar="RUN_INPUT.json",
        help="the run input to POST (a JSON object; default: one user message 'Hello')",
    )
    add_header_argument(agent)
    agent.add_argument(
        "--timeout",
        type=seconds,
        default=60.0,
        metavar="SECONDS",
        help="seconds to connect, and to wait for each read (default 60)",
    )
    agent.add_argument(
        "--keepalive-window",
        type=seconds,
        default=15.0,
        metavar="SECONDS",
        help="the longest silence without an event or a keepalive line (default 15)",
    )
    agent.add_argument(
        "--buffered-after",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="a body that arrives in one piece later than this looks buffered (default 1)",
    )
    add_color_argument(parser)
    parser.add_argument(
        "--strict", action="store_true", help="count warnings as errors (exit status 1)"
    )
    parser.add_argument(
        "--max-errors",
        metavar="N",
        type=limit,
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


def run(args: argparse.Namespace) -> int:
    if args.files.count("-") > 1:
        print("agui-meta: standard input ('-') can be read once only", file=sys.stderr)
        return 2
    overrides: dict[str, str] = dict(args.rule)
    try:
        args.run_input = _run_input(args.input)
    except InputError as exc:
        print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
        return 2
    text = args.format == "text"
    style = Style(use_color(args), use_escapes(args)) if text else Style(False, False)
    found = [_check(name, args, overrides, style if text else None) for name in args.files]
    out = sys.stdout
    if args.format == "json":
        sys.stdout.buffer.write(json_document(found, args.strict))
    elif args.format == "sarif":
        sys.stdout.buffer.write(sarif_document(found, __version__))
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


def _run_input(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            data = msgspec.json.decode(file.read())
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except msgspec.DecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{path} is not JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} must hold a JSON object (a run input)")
    return data


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
        report = at_start(report)  # a file or a body: an empty one is placed at its start
        counts[severity] += 1
        if limit and shown >= limit:
            found.hidden += 1
            return
        shown += 1
        if style is not None:  # printed as it comes, not kept
            out.write(format_report(name, report, style, severity) + "\n")
        else:
            found.findings.append((report, severity))

    if name.startswith(("http://", "https://")):
        try:
            http_url(name)  # a port out of range, a malformed host: one line, not a traceback
        except argparse.ArgumentTypeError as exc:
            found.unreadable = str(exc)
            if style is not None:
                print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
            return found
        return _check_agent(name, args, overrides, style, found, show)
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
    if style is not None:
        _summary(name, found, style, limit)
    return found


def _summary(name: str, found: FileFindings, style: Style, limit: int) -> None:
    """The lines after a file's findings: how many were not shown, and the verdict."""
    out = sys.stdout
    if found.hidden:
        out.write(
            style.dim(
                f"{name}: {plural(found.hidden, 'more problem')} not shown "
                f"(--max-errors {limit}; 0 shows all)"
            )
            + "\n"
        )
    errors, warnings = found.counts["error"], found.counts["warning"]
    verdict = style.severity("error", "invalid") if errors else style.paint("32", "valid")
    out.write(
        f"{style.text(name)}: {verdict}: {plural(found.events, 'event')} checked, "
        f"{plural(errors, 'error')}, {plural(warnings, 'warning')}\n"
    )


def _check_agent(
    url: str,
    args: argparse.Namespace,
    overrides: dict[str, str],
    style: Style | None,
    found: FileFindings,
    show: Callable[[Report], None],
) -> FileFindings:
    """Run the agent at ``url`` once and lint its stream and transport."""
    import httpx

    from .._validate import validate_stream

    result: list[Findings] = []

    async def main() -> None:
        result.append(
            await validate_stream(
                url,
                run_input=args.run_input,
                headers=dict(args.header),
                http_timeout=args.timeout,
                keepalive_window=args.keepalive_window,
                buffered_after=args.buffered_after,
                max_findings=None,
                format=args.input_format,
            )
        )

    try:
        run_async(main)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        found.unreadable = f"cannot reach {url}: {type(exc).__name__}: {exc}"
        if style is not None:
            print(f"agui-meta: {escape_controls(found.unreadable)}", file=sys.stderr)
        return found
    (got,) = result
    for report, _ in got.findings:  # severities as found: show() applies --rule
        show(report)
    found.events = got.events
    if style is not None:
        _summary(url, found, style, args.max_errors)
    return found
