"""A replica of an agent endpoint whose streams are resumable on any replica (RedisReplay).

:func:`replica_app` builds the Starlette app the multi-replica tests serve twice (two uvicorn
servers sharing one Redis). It also runs as a process of its own, so that a test can kill a
replica with SIGKILL::

    AGUI_REPLAY_REDIS=redis://127.0.0.1:PORT/0 AGUI_REPLAY_NAMESPACE=ns \\
        python -m uvicorn --factory tests.replay_app:from_env --host 127.0.0.1 --port N

``POST /agent`` streams the scripted thread of ``tests/servers.py`` (``?pause=`` seconds before
each event; ``?stall=k``: after k events, nothing more until the client leaves).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import redis.asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import agui_meta
from agui_meta.redis import RedisReplay
from tests.servers import thread_script


def replica_app(redis_url: str, namespace: str, **replay_options: Any) -> Starlette:
    """One replica: its own Redis client (made and closed by the app's lifespan)."""
    stats: dict[str, Any] = {"started": 0, "closed": 0, "headers": []}

    async def agent(events: list[dict[str, Any]], pause: float, stall: int) -> AsyncIterator[Any]:
        stats["started"] += 1
        try:
            for n, event in enumerate(events):
                if n == stall:
                    await anyio.sleep_forever()
                if pause:
                    await anyio.sleep(pause)
                yield event
        finally:
            stats["closed"] += 1

    async def endpoint(request: Request) -> Response:
        stats["headers"].append(dict(request.headers))
        run = json.loads(await request.body())
        pause = float(request.query_params.get("pause", "0"))
        stall = int(request.query_params.get("stall", "-1"))
        return agui_meta.EventStreamResponse(
            agent(thread_script(run), pause, stall),
            replay=request.app.state.replay,
            keepalive=0.2,
            retry=20,
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        client = redis.asyncio.Redis.from_url(redis_url)
        app.state.replay = RedisReplay(client, namespace=namespace, **replay_options)
        try:
            yield
        finally:
            await client.aclose()

    app = Starlette(routes=[Route("/agent", endpoint, methods=["POST"])], lifespan=lifespan)
    app.state.stats = stats
    return app


def from_env() -> Starlette:
    """The replica of the environment (``AGUI_REPLAY_REDIS``, ``AGUI_REPLAY_NAMESPACE``, and
    ``AGUI_REPLAY_OPTIONS``: the RedisReplay options as JSON)."""
    options = json.loads(os.environ.get("AGUI_REPLAY_OPTIONS", "{}"))
    return replica_app(
        os.environ["AGUI_REPLAY_REDIS"], os.environ["AGUI_REPLAY_NAMESPACE"], **options
    )
