"""``agui-meta replay FILE|-``: show a recorded stream as a person reads it.

The stream goes through the default pipeline (see :mod:`agui_meta.cli._stream`); the result is
shown as the conversation, the state, the run ledger and the reports (``--json``: the same as
data).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

import msgspec

from .._exceptions import Report
from .._stage import Mode
from . import _otlp as otlp
from ._args import limit
from ._command import Commands
from ._live import LiveView
from ._prices import PriceTableError, add_prices_argument, load_prices
from ._render import (
    ReportGroups,
    Style,
    escape_controls,
    format_report,
    pretty_json,
    render_ledger,
    render_transcript,
)
from ._stream import (
    InputError,
    StreamResult,
    add_stream_arguments,
    isatty,
    plural,
    run_stream,
    use_color,
    use_escapes,
    write_json,
)

__all__ = ["add_parser", "run"]

_encode = msgspec.json.Encoder().encode

#: Reports kept for ``--json`` (more are counted, not kept).
MAX_REPORTS = 10_000
#: Reports listed at most, by default (``--max-errors``), as ``validate`` does.
MAX_SHOWN = 100


class _Reports(ReportGroups):
    """Every report counted; identical ones grouped for the listing; the first
    :data:`MAX_REPORTS` kept as they came, for ``--json``."""

    def __init__(self) -> None:
        super().__init__(keep=MAX_REPORTS)
        self.items: list[Report] = []

    def add(self, report: Report) -> None:
        if report.code == "stream-ended-empty":  # blank input: nothing was sent, no problem
            return
        super().add(report)
        if len(self.items) < MAX_REPORTS:
            self.items.append(report)


def add_parser(commands: Commands) -> argparse.ArgumentParser:
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
            "Identical reports are listed once, with how many times they came; at most\n"
            "--max-errors of them (every one is counted). A stream that ends inside a run is\n"
            "a warning, and the summary says so.\n\n"
            "Exit status: 0 on success; 1 when the stream has errors (in --keep-going mode:\n"
            "when any error was reported; with --strict: any report); 2 when the input cannot\n"
            "be read or an argument is wrong."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta replay examples/streams/travel.sse\n"
            "  curl -sN -X POST http://localhost:8000/agent | agui-meta replay -\n"
            "  agui-meta replay --json examples/streams/support.jsonl | jq '.ledger.runs[].usage'\n"
            "  agui-meta replay --keep-going examples/streams/broken.jsonl\n"
            "  agui-meta replay --otlp http://127.0.0.1:4318 examples/streams/travel.sse\n"
            "  agui-meta replay --otlp http://127.0.0.1:6006/v1/traces --otlp-signals traces "
            "examples/streams/support.jsonl"
        ),
    )
    add_stream_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print {messages, state, ledger, reports} as JSON instead (messages in wire JSON)",
    )
    otlp.add_arguments(parser)
    add_prices_argument(parser)
    parser.add_argument(
        "--max-errors",
        metavar="N",
        type=limit,
        default=MAX_SHOWN,
        help=f"list at most N reports (default {MAX_SHOWN}; 0: all); every one is counted",
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


def run(args: argparse.Namespace) -> int:
    mode: Mode = "strict" if args.strict else "keep_going" if args.keep_going else "default"
    reports = _Reports()
    try:
        prices = load_prices(args)
        export = otlp.from_args(args, prices)
    except (ImportError, PriceTableError) as exc:  # the extras it needs, a bad table
        print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
        return 2
    style = Style(use_color(args), use_escapes(args))
    # Standard input is shown live, as the bytes arrive (curl ... | agui-meta replay -).
    live = LiveView(sys.stdout, style) if args.file == "-" and not args.json else None
    try:
        result = run_stream(
            args,
            mode=mode,
            on_report=reports.add,
            report_unfinished=True,
            last=[
                *([export.stage()] if export is not None else ()),
                *([live] if live is not None else ()),
            ],
        )
    except InputError as exc:
        print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
        return 2
    finally:
        if live is not None:
            live.close()
        if export is not None:
            export.close()
    if export is not None and export.failures:
        for failure in export.failures:
            print(f"agui-meta: could not export {failure}", file=sys.stderr)
        return 2
    stages, error = result.stages, result.error
    if prices is not None:  # each run's cost, on its record (and so in --json too)
        for record in stages.ledger.runs:
            record.cost = prices.total(record.aggregated_usage)
    # What was assembled up to an error is shown too, then the error.
    if args.json:
        output: dict[str, Any] = {
            "messages": stages.store.messages_wire(),
            "state": stages.store.state,
            "ledger": msgspec.Raw(stages.ledger.to_json()),
            "reports": [_report_json(r) for r in reports.items],
        }
        if error is not None:
            output["error"] = _report_json(error)
        write_json(_encode(output) + b"\n")
    elif error is None or len(stages.store) or stages.ledger.runs or len(reports):
        currency = prices.currency if prices is not None else None
        lines = list(
            _replay_lines(
                args.file, result, reports, style, live is None, currency, args.max_errors
            )
        )
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    if error is not None:
        on_stderr = Style(False, isatty(sys.stderr))
        print(f"agui-meta: {format_report(args.file, error, on_stderr)}", file=sys.stderr)
        return 1
    return 1 if reports.counts["error"] else 0


def _report_json(report: Report) -> dict[str, Any]:
    return {k: v for k, v in msgspec.to_builtins(report).items() if v is not None}


def _section(title: str, style: Style) -> str:
    return style.bold(f"--- {title} ---")


def _replay_lines(
    file: str,
    result: StreamResult,
    reports: _Reports,
    style: Style,
    transcript: bool = True,
    currency: str | None = None,
    limit: int = MAX_SHOWN,
) -> Iterator[str]:
    stages = result.stages
    store = stages.store
    messages = len(store)
    if transcript:
        yield _section(f"conversation ({plural(messages, 'message')})", style)
        if messages:
            yield from render_transcript(store, style)
        else:
            yield style.dim("(no messages)")
    if store.state not in ({}, None):
        yield ""
        yield _section("state", style)
        yield from style.lines(pretty_json(store.state))
    runs = stages.ledger.runs
    yield ""
    yield _section(f"runs ({len(runs)})", style)
    if runs:
        yield from render_ledger(runs, style, currency)
    else:
        yield style.dim("(no runs)")
    if len(reports):
        yield ""
        yield _section("reports", style)
        yield from reports.lines(file, style, limit)
    calls = sum(len(item.tool_calls or ()) for item in store.messages())
    yield ""
    yield style.dim(
        f"{plural(messages, 'message')}, {plural(calls, 'tool call')}, "
        f"{plural(len(runs), 'run')} from {plural(result.events, 'event')}; "
        f"{plural(reports.counts['error'], 'error')}, "
        f"{plural(reports.counts['warning'], 'warning')}"
        + (_cut_short(runs, style) if result.error is None else "")
        + (
            f"; stopped at event {result.error.index} by the error below"
            if result.error is not None and result.error.index is not None
            else "; stopped by the error below"
            if result.error is not None
            else ""
        )
    )


def _cut_short(runs: Any, style: Style) -> str:
    """``; cut short: run r-1 never ended`` when the stream ended inside a run."""
    open_runs = [r for r in runs if r.status == "incomplete"]
    if not open_runs:
        return ""
    names = ", ".join(
        style.text(r.run_id) if r.run_id is not None else "(no id)" for r in open_runs
    )
    return f"; cut short: {plural(len(open_runs), 'run')} never ended ({names})"
