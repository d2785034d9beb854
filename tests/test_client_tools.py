"""Client-side tools: HttpAgent(tools=[functions]) declares them, runs the calls, runs again.

Against real servers on 127.0.0.1: pydantic-ai's AG-UI app driving a ``FunctionModel`` that
calls two frontend tools at once (the final thread compared with the official HttpAgent's when
its tool results are supplied by hand), and a scripted agent of this file whose tool calls are
chosen by the test (bad JSON, arguments of the wrong type, a failing or hanging tool, a tool the
client does not execute, too many rounds, cancellation).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel
import msgspec
import pytest

import agui_meta
from tests import needs
from tests.servers import official_http_agent, serve
from tests.test_cleanup import no_leaks
from tests.test_producers import same_ids

pytestmark = pytest.mark.anyio

_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def sunny(city: str) -> str:
    return f"sunny in {city}"


WEATHER = agui_meta.ClientTool(sunny, name="weather")


def positional(a: int, /) -> int:
    return a


# ---------------------------------------------------------------------------------------------
# Schemas


class Place(msgspec.Struct):
    city: str
    country: str = "PT"


def test_a_functions_schema_comes_from_its_signature() -> None:
    def show_weather(place: Place, unit: Literal["C", "F"] = "C", days: int = 1) -> str:
        """Show the weather on the user's screen.

        Longer text that is not part of the description.
        """
        return ""

    tool = agui_meta.ClientTool(show_weather)
    declared = tool.declaration()
    assert declared["name"] == "show_weather"
    assert declared["description"] == "Show the weather on the user's screen."
    schema = declared["parameters"]
    assert schema["type"] == "object"
    assert schema["required"] == ["place"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["unit"] == {"enum": ["C", "F"], "default": "C"}
    assert schema["properties"]["days"] == {"type": "integer", "default": 1}
    assert schema["properties"]["place"] == {"$ref": "#/$defs/Place"}
    assert schema["$defs"]["Place"]["required"] == ["city"]
    # The declaration is a valid wire Tool, as the run input is checked.
    msgspec.convert(declared, agui_meta.events.Tool)


def test_a_given_schema_is_declared_as_given() -> None:
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}}
    tool = agui_meta.ClientTool(
        lambda q: q, name="search", description="Search", parameters=parameters
    )
    assert tool.declaration() == {
        "name": "search",
        "description": "Search",
        "parameters": parameters,
    }


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([lambda x: x], "needs a name"),
        ([42], "takes functions, ClientTool objects and tool declarations"),
        ([positional], "cannot be passed by name"),
        (
            [{"name": "a", "description": ""}, agui_meta.ClientTool(lambda: 1, name="a")],
            "two tools are named 'a'",
        ),
    ],
)
def test_tools_that_cannot_be_declared_are_refused_up_front(tools: Any, message: str) -> None:
    with pytest.raises(agui_meta.UsageError, match=message):
        agui_meta.HttpAgent("http://127.0.0.1:1/agent", tools=tools)


# ---------------------------------------------------------------------------------------------
# A scripted agent: the test chooses its tool calls (query ``calls``: [[id, name, args], ...]).


def scripted_tools_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    seen: list[dict[str, Any]] = []

    async def agent(request: Request) -> Response:
        run = json.loads(await request.body())
        seen.append(run)
        calls = json.loads(request.query_params.get("calls", "[]"))
        again = request.query_params.get("again") == "1"
        ids = {"threadId": run["threadId"], "runId": run["runId"]}
        messages = run["messages"]
        events: list[dict[str, Any]] = [{"type": "RUN_STARTED", **ids}]
        answers: list[dict[str, Any]] = []
        for message in reversed(messages):
            if message["role"] != "tool":
                break
            answers.insert(0, message)
        if answers and not again:
            text = " | ".join(f"{m['toolCallId']}={m['content']}" for m in answers)
            events += [
                {
                    "type": "TEXT_MESSAGE_START",
                    "messageId": f"a-{len(messages)}",
                    "role": "assistant",
                },
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"a-{len(messages)}", "delta": text},
                {"type": "TEXT_MESSAGE_END", "messageId": f"a-{len(messages)}"},
            ]
        else:
            parent = f"m-{len(messages)}"
            for call_id, name, args in calls:
                call_id = f"{call_id}-{len(messages)}"
                events += [
                    {
                        "type": "TOOL_CALL_START",
                        "toolCallId": call_id,
                        "toolCallName": name,
                        "parentMessageId": parent,
                    },
                    {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args},
                    {"type": "TOOL_CALL_END", "toolCallId": call_id},
                ]
        finished: dict[str, Any] = {"type": "RUN_FINISHED", **ids}
        if request.query_params.get("cancelled") == "1":
            finished["outcome"] = {"type": "cancelled"}
        events.append(finished)

        async def stream() -> AsyncIterator[dict[str, Any]]:
            for event in events:
                yield event

        return agui_meta.EventStreamResponse(stream(), keepalive=None)

    app = Starlette(routes=[Route("/agent", agent, methods=["POST"])])
    app.state.seen = seen
    return app


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    app = scripted_tools_app()
    with serve(app) as url:
        yield url + "/agent", app.state.seen


def url_calling(
    base: str, *calls: tuple[str, str, str], again: bool = False, cancelled: bool = False
) -> str:
    from urllib.parse import quote

    query = quote(json.dumps([list(c) for c in calls]))
    return (
        f"{base}?calls={query}"
        + ("&again=1" if again else "")
        + ("&cancelled=1" if cancelled else "")
    )


def tool_messages(agent: agui_meta.HttpAgent) -> list[dict[str, Any]]:
    return [m for m in agent.messages_wire() if m["role"] == "tool"]


async def test_the_loop_runs_tools_concurrently_and_runs_again(
    scripted: tuple[str, list[dict[str, Any]]],
) -> None:
    base, seen = scripted
    both_started = anyio.Event()
    started: list[str] = []

    async def weather(city: str) -> dict[str, Any]:
        started.append(city)
        if len(started) == 2:
            both_started.set()
        with anyio.fail_after(10):  # a bound, not a timing: fails the call if they never meet
            await both_started.wait()  # only returns when both calls run at once
        return {"city": city, "sky": "sunny"}

    def clock(zone: str = "UTC") -> str:  # a sync function: it runs in a worker thread
        return f"noon in {zone}"

    url = url_calling(
        base,
        ("w1", "weather", '{"city": "Lisbon"}'),
        ("w2", "weather", '{"city": "Porto"}'),
        ("c1", "clock", "{}"),
    )
    agent = agui_meta.HttpAgent(
        url, tools=[weather, clock], messages=[{"id": "u", "role": "user", "content": "hi"}]
    )
    before = len(seen)
    result = await agent.run_agent(run_id="first")
    # Two runs: the first called the tools, the second got the three answers.
    assert agent.ledger.runs[0].run_id == "first"
    assert len(agent.ledger.runs) == 2
    assert result.pending_tool_call_ids == []
    assert [(m["toolCallId"], m["content"]) for m in tool_messages(agent)] == [
        ("w1-1", '{"city":"Lisbon","sky":"sunny"}'),
        ("w2-1", '{"city":"Porto","sky":"sunny"}'),
        ("c1-1", "noon in UTC"),
    ]
    assert agent.messages_wire()[-1]["content"] == (
        'w1-1={"city":"Lisbon","sky":"sunny"} | w2-1={"city":"Porto","sky":"sunny"} | '
        "c1-1=noon in UTC"
    )
    # Both runs declared the tools, with the schemas derived from the signatures.
    inputs = seen[before:]
    assert len(inputs) == 2
    for sent in inputs:
        assert [t["name"] for t in sent["tools"]] == ["weather", "clock"]
        assert sent["tools"][0]["parameters"]["required"] == ["city"]
    assert inputs[1]["runId"] != "first"
    assert [m["role"] for m in inputs[1]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
    ]


async def test_bad_arguments_failures_and_timeouts_are_results_the_agent_reads(
    scripted: tuple[str, list[dict[str, Any]]],
) -> None:
    base, _ = scripted

    def weather(city: str, days: int = 1) -> str:
        return f"{city} for {days} day(s)"

    def broken() -> str:
        raise RuntimeError("the sensor is offline")

    async def hangs() -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    url = url_calling(
        base,
        ("a", "weather", '{"city": "Lis'),  # not JSON
        ("b", "weather", '{"city": "Lisbon", "days": "two"}'),  # not an int
        ("c", "weather", '{"town": "Lisbon"}'),  # unknown member, missing city
        ("d", "broken", ""),
        ("e", "hangs", "{}"),
        ("f", "weather", '{"city": "Faro", "days": 2}'),
        ("g", "anything", '{"x": 1, "y": [2]}'),
    )
    anything = agui_meta.ClientTool(
        lambda **kw: kw, name="anything", description="Echo", parameters={"type": "object"}
    )
    agent = agui_meta.HttpAgent(
        url,
        tools=[weather, broken, agui_meta.ClientTool(hangs, timeout=0.05), anything],
        messages=[{"id": "u", "role": "user", "content": "hi"}],
    )
    with no_leaks():  # the timed-out call and the failing one leave nothing behind
        await agent.run_agent()
    answers = {m["toolCallId"][0]: m for m in tool_messages(agent)}
    assert sorted(answers) == list("abcdefg")
    assert "error" not in answers["f"] and answers["f"]["content"] == "Faro for 2 day(s)"
    assert "error" not in answers["g"] and answers["g"]["content"] == '{"x":1,"y":[2]}'
    errors = {k: m["error"] for k, m in answers.items() if k not in "fg"}
    for key, message in errors.items():
        assert answers[key]["content"] == message  # the agent reads the error as the content
    assert errors["a"].startswith("tool 'weather': the arguments are not valid JSON")
    assert errors["b"] == (
        "tool 'weather': the arguments do not match its parameters: "
        "Expected `int`, got `str` - at `$.days`"
    )
    assert errors["c"].startswith("tool 'weather': the arguments do not match its parameters")
    assert errors["d"] == "tool 'broken': raised RuntimeError: the sensor is offline"
    assert errors["e"] == "tool 'hangs': timed out after 0.05 s"
    # The second run sent them all back, and the agent answered.
    assert agent.messages_wire()[-1]["role"] == "assistant"
    assert len(agent.ledger.runs) == 2


async def test_calls_to_tools_the_client_does_not_run_are_left_to_the_caller(
    scripted: tuple[str, list[dict[str, Any]]],
) -> None:
    base, _ = scripted
    declared_only = {"name": "confirm", "description": "Ask the user to confirm"}
    url = url_calling(base, ("w", "weather", '{"city": "Lisbon"}'), ("k", "confirm", "{}"))
    agent = agui_meta.HttpAgent(
        url,
        tools=[WEATHER, declared_only],
        messages=[{"id": "u", "role": "user", "content": "hi"}],
    )
    result = await agent.run_agent()
    # The client's own call is answered; the other stays pending, and no second run was made.
    assert len(agent.ledger.runs) == 1
    assert result.pending_tool_call_ids == ["w-1", "k-1"]
    assert [m["toolCallId"] for m in tool_messages(agent)] == ["w-1"]
    # The caller answers the rest, and the thread goes on.
    agent.add_message({"id": "t-k", "role": "tool", "toolCallId": "k-1", "content": "yes"})
    assert await agent.call_tools() == []  # nothing left for the client
    await agent.run_agent()
    assert agent.messages_wire()[-1]["content"] == "w-1=sunny in Lisbon | k-1=yes"


async def test_the_rounds_are_bounded(scripted: tuple[str, list[dict[str, Any]]]) -> None:
    base, _ = scripted
    url = url_calling(base, ("w", "weather", '{"city": "Lisbon"}'), again=True)
    agent = agui_meta.HttpAgent(
        url,
        tools=[WEATHER],
        max_tool_rounds=3,
        messages=[{"id": "u", "role": "user", "content": "hi"}],
    )
    with pytest.raises(agui_meta.ToolRoundsExceeded, match="after 3 run") as caught:
        await agent.run_agent()
    assert caught.value.rounds == 3
    assert len(agent.ledger.runs) == 3
    # The last run's call is left unanswered (two answered before it), and can be answered.
    assert caught.value.result.pending_tool_call_ids == ["w-5"]
    assert [m["toolCallId"] for m in tool_messages(agent)] == ["w-1", "w-3"]
    results = await agent.call_tools()
    assert results == tool_messages(agent)[-1:]
    assert [(m["toolCallId"], m["content"], m.get("error")) for m in results] == [
        ("w-5", "sunny in Lisbon", None)
    ]


async def test_a_cancelled_round_leaves_the_thread_consistent(
    scripted: tuple[str, list[dict[str, Any]]],
) -> None:
    base, _ = scripted
    url = url_calling(base, ("w", "weather", '{"city": "Lisbon"}'), ("x", "slow", "{}"))
    cancel = True
    scope = anyio.CancelScope()

    async def slow() -> str:
        if cancel:
            scope.cancel()  # the caller gives up while the tools run
            await anyio.sleep_forever()
        return "done"

    agent = agui_meta.HttpAgent(
        url,
        tools=[WEATHER, slow],
        messages=[{"id": "u", "role": "user", "content": "hi"}],
    )
    with no_leaks(), scope:  # no task or generator outlives the cancelled round
        await agent.run_agent()
    assert scope.cancelled_caught  # the cancellation went through, not swallowed
    # One run; neither call answered (the finished one included): the calls are still pending.
    assert len(agent.ledger.runs) == 1
    assert tool_messages(agent) == []
    mine, _ = agent._unanswered_calls()
    assert [c.id for c in mine] == ["w-1", "x-1"]
    # Taken up again: the tools run, the agent runs.
    cancel = False
    assert [m["content"] for m in await agent.call_tools()] == ["sunny in Lisbon", "done"]
    await agent.run_agent()
    assert agent.messages_wire()[-1]["content"] == "w-1=sunny in Lisbon | x-1=done"


async def test_streaming_every_round_by_hand(scripted: tuple[str, list[dict[str, Any]]]) -> None:
    base, _ = scripted
    url = url_calling(base, ("w", "weather", '{"city": "Lisbon"}'))
    agent = agui_meta.HttpAgent(
        url, tools=[WEATHER], messages=[{"id": "u", "role": "user", "content": "hi"}]
    )
    seen = []
    while True:
        async with agent.run() as run:
            async for update in run:
                seen.append(update.event.type)
        if not await agent.call_tools():
            break
    assert seen.count("RUN_STARTED") == 2
    assert "TOOL_CALL_START" in seen and "TEXT_MESSAGE_CONTENT" in seen
    assert agent.messages_wire()[-1]["content"] == "w-1=sunny in Lisbon"


# ---------------------------------------------------------------------------------------------
# pydantic-ai's AG-UI app, a FunctionModel calling two frontend tools at once


def pydantic_ai_tools_app() -> Any:
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
        returns = [
            p
            for p in (last.parts if isinstance(last, ModelRequest) else ())
            if isinstance(p, ToolReturnPart)
        ]
        if returns:
            for part in returns:
                yield f"[{part.tool_name}: {part.content}] "
            return
        assert sorted(t.name for t in info.function_tools) == ["convert", "show_weather"]
        yield {0: DeltaToolCall(name="show_weather", json_args='{"city": ', tool_call_id="fc-1")}
        yield {0: DeltaToolCall(json_args='"Lisbon"}')}
        yield {1: DeltaToolCall(name="convert", json_args='{"amount": "ten"}', tool_call_id="fc-2")}

    agent = Agent(FunctionModel(stream_function=model))

    async def endpoint(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


async def show_weather(city: str) -> str:
    """Show the weather on the user's screen."""
    await anyio.lowlevel.checkpoint()
    return f"shown for {city}"


