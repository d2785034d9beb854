"""``agui-meta serve FILE``: a recorded stream served as an AG-UI endpoint.

Every POST (to any path) answers with the recorded events, whatever the run input, through
:class:`agui_meta.EventStreamResponse`: SSE with event ids (JSON lines when the request asks for
them), keepalives, and resumable with ``Last-Event-ID`` from a :class:`agui_meta.ReplayBuffer`.
With ``--pace`` the events are spaced as their recorded ``timestamp`` says (``--pace 2``: twice
as fast), each pause at most ``--max-pause`` seconds. The file is read once at start-up (its
events counted, its problems listed on standard error) and again for each request, so that
memory does not grow with the recording.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from msgspec import UNSET

from .._events import Event
from .._exceptions import DataError, Report
from .._pipeline import wrap
from ._args import duration, port, positive, seconds
from ._command import Commands
from ._render import escape_controls
from ._stream import plural, run_async

__all__ = ["add_parser", "pause", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "serve",
        help="serve a recorded stream as an AG-UI endpoint (for client tests)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Serve a recorded AG-UI stream (SSE or JSON lines) as an agent: every POST, to\n"
            "any path, answers with the recorded events, whatever its run input. SSE with\n"
            "event ids, resumable with Last-Event-ID for --linger seconds (agui-meta's\n"
            "extension); JSON lines when the request's Accept asks for them. Events the\n"
            "file holds that are not valid are listed at start-up and left out.\n\n"
            "The URL is printed on the first line of standard output once the server\n"
            "listens. Exit status: 0 or 130 when stopped (Ctrl-C); 2 when FILE cannot be\n"
            "read or holds no event, or the port cannot be bound."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta serve examples/streams/travel.sse --port 8000\n"
            "  agui-meta serve run.sse --pace 1       # at the recorded pace\n"
            "  agui-meta serve run.sse --port 0       # any free port (printed)"
        ),
    )
    parser.add_argument("file", metavar="FILE", help="an SSE or JSON-lines recording")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument(
        "--port", type=port, default=8000, help="the port (default 8000; 0: any free port)"
    )
    parser.add_argument(
        "--pace",
        metavar="FACTOR",
        type=positive,
        default=None,
        help="space the events as their recorded timestamps say, FACTOR times faster "
        "(1: the recorded pace); default: no pauses",
    )
    parser.add_argument(
        "--max-pause",
        metavar="SECONDS",
        type=seconds,
        default=5.0,
        help="the longest pause between two events with --pace (default 5)",
    )
    parser.add_argument(
        "--linger",
        metavar="SECONDS",
        type=duration,
        default=30.0,
        help="how long a stream can be resumed after it ends or its client leaves (default 30)",
    )
    parser.add_argument(
        "--keepalive",
        metavar="SECONDS",
        type=seconds,
        default=15.0,
        help="seconds without an event before a keepalive line (default 15)",
    )
    parser.add_argument(
        "--input-format",
        choices=("auto", "sse", "jsonl", "json-array"),
        default="auto",
        help="the recording's format (default: detected)",
    )
    return parser


def pause(previous: int, current: int, pace: float, max_pause: float) -> float:
    """Seconds to wait between events recorded at ``previous`` and ``current`` (ms).

    The recorded gap divided by ``pace``, never negative (clocks go back), at most
    ``max_pause``.
    """
    return min(max(current - previous, 0) / 1000.0 / pace, max_pause)


async def _events(
    path: Path,
    format: Any,
    pace: float | None,
    max_pause: float,
    on_report: Callable[[Report], None],
    sleep: Callable[[float], Any],
) -> AsyncIterator[Event]:
    """The recording's valid events, spaced by their timestamps when ``pace`` is set."""
    last: int | None = None
    async with wrap(path, mode="keep_going", on_report=on_report, format=format) as events:
        async for event in events:
            stamp = event.timestamp
            if pace is not None and stamp is not UNSET:
                if last is not None:
                    await sleep(pause(last, stamp, pace, max_pause))
                last = stamp
            yield event


def _scan(path: Path, format: Any) -> tuple[int, list[Report]]:
    """Count the events and list the problems once, at start-up."""
    reports: list[Report] = []
    count = 0

    async def main() -> None:
        nonlocal count
        try:
            async for _ in _events(path, format, None, 0.0, reports.append, _no_sleep):
                count += 1
        except DataError as exc:  # a framing error ends the file
            reports.append(exc.to_report())

    run_async(main)
    return count, reports


async def _no_sleep(seconds: float) -> None:
    pass


def build_app(
    path: Path,
    *,
    format: Any = "auto",
    pace: float | None = None,
    max_pause: float = 5.0,
    linger: float = 30.0,
    keepalive: float | None = 15.0,
) -> Any:
    """The Starlette app that serves ``path`` (every POST, to any path)."""
    import anyio
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from .._resume import ReplayBuffer
    from .._server import EventStreamResponse

    replay = ReplayBuffer(linger=linger)

    def ignore(report: Report) -> None:
        """Listed once at start-up; not again for every request."""

    async def endpoint(request: Request) -> Response:
        await request.body()
        source = _events(path, format, pace, max_pause, ignore, anyio.sleep)
        return EventStreamResponse(source, replay=replay, keepalive=keepalive)

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["POST"])])


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        print(f"agui-meta: cannot read {escape_controls(args.file)}: no such file", file=sys.stderr)
        return 2
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError:
        print(
            "agui-meta: serve needs uvicorn and starlette: pip install 'agui-meta[serve]'",
            file=sys.stderr,
        )
        return 2
    count, reports = _scan(path, args.input_format)
    for report in reports[:20]:
        print(f"agui-meta: {escape_controls(args.file)}: {report}", file=sys.stderr)
    if len(reports) > 20:
        print(f"agui-meta: … and {len(reports) - 20} more problems", file=sys.stderr)
    if count == 0:
        print(f"agui-meta: {escape_controls(args.file)} holds no event to serve", file=sys.stderr)
        return 2
    app = build_app(
        path,
        format=args.input_format,
        pace=args.pace,
        max_pause=args.max_pause,
        linger=args.linger,
        keepalive=args.keepalive,
    )
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((args.host, args.port))
    except OSError as exc:
        sock.close()
        print(f"agui-meta: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"http://{shown}:{port}/", flush=True)
    print(
        f"agui-meta: serving {escape_controls(args.file)} ({plural(count, 'event')}"
        f"{', paced' if args.pace else ''}); POST a run input to any path; Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(
        app, lifespan="off", ws="none", log_level="warning", timeout_graceful_shutdown=1
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0
