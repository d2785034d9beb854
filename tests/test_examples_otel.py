"""The two OpenTelemetry examples, run as users run them, against real servers on 127.0.0.1.

``examples/otel_collector.py`` sends to a real OTLP/HTTP receiver (``tests/otlp_receiver.py``);
``examples/prometheus_metrics.py`` serves a real Prometheus endpoint that the test scrapes and
parses with prometheus_client's own parser. Expectations come from the recorded streams' events.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import httpx
import pytest

from tests.needs import in_ci

try:
    from prometheus_client.parser import text_string_to_metric_families

    from tests.otlp_receiver import OtlpReceiver
except ImportError:  # pragma: no cover - the test extra installs them
    if in_ci():
        raise
    pytest.skip("the OpenTelemetry test extras are missing", allow_module_level=True)

from tests.example_streams import EXAMPLES, GOOD, events
from tests.oracle import REPO_ROOT
from tests.test_prices import expected_cost

TIMEOUT = 60


def _usage(field: str) -> int:
    return sum(
        u.get(field, 0)
        for name in GOOD
        for e in events(name)
        if e["type"] in ("RUN_FINISHED", "RUN_ERROR")
        for u in e.get("usage", [])
    )


def test_the_collector_example_sends_every_run() -> None:
    with OtlpReceiver() as receiver:
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / "otel_collector.py"), "--endpoint", receiver.url],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert f"sent to {receiver.url}" in done.stdout
    spans = receiver.spans()
    runs = [s for s in spans if s["name"] == "invoke_agent example-agent"]
    expected = [e for name in sorted(GOOD, reverse=True) for e in events(name)]
    started = [e for e in expected if e["type"] == "RUN_STARTED"]
    assert sorted(s["attributes"]["agui.run.id"] for s in runs) == sorted(
        e["runId"] for e in started
    )
    assert {s["service"] for s in spans} == {"agui-meta-example"}
    # The allowlisted metadata key, under its attribute name; no other metadata value.
    request_ids = {
        e["metadata"]["travelco.request_id"]
        for e in started
        if "travelco.request_id" in e.get("metadata", {})
    }
    assert request_ids
    assert {s["attributes"].get("app.request_id") for s in runs} >= request_ids
    traces = {
        e["metadata"]["acme.trace_id"] for e in expected if "acme.trace_id" in e.get("metadata", {})
    }
    exported = repr([s["attributes"] for s in spans])
    assert traces and not any(t in exported for t in traces)
    # A model-call span per provider/model of each run's usage, under its run.
    chats = [s for s in spans if s["name"].startswith("chat ")]
    entries = [u for e in expected if e["type"] == "RUN_FINISHED" for u in e.get("usage", [])]
    assert sorted(s["attributes"]["gen_ai.request.model"] for s in chats) == sorted(
        u["model"] for u in entries
    )
    assert sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in chats) == _usage("inputTokens")
    metrics = dict(receiver.metrics())
    points = metrics["gen_ai.client.inference.usage.input_tokens"].sum.data_points
    assert sum(p.as_int for p in points) == _usage("inputTokens")


def _scrape(url: str) -> dict[str, Any]:
    text = httpx.get(url, timeout=TIMEOUT).text
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_the_prometheus_example_serves_the_metrics() -> None:
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "prometheus_metrics.py"), "--port", "0"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving http://127.0.0.1:"), (
            process.stderr.read() if process.stderr else line
        )
        url = line.split()[1]
        families = _scrape(url)
        # What each model cost, by the example's price table: from otel()'s counter and from
        # the usage meter, through the real prometheus_client.
        expected: dict[str, float] = {}
        for name in GOOD:
            for e in events(name):
                for u in e.get("usage", []) if e["type"] == "RUN_FINISHED" else []:
                    expected[u["model"]] = expected.get(u["model"], 0.0) + expected_cost(u)
        for family, suffix in (("agui_usage_cost_USD", "_total"), ("agui_meta_cost_USD", "")):
            got = {
                s.labels["gen_ai_request_model"]: s.value
                for s in families[family].samples
                if s.name == family + suffix
            }
            assert got == pytest.approx(expected), family
        # The per-direction token counters, by model.
        for field, name in (
            ("inputTokens", "gen_ai_client_inference_usage_input_tokens"),
            ("outputTokens", "gen_ai_client_inference_usage_output_tokens"),
        ):
            tokens = families[name]
            assert tokens.type == "counter"
            samples = [s for s in tokens.samples if s.name.endswith("_total")]
            assert {s.labels["gen_ai_token_modality"] for s in samples} == {"unknown"}
            assert sum(s.value for s in samples) == _usage(field)
            assert {s.labels["gen_ai_request_model"] for s in samples} == {
                u["model"]
                for n in GOOD
                for e in events(n)
                if e["type"] == "RUN_FINISHED"
                for u in e.get("usage", [])
            }
        totals = {
            s.labels["gen_ai_token_type"]: s.value
            for s in families["agui_meta_token_usage"].samples
            if s.labels.get("gen_ai_token_type") in ("input", "output")
        }
        by_type: dict[str, float] = {}
        for s in families["agui_meta_token_usage"].samples:
            kind = s.labels["gen_ai_token_type"]
            by_type[kind] = by_type.get(kind, 0.0) + s.value
        assert by_type["input"] == _usage("inputTokens") and totals
        counts: dict[str, float] = {}
        for s in families["agui_events"].samples:
            if s.name == "agui_events_total":
                counts[s.labels["agui_event_type"]] = s.value
        # Counted as the stage sees them, behind the default stages: chunks expanded.
        wire: dict[str, int] = {}
        for name in GOOD:
            for e in events(name):
                wire[e["type"]] = wire.get(e["type"], 0) + 1
        for kind in ("RUN_STARTED", "RUN_FINISHED", "STEP_STARTED", "TOOL_CALL_RESULT"):
            assert counts.get(kind, 0) == wire.get(kind, 0), kind
        assert not any(kind.endswith("_CHUNK") for kind in counts)
        assert counts["TEXT_MESSAGE_CONTENT"] >= wire.get("TEXT_MESSAGE_CONTENT", 0)
        assert "gen_ai_invoke_agent_duration_seconds" in families
        # Scraped twice: the same totals (the scrape changes nothing).
        assert (
            _scrape(url)["agui_meta_token_usage"].samples
            == families["agui_meta_token_usage"].samples
        )
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=TIMEOUT)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    assert process.returncode == 0
