"""The command line: ``python -m agui_meta COMMAND …`` (also installed as ``agui-meta``).

A client of the library like any other: each command runs the public pipeline and prints what
it gives. One module per command, found by name — ``agui_meta/cli/replay.py`` is ``agui-meta
replay`` (see :mod:`agui_meta.cli._command` for the two functions a command module defines):

- ``replay FILE|-``: show a recorded stream as a conversation, with every item's metadata and
  the run ledger (:mod:`agui_meta.cli.replay`);
- ``validate FILE…|URL``: lint recorded streams (or an agent, run once): every problem with
  its location, as text, JSON, SARIF or JUnit (:mod:`agui_meta.cli.validate`);
- ``apply CASES.jsonl [--no-verify]``: run conformance cases (the reference oracle's format)
  through the default pipeline and print one result line per case (:mod:`agui_meta.cli.apply`);
- ``compact FILE|- [-o OUT]``: a recorded stream compacted as the official client's
  ``compactEvents`` does, as JSON lines (:mod:`agui_meta.cli.compact`);
- ``serve FILE``: a recorded stream served as an AG-UI endpoint (:mod:`agui_meta.cli.serve`);
- ``gateway --agent NAME=SPEC``: serve agents behind the gateway (:mod:`agui_meta.cli.gateway`);
- ``attach URL --thread T``: show a gateway thread and its running run (:mod:`agui_meta.cli.attach`);
- ``stop URL --thread T``: stop a gateway thread's running run (:mod:`agui_meta.cli.stop`).

Modules whose name starts with ``_`` are shared helpers, not commands.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import io
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO, cast

from .._speedups import describe as _describe_core
from .._version import __version__
from ._command import Command

__all__ = ["build_parser", "commands", "main"]


def commands() -> dict[str, Command]:
    """Every command: its name -> its module, in alphabetical order."""
    found: dict[str, Command] = {}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module.name.startswith("_"):
            continue
        command = importlib.import_module(f"{__name__}.{module.name}")
        found[module.name.replace("_", "-")] = cast(Command, command)
    return found


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command."""
    parser: argparse.ArgumentParser = _Parser(
        prog="agui-meta",
        description="Consume AG-UI 1.0 event streams, with every item's metadata merged.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  agui-meta replay examples/streams/travel.sse\n"
            "  agui-meta validate examples/streams/broken.jsonl\n"
            "  agui-meta apply tests/golden/cases.jsonl\n\n"
            "Every command exits 2 on a wrong argument (one line saying which and why), 130\n"
            "on Ctrl-C, and 1 quietly when its output pipe is closed early\n"
            "(agui-meta replay FILE | head); each one's help lists its other statuses.\n"
            "'agui-meta COMMAND --help' tells more about each command."
        ),
    )
    parser.add_argument(
        "--version", action="version", version=f"agui-meta {__version__}\n{_describe_core()}"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in commands().items():
        command.add_parser(subparsers).set_defaults(run=command.run, command=name)
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, with a wrong argument said in one line (which, why, where to read more).

    Its subcommands' parsers are of this class too (argparse makes them of their parent's).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Whatever the command: a wrong argument exits 2 with one line saying which and why; a
    broken pipe (``agui-meta replay x | head``) exits 1 quietly; an
    ``OSError`` exits 2 with one line (standard output or input closed too); Ctrl-C exits 130
    with one line.
    """
    _stand_in_for_closed_streams()
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version, or a wrong argument (already said)
            return exc.code if isinstance(exc.code, int) else 2
        status: int = args.run(args)
    except KeyboardInterrupt:
        print("agui-meta: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 1
    except OSError as exc:
        print(f"agui-meta: {exc}", file=sys.stderr)
        return 2
    return status


class _Closed(io.TextIOBase):
    """Standard output or input when the process was started with it closed (``>&-``).

    Python leaves ``sys.stdout`` ``None`` then; this stands in for it, so that the first write
    (or read) is an ``OSError`` saying so, which :func:`main` turns into one line and exit
    status 2, rather than an ``AttributeError`` traceback.
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name
        self.buffer = self

    def _fail(self, *args: object) -> Any:
        raise OSError(errno.EBADF, f"standard {self._name} is closed")

    write = read = read1 = readline = fileno = _fail

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        pass


def _stand_in_for_closed_streams() -> None:
    if sys.stdout is None:
        sys.stdout = cast(TextIO, _Closed("output"))
    if sys.stdin is None:
        sys.stdin = cast(TextIO, _Closed("input"))


def _quiet_stdout() -> None:
    """After a broken pipe, the interpreter's final flush of standard output must not fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