def convert(amount: int, to: str = "EUR") -> float:
    """Convert an amount of money."""
    return amount * 1.1


BAD_AMOUNT = (
    "tool 'convert': the arguments do not match its parameters: "
    "Expected `int`, got `str` - at `$.amount`"
)


async def tools_against_official(
    url: str, tmp_path: Path, thread_ids: tuple[str, str]
) -> list[dict[str, Any]]:
    """The pydantic-ai thread run by HttpAgent(tools=...) and by the official HttpAgent with its
    tool results supplied by hand, on ``url``; checks they agree and returns ours."""
    user = {"id": "u-1", "role": "user", "content": "Weather and money?"}
    agent = agui_meta.HttpAgent(
        url, thread_id=thread_ids[0], messages=[user], tools=[show_weather, convert]
    )
    result = await agent.run_agent(run_id=f"{thread_ids[0]}-1")
    ours = agent.messages_wire()
    assert len(agent.ledger.runs) == 2
    assert result.pending_tool_call_ids == []
    assert ours[-1]["role"] == "assistant"
    assert ours[-1]["content"] == f"[show_weather: shown for Lisbon] [convert: {BAD_AMOUNT}] "
    # The official client, its tool results supplied by hand (the same answers).
    declarations = [agui_meta.ClientTool(show_weather).declaration()]
    declarations.append(agui_meta.ClientTool(convert).declaration())
    by_hand = [
        {
            "id": str(uuid.uuid4()),
            "role": "tool",
            "toolCallId": "fc-1",
            "content": "shown for Lisbon",
        },
        {
            "id": str(uuid.uuid4()),
            "role": "tool",
            "toolCallId": "fc-2",
            "content": BAD_AMOUNT,
            "error": BAD_AMOUNT,
        },
    ]
    spec = {
        "threadId": thread_ids[1],
        "messages": [user],
        "runs": [
            {"runId": f"{thread_ids[1]}-1", "tools": declarations},
            {"tools": declarations, "addMessages": by_hand},
        ],
    }
    official = await anyio.to_thread.run_sync(official_http_agent, url, spec, tmp_path)
    assert [line.get("error") for line in official] == [None, None]
    assert same_ids(ours) == same_ids(official[-1]["messages"])
    assert agent.state == official[-1]["state"]
    return ours


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_pydantic_ai_frontend_tools_agree_with_the_official_client_answered_by_hand(
    tmp_path: Path,
) -> None:
    with serve(pydantic_ai_tools_app()) as base:
        await tools_against_official(base + "/agent", tmp_path, ("pai-tools", "pai-tools"))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_through_the_gateway_the_loop_agrees_with_the_official_client(
    tmp_path: Path,
) -> None:
    from agui_meta.gateway import AsgiAgent, Gateway

    gateway = Gateway({"pai": AsgiAgent(pydantic_ai_tools_app(), path="/agent")})
    with serve(gateway, lifespan="on") as base:
        # The gateway owns its threads: each client runs one of its own.
        ours = await tools_against_official(base + "/agents/pai/run", tmp_path, ("gw-a", "gw-b"))
        import httpx

        async with httpx.AsyncClient(base_url=base) as http:
            held = (await http.get("/threads/gw-a")).json()
    assert same_ids(held["messages"]) == same_ids(ours)  # the gateway's copy of the thread


