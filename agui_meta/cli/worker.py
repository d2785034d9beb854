"""``agui-meta worker --redis URL``: process shards of the namespace until stopped.

See :mod:`agui_meta.redis` for what a worker does and guarantees.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._args import count, seconds, shards
from ._command import Commands
from ._redis import add_redis_arguments, log_to_stderr, run_with_redis, until_loaded

__all__ = ["add_parser", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "worker",
        help="process ingested streams from Redis (any number of workers at once)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Own a fair share of the namespace's virtual shards through fenced leases and\n"
            "process their entries: completed items, run records and reports go to the\n"
            "outputs stream with stable keys, thread snapshots at each run's end, usage\n"
            "counters, all committed atomically per batch. Start as many as you like; a\n"
            "worker that dies is replaced by the others when its lease runs out.\n\n"
            "A thread whose stored hash is corrupt is quarantined (logged with its key, its\n"
            "entries parked in {NS}:parked); the others go on. With --verbose, one line per\n"
            "commit on standard error.\n\n"
            "Exit status: 0 when it stopped idle (--exit-when-idle); 1 on a Redis error, or a\n"
            "commit the server refuses for its size; 2 on a bad argument or when Redis cannot\n"
            "be reached at the start; 130 when interrupted (Ctrl-C)."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta worker --redis redis://127.0.0.1:6379/0\n"
            "  agui-meta worker --redis redis://127.0.0.1:6379/0 --exit-when-idle 30 "
            "--idle-timeout 600"
        ),
    )
    add_redis_arguments(parser)
    parser.add_argument(
        "--exit-when-idle",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="stop after SECONDS with nothing to do (choose more than --lease when other "
        "workers may die)",
    )
    parser.add_argument(
        "--lease", type=seconds, default=10.0, help="lease duration in seconds (default: 10)"
    )
    parser.add_argument(
        "--batch", type=count, default=256, help="entries per shard per commit (default: 256)"
    )
    parser.add_argument(
        "--idle-timeout",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="close a run with no new entry for SECONDS, as if its source had ended",
    )
    parser.add_argument("--name", help="this worker's consumer name (default: host-pid-random)")
    parser.add_argument(
        "--shards",
        type=shards,
        default=None,
        help="virtual shards of a new namespace (default: 64)",
    )
    parser.add_argument(
        "--stats", action="store_true", help="print the worker's counters on exit, as JSON"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="say what it does: a line per commit (shard, entries, outputs, snapshots, bytes)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    # --lease, --batch, --shards, --exit-when-idle, --idle-timeout: checked when parsed (_args).
    async def body(client: Any) -> int:
        import msgspec

        from ..redis import DEFAULT_SHARDS, CommitTooLarge, Worker

        await until_loaded(client)  # a server still loading its AOF answers LOADING: wait
        worker = Worker(
            client,
            namespace=args.namespace,
            name=args.name,
            lease=args.lease,
            batch=args.batch,
            idle_timeout=args.idle_timeout,
            shards=args.shards or DEFAULT_SHARDS,
        )
        try:
            with log_to_stderr("agui_meta.redis.worker", args.verbose):
                await worker.run(exit_when_idle=args.exit_when_idle)
        except CommitTooLarge as exc:
            print(f"agui-meta: {exc}", file=sys.stderr)
            return 1
        finally:
            if args.stats:
                sys.stdout.write(msgspec.json.encode(worker.stats).decode() + "\n")
                sys.stdout.flush()
        return 0

    return run_with_redis(args, body)
