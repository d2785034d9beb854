"""``agui-meta thread --redis URL ID [--json]``: a stored thread, as the workers committed it.

Shows the conversation of the thread's last snapshot (taken at the end of its last run), its
state, the interrupts left open and the ledger summary; ``--json`` prints
``{"messages", "state", "ledger", "pendingInterrupts", "version"}`` with the messages in wire
JSON, as ``replay --json`` prints them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from ._command import Commands
from ._redis import add_redis_arguments, run_with_redis
from ._render import Style, pretty_json, render_transcript, usage_text
from ._stream import add_color_argument, plural, use_color, use_escapes, write_json

__all__ = ["add_parser", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "thread",
        help="show a thread stored in Redis by the workers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Show a thread's last snapshot: its messages with their merged metadata, its\n"
            "state, pending interrupts and run summary (runs, statuses, token usage).\n\n"
            "Exit status: 0 when the thread exists; 1 when it does not, or on a Redis error;\n"
            "2 when Redis cannot be reached or an argument is wrong."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta thread --redis redis://127.0.0.1:6379/0 t-42\n"
            "  agui-meta thread --redis redis://127.0.0.1:6379/0 t-42 --json | jq .messages"
        ),
    )
    add_redis_arguments(parser)
    parser.add_argument("thread", metavar="ID", help="the thread's id")
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    add_color_argument(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    async def body(client: Any) -> int:
        from ..redis import RedisThreadStore

        snapshot = await RedisThreadStore(client, namespace=args.namespace).load(args.thread)
        if snapshot is None:
            print(
                f"agui-meta: no thread {args.thread!r} in namespace {args.namespace!r}",
                file=sys.stderr,
            )
            return 1
        if args.json:
            data = {
                "messages": snapshot.messages,
                "state": snapshot.state,
                "ledger": snapshot.ledger,
                "pendingInterrupts": snapshot.pending_interrupts,
                "version": snapshot.version,
            }
            write_json(msgspec.json.encode(data) + b"\n")
            return 0
        style = Style(use_color(args), use_escapes(args))
        t = style.text
        store = snapshot.to_store()
        lines = [style.bold(f"--- thread {t(snapshot.thread_id)} (version {snapshot.version}) ---")]
        lines += (
            list(render_transcript(store, style)) if len(store) else [style.dim("(no messages)")]
        )
        if snapshot.state not in ({}, None):
            lines += ["", style.bold("--- state ---"), *style.lines(pretty_json(snapshot.state))]
        for interrupt in snapshot.pending_interrupts:
            lines.append(f"pending interrupt {t(interrupt.id)} ({t(interrupt.reason)})")
        summary = snapshot.ledger
        statuses = ", ".join(f"{n} {status}" for status, n in summary.statuses.items())
        lines += ["", style.bold(f"--- runs ({summary.runs}) ---")]
        if summary.runs:
            lines.append(
                f"{statuses}; last: {t(summary.last_run_id or '(no id)')} {summary.last_status}"
            )
        for entry in summary.usage:
            lines.append("usage " + t(usage_text(entry)))
        lines.append(style.dim(f"{plural(len(store), 'message')}"))
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        return 0

    return run_with_redis(args, body)
