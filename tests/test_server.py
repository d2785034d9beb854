"""EventStreamResponse on a real uvicorn server: headers, ids, keepalive, formats, disconnects,
and the replay buffer that lets HttpAgent(reconnect=n) resume a dropped stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

import agui_meta
from tests.servers import agent_app, serve

pytestmark = pytest.mark.anyio

RUN = {
    "threadId": "t",
    "runId": "r",
    "messages": [{"id": "u", "role": "user", "content": "hi"}],
    "state": {},
}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Any]]:
    app = agent_app(max_events=100, linger=0.5)
    with serve(app) as url:
        yield url, app


async def wait_for(condition: Any) -> None:
    """Poll ``condition`` (the server runs in another thread) until it holds (10 s at most)."""
    with anyio.fail_after(10):
        while not condition():  # noqa: ASYNC110 - another thread's state: nothing to wait on
            await anyio.sleep(0.01)


async def test_sse_headers_and_event_ids(server: tuple[str, Any]) -> None:
    url, _ = server
    async with httpx.AsyncClient() as client:
        response = await client.post(url + "/thread", json=RUN)
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    decoder = agui_meta.framing.SSEDecoder()
    frames = decoder.feed(response.content) + decoder.close()
    assert decoder.retry == 1000  # sent because the endpoint has a replay buffer
    keys = {f.id.split(":")[0] for f in frames if f.id}
    assert len(keys) == 1
    assert [f.id.split(":")[1] for f in frames if f.id] == [str(n) for n in range(len(frames))]
    events = [json.loads(f.data) for f in frames]
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"


@pytest.mark.parametrize("accept", ["application/x-ndjson", "application/jsonl"])
async def test_json_lines_when_asked_for(server: tuple[str, Any], accept: str) -> None:
    url, _ = server
    async with httpx.AsyncClient() as client:
        response = await client.post(url + "/thread", json=RUN, headers={"Accept": accept})
    assert response.headers["content-type"] == "application/jsonl"
    lines = response.content.decode().splitlines()
    assert json.loads(lines[0])["type"] == "RUN_STARTED"
    assert json.loads(lines[-1])["type"] == "RUN_FINISHED"


@pytest.mark.parametrize("replay", ["1", "0"])
async def test_keepalive_then_a_disconnect_closes_the_agent(
    server: tuple[str, Any], replay: str
) -> None:
    url, app = server
    agents = app.state.agents
    before = agents["closed"]
    # A raw socket, closed abruptly once the stream has gone idle (a keepalive came).
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(RUN).encode()
    request = (
        f"POST /slow?replay={replay} HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    seen = b""
    async with await anyio.connect_tcp(host, int(port)) as sock:
        await sock.send(request)
        with anyio.fail_after(10):
            while b": keepalive\n\n" not in seen:
                seen += await sock.receive()
    assert seen.count(b"data: ") == len(agui_meta_thread_events()) - 1
    # The client went away: the pipeline and the agent's generator are closed (after the
    # replay buffer's linger when there is one).
    await wait_for(lambda: agents["closed"] == before + 1)
    assert agents["started"] >= agents["closed"]


def agui_meta_thread_events() -> list[dict[str, Any]]:
    from tests.servers import thread_script

    return thread_script(RUN)


async def test_an_unknown_last_event_id_is_refused(server: tuple[str, Any]) -> None:
    url, _ = server
    async with httpx.AsyncClient() as client:
        response = await client.post(url + "/thread", json=RUN, headers={"Last-Event-ID": "nope:3"})
    assert response.status_code == 410
    assert "cannot resume the stream" in response.text and "'nope:3'" in response.text


async def test_a_failing_agent_ends_with_run_error(server: tuple[str, Any]) -> None:
    async def broken() -> AsyncIterator[dict[str, Any]]:
        yield {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
        raise KeyError("model")

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        await agui_meta.EventStreamResponse(broken())(scope, receive, send)

    with serve(endpoint) as url, pytest.raises(agui_meta.RunFailed) as caught:
        await agui_meta.HttpAgent(url).run_agent()
    assert caught.value.code == "server_error"
    assert caught.value.message == "the agent failed: KeyError"


# ---------------------------------------------------------------------------------------------
# Resuming through a proxy that cuts the connection


async def cutting_proxy(
    listener: anyio.abc.SocketListener, upstream_port: int, cuts: list[int]
) -> None:
    """Forward TCP to the server; the n-th connection's response is cut after cuts[n] bytes."""

    async def handle(client: anyio.abc.SocketStream) -> None:
        cut = cuts.pop(0) if cuts else None
        async with (
            client,
            await anyio.connect_tcp("127.0.0.1", upstream_port) as upstream,
            anyio.create_task_group() as tg,
        ):

            async def up() -> None:
                try:
                    async for data in client:
                        await upstream.send(data)
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    pass

            tg.start_soon(up)
            sent = 0
            try:
                async for data in upstream:
                    if cut is not None and sent + len(data) >= cut:
                        await client.send(data[: cut - sent])
                        break
                    sent += len(data)
                    await client.send(data)
            except (anyio.BrokenResourceError, OSError):
                pass
            tg.cancel_scope.cancel()

    await listener.serve(handle)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("cuts", [[700], [500, 600]])
async def test_a_dropped_stream_is_resumed_and_assembles_as_an_unbroken_one(
    server: tuple[str, Any], cuts: list[int]
) -> None:
    url, app = server
    port = int(url.rsplit(":", 1)[1])
    history = [{"id": "u", "role": "user", "content": "hi"}]
    unbroken = agui_meta.HttpAgent(url + "/thread", thread_id="t", messages=history)
    expected = await unbroken.run_agent(run_id="rr")
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    proxy_port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(cutting_proxy, listener, port, list(cuts))
        agent = agui_meta.HttpAgent(
            f"http://127.0.0.1:{proxy_port}/resumable",
            thread_id="t",
            messages=history,
            reconnect=len(cuts),
            reconnect_delay=0,
        )
        first = len(app.state.agents["headers"])
        result = await agent.run_agent(run_id="rr")
        tg.cancel_scope.cancel()
    headers = app.state.agents["headers"][first:]
    assert len(headers) == 1 + len(cuts)  # ... requests reached the app
    assert "last-event-id" not in headers[0]
    assert all("last-event-id" in h for h in headers[1:])
    assert agent.messages_wire() == unbroken.messages_wire()
    assert agent.state == unbroken.state
    assert result.new_messages == expected.new_messages
    assert result.pending_tool_call_ids == expected.pending_tool_call_ids
    assert [r.status for r in agent.ledger.runs] == ["finished"]
    assert result.record is not None and expected.record is not None
    assert result.record.event_counts == expected.record.event_counts


async def test_reconnection_attempts_are_bounded(server: tuple[str, Any]) -> None:
    url, _ = server
    port = int(url.rsplit(":", 1)[1])
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    proxy_port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(cutting_proxy, listener, port, [600, 250, 250])
        agent = agui_meta.HttpAgent(
            f"http://127.0.0.1:{proxy_port}/resumable", reconnect=2, reconnect_delay=0
        )
        with pytest.raises(agui_meta.IncompleteStream, match="2 reconnection"):
            await agent.run_agent(run_id="b")
        tg.cancel_scope.cancel()
