"""``agui-meta ingest --redis URL --thread ID FILE``: publish a recorded stream for the workers.

The file's frames are cut into envelopes (at most ``--batch`` events, and never across a run's
end), numbered per source, and appended to the thread's shard stream; an end-of-source marker
follows unless ``--no-end``. Running it again with the same file appends nothing: every
envelope is recognised as a retry by its content. The default source name includes a digest of
the stream's first event, so a different stream piped into the same thread is a new source; a
different stream under a name already used (``--source``, or a stream that starts with the same
event) is refused, naming the first envelope that differs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._args import count, shards
from ._command import Commands
from ._redis import add_redis_arguments, run_with_redis

__all__ = ["add_parser", "run"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "ingest",
        help="publish a recorded stream to Redis for the workers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Publish a recorded AG-UI stream (SSE or JSON lines, detected) as one thread's\n"
            "input: frame-aligned batches of events with a per-source sequence number, so a\n"
            "retry (the same command again) appends nothing twice. Workers\n"
            "('agui-meta worker') process it.\n\n"
            "A retry is recognised by what it sends (a digest of each envelope, kept per\n"
            "source), not by its name: a different stream under a source name already used\n"
            "is refused, naming the first envelope that differs.\n\n"
            "Exit status: 0 on success; 1 on a sequence gap or a different stream under a\n"
            "used source name; 2 when the file or Redis cannot be read."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta ingest --redis redis://127.0.0.1:6379/0 --thread t-42 "
            "examples/streams/travel.sse\n"
            "  agui-meta ingest --redis redis://127.0.0.1:6379/0 --thread t-42 "
            "--source run-2 --batch 256 more.jsonl"
        ),
    )
    add_redis_arguments(parser)
    parser.add_argument("--thread", required=True, metavar="ID", help="the thread's id")
    parser.add_argument("file", metavar="FILE", help="a recorded stream ('-' for standard input)")
    parser.add_argument(
        "--source",
        help="the source's name, for its sequence numbers (default: THREAD:FILE's name:a "
        "digest of the stream's first event, so that another stream is another source)",
    )
    parser.add_argument(
        "--batch", type=count, default=64, help="events per envelope at most (default: 64)"
    )
    parser.add_argument(
        "--pipeline", type=count, default=64, help="envelopes per round trip (default: 64)"
    )
    parser.add_argument(
        "--shards",
        type=shards,
        default=None,
        help="virtual shards of a new namespace (default: 64; a used namespace keeps its own)",
    )
    parser.add_argument(
        "--no-end",
        action="store_true",
        help="send no end-of-source marker (more of the stream will come from this source)",
    )
    return parser


def _default_source(thread: str, file: str, frames: list[bytes]) -> str:
    """``THREAD:NAME:DIGEST``: the file's base name (``-`` for standard input) and 12 hex digits
    of a digest of the first event, so that a different stream is a different source while a
    retry, or the same stream grown longer, is the same one."""
    import hashlib
    import os

    first = frames[0] if frames else b""
    return f"{thread}:{os.path.basename(file)}:{hashlib.blake2b(first, digest_size=6).hexdigest()}"


def run(args: argparse.Namespace) -> int:
    from .._exceptions import FramingError

    if args.batch < 1 or args.pipeline < 1 or (args.shards is not None and args.shards < 1):
        print("agui-meta: --batch, --pipeline and --shards must be at least 1", file=sys.stderr)
        return 2
    try:
        from ..redis import (
            DEFAULT_SHARDS,
            SequenceGap,
            SourceConflict,
            envelopes,
            publish,
            read_frames,
        )
    except ImportError:
        print(
            "agui-meta: this command needs the redis extra: pip install 'agui-meta[redis]'",
            file=sys.stderr,
        )
        return 2
    try:
        frames = read_frames("/dev/stdin" if args.file == "-" else args.file)
    except FramingError as exc:
        print(f"agui-meta: {args.file}: {exc}", file=sys.stderr)
        return 1
    source = args.source or _default_source(args.thread, args.file, frames)

    async def body(client: Any) -> int:
        batches = envelopes(
            frames, thread=args.thread, source=source, batch=args.batch, end=not args.no_end
        )
        try:
            result = await publish(
                client,
                batches,
                namespace=args.namespace,
                shards=args.shards or DEFAULT_SHARDS,
                pipeline=args.pipeline,
            )
        except SourceConflict as exc:
            print(f"agui-meta: {args.file}: {exc}", file=sys.stderr)
            return 1
        except SequenceGap as exc:
            print(f"agui-meta: sequence gap: {exc}", file=sys.stderr)
            return 1
        print(
            f"{args.file}: {len(frames)} events; {result.appended} envelopes appended, "
            f"{result.duplicates} already there (source {source!r})",
            file=sys.stderr,
        )
        return 0

    return run_with_redis(args, body)
