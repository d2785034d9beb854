"""What the Redis commands share: ``--redis URL`` and ``--namespace``, and how they fail.

Each command's coroutine gets a connected ``redis.asyncio`` client. A missing ``redis`` extra,
a malformed URL or a server that cannot be reached is one line on standard error and exit
status 2; a Redis error, or data in Redis that is not what agui-meta wrote, one line and 1.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

__all__ = ["add_redis_arguments", "log_to_stderr", "run_with_redis", "until_loaded"]


def add_redis_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis",
        required=True,
        metavar="URL",
        help="the Redis server (redis://HOST:PORT/DB, rediss://…, unix:///PATH)",
    )
    parser.add_argument(
        "--namespace",
        default="agui",
        help="the key namespace shared by ingest, the workers and the readers (default: agui)",
    )


def run_with_redis(
    args: argparse.Namespace,
    body: Callable[[Any], Awaitable[int]],
    connect: Callable[[str], Any] | None = None,
) -> int:
    """Connect to ``args.redis`` (with ``connect(url)`` when given, else a default client), run
    ``body(client)`` on asyncio, return its exit status."""
    try:
        import redis.asyncio
        import redis.exceptions
    except ImportError:
        print(
            "agui-meta: this command needs the redis extra: pip install 'agui-meta[redis]'",
            file=sys.stderr,
        )
        return 2
    import anyio

    from .._exceptions import AguiMetaError

    try:
        # connects at its first command
        client = (connect or redis.asyncio.Redis.from_url)(args.redis)
    except ValueError as exc:  # a malformed URL
        print(f"agui-meta: --redis {args.redis}: {exc}", file=sys.stderr)
        return 2

    async def main() -> int:
        try:
            return await body(client)
        finally:
            await client.aclose()

    try:
        return anyio.run(_until_interrupted, main)
    except (AguiMetaError, ValueError) as exc:  # what Redis holds is not what it should be
        print(f"agui-meta: {exc}", file=sys.stderr)
        return 1
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        print(f"agui-meta: cannot reach Redis at {args.redis}: {exc}", file=sys.stderr)
        return 2
    except redis.exceptions.RedisError as exc:
        print(f"agui-meta: Redis error: {exc}", file=sys.stderr)
        return 1


async def _until_interrupted(body: Callable[[], Awaitable[int]]) -> int:
    """``body()``, cancelled on Ctrl-C (SIGINT) through an anyio cancel scope, then
    :exc:`KeyboardInterrupt` (exit status 130, see :func:`agui_meta.cli.main`).

    asyncio's own Ctrl-C handling cancels the main task once, and a cancellation can be lost
    on the way (``asyncio.wait_for`` before Python 3.12 drops one that races the result), so a
    worker could run on. An anyio scope cancels again at every checkpoint until it is left;
    the body's cleanup (a worker releasing its leases) runs first.
    """
    import asyncio
    import signal
    import threading

    import anyio

    interrupted = False
    status = 0
    loop = asyncio.get_running_loop()  # redis.asyncio runs on asyncio
    watching = threading.current_thread() is threading.main_thread()
    with anyio.CancelScope() as scope:

        def interrupt() -> None:
            nonlocal interrupted
            interrupted = True
            scope.cancel()

        if watching:
            loop.add_signal_handler(signal.SIGINT, interrupt)
        try:
            status = await body()
        finally:
            if watching:
                loop.remove_signal_handler(signal.SIGINT)
    if interrupted:
        raise KeyboardInterrupt
    return status


async def until_loaded(client: Any) -> None:
    """Wait (30 s at most) while the server answers ``LOADING`` (it reads its AOF)."""
    import anyio
    import redis.exceptions

    with anyio.fail_after(30):
        while True:
            try:
                await client.ping()
                return
            except redis.exceptions.BusyLoadingError:
                await anyio.sleep(0.1)


@contextlib.contextmanager
def log_to_stderr(name: str, verbose: bool) -> Iterator[None]:
    """Logger ``name``'s records (warnings and errors; with ``verbose``, information too) as
    lines ``agui-meta: MESSAGE`` on standard error."""
    logger = logging.getLogger(name)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("agui-meta: %(message)s"))
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
