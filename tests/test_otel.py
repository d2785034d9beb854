"""The OpenTelemetry stage with the SDK's in-memory span exporter and metric reader.

Expectations come from the events (ids, names, timestamps, usage) and from the GenAI semantic
conventions' names, never from a previous run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.needs import in_ci

try:
    import opentelemetry.sdk  # noqa: F401
except ImportError:  # pragma: no cover - the test extra installs it
    if in_ci():
        raise
    pytest.skip("opentelemetry-sdk is missing: pip install -e '.[test]'", allow_module_level=True)

from hypothesis import HealthCheck, given, settings
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import agui_meta
from tests.example_streams import GOOD, events
from tests.oracle import REPO_ROOT
from tests.strategies import cases

MS = 1_000_000  # nanoseconds per millisecond


class Telemetry:
    """An SDK tracer provider and meter provider that keep everything in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def stage(self, **kw: Any) -> agui_meta._otel.OTel[Any]:
        return agui_meta.otel(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kw
        )

    def run(self, wire: list[Any], *, after_defaults: bool = True, **kw: Any) -> list[Any]:
        """The events through enforce, the default stages and the stage (or the stage first)."""
        stage = self.stage(clock=_clock(), **kw)
        defaults = list(agui_meta.DefaultStages(verify=False))
        chain = [*defaults, stage] if after_defaults else [stage, *defaults]
        return agui_meta.run_sync([agui_meta.Enforce(), *chain], wire)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def by_name(self, name: str) -> ReadableSpan:
        (span,) = [s for s in self.spans() if s.name == name]
        return span

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found


def _clock() -> Any:
    ticks = iter(range(10**9, 10**10))
    return lambda: float(next(ticks))


@pytest.fixture
def tel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"

STREAM: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "th", "runId": "r1", "timestamp": 1000,
     "metadata": {"w3c.traceparent": f"00-{TRACE_ID}-{PARENT}-01", "acme.tenant": "t-9",
                  "acme.secret": "do-not-export"}},
    {"type": "STEP_STARTED", "stepName": "plan", "timestamp": 1010},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", "timestamp": 1020},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "private words"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "research",
     "parentMessageId": "m1", "timestamp": 1100, "metadata": {"acme.tool_cost": 3}},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"topic": "secret topic"}',
     "metadata": {"acme.secret": "args-secret"}},
    {"type": "TOOL_CALL_END", "toolCallId": "c1", "timestamp": 1150},
    {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "researcher",
     "parentToolCallId": "c1", "timestamp": 1200},
    {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "search",
     "subagentRunId": "s1", "timestamp": 1300},
    {"type": "TOOL_CALL_END", "toolCallId": "c2", "subagentRunId": "s1", "timestamp": 1310},
    {"type": "TOOL_CALL_RESULT", "messageId": "tm2", "toolCallId": "c2", "content": "found",
     "timestamp": 1400},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1", "timestamp": 1500},
    {"type": "TOOL_CALL_RESULT", "messageId": "tm1", "toolCallId": "c1",
     "content": "secret result", "timestamp": 1600},
    {"type": "STEP_FINISHED", "stepName": "plan", "timestamp": 1700},
    {"type": "TOOL_CALL_START", "toolCallId": "c3", "toolCallName": "book", "timestamp": 1800},
    {"type": "TOOL_CALL_END", "toolCallId": "c3", "timestamp": 1810},
    {"type": "RUN_FINISHED", "threadId": "th", "runId": "r1", "timestamp": 2000,
     "usage": [{"provider": "openai", "model": "gpt-5", "inputTokens": 120,
                "outputTokens": 30, "cachedInputTokens": 100, "reasoningTokens": 10},
               {"provider": "openai", "model": "gpt-5", "inputTokens": 5,
                "outputTokens": 1, "cacheWriteInputTokens": 4}]},
]  # fmt: skip


