"""Trace context both ways, with real servers on 127.0.0.1 and the SDK's in-memory exporters.

The server stamps its current span's W3C context in RUN_STARTED's metadata; HttpAgent sends
the client's current span as ``traceparent`` with each request, parents its otel() spans to it
and puts the run's trace id on the run result. Expectations come from the spans' own ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.needs import in_ci

try:
    import opentelemetry.sdk  # noqa: F401
    import starlette  # noqa: F401
except ImportError:  # pragma: no cover - the test extra installs them
    if in_ci():
        raise
    pytest.skip("opentelemetry-sdk or starlette is missing", allow_module_level=True)

from opentelemetry import context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import agui_meta
from agui_meta._tracecontext import trace_id
from tests.servers import serve

TRACESTATE = "vendor=abc"


def _events(run: dict[str, Any], own: str | None = None) -> list[dict[str, Any]]:
    ids = {"threadId": run.get("threadId", "t"), "runId": run.get("runId", "r")}
    started: dict[str, Any] = {"type": "RUN_STARTED", **ids, "metadata": {"app.k": 1}}
    if own is not None:
        started["metadata"]["w3c.traceparent"] = own
    return [
        started,
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", **ids},
    ]


class Server:
    """An app that continues the caller's trace (as an instrumented server does) in a span of
    its own while it makes the response; it records the headers it got and its spans."""

    def __init__(self) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.headers: list[dict[str, str]] = []
        tracer = self.provider.get_tracer("server")

        async def agent(request: Request) -> Response:
            self.headers.append(dict(request.headers))
            run = json.loads(await request.body() or b"{}")
            parent = TraceContextTextMapPropagator().extract(dict(request.headers))
            with tracer.start_as_current_span("POST /agent", context=parent):
                return agui_meta.EventStreamResponse(_events(run), keepalive=None)

        async def untraced(request: Request) -> Response:
            return agui_meta.EventStreamResponse(_events({}), keepalive=None)

        async def own(request: Request) -> Response:
            with tracer.start_as_current_span("POST /own"):
                mine = f"00-{'ab' * 16}-{'cd' * 8}-01"
                return agui_meta.EventStreamResponse(_events({}, own=mine), keepalive=None)

        self.app = Starlette(
            routes=[
                Route("/agent", agent, methods=["POST"]),
                Route("/untraced", untraced, methods=["POST"]),
                Route("/own", own, methods=["POST"]),
            ]
        )


@pytest.fixture
def server() -> Iterator[tuple[str, Server]]:
    app = Server()
    with serve(app.app) as url:
        yield url, app
    app.provider.shutdown()


def _started_metadata(body: str) -> dict[str, Any]:
    for line in body.splitlines():
        if line.startswith("data: ") and '"RUN_STARTED"' in line:
            return json.loads(line[6:]).get("metadata", {})  # type: ignore[no-any-return]
    raise AssertionError("no RUN_STARTED")


def test_the_server_stamps_its_span_in_run_started(server: tuple[str, Server]) -> None:
    url, app = server
    caller = f"00-{'12' * 16}-{'34' * 8}-01"
    body = httpx.post(f"{url}/agent", json={}, headers={"traceparent": caller,
                      "tracestate": TRACESTATE}, timeout=30).text  # fmt: skip
    metadata = _started_metadata(body)
    (span,) = app.exporter.get_finished_spans()
    context_of = span.get_span_context()
    assert metadata["w3c.traceparent"] == (
        f"00-{context_of.trace_id:032x}-{context_of.span_id:016x}-{int(context_of.trace_flags):02x}"
    )
    assert trace_id(metadata["w3c.traceparent"]) == "12" * 16  # the caller's trace, continued
    assert metadata["w3c.tracestate"] == TRACESTATE
    assert metadata["app.k"] == 1  # the agent's own metadata is kept


def test_without_a_span_nothing_is_stamped(server: tuple[str, Server]) -> None:
    url, _ = server
    metadata = _started_metadata(httpx.post(f"{url}/untraced", json={}, timeout=30).text)
    assert metadata == {"app.k": 1}


def test_a_traceparent_of_the_agents_own_is_kept(server: tuple[str, Server]) -> None:
    url, _ = server
    metadata = _started_metadata(httpx.post(f"{url}/own", json={}, timeout=30).text)
    assert metadata["w3c.traceparent"] == f"00-{'ab' * 16}-{'cd' * 8}-01"


def test_http_agent_sends_its_trace_and_parents_its_spans(server: tuple[str, Server]) -> None:
    url, app = server
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stage = agui_meta.otel(tracer_provider=provider)
    agent = agui_meta.HttpAgent(f"{url}/agent", thread_id="t", stages=[stage])
    tracer = provider.get_tracer("client")

    async def main() -> agui_meta.RunResult:
        with tracer.start_as_current_span("user action"):
            return await agent.run_agent(run_id="r1")

    result = anyio.run(main)
    client_spans = {s.name: s for s in exporter.get_finished_spans()}
    action, run = client_spans["user action"], client_spans["invoke_agent"]
    ours = f"{action.context.trace_id:032x}"
    # The request carried the client's span; the server continued its trace.
    (headers,) = app.headers
    flags = int(action.context.trace_flags)
    assert headers["traceparent"] == f"00-{ours}-{action.context.span_id:016x}-{flags:02x}"
    (server_span,) = app.exporter.get_finished_spans()
    assert server_span.parent is not None
    assert server_span.parent.span_id == action.context.span_id
    # otel() behind the agent: the run's span is the client's span's child (not the server's).
    assert run.parent is not None and run.parent.span_id == action.context.span_id
    assert result.trace_id == ours
    provider.shutdown()


def test_without_a_span_the_run_result_has_the_servers_trace(server: tuple[str, Server]) -> None:
    url, app = server
    assert trace.get_current_span(context.get_current()).get_span_context().is_valid is False
    agent = agui_meta.HttpAgent(f"{url}/agent", thread_id="t")
    result = anyio.run(agent.run_agent)
    (headers,) = app.headers
    assert "traceparent" not in headers
    (server_span,) = app.exporter.get_finished_spans()
    assert result.trace_id == f"{server_span.get_span_context().trace_id:032x}"


def test_trace_ids() -> None:
    assert trace_id(f"00-{'a1' * 16}-{'b2' * 8}-01") == "a1" * 16
    for bad in (None, 5, "", "00-xyz", f"00-{'0' * 32}-{'b2' * 8}-01"):
        assert trace_id(bad) is None


# ---------------------------------------------------------------------------------------------
# The gateway: its runs encode their own events; the request's span is stamped all the same.


async def _bare(input: Any) -> Any:
    """An agent that sends no RUN_STARTED (the gateway makes one)."""
    yield {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    yield {"type": "TEXT_MESSAGE_END", "messageId": "m"}
    yield {"type": "RUN_FINISHED", "threadId": input.thread_id, "runId": input.run_id}


def test_the_gateway_stamps_the_run_requests_span_in_run_started() -> None:
    from agui_meta.gateway import Gateway
    from tests.gateway_agents import run_body, scripted

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("server")
    gateway = Gateway({"scripted": scripted, "bare": _bare}, linger=60)

    async def traced(scope: Any, receive: Any, send: Any) -> None:
        """The gateway behind an instrumented server: a span per request, the caller's child."""
        if scope["type"] != "http":
            return await gateway(scope, receive, send)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        parent = TraceContextTextMapPropagator().extract(headers)
        with tracer.start_as_current_span(scope["path"], context=parent):
            await gateway(scope, receive, send)

    caller = f"00-{'12' * 16}-{'34' * 8}-01"
    with serve(traced, lifespan="on") as url:
        bodies = {
            name: httpx.post(
                f"{url}/agents/{name}/run",
                json=run_body(name, "r1"),
                headers={"traceparent": caller, "tracestate": TRACESTATE},
                timeout=30,
            ).text
            for name in ("scripted", "bare")
        }
        untraced = httpx.post(
            f"{url}/agents/scripted/run", json=run_body("u", "r1"), timeout=30
        ).text
    spans = exporter.get_finished_spans()
    stamped = {
        f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-{int(s.context.trace_flags):02x}": s.name
        for s in spans
    }
    for name, body in bodies.items():
        metadata = _started_metadata(body)
        assert stamped[metadata["w3c.traceparent"]] == f"/agents/{name}/run"  # its request's
        assert trace_id(metadata["w3c.traceparent"]) == "12" * 16  # the caller's trace
        assert metadata["w3c.tracestate"] == TRACESTATE
    untraced_metadata = _started_metadata(untraced)  # a span of its own: a trace of its own
    assert stamped[untraced_metadata["w3c.traceparent"]] == "/agents/scripted/run"
    assert trace_id(untraced_metadata["w3c.traceparent"]) != "12" * 16
    assert "w3c.tracestate" not in untraced_metadata
    provider.shutdown()
