"""HttpAgent against real servers on 127.0.0.1, compared with the official HttpAgent.

The official client (``../shared/oracle/http_agent.cjs``) runs the same runs against the same
endpoint: the messages and the state of both agree after every run of a multi-run thread.
Servers that misbehave on purpose (``tests/servers.py``) check every error a user acts on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest

import agui_meta
from tests.doc_blocks import doc_block
from tests.servers import agent_app, official_http_agent, serve

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Any]]:
    app = agent_app(max_events=100, linger=0.5)
    with serve(app) as url:
        yield url, app


THREAD_SPEC: dict[str, Any] = {
    "threadId": "thread-1",
    "messages": [{"id": "u-1", "role": "user", "content": "What's the weather?"}],
    "state": {"tz": "Europe/Lisbon"},
    "runs": [
        {
            "runId": "r1",
            "tools": [
                {
                    "name": "weather",
                    "description": "Local weather",
                    "parameters": {"type": "object"},
                }
            ],
        },
        {
            "runId": "r2",
            "addMessages": [
                {"id": "tool-1", "role": "tool", "toolCallId": "r1-call", "content": "sunny, 24 °C"}
            ],
        },
        {
            "runId": "r3",
            "addMessages": [{"id": "u-2", "role": "user", "content": "snapshot"}],
            "forwardedProps": {"mode": "brief"},
        },
    ],
}


async def run_thread(url: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    agent = agui_meta.HttpAgent(
        url, thread_id=spec["threadId"], messages=spec["messages"], state=spec["state"]
    )
    lines = []
    for n, run in enumerate(spec["runs"]):
        for message in run.get("addMessages", []):
            agent.add_message(message)
        result = await agent.run_agent(
            run_id=run["runId"],
            tools=run.get("tools", []),
            forwarded_props=run.get("forwardedProps"),
        )
        lines.append(
            {
                "run": n,
                "newMessages": result.new_messages,
                "messages": agent.messages_wire(),
                "state": agent.state,
                "result": result.result,
            }
        )
    return lines


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_multi_run_thread_agrees_with_the_official_http_agent(
    server: tuple[str, Any], tmp_path: Path
) -> None:
    url, app = server
    first = len(app.state.agents["bodies"])
    ours = await run_thread(url + "/thread", THREAD_SPEC)
    our_bodies = [json.loads(b) for b in app.state.agents["bodies"][first:]]
    official = await anyio.to_thread.run_sync(
        official_http_agent, url + "/thread", THREAD_SPEC, tmp_path
    )
    their_bodies = [json.loads(b) for b in app.state.agents["bodies"][first + len(ours) :]]
    assert len(official) == len(ours) == 3
    for mine, theirs in zip(ours, official, strict=True):
        assert "error" not in theirs, theirs
        assert mine["messages"] == theirs["messages"], mine["run"]
        assert mine["state"] == theirs["state"], mine["run"]
        assert mine["newMessages"] == theirs["newMessages"], mine["run"]
        assert mine["result"] == theirs.get("result"), mine["run"]
    # The inputs sent are the same too (what the server saw), activity left out of both.
    assert our_bodies == their_bodies
    assert all(m["role"] != "activity" for m in our_bodies[2]["messages"])
    assert ours[1]["messages"][-1]["role"] == "activity"
    # What was assembled carries the metadata (checked once, here, against a known value).
    r2 = {m["id"]: m for m in ours[1]["messages"]}
    assert r2["r2-a"]["metadata"] == {"srv.model": "m-2", "srv.finish": "stop"}
    assert r2["r1-t"]["toolCalls"][0]["metadata"] == {"srv.tool": "front"}


async def test_run_result_has_outcome_usage_and_pending_tool_calls(
    server: tuple[str, Any],
) -> None:
    url, _ = server
    agent = agui_meta.HttpAgent(
        url + "/thread", messages=[{"id": "u", "role": "user", "content": "hi"}]
    )
    first = await agent.run_agent(run_id="a")
    assert first.pending_tool_call_ids == ["a-call"]
    assert isinstance(first.outcome, agui_meta.RunSuccess)
    assert first.result is None and first.usage == []
    agent.add_message({"id": "t", "role": "tool", "toolCallId": "a-call", "content": "rain"})
    second = await agent.run_agent(run_id="b")
    assert second.result == {"answered": True}
    assert second.usage == [
        agui_meta.Usage(provider="srv", model="m-2", input_tokens=7, output_tokens=3)
    ]
    assert second.usage[0].total_tokens is None  # absent: None, not the wire's UNSET
    assert [m["id"] for m in second.new_messages] == ["b-a", "b-act"]
    assert second.pending_tool_call_ids == []
    assert [r.run_id for r in agent.ledger.runs] == ["a", "b"]
    assert agent.state == {"asked": 1, "answers": 1}
    # The result serialises: to_json() bytes, to_builtins() for json.dumps, the same data.
    data = second.to_builtins()
    assert json.loads(json.dumps(data)) == data == json.loads(second.to_json())
    assert isinstance(second.to_json(), bytes)
    assert data["usage"] == [
        {"provider": "srv", "model": "m-2", "inputTokens": 7, "outputTokens": 3}
    ]
    assert data["outcome"] == {
        "type": "success",
        "result": {"answered": True},
        "pendingToolCallIds": [],
        "pendingFrom": "stream",
    }
    assert second.record is not None
    assert data["record"] == second.record.to_builtins()
    assert [m["id"] for m in data["newMessages"]] == ["b-a", "b-act"]


async def test_streaming_updates_arrive_while_the_run_is_going(server: tuple[str, Any]) -> None:
    url, _ = server
    agent = agui_meta.HttpAgent(
        url + "/thread", messages=[{"id": "u", "role": "user", "content": "hi"}]
    )
    seen = []
    async with agent.run(run_id="s") as run:
        async for update in run:
            seen.append(update.event.type)
            if update.event.type == "TOOL_CALL_END":
                assert isinstance(update.item, agui_meta.ToolCallItem)
                assert update.item.arguments == '{"city":"Lisbon"}'
    assert seen[0] == "RUN_STARTED" and seen[-1] == "RUN_FINISHED"
    assert "TEXT_MESSAGE_START" in seen  # chunks expanded
    assert run.result.pending_tool_call_ids == ["s-call"]


async def test_json_lines_are_negotiated(server: tuple[str, Any]) -> None:
    url, app = server
    agent = agui_meta.HttpAgent(
        url + "/thread", accept="jsonl", messages=[{"id": "u", "role": "user", "content": "x"}]
    )
    result = await agent.run_agent(run_id="j")
    assert app.state.agents["headers"][-1]["accept"] == "application/jsonl"
    assert result.pending_tool_call_ids == ["j-call"]


async def test_run_error_raises_with_code_message_and_usage(server: tuple[str, Any]) -> None:
    url, _ = server
    agent = agui_meta.HttpAgent(url + "/run-error")
    with pytest.raises(agui_meta.RunFailed) as caught:
        await agent.run_agent(run_id="e")
    assert caught.value.code == "refusal"
    assert caught.value.message == "the model refused"
    assert caught.value.usage == [agui_meta.Usage(provider="srv", input_tokens=5)]
    assert caught.value.usage[0].model is None  # absent: None, not the wire's UNSET
    # What came before the error is kept, as the official client keeps it.
    assert agent.messages_wire() == [{"id": "e-1", "role": "assistant", "content": "Partial"}]
    assert agent.ledger.runs[-1].status == "error"


async def test_an_http_error_carries_status_and_body(server: tuple[str, Any]) -> None:
    url, _ = server
    with pytest.raises(agui_meta.HttpStatusError) as caught:
        await agui_meta.HttpAgent(url + "/500").run_agent()
    assert caught.value.status == 500
    assert caught.value.body == b"the agent is down for maintenance"
    assert "HTTP 500" in str(caught.value) and "maintenance" in str(caught.value)


async def test_a_stream_without_terminal_event_is_an_error(server: tuple[str, Any]) -> None:
    url, _ = server
    agent = agui_meta.HttpAgent(url + "/no-terminal")
    with pytest.raises(agui_meta.IncompleteStream, match="without RUN_FINISHED or RUN_ERROR"):
        await agent.run_agent(run_id="n")
    assert agent.ledger.runs[-1].status == "incomplete"


@pytest.mark.parametrize("ids", ["1", "0"])
async def test_a_dropped_connection_is_an_error(server: tuple[str, Any], ids: str) -> None:
    url, _ = server
    agent = agui_meta.HttpAgent(url + f"/dropping?ids={ids}")
    with pytest.raises(agui_meta.IncompleteStream, match="dropped after 4 events") as caught:
        await agent.run_agent(run_id="d")
    assert "in the middle of an event, before RUN_FINISHED" in str(caught.value)
    assert caught.value.events == 4


async def test_a_dropped_stream_without_ids_cannot_be_resumed(server: tuple[str, Any]) -> None:
    url, _ = server
    agent = agui_meta.HttpAgent(url + "/dropping?ids=0", reconnect=3, reconnect_delay=0)
    with pytest.raises(agui_meta.IncompleteStream, match="sent no event ids"):
        await agent.run_agent(run_id="d")


async def test_a_server_that_cannot_resume_is_a_clear_error(server: tuple[str, Any]) -> None:
    url, app = server
    agent = agui_meta.HttpAgent(url + "/dropping?ids=1", reconnect=3, reconnect_delay=0)
    with pytest.raises(agui_meta.IncompleteStream, match="does not resume it") as caught:
        await agent.run_agent(run_id="d")
    assert "Last-Event-ID: x:3" in str(caught.value)
    assert app.state.agents["headers"][-1]["last-event-id"] == "x:3"


async def test_the_protobuf_media_type_is_refused(server: tuple[str, Any]) -> None:
    url, _ = server
    with pytest.raises(agui_meta.ResponseError, match="protobuf media type"):
        await agui_meta.HttpAgent(url + "/protobuf").run_agent()


async def test_a_stalled_server_times_out_and_is_closed(server: tuple[str, Any]) -> None:
    url, app = server
    agents = app.state.agents
    before = agents["closed"]
    agent = agui_meta.HttpAgent(url + "/stall", timeout=httpx.Timeout(5.0, read=0.2))
    with pytest.raises(httpx.ReadTimeout):
        await agent.run_agent(run_id="st")
    await wait_for(lambda: agents["closed"] == before + 1)
    assert agent.ledger.runs[-1].status == "incomplete"


async def test_abort_run_closes_the_run_and_raises(server: tuple[str, Any]) -> None:
    url, app = server
    agents = app.state.agents
    before = agents["closed"]
    agent = agui_meta.HttpAgent(url + "/stall")
    with pytest.raises(agui_meta.RunFailed) as caught:
        async with agent.run(run_id="ab") as run:
            async for update in run:
                assert update.event.type == "RUN_STARTED"
                agent.abort_run()
    assert caught.value.code == "abort"
    await wait_for(lambda: agents["closed"] == before + 1)
    # The agent is usable again.
    agent.abort_run()  # no run: nothing happens


async def test_cancellation_is_never_swallowed(server: tuple[str, Any]) -> None:
    url, app = server
    agents = app.state.agents
    before = agents["closed"]
    agent = agui_meta.HttpAgent(url + "/stall")
    with anyio.move_on_after(0.3) as scope:
        await agent.run_agent(run_id="c")
    assert scope.cancelled_caught
    await wait_for(lambda: agents["closed"] == before + 1)


async def test_an_unreachable_endpoint_raises_httpx_connect_error() -> None:
    with serve(agent_app()) as url:
        pass  # the port is free again once the server stopped
    with pytest.raises(httpx.ConnectError):
        await agui_meta.HttpAgent(url + "/thread").run_agent()


async def test_pending_interrupts_need_a_resume(server: tuple[str, Any]) -> None:
    url, app = server
    agent = agui_meta.HttpAgent(url + "/thread")
    agent.store.pending_interrupts = [
        agui_meta.events.Interrupt(id="i-1", reason="confirm"),
        agui_meta.events.Interrupt(id="i-2", reason="old", expires_at="2020-01-01T00:00:00Z"),
    ]
    sent = len(app.state.agents["bodies"])
    with pytest.raises(agui_meta.UsageError, match="2 pending interrupt"):
        await agent.run_agent()
    resume = agui_meta.build_resume_array(
        agent.pending_interrupts,
        {"i-1": {"status": "resolved", "payload": {"ok": True}}, "i-2": {"status": "resolved"}},
    )
    with pytest.raises(agui_meta.UsageError, match="Interrupt i-2 expired at 2020-01-01"):
        await agent.run_agent(resume=resume)
    assert len(app.state.agents["bodies"]) == sent  # nothing was sent
    resume = agui_meta.build_resume_array(
        agent.pending_interrupts,
        {"i-1": {"status": "resolved", "payload": {"ok": True}}, "i-2": {"status": "cancelled"}},
    )
    await agent.run_agent(run_id="res", resume=resume)
    body = json.loads(app.state.agents["bodies"][-1])
    assert body["resume"] == [
        {"interruptId": "i-1", "status": "resolved", "payload": {"ok": True}},
        {"interruptId": "i-2", "status": "cancelled"},
    ]
    assert agent.pending_interrupts == []


async def test_an_invalid_input_is_refused_before_sending(server: tuple[str, Any]) -> None:
    url, app = server
    agent = agui_meta.HttpAgent(url + "/thread")
    sent = len(app.state.agents["bodies"])
    with pytest.raises(agui_meta.DataError, match="not a valid RunAgentInput") as caught:
        await agent.run_agent(tools=[{"name": "t", "description": "d", "metadata": None}])
    assert caught.value.path == "$.tools[0].metadata"
    assert len(app.state.agents["bodies"]) == sent


async def wait_for(condition: Any) -> None:
    """Poll ``condition`` (the server runs in another thread) until it holds (10 s at most)."""
    with anyio.fail_after(10):
        while not condition():  # noqa: ASYNC110 - another thread's state: nothing to wait on
            await anyio.sleep(0.01)


def test_httpx_is_imported_only_when_a_run_starts() -> None:
    code = (
        "import sys, agui_meta; agui_meta.HttpAgent('http://x'); "
        "print('httpx' in sys.modules, 'starlette' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


async def test_the_readme_client_example_runs(
    server: tuple[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(doc_block("async def chat(").code, "README.md", "exec"), namespace)  # noqa: S102 - running the README is the point
    url, _ = server
    await namespace["chat"](url + "/thread")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("['assistant'] [")  # the frontend tool call left pending
    assert "TEXT_MESSAGE_END {'srv.model': 'm-2', 'srv.finish': 'stop'}" in lines
    assert lines[-1] == "It is shown. {'asked': 1, 'answers': 1}"


async def test_the_readme_server_example_serves() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Route

    namespace: dict[str, Any] = {}
    exec(compile(doc_block("async def endpoint(").code, "README.md", "exec"), namespace)  # noqa: S102 - running the README is the point
    app = Starlette(routes=[Route("/agent", namespace["endpoint"], methods=["POST"])])
    with serve(app) as url:
        agent = agui_meta.HttpAgent(url + "/agent")
        await agent.run_agent()
    assert agent.messages_wire() == [{"id": "m-1", "role": "assistant", "content": "Hello"}]


async def test_user_stages_and_middleware_chain_in(server: tuple[str, Any]) -> None:
    url, _ = server
    seen_inputs: list[Any] = []

    async def no_tools(input: Any, next: Any) -> AsyncIterator[Any]:
        seen_inputs.append(input)
        async for event in next.run(input):
            if not event.type.startswith("TOOL_CALL"):
                yield event

    async def shout(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for event in events:
            if isinstance(event, agui_meta.events.TextMessageContentEvent):
                event = msgspec.structs.replace(event, delta=event.delta.upper())
            yield event

    agent = agui_meta.HttpAgent(
        url + "/thread",
        thread_id="mw",
        messages=[{"id": "u", "role": "user", "content": "hi"}],
        stages=[agui_meta.ExpandChunks(), shout],
        middleware=[no_tools],
    )
    for run_id in ("m1", "m2"):  # the same stages serve every run
        result = await agent.run_agent(run_id=run_id)
        assert result.pending_tool_call_ids == []
    assert [i.run_id for i in seen_inputs] == ["m1", "m2"]
    assert seen_inputs[1].thread_id == "mw" and len(seen_inputs[1].messages) == 2
    texts = [m.get("content") for m in agent.messages_wire()]
    assert texts == ["hi", "LET ME CHECK THE WEATHER.", "LET ME CHECK THE WEATHER."]


def test_bad_arguments_are_usage_errors() -> None:
    with pytest.raises(agui_meta.UsageError, match="accept must be 'sse' or 'jsonl'"):
        agui_meta.HttpAgent("http://127.0.0.1:9/", accept="xml")  # type: ignore[arg-type]
    with pytest.raises(agui_meta.UsageError, match="reconnect"):
        agui_meta.HttpAgent("http://127.0.0.1:9/", reconnect=-1)
