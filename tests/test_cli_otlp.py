"""``agui-meta replay --otlp URL``: a recorded stream exported to a real OTLP/HTTP receiver.

The receiver (``tests/otlp_receiver.py``) listens on 127.0.0.1 and decodes what the SDK's
exporter sends with opentelemetry-proto; expectations come from the recorded streams' events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.needs import in_ci

try:
    from tests.otlp_receiver import OtlpReceiver
except ImportError:  # pragma: no cover - the test extra installs opentelemetry-proto
    if in_ci():
        raise
    pytest.skip("opentelemetry-proto is missing: pip install -e '.[test]'", allow_module_level=True)

from tests.example_streams import STREAMS, events
from tests.helpers import cli

MS = 1_000_000
SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3


@pytest.mark.parametrize("name", ["travel.sse", "support.jsonl"])
def test_replay_exports_the_runs_with_their_own_times(name: str) -> None:
    with OtlpReceiver() as receiver:
        done = cli("replay", "--otlp", receiver.url, str(STREAMS / name))
    assert done.returncode == 0, done.stderr
    assert "--- runs" in done.stdout  # the replay itself is unchanged
    spans = receiver.spans()
    wire = events(name)
    runs = [s for s in spans if s["kind"] == SPAN_KIND_CLIENT and "agui.run.id" in s["attributes"]]
    started = [e for e in wire if e["type"] == "RUN_STARTED"]
    assert [s["attributes"]["agui.run.id"] for s in runs] == [e["runId"] for e in started]
    assert [s["start"] for s in runs] == [e["timestamp"] * MS for e in started]
    ends = [e for e in wire if e["type"] in ("RUN_FINISHED", "RUN_ERROR")]
    assert [s["end"] for s in runs] == [e["timestamp"] * MS for e in ends]
    thread = started[0]["threadId"]
    assert {s["attributes"]["gen_ai.conversation.id"] for s in runs} == {thread}
    assert {s["service"] for s in spans} == {"agui-meta replay"}
    assert {s["scope"] for s in spans} == {"agui_meta"}
    by_id = {s["span_id"]: s for s in spans}
    for span in spans:
        if span not in runs:
            assert span["parent_span_id"] in by_id
            assert span["trace_id"] == by_id[span["parent_span_id"]]["trace_id"]
    tools = [s for s in spans if s["name"].startswith("execute_tool ")]
    starts = [e for e in wire if e["type"] in ("TOOL_CALL_START", "TOOL_CALL_CHUNK")]
    assert {s["attributes"]["gen_ai.tool.call.id"] for s in tools} == {
        e["toolCallId"] for e in starts
    }
    metrics = dict(receiver.metrics())
    assert "gen_ai.invoke_agent.duration" in metrics
    usage = metrics["gen_ai.client.inference.usage.input_tokens"].sum.data_points
    input_sum = sum(p.as_int for p in usage)
    expected = sum(u.get("inputTokens", 0) for e in ends for u in e.get("usage", []))
    assert input_sum == expected > 0
    assert receiver.content_types == {"application/x-protobuf"}


def test_an_endpoint_that_refuses_is_said() -> None:
    with OtlpReceiver(fail=True) as receiver:
        done = cli("replay", "--otlp", receiver.url, str(STREAMS / "travel.sse"))
    assert done.returncode == 2
    assert "could not export" in done.stderr and f"{receiver.url}/v1/traces" in done.stderr


def test_timestamps_outside_what_otlp_carries_are_clamped(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    wire = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": -5},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "timestamp": 7},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "timestamp": 2**53 - 1},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in wire), encoding="utf-8")
    with OtlpReceiver() as receiver:
        done = cli("replay", "--otlp", receiver.url, str(path))
    assert done.returncode == 0, done.stderr
    spans = {s["name"]: s for s in receiver.spans()}
    run, tool = spans["invoke_agent"], spans["execute_tool f"]
    assert (run["start"], run["end"]) == (0, 2**64 - 1)
    assert (tool["start"], tool["end"]) == (7 * MS, 2**64 - 1)


CONTENT = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments")


def _python_stage_spans(name: str, **options: Any) -> list[dict[str, Any]]:
    """The spans ``agui_meta.otel(**options)`` makes of a bundled stream, in Python."""
    import anyio
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import agui_meta

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stage = agui_meta.otel(tracer_provider=provider, metrics=False, **options)

    async def main() -> None:
        async with agui_meta.wrap(STREAMS / name, *agui_meta.DefaultStages(), stage) as stream:
            await stream.drain()

    anyio.run(main)
    return [
        {"name": s.name, "attributes": dict(s.attributes or {})}
        for s in exporter.get_finished_spans()
    ]


@pytest.mark.parametrize("name", ["travel.sse", "support.jsonl"])
def test_replay_exports_content_and_the_agent_name_when_asked(name: str) -> None:
    # --otlp-agent-name and --otlp-capture-content are otel(agent_name=, capture_content=):
    # the receiver gets what the Python stage makes of the same stream.
    with OtlpReceiver() as receiver:
        done = cli("replay", "--otlp", receiver.url, "--otlp-signals", "traces",
                   "--otlp-agent-name", "support desk", "--otlp-capture-content",
                   str(STREAMS / name))  # fmt: skip
    assert done.returncode == 0, done.stderr
    spans = receiver.spans()
    expected = _python_stage_spans(name, agent_name="support desk", capture_content=True)
    content = {
        (s["name"], key, s["attributes"][key])
        for s in spans
        for key in CONTENT
        if key in s["attributes"]
    }
    assert {key for _, key, _ in content} == set(CONTENT)
    assert content == {
        (s["name"], key, s["attributes"][key])
        for s in expected
        for key in CONTENT
        if key in s["attributes"]
    }
    runs = [s for s in spans if "agui.run.id" in s["attributes"]]
    started = [e for e in events(name) if e["type"] == "RUN_STARTED"]
    assert [s["name"] for s in runs] == ["invoke_agent support desk"] * len(started)
    assert {s["attributes"]["gen_ai.agent.name"] for s in runs} == {"support desk"}
    for run, event in zip(runs, started, strict=True):  # the run's input, as the stream sent it
        sent = json.loads(run["attributes"]["gen_ai.input.messages"])
        said = [p.get("content") for m in sent for p in m["parts"] if p["type"] == "text"]
        assert said == [m["content"] for m in event["input"]["messages"]]
        assert json.loads(run["attributes"]["gen_ai.output.messages"])


def test_replay_exports_no_content_and_no_agent_name_by_default() -> None:
    with OtlpReceiver() as receiver:
        done = cli("replay", "--otlp", receiver.url, str(STREAMS / "support.jsonl"))
    assert done.returncode == 0, done.stderr
    spans = receiver.spans()
    assert spans
    assert not [s for s in spans for key in CONTENT if key in s["attributes"]]
    runs = [s for s in spans if "agui.run.id" in s["attributes"]]
    assert {s["name"] for s in runs} == {"invoke_agent"}
    assert not [s for s in runs if "gen_ai.agent.name" in s["attributes"]]
