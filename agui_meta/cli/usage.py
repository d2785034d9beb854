"""``agui-meta usage --redis URL [--json] [--prices FILE]``: the usage counters the workers committed.

Entries and events processed, runs by status, and token counts per provider and model, summed
over every thread of the namespace (each input entry counted exactly once); with a price table,
what each provider/model and the whole cost.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from .._durable import usage_of
from .._events import TokenUsage
from .._exceptions import DataError
from ._command import Commands
from ._prices import PriceTableError, add_prices_argument, cost_text, load_prices
from ._redis import add_redis_arguments, run_with_redis
from ._render import Style, escape_controls, usage_text
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
    add_prices_argument(parser)
    add_color_argument(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        prices = load_prices(args)
    except PriceTableError as exc:
        print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
        return 2

    async def body(client: Any) -> int:
        from ..redis import Keys

        key = Keys(args.namespace).usage
        raw = await client.hgetall(key)
        try:
            counters = {_text(k): _count(k, v) for k, v in raw.items()}
            usage = usage_of(counters)
        except ValueError as error:  # a hash some other program wrote into the namespace
            print(f"agui-meta: {key}: {escape_controls(str(error))}", file=sys.stderr)
            return 1
        costs: list[float | None] = []
        if prices is not None:
            costs = [prices.cost(msgspec.convert(e, type=TokenUsage)) for e in usage["tokens"]]
            usage["cost"] = {
                "currency": prices.currency,
                "total": prices.total(msgspec.convert(usage["tokens"], type=list[TokenUsage])),
                "tokens": costs,
            }
        if args.json:
            write_json(msgspec.json.encode(usage) + b"\n")
        else:
            t = Style(use_color(args), use_escapes(args)).text  # names from the stream, escaped
            runs = ", ".join(f"{n} {t(status)}" for status, n in usage["runs"].items()) or "none"
            lines = [f"entries {usage['entries']}, events {usage['events']}; runs: {runs}"]
            for i, entry in enumerate(usage["tokens"]):
                line = "usage " + t(usage_text(entry))
                if prices is not None and costs[i] is not None:
                    line += f"; {cost_text(costs[i] or 0.0, t(prices.currency))}"
                lines.append(line)
            if prices is not None:
                total = usage["cost"]["total"]
                lines.append(
                    cost_text(total, t(prices.currency)) if total is not None else "cost -"
                )
            sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        return 0

    return run_with_redis(args, body)


def _text(name: bytes | str) -> str:
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


def _count(name: bytes | str, value: bytes | str) -> int:
    try:
        return int(value)
    except ValueError:
        raise DataError(f"the counter {_text(name)!r} holds {value!r}, not a count") from None
