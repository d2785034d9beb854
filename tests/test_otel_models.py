"""Model-call spans, the run's messages and the token metrics, with the SDK's in-memory exporters.

Expectations come from the events of the bundled streams (the generator's, not agui-meta's
reading of the files) and from the GenAI semantic conventions' names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.needs import in_ci

try:
    import opentelemetry.sdk  # noqa: F401
except ImportError:  # pragma: no cover - the test extra installs it
    if in_ci():
        raise
    pytest.skip("opentelemetry-sdk is missing: pip install -e '.[test]'", allow_module_level=True)

from opentelemetry.trace import SpanKind, StatusCode

import agui_meta
from tests.example_streams import events
from tests.test_otel import MS, Telemetry

COUNTERS = {
    "inputTokens": "gen_ai.client.inference.usage.input_tokens",
    "outputTokens": "gen_ai.client.inference.usage.output_tokens",
    "cachedInputTokens": "gen_ai.client.inference.usage.cache_read.input_tokens",
    "cacheWriteInputTokens": "gen_ai.client.inference.usage.cache_write.input_tokens",
    "reasoningTokens": "gen_ai.client.inference.usage.reasoning.output_tokens",
}
SPAN_COUNTS = {
    "inputTokens": "gen_ai.usage.input_tokens",
    "outputTokens": "gen_ai.usage.output_tokens",
    "cachedInputTokens": "gen_ai.usage.cache_read.input_tokens",
    "cacheWriteInputTokens": "gen_ai.usage.cache_write.input_tokens",
    "reasoningTokens": "gen_ai.usage.reasoning.output_tokens",
}


@pytest.fixture
def tel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()


def _runs(wire: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The events of each run, RUN_STARTED to RUN_FINISHED/RUN_ERROR."""
    runs: list[list[dict[str, Any]]] = []
    for event in wire:
        if event["type"] == "RUN_STARTED":
            runs.append([])
        runs[-1].append(event)
    return runs


def test_one_model_call_span_per_provider_and_model_of_a_run(tel: Telemetry) -> None:
    wire = events("support.jsonl")
    tel.run(wire, agent_name="support")
    spans = tel.spans()
    runs = {
        s.attributes["agui.run.id"]: s  # type: ignore[index]
        for s in spans
        if s.name == "invoke_agent support"
    }
    chats = [s for s in spans if s.name.startswith("chat ")]
    seen = 0
    for run_events in _runs(wire):
        start, end = run_events[0], run_events[-1]
        run = runs[start["runId"]]
        mine = [c for c in chats if c.parent and c.parent.span_id == run.context.span_id]
        usage = end.get("usage", [])
        assert [c.name for c in mine] == [f"chat {u['model']}" for u in usage]
        for chat, entry in zip(mine, usage, strict=True):
            seen += 1
            attributes = dict(chat.attributes or {})
            assert chat.kind is SpanKind.CLIENT
            assert attributes["gen_ai.operation.name"] == "chat"
            assert attributes["gen_ai.provider.name"] == entry["provider"]
            assert attributes["gen_ai.request.model"] == entry["model"]
            assert attributes["gen_ai.conversation.id"] == start["threadId"]
            for key, name in SPAN_COUNTS.items():
                assert attributes.get(name) == entry.get(key)
            assert (chat.start_time, chat.end_time) == (
                start["timestamp"] * MS,
                end["timestamp"] * MS,
            )
        models = list(dict.fromkeys(u["model"] for u in usage))
        attributes = dict(run.attributes or {})
        if len(models) > 1:  # a run that used two models names both
            assert attributes["agui.run.models"] == tuple(models)
            assert "gen_ai.request.model" not in attributes
        elif models:
            assert attributes["gen_ai.request.model"] == models[0]
    assert seen == 3  # run-a used two models, run-b one


def test_a_failed_run_fails_its_model_calls(tel: Telemetry) -> None:
    tel.run(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "RUN_ERROR", "message": "quota", "code": "rate_limited",
             "usage": [{"model": "m", "inputTokens": 3}]},
        ]
    )  # fmt: skip
    chat = tel.by_name("chat m")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes["error.type"] == "rate_limited"  # type: ignore[index]
    assert "gen_ai.provider.name" not in (chat.attributes or {})
    (point,) = tel.points("gen_ai.client.inference.usage.input_tokens")
    assert point.value == 3 and point.attributes["error.type"] == "rate_limited"