# ---------------------------------------------------------------------------------------------
# Capabilities: GET <endpoint>/capabilities, as the official ADK integration serves them


def capabilities_app() -> Any:
    """Endpoints offering capabilities built with ``ag_ui.core`` (the Python SDK's types)."""
    from ag_ui import core
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
    from starlette.routing import Route

    offered = core.AgentCapabilities(
        identity=core.IdentityCapabilities(
            name="weather-bot",
            type="pydantic-ai",
            version="1.2.0",
            documentation_url="https://example.com/docs",
            metadata={"acme.team": "forecasts"},
        ),
        transport=core.TransportCapabilities(streaming=True, resumable=False),
        tools=core.ToolsCapabilities(
            supported=True,
            client_provided=True,
            parallel_calls=True,
            items=[core.Tool(name="lookup", description="Look up", parameters={"type": "object"})],
        ),
        multi_agent=core.MultiAgentCapabilities(
            supported=True, subagents=[core.SubagentInfo(name="researcher")]
        ),
        multimodal=core.MultimodalCapabilities(input=core.MultimodalInputCapabilities(image=True)),
        execution=core.ExecutionCapabilities(max_iterations=5, max_execution_time=60000),
        human_in_the_loop=core.HumanInTheLoopCapabilities(interrupts=True, approve_with_edits=True),
        custom={"acme.region": "eu"},
    )
    wire = offered.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def capabilities(request: Request) -> Response:
        return JSONResponse(wire)

    async def bad(request: Request) -> Response:
        return JSONResponse({"execution": {"maxIterations": -1}})

    async def down(request: Request) -> Response:
        return PlainTextResponse("maintenance", status_code=503)

    async def moved(request: Request) -> Response:
        return RedirectResponse("/agent/capabilities", status_code=302)

    app = Starlette(
        routes=[
            Route("/agent/capabilities", capabilities, methods=["GET"]),
            Route("/bad/capabilities", bad, methods=["GET"]),
            Route("/down/capabilities", down, methods=["GET"]),
            Route("/moved/capabilities", moved, methods=["GET"]),
        ]
    )
    app.state.wire = wire
    return app


