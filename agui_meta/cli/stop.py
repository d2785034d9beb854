"""``agui-meta stop URL --thread T``: stop the active run of a gateway thread.

The gateway's stop route (:meth:`agui_meta.HttpAgent.stop`): the agent is cancelled and the
run ends with ``RUN_FINISHED`` outcome ``cancelled``, which every client streaming it
receives. Prints the gateway's answer as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

import anyio

from .._exceptions import AguiMetaError, UsageError
from ._command import Commands
from ._render import Style
from ._stream import isatty
from .attach import add_gateway_arguments, gateway_agent
from .run import unreachable

__all__ = ["add_parser", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "stop",
        help="stop the running run of a thread of an agui-meta gateway",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Stop the active run of a thread of an agui-meta gateway: the agent is cancelled\n"
            "and the run ends with RUN_FINISHED (outcome cancelled). Prints the answer.\n\n"
            "Exit status: 0 when stopped; 1 when no run is active (or the gateway refused);\n"
            "2 when the gateway cannot be reached or an argument is wrong."
        ),
        epilog="example:\n  agui-meta stop http://127.0.0.1:8000/agents/demo --thread t1",
    )
    add_gateway_arguments(parser)
    parser.add_argument("--run", dest="run_id", metavar="ID", help="stop only this run")
    return parser


def run(args: argparse.Namespace) -> int:
    import httpx

    try:
        agent = gateway_agent(args)
    except UsageError as exc:
        print(f"agui-meta: {exc}", file=sys.stderr)
        return 2
    try:
        answer = anyio.run(agent.stop, args.run_id)
    except (AguiMetaError, httpx.HTTPError) as exc:
        if unreachable(exc):
            print(f"agui-meta: cannot reach {agent.url}: {exc}", file=sys.stderr)
            return 2
        text = Style(False, isatty(sys.stderr)).text(str(exc).splitlines()[0])
        print(f"agui-meta: {text}", file=sys.stderr)
        return 1
    print(json.dumps(answer))
    return 0
