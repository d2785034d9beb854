"""``agui-meta usage --redis URL [--json]``: the usage counters the workers committed.

Entries and events processed, runs by status, and token counts per provider and model, summed
over every thread of the namespace (each input entry counted exactly once).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from ._command import Commands
from ._redis import add_redis_arguments, run_with_redis
from .thread import usage_text

__all__ = ["add_parser", "run", "usage_of"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "usage",
        help="show the usage counters of the Redis workers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Show what the workers of a namespace have counted: input entries and events,\n"
            "runs by status, and token usage per provider and model. --json prints\n"
            '{"entries", "events", "runs": {status: n}, "tokens": [usage entries]}.'
        ),
        epilog=(
            "examples:\n"
            "  agui-meta usage --redis redis://127.0.0.1:6379/0\n"
            "  agui-meta usage --redis redis://127.0.0.1:6379/0 --json | jq .tokens"
        ),
    )
    add_redis_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the counters as JSON")
    return parser


def usage_of(counters: dict[str, int]) -> dict[str, Any]:
    """The counters (``usage`` hash fields) as ``{"entries", "events", "runs", "tokens"}``."""
    runs: dict[str, int] = {}
    tokens: dict[tuple[str, str], dict[str, Any]] = {}
    for name, value in sorted(counters.items()):
        kind, _, rest = name.partition("|")
        if kind == "runs":
            runs[rest] = value
        elif kind == "tokens":
            provider, model, count = rest.split("|", 2) if rest.count("|") >= 2 else ("", "", rest)
            entry = tokens.setdefault((provider, model), {})
            if provider:
                entry["provider"] = provider
            if model:
                entry["model"] = model
            entry[count] = value
    return {
        "entries": counters.get("entries", 0),
        "events": counters.get("events", 0),
        "runs": runs,
        "tokens": list(tokens.values()),
    }


def run(args: argparse.Namespace) -> int:
    async def body(client: Any) -> int:
        from ..redis import Keys

        raw = await client.hgetall(Keys(args.namespace).usage)
        counters = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}
        usage = usage_of(counters)
        if args.json:
            sys.stdout.buffer.write(msgspec.json.encode(usage) + b"\n")
        else:
            runs = ", ".join(f"{n} {status}" for status, n in usage["runs"].items()) or "none"
            lines = [f"entries {usage['entries']}, events {usage['events']}; runs: {runs}"]
            lines += ["usage " + usage_text(entry) for entry in usage["tokens"]]
            sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        return 0

    return run_with_redis(args, body)