def test_the_span_tree(tel: Telemetry) -> None:
    tel.run(STREAM, agent_name="planner")
    spans = tel.spans()
    assert sorted(s.name for s in spans) == [
        "chat gpt-5",
        "execute_tool book",
        "execute_tool research",
        "execute_tool search",
        "invoke_agent planner",
        "invoke_agent researcher",
        "step plan",
    ]
    run = tel.by_name("invoke_agent planner")
    research = tel.by_name("execute_tool research")
    sub = tel.by_name("invoke_agent researcher")
    search = tel.by_name("execute_tool search")
    step = tel.by_name("step plan")
    book = tel.by_name("execute_tool book")
    chat = tel.by_name("chat gpt-5")
    # The traceparent in RUN_STARTED's metadata parents the run.
    assert run.context.trace_id == int(TRACE_ID, 16)
    assert run.parent is not None and run.parent.span_id == int(PARENT, 16)
    assert {s.context.trace_id for s in spans} == {int(TRACE_ID, 16)}
    for child in (research, step, book, chat):
        assert child.parent is not None and child.parent.span_id == run.context.span_id
    assert sub.parent is not None and sub.parent.span_id == research.context.span_id
    assert search.parent is not None and search.parent.span_id == sub.context.span_id
    assert (run.kind, research.kind, sub.kind, step.kind) == (
        SpanKind.CLIENT,
        SpanKind.INTERNAL,
        SpanKind.INTERNAL,
        SpanKind.INTERNAL,
    )
    # Times are the events' timestamps; a call without a result ends with the run.
    assert (run.start_time, run.end_time) == (1000 * MS, 2000 * MS)
    assert (research.start_time, research.end_time) == (1100 * MS, 1600 * MS)
    assert (sub.start_time, sub.end_time) == (1200 * MS, 1500 * MS)
    assert (search.start_time, search.end_time) == (1300 * MS, 1400 * MS)
    assert (step.start_time, step.end_time) == (1010 * MS, 1700 * MS)
    assert (book.start_time, book.end_time) == (1800 * MS, 2000 * MS)
    # The run's calls to one provider/model: an inference span over the run.
    assert (chat.kind, chat.start_time, chat.end_time) == (SpanKind.CLIENT, 1000 * MS, 2000 * MS)
    assert run.status.status_code is StatusCode.UNSET


def test_the_attributes(tel: Telemetry) -> None:
    tel.run(
        STREAM,
        agent_name="planner",
        attributes={"acme.tenant": "app.tenant", "acme.tool_cost": "app.tool.cost"},
    )
    run = dict(tel.by_name("invoke_agent planner").attributes or {})
    assert run == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": "th",
        "gen_ai.agent.name": "planner",
        "agui.run.id": "r1",
        "agui.run.status": "finished",
        "agui.run.outcome": "success",
        "agui.run.pending_tool_call_ids": ("c3",),
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5",
        "gen_ai.usage.input_tokens": 125,
        "gen_ai.usage.output_tokens": 31,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_write.input_tokens": 4,
        "gen_ai.usage.reasoning.output_tokens": 10,
        "app.tenant": "t-9",
    }
    chat = dict(tel.by_name("chat gpt-5").attributes or {})
    assert chat == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5",
        "gen_ai.response.model": "gpt-5",
        "gen_ai.conversation.id": "th",
        "gen_ai.agent.name": "planner",
        "gen_ai.usage.input_tokens": 125,
        "gen_ai.usage.output_tokens": 31,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_write.input_tokens": 4,
        "gen_ai.usage.reasoning.output_tokens": 10,
    }
    research = dict(tel.by_name("execute_tool research").attributes or {})
    assert research == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "research",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.agent.name": "planner",
        "agui.tool_call.parent_message_id": "m1",
        "agui.tool_call.arguments_length": len('{"topic": "secret topic"}'),
        "agui.tool_call.result_message_id": "tm1",
        "app.tool.cost": 3,
    }
    book = dict(tel.by_name("execute_tool book").attributes or {})
    assert (book["agui.tool_call.pending"], book["agui.tool_call.status"]) == (True, "ended")
    sub = dict(tel.by_name("invoke_agent researcher").attributes or {})
    assert sub["gen_ai.agent.name"] == "researcher"
    assert sub["agui.subagent.status"] == "finished"
    assert sub["gen_ai.conversation.id"] == "th"


def _everything_exported(tel: Telemetry) -> str:
    parts = []
    for span in tel.spans():
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        parts.extend(json.dumps(dict(e.attributes or {}), default=str) for e in span.events)
    return "\n".join(parts)


@pytest.mark.parametrize("after_defaults", [True, False])
def test_nothing_else_leaves_the_process(tel: Telemetry, after_defaults: bool) -> None:
    tel.run(STREAM, after_defaults=after_defaults)
    exported = _everything_exported(tel)
    for secret in ("do-not-export", "args-secret", "secret topic", "secret result", "private"):
        assert secret not in exported


@pytest.mark.parametrize("after_defaults", [True, False])
def test_content_only_when_captured(tel: Telemetry, after_defaults: bool) -> None:
    tel.run(STREAM, capture_content=True, after_defaults=after_defaults)
    research = dict(tel.by_name("execute_tool research").attributes or {})
    assert research["gen_ai.tool.call.arguments"] == '{"topic": "secret topic"}'
    assert research["gen_ai.tool.call.result"] == "secret result"
    assert "do-not-export" not in _everything_exported(tel)  # metadata still needs the allowlist


