"""Every script in ``examples/`` runs, and prints what its input says it should.

Scripts run as users run them (``python examples/NAME.py``, in a subprocess) or through their
functions; the two network examples talk to a real uvicorn server on 127.0.0.1 (a free port,
in a thread), with timeouts around every wait. Expectations come from the specification's
merge rules applied to the examples' own events, from the reference client, or from the
recorded streams' events, never from a previous run of the scripts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest

from tests import example_streams, needs
from tests.example_streams import EXAMPLES, STREAMS
from tests.oracle import REPO_ROOT, OracleServer, assert_same_result

TIMEOUT = 60


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python examples/NAME.py ARGS``, the package importable as when installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=TIMEOUT,
        env=env,
        check=False,
    )
    out = subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )
    assert out.returncode == 0, out.stderr
    # Absent values reach users as None or a "-": msgspec's UNSET is never printed.
    assert "UNSET" not in out.stdout, out.stdout
    return out


def load_example(name: str) -> ModuleType:
    """``examples/NAME.py`` imported as a module (each has a ``main()``)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spec_metadata(events: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each item's metadata by the specification's table (for the event kinds used here).

    Text message and tool-result events merge into the message they name, tool-call events
    (chunks included) into the tool call; key by key, the last write winning.
    """
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for event in events:
        kind = event["type"]
        if kind.startswith("TEXT_MESSAGE_") or kind == "TOOL_CALL_RESULT":
            key = ("message", event["messageId"])
        elif kind.startswith("TOOL_CALL_"):
            key = ("call", event["toolCallId"])
        else:
            continue
        if "metadata" in event:
            merged.setdefault(key, {}).update(event["metadata"])
    return merged


# ---------------------------------------------------------------------------------------------
# A real server on loopback


@contextlib.contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 (a free port) in a thread; yield its base URL."""
    uvicorn = needs.module("uvicorn")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", ws="none", log_level="warning")
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


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """The events of an AG-UI SSE body, read strictly: only ``data: <JSON>`` frames."""
    text = body.decode()
    assert re.fullmatch(r"(data: [^\n]+\n\n)*", text), text[:200]
    return [json.loads(frame[len("data: ") :]) for frame in text.split("\n\n") if frame]


# ---------------------------------------------------------------------------------------------
# 1. print_items.py


def test_print_items_prints_each_item_with_its_merged_metadata() -> None:
    example = load_example("print_items")

    async def collect() -> list[dict[str, Any]]:
        return [event async for event in example.agent()]

    events = anyio.run(collect)
    expected = spec_metadata(events)
    out = run_example("print_items").stdout.splitlines()
    # Items in the order they complete: the message (END), the call (closed by the result),
    # the tool message (complete when it arrives).
    assert out[0] == "assistant message msg-1: Let me check the weather."
    assert json.loads(out[1].removeprefix("  metadata: ")) == expected[("message", "msg-1")]
    assert out[2] == 'tool call call-1: get_weather({"city": "Lisbon"})'
    assert json.loads(out[3].removeprefix("  metadata: ")) == expected[("call", "call-1")]
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert out[4] == f"tool message result-1: {result['content']}"
    assert json.loads(out[5].removeprefix("  metadata: ")) == expected[("message", "result-1")]
    # The tool call's metadata stays on the call: the message shows none of its keys.
    assert not set(expected[("call", "call-1")]) & set(json.loads(out[1][12:]))
    assert out[6:] == ["run run-1: finished, 2 messages in the store"]


# ---------------------------------------------------------------------------------------------
# 2. httpx_client.py


def recorded_stream_app(name: str, received: list[Any]) -> Any:
    """An AG-UI endpoint that answers every POST with a recorded stream, in odd-sized chunks."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def endpoint(request: Request) -> StreamingResponse:
        received.append(await request.json())
        data = await anyio.Path(STREAMS / name).read_bytes()

        async def body() -> AsyncIterator[bytes]:
            for start in range(0, len(data), 997):
                yield data[start : start + 997]

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


def test_httpx_client_consumes_an_sse_endpoint(oracle: OracleServer) -> None:
    example = load_example("httpx_client")
    case = example_streams.case("travel.sse")
    received: list[Any] = []
    with serve(recorded_stream_app("travel.sse", received)) as base:
        url = f"{base}/agent"
        out = run_example("httpx_client", url, "--message", "Lisbon, please").stdout
        stages = anyio.run(example.consume, url, example.run_input("again"))
    # The client sent a run input; the store holds what the reference client builds.
    assert [r["messages"][0]["content"] for r in received] == ["Lisbon, please", "again"]
    assert {"threadId", "runId", "messages"} <= set(received[0])
    ours = {"name": case["name"], "messages": stages.store.messages_wire(), "state": {}}
    expected = oracle.run_one(case)
    assert_same_result({**ours, "state": stages.store.state}, expected, case)
    # Printed as the items completed: every text and tool message, and each tool call.
    lines = out.splitlines()
    for message in expected["messages"]:
        if message["role"] in ("assistant", "tool", "reasoning") and message.get("content"):
            first = message["content"].splitlines()[0]
            assert any(x.startswith(f"[{message['role']}] {first}") for x in lines), first
        for call in message.get("toolCalls", []):
            prefix = f"[tool call] {call['function']['name']}({call['function']['arguments']})  "
            line = next(x for x in lines if x.startswith(prefix))
            assert json.loads(line[len(prefix) :]) == call["metadata"]
    # Then the ledger: the usage the stream's RUN_FINISHED carries.
    (finished,) = [e for e in case["events"] if e["type"] == "RUN_FINISHED"]
    assert "run run-1: finished" in lines
    for usage in finished["usage"]:
        assert (
            f"  {usage['provider']}/{usage['model']}: {usage['inputTokens']} in, "
            f"{usage['outputTokens']} out"
        ) in lines


# ---------------------------------------------------------------------------------------------
# 3. server.py


def test_server_restreams_the_agent_with_latency_and_records_usage(
    oracle: OracleServer,
) -> None:
    example = load_example("server")
    from ag_ui import core

    run_input = {
        "threadId": "thread-test",
        "runId": "run-test-1",
        "messages": [],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }

    async def agent_events() -> list[dict[str, Any]]:
        run = core.RunAgentInput.model_validate(run_input)
        return [
            json.loads(event.model_dump_json(by_alias=True))
            async for event in example.weather_agent(run)
        ]

    original = anyio.run(agent_events)
    with serve(example.app) as base, httpx.Client(timeout=TIMEOUT) as client:
        response = client.post(f"{base}/agent", json=run_input)
        usage = client.get(f"{base}/usage").json()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    streamed = sse_events(response.content)

    # The re-streamed events are the agent's, plus acme.latency_ms on every END event.
    assert len(streamed) == len(original)
    latencies = {}
    for event in streamed:
        metadata = event.get("metadata", {})
        if event["type"] in ("TEXT_MESSAGE_END", "TOOL_CALL_END"):
            latency = metadata.pop("acme.latency_ms")
            assert isinstance(latency, int) and latency >= 0
            latencies[event.get("messageId") or event["toolCallId"]] = latency
            if not metadata:
                del event["metadata"]
        else:
            assert "acme.latency_ms" not in metadata
    assert streamed == original
    assert set(latencies) == {"call-1", "answer-1"}

    # Valid AG-UI: the reference client accepts the stream and merges the latency into items.
    case = {"name": "server", "events": sse_events(response.content)}
    result = oracle.run_one(case)
    assert "error" not in result, result
    by_id = {m["id"]: m for m in result["messages"]}
    assert by_id["answer-1"]["metadata"]["acme.latency_ms"] == latencies["answer-1"]
    (call,) = by_id["call-1"]["toolCalls"]
    assert call["metadata"]["acme.latency_ms"] == latencies["call-1"]

    # The ledger recorded the run's usage, served by /usage.
    (run,) = [r for r in usage["runs"] if r["runId"] == "run-test-1"]
    finished = original[-1]
    assert run["status"] == "finished"
    assert run["usage"] == finished["usage"]
    assert run["metadata"] == finished["metadata"]


# ---------------------------------------------------------------------------------------------
# 4. redaction.py


def test_redaction_middleware_between_built_in_stages() -> None:
    example = load_example("redaction")
    out = run_example("redaction").stdout
    messages = {m["id"]: m for m in map(json.loads, out.splitlines())}
    assert "@" not in out and "912" not in out
    # The three chunks of msg-1, with the address and the number replaced.
    assert messages["msg-1"]["content"] == "I found your account: [email], phone [phone]."
    merged = spec_metadata(example.EVENTS)
    assert messages["msg-1"]["metadata"] == {
        **merged[("message", "msg-1")],
        "redactor.redactions": 2,
    }
    result = messages["result-1"]
    assert json.loads(result["content"]) == {"email": "[email]", "tier": "gold"}
    assert result["metadata"] == {**merged[("message", "result-1")], "redactor.redactions": 1}
    # The tool call was left alone.
    (call,) = messages["msg-1"]["toolCalls"]
    assert call["function"]["arguments"] == '{"customer": 4821}'


def test_redaction_stage_scrubs_what_it_should() -> None:
    example = load_example("redaction")
    assert example.scrub("mail a.b+c@mail.example.org or call (555) 123-4567") == (
        "mail [email] or call [phone]",
        2,
    )
    assert example.scrub("order 4821 costs 12.50") == ("order 4821 costs 12.50", 0)


# ---------------------------------------------------------------------------------------------
# 5. usage_report.py


def test_usage_report_sums_the_ledgers_of_the_recorded_streams() -> None:
    out = run_example("usage_report").stdout.splitlines()
    # Expected: the usage entries of every RUN_FINISHED, summed per provider and model.
    expected: dict[tuple[str, str], dict[str, int]] = {}
    for name in example_streams.GOOD:
        for event in example_streams.events(name):
            for entry in event.get("usage", []) if event["type"] == "RUN_FINISHED" else []:
                sums = expected.setdefault((entry["provider"], entry["model"]), {})
                for key, value in entry.items():
                    if key not in ("provider", "model"):
                        sums[key] = sums.get(key, 0) + value
    header = out.index(next(x for x in out if x.startswith("provider")))
    columns = out[header].split()[2:]
    assert columns == ["input", "output", "total", "reasoning", "cached"]
    rows = out[header + 2 :]
    assert len(rows) == len(expected)
    for row in rows:
        provider, model, *counts = row.split()
        sums = expected[(provider, model)]
        for column, count in zip(columns, counts, strict=True):
            key = {"cached": "cachedInput"}.get(column, column) + "Tokens"
            assert count == (str(sums[key]) if key in sums else "-"), (row, column)
    # Per file: the runs, and the bad events of the broken stream skipped, not fatal.
    errors = len(example_streams.generator().ERROR_LINES)
    assert f"broken.jsonl: 1 run ({errors} bad events skipped)" in out
    assert "support.jsonl: 2 runs" in out and "travel.sse: 1 run" in out


def test_usage_report_of_given_files(capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example("usage_report")
    assert example.main([str(STREAMS / "travel.sse")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("travel.sse: 1 run\n")
    assert "anthropic" not in out


# ---------------------------------------------------------------------------------------------
# The recorded streams


def test_streams_are_what_the_generator_writes(tmp_path: Path) -> None:
    example_streams.generator().main(["--out", str(tmp_path)])
    written = sorted(p.name for p in tmp_path.iterdir())
    committed = sorted(p.name for p in STREAMS.iterdir() if p.suffix in (".sse", ".jsonl"))
    assert written == committed
    for name in written:
        assert (tmp_path / name).read_bytes() == (STREAMS / name).read_bytes(), name


@pytest.mark.parametrize("name", sorted(example_streams.GOOD))
def test_good_streams_pass_the_reference_client(name: str, oracle: OracleServer) -> None:
    result = oracle.run_one(example_streams.case(name))
    assert "error" not in result, result
    size = (STREAMS / name).stat().st_size
    assert size < 64 * 1024


@pytest.mark.parametrize("name", sorted(example_streams.GOOD))
def test_good_streams_through_the_library_match_the_reference(
    name: str, oracle: OracleServer
) -> None:
    import agui_meta

    async def replay() -> Any:
        stages = agui_meta.DefaultStages()
        data = await anyio.Path(STREAMS / name).read_bytes()
        async with agui_meta.wrap(data, *stages, mode="strict") as stream:
            await stream.drain()
        return stages.store

    store = anyio.run(replay)
    case = example_streams.case(name)
    ours = {"name": name, "messages": store.messages_wire(), "state": store.state}
    assert_same_result(ours, oracle.run_one(case), case)
