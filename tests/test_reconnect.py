"""HttpAgent(reconnect=n) against hostile raw-socket servers on 127.0.0.1.

- ``retry:`` of any size is capped (``max_reconnect_delay``), waits back off, and all the
  reconnections of a run fit in ``reconnect_timeout``: a server asking for 10^18 ms, or for
  0 ms over and over, neither hangs the client nor gets hammered;
- a stream whose last events came without an id of their own is not resumed from the id
  before them (the server would send them again: text "ABAB" instead of "AB").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.abc
import pytest

import agui_meta
from agui_meta._client import MIN_BACKOFF, _backoff

pytestmark = pytest.mark.anyio

Respond = Callable[[int, dict[str, str]], bytes | None]


def sse(event: dict[str, Any], id: str | None = None) -> bytes:
    head = f"id: {id}\n" if id is not None else ""
    return (head + "data: " + json.dumps(event) + "\n\n").encode()


def response(body: bytes, *, resumed: str | None = None) -> bytes:
    """A 200 SSE response without a length: it ends when the server closes the socket."""
    extra = f"agui-meta-resumed: {resumed}\r\n" if resumed is not None else ""
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n{extra}\r\n"
    return head.encode() + body


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Respond], Any]]:
    """``start(respond)``: a raw HTTP server answering request ``n`` (from 0) with
    ``respond(n, headers)`` then closing (``None``: never answering); returns
    ``(url, requests)``."""
    async with anyio.create_task_group() as tg:

        async def start(respond: Respond) -> tuple[str, list[dict[str, str]]]:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            requests: list[dict[str, str]] = []

            async def handle(stream: anyio.abc.SocketStream) -> None:
                async with stream:
                    try:
                        data = b""
                        while b"\r\n\r\n" not in data:
                            data += await stream.receive()
                        head, _, body = data.partition(b"\r\n\r\n")
                        headers = {}
                        for line in head.decode("latin-1").split("\r\n")[1:]:
                            name, _, value = line.partition(":")
                            headers[name.strip().lower()] = value.strip()
                        while len(body) < int(headers.get("content-length", "0")):
                            body += await stream.receive()
                        requests.append(headers)
                        answer = respond(len(requests) - 1, headers)
                        if answer is None:
                            await anyio.sleep_forever()
                        await stream.send(answer)
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                        pass

            async def serve() -> None:
                async with listener:
                    await listener.serve(handle)

            tg.start_soon(serve)
            return f"http://127.0.0.1:{port}", requests

        yield start
        tg.cancel_scope.cancel()


IDS = {"threadId": "t", "runId": "r"}
STARTED = {"type": "RUN_STARTED", **IDS}
FINISHED = {"type": "RUN_FINISHED", **IDS}


def text(delta: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta}


MESSAGE_START = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
MESSAGE_END = {"type": "TEXT_MESSAGE_END", "messageId": "m"}


def retry_then_resume(retry: str) -> Respond:
    """A first connection asking for ``retry`` then dropping; the reconnection finishes."""

    def respond(n: int, headers: dict[str, str]) -> bytes:
        if n == 0:
            return response(f"retry: {retry}\n\n".encode() + sse(STARTED, "k:0"))
        return response(sse(FINISHED, "k:1"), resumed=headers.get("last-event-id"))

    return respond


@pytest.mark.parametrize("retry", ["1000000000000000000", str(2**63), "9" * 40, "3600000"])
async def test_a_huge_retry_is_capped(raw_server: Any, retry: str) -> None:
    url, requests = await raw_server(retry_then_resume(retry))
    agent = agui_meta.HttpAgent(url, reconnect=1, max_reconnect_delay=0.05)
    with anyio.fail_after(20):  # a hang guard: uncapped, the client would sleep for ages
        result = await agent.run_agent(run_id="r")
    assert result.run_id == "r"
    assert [r.get("last-event-id") for r in requests] == [None, "k:0"]


@pytest.mark.parametrize("retry", [str(10**17), "600000"])
async def test_a_wait_past_the_reconnect_timeout_fails_at_once(raw_server: Any, retry: str) -> None:
    url, requests = await raw_server(retry_then_resume(retry))
    agent = agui_meta.HttpAgent(url, reconnect=5, reconnect_timeout=1.0)
    with anyio.fail_after(20), pytest.raises(agui_meta.IncompleteStream) as caught:
        await agent.run_agent(run_id="r")
    message = str(caught.value)
    assert "would wait 30 s" in message  # the default cap, not the server's retry
    assert f"the server's retry being {retry} ms" in message
    assert "reconnect_timeout (1 s" in message
    assert len(requests) == 1


@pytest.mark.parametrize("retry", ["0", None])
async def test_a_server_that_keeps_dropping_is_not_hammered(
    raw_server: Any, retry: str | None
) -> None:
    def respond(n: int, headers: dict[str, str]) -> bytes:
        head = f"retry: {retry}\n\n".encode() if retry is not None else b""
        event = STARTED if n == 0 else {"type": "CUSTOM", "name": "tick", "value": n}
        return response(head + sse(event, f"k:{n}"), resumed=headers.get("last-event-id"))

    url, requests = await raw_server(respond)
    agent = agui_meta.HttpAgent(url, reconnect=10**6, reconnect_delay=0, reconnect_timeout=0.5)
    with anyio.fail_after(20), pytest.raises(agui_meta.IncompleteStream, match="past reconnect"):
        await agent.run_agent(run_id="r")
    # The waits double from MIN_BACKOFF: 0 s, then 0.2 s, then 0.4 s would pass the 0.5 s the
    # reconnections may take. However fast the machine, at most two reconnections are made.
    assert 1 <= len(requests) <= 3
    assert all(r.get("last-event-id") == f"k:{n}" for n, r in enumerate(requests[1:]))


@pytest.mark.parametrize("answer", ["garbage", "silence"])
async def test_reconnections_that_are_never_answered_fit_in_the_timeout(
    raw_server: Any, answer: str
) -> None:
    def respond(n: int, headers: dict[str, str]) -> bytes | None:
        if n == 0:
            return response(b"retry: 0\n\n" + sse(STARTED, "k:0"))
        return b"this is not HTTP\r\n\r\n" if answer == "garbage" else None

    url, requests = await raw_server(respond)
    agent = agui_meta.HttpAgent(url, reconnect=10**6, reconnect_delay=0, reconnect_timeout=0.5)
    with anyio.fail_after(20), pytest.raises(agui_meta.IncompleteStream) as caught:
        await agent.run_agent(run_id="r")
    message = str(caught.value)
    if answer == "silence":  # the first reconnection waits for headers until the deadline
        assert "took longer than reconnect_timeout (0.5 s)" in message
        assert 1 <= len(requests) <= 2
    else:
        assert "past reconnect_timeout" in message
        assert 2 <= len(requests) <= 3


def test_the_backoff_doubles_from_the_server_retry_and_is_capped() -> None:
    assert [_backoff(n, 0.0, 30.0) for n in range(1, 6)] == [
        0.0,
        2 * MIN_BACKOFF,
        4 * MIN_BACKOFF,
        8 * MIN_BACKOFF,
        16 * MIN_BACKOFF,
    ]
    assert [_backoff(n, 1.0, 10.0) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert _backoff(1, 1e15, 30.0) == 30.0
    assert _backoff(10**9, 1e15, 30.0) == 30.0  # no overflow, however many attempts


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reconnect_delay": -1}, "reconnect_delay"),
        ({"max_reconnect_delay": float("nan")}, "max_reconnect_delay"),
        ({"reconnect_timeout": 0}, "reconnect_timeout"),
        ({"reconnect_timeout": float("nan")}, "reconnect_timeout"),
    ],
)
def test_bad_reconnect_settings_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(agui_meta.UsageError, match=match):
        agui_meta.HttpAgent("http://127.0.0.1:1/", **kwargs)


# ---------------------------------------------------------------------------------------------
# Events without ids are never applied twice


def first_connection(shape: str) -> bytes:
    """RUN_STARTED with an id, then the message's start and "A" in the given shape, dropped."""
    if shape == "no-id":
        tail = sse(MESSAGE_START) + sse(text("A"))
    elif shape == "id-reset":  # an empty id field resets the last event id
        tail = sse(MESSAGE_START, "") + sse(text("A"), "")
    elif shape == "id-repeated":
        tail = sse(MESSAGE_START, "k:0") + sse(text("A"), "k:0")
    else:  # "cut": the same, and the connection cut in the middle of the next event
        tail = sse(MESSAGE_START) + sse(text("A")) + b'data: {"type": "TEXT_MES'
    return sse(STARTED, "k:0") + tail