async def test_capabilities_where_the_agent_offers_them() -> None:
    needs.module("ag_ui")
    app = capabilities_app()
    with serve(app) as base:
        caps = await agui_meta.HttpAgent(base + "/agent").capabilities()
        assert isinstance(caps, agui_meta.events.AgentCapabilities)
        assert msgspec.to_builtins(caps) == app.state.wire  # every member, camelCase
        assert caps.identity and caps.identity.documentation_url == "https://example.com/docs"
        assert caps.tools and caps.tools.items and caps.tools.items[0].name == "lookup"
        assert caps.execution and caps.execution.max_iterations == 5
        assert caps.transport and caps.transport.websocket is agui_meta.events.UNSET
        # An agent that offers none: None. Another URL can be given.
        assert await agui_meta.HttpAgent(base + "/none").capabilities() is None
        given = agui_meta.HttpAgent(base + "/x", capabilities_url=base + "/agent/capabilities")
        assert await given.capabilities() == caps
        with pytest.raises(agui_meta.DataError, match="maxIterations") as bad:
            await agui_meta.HttpAgent(base + "/bad").capabilities()
        assert bad.value.path == "$.execution.maxIterations"
        with pytest.raises(agui_meta.HttpStatusError, match="maintenance") as down:
            await agui_meta.HttpAgent(base + "/down").capabilities()
        assert down.value.status == 503
        with pytest.raises(agui_meta.HttpStatusError) as moved:  # not followed unless told to
            await agui_meta.HttpAgent(base + "/moved").capabilities()
        assert moved.value.status == 302


