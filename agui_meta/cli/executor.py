"""``agui-meta executor --redis URL --agent NAME=SPEC``: execute the runs a gateway dispatched.

One consumer of the executors' group of a gateway on Redis (``agui-meta gateway --threads
redis``; replicas with ``--no-execute`` execute nothing and dispatch every run they accept).
It takes as many runs as ``--max-runs`` leaves room for, executes them (lease with a fencing
token, stop through Redis, the thread saved and the usage charged at the end) and serves no
HTTP. See docs/gateway.md, "Dispatch to executors".
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._args import count, duration, seconds
from ._command import Commands
from ._redis import add_redis_arguments, log_to_stderr, run_with_redis, until_loaded
from ._render import escape_controls
from .gateway import (
    ArgumentProblem,
    add_agent_argument,
    add_budget_arguments,
    budget_of,
    load_agents,
    redis_client,
)

__all__ = ["add_parser", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "executor",
        help="execute the runs a gateway on Redis dispatched (any number of executors at once)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Execute the runs that the replicas of a gateway on Redis (agui-meta gateway\n"
            "--threads redis, with --no-execute for fronts) dispatch: take as many as\n"
            "--max-runs leaves room for, run each agent holding a lease with a fencing token,\n"
            "and end each run in one script with its thread saved and its usage charged.\n"
            "Start as many as you like; if one dies, its runs end with RUN_ERROR\n"
            "executor_lost within the lease. A dispatch entry that is not a run is reported\n"
            "(stream and entry id) and parked.\n\n"
            "Exit status: 0 when stopped by SIGTERM (its runs ended, their threads saved); 1\n"
            "on a Redis error; 2 on a bad argument, an agent that cannot be loaded, or when\n"
            "Redis cannot be reached at the start; 130 when interrupted (Ctrl-C)."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta executor --redis redis://127.0.0.1:6379/0 "
            "--agent demo=agui_meta.demo:agent\n"
            "  agui-meta executor --redis redis://127.0.0.1:6379/0 --agent bot=myapp.agents:bot "
            "--max-runs 20"
        ),
    )
    add_agent_argument(parser, "an agent to execute (repeat for several; every agent the "
                       "gateway serves)")  # fmt: skip
    add_redis_arguments(parser)
    parser.add_argument(
        "--max-runs",
        type=count,
        default=100,
        help="runs executed at once; it takes no more (default: 100)",
    )
    parser.add_argument(
        "--lease",
        type=seconds,
        default=10.0,
        help="seconds it holds a run without renewing it (default: 10)",
    )
    parser.add_argument(
        "--linger",
        type=duration,
        default=30.0,
        metavar="SECONDS",
        help="how long a run goes on with no client reading it (default: 30)",
    )
    parser.add_argument("--name", help="its consumer name (default: host-pid-random)")
    add_budget_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        agents = load_agents(args.agent)
        budget = budget_of(args)
    except ArgumentProblem as exc:
        print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
        return 2

    async def body(client: Any) -> int:
        import signal

        import anyio

        from ..redis._executor import executor
        from ..redis._runs import consumer_name

        await until_loaded(client)
        name = args.name or consumer_name()
        options: dict[str, Any] = {"max_runs": args.max_runs, "linger": args.linger}
        if budget is not None:
            options["budget"] = budget
        with log_to_stderr("agui_meta.gateway", False):
            async with executor(
                client,
                agents,
                namespace=args.namespace,
                lease=args.lease,
                name=name,
                **options,
            ):
                names = ", ".join(sorted(agents))
                print(
                    f"agui-meta executor {escape_controls(name)} on namespace "
                    f"{escape_controls(args.namespace)} ({names})",
                    file=sys.stderr,
                    flush=True,
                )
                with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                    async for _ in signals:
                        break
        return 0

    return run_with_redis(args, body, lambda url: redis_client(url, args.max_runs))