def faithful_resume(events: list[bytes]) -> Respond:
    """Answers a reconnection with every event after the id it names (what a replay does)."""

    def respond(n: int, headers: dict[str, str]) -> bytes:
        if n == 0:
            return response(b"retry: 0\n\n" + b"".join(events))
        after = int(headers["last-event-id"].split(":")[1]) + 1
        rest = [sse(MESSAGE_START), sse(text("A")), sse(text("B")), sse(MESSAGE_END)]
        return response(b"".join(rest[after - 1 :]) + sse(FINISHED), resumed="yes")

    return respond


@pytest.mark.parametrize("shape", ["no-id", "id-reset", "id-repeated", "cut"])
async def test_events_without_an_id_of_their_own_are_not_resumed_twice(
    raw_server: Any, shape: str
) -> None:
    url, requests = await raw_server(faithful_resume([first_connection(shape)]))
    agent = agui_meta.HttpAgent(url, reconnect=3, reconnect_delay=0)
    with anyio.fail_after(20), pytest.raises(agui_meta.IncompleteStream) as caught:
        await agent.run_agent(run_id="r")
    assert "last 2 event(s) came without an id of their own after 'k:0'" in str(caught.value)
    assert "would apply them twice" in str(caught.value)
    assert len(requests) == 1  # no reconnection was made
    assert [m.get("content") for m in agent.messages_wire()] == ["A"]  # never "AA", "ABAB"


async def test_events_each_with_an_id_resume_exactly_once(raw_server: Any) -> None:
    def respond(n: int, headers: dict[str, str]) -> bytes:
        events = [STARTED, MESSAGE_START, text("A"), text("B"), MESSAGE_END, FINISHED]
        framed = [sse(e, f"k:{i}") for i, e in enumerate(events)]
        if n == 0:
            return response(b"retry: 0\n\n" + b"".join(framed[:3]))
        after = int(headers["last-event-id"].split(":")[1]) + 1
        return response(b"".join(framed[after:]), resumed=headers["last-event-id"])

    url, requests = await raw_server(respond)
    agent = agui_meta.HttpAgent(url, reconnect=1, reconnect_delay=0)
    with anyio.fail_after(20):
        await agent.run_agent(run_id="r")
    assert [r.get("last-event-id") for r in requests] == [None, "k:2"]
    assert [m.get("content") for m in agent.messages_wire()] == ["AB"]
