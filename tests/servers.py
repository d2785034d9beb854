"""Real HTTP servers on 127.0.0.1 for the client and server tests, and the agents they run.

:func:`serve` runs an ASGI app with uvicorn in a thread on a free port. :func:`agent_app`
builds a Starlette app whose endpoints are the agents the tests talk to: a scripted
multi-run thread (its output depends only on the run input, so two clients sending the same
input get the same stream), and servers that misbehave on purpose.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio

import agui_meta
from tests import needs
from tests.oracle import OracleUnavailable, oracle_missing, prepare_oracle

TIMEOUT = 30.0


@contextlib.contextmanager
def serve(app: Any, *, lifespan: str = "off") -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 (a free port) in a thread; yield its base URL.

    ``lifespan="on"`` runs the app's lifespan (start-up before the URL is yielded, shutdown
    when the server stops)."""
    uvicorn = needs.module("uvicorn")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, lifespan=lifespan, ws="none", log_level="critical", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while not server.started:
            assert thread.is_alive(), "the server stopped while starting"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(TIMEOUT)
        sock.close()
    assert not thread.is_alive(), "the server did not stop"


def official_http_agent(url: str, spec: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    """The official HttpAgent's run lines (``http_agent.cjs``), skipping without Node.js."""
    try:
        directory = prepare_oracle()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    path = tmp / "runs.json"
    path.write_text(json.dumps(spec))
    done = subprocess.run(
        ["node", str(directory / "http_agent.cjs"), url, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------------
# The scripted thread: what it sends depends only on the run input.


def thread_script(run: dict[str, Any]) -> list[dict[str, Any]]:
    """A three-turn thread: a frontend tool call, the answer using its result, a snapshot."""
    ids = {"threadId": run["threadId"], "runId": run["runId"]}
    rid = run["runId"]
    messages = run.get("messages", [])
    last = messages[-1] if messages else {}
    state = run.get("state") or {}
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", **ids, "metadata": {"srv.turn": rid}}]
    if last.get("role") == "tool":
        events += [
            {
                "type": "TEXT_MESSAGE_START",
                "messageId": f"{rid}-a",
                "role": "assistant",
                "metadata": {"srv.model": "m-2"},
            },
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{rid}-a", "delta": "It is "},
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": f"{rid}-a",
                "delta": f"{last.get('content')}.",
            },
            {
                "type": "TEXT_MESSAGE_END",
                "messageId": f"{rid}-a",
                "metadata": {"srv.finish": "stop"},
            },
            {
                "type": "STATE_DELTA",
                "delta": [{"op": "add", "path": "/answers", "value": state.get("answers", 0) + 1}],
            },
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": f"{rid}-act",
                "activityType": "progress",
                "content": {"done": True},
                "metadata": {"srv.act": 1},
            },
            {
                "type": "RUN_FINISHED",
                **ids,
                "result": {"answered": True},
                "usage": [{"provider": "srv", "model": "m-2", "inputTokens": 7, "outputTokens": 3}],
            },
        ]
    elif last.get("role") == "user" and last.get("content") == "snapshot":
        kept = [m for m in messages if m.get("role") != "tool"]
        events += [
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [
                    *kept,
                    {
                        "id": f"{rid}-s",
                        "role": "assistant",
                        "content": "summary",
                        "metadata": {"srv.snap": True},
                    },
                ],
            },
            {"type": "STATE_SNAPSHOT", "snapshot": {"summarised": len(kept)}},
            {"type": "RUN_FINISHED", **ids},
        ]
    else:
        events += [
            {
                "type": "TEXT_MESSAGE_CHUNK",
                "messageId": f"{rid}-t",
                "delta": "Let me check",
                "metadata": {"srv.model": "m-1"},
            },
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": f"{rid}-t", "delta": " the weather."},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": f"{rid}-call",
                "toolCallName": "weather",
                "parentMessageId": f"{rid}-t",
                "metadata": {"srv.tool": "front"},
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": f"{rid}-call", "delta": '{"city":'},
            {"type": "TOOL_CALL_ARGS", "toolCallId": f"{rid}-call", "delta": '"Lisbon"}'},
            {"type": "TOOL_CALL_END", "toolCallId": f"{rid}-call"},
            {"type": "STATE_SNAPSHOT", "snapshot": {**state, "asked": len(messages)}},
            {"type": "RUN_FINISHED", **ids},
        ]
    return events


async def scripted(events: list[dict[str, Any]], pause: float = 0.0) -> AsyncIterator[Any]:
    for event in events:
        if pause:
            await anyio.sleep(pause)
        yield event


