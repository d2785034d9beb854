"""An AG-UI endpoint (Starlette) that passes an agent's events through agui-meta stages.

    pip install starlette uvicorn
    python examples/server.py --port 8000
    curl -sN -X POST http://127.0.0.1:8000/agent | agui-meta replay -
    curl -s http://127.0.0.1:8000/usage

The agent yields ``ag_ui.core`` events, as agents built on the official Python SDK do. Before
they go to the browser, two stages run over them:

- ``Latency`` measures each message and tool call from START to END and adds it to the END
  event's metadata under a vendor-prefixed key (``acme.latency_ms``), as the specification
  asks producers to name their keys; the browser's client merges it into the item;
- ``agui_meta.Ledger()`` records each run: its outcome and the token usage of RUN_FINISHED,
  which ``GET /usage`` reports.

Everything else is re-streamed as it came, as AG-UI SSE (``data: <event JSON>``).
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import msgspec
from ag_ui import core
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import agui_meta

log = logging.getLogger("agui-meta.example")

# ---------------------------------------------------------------------------------------------
# The agent: any async iterator of ag_ui.core events.


async def weather_agent(run: core.RunAgentInput) -> AsyncIterator[core.BaseEvent]:
    """A stand-in for a model-backed agent: a tool call, its result, an answer."""
    ids = {"thread_id": run.thread_id, "run_id": run.run_id}
    yield core.RunStartedEvent(**ids)
    yield core.ToolCallStartEvent(
        tool_call_id="call-1",
        tool_call_name="get_weather",
        metadata={"acme.model": "gpt-4.1"},
    )
    for piece in ('{"city": ', '"Lisbon"}'):
        await anyio.sleep(0.01)  # the model producing the arguments
        yield core.ToolCallArgsEvent(tool_call_id="call-1", delta=piece)
    yield core.ToolCallEndEvent(tool_call_id="call-1")
    yield core.ToolCallResultEvent(
        message_id="result-1", tool_call_id="call-1", content='{"high_c": 24, "sky": "clear"}'
    )
    yield core.TextMessageStartEvent(
        message_id="answer-1", role="assistant", metadata={"acme.model": "gpt-4.1"}
    )
    for word in ("Sunny ", "and ", "24 °C ", "in ", "Lisbon."):
        await anyio.sleep(0.01)  # the model producing tokens
        yield core.TextMessageContentEvent(message_id="answer-1", delta=word)
    yield core.TextMessageEndEvent(message_id="answer-1", metadata={"acme.finish_reason": "stop"})
    yield core.RunFinishedEvent(
        **ids,
        usage=[
            core.TokenUsage(provider="openai", model="gpt-4.1", input_tokens=512, output_tokens=38)
        ],
        metadata={"acme.cost_usd": 0.0014},
    )


# ---------------------------------------------------------------------------------------------
# A stage of our own: a transducer, fused with the built-in stages into one loop.

_STARTS = {
    agui_meta.events.TextMessageStartEvent: "message_id",
    agui_meta.events.ReasoningMessageStartEvent: "message_id",
    agui_meta.events.ToolCallStartEvent: "tool_call_id",
}
_ENDS = {
    agui_meta.events.TextMessageEndEvent: "message_id",
    agui_meta.events.ReasoningMessageEndEvent: "message_id",
    agui_meta.events.ToolCallEndEvent: "tool_call_id",
}


class Latency(agui_meta.Transducer[agui_meta.events.Event, agui_meta.events.Event]):
    """Adds ``acme.latency_ms`` (START to END) to the metadata of every END event."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started: dict[tuple[str, str], float] = {}

    def feed(self, event: agui_meta.events.Event) -> None:
        kind = type(event)
        if kind in _STARTS:
            self.started[(_STARTS[kind], getattr(event, _STARTS[kind]))] = self.clock()
        elif kind in _ENDS:
            began = self.started.pop((_ENDS[kind], getattr(event, _ENDS[kind])), None)
            if began is not None:
                latency = agui_meta.vendor_keys(
                    "acme", latency_ms=round(1000 * (self.clock() - began))
                )
                # Events are immutable: emit a copy with the merged metadata.
                event = msgspec.structs.replace(
                    event, metadata=agui_meta.merge_metadata(event.metadata, latency)
                )
        self.emit(event)


# ---------------------------------------------------------------------------------------------
# The endpoints

#: Runs recorded by the ledgers, newest last (a real server would use a database).
RUNS: list[agui_meta.RunRecord] = []


def _report(report: agui_meta.Report) -> None:
    log.warning("agui-meta: %s", report)


async def agent_endpoint(request: Request) -> Response:
    """``POST /agent`` with a RunAgentInput (JSON; optional): the run as AG-UI SSE."""
    body = await request.body()
    if body:
        run = core.RunAgentInput.model_validate_json(body)
    else:
        run = core.RunAgentInput(
            thread_id="thread-1",
            run_id="run-1",
            state={},
            messages=[],
            tools=[],
            context=[],
            forwarded_props={},
        )

    async def sse() -> AsyncIterator[bytes]:
        stages = (Latency(), agui_meta.Ledger(on_run=RUNS.append))
        async with agui_meta.wrap(weather_agent(run), *stages, on_report=_report) as events:
            async for event in events:
                yield b"data: " + agui_meta.events.encode_event(event) + b"\n\n"

    return StreamingResponse(
        sse(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


async def usage_endpoint(request: Request) -> Response:
    """``GET /usage``: the runs so far, with their status and token usage per model."""
    runs: list[dict[str, Any]] = [
        {
            "threadId": run.thread_id,
            "runId": run.run_id,
            "status": run.status,
            "usage": msgspec.to_builtins(run.aggregated_usage),
            "metadata": run.finished_metadata if isinstance(run.finished_metadata, dict) else None,
        }
        for run in RUNS
    ]
    return JSONResponse({"runs": runs})


app = Starlette(
    routes=[
        Route("/agent", agent_endpoint, methods=["POST"]),
        Route("/usage", usage_endpoint, methods=["GET"]),
    ]
)


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
