"""Abandoned streams on a real server: a ReplayBuffer's linger counts from the moment the last
client left (however much the agent sends meanwhile), the agent is then cancelled, and a full
buffer answers 503 with Retry-After instead of a traceback per request.

The agents here never pause for long (an event every few milliseconds, forever): an agent that
keeps talking must be cancelled as surely as a silent one. Clients are raw sockets that send
the request, read the first bytes and close.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from agui_meta._exceptions import ReplayFull
from tests.servers import serve

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

LINGER = 0.2
RUN = {"threadId": "t", "runId": "r", "messages": [], "state": {}}


def chatty_app(**replay_options: Any) -> Any:
    """``POST /chatty``: an agent that sends a text delta every 10 ms and never ends;
    ``POST /short``: one that finishes at once; ``GET /tasks``: the server loop's task count."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    replay = agui_meta.ReplayBuffer(**replay_options)
    stats = {"started": 0, "closed": 0}

    async def agent() -> AsyncIterator[dict[str, Any]]:
        stats["started"] += 1
        try:
            yield {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
            yield {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
            while True:
                await anyio.sleep(0.01)
                yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}
        finally:
            stats["closed"] += 1

    async def short() -> AsyncIterator[dict[str, Any]]:
        yield {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
        yield {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}

    async def chatty(request: Request) -> Response:
        await request.body()
        return agui_meta.EventStreamResponse(agent(), replay=replay, keepalive=None)

    async def finishing(request: Request) -> Response:
        await request.body()
        return agui_meta.EventStreamResponse(short(), replay=replay, keepalive=None)

    async def tasks(request: Request) -> Response:
        return PlainTextResponse(str(len(asyncio.all_tasks())))

    app = Starlette(
        routes=[
            Route("/chatty", chatty, methods=["POST"]),
            Route("/short", finishing, methods=["POST"]),
            Route("/tasks", tasks, methods=["GET"]),
        ]
    )
    app.state.stats = stats
    app.state.replay = replay
    return app


@pytest.fixture
def server() -> Iterator[tuple[str, Any]]:
    app = chatty_app(max_events=50, linger=LINGER, max_streams=60)
    with serve(app) as url:
        yield url, app


async def wait_for(condition: Any) -> None:
    """Poll ``condition`` (the server runs in another thread) until it holds (a hang guard)."""
    with anyio.fail_after(20):
        while not condition():  # noqa: ASYNC110 - another thread's state: nothing to wait on
            await anyio.sleep(0.01)


async def task_count(url: str) -> int:
    async with httpx.AsyncClient() as client:
        return int((await client.get(url + "/tasks")).text)


async def settle_tasks(url: str, baseline: int) -> None:
    """Wait until the server loop runs as many tasks as at ``baseline`` (a hang guard)."""
    with anyio.fail_after(20):
        while await task_count(url) != baseline:  # noqa: ASYNC110 - another thread's loop
            await anyio.sleep(0.02)


def request_bytes(url: str, path: str, headers: dict[str, str] | None = None) -> bytes:
    host = url.removeprefix("http://")
    body = json.dumps(RUN).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


async def visit(url: str, path: str, until: bytes, headers: dict[str, str] | None = None) -> bytes:
    """Send a request on a raw socket, read until ``until`` was received, then close abruptly."""
    host, port = url.removeprefix("http://").split(":")
    seen = b""
    async with await anyio.connect_tcp(host, int(port)) as sock:
        await sock.send(request_bytes(url, path, headers))
        with anyio.fail_after(20):
            while until not in seen:
                seen += await sock.receive()
    return seen


def last_id(seen: bytes) -> str:
    ids = [line[4:] for line in seen.decode().split("\n") if line.startswith("id: ")]
    return ids[-1]


@pytest.mark.parametrize("clients", [1, 60])
async def test_agents_that_never_pause_are_cancelled_once_their_clients_left(
    server: tuple[str, Any], clients: int
) -> None:
    url, app = server
    stats = app.state.stats
    baseline = await task_count(url)
    async with anyio.create_task_group() as tg:
        for _ in range(clients):
            tg.start_soon(visit, url, "/chatty", b"TEXT_MESSAGE_START")
    # Every agent keeps sending (an event every 10 ms, 20 per linger), yet every one of them is
    # cancelled: the linger counts from the moment its client left.
    await wait_for(lambda: stats["closed"] == clients)
    assert stats["started"] == clients
    await settle_tasks(url, baseline)
    # The buffer was full of abandoned streams (60 = max_streams); they ended, so it has room.
    async with httpx.AsyncClient() as client:
        response = await client.post(url + "/short", json=RUN)
    assert response.status_code == 200
    assert b"RUN_FINISHED" in response.content


async def test_a_reconnection_restarts_the_linger_and_its_departure_ends_the_run() -> None:
    app = chatty_app(max_events=50, linger=1.0, max_streams=5)  # time to come back
    stats = app.state.stats
    with serve(app) as url:
        first = await visit(url, "/chatty", b"TEXT_MESSAGE_START")
        # Back within the linger: the run goes on, and the client reads what it sends.
        again = await visit(
            url, "/chatty", b"TEXT_MESSAGE_CONTENT", {"Last-Event-ID": last_id(first)}
        )
        assert b"agui-meta-resumed" in again
        assert stats["started"] == 1
        # The resumed client leaves too: the linger counts from now; the agent is cancelled.
        await wait_for(lambda: stats["closed"] == 1)
        assert stats["started"] == 1


async def test_a_client_that_stays_keeps_a_talking_agent_running_past_the_linger(
    server: tuple[str, Any],
) -> None:
    url, app = server
    stats = app.state.stats
    host, port = url.removeprefix("http://").split(":")
    seen = b""
    async with await anyio.connect_tcp(host, int(port)) as sock:
        await sock.send(request_bytes(url, "/chatty"))
        # Three lingers' worth of events (the agent sends one per 10 ms) read by one client.
        with anyio.fail_after(20):
            while seen.count(b"TEXT_MESSAGE_CONTENT") < 3 * LINGER / 0.01:
                seen += await sock.receive()
        assert stats["closed"] == 0
    await wait_for(lambda: stats["closed"] == 1)


async def test_a_full_buffer_answers_503_with_retry_after_and_runs_nothing(
    server: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    url, app = server
    stats = app.state.stats
    host, port = url.removeprefix("http://").split(":")
    max_streams = app.state.replay.max_streams
    caplog.set_level(logging.WARNING, logger="agui_meta.server")
    async with anyio.create_task_group() as tg:
        holding = anyio.Event()
        opened = 0

        async def hold() -> None:
            nonlocal opened
            async with await anyio.connect_tcp(host, int(port)) as sock:
                await sock.send(request_bytes(url, "/chatty"))
                seen = b""
                while b"TEXT_MESSAGE_START" not in seen:
                    seen += await sock.receive()
                opened += 1
                if opened == max_streams:
                    holding.set()
                await anyio.sleep_forever()

        for _ in range(max_streams):
            tg.start_soon(hold)
        with anyio.fail_after(20):
            await holding.wait()
        async with httpx.AsyncClient() as client:
            refused = [await client.post(url + path, json=RUN) for path in ("/chatty", "/short")]
        for response in refused:
            assert response.status_code == 503
            assert response.headers["retry-after"] == str(max(1, math.ceil(LINGER)))
            assert f"holds {max_streams} running streams (max_streams)" in response.text
        assert stats["started"] == max_streams  # nothing was run for the refused requests
        with pytest.raises(agui_meta.HttpStatusError) as caught:
            await agui_meta.HttpAgent(url + "/short").run_agent()
        assert caught.value.status == 503
        tg.cancel_scope.cancel()
    # One warning line per refusal, no traceback; once the clients left, room is made again.
    refusals = [r for r in caplog.records if "refused (503)" in r.getMessage()]
    assert len(refusals) == 3 and all(r.exc_info is None for r in refusals)
    await wait_for(lambda: stats["closed"] == max_streams)
    result = await agui_meta.HttpAgent(url + "/short").run_agent()
    assert result.run_id


async def test_the_buffer_raises_replay_full_naming_its_limit() -> None:
    buffer = agui_meta.ReplayBuffer(max_streams=2, linger=2.5)
    async with buffer.open(), buffer.open():
        with pytest.raises(ReplayFull, match="holds 2 running streams") as caught:
            async with buffer.open():
                pass
        assert caught.value.retry_after == 3
    async with buffer.open():  # the two ended: the oldest is forgotten to make room
        assert len(buffer) == 2
