"""``agui-meta record URL -o FILE``: save an agent's response stream byte for byte.

The request is the one ``agui-meta run`` sends (the same arguments); the body is written to
``FILE`` as it arrives, unchanged, so that ``agui-meta replay FILE`` (or ``validate``) shows
it later. Progress goes to standard error: redrawn in place on a terminal, and a last line
saying how many events and bytes were saved.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import IO, Any

import anyio
import msgspec

from .._exceptions import FramingError, HttpStatusError
from .._framing import ACCEPT, ACCEPT_ENCODING, Framer
from ._command import Commands
from ._render import Style, escape_controls
from ._stream import isatty
from .run import add_agent_arguments, build_agent

__all__ = ["add_parser", "run"]

_PROGRESS_INTERVAL = 0.1


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "record",
        help="save an agent's response stream to a file, byte for byte",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "POST a run input to an AG-UI endpoint (as 'agui-meta run' does) and save the\n"
            "response body to FILE exactly as it arrives, for 'agui-meta replay FILE' or\n"
            "'validate FILE' later. Progress on standard error.\n\n"
            "Exit status: 0 when the whole body was saved; 1 when the endpoint answered an\n"
            "error status or the connection dropped (what arrived is kept); 2 when the\n"
            "endpoint cannot be reached, FILE cannot be written or an argument is wrong."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta record http://127.0.0.1:8000/agent -m 'Weather in Lisbon?' -o run.sse\n"
            "  agui-meta replay run.sse"
        ),
    )
    add_agent_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        default="-",
        metavar="FILE",
        help="where to save (default '-': standard output)",
    )
    parser.add_argument(
        "--inspector",
        metavar="OUT.json",
        help="also write an agui-inspector session file (format version 0): the exchange, "
        "its frames with their timing, the runs and validate's findings",
    )
    return parser


class _Progress:
    def __init__(self, out: IO[str], label: str) -> None:
        self.out = out
        self.label = label
        self.live = isatty(out)
        self.next = 0.0
        self.drawn = False

    def update(self, size: int, events: int) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + _PROGRESS_INTERVAL
        self.out.write(f"\rrecording {self.label}: {size} bytes, {events} events\x1b[K")
        self.out.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.out.write("\r\x1b[K")
            self.out.flush()


def run(args: argparse.Namespace) -> int:
    import httpx

    from .._inspector import InspectorRecording, record_exchange
    from .run import unreachable

    try:
        agent, tools = build_agent(args)
        wire, _ = agent._input(args.run_id, tools, (), None, None, None)
    except ValueError as exc:
        print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
        return 2
    body = msgspec.json.encode(wire)
    headers = {
        "Accept-Encoding": ACCEPT_ENCODING,
        **agent.headers,
        "Content-Type": "application/json",
    }
    headers["Accept"] = ACCEPT[args.accept]
    progress = _Progress(sys.stderr, args.url)
    counts = {"bytes": 0, "events": 0}
    counter: Framer | None = Framer()
    inspector = InspectorRecording(args.url, body) if args.inspector else None

    async def save(out: IO[bytes]) -> None:
        nonlocal counter

        def take(chunk: bytes) -> None:
            nonlocal counter
            out.write(chunk)
            out.flush()
            counts["bytes"] += len(chunk)
            if counter is not None:
                try:
                    for piece in counter.slices(chunk):
                        counts["events"] += len(counter.feed(piece))
                except FramingError:
                    counter = None  # not a stream we can count: still saved as it is
            progress.update(counts["bytes"], counts["events"])

        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=args.timeout)) as client:
            await record_exchange(
                client, args.url, body, headers, recording=inspector, on_chunk=take
            )
        if counter is not None:
            with contextlib.suppress(FramingError):
                counts["events"] += len(counter.close())

    try:
        out: Any = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")  # noqa: SIM115
    except OSError as exc:
        print(f"agui-meta: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    # What the server says is escaped on a terminal, as replay and run escape the stream's text.
    say = Style(False, isatty(sys.stderr)).text
    status = 0
    try:
        anyio.run(save, out)
    except HttpStatusError as exc:
        progress.clear()
        print(f"agui-meta: {say(_describe(exc))}", file=sys.stderr)
        status = 1
    except httpx.HTTPError as exc:
        progress.clear()
        if unreachable(exc):
            print(f"agui-meta: cannot reach {say(args.url)}: {say(exc)}", file=sys.stderr)
            return 2
        print(f"agui-meta: {say(exc)}", file=sys.stderr)
        status = 1
    except httpx.InvalidURL as exc:
        progress.clear()
        print(f"agui-meta: cannot reach {say(args.url)}: {say(exc)}", file=sys.stderr)
        return 2
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    progress.clear()
    if inspector is not None:
        try:
            with open(args.inspector, "wb") as session:
                session.write(anyio.run(inspector.session))
        except OSError as exc:
            print(
                f"agui-meta: cannot write {args.inspector}: {exc.strerror or exc}", file=sys.stderr
            )
            return 2
    where = "standard output" if args.output == "-" else args.output
    what = "recorded" if status == 0 else "kept what arrived:"
    print(
        f"agui-meta: {what} {counts['events']} events ({counts['bytes']} bytes) to {where}",
        file=sys.stderr,
    )
    return status


def _describe(exc: HttpStatusError) -> str:
    """One line: the status and the body's start; a redirect says where it points."""
    if 300 <= exc.status < 400:
        return (
            f"HTTP {exc.status} from {exc.url}, a redirect to {exc.location or '(no Location)'}"
            ": record does not follow redirects (record that URL instead)"
        )
    text = " ".join(exc.body.decode("utf-8", "replace").split())
    return f"HTTP {exc.status} from {exc.url}" + (f": {text}" if text else "")
