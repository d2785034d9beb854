"""``agui-meta run URL``: talk to an AG-UI agent and show the conversation as it streams.

One run of :class:`agui_meta.HttpAgent`: each ``-m TEXT`` is a user message of the run's
input, in order. The conversation is written live (:mod:`agui_meta.cli._live`), then the
state, the run ledger and the reports, as ``replay`` shows them; ``--json`` prints
``{messages, state, ledger, reports}`` exactly as ``replay --json`` does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
import msgspec

from .._exceptions import AguiMetaError, DataError, Report
from ._args import add_header_argument, http_url, json_value, seconds, tool
from ._command import Commands
from ._render import Style, format_report, pretty_json, render_ledger
from ._stream import add_color_argument, isatty, use_color, use_escapes, write_json

__all__ = ["add_parser", "build_agent", "describe_failure", "print_summary", "run", "unreachable"]

_encode = msgspec.json.Encoder().encode


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "run",
        help="talk to an AG-UI agent over HTTP and show the conversation as it streams",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "POST a run input to an AG-UI endpoint (the official HttpAgent's request: JSON in,\n"
            "SSE or JSON lines out) and show the conversation live as the events arrive, with\n"
            "every item's merged metadata, then the state, the run ledger and the reports.\n"
            "Each -m is a user message of the run's input.\n\n"
            "Exit status: 0 on success; 1 when the run sent RUN_ERROR, the stream is broken or\n"
            "ended early, or the endpoint answered an error status; 2 when the endpoint cannot\n"
            "be reached or an argument is wrong."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta run http://127.0.0.1:8000/agent -m 'What is the weather in Lisbon?'\n"
            '  agui-meta run URL -m hi --thread-id t-1 --state \'{"units": "metric"}\'\n'
            "  agui-meta run URL -m hi --json | jq '.ledger.runs[].usage'"
        ),
    )
    add_agent_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print {messages, state, ledger, reports} as JSON instead (as replay --json)",
    )
    add_color_argument(parser)
    return parser


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``run`` and ``record`` share: the endpoint and the run input."""
    parser.add_argument(
        "url", metavar="URL", type=http_url, help="the agent's endpoint (POST, http:// or https://)"
    )
    parser.add_argument(
        "-m",
        "--message",
        action="append",
        default=[],
        metavar="TEXT",
        help="a user message of the run's input (repeat for several, in order)",
    )
    parser.add_argument("--thread-id", metavar="ID", help="the thread's id (default: a new UUID)")
    parser.add_argument("--run-id", metavar="ID", help="the run's id (default: a new UUID)")
    parser.add_argument(
        "--state", metavar="JSON", type=json_value, help="the thread's state, as JSON"
    )
    parser.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="JSON",
        type=tool,
        help='a tool offered to the agent, as JSON ({"name", "description", "parameters"})',
    )
    add_header_argument(parser)
    parser.add_argument(
        "--accept",
        choices=("sse", "jsonl"),
        default="sse",
        help="the format asked for (default: sse)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=300.0,
        metavar="SECONDS",
        help="the longest wait between two reads (default: 300)",
    )


def build_agent(args: argparse.Namespace, **options: Any) -> tuple[Any, list[Any]]:
    """The :class:`~agui_meta.HttpAgent` the arguments describe, and the tools to offer."""
    import httpx

    from .._client import HttpAgent

    headers = dict(args.header)
    messages = [
        {"id": f"user-{n}", "role": "user", "content": text}
        for n, text in enumerate(args.message, 1)
    ]
    agent = HttpAgent(
        args.url,
        headers=headers,
        thread_id=args.thread_id,
        messages=messages,
        state=args.state,
        accept=args.accept,
        timeout=httpx.Timeout(10.0, read=args.timeout),
        **options,
    )
    return agent, list(args.tool)


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the endpoint cannot be reached at all (exit status 2)."""
    from .._inspector import unreachable

    return unreachable(exc)


def run(args: argparse.Namespace) -> int:
    import httpx

    from .._client import HttpAgent
    from ._live import LiveView

    reports: list[Report] = []
    style = Style(use_color(args), use_escapes(args))
    agent, tools = build_agent(args, on_report=reports.append)
    assert isinstance(agent, HttpAgent)
    failure: BaseException | None = None

    async def talk() -> None:
        async with agent.run(run_id=args.run_id, tools=tools) as stream:
            if args.json:
                async for _ in stream.batches():
                    pass
            else:
                live = LiveView(sys.stdout, style, agent.store)
                live.history(agent.store.messages())
                try:
                    async for update in stream:
                        live.show(update)
                finally:
                    live.close()  # ends the line of a message cut short, before the summary

    try:
        anyio.run(talk)
    except (AguiMetaError, httpx.HTTPError, httpx.InvalidURL) as exc:
        if unreachable(exc):
            print(f"agui-meta: cannot reach {args.url}: {exc}", file=sys.stderr)
            return 2
        failure = exc
    if args.json:
        result: dict[str, Any] = {
            "messages": agent.messages_wire(),
            "state": agent.state,
            "ledger": msgspec.Raw(agent.ledger.to_json()),
            "reports": [_report_json(r) for r in reports],
        }
        write_json(_encode(result) + b"\n")
    else:
        print_summary(agent, reports, style)
    if failure is not None:
        on_stderr = Style(False, isatty(sys.stderr))  # the server's words, escaped on a terminal
        print(f"agui-meta: {on_stderr.text(describe_failure(failure, args.url))}", file=sys.stderr)
        return 1
    return 0


def describe_failure(exc: BaseException, url: str) -> str:
    """One line, for standard error, of why the talk with the agent at ``url`` failed."""
    import httpx

    if isinstance(exc, DataError):
        return format_report(url, exc.to_report(), Style(False, isatty(sys.stderr)))
    status = getattr(exc, "status", None)  # HttpStatusError
    if isinstance(status, int) and 300 <= status < 400:
        return (
            f"HTTP {status} from {url}, a redirect: run does not follow redirects (give it the "
            "URL the endpoint points to)"
        )
    if isinstance(exc, httpx.TimeoutException):
        return f"{url} sent nothing for too long ({type(exc).__name__}); see --timeout"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _report_json(report: Report) -> dict[str, Any]:
    return {k: v for k, v in msgspec.to_builtins(report).items() if v is not None}


def print_summary(agent: Any, reports: list[Report], style: Style) -> None:
    """Print what followed the conversation: the agent's state, its run ledger, the reports."""
    lines: list[str] = []
    if agent.state not in ({}, None):
        lines += ["", style.bold("--- state ---"), *style.lines(pretty_json(agent.state))]
    runs = agent.ledger.runs
    lines += ["", style.bold(f"--- runs ({len(runs)}) ---")]
    lines += list(render_ledger(runs, style)) if runs else [style.dim("(no runs)")]
    if reports:
        lines += ["", style.bold("--- reports ---")]
        lines += [format_report(agent.url, report, style) for report in reports]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
