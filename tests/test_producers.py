"""HttpAgent against producers nobody here wrote, on 127.0.0.1, with the official HttpAgent.

- pydantic-ai's AG-UI app (``AGUIAdapter.dispatch_request``) driving a ``FunctionModel``:
  streamed text, a backend tool call with its result, and a frontend tool (declared in the
  run input) answered by the client in a second run;
- ``ag-ui-protocol``'s ``EventEncoder`` writing ``ag_ui.core`` events, in both of its formats
  asked for by ``Accept``;
- the project's own example server (``examples/server.py``).

Each thread is run by agui-meta's HttpAgent and by the official one against the same endpoint;
messages and state agree after every run (pydantic-ai mints random message ids, so ids are
compared by order of first appearance).
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import agui_meta
from tests import needs
from tests.oracle import REPO_ROOT
from tests.servers import official_http_agent, serve

pytestmark = pytest.mark.anyio

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def same_ids(value: Any) -> Any:
    """``value`` with UUIDs replaced by ``id-<n>`` in order of first appearance."""
    seen: dict[str, str] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, str) and _UUID.match(v):
            return seen.setdefault(v, f"id-{len(seen)}")
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return walk(value)


async def run_spec(url: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    agent = agui_meta.HttpAgent(
        url,
        thread_id=spec["threadId"],
        messages=spec.get("messages", []),
        state=spec.get("state"),
    )
    lines = []
    for n, run in enumerate(spec["runs"]):
        for message in run.get("addMessages", []):
            agent.add_message(message)
        result = await agent.run_agent(
            run_id=run.get("runId"), tools=run.get("tools", []), context=run.get("context", [])
        )
        lines.append(
            {
                "run": n,
                "messages": agent.messages_wire(),
                "state": agent.state,
                "newMessages": result.new_messages,
                "result": result.result,
                "pending": result.pending_tool_call_ids,
            }
        )
    return lines


async def compare_with_official(
    url: str, spec: dict[str, Any], tmp_path: Path, normalise: Any = same_ids
) -> list[dict[str, Any]]:
    ours = await run_spec(url, spec)
    official = await anyio.to_thread.run_sync(official_http_agent, url, spec, tmp_path)
    assert len(official) == len(ours) == len(spec["runs"])
    for mine, theirs in zip(ours, official, strict=True):
        assert "error" not in theirs, theirs
        assert normalise(mine["messages"]) == normalise(theirs["messages"]), mine["run"]
        assert mine["state"] == theirs["state"], mine["run"]
        assert normalise(mine["newMessages"]) == normalise(theirs["newMessages"]), mine["run"]
    return ours


# ---------------------------------------------------------------------------------------------
# pydantic-ai


def pydantic_ai_app() -> Any:
    needs.module("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        last = messages[-1]
        part = last.parts[-1] if isinstance(last, ModelRequest) else None
        if isinstance(part, ToolReturnPart) and part.tool_name == "lookup":
            # The backend tool answered: call the frontend tool (declared by the client).
            yield {
                0: DeltaToolCall(name="show_weather", json_args='{"city": ', tool_call_id="fc-1")
            }
            yield {0: DeltaToolCall(json_args='"Lisbon"}')}
        elif isinstance(part, ToolReturnPart):
            for word in ("Shown ", "on ", "screen: ", str(part.content)):
                yield word
        else:
            yield "Let me "
            yield "look."
            yield {
                1: DeltaToolCall(name="lookup", json_args='{"q": "weather"}', tool_call_id="bt-1")
            }

    agent = Agent(FunctionModel(stream_function=model))

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"sunny ({q})"

    async def endpoint(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


@pytest.fixture(scope="module")
def pydantic_ai_url() -> Iterator[str]:
    with serve(pydantic_ai_app()) as url:
        yield url + "/agent"


SHOW_WEATHER = {
    "name": "show_weather",
    "description": "Show the weather on the user's screen",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
PYDANTIC_SPEC: dict[str, Any] = {
    "threadId": "pai-thread",
    "messages": [{"id": "u-1", "role": "user", "content": "What's the weather?"}],
    "runs": [
        {"runId": "run-1", "tools": [SHOW_WEATHER]},
        {
            "runId": "run-2",
            "tools": [SHOW_WEATHER],
            "addMessages": [
                {"id": "t-1", "role": "tool", "toolCallId": "fc-1", "content": "displayed"}
            ],
        },
    ],
}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_pydantic_ai_frontend_tool_round_trip_agrees_with_the_official_client(
    pydantic_ai_url: str, tmp_path: Path
) -> None:
    ours = await compare_with_official(pydantic_ai_url, PYDANTIC_SPEC, tmp_path)
    first, second = ours
    # Run 1: streamed text, a backend tool call and its result, the frontend call left open.
    roles = [(m["role"], m.get("content")) for m in first["messages"]]
    assert roles[:3] == [
        ("user", "What's the weather?"),
        ("assistant", "Let me look."),
        ("tool", "sunny (weather)"),
    ]
    calls = [c["function"] for m in first["messages"] for c in m.get("toolCalls", [])]
    assert calls == [
        {"name": "lookup", "arguments": '{"q": "weather"}'},
        {"name": "show_weather", "arguments": '{"city": "Lisbon"}'},
    ]
    assert first["pending"] == ["fc-1"]
    # Run 2: the client's answer went back, the model used it.
    assert second["messages"][-1]["content"] == "Shown on screen: displayed"
    assert second["pending"] == []


async def test_pydantic_ai_streams_updates_live(pydantic_ai_url: str) -> None:
    agent = agui_meta.HttpAgent(pydantic_ai_url, messages=PYDANTIC_SPEC["messages"])
    texts = []
    async with agent.run(tools=[SHOW_WEATHER]) as run:
        async for update in run:
            if update.event.type == "TEXT_MESSAGE_CONTENT":
                assert update.item is not None
                texts.append(update.item.content)
    assert texts == ["Let me ", "Let me look."]
    assert run.result.pending_tool_call_ids == ["fc-1"]


# ---------------------------------------------------------------------------------------------
# ag-ui-protocol's EventEncoder


def encoder_app() -> Any:
    from ag_ui import core
    from ag_ui.encoder import EventEncoder
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    async def endpoint(request: Request) -> Response:
        run = core.RunAgentInput.model_validate_json(await request.body())
        encoder = EventEncoder(accept=request.headers.get("accept"))
        turn = len(run.messages)
        state = dict(run.state or {})

        async def events() -> AsyncIterator[str | bytes]:
            ids = {"thread_id": run.thread_id, "run_id": run.run_id}
            for event in (
                core.RunStartedEvent(**ids),
                core.StateSnapshotEvent(snapshot={**state, "turns": turn}),
                core.TextMessageStartEvent(message_id=f"m-{turn}", role="assistant"),
                core.TextMessageContentEvent(message_id=f"m-{turn}", delta="Echo: "),
                core.TextMessageContentEvent(
                    message_id=f"m-{turn}", delta=str(run.messages[-1].content)
                ),
                core.TextMessageEndEvent(message_id=f"m-{turn}"),
                core.RunFinishedEvent(**ids, result={"turn": turn}),
            ):
                yield encoder.encode(event)

        return StreamingResponse(events(), media_type=encoder.get_content_type())

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_ag_ui_protocol_encoder_agrees_with_the_official_client(tmp_path: Path) -> None:
    spec = {
        "threadId": "enc",
        "messages": [{"id": "u-1", "role": "user", "content": "one"}],
        "state": {"lang": "pt"},
        "runs": [
            {"runId": "a"},
            {"runId": "b", "addMessages": [{"id": "u-2", "role": "user", "content": "two"}]},
        ],
    }
    with serve(encoder_app()) as url:
        ours = await compare_with_official(url + "/agent", spec, tmp_path)
    assert ours[1]["messages"][-1] == {"id": "m-3", "role": "assistant", "content": "Echo: two"}
    assert ours[1]["state"] == {"lang": "pt", "turns": 3}
    assert ours[1]["result"] == {"turn": 3}


async def test_the_encoder_refuses_nothing_agui_meta_asks_for() -> None:
    # agui-meta asks for SSE (or JSON lines, which this encoder does not speak: it answers SSE,
    # and the client reads what the content type says).
    with serve(encoder_app()) as url:
        agent = agui_meta.HttpAgent(
            url + "/agent", accept="jsonl", messages=[{"id": "u", "role": "user", "content": "x"}]
        )
        result = await agent.run_agent()
    assert result.result == {"turn": 1}


# ---------------------------------------------------------------------------------------------
# The project's own example server


def example_server_app() -> Any:
    spec = importlib.util.spec_from_file_location(
        "example_server", REPO_ROOT / "examples" / "server.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_example_server_agrees_with_the_official_client(tmp_path: Path) -> None:
    spec = {
        "threadId": "ex",
        "messages": [{"id": "u-1", "role": "user", "content": "Weather in Lisbon?"}],
        "runs": [{"runId": "r-1"}],
    }

    def latency_measured(messages: Any) -> Any:
        # The server measures each item's latency: a number, different from run to run.
        text = json.dumps(messages)
        return json.loads(re.sub(r'"acme.latency_ms": \d+', '"acme.latency_ms": 0', text))

    with serve(example_server_app()) as url:
        ours = await compare_with_official(url + "/agent", spec, tmp_path, latency_measured)
    answer = ours[0]["messages"][-1]
    assert answer["content"] == "Sunny and 24 °C in Lisbon."
    assert "acme.latency_ms" in answer["metadata"]
