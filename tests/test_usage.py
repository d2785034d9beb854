"""``UsageMeter``: usage totals shared across runs, streams, tasks and threads."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import msgspec
import pytest

import agui_meta
from agui_meta import Usage, UsageMeter, UsageSnapshot
from agui_meta.events import TokenUsage


def _run(thread: str, run: str, *usage: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run, "usage": list(usage)},
    ]


A = {"provider": "openai", "model": "gpt-5", "inputTokens": 10, "outputTokens": 2}
B = {"provider": "anthropic", "model": "claude", "inputTokens": 7, "cachedInputTokens": 5}
C = {"model": "gpt-5", "outputTokens": 1}


def _feed(meter: UsageMeter, wire: list[dict[str, Any]]) -> None:
    agui_meta.run_sync([agui_meta.Enforce(), agui_meta.Ledger(on_run=meter.add_run)], wire)


def test_totals_per_thread_provider_model_and_pair() -> None:
    meter = UsageMeter()
    _feed(meter, [*_run("t1", "r1", A, B), *_run("t1", "r2", A), *_run("t2", "r3", C)])
    snap = meter.snapshot()
    assert snap.total == Usage(input_tokens=27, output_tokens=5, cached_input_tokens=5)
    assert snap.threads == {
        "t1": Usage(input_tokens=27, output_tokens=4, cached_input_tokens=5),
        "t2": Usage(output_tokens=1),
    }
    assert snap.providers["openai"] == Usage(provider="openai", input_tokens=20, output_tokens=4)
    assert snap.providers[""] == Usage(provider="", output_tokens=1)
    assert snap.models["gpt-5"] == Usage(model="gpt-5", input_tokens=20, output_tokens=5)
    assert [(u.provider, u.model) for u in snap.provider_models] == [
        ("openai", "gpt-5"),
        ("anthropic", "claude"),
        (None, "gpt-5"),
    ]
    assert [(r.thread_id, r.run_id) for r in snap.runs] == [
        ("t1", "r1"),
        ("t1", "r2"),
        ("t2", "r3"),
    ]
    assert snap.recorded == 3


def test_a_replayed_run_is_not_counted_twice() -> None:
    meter = UsageMeter()
    stream = [*_run("t", "r1", A), *_run("t", "r2", B)]
    for _ in range(3):
        _feed(meter, stream)
    assert meter.snapshot().total == Usage(input_tokens=17, output_tokens=2, cached_input_tokens=5)
    assert meter.snapshot().recorded == 6
    # A RUN_ERROR amending a finished run reports it again, with more usage: replaced.
    _feed(
        meter,
        [
            *_run("t", "r1", A),
            {"type": "RUN_ERROR", "message": "late", "usage": [{**A, "inputTokens": 1}]},
        ],
    )
    assert meter.snapshot().total.input_tokens == 10 + 1 + 7


def test_runs_without_ids_are_added_each_time_and_the_bound() -> None:
    meter = UsageMeter(max_runs=2)
    for _ in range(2):
        meter.add(None, None, [TokenUsage(input_tokens=1)])
    assert meter.snapshot().total.input_tokens == 2
    for run in ("a", "b", "c"):
        meter.add("t", run, [TokenUsage(input_tokens=100)])
    assert [r.run_id for r in meter.snapshot().runs] == ["b", "c"]
    meter.add("t", "a", [TokenUsage(input_tokens=100)])  # forgotten: counted again
    meter.add("t", "c", [TokenUsage(input_tokens=100)])  # recognised: replaced
    assert meter.snapshot().total.input_tokens == 2 + 400
    with pytest.raises(agui_meta.UsageError, match="max_runs"):
        UsageMeter(max_runs=-1)


def test_snapshot_to_json_and_back() -> None:
    meter = UsageMeter()
    _feed(meter, _run("t", "r", A, B))
    back = msgspec.json.decode(meter.to_json(), type=UsageSnapshot)
    assert back == meter.snapshot()
    assert b'"cachedInputTokens":5' in meter.to_json()


def test_shared_by_many_threads() -> None:
    meter = UsageMeter()

    def work(n: int) -> None:
        for i in range(200):
            meter.add(f"t{n}", f"r{i}", [TokenUsage(provider="p", input_tokens=1)])
            meter.add(f"t{n}", f"r{i}", [TokenUsage(provider="p", input_tokens=1)])  # replay

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = meter.snapshot()
    assert snap.total.input_tokens == 8 * 200
    assert snap.recorded == 2 * 8 * 200
    assert all(u.input_tokens == 200 for u in snap.threads.values())


@pytest.mark.anyio
async def test_shared_by_many_pipelines_in_tasks() -> None:
    meter = UsageMeter()

    async def one(n: int) -> None:
        stages = agui_meta.DefaultStages(ledger=agui_meta.Ledger(on_run=meter.add_run))
        async with agui_meta.wrap(_run(f"t{n}", "r", A), *stages) as stream:
            await stream.drain()

    async with anyio.create_task_group() as tg:
        for n in range(10):
            tg.start_soon(one, n)
    assert meter.snapshot().total.input_tokens == 100


def test_the_totals_through_opentelemetry() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = UsageMeter()
    meter.observe(provider.get_meter("test"))
    for _ in range(2):
        _feed(meter, _run("t", "r", A, B))

    def points() -> dict[tuple[str, str], float]:
        data = reader.get_metrics_data()
        assert data is not None
        found = {}
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    assert metric.name in ("agui_meta.token.usage", "agui_meta.scope.token.usage")
                    if metric.name != "agui_meta.token.usage":
                        continue
                    for p in metric.data.data_points:
                        a = p.attributes
                        found[(a.get("gen_ai.provider.name", ""), a["gen_ai.token.type"])] = p.value
        return found

    assert points() == {
        ("openai", "input"): 10,
        ("openai", "output"): 2,
        ("anthropic", "input"): 7,
        ("anthropic", "cache_read"): 5,
    }
    _feed(meter, _run("t", "r2", A))
    assert points()[("openai", "input")] == 20
    provider.shutdown()


def test_absent_labels_and_counts_are_none_everywhere() -> None:
    # The wire entry says UNSET for what the producer left out; nothing built from it does.
    meter = UsageMeter()
    ledger = agui_meta.Ledger(on_run=meter.add_run)
    agui_meta.run_sync([agui_meta.Enforce(), ledger], _run("t", "r", C))
    (record,) = ledger.runs
    for usage in (
        record.usage[0],
        record.aggregated_usage[0],
        meter.snapshot().provider_models[0],
        meter.snapshot().runs[0].usage[0],
    ):
        assert isinstance(usage, Usage)
        assert f"{usage.provider}/{usage.model}" == "None/gpt-5"
        assert (usage.input_tokens, usage.output_tokens) == (None, 1)
    total = meter.snapshot().total
    assert (total.provider, total.model, total.input_tokens) == (None, None, None)
    # JSON omits them, as the wire does.
    assert msgspec.json.encode(record.usage) == b'[{"model":"gpt-5","outputTokens":1}]'


def test_the_totals_serialise() -> None:
    import json

    meter = UsageMeter()
    _feed(meter, [*_run("t1", "r1", A, B), *_run("t2", "r2", C)])
    data = meter.to_builtins()
    assert json.loads(json.dumps(data)) == data == json.loads(meter.to_json())
    assert isinstance(meter.to_json(), bytes)
    assert meter.snapshot().to_json() == meter.to_json()
    assert data["total"] == {"inputTokens": 17, "outputTokens": 3, "cachedInputTokens": 5}
    assert data["providerModels"][2] == {"model": "gpt-5", "outputTokens": 1}
    assert msgspec.json.decode(meter.to_json(), type=UsageSnapshot) == meter.snapshot()
