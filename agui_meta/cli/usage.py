"""``agui-meta usage --redis URL [--json]``: the usage counters the workers committed.

Entries and events processed, runs by status, and token counts per provider and model, summed
over every thread of the namespace (each input entry counted exactly once).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from .._durable import usage_of
from ._command import Commands
from ._redis import add_redis_arguments, run_with_redis
from ._render import Style, usage_text
from ._stream import add_color_argument, use_color, use_escapes, write_json

__all__ = ["add_parser", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "usage",
        help="show the usage counters of the Redis workers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Show what the workers of a namespace have counted: input entries and events,\n"
            "runs by status, and token usage per provider and model. --json prints\n"
            '{"entries", "events", "runs": {status: n}, "tokens": [usage entries]}. Token\n'
            "usage is shown as replay, run and thread show it.\n\n"
            "Exit status: 0 when shown; 1 when the namespace holds counters agui-meta does not\n"
            "write, or on a Redis error; 2 when Redis cannot be reached or an argument is wrong."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta usage --redis redis://127.0.0.1:6379/0\n"
            "  agui-meta usage --redis redis://127.0.0.1:6379/0 --json | jq .tokens"
        ),
    )
    add_redis_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the counters as JSON")
    add_color_argument(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    async def body(client: Any) -> int:
        from ..redis import Keys

        raw = await client.hgetall(Keys(args.namespace).usage)
        counters = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}
        try:
            usage = usage_of(counters)
        except ValueError as error:  # a hash some other program wrote into the namespace
            print(f"agui-meta: {error}", file=sys.stderr)
            return 1
        if args.json:
            write_json(msgspec.json.encode(usage) + b"\n")
        else:
            t = Style(use_color(args), use_escapes(args)).text  # names from the stream, escaped
            runs = ", ".join(f"{n} {t(status)}" for status, n in usage["runs"].items()) or "none"
            lines = [f"entries {usage['entries']}, events {usage['events']}; runs: {runs}"]
            lines += ["usage " + t(usage_text(entry)) for entry in usage["tokens"]]
            sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        return 0

    return run_with_redis(args, body)
