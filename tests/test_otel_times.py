"""Span times: events synthesized from chunks keep the chunks' times; no span ends before it starts.

Expectations come from the recorded streams' own timestamps (the generator's events, or the
file's lines read as JSON), never from a previous run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.needs import in_ci

try:
    import opentelemetry.sdk  # noqa: F401
except ImportError:  # pragma: no cover - the test extra installs it
    if in_ci():
        raise
    pytest.skip("opentelemetry-sdk is missing: pip install -e '.[test]'", allow_module_level=True)

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agui_meta
from tests.example_streams import GOOD, STREAMS, events

MS = 1_000_000
BUNDLED = sorted(p.name for p in STREAMS.iterdir() if p.suffix in (".sse", ".jsonl"))
#: A clock far after the streams' own times: a span timed at receipt would show it.
LATER = 2_000_000_000_000.0


def _export(path: Path, *, first: bool) -> list[ReadableSpan]:
    """The spans of a recorded file read through the default stages and ``otel()`` (before or
    after them), in keep-going mode (``broken.jsonl`` is broken on purpose)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    stage = agui_meta.otel(
        tracer_provider=provider, meter_provider=meters, clock=lambda: LATER, capture_content=True
    )
    defaults = list(agui_meta.DefaultStages())
    chain = [stage, *defaults] if first else [*defaults, stage]

    async def main() -> None:
        async with agui_meta.wrap(path, *chain, mode="keep_going", on_report=_ignore) as stream:
            await stream.drain()

    anyio.run(main)
    spans = list(exporter.get_finished_spans())
    provider.shutdown()
    meters.shutdown()
    return spans


def _ignore(report: Any) -> None:
    pass


@pytest.mark.parametrize("first", [False, True], ids=["after-defaults", "before-defaults"])
@pytest.mark.parametrize("name", BUNDLED)
def test_no_span_latency_is_negative_in_the_bundled_streams(name: str, first: bool) -> None:
    spans = _export(STREAMS / name, first=first)
    assert spans
    stamps = [
        json.loads(line.removeprefix("data: ")).get("timestamp")
        for line in (STREAMS / name).read_text().splitlines()
        if line.startswith(("data: {", "{")) and line.rstrip().endswith("}")
    ]
    low, high = min(s for s in stamps if s), max(s for s in stamps if s)
    for span in spans:
        assert span.start_time is not None and span.end_time is not None
        assert span.end_time >= span.start_time, span.name
        # Every time comes from the stream (each of its events has a timestamp), none from
        # the clock of receipt.
        assert low * MS <= span.start_time <= span.end_time <= high * MS, span.name


@pytest.mark.parametrize("first", [False, True], ids=["after-defaults", "before-defaults"])
@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_tool_call_sent_as_chunks_keeps_the_chunks_times(name: str, first: bool) -> None:
    wire = events(name)
    spans = {
        s.attributes["gen_ai.tool.call.id"]: s  # type: ignore[index]
        for s in _export(STREAMS / name, first=first)
        if s.name.startswith("execute_tool")
    }
    calls = {e["toolCallId"] for e in wire if e["type"] in ("TOOL_CALL_START", "TOOL_CALL_CHUNK")}
    chunked = {e["toolCallId"] for e in wire if e["type"] == "TOOL_CALL_CHUNK"}
    assert bool(chunked) is (name == "support.jsonl")  # lookup_order comes as chunks there
    answered = 0
    for call_id in calls:
        mine = [e for e in wire if e.get("toolCallId") == call_id]
        span = spans[call_id]
        assert span.start_time == mine[0]["timestamp"] * MS
        results = [e for e in mine if e["type"] == "TOOL_CALL_RESULT"]
        if results:
            answered += 1
            assert span.end_time == results[0]["timestamp"] * MS
    assert answered


def test_the_ledger_times_a_synthesized_end_by_the_event_that_closed_its_stream() -> None:
    wire = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 10},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "f", "delta": "{",
         "timestamp": 20},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "delta": "}", "timestamp": 25},
        {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": "x",
         "timestamp": 30},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "timestamp": 40},
    ]  # fmt: skip
    stages = agui_meta.DefaultStages(ledger=agui_meta.Ledger(clock=lambda: LATER))
    out = agui_meta.run_sync([agui_meta.Enforce(), *stages], wire)
    # The synthesized events still carry no timestamp (as the reference's) ...
    synthesized = [u.event for u in out if u.event.type in ("TOOL_CALL_START", "TOOL_CALL_END")]
    assert [e.timestamp for e in synthesized] == [agui_meta.events.UNSET] * 2
    # ... but the ledger times them by the chunk, and the END by the result that closed it.
    (call,) = stages.ledger.runs[0].tool_calls
    assert (call.started_at, call.started_clock) == (20, "event")
    assert (call.ended_at, call.ended_clock) == (30, "event")
    assert (call.result_at, call.result_clock) == (30, "event")


def test_a_stream_that_mixes_clocks_gets_no_negative_span() -> None:
    # The tool call has no timestamp (timed at receipt, later than the stream's own times),
    # its result has one: the span has zero length, not a negative one.
    wire = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 10},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": "x",
         "timestamp": 30},
        {"type": "STEP_STARTED", "stepName": "s"},
        {"type": "STEP_FINISHED", "stepName": "s", "timestamp": 31},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "timestamp": 40},
    ]  # fmt: skip
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stage = agui_meta.otel(tracer_provider=provider, clock=lambda: LATER)
    agui_meta.run_sync([agui_meta.Enforce(), *agui_meta.DefaultStages(), stage], wire)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    tool, step = spans["execute_tool f"], spans["step s"]
    assert tool.start_time == tool.end_time == int(LATER * MS)
    assert step.start_time == step.end_time == int(LATER * MS)
    assert spans["invoke_agent"].end_time == 40 * MS
