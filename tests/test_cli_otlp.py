"""``agui-meta replay --otlp URL``: a recorded stream exported to a real OTLP/HTTP receiver.

The receiver (``tests/otlp_receiver.py``) listens on 127.0.0.1 and decodes what the SDK's
exporter sends with opentelemetry-proto; expectations come from the recorded streams' events.
"""

from __future__ import annotations

import json
from pathlib import Path

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