def agent_app(**replay_options: Any) -> Any:
    """The Starlette app of the tests' agents (``replay_options`` for the replay buffer)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Route

    replay = agui_meta.ReplayBuffer(**replay_options) if replay_options else None
    app_state: dict[str, Any] = {"closed": 0, "started": 0, "bodies": [], "headers": []}

    async def body_of(request: Request) -> dict[str, Any]:
        raw = await request.body()
        app_state["bodies"].append(raw)
        app_state["headers"].append(dict(request.headers))
        return json.loads(raw) if raw else {}

    async def thread(request: Request) -> Response:
        run = await body_of(request)
        return agui_meta.EventStreamResponse(
            scripted(thread_script(run)), replay=replay, keepalive=None
        )

    async def tracked(events: list[dict[str, Any]], pause: float) -> AsyncIterator[Any]:
        app_state["started"] += 1
        try:
            async for event in scripted(events, pause):
                yield event
            await anyio.sleep_forever()
        finally:
            app_state["closed"] += 1

    async def slow(request: Request) -> Response:
        """Events every 20 ms after the script, then silence until the client leaves."""
        run = await body_of(request)
        events = thread_script(run)[:-1]
        use = replay if request.query_params.get("replay", "1") == "1" else None
        return agui_meta.EventStreamResponse(tracked(events, 0.02), replay=use, keepalive=0.05)

    async def dropping(request: Request) -> Response:
        """The script cut in the middle of an event; ``?ids=0`` leaves out the SSE ids."""
        run = await body_of(request)
        events = thread_script(run)
        ids = request.query_params.get("ids", "1") == "1"
        frames = [
            agui_meta.framing.encode_sse(json.dumps(e).encode(), id=f"x:{n}" if ids else None)
            for n, e in enumerate(events)
        ]

        async def body() -> AsyncIterator[bytes]:
            for frame in frames[:4]:
                yield frame
            yield frames[4][:10]
            await anyio.sleep(0.05)
            raise RuntimeError("the connection is cut on purpose")

        return StreamingResponse(body(), media_type="text/event-stream")

    async def resumable(request: Request) -> Response:
        """A stream that drops twice part way, then resumes from the replay buffer."""
        run = await body_of(request)
        return agui_meta.EventStreamResponse(
            scripted(thread_script(run), 0.01), replay=replay, keepalive=None, retry=20
        )

    async def status_500(request: Request) -> Response:
        await body_of(request)
        return PlainTextResponse("the agent is down for maintenance", status_code=500)

    async def run_error(request: Request) -> Response:
        run = await body_of(request)
        ids = {"threadId": run["threadId"], "runId": run["runId"]}
        events = [
            {"type": "RUN_STARTED", **ids},
            {"type": "TEXT_MESSAGE_START", "messageId": "e-1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "e-1", "delta": "Partial"},
            {"type": "TEXT_MESSAGE_END", "messageId": "e-1"},
            {
                "type": "RUN_ERROR",
                "message": "the model refused",
                "code": "refusal",
                "usage": [{"provider": "srv", "inputTokens": 5}],
            },
        ]
        return agui_meta.EventStreamResponse(scripted(events))

    async def no_terminal(request: Request) -> Response:
        run = await body_of(request)
        return agui_meta.EventStreamResponse(scripted(thread_script(run)[:-1]))

    async def protobuf(request: Request) -> Response:
        await body_of(request)
        return Response(b"\x00\x00\x00\x02\x08\x01", media_type="application/vnd.ag-ui.event+proto")

    async def stall(request: Request) -> Response:
        run = await body_of(request)
        ids = {"threadId": run["threadId"], "runId": run["runId"]}
        return agui_meta.EventStreamResponse(
            tracked([{"type": "RUN_STARTED", **ids}], 0.0), keepalive=None
        )

    app = Starlette(
        routes=[
            Route("/thread", thread, methods=["POST"]),
            Route("/slow", slow, methods=["POST"]),
            Route("/dropping", dropping, methods=["POST"]),
            Route("/resumable", resumable, methods=["POST"]),
            Route("/500", status_500, methods=["POST"]),
            Route("/run-error", run_error, methods=["POST"]),
            Route("/no-terminal", no_terminal, methods=["POST"]),
            Route("/protobuf", protobuf, methods=["POST"]),
            Route("/stall", stall, methods=["POST"]),
        ]
    )
    app.state.agents = app_state
    app.state.replay = replay
    return app
