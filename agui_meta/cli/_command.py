"""What a command of the command line is: a module with ``add_parser`` and ``run``.

Every public module of :mod:`agui_meta.cli` (a name not starting with ``_``) is one command,
named after the module (``_`` read as ``-``). It defines two functions::

    def add_parser(commands: Commands) -> argparse.ArgumentParser:
        # commands.add_parser("NAME", help=..., description=..., epilog=...), its arguments
        ...

    def run(args: argparse.Namespace) -> int:
        # the command, with the parsed arguments; returns the exit status
        ...

The module is imported whenever the command line starts, so it imports optional dependencies
(httpx, redis, …) inside ``run``, never at its top. What every command gets from
:func:`agui_meta.cli.main`: a broken pipe exits 1 quietly, an ``OSError`` exits 2 with one line,
Ctrl-C exits 130 with one line.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Protocol, TypeAlias

__all__ = ["Command", "Commands"]

if TYPE_CHECKING:
    Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
else:
    Commands: TypeAlias = argparse._SubParsersAction


class Command(Protocol):
    """A command module, as :func:`agui_meta.cli.build_parser` uses it."""

    def add_parser(self, commands: Commands) -> argparse.ArgumentParser: ...

    def run(self, args: argparse.Namespace) -> int: ...
