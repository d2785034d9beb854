"""``agui-meta apply CASES.jsonl``: conformance cases through the default pipeline.

Each case (the reference oracle's format, see :mod:`agui_meta._runners`) gives one result
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

from .._exceptions import Report
from .._runners import run_case
from ._command import Commands

__all__ = ["add_parser", "run"]

_encode = msgspec.json.Encoder().encode


def _open_input(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    return open(path, "rb")


def _text(path: str, number: int, line: bytes) -> str | None:
    """The line as text, or ``None`` after printing why it is not (binary, not UTF-8)."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = line[exc.start]
        print(
            f"{path}:{number}: not UTF-8 text (byte 0x{byte:02x} at column {exc.start + 1}): "
            "cases are JSON lines",
            file=sys.stderr,
        )
        return None


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "apply",
        help="run conformance cases through the default pipeline",
        description=(
            "Read cases, one JSON object a line: {name, events, messages?, state?}. For each, "
            "run enforce, expand_chunks, verify (unless --no-verify) and accumulate, and print "
            "{name, messages, state} (messages in AG-UI wire JSON) or {name, error}.\n\n"
            "Exit status: 0 when every line was a case; 1 when a line is not a case (not JSON,\n"
            "not UTF-8, binary) or a case failed inside agui-meta; 2 when CASES cannot be read."
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
    source = _open_input(args.cases)
    try:
        status = _run_cases(args, source, out)
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    out.flush()
    return status


def _run_cases(args: argparse.Namespace, lines: IO[bytes], out: IO[bytes]) -> int:
    status = 0
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if b"\0" in raw:
            print(
                f"{args.cases}:{number}: binary data (a NUL byte at column "
                f"{raw.index(0) + 1}), not JSON lines of cases; stopping",
                file=sys.stderr,
            )
            return 1
        line = _text(args.cases, number, raw)
        if line is None:
            status = 1
            continue
        try:
            case = json.loads(line)
        except RecursionError:
            print(f"{args.cases}:{number}: not JSON: nested too deeply", file=sys.stderr)
            status = 1
            continue
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
    return status