def _shape(tel: Telemetry) -> list[Any]:
    names = {s.context.span_id: s.name for s in tel.spans()}
    return sorted(
        (
            s.name,
            names.get(s.parent.span_id) if s.parent else None,
            s.start_time,
            s.end_time,
            sorted(dict(s.attributes or {}).items()),
        )
        for s in tel.spans()
    )


def test_before_or_after_the_default_stages_the_same_spans() -> None:
    shapes = []
    for after in (True, False):
        telemetry = Telemetry()
        telemetry.run(STREAM, after_defaults=after, capture_content=True)
        shapes.append(_shape(telemetry))
    assert shapes[0] == shapes[1]


def test_run_error_and_an_incomplete_run(tel: Telemetry) -> None:
    tel.run(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "a"},
            {"type": "RUN_ERROR", "message": "quota", "code": "rate_limited"},
            {"type": "RUN_STARTED", "threadId": "t", "runId": "b"},
            {"type": "RUN_ERROR", "message": "boom"},
            {"type": "RUN_STARTED", "threadId": "t", "runId": "c"},
            {"type": "TOOL_CALL_START", "toolCallId": "x", "toolCallName": "f"},
        ]
    )
    runs = {s.attributes["agui.run.id"]: s for s in tel.spans() if s.name == "invoke_agent"}  # type: ignore[index]
    a, b, c = runs["a"], runs["b"], runs["c"]
    assert a.status.status_code is StatusCode.ERROR and a.status.description == "quota"
    assert a.attributes["error.type"] == "rate_limited"  # type: ignore[index]
    assert b.attributes["error.type"] == "_OTHER"  # type: ignore[index]
    assert c.attributes["error.type"] == "incomplete"  # type: ignore[index]
    assert c.attributes["agui.run.status"] == "incomplete"  # type: ignore[index]
    tool = tel.by_name("execute_tool f")
    assert tool.end_time == c.end_time
    assert tool.attributes["agui.tool_call.status"] == "incomplete"  # type: ignore[index]
    # Without a traceparent, each run is the root of its own trace.
    assert all(s.parent is None for s in runs.values())
    assert len({s.context.trace_id for s in runs.values()}) == 3


def test_the_current_context_parents_a_run_without_traceparent(tel: Telemetry) -> None:
    tracer = tel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("request") as outer:
        tel.run([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                 {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}])  # fmt: skip
    run = tel.by_name("invoke_agent")
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id
    bad = {"type": "RUN_STARTED", "threadId": "t", "runId": "q",
           "metadata": {"w3c.traceparent": "not a traceparent"}}  # fmt: skip
    tel.run([bad])
    (q,) = [s for s in tel.spans() if s.attributes.get("agui.run.id") == "q"]  # type: ignore[union-attr]
    assert q.parent is None


def test_interrupts_are_span_events(tel: Telemetry) -> None:
    tel.run(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 5},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "timestamp": 9,
             "outcome": {"type": "interrupt", "interrupts": [
                 {"id": "i1", "reason": "confirm", "message": "Sure?", "toolCallId": "c",
                  "metadata": {"acme.form": "f1"}}]}},
        ],
        attributes={"acme.form": "app.form"},
    )  # fmt: skip
    run = tel.by_name("invoke_agent")
    assert run.attributes["agui.run.outcome"] == "interrupt"  # type: ignore[index]
    (event,) = run.events
    assert event.name == "agui.interrupt" and event.timestamp == 9 * MS
    assert dict(event.attributes or {}) == {
        "agui.interrupt.id": "i1",
        "agui.interrupt.reason": "confirm",
        "agui.interrupt.tool_call_id": "c",
        "app.form": "f1",
    }


def test_the_metrics(tel: Telemetry) -> None:
    tel.run(STREAM, agent_name="planner", legacy_usage_names=True)
    tokens = {p.attributes["gen_ai.token.type"]: p for p in tel.points("gen_ai.client.token.usage")}
    assert (tokens["input"].sum, tokens["output"].sum) == (125, 31)
    assert tokens["input"].count == 1  # one provider/model pair: entries summed per run
    assert dict(tokens["input"].attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5",
        "gen_ai.token.type": "input",
    }
    assert list(tokens["input"].explicit_bounds) == [4.0**i for i in range(14)]
    (agent,) = tel.points("gen_ai.invoke_agent.duration")
    assert agent.sum == pytest.approx(1.0)
    assert list(agent.explicit_bounds)[:3] == [0.1, 0.2, 0.4]
    tools = {
        p.attributes["gen_ai.tool.name"]: p for p in tel.points("gen_ai.execute_tool.duration")
    }
    assert tools["research"].sum == pytest.approx(0.5)
    assert tools["book"].sum == pytest.approx(0.2)
    counts = {p.attributes["agui.event.type"]: p.value for p in tel.points("agui.events")}
    expected: dict[str, int] = {}
    for event in STREAM:
        expected[event["type"]] = expected.get(event["type"], 0) + 1
    assert counts == expected


