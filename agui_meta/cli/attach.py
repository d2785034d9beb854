"""``agui-meta attach URL --thread T``: show a gateway thread, and its active run live.

The gateway's connect route (:meth:`agui_meta.HttpAgent.connect`): the thread as the gateway
holds it, then the run in progress, if any, as it streams; ``--follow`` stays attached and
shows the thread's later runs too, until Ctrl-C. URL is the agent's route on the gateway
(``http://HOST:PORT/agents/NAME``, with or without ``/run``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from .._events import MessagesSnapshotEvent
from .._exceptions import AguiMetaError, Report, UsageError
from ._args import add_header_argument, http_url
from ._command import Commands
from ._render import Style
from ._stream import add_color_argument, isatty, use_color, use_escapes
from .run import describe_failure, print_summary, unreachable

__all__ = ["add_parser", "gateway_agent", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "attach",
        help="show a thread of an agui-meta gateway, and its running run live",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Connect to a thread of an agui-meta gateway: show its conversation as the gateway\n"
            "holds it, then the active run (if any) live to its end; with --follow, stay and\n"
            "show the thread's later runs as well, until Ctrl-C.\n\n"
            "Exit status: 0; 1 when the thread is unknown, the stream is broken or a run\n"
            "failed; 2 when the gateway cannot be reached or an argument is wrong."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta attach http://127.0.0.1:8000/agents/demo --thread t1\n"
            "  agui-meta attach http://127.0.0.1:8000/agents/demo --thread t1 --follow"
        ),
    )
    add_gateway_arguments(parser)
    parser.add_argument(
        "--follow", action="store_true", help="stay attached: show later runs too (Ctrl-C ends)"
    )
    add_color_argument(parser)
    return parser


def add_gateway_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``attach`` and ``stop`` share."""
    parser.add_argument(
        "url", metavar="URL", type=http_url, help="the agent on the gateway: .../agents/NAME"
    )
    parser.add_argument("--thread", required=True, metavar="ID", help="the thread's id")
    add_header_argument(parser)


def gateway_agent(args: argparse.Namespace, **options: Any) -> Any:
    """The :class:`~agui_meta.HttpAgent` of ``args.url`` (its run route) and ``--thread``."""
    from .._client import HttpAgent

    headers = dict(args.header)  # (name, value) pairs, checked when parsed
    url = args.url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"URL must start with http:// or https://, got {args.url!r}")
    last = url.rpartition("/")[2]
    if last in ("connect", "stop"):
        url = url.rpartition("/")[0] + "/run"
    elif last != "run":
        url += "/run"
    return HttpAgent(url, headers=headers, thread_id=args.thread, **options)


def run(args: argparse.Namespace) -> int:
    import httpx

    from ._live import LiveView

    reports: list[Report] = []
    style = Style(use_color(args), use_escapes(args))
    try:
        agent = gateway_agent(args, on_report=reports.append)
    except UsageError as exc:
        print(f"agui-meta: {exc}", file=sys.stderr)
        return 2
    failure: BaseException | None = None

    async def watch() -> None:
        async with agent.connect(follow=args.follow) as stream:
            live = LiveView(sys.stdout, style, agent.store)
            async for update in stream:
                if isinstance(update.event, MessagesSnapshotEvent):
                    live.history(agent.store.messages())  # the thread as the gateway holds it
                else:
                    live.show(update)
            live.close()

    try:
        anyio.run(watch)
    except (AguiMetaError, httpx.HTTPError) as exc:
        if unreachable(exc):
            print(f"agui-meta: cannot reach {agent.url}: {exc}", file=sys.stderr)
            return 2
        failure = exc
    print_summary(agent, reports, style)
    if failure is not None:
        on_stderr = Style(False, isatty(sys.stderr))
        print(f"agui-meta: {on_stderr.text(describe_failure(failure, agent.url))}", file=sys.stderr)
        return 1
    return 0
