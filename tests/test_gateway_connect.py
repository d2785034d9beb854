"""``POST /agents/{name}/connect``: a fresh client joins a thread, idle or in the middle of a run.

The joining clients are the official ``HttpAgent`` (``http_agent.cjs``: its ``runAgent``
pointed at the connect route, so the official verifier checks the whole stream, prelude
included) and agui-meta's ``HttpAgent``. A run is held in the middle of its text message, or
of its tool call's arguments, while they join; released once the gateway counts them as
readers. Every client ends with the thread the gateway saved.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from agui_meta._runs import Run
from agui_meta.gateway import Gateway
from tests.gateway_agents import (
    areached,
    await_until,
    everything_open,
    frames,
    nested,
    release,
    run_body,
    scripted,
    types,
)
from tests.oracle import OracleUnavailable, oracle_missing, run_oracle
from tests.servers import official_http_agent, serve

pytestmark = pytest.mark.anyio

USER = {"id": "u1", "role": "user", "content": "hi"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def gateway() -> Gateway:
    return Gateway({"scripted": scripted, "open": everything_open, "nested": nested})


@pytest.fixture
def url(gateway: Gateway) -> Iterator[str]:
    with serve(gateway, lifespan="on") as base:
        yield base


def stored(url: str, thread_id: str) -> dict[str, Any]:
    return httpx.get(f"{url}/threads/{thread_id}", timeout=30).json()  # type: ignore[no-any-return]


async def test_the_official_client_connects_to_an_idle_thread(url: str, tmp_path: Path) -> None:
    await agui_meta.HttpAgent(
        f"{url}/agents/scripted/run", thread_id="t", messages=[USER]
    ).run_agent(run_id="r1")
    spec = {"threadId": "t", "runs": [{}]}
    [line] = await anyio.to_thread.run_sync(
        official_http_agent, f"{url}/agents/scripted/connect", spec, tmp_path
    )
    assert "error" not in line, line
    thread = stored(url, "t")
    assert line["messages"] == thread["messages"] and line["state"] == thread["state"]
    assert stored(url, "t")["version"] == 1  # connecting changes nothing


def test_connecting_to_an_unknown_thread_is_404(url: str) -> None:
    answer = httpx.post(f"{url}/agents/scripted/connect", json={"threadId": "nope"}, timeout=30)
    assert answer.status_code == 404
    bad = httpx.post(f"{url}/agents/scripted/connect", json={"follow": True}, timeout=30)
    assert bad.status_code == 400 and "threadId" in bad.json()["error"]


@pytest.mark.parametrize("at", ["text", "tool"])
async def test_clients_joining_mid_run_end_with_the_same_thread(
    gateway: Gateway, url: str, at: str, tmp_path: Path
) -> None:
    hold = f"mid-{at}"
    first = agui_meta.HttpAgent(f"{url}/agents/scripted/run", thread_id="t", messages=[USER])
    joined = agui_meta.HttpAgent(f"{url}/agents/scripted/run", thread_id="t")
    official: list[dict[str, Any]] = []

    async def run_official() -> None:
        spec = {"threadId": "t", "runs": [{}]}
        official.extend(
            await anyio.to_thread.run_sync(
                official_http_agent, f"{url}/agents/scripted/connect", spec, tmp_path
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: first.run_agent(run_id="r1", forwarded_props={"hold": hold, "at": at})
        )
        await areached(hold)
        tg.start_soon(run_official)
        tg.start_soon(joined.connect_agent)

        def readers() -> int:
            run = gateway.registry.active_run("t")
            return run.readers if isinstance(run, Run) else -1

        await await_until(lambda: readers() == 3, "both joining clients to be reading")
        release(hold)
    thread = stored(url, "t")
    assert thread["version"] == 1
    [line] = official
    assert "error" not in line, line
    assert line["messages"] == thread["messages"] == first.messages_wire()
    assert joined.messages_wire() == thread["messages"]
    assert line["state"] == joined.state == first.state == thread["state"] == {"turns": 1}


async def test_follow_streams_the_later_runs_of_the_thread(url: str) -> None:
    await agui_meta.HttpAgent(
        f"{url}/agents/scripted/run", thread_id="t", messages=[USER]
    ).run_agent(run_id="r1")
    received: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream(
            "POST", f"{url}/agents/scripted/connect?follow=true", json={"threadId": "t"}
        ) as answer,
    ):
        body = b""
        runs = 0
        async for chunk in answer.aiter_bytes():
            body += chunk
            received = [e for _, e in frames(body)]
            finished = types(received).count("RUN_FINISHED")
            if finished == 1 and runs == 0:  # the prelude is complete: run twice
                runs = 1
                for run_id in ("r2", "r3"):
                    done = await client.post(
                        f"{url}/agents/scripted/run", json=run_body("t", run_id)
                    )
                    assert done.status_code == 200
            if finished == 3:
                break
    kinds = types(received)
    assert kinds[:4] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert [e["runId"] for e in received if e["type"] == "RUN_STARTED"][1:] == ["r2", "r3"]


async def test_a_follower_stream_ends_when_its_thread_is_deleted(url: str) -> None:
    await agui_meta.HttpAgent(
        f"{url}/agents/scripted/run", thread_id="t", messages=[USER]
    ).run_agent(run_id="r1")
    async with httpx.AsyncClient(timeout=30) as client:
        async with client.stream(
            "POST", f"{url}/agents/scripted/connect", json={"threadId": "t", "follow": True}
        ) as answer:
            body = b""
            async for chunk in answer.aiter_bytes():
                body += chunk
                if types(e for _, e in frames(body)).count("RUN_FINISHED") == 1:
                    deleted = await client.delete(f"{url}/threads/t")
                    assert deleted.status_code == 204
        # The stream ended by itself: the prelude, nothing after.
        assert types(e for _, e in frames(body)) == [
            "RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED",
        ]  # fmt: skip


async def test_a_run_stopped_with_everything_open_passes_the_official_verifier(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        streamed = b""

        async def run() -> None:
            nonlocal streamed
            body = run_body("t", "r1", [USER], subagent=True)
            streamed = (await client.post(f"{url}/agents/open/run", json=body)).content

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while (await client.get(f"{url}/threads/t")).json().get("activeRunId") != "r1":  # noqa: ASYNC110 - the server's state
                await anyio.sleep(0.005)
            assert (await client.post(f"{url}/agents/open/stop", json={"threadId": "t"})).is_success
    events = [e for _, e in frames(streamed)]
    assert types(events)[-7:] == [
        "TOOL_CALL_END", "TEXT_MESSAGE_END", "REASONING_MESSAGE_END", "REASONING_END",
        "STEP_FINISHED", "SUBAGENT_ERROR", "RUN_FINISHED",
    ]  # fmt: skip
    try:
        [result] = run_oracle([{"name": "stopped", "events": events}])
    except OracleUnavailable as exc:
        oracle_missing(exc)
    assert "error" not in result, result
    assert result["messages"] == stored(url, "t")["messages"]


async def test_the_official_client_joins_a_run_with_steps_and_reasoning_open(
    gateway: Gateway, url: str, tmp_path: Path
) -> None:
    first = agui_meta.HttpAgent(f"{url}/agents/open/run", thread_id="t", messages=[USER])
    official: list[dict[str, Any]] = []

    async def run_official() -> None:
        spec = {"threadId": "t", "runs": [{}]}
        official.extend(
            await anyio.to_thread.run_sync(
                official_http_agent, f"{url}/agents/open/connect", spec, tmp_path
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: first.run_agent(run_id="r1", forwarded_props={"hold": "open"}))
        await areached("open")
        tg.start_soon(run_official)

        def readers() -> int:
            run = gateway.registry.active_run("t")
            return run.readers if isinstance(run, Run) else -1

        await await_until(lambda: readers() == 2, "the official client to be reading")
        release("open")
    [line] = official
    assert "error" not in line, line
    thread = stored(url, "t")
    assert line["messages"] == thread["messages"] == first.messages_wire()
    assert line["state"] == thread["state"] == {"done": True}


async def test_clients_joining_a_run_with_nested_subagents_open_end_with_the_same_thread(
    gateway: Gateway, url: str, tmp_path: Path
) -> None:
    # Subagent "b" (under "a", which has ended) holds a step, a message and a tool call open,
    # "c" (under "b") a reasoning message: both are started again in the prelude, with their
    # items under them, so their later tagged events (and "d", a new child of the ended "a")
    # pass the official verifier.
    first = agui_meta.HttpAgent(f"{url}/agents/nested/run", thread_id="t", messages=[USER])
    joined = agui_meta.HttpAgent(f"{url}/agents/nested/run", thread_id="t")
    official: list[dict[str, Any]] = []

    async def run_official() -> None:
        spec = {"threadId": "t", "runs": [{}]}
        official.extend(
            await anyio.to_thread.run_sync(
                official_http_agent, f"{url}/agents/nested/connect", spec, tmp_path
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: first.run_agent(run_id="r1", forwarded_props={"hold": "nested"}))
        await areached("nested")
        tg.start_soon(run_official)
        tg.start_soon(joined.connect_agent)

        def readers() -> int:
            run = gateway.registry.active_run("t")
            return run.readers if isinstance(run, Run) else -1

        await await_until(lambda: readers() == 3, "both joining clients to be reading")
        release("nested")
    [line] = official
    assert "error" not in line, line
    thread = stored(url, "t")
    assert line["messages"] == thread["messages"] == first.messages_wire()
    assert joined.messages_wire() == thread["messages"]
    assert [m["id"] for m in thread["messages"]] == ["u1", "p", "bm", "cr"]
    assert [m.get("subagentRunId") for m in thread["messages"]] == [None, None, "b", "c"]
