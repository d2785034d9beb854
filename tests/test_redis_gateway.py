"""The gateway across replicas on Redis (agui_meta.redis.redis_gateway), on a real redis-server.

Two replicas (``tests/redis_gateway_app.py``), each a uvicorn server on 127.0.0.1 with its own
Redis client, share one ``redis-server`` (``tests/redis_server.py``) and a fresh namespace. A
run accepted by one replica executes there; the other joins it, connects to its thread, stops
it, resumes it with ``Last-Event-ID``. For the death of a replica, one runs in a process of its
own and is killed with SIGKILL. Each case is compared with an undisturbed run of the same input
(the agent's output depends only on its input). ``anyio.fail_after`` only guards against hangs.
redis-py's asyncio client runs on asyncio only, so these tests do too.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from agui_meta.framing import Frame, SSEDecoder
from tests.needs import missing
from tests.redis_server import RedisServer
from tests.servers import serve

pytestmark = pytest.mark.anyio

GUARD = 30  # seconds: a hang guard, not a timing assertion
USER = {"id": "u1", "role": "user", "content": "hi"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        import redis.asyncio  # noqa: F401
    except ImportError:
        missing("the redis extra is not installed: the Redis gateway tests cannot run")
    srv = RedisServer(tmp_path_factory.mktemp("redis"), fsync="everysec")
    srv.start()
    yield srv.url
    srv.stop()


_namespaces = iter(range(10**6))


def fresh() -> str:
    return f"gw{next(_namespaces)}"


@contextlib.contextmanager
def replicas(redis_url: str, **options: Any) -> Iterator[tuple[str, str]]:
    """Two replicas sharing Redis and a fresh namespace: their base URLs."""
    from tests.redis_gateway_app import replica

    namespace = fresh()
    a, b = replica(redis_url, namespace, **options), replica(redis_url, namespace, **options)
    with serve(a, lifespan="on") as url_a, serve(b, lifespan="on") as url_b:
        yield url_a, url_b


def body(thread: str, run: str = "r1", **props: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [USER],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": props,
    }


def events_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [json.loads(f.data) for f in frames]


async def stream(
    client: httpx.AsyncClient,
    url: str,
    data: dict[str, Any] | None = None,
    *,
    last_id: str | None = None,
    upto: int | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, list[Frame]]:
    """POST and read the SSE answer (all of it, or its first ``upto`` frames)."""
    sent = {"Accept": "text/event-stream", **(headers or {})}
    if last_id is not None:
        sent["Last-Event-ID"] = last_id
    decoder = SSEDecoder()
    frames: list[Frame] = []
    with anyio.fail_after(GUARD):
        async with client.stream("POST", url, json=data or {}, headers=sent) as response:
            if response.status_code != 200:
                await response.aread()
                return response.status_code, frames
            async for chunk in response.aiter_bytes():
                frames += [f for f in decoder.feed(chunk) if f.data]
                if upto is not None and len(frames) >= upto:
                    return 200, frames[:upto]
    return 200, frames + [f for f in decoder.close() if f.data]


async def thread(client: httpx.AsyncClient, url: str, thread_id: str, **kw: Any) -> Any:
    return (await client.get(f"{url}/threads/{thread_id}", **kw)).json()


def renamed(events: list[dict[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    """``events`` with thread ``old`` named ``new``."""
    return json.loads(json.dumps(events).replace(f'"{old}"', f'"{new}"'))  # type: ignore[no-any-return]


def same_thread(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal messages, state and ledger counts (the thread ids differ)."""
    assert got["messages"] == want["messages"]
    assert got["state"] == want["state"]
    assert got["version"] == want["version"]
    assert got["activeRunId"] is None
    runs = [(r["runId"], r["status"], r.get("eventCounts")) for r in got["ledger"]["runs"]]
    assert runs == [(r["runId"], r["status"], r.get("eventCounts")) for r in want["ledger"]["runs"]]


async def test_a_run_on_a_is_joined_connected_and_read_on_b(redis_url: str) -> None:
    with replicas(redis_url) as (a, b):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            _, undisturbed = await stream(client, f"{a}/agents/slow/run", body("t0", deltas=6))
            want = await thread(client, a, "t0")
            slow = body("t1", deltas=6, pause=0.1)
            _, head = await stream(client, f"{a}/agents/slow/run", slow, upto=3)
            # The same run posted to B joins it from its first event.
            _, joined = await stream(client, f"{b}/agents/slow/run", slow)
            got = await thread(client, b, "t1")
            tab = agui_meta.HttpAgent(f"{b}/agents/slow/run", http_client=client, thread_id="t1")
            await tab.connect_agent()
    assert [e["type"] for e in events_of(joined)] == [e["type"] for e in events_of(undisturbed)]
    assert [f.id for f in joined[:3]] == [f.id for f in head]
    assert events_of(joined) == renamed(events_of(undisturbed), "t0", "t1")
    same_thread(got, want)
    assert tab.messages_wire() == got["messages"]
