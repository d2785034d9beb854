"""A gateway replica on Redis (agui_meta.redis.redis_gateway) for the multi-replica tests.

:func:`replica` builds the app the tests serve twice (two uvicorn servers sharing one Redis);
:func:`from_env` is the same replica in a process of its own, so that a test can kill it::

    AGUI_GW_REDIS=redis://127.0.0.1:PORT/0 AGUI_GW_NAMESPACE=ns AGUI_GW_OPTIONS='{"lease": 1}' \\
        python -m uvicorn --factory tests.redis_gateway_app:from_env --host 127.0.0.1 --port N

The agent ``slow`` streams a text message of ``forwardedProps.deltas`` deltas (default 3),
``forwardedProps.pause`` seconds apart, then a state snapshot: its output depends only on its
input, so that a disturbed run is compared with an undisturbed one; with
``forwardedProps.tokens``, its RUN_FINISHED reports that many input tokens. A request's scope is its
``X-Scope`` header (none: ``""``).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from agui_meta.events import RunAgentInput
from agui_meta.gateway import redis_gateway


async def slow(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
    pause = float(props.get("pause", 0))
    tid, rid, m = input.thread_id, input.run_id, f"{input.run_id}-m"
    yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
    yield {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"}
    for n in range(int(props.get("deltas", 3))):
        if pause:
            await anyio.sleep(pause)
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": f"{n} "}
    yield {"type": "TEXT_MESSAGE_END", "messageId": m}
    yield {"type": "STATE_SNAPSHOT", "snapshot": {"messages": len(input.messages)}}
    if "tokens" in props:  # the usage a budget counts
        usage = [{"model": "m-1", "inputTokens": int(props["tokens"]), "outputTokens": 0}]
        yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid, "usage": usage}
        return
    yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid}


def _scope(request: Request) -> str:
    return request.headers.get("x-scope", "")


def replica(redis_url: str, namespace: str, *, cluster: bool = False, **options: Any) -> Starlette:
    """One replica with its own Redis client (closed by the app's lifespan); ``cluster``: a
    ``RedisCluster`` client of the cluster one of whose nodes ``redis_url`` is."""
    client: Any
    if cluster:
        client = redis.asyncio.RedisCluster.from_url(redis_url)
    else:
        # Retried on a dropped connection (a restarted Redis), as docs/gateway.md advises.
        client = redis.asyncio.Redis.from_url(
            redis_url,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.01), 6),
            retry_on_error=[redis.exceptions.ConnectionError],
        )
    gateway = redis_gateway(
        client, {"slow": slow}, namespace=namespace, scope=_scope, keepalive=0.5, **options
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with gateway.running():
                yield
        finally:
            await client.aclose()

    app = Starlette(routes=[Mount("/", gateway)], lifespan=lifespan)
    app.state.gateway = gateway
    return app


def from_env() -> Starlette:
    return replica(
        os.environ["AGUI_GW_REDIS"],
        os.environ["AGUI_GW_NAMESPACE"],
        **json.loads(os.environ.get("AGUI_GW_OPTIONS", "{}")),
    )
