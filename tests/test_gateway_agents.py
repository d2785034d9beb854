"""The gateway in front of real agents, compared with the same agents reached directly.

- pydantic-ai's AG-UI app driving a ``FunctionModel``, called in-process through ASGI;
- the scripted agent served as a plain AG-UI endpoint on 127.0.0.1, fronted by URL;
- the official ``HttpAgent`` (the oracle's ``http_agent.cjs``) and agui-meta's ``HttpAgent``
  run the same runs straight at the agent and through the gateway: the same messages and
  state at the end of every run (pydantic-ai's random ids compared by order of appearance).
"""

from __future__ import annotations

import contextlib
import copy
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import agui_meta
from agui_meta.events import RunAgentInput, RunStartedEvent
from agui_meta.gateway import AsgiAgent, Gateway, UpstreamAgent
from tests.gateway_agents import scripted
from tests.servers import official_http_agent, serve
from tests.test_producers import PYDANTIC_SPEC, pydantic_ai_app, run_spec, same_ids

pytestmark = pytest.mark.anyio

SCRIPTED_SPEC: dict[str, Any] = {
    "threadId": "s",
    "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    "runs": [
        {"runId": "r1"},
        {"runId": "r2", "addMessages": [{"id": "u2", "role": "user", "content": "more"}]},
    ],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def plain_endpoint() -> Starlette:
    """The scripted agent as an ordinary AG-UI endpoint (no gateway)."""

    async def endpoint(request: Request) -> Response:
        probe = {"type": "RUN_STARTED", "threadId": "-", "runId": "-"}
        event = agui_meta.EventDecoder().decode({**probe, "input": await request.json()})
        assert isinstance(event, RunStartedEvent) and isinstance(event.input, RunAgentInput)
        return agui_meta.EventStreamResponse(scripted(event.input))

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


@pytest.fixture(scope="module")
def direct() -> Iterator[dict[str, str]]:
    """The agents reached directly."""
    with serve(pydantic_ai_app()) as pai, serve(plain_endpoint()) as plain:
        yield {"pai": pai + "/agent", "scripted": plain + "/agent"}


@pytest.fixture(scope="module")
def gateway_url(direct: dict[str, str]) -> Iterator[str]:
    agents = {
        "pai": AsgiAgent(pydantic_ai_app(), path="/agent"),  # in-process, no socket
        "upstream": UpstreamAgent(direct["scripted"]),  # over HTTP
        "scripted": scripted,
    }
    with serve(Gateway(agents), lifespan="on") as url:
        yield url


def renamed(spec: dict[str, Any], thread_id: str) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    spec["threadId"] = thread_id
    return spec


def comparable(lines: list[dict[str, Any]]) -> list[Any]:
    return [same_ids([line["messages"], line["state"], line.get("newMessages")]) for line in lines]


@pytest.mark.parametrize(
    ("agent", "spec"),
    [("pai", PYDANTIC_SPEC), ("scripted", SCRIPTED_SPEC)],
    ids=["pydantic-ai-asgi", "upstream-url"],
)
async def test_the_official_client_through_the_gateway_ends_as_straight_to_the_agent(
    direct: dict[str, str], gateway_url: str, agent: str, spec: dict[str, Any], tmp_path: Path
) -> None:
    through = f"{gateway_url}/agents/{'pai' if agent == 'pai' else 'upstream'}/run"
    straight = await anyio.to_thread.run_sync(official_http_agent, direct[agent], spec, tmp_path)
    official = await anyio.to_thread.run_sync(
        official_http_agent, through, renamed(spec, f"{agent}-official"), tmp_path
    )
    ours = await run_spec(through, renamed(spec, f"{agent}-ours"))
    assert all("error" not in line for line in straight + official), (straight, official)
    assert comparable(official) == comparable(straight)
    assert comparable(ours) == comparable(straight)
    # The gateway's threads are what the clients hold.
    import httpx

    async with httpx.AsyncClient() as client:
        for name, lines in (("official", official), ("ours", ours)):
            saved = (await client.get(f"{gateway_url}/threads/{agent}-{name}")).json()
            assert saved["messages"] == lines[-1]["messages"]
            assert saved["state"] == lines[-1]["state"]
            assert saved["version"] == len(spec["runs"])


async def test_an_upstream_that_refuses_or_is_gone_ends_the_run_with_a_clear_run_error(
    direct: dict[str, str],
) -> None:
    import httpx

    with socket_free_url() as gone:
        agents = {
            "refusing": UpstreamAgent(direct["scripted"].replace("/agent", "/nowhere")),
            "gone": UpstreamAgent(gone),
            "asgi-refusing": AsgiAgent(plain_endpoint(), path="/nowhere"),
        }
        with serve(Gateway(agents), lifespan="on") as url:
            async with httpx.AsyncClient(timeout=30) as client:
                errors = {}
                for name in agents:
                    body = {"threadId": name, "runId": "r", "messages": []}
                    answer = await client.post(f"{url}/agents/{name}/run", json=body)
                    events = [line for line in answer.text.splitlines() if line.startswith("data:")]
                    errors[name] = events[-1]
    assert '"code":"agent_error"' in errors["refusing"]
    assert "answered HTTP 404: Not Found" in errors["refusing"]
    assert "the agent failed: ConnectError" in errors["gone"]
    assert "the ASGI app at /nowhere answered HTTP 404: Not Found" in errors["asgi-refusing"]


@contextlib.contextmanager
def socket_free_url() -> Iterator[str]:
    """The URL of a port of 127.0.0.1 nothing listens on (bound, not listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/agent"
