"""The command line: ``python -m agui_meta <command> …`` (also installed as ``agui-meta``).

Each command is a pair of functions registered in :data:`COMMANDS`: one adds its sub-parser
and arguments, the other runs it with the parsed namespace and returns the exit status. Add a
command by writing the two and adding an entry.

- ``replay FILE|-``: show a recorded stream as a conversation, with every item's metadata and
  the run ledger (see :mod:`agui_meta._replay`);
- ``validate FILE|-``: list every problem of a recorded stream with its location;
- ``apply CASES.jsonl [--no-verify]``: run conformance cases (the reference oracle's format)
  through the default pipeline and print one result line per case (see
  :mod:`agui_meta._conformance`).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import IO, Any

import msgspec

from ._replay import add_replay, add_validate, run_replay, run_validate

__all__ = ["COMMANDS", "build_parser", "main"]

_encode = msgspec.json.Encoder().encode


def _open_input(path: str) -> IO[str]:
    if path == "-":
        return sys.stdin
    return open(path, encoding="utf-8")


def _add_apply(commands: Any) -> argparse.ArgumentParser:
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


def _run_apply(args: argparse.Namespace) -> int:
    from ._conformance import run_case
    from ._exceptions import Report

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


#: command name -> (add the sub-parser, run it)
COMMANDS: dict[
    str,
    tuple[Callable[[Any], argparse.ArgumentParser], Callable[[argparse.Namespace], int]],
] = {
    "apply": (_add_apply, _run_apply),
    "replay": (add_replay, run_replay),
    "validate": (add_validate, run_validate),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered command."""
    parser = argparse.ArgumentParser(
        prog="agui-meta",
        description="Consume AG-UI 1.0 event streams, with every item's metadata merged.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  agui-meta replay examples/streams/travel.sse\n"
            "  agui-meta validate examples/streams/broken.jsonl\n"
            "  agui-meta apply tests/golden/cases.jsonl\n\n"
            "'agui-meta COMMAND --help' tells more about each command."
        ),
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (add, run) in COMMANDS.items():
        add(commands).set_defaults(run=run, command=name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except BrokenPipeError:
        return 1
    except OSError as exc:
        print(f"agui-meta: {exc}", file=sys.stderr)
        return 2
    return status