def _expected_output(run_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's own text messages (chunks without a subagent tag) and tool calls."""
    texts: dict[str, list[str]] = {}
    last = None
    for e in run_events:
        if e["type"] == "TEXT_MESSAGE_CHUNK" and "subagentRunId" not in e:
            last = e.get("messageId", last)
            texts.setdefault(last, []).append(e.get("delta", ""))
    parts: dict[str, list[dict[str, Any]]] = {
        k: [{"type": "text", "content": "".join(v)}] for k, v in texts.items()
    }
    calls: dict[str, dict[str, Any]] = {}
    for e in run_events:
        if e["type"] == "TOOL_CALL_CHUNK" and "subagentRunId" not in e:
            call = calls.setdefault(e["toolCallId"], {"parent": e.get("parentMessageId"),
                                                      "name": e.get("toolCallName"), "args": ""})  # fmt: skip
            call["args"] += e.get("delta", "")
    for call_id, call in calls.items():
        part = {"type": "tool_call", "id": call_id, "name": call["name"],
                "arguments": json.loads(call["args"])}  # fmt: skip
        parts.setdefault(call["parent"], []).append(part)
    return [{"role": "assistant", "parts": p, "finish_reason": "stop"} for p in parts.values()]


@pytest.mark.parametrize("after_defaults", [True, False])
def test_captured_content_puts_the_runs_messages_on_its_span(
    tel: Telemetry, after_defaults: bool
) -> None:
    wire = events("support.jsonl")
    tel.run(wire, capture_content=True, after_defaults=after_defaults)
    runs = {
        s.attributes["agui.run.id"]: dict(s.attributes or {})  # type: ignore[index]
        for s in tel.spans()
        if s.name == "invoke_agent"
    }
    for run_events in _runs(wire):
        start = run_events[0]
        attributes = runs[start["runId"]]
        given = json.loads(attributes["gen_ai.input.messages"])  # type: ignore[arg-type]
        assert given == [
            {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
            for m in start["input"]["messages"]
        ]
        output = json.loads(attributes["gen_ai.output.messages"])  # type: ignore[arg-type]
        assert output == _expected_output(run_events)
        assert output  # each run said something


def test_no_messages_without_capture(tel: Telemetry) -> None:
    tel.run(events("support.jsonl"))
    for span in tel.spans():
        assert "gen_ai.input.messages" not in (span.attributes or {})
        assert "gen_ai.output.messages" not in (span.attributes or {})


def test_input_messages_of_every_role() -> None:
    from agui_meta._otel_messages import input_messages
    from agui_meta.events import decode_event

    messages = [
        {"id": "1", "role": "developer", "content": "be brief"},
        {"id": "2", "role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "url", "value": "u"}}]},
        {"id": "3", "role": "assistant", "toolCalls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
        {"id": "4", "role": "tool", "toolCallId": "c", "content": "done"},
        {"id": "5", "role": "activity", "activityType": "x", "content": {}},
    ]  # fmt: skip
    wire = {"type": "RUN_STARTED", "threadId": "t", "runId": "r",
            "input": {"threadId": "t", "runId": "r", "messages": messages}}  # fmt: skip
    started = decode_event(json.dumps(wire).encode())
    assert json.loads(input_messages(started.input.messages)) == [  # type: ignore[union-attr]
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "user", "parts": [{"type": "text", "content": "look"},
                                   {"type": "blob", "modality": "image"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": "f",
                                         "arguments": {"a": 1}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c", "response": "done"}]},
    ]  # fmt: skip


def test_output_is_bounded(tel: Telemetry) -> None:
    big = "x" * 10_000
    tel.run(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            *[{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": big}] * 5,
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ],
        capture_content=True,
        max_attribute_length=100,
    )
    output = tel.by_name("invoke_agent").attributes["gen_ai.output.messages"]  # type: ignore[index]
    assert isinstance(output, str) and len(output) <= 100


def test_the_per_direction_token_counters(tel: Telemetry) -> None:
    wire = events("support.jsonl")
    tel.run(wire)
    usage = [u for e in wire if e["type"] == "RUN_FINISHED" for u in e.get("usage", [])]
    for key, name in COUNTERS.items():
        got = {
            (p.attributes["gen_ai.request.model"], p.attributes["gen_ai.token.modality"]): p.value
            for p in tel.points(name)
        }
        expected: dict[tuple[str, str], int] = {}
        for u in usage:
            if key in u:
                k = (u["model"], "unknown")
                expected[k] = expected.get(k, 0) + u[key]
        assert got == expected, name
    assert tel.points("gen_ai.client.inference.usage.input_tokens")  # the stream reports some
    assert not tel.points("gen_ai.client.token.usage")  # the old histogram: legacy only


@pytest.mark.parametrize("legacy", [False, True])
def test_the_legacy_names_switch(tel: Telemetry, legacy: bool) -> None:
    tel.run(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "usage": [
                {"provider": "anthropic", "model": "m", "inputTokens": 10, "outputTokens": 2,
                 "cacheWriteInputTokens": 4}]},
        ],
        legacy_usage_names=legacy,
    )  # fmt: skip
    for name in ("invoke_agent", "chat m"):
        attributes = dict(tel.by_name(name).attributes or {})
        assert attributes["gen_ai.usage.cache_write.input_tokens"] == 4
        assert attributes.get("gen_ai.usage.cache_creation.input_tokens") == (4 if legacy else None)
    assert bool(tel.points("gen_ai.client.token.usage")) is legacy
    (point,) = tel.points("gen_ai.client.inference.usage.cache_write.input_tokens")
    assert point.value == 4


def test_the_option_is_public() -> None:
    assert agui_meta.otel(legacy_usage_names=True).legacy_usage_names is True


@pytest.mark.parametrize(("traces", "metrics"), [(True, False), (False, True)])
def test_traces_only_or_metrics_only(tel: Telemetry, traces: bool, metrics: bool) -> None:
    tel.run(events("support.jsonl"), traces=traces, metrics=metrics)
    assert bool(tel.spans()) is traces
    assert bool(tel.points("gen_ai.invoke_agent.duration")) is metrics
