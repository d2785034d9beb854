"""Streams resumable on another replica (agui_meta.redis.RedisReplay), on a real redis-server.

Two replicas of one endpoint (``tests/replay_app.py``), each a uvicorn server on 127.0.0.1 with
its own Redis client, share one ``redis-server`` (``tests/redis_server.py``). A client reads
part of a stream from replica A, the connection drops, and the reconnection with
``Last-Event-ID`` goes to replica B. For the death of a replica, A runs in a process of its own
and is killed with SIGKILL. ``anyio.fail_after`` only guards against a hang. redis-py's asyncio
client runs on asyncio only, so these tests do too.
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

import agui_meta
from agui_meta.framing import Frame, SSEDecoder
from tests.doc_blocks import doc_block
from tests.helpers import redis_server, uvicorn_process
from tests.servers import serve, thread_script

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
RUN = {
    "threadId": "t",
    "runId": "r",
    "messages": [{"id": "u", "role": "user", "content": "hi"}],
    "state": {},
}
HISTORY = RUN["messages"]
GUARD = 30  # seconds: a hang guard, not a timing assertion


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis"), fsync="everysec") as server:
        yield server.url


_namespaces = iter(range(10**6))


@contextlib.contextmanager
def replicas(redis_url: str, **options: Any) -> Iterator[tuple[str, str, Any, Any]]:
    """Two replicas sharing Redis and a fresh namespace: (url A, url B, app A, app B)."""
    from tests.replay_app import replica_app

    namespace = f"replay{next(_namespaces)}"
    a = replica_app(redis_url, namespace, **options)
    b = replica_app(redis_url, namespace, **options)
    with serve(a, lifespan="on") as url_a, serve(b, lifespan="on") as url_b:
        yield url_a, url_b, a, b


async def post(
    client: httpx.AsyncClient,
    url: str,
    *,
    last_id: str | None = None,
    upto: int | None = None,
) -> tuple[httpx.Response, list[Frame]]:
    """POST the run; the frames read (all, or the first ``upto``: then the connection drops)."""
    headers = {"Accept": "text/event-stream"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    decoder = SSEDecoder()
    frames: list[Frame] = []
    with anyio.fail_after(GUARD):
        async with client.stream("POST", url, json=RUN, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                return response, frames
            async for chunk in response.aiter_bytes():
                frames += decoder.feed(chunk)
                if upto is not None and len(frames) >= upto:
                    return response, frames[:upto]  # leaving the block closes the connection
    return response, frames + decoder.close()


def events_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [json.loads(f.data) for f in frames]


async def wait_for(condition: Any) -> None:
    """Poll ``condition`` (a server runs in another thread or process) until it holds."""
    with anyio.fail_after(GUARD):
        while not await condition():  # noqa: ASYNC110 - another process's state: nothing to wait on
            await anyio.sleep(0.02)


async def test_a_stream_read_on_a_is_resumed_on_b_exactly(redis_url: str) -> None:
    with replicas(redis_url, linger=10.0) as (url_a, url_b, _, app_b):
        async with httpx.AsyncClient() as client:
            _, unbroken = await post(client, url_a + "/agent")
            _, head = await post(client, url_a + "/agent?pause=0.02", upto=4)
            assert head[-1].id is not None
            response, rest = await post(client, url_b + "/agent", last_id=head[-1].id)
    assert response.status_code == 200
    assert response.headers[agui_meta._client.RESUMED_HEADER] == head[-1].id
    assert app_b.state.stats["started"] == 0  # B replayed; it did not run the agent
    key = head[0].id.split(":")[0] if head[0].id else ""
    ids = [f.id for f in head + rest]
    assert ids == [f"{key}:{n}" for n in range(len(unbroken))]  # no gap, no duplicate
    assert events_of(head + rest) == events_of(unbroken) == thread_script(RUN)


async def round_robin(listener: anyio.abc.SocketListener, ports: list[int], cut: int) -> None:
    """Forward the n-th TCP connection to ``ports[n % len(ports)]``; the first response is
    cut after ``cut`` bytes (the connection drops)."""
    count = 0

    async def handle(client: anyio.abc.SocketStream) -> None:
        nonlocal count
        port, limit = ports[count % len(ports)], (cut if count == 0 else None)
        count += 1
        async with (
            client,
            await anyio.connect_tcp("127.0.0.1", port) as upstream,
            anyio.create_task_group() as tg,
        ):

            async def up() -> None:
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    async for data in client:
                        await upstream.send(data)

            tg.start_soon(up)
            sent = 0
            with contextlib.suppress(anyio.BrokenResourceError, OSError):
                async for data in upstream:
                    if limit is not None and sent + len(data) >= limit:
                        await client.send(data[: limit - sent])
                        break
                    sent += len(data)
                    await client.send(data)
            tg.cancel_scope.cancel()

    await listener.serve(handle)


async def test_http_agent_reconnects_to_the_other_replica(redis_url: str) -> None:
    with replicas(redis_url, linger=10.0) as (url_a, url_b, app_a, app_b):
        unbroken = agui_meta.HttpAgent(url_a + "/agent", thread_id="t", messages=HISTORY)
        expected = await unbroken.run_agent(run_id="r")
        ports = [int(url.rsplit(":", 1)[1]) for url in (url_a, url_b)]
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        proxy = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(round_robin, listener, ports, 700)
            agent = agui_meta.HttpAgent(
                f"http://127.0.0.1:{proxy}/agent?pause=0.02",
                thread_id="t",
                messages=HISTORY,
                reconnect=1,
                reconnect_delay=0,
            )
            with anyio.fail_after(GUARD):
                result = await agent.run_agent(run_id="r")
            tg.cancel_scope.cancel()
    # The run started on A; the reconnection reached B, which resumed it.
    [resumed] = app_b.state.stats["headers"]
    assert "last-event-id" in resumed
    assert all("last-event-id" not in h for h in app_a.state.stats["headers"])
    assert app_b.state.stats["started"] == 0
    assert agent.messages_wire() == unbroken.messages_wire()
    assert agent.state == unbroken.state
    assert result.new_messages == expected.new_messages
    assert result.pending_tool_call_ids == expected.pending_tool_call_ids
    assert result.record is not None and expected.record is not None
    assert result.record.event_counts == expected.record.event_counts


async def test_an_unknown_or_never_sent_id_is_refused_on_any_replica(redis_url: str) -> None:
    with replicas(redis_url) as (url_a, url_b, _, _b):
        async with httpx.AsyncClient() as client:
            _, frames = await post(client, url_a + "/agent")
            key = (frames[0].id or "").split(":")[0]
            for last_id, reason in [
                ("nope:3", "no stream with event id 'nope:3' is held (unknown or expired)"),
                ("0123456789abcdef0123456789abcdef:0", "(unknown or expired)"),
                ("{x}:1", "(unknown or expired)"),
                (f"{key}:{len(frames)}", f"event id '{key}:{len(frames)}' was never sent"),
            ]:
                response, _f = await post(client, url_b + "/agent", last_id=last_id)
                assert response.status_code == 410, last_id
                assert response.text.startswith("cannot resume the stream: ")
                assert reason in response.text


async def test_an_expired_stream_is_refused(redis_url: str) -> None:
    import redis.asyncio

    with replicas(redis_url, ttl=0.3) as (url_a, url_b, app_a, _):
        async with httpx.AsyncClient() as client:
            _, frames = await post(client, url_a + "/agent")
            assert events_of(frames)[-1]["type"] == "RUN_FINISHED"
            key = (frames[0].id or "").split(":")[0]
            keys = app_a.state.replay.keys
            check = redis.asyncio.Redis.from_url(redis_url)
            try:

                async def gone() -> bool:
                    return not await check.exists(keys.replay(key))

                await wait_for(gone)  # the TTL ran out
            finally:
                await check.aclose()
            response, _f = await post(client, url_b + "/agent", last_id=frames[2].id)
    assert response.status_code == 410
    assert f"no stream with event id '{key}:2' is held (unknown or expired)" in response.text


async def test_past_maxlen_only_the_last_events_resume(redis_url: str) -> None:
    with replicas(redis_url, maxlen=3, approximate=False) as (url_a, url_b, _, _b):
        async with httpx.AsyncClient() as client:
            _, frames = await post(client, url_a + "/agent")
            n = len(frames)
            # Kept: the last 3 entries (the last two events and the end marker).
            response, _f = await post(client, url_b + "/agent", last_id=frames[n - 4].id)
            assert response.status_code == 410
            assert "are no longer held (the replay store keeps the last 3 events" in response.text
            response, rest = await post(client, url_b + "/agent", last_id=frames[n - 3].id)
    assert response.status_code == 200
    assert events_of(rest) == events_of(frames[n - 2 :])


async def test_an_abandoned_run_ends_the_resumed_stream_with_an_error(redis_url: str) -> None:
    with replicas(redis_url, linger=0.1) as (url_a, url_b, app_a, _):
        async with httpx.AsyncClient() as client:
            _, head = await post(client, url_a + "/agent?stall=3", upto=2)

            async def closed() -> bool:
                return bool(app_a.state.stats["closed"])  # no reader for linger: cancelled

            await wait_for(closed)
            response, rest = await post(client, url_b + "/agent", last_id=head[-1].id)
    assert response.status_code == 200
    events = events_of(rest)
    assert events[:-1] == thread_script(RUN)[2:3]
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "stream_lost"
    assert "ended after 3 events without finishing the run (abandoned" in events[-1]["message"]


@contextlib.contextmanager
def replica_process(redis_url: str, namespace: str, **options: Any) -> Iterator[tuple[str, Any]]:
    """Replica A in a process of its own (uvicorn), to be killed: (its URL, the process)."""
    env = {
        "AGUI_REPLAY_REDIS": redis_url,
        "AGUI_REPLAY_NAMESPACE": namespace,
        "AGUI_REPLAY_OPTIONS": json.dumps(options),
    }
    with uvicorn_process("tests.replay_app:from_env", env, guard=GUARD) as served:
        yield served


async def stalled_in_redis(redis_url: str, namespace: str, event_id: str | None, n: int) -> None:
    """Wait until the stream of ``event_id`` holds ``n`` events in Redis (A appended them)."""
    import redis.asyncio

    from agui_meta.redis import Keys

    stream = Keys(namespace).replay((event_id or "").split(":")[0])
    check = redis.asyncio.Redis.from_url(redis_url)
    try:

        async def held() -> bool:
            return int(await check.xlen(stream)) >= n

        await wait_for(held)
    finally:
        await check.aclose()


async def test_a_killed_producer_ends_the_resumed_stream_with_an_error(redis_url: str) -> None:
    from tests.replay_app import replica_app

    namespace = f"replay{next(_namespaces)}"
    options = {"linger": 10.0, "lost_after": 0.5}
    b = replica_app(redis_url, namespace, **options)
    with (
        replica_process(redis_url, namespace, **options) as (url_a, process),
        serve(b, lifespan="on") as url_b,
    ):
        async with httpx.AsyncClient() as client:
            _, head = await post(client, url_a + "/agent?stall=4", upto=2)
            await stalled_in_redis(redis_url, namespace, head[0].id, 4)
            process.send_signal(signal.SIGKILL)  # A dies mid-run: no end marker
            process.wait(GUARD)
            response, rest = await post(client, url_b + "/agent", last_id=head[-1].id)
            again = await post(client, url_b + "/agent", last_id=head[-1].id)
    assert response.status_code == 200
    events = events_of(rest)
    assert events[:-1] == thread_script(RUN)[2:4]  # what A kept before it died
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "stream_lost"
    assert "stopped after 4 events without finishing the run" in events[-1]["message"]
    assert events_of(again[1]) == events  # the same answer to the same id


async def test_http_agent_gets_run_failed_when_the_producer_died(redis_url: str) -> None:
    from tests.replay_app import replica_app

    namespace = f"replay{next(_namespaces)}"
    options = {"linger": 10.0, "lost_after": 0.5}
    b = replica_app(redis_url, namespace, **options)
    with (
        replica_process(redis_url, namespace, **options) as (url_a, process),
        serve(b, lifespan="on") as url_b,
    ):
        port_a, port_b = (int(u.rsplit(":", 1)[1]) for u in (url_a, url_b))
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        proxy = listener.extra(anyio.abc.SocketAttribute.local_port)

        async def kill_a_then_proxy() -> None:
            await round_robin(listener, [port_a, port_b], 10**9)

        agent = agui_meta.HttpAgent(
            f"http://127.0.0.1:{proxy}/agent?stall=4",
            thread_id="t",
            messages=HISTORY,
            reconnect=1,
            reconnect_delay=0,
        )

        async def kill_when_stalled(run: Any) -> None:
            async for update in run:
                if update.event.type == "TOOL_CALL_START":
                    process.send_signal(signal.SIGKILL)  # A dies: the connection drops

        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(kill_a_then_proxy)
            with anyio.fail_after(GUARD), pytest.raises(agui_meta.RunFailed) as caught:
                async with agent.run(run_id="r") as run:
                    await kill_when_stalled(run)
            tg.cancel_scope.cancel()
    assert caught.value.code == "stream_lost"
    assert "without finishing the run" in caught.value.message
    assert [m["id"] for m in agent.messages_wire()] == ["u", "r-t"]


async def test_the_buffer_in_memory_ends_an_abandoned_stream_with_stream_lost() -> None:
    buffer = agui_meta.ReplayBuffer(max_events=10, linger=5.0)
    async with buffer.open() as log:
        await log.append([(0, b"data: a\n\n"), (1, b"data: b\n\n")])
    # Left without end(): abandoned (the run was cancelled).
    reader = await buffer.resume(f"{log.key}:0")
    assert not isinstance(reader, str)
    try:
        assert await reader.read(1.0) == [b"data: b\n\n"]
        with pytest.raises(agui_meta.StreamLost, match="abandoned after 2 events"):
            await reader.read(1.0)
    finally:
        await reader.aclose()


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_both_stores_keep_one_contract(redis_url: str, store: str) -> None:
    """The same calls on ReplayBuffer and RedisReplay: refused ids, replay, end, keepalive."""
    import redis.asyncio

    from agui_meta.redis import RedisReplay

    client = redis.asyncio.Redis.from_url(redis_url)
    replay: agui_meta.Replay = (
        agui_meta.ReplayBuffer(max_events=100, linger=1.0)
        if store == "memory"
        else RedisReplay(client, namespace=f"replay{next(_namespaces)}", linger=1.0)
    )
    try:
        assert "unknown or expired" in str(await replay.resume("abc:0"))
        async with replay.open() as log:
            first = log.reader()
            await log.append([(0, b"data: 0\n\n"), (1, b"data: 1\n\n")])
            assert await first.read(1.0) == [b"data: 0\n\n", b"data: 1\n\n"]
            assert "was never sent" in str(await replay.resume(f"{log.key}:2"))
            later = await replay.resume(f"{log.key}:0")
            assert not isinstance(later, str)
            assert await later.read(0.05) == [b"data: 1\n\n"]
            assert await later.read(0.05) == []  # nothing new within the wait: a keepalive
            await log.append([(2, b"data: 2\n\n")])
            await log.end()
            assert await later.read(1.0) == [b"data: 2\n\n"]
            assert await later.read(1.0) is None
            assert await first.read(1.0) == [b"data: 2\n\n"]
            assert await first.read(1.0) is None
            await first.aclose()
            await later.aclose()
    finally:
        await client.aclose()


async def test_the_docs_replicas_resume_each_others_streams(redis_url: str) -> None:
    block = doc_block("RedisReplay(").code

    async def my_agent(run: dict[str, Any]) -> Any:
        for event in thread_script(run):
            await anyio.sleep(0.02)
            yield event

    apps = []
    for _ in range(2):  # two replicas, each with its own client
        namespace: dict[str, Any] = {}
        exec(compile(block, "docs/serving.md", "exec"), namespace)  # noqa: S102 - running the docs is the point
        namespace.update(REDIS_URL=redis_url, my_agent=my_agent)  # read when the app runs
        apps.append(namespace["app"])
    with serve(apps[0], lifespan="on") as url_a, serve(apps[1], lifespan="on") as url_b:
        async with httpx.AsyncClient() as client:
            _, head = await post(client, url_a + "/agent", upto=3)
            response, rest = await post(client, url_b + "/agent", last_id=head[-1].id)
    assert response.headers[agui_meta._client.RESUMED_HEADER] == head[-1].id
    assert events_of(head + rest) == thread_script(RUN)


async def test_a_reader_on_b_keeps_the_run_on_a_going_past_linger(redis_url: str) -> None:
    # The run outlasts A's linger after its client left; the reader on B marks the stream as
    # read, so A does not abandon it.
    with replicas(redis_url, linger=0.5) as (url_a, url_b, app_a, _):
        async with httpx.AsyncClient() as client:
            _, head = await post(client, url_a + "/agent?pause=0.25", upto=2)
            response, rest = await post(client, url_b + "/agent", last_id=head[-1].id)
    assert response.status_code == 200
    assert events_of(head + rest) == thread_script(RUN)
    assert app_a.state.stats["started"] == 1


async def test_a_reader_that_falls_behind_the_trimming_ends_with_stream_lost(
    redis_url: str,
) -> None:
    import redis.asyncio

    from agui_meta.redis import RedisReplay

    client = redis.asyncio.Redis.from_url(redis_url)
    replay = RedisReplay(
        client, namespace=f"replay{next(_namespaces)}", maxlen=3, approximate=False
    )
    try:
        async with replay.open() as log:
            await log.append([(n, f"data: {n}\n\n".encode()) for n in range(3)])
            reader = await replay.resume(f"{log.key}:0")
            assert not isinstance(reader, str)
            await log.append([(n, f"data: {n}\n\n".encode()) for n in range(3, 7)])
            with pytest.raises(agui_meta.StreamLost, match=r":1 to \S+:3 were trimmed"):
                await reader.read(1.0)
            await log.end()
    finally:
        await client.aclose()