def test_reports_are_counted_by_code(tel: Telemetry) -> None:
    reports: list[agui_meta.Report] = []
    stage = tel.stage()
    agui_meta.run_sync(
        [agui_meta.Enforce(), stage],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "r", "colour": "red"},
         {"type": "TELEPORT"}, {"type": "TELEPORT"}],
        on_report=reports.append,
    )  # fmt: skip
    points = {p.attributes["agui.report.code"]: p.value for p in tel.points("agui.reports")}
    assert points == {"unknown-field": 1, "unknown-event-type": 2}
    assert len(reports) == 3  # still delivered


def test_usage_goes_to_a_shared_meter(tel: Telemetry) -> None:
    meter = agui_meta.UsageMeter()
    for _ in range(2):  # the same recorded stream twice: counted once
        tel.run(STREAM, usage=meter)
    total = meter.snapshot().total
    assert (total.input_tokens, total.output_tokens) == (125, 31)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_the_bundled_streams(tel: Telemetry, name: str) -> None:
    wire = events(name)
    stages = agui_meta.DefaultStages(verify=True)
    agui_meta.run_sync([agui_meta.Enforce(), *stages, tel.stage()], wire)
    spans = tel.spans()
    runs = [s for s in spans if s.kind is SpanKind.CLIENT and s.name.startswith("invoke_agent")]
    started = [e for e in wire if e["type"] == "RUN_STARTED"]
    chats = [s for s in spans if s.name.startswith("chat")]
    assert len(chats) == sum(len(r.aggregated_usage) for r in stages.ledger.runs)
    assert [s.attributes["agui.run.id"] for s in runs] == [e["runId"] for e in started]  # type: ignore[index]
    assert [s.start_time for s in runs] == [e["timestamp"] * MS for e in started]
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert len(tools) == sum(len(r.tool_calls) for r in stages.ledger.runs)
    steps = [s for s in spans if s.name.startswith("step ")]
    assert len(steps) == sum(len(r.steps) for r in stages.ledger.runs)
    subs = [s for s in spans if s.name.startswith("invoke_agent") and s.kind is SpanKind.INTERNAL]
    assert len(subs) == sum(len(r.subagents) for r in stages.ledger.runs)
    ids = {s.context.span_id for s in spans}
    assert all(s.parent is None or s.parent.span_id in ids for s in spans)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_generated_streams_give_a_well_formed_tree(case: dict[str, Any]) -> None:
    telemetry = Telemetry()
    stages = agui_meta.DefaultStages(verify=False)
    agui_meta.run_sync(
        [agui_meta.Enforce(), *stages, telemetry.stage(clock=_clock())],
        case["events"],
        mode="keep_going",
        on_report=lambda r: None,
    )
    spans = telemetry.spans()
    ids = {s.context.span_id: s for s in spans}
    runs = [s for s in spans if s.kind is SpanKind.CLIENT]
    started = sum(1 for e in case["events"] if e.get("type") == "RUN_STARTED")
    assert len(runs) == started
    for span in spans:
        assert span.end_time is not None and span.end_time >= 0
        if span.kind is not SpanKind.CLIENT:
            # Every other span hangs, through its parents, from a run span of its trace.
            node = span
            while node.parent is not None:
                node = ids[node.parent.span_id]
            assert node.kind is SpanKind.CLIENT
    assert len(spans) == len(runs) + sum(
        len(r.tool_calls) + len(r.steps) + len(r.subagents)
        for r in stages.ledger.runs
        if r.started_index is not None  # runs with a RUN_STARTED have spans
    )


def test_the_global_providers_are_used_unless_given() -> None:
    script = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import agui_meta
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
agui_meta.run_sync([agui_meta.Enforce(), agui_meta.otel(agent_name="g")], [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}])
print(json.dumps([s.name for s in exporter.get_finished_spans()]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["invoke_agent g"]


def test_trace_is_the_api() -> None:
    # The stage itself imports the API only (the SDK is the application's choice).
    import agui_meta._otel as module

    assert "opentelemetry.sdk" not in Path(module.__file__).read_text("utf-8")
    assert trace.get_tracer_provider() is not None