# Leaving an httpx body early lets httpx's own nested generators be garbage-collected
# unexhausted, which trio reports; httpx issue #3686 (as in test_framing.py).
@pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning")
@pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning")
async def test_capabilities_larger_than_max_frame_size_are_refused() -> None:
    import gc

    needs.module("ag_ui")
    with serve(capabilities_app()) as base:
        small = agui_meta.HttpAgent(base + "/agent", max_frame_size=64)
        with pytest.raises(agui_meta.DataError, match="larger than 64 bytes"):
            await small.capabilities()
    gc.collect()  # httpx's generators are finalized here, under this test's filters


async def test_capabilities_strip_unknown_members_with_a_report_each() -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def newer(request: Request) -> Response:
        return JSONResponse(
            {
                "identity": {"name": "x", "future": 1},
                "tools": {"items": [{"name": "a", "description": "b", "later": True}]},
                "teleport": {"supported": True},
                "custom": {"acme.any": {"thing": [1]}},
            }
        )

    reports: list[agui_meta.Report] = []
    app = Starlette(routes=[Route("/agent/capabilities", newer, methods=["GET"])])
    with serve(app) as base:
        agent = agui_meta.HttpAgent(base + "/agent", on_report=reports.append)
        caps = await agent.capabilities()
    events = agui_meta.events
    assert caps == events.AgentCapabilities(
        identity=events.IdentityCapabilities(name="x"),
        tools=events.ToolsCapabilities(items=[events.Tool(name="a", description="b")]),
        custom={"acme.any": {"thing": [1]}},
    )
    assert [(r.code, r.path) for r in reports] == [
        ("unknown-field", "$.identity.future"),
        ("unknown-field", "$.tools.items[0].later"),
        ("unknown-field", "$.teleport"),
    ]


# ---------------------------------------------------------------------------------------------
# add_messages, set_messages, clone: as the official HttpAgent's, step by step


