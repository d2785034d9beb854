"""``replay --otlp`` variants: traces only, metrics only or both; endpoint URLs as advertised.

A real OTLP/HTTP receiver on 127.0.0.1 (``tests/otlp_receiver.py``), one that serves traces only
as Phoenix does; expectations come from the recorded streams' events.
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

from agui_meta.cli._otlp import endpoint
from tests.example_streams import STREAMS, events
from tests.helpers import cli

SUPPORT = str(STREAMS / "support.jsonl")


def _runs() -> list[str]:
    return [e["runId"] for e in events("support.jsonl") if e["type"] == "RUN_STARTED"]


def _run_ids(receiver: OtlpReceiver) -> list[str]:
    return [s["attributes"]["agui.run.id"] for s in receiver.spans() if s["name"] == "invoke_agent"]


@pytest.mark.parametrize("suffix", ["", "/", "/v1/traces", "/v1/metrics"])
def test_the_endpoints_of_a_url(suffix: str) -> None:
    base = "http://127.0.0.1:6006"
    assert endpoint(base + suffix, "traces") == f"{base}/v1/traces"
    assert endpoint(base + suffix, "metrics") == f"{base}/v1/metrics"


def test_a_receiver_without_metrics_takes_a_traces_export() -> None:
    with OtlpReceiver(signals=("traces",)) as receiver:
        done = cli("replay", "--otlp", f"{receiver.url}/v1/traces", "--otlp-signals", "traces",
                   SUPPORT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _run_ids(receiver) == _runs()
    assert set(receiver.paths) == {"/v1/traces"}  # never /v1/traces/v1/traces, no metrics


def test_both_signals_to_a_receiver_without_metrics_say_what_failed() -> None:
    with OtlpReceiver(signals=("traces",)) as receiver:
        done = cli("replay", "--otlp", receiver.url, SUPPORT)
    assert done.returncode == 2
    assert f"could not export metrics to {receiver.url}/v1/metrics" in done.stderr
    assert "--otlp-signals traces" in done.stderr  # the way out is said
    assert _run_ids(receiver) == _runs()  # the spans still went


def test_metrics_only() -> None:
    with OtlpReceiver() as receiver:
        done = cli("replay", "--otlp", receiver.url, "--otlp-signals", "metrics", SUPPORT)
    assert done.returncode == 0, done.stderr
    assert set(receiver.paths) == {"/v1/metrics"}
    assert "gen_ai.invoke_agent.duration" in dict(receiver.metrics())


def test_each_signal_to_its_own_endpoint() -> None:
    with OtlpReceiver(signals=("traces",)) as spans, OtlpReceiver() as metrics:
        done = cli("replay", "--otlp-traces", f"{spans.url}/v1/traces",
                   "--otlp-metrics", metrics.url, SUPPORT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _run_ids(spans) == _runs()
    assert set(spans.paths) == {"/v1/traces"} and set(metrics.paths) == {"/v1/metrics"}
    assert not metrics.spans()


@pytest.mark.parametrize("legacy", [False, True])
def test_the_legacy_names_on_the_command_line(tmp_path: Path, legacy: bool) -> None:
    path = tmp_path / "cache.jsonl"
    usage = [{"provider": "anthropic", "model": "m", "inputTokens": 9, "cacheWriteInputTokens": 4}]
    path.write_text(
        "\n".join(
            json.dumps(e)
            for e in (
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "usage": usage},
            )
        )
    )
    option = ["--otlp-legacy-names"] if legacy else []
    with OtlpReceiver() as receiver:
        done = cli("replay", "--otlp", receiver.url, *option, str(path))
    assert done.returncode == 0, done.stderr
    (chat,) = [s for s in receiver.spans() if s["name"] == "chat m"]
    assert chat["attributes"]["gen_ai.usage.cache_write.input_tokens"] == 4
    assert chat["attributes"].get("gen_ai.usage.cache_creation.input_tokens") == (
        4 if legacy else None
    )
    assert ("gen_ai.client.token.usage" in dict(receiver.metrics())) is legacy
