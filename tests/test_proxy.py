"""The FastAPI proxy example end to end: a real upstream, the proxy, HttpAgent and the official
client, all over 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from tests import needs
from tests.oracle import REPO_ROOT
from tests.servers import agent_app, official_http_agent, serve

pytestmark = pytest.mark.anyio


def load_proxy() -> ModuleType:
    needs.module("fastapi")
    spec = importlib.util.spec_from_file_location(
        "example_proxy", REPO_ROOT / "examples" / "proxy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upstream_events(run: dict[str, Any]) -> list[dict[str, Any]]:
    ids = {"threadId": run["threadId"], "runId": run["runId"]}
    rid = run["runId"]
    return [
        {"type": "RUN_STARTED", **ids},
        {
            "type": "TEXT_MESSAGE_CHUNK",
            "messageId": f"{rid}-m",
            "delta": "The password is hun",
            "metadata": {"up.model": "m"},
        },
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": f"{rid}-m", "delta": "ter2, and hunter"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": f"{rid}-m", "delta": "2 again. Bye hun"},
        {"type": "TOOL_CALL_START", "toolCallId": f"{rid}-bad", "toolCallName": "delete_account"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": f"{rid}-bad", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": f"{rid}-bad"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{rid}-r1",
            "toolCallId": f"{rid}-bad",
            "content": "deleted",
        },
        {"type": "TOOL_CALL_START", "toolCallId": f"{rid}-ok", "toolCallName": "lookup"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": f"{rid}-ok", "delta": '{"q":1}'},
        {"type": "TOOL_CALL_END", "toolCallId": f"{rid}-ok"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{rid}-r2",
            "toolCallId": f"{rid}-ok",
            "content": "found",
        },
        {
            "type": "RUN_FINISHED",
            **ids,
            "usage": [{"provider": "up", "model": "m", "inputTokens": 11, "outputTokens": 4}],
        },
    ]


def upstream_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def endpoint(request: Request) -> Response:
        run = json.loads(await request.body())

        async def events() -> AsyncIterator[dict[str, Any]]:
            for event in upstream_events(run):
                yield event

        return agui_meta.EventStreamResponse(events())

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


@pytest.fixture(scope="module")
def proxy_url() -> Iterator[str]:
    proxy = load_proxy()
    with serve(upstream_app()) as upstream, serve(proxy.create_app(upstream + "/agent")) as url:
        yield url


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_proxy_stamps_redacts_filters_and_records(proxy_url: str, tmp_path: Path) -> None:
    spec = {
        "threadId": "p",
        "messages": [{"id": "u", "role": "user", "content": "hi"}],
        "runs": [{"runId": "a"}, {"runId": "b"}],
    }
    agent = agui_meta.HttpAgent(proxy_url + "/agent", thread_id="p", messages=spec["messages"])
    ours = []
    for run in spec["runs"]:
        await agent.run_agent(run_id=run["runId"])
        ours.append(agent.messages_wire())
    official = await anyio.to_thread.run_sync(
        official_http_agent, proxy_url + "/agent", spec, tmp_path
    )
    assert [line["messages"] for line in official] == ours
    by_id = {m["id"]: m for m in ours[-1]}
    text = by_id["a-m"]
    assert text["content"] == "The password is [redacted], and [redacted] again. Bye hun"
    assert text["metadata"] == {
        "up.model": "m",
        "gateway.via": "agui-meta-proxy",
        "gateway.redactions": 2,
    }
    assert "a-r1" not in by_id  # the disallowed call and its result were filtered out
    calls = [c for m in ours[-1] for c in m.get("toolCalls", [])]
    assert [c["function"]["name"] for c in calls] == ["lookup", "lookup"]
    assert calls[0]["metadata"] == {"gateway.via": "agui-meta-proxy"}
    async with httpx.AsyncClient() as client:
        usage = (await client.get(proxy_url + "/usage")).json()["runs"]
    mine = [u for u in usage if u["threadId"] == "p"]
    assert [u["runId"] for u in mine] == ["a", "b", "a", "b"]  # ours, then the official's
    assert all(u["status"] == "finished" for u in mine)
    assert mine[0]["usage"] == [
        {"provider": "up", "model": "m", "inputTokens": 11, "outputTokens": 4}
    ]


async def test_a_client_leaving_the_proxy_closes_the_upstream_agent() -> None:
    proxy = load_proxy()
    upstream_app_ = agent_app()
    agents = upstream_app_.state.agents
    with (
        serve(upstream_app_) as upstream,
        serve(proxy.create_app(upstream + "/slow?replay=0")) as url,
    ):
        host, port = url.removeprefix("http://").split(":")
        body = json.dumps(
            {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": []}
        ).encode()
        request = (
            f"POST /agent HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        seen = b""
        async with await anyio.connect_tcp(host, int(port)) as sock:
            await sock.send(request)
            with anyio.fail_after(10):
                while b"TOOL_CALL_END" not in seen:
                    seen += await sock.receive()
        assert agents["started"] == 1
        with anyio.fail_after(10):
            while agents["closed"] != 1:  # noqa: ASYNC110 - another thread's state
                await anyio.sleep(0.01)