def official_steps(url: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    import subprocess

    from tests.oracle import OracleUnavailable, oracle_missing, prepare_oracle

    try:
        directory = prepare_oracle()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    done = subprocess.run(
        ["node", str(Path(__file__).with_name("agent_methods_ref.cjs")), str(directory), url],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


async def our_steps(url: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    agents = [
        agui_meta.HttpAgent(
            url, thread_id=spec["threadId"], messages=spec["messages"], state=spec["state"]
        )
    ]
    lines = []
    for n, (op, who, *rest) in enumerate(spec["steps"]):
        agent = agents[who]
        if op == "add":
            agent.add_messages(rest[0])
        elif op == "set":
            agent.set_messages(rest[0])
        elif op == "clone":
            assert rest[0] == len(agents)
            agents.append(agent.clone())
        else:
            await agent.run_agent(run_id=rest[0])
        view = [
            {"threadId": a.thread_id, "messages": a.messages_wire(), "state": a.state}
            for a in agents
        ]
        lines.append({"step": n, "agents": view})
    return lines


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_add_set_and_clone_agree_with_the_official_client(tmp_path: Path) -> None:
    from tests.servers import agent_app

    user = {"id": "u-1", "role": "user", "content": "What's the weather?"}
    spec = {
        "threadId": "t-methods",
        "messages": [user],
        "state": {"tz": "Europe/Lisbon"},
        "steps": [
            ["add", 0, [{"id": "u-2", "role": "user", "content": "In Lisbon"}]],
            ["clone", 0, 1],
            ["run", 0, "r-1"],  # the original runs: the clone keeps the thread as it was
            [
                "add",
                0,
                [{"id": "t-1", "role": "tool", "toolCallId": "r-1-call", "content": "sunny"}],
            ],
            ["run", 1, "r-2"],
            ["set", 1, [user, {"id": "a-9", "role": "assistant", "content": "Hello"}]],
            ["clone", 1, 2],
            ["run", 0, "r-3"],
            ["add", 2, [{"id": "u-3", "role": "user", "content": "snapshot"}]],
            ["run", 2, "r-4"],
        ],
    }
    with serve(agent_app()) as base:
        url = base + "/thread"
        ours = await our_steps(url, spec)
        official = await anyio.to_thread.run_sync(official_steps, url, spec)
    assert len(official) == len(ours) == len(spec["steps"])
    for mine, theirs in zip(ours, official, strict=True):
        assert mine == theirs, mine["step"]
    # Not vacuous: the three agents ended on three different threads of messages.
    last = ours[-1]["agents"]
    assert len({json.dumps(a["messages"]) for a in last}) == 3


def test_set_and_add_messages_check_every_message_first() -> None:
    agent = agui_meta.HttpAgent("http://127.0.0.1:1/agent", state={"k": 1})
    agent.set_messages([{"id": "a", "role": "user", "content": "x"}])
    bad = [{"id": "b", "role": "user", "content": "y"}, {"id": "c", "role": "nobody"}]
    with pytest.raises(agui_meta.DecodeError):
        agent.add_messages(bad)
    with pytest.raises(agui_meta.DecodeError):
        agent.set_messages(bad)
    assert agent.messages_wire() == [{"id": "a", "role": "user", "content": "x"}]
    assert agent.state == {"k": 1}


async def test_the_docs_tools_example_runs_its_two_rounds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.doc_blocks import doc_block
    from tests.servers import agent_app

    block = doc_block("async def weather(city: str, unit")
    namespace: dict[str, Any] = {}
    exec(compile(block.code, block.path, "exec"), namespace)  # noqa: S102 - running the docs is the point
    with serve(agent_app()) as base:
        await namespace["main"](base + "/thread")
    lines = capsys.readouterr().out.splitlines()
    assert "tool sunny, 24 °C in Lisbon None" in lines
    assert "assistant It is sunny, 24 °C in Lisbon. None" in lines
    assert lines[-1] == "2 runs; pending: []"


async def test_clones_on_one_stored_thread_conflict_on_save() -> None:
    from agui_meta.threads import MemoryThreadStore, VersionConflict
    from tests.servers import agent_app

    threads = MemoryThreadStore()
    user = {"id": "u-1", "role": "user", "content": "What's the weather?"}
    with serve(agent_app()) as base:
        agent = agui_meta.HttpAgent(
            base + "/thread", thread_id="t-c", thread_store=threads, messages=[user]
        )
        await agent.load()
        twin = agent.clone()
        assert twin.snapshot == agent.snapshot and twin.thread_store is threads
        await agent.run_agent()
        with pytest.raises(VersionConflict):
            await twin.run_agent()  # it ran on its own copy; the save finds a newer version
        assert agent.snapshot is not None and agent.snapshot.version == 1
        again = twin.clone()  # the clone inherits the failed save: it refuses to run
        with pytest.raises(agui_meta.UsageError, match="another writer"):
            await again.run_agent()


def test_methods_partials_and_callable_objects_are_tools_too() -> None:
    import functools

    class Thermometer:
        """Read the temperature."""

        def __call__(self, city: str, days: int = 1) -> str:
            return city

        async def forecast(self, city: str) -> str:
            """Forecast the weather."""
            return city

    def reading(city: str, days: int) -> str:
        """Read a city's temperature."""
        return city

    thermometer = Thermometer()
    tools = [
        agui_meta.ClientTool(thermometer, name="thermometer"),
        agui_meta.ClientTool(thermometer.forecast),
        agui_meta.ClientTool(functools.partial(reading, days=2), name="reading"),
    ]
    declared = [(t.name, t.description, t.parameters["required"]) for t in tools]
    assert declared == [
        ("thermometer", "Read the temperature.", ["city"]),
        ("forecast", "Forecast the weather.", ["city"]),
        ("reading", "Read a city's temperature.", ["city"]),
    ]
    assert tools[2].parameters["properties"]["days"]["default"] == 2


async def test_a_runs_own_functions_are_run_by_its_loop(
    scripted: tuple[str, list[dict[str, Any]]],
) -> None:
    base, seen = scripted
    url = url_calling(base, ("w", "weather", '{"city": "Lisbon"}'))
    declared = {"name": "confirm", "description": "Ask the user"}
    agent = agui_meta.HttpAgent(
        url, tools=[declared], messages=[{"id": "u", "role": "user", "content": "hi"}]
    )
    # A generator: each round declares the tools again all the same.
    await agent.run_agent(tools=(t for t in [WEATHER]))
    assert len(agent.ledger.runs) == 2
    assert agent.messages_wire()[-1]["content"] == "w-1=sunny in Lisbon"
    assert [[t["name"] for t in run["tools"]] for run in seen[-2:]] == [["confirm", "weather"]] * 2
    with pytest.raises(agui_meta.UsageError, match="declares 'confirm'"):
        await agent.run_agent(tools=[declared])


async def test_a_cancelled_run_leaves_its_calls_alone(
    scripted: tuple[str, list[dict[str, Any]]],
) -> None:
    base, _ = scripted
    url = url_calling(base, ("w", "weather", '{"city": "Lisbon"}'), cancelled=True)
    agent = agui_meta.HttpAgent(
        url, tools=[WEATHER], messages=[{"id": "u", "role": "user", "content": "hi"}]
    )
    result = await agent.run_agent()
    assert isinstance(result.outcome, agui_meta.RunCancelled)
    assert len(agent.ledger.runs) == 1
    assert tool_messages(agent) == []  # the agent gave up the run: nothing to answer


FULL_CAPABILITIES: dict[str, Any] = {
    "identity": {
        "name": "n",
        "type": "t",
        "description": "d",
        "version": "1.0.0",
        "provider": "p",
        "documentationUrl": "https://example.com",
        "metadata": {"acme.k": [1, {"x": None}]},
    },
    "transport": {
        "streaming": True,
        "websocket": False,
        "httpBinary": False,
        "pushNotifications": True,
        "resumable": True,
    },
    "tools": {
        "supported": True,
        "items": [
            {
                "name": "lookup",
                "description": "Look up",
                "parameters": {"type": "object"},
                "metadata": {"acme.v": 2},
            }
        ],
        "parallelCalls": True,
        "clientProvided": False,
    },
    "output": {"structuredOutput": True, "supportedMimeTypes": ["text/plain"]},
    "state": {"snapshots": True, "deltas": True, "memory": False, "persistentState": True},
    "multiAgent": {
        "supported": True,
        "delegation": True,
        "handoffs": False,
        "subagents": [{"name": "a"}, {"name": "b", "description": "B"}],
    },
    "reasoning": {"supported": True, "streaming": True, "encrypted": False},
    "multimodal": {
        "input": {"image": True, "audio": False, "video": False, "pdf": True, "file": True},
        "output": {"image": False, "audio": True},
    },
    "execution": {
        "codeExecution": True,
        "sandboxed": True,
        "maxIterations": 0,
        "maxExecutionTime": 9007199254740991,
    },
    "humanInTheLoop": {
        "supported": True,
        "approvals": True,
        "interventions": False,
        "feedback": True,
        "interrupts": True,
        "approveWithEdits": False,
    },
    "custom": {"acme.region": "eu", "nested": {"a": [1]}},
}
CAPABILITY_CASES: list[Any] = [
    FULL_CAPABILITIES,
    {},
    {"multimodal": {"input": {}}, "custom": {}},
    {"identity": {"name": None}},
    {"execution": {"maxIterations": -1}},
    {"execution": {"maxExecutionTime": 9007199254740992}},
    {"execution": {"maxIterations": 1.5}},
    {"transport": {"streaming": "yes"}},
    {"tools": {"items": [{"name": "x"}]}},
    {"multiAgent": {"subagents": [{"description": "no name"}]}},
    {"custom": []},
    {"output": {"supportedMimeTypes": "text/plain"}},
    [],
    # Members nobody knows: the official schema keeps them (loose), agui-meta strips them.
    {"identity": {"name": "x", "zz_future": 1}, "zz_later": {"a": 1}, "tools": {"zz_x": True}},
]


def without_unknown(value: Any) -> Any:
    """``value`` without the members named ``zz_…`` (the cases' unknown ones)."""
    if isinstance(value, dict):
        return {k: without_unknown(v) for k, v in value.items() if not k.startswith("zz_")}
    if isinstance(value, list):
        return [without_unknown(v) for v in value]
    return value


def official_capabilities() -> list[dict[str, Any]]:
    """The official AgentCapabilitiesSchema's verdict on each case (tests/capabilities_ref.cjs)."""
    import subprocess

    from tests.oracle import OracleUnavailable, oracle_missing, prepare_oracle

    try:
        directory = prepare_oracle()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    done = subprocess.run(
        ["node", str(Path(__file__).with_name("capabilities_ref.cjs")), str(directory)],
        input="".join(json.dumps(case) + "\n" for case in CAPABILITY_CASES),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_capabilities_decode_as_the_official_schema_parses_them() -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    official = await anyio.to_thread.run_sync(official_capabilities)
    assert len(official) == len(CAPABILITY_CASES)

    async def case(request: Request) -> Response:
        return JSONResponse(CAPABILITY_CASES[int(request.path_params["n"])])

    app = Starlette(routes=[Route("/caps/{n:int}", case, methods=["GET"])])
    reports: list[agui_meta.Report] = []
    with serve(app) as base:
        for n, theirs in enumerate(official):
            agent = agui_meta.HttpAgent(
                base + "/agent", capabilities_url=f"{base}/caps/{n}", on_report=reports.append
            )
            try:
                caps = await agent.capabilities()
            except agui_meta.DataError:
                assert "error" in theirs, (n, theirs)
            else:
                assert caps is not None
                assert "ok" in theirs, (n, theirs)
                assert msgspec.to_builtins(caps) == without_unknown(theirs["ok"]), n
    assert official[0] == {"ok": FULL_CAPABILITIES}  # every member of every part is known
    assert sum("error" in line for line in official) == 10
    assert official[-1]["ok"]["zz_later"] == {"a": 1}
    assert [r.path for r in reports] == ["$.identity.zz_future", "$.zz_later", "$.tools.zz_x"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_each_round_sends_what_the_official_client_sends_answered_by_hand(
    scripted: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    base, seen = scripted
    url = url_calling(base, ("w", "weather", '{"city": "Lisbon"}'), ("c", "clock", "{}"))
    user = {"id": "u-1", "role": "user", "content": "hi"}

    def clock(zone: str = "UTC") -> str:
        return f"noon in {zone}"

    agent = agui_meta.HttpAgent(
        url, thread_id="t-x", messages=[user], state={"k": 1}, tools=[WEATHER, clock]
    )
    before = len(seen)
    await agent.run_agent(context=[{"description": "d", "value": "v"}])
    ours = seen[before:]
    answers = tool_messages(agent)
    declarations = [WEATHER.declaration(), agui_meta.ClientTool(clock).declaration()]
    context = [{"description": "d", "value": "v"}]
    spec = {
        "threadId": "t-x",
        "messages": [user],
        "state": {"k": 1},
        "runs": [
            {"tools": declarations, "context": context},
            {"tools": declarations, "context": context, "addMessages": answers},
        ],
    }
    before = len(seen)
    official = await anyio.to_thread.run_sync(official_http_agent, url, spec, tmp_path)
    theirs = seen[before:]
    assert [line.get("error") for line in official] == [None, None]
    assert len(ours) == len(theirs) == 2
    for mine, other in zip(ours, theirs, strict=True):
        mine, other = dict(mine), dict(other)
        assert _UUID_RE.match(mine.pop("runId")) and _UUID_RE.match(other.pop("runId"))
        assert mine == other
    assert agent.messages_wire() == official[-1]["messages"]


def test_clone_passes_on_every_option_of_the_constructor() -> None:
    import inspect

    # A new option of HttpAgent must reach its clones too.
    options = set(inspect.signature(agui_meta.HttpAgent.__init__).parameters) - {"self", "url"}
    source = inspect.getsource(agui_meta.HttpAgent.clone)
    assert sorted(o for o in options if f"{o}=" not in source) == []
    agent = agui_meta.HttpAgent(
        "http://127.0.0.1:1/agent",
        headers={"x-k": "v"},
        thread_id="t",
        state={"a": [1]},
        accept="jsonl",
        reconnect=2,
        mode="strict",
        tools=[WEATHER],
        max_tool_rounds=3,
        tool_timeout=5.0,
        capabilities_url="http://127.0.0.1:1/caps",
    )
    twin = agent.clone()
    for name in ("url", "headers", "thread_id", "accept", "reconnect", "mode", "max_tool_rounds"):
        assert getattr(twin, name) == getattr(agent, name), name
    assert (twin.tool_timeout, twin.capabilities_url) == (5.0, "http://127.0.0.1:1/caps")
    assert twin.state == agent.state and twin.state is not agent.state
    twin.state["a"].append(2)
    assert agent.state == {"a": [1]}


async def test_calls_past_max_tool_calls_are_refused_unrun(
    scripted: tuple[str, list[dict[str, Any]]],
) -> None:
    base, _ = scripted
    ran: list[str] = []

    def weather(city: str) -> str:
        ran.append(city)
        return f"sunny in {city}"

    calls = [(f"w{n}", "weather", json.dumps({"city": f"c{n}"})) for n in range(40)]
    agent = agui_meta.HttpAgent(
        url_calling(base, *calls),
        tools=[weather],
        max_tool_calls=5,
        messages=[{"id": "u", "role": "user", "content": "hi"}],
    )
    await agent.run_agent()
    answers = tool_messages(agent)
    assert len(answers) == 40  # every call answered, in order; only the first 5 run
    assert sorted(ran) == [f"c{n}" for n in range(5)]
    assert [m.get("error") for m in answers[:5]] == [None] * 5
    assert answers[5]["error"] == (
        "tool 'weather': not run: the run made 40 calls to client tools, more than the client "
        "runs for one run (max_tool_calls=5)"
    )
    assert all(m["error"] == answers[5]["error"] for m in answers[5:])
