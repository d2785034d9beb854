"""Hostile names in telemetry: span strings are cut, metric series are bounded (``_OTHER`` past
the limit, counted), and ``UsageMeter`` keeps a bounded number of threads, models and runs.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is missing")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agui_meta
from agui_meta import UsageMeter
from agui_meta._otel import DEFAULT_MAX_ATTRIBUTE_LENGTH, OTHER
from agui_meta.events import TokenUsage

MIB = "n" * (1 << 20)


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def run(self, wire: list[dict[str, Any]], **kw: Any) -> None:
        stage = agui_meta.otel(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kw
        )
        defaults = list(agui_meta.DefaultStages(verify=False))
        agui_meta.run_sync([agui_meta.Enforce(), *defaults, stage], wire)

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found


@pytest.fixture
def tel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()


def hostile_run(name: str, n: int = 0) -> list[dict[str, Any]]:
    """A run whose every stream-given string is ``name`` (made unique by ``n``)."""
    ids = {"threadId": f"{name}{n}", "runId": f"{name}r{n}"}
    usage = {"provider": f"{name}p{n}", "model": f"{name}m{n}", "inputTokens": 3}
    return [
        {"type": "RUN_STARTED", **ids, "metadata": {"acme.tag": name}},
        {"type": "STEP_STARTED", "stepName": f"{name}s{n}"},
        {"type": "TOOL_CALL_START", "toolCallId": f"{name}c{n}", "toolCallName": f"{name}t{n}"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": f"{name}c{n}", "delta": name},
        {"type": "TOOL_CALL_END", "toolCallId": f"{name}c{n}"},
        {"type": "TOOL_CALL_RESULT", "messageId": f"{name}x{n}", "toolCallId": f"{name}c{n}",
         "content": name},
        {"type": "STEP_FINISHED", "stepName": f"{name}s{n}"},
        {"type": "RUN_ERROR", "message": name, "code": f"{name}e{n}", "usage": [usage]},
    ]  # fmt: skip


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)


@pytest.mark.parametrize("limit", [None, 100])
def test_a_mebibyte_name_never_reaches_a_span_whole(tel: Telemetry, limit: int | None) -> None:
    options: dict[str, Any] = {"capture_content": True, "attributes": {"acme.tag": "acme.tag"}}
    if limit is not None:
        options["max_attribute_length"] = limit
    tel.run(hostile_run(MIB), agent_name="a", **options)
    bound = limit or DEFAULT_MAX_ATTRIBUTE_LENGTH
    spans = list(tel.exporter.get_finished_spans())
    assert {s.name.split(" ")[0] for s in spans} == {"invoke_agent", "execute_tool", "step", "chat"}
    cut = 0
    for span in spans:
        assert len(span.name) <= bound
        texts = [*strings(list((span.attributes or {}).values())), span.status.description or ""]
        for event in span.events:
            texts += strings(list((event.attributes or {}).values()))
        for text in texts:
            assert len(text) <= bound
            cut += text.endswith("…")
    # Cut: ids, names, the tag, the arguments, the result, the error code and message.
    assert cut >= 8
    for name in ("gen_ai.client.inference.usage.input_tokens", "gen_ai.execute_tool.duration"):
        for point in tel.points(name):
            assert all(len(v) <= bound for v in strings(list(point.attributes.values())))


def test_metric_series_past_the_limit_are_folded_and_counted(tel: Telemetry) -> None:
    for n in range(12):
        tel.run(hostile_run("x", n), max_series=4)
    for name in (
        "gen_ai.client.inference.usage.input_tokens",
        "gen_ai.invoke_agent.duration",
        "gen_ai.execute_tool.duration",
    ):
        points = tel.points(name)
        values = {v for p in points for v in p.attributes.values()}
        assert len(points) <= 5, name  # the limit, and the _OTHER series
        assert OTHER in values, name
    overflow = {
        p.attributes["agui.instrument"]: p.value for p in tel.points("agui.telemetry.overflow")
    }
    assert overflow["gen_ai.client.inference.usage.input_tokens"] == 12 - 4
    assert overflow["gen_ai.invoke_agent.duration"] == 12 - 4
    models = {
        p.attributes.get("gen_ai.request.model")
        for p in tel.points("gen_ai.client.inference.usage.input_tokens")
    }
    assert models == {"xm0", "xm1", "xm2", "xm3", OTHER}


def test_the_series_limit_is_shared_by_the_stages_of_one_provider(tel: Telemetry) -> None:
    for n in range(10):  # a stage per stream, as a server makes one per request
        tel.run(hostile_run("y", n), max_series=3)
    models = {
        p.attributes.get("gen_ai.request.model")
        for p in tel.points("gen_ai.client.inference.usage.input_tokens")
    }
    assert models == {"ym0", "ym1", "ym2", OTHER}


@pytest.mark.parametrize("bad", [{"max_attribute_length": 0}, {"max_series": 0}])
def test_bad_bounds_are_refused(tel: Telemetry, bad: dict[str, Any]) -> None:
    with pytest.raises(agui_meta.UsageError, match="at least 1"):
        agui_meta.otel(meter_provider=tel.meter_provider, **bad)


# ---------------------------------------------------------------------------------------------
# UsageMeter


def usage(model: str, tokens: int = 1, provider: str = "p") -> list[TokenUsage]:
    return [TokenUsage(provider=provider, model=model, input_tokens=tokens)]


def test_threads_past_the_bound_fold_the_least_recent_into_other() -> None:
    meter = UsageMeter(max_threads=3)
    for n in range(10):
        meter.add(f"t{n}", "r", usage("m", n + 1))
    meter.add("t7", "r2", usage("m", 100))  # t7 counted again: the most recent
    meter.add("t10", "r", usage("m", 1000))
    snap = meter.snapshot()
    assert list(snap.threads) == [OTHER, "t9", "t7", "t10"]
    assert snap.threads[OTHER].input_tokens == sum(range(1, 8)) + 9  # t0 … t6, then t8
    assert snap.threads_folded == 8
    assert sum(t.input_tokens or 0 for t in snap.threads.values()) == snap.total.input_tokens


def test_a_replayed_run_of_a_folded_thread_is_taken_back_from_other() -> None:
    meter = UsageMeter(max_threads=2)
    meter.add("a", "r", usage("m", 5))
    meter.add("b", "r", usage("m", 7))
    meter.add("c", "r", usage("m", 11))  # folds a
    meter.add("a", "r", usage("m", 6))  # a's run replayed, reporting more
    snap = meter.snapshot()
    assert snap.total.input_tokens == 6 + 7 + 11
    assert all((t.input_tokens or 0) >= 0 for t in snap.threads.values())
    assert sum(t.input_tokens or 0 for t in snap.threads.values()) == snap.total.input_tokens
    assert snap.threads["a"].input_tokens == 6


def test_models_and_providers_past_the_bound_are_counted_under_other() -> None:
    meter = UsageMeter(max_labels=2)
    for n in range(6):
        meter.add("t", f"r{n}", usage(f"m{n}", 1, provider=f"p{n}"))
    meter.add("t", "r0", usage("m0", 2, provider="p0"))  # replayed: still its own label
    meter.add("t", "r5", usage("m5", 3, provider="p5"))  # replayed: taken back from _OTHER
    snap = meter.snapshot()
    assert list(snap.models) == ["m0", "m1", OTHER]
    assert list(snap.providers) == ["p0", "p1", OTHER]
    assert [(u.provider, u.model) for u in snap.provider_models] == [
        ("p0", "m0"),
        ("p1", "m1"),
        (OTHER, OTHER),
    ]
    assert snap.models[OTHER].input_tokens == 3 + 3  # m2, m3, m4 once each; m5 now 3
    assert snap.models["m0"].input_tokens == 2
    assert snap.labels_folded == 5
    assert sum(m.input_tokens or 0 for m in snap.models.values()) == snap.total.input_tokens


@pytest.mark.parametrize("where", ["thread", "provider", "model", "run"])
def test_a_mebibyte_name_is_not_kept(where: str) -> None:
    meter = UsageMeter()
    names = {"thread": "t", "provider": "p", "model": "m", "run": "r", where: MIB}
    meter.add(names["thread"], names["run"], usage(names["model"], 4, names["provider"]))
    meter.add(names["thread"], names["run"], usage(names["model"], 4, names["provider"]))
    snap = meter.snapshot()
    kept = [*snap.threads, *snap.providers, *snap.models, *(r.run_id for r in snap.runs)]
    assert all(len(k or "") < 1000 for k in kept)
    if where == "run" or where == "thread":
        assert snap.runs == []  # not kept for recognition: counted each time
        assert snap.total.input_tokens == 8
    else:
        assert snap.total.input_tokens == 4  # the run is recognised: its replay replaces it
        assert snap.labels_folded == 2  # each time it was counted


def test_the_meter_memory_stops_growing_past_its_bounds() -> None:
    meter = UsageMeter(max_runs=500, max_threads=500, max_labels=100)

    def feed(start: int, stop: int) -> int:
        for n in range(start, stop):
            meter.add(f"thread-{n}", f"run-{n}", usage(f"model-{n}", 1, f"provider-{n % 7}"))
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        feed(0, 2_000)
        first = feed(2_000, 4_000)
        second = feed(4_000, 12_000)
    finally:
        tracemalloc.stop()
    assert second < first * 1.2  # four times the runs, about the same memory
    snap = meter.snapshot()
    assert len(snap.threads) == 501 and len(snap.models) == 101 and len(snap.runs) == 500
    assert snap.total.input_tokens == 12_000


def test_bad_meter_bounds_are_refused() -> None:
    for bad in ({"max_threads": 0}, {"max_labels": 0}, {"max_label_length": 0}):
        with pytest.raises(agui_meta.UsageError, match="at least 1"):
            UsageMeter(**bad)
