"""``agui-meta apply CASES.jsonl``: conformance cases through the default pipeline.

Each case (the reference oracle's format, see :mod:`agui_meta._conformance`) gives one result
line, ``{name, messages, state}`` or ``{name, error}``: the same lines as the official client
gives through ``../shared/oracle/apply.cjs``.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from typing import IO, Any

import msgspec

from .._conformance import run_case
from .._exceptions import Report
from ._command import Commands

__all__ = ["add_parser", "run"]

_encode = msgspec.json.Encoder().encode


def _open_input(path: str) -> IO[str]:
    if path == "-":
        return sys.stdin
    return open(path, encoding="utf-8")


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "apply",
        help="run conformance cases through the default pipeline",
        description=(
            "Read cases, one JSON object a line: {name, events, messages?, state?}. For each, "
            "run enforce, expand_chunks, verify (unless --no-verify) and accumulate, and print "
            "{name, messages, state} (messages in AG-UI wire JSON) or {name, error}."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "example:\n"
            "  agui-meta apply tests/golden/cases.jsonl > ours.jsonl\n"
            "  node ../shared/oracle/apply.cjs tests/golden/cases.jsonl > reference.jsonl"
        ),
    )
    parser.add_argument("cases", help="a JSON-lines file of cases ('-' for standard input)")
    parser.add_argument(
        "--no-verify", action="store_true", help="skip the event-order checks (verify stage)"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print the reports (what the reference only warns about) to standard error",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    status = 0
    with _open_input(args.cases) as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except ValueError as exc:
                print(f"{args.cases}:{number}: not JSON: {exc}", file=sys.stderr)
                status = 1
                continue
            if not isinstance(case, dict):
                print(f"{args.cases}:{number}: a case is a JSON object", file=sys.stderr)
                status = 1
                continue
            on_report = None
            if args.verbose:
                name = case.get("name")

                def on_report(report: Report, name: Any = name) -> None:
                    print(f"{name}: {report}", file=sys.stderr)

            try:
                result = run_case(case, verify=not args.no_verify, on_report=on_report)
            except Exception as exc:  # noqa: BLE001 - a bug, not bad data: report it, go on
                traceback.print_exc(file=sys.stderr)
                result = {"name": case.get("name"), "error": f"internal error: {exc!r}"}
                status = 1
            out.write(_encode(result) + b"\n")
    out.flush()
    return status
