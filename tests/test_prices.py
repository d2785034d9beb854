"""Price tables and cost: the ledger, the usage meter, otel() and the command line.

Expectations are computed here from the streams' own usage entries and the table's figures,
written out term by term (uncached input, cache read, cache write, output, reasoning).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agui_meta
from agui_meta import Price, PriceTable, PriceTableError
from agui_meta.events import TokenUsage
from tests.example_streams import EXAMPLES, STREAMS, events
from tests.helpers import cli

TABLE = EXAMPLES / "prices.toml"
# The example table's figures, per million tokens: (input, output, cache read, cache write,
# reasoning), with the fallbacks the module documents already applied.
FIGURES = {
    ("anthropic", "claude-sonnet-4"): (3.0, 15.0, 0.3, 3.75, 15.0),
    ("anthropic", "claude-haiku-4"): (0.8, 4.0, 0.8, 0.8, 4.0),
    ("openai", "gpt-4.1"): (2.0, 8.0, 0.5, 2.0, 8.0),
    ("openai", "o4-mini"): (1.1, 4.4, 1.1, 1.1, 4.4),  # provider "*" in the table
}


def expected_cost(u: dict[str, Any]) -> float:
    i, o, cr, cw, r = FIGURES[(u["provider"], u["model"])]
    read, write = u.get("cachedInputTokens", 0), u.get("cacheWriteInputTokens", 0)
    reasoning = u.get("reasoningTokens", 0)
    return (
        (u.get("inputTokens", 0) - read - write) * i
        + read * cr
        + write * cw
        + (u.get("outputTokens", 0) - reasoning) * o
        + reasoning * r
    ) / 1e6


def finished(name: str) -> list[dict[str, Any]]:
    return [e for e in events(name) if e["type"] == "RUN_FINISHED"]


def test_the_example_table_loads_from_toml_and_json(tmp_path: Path) -> None:
    table = PriceTable.load(TABLE)
    assert (len(table), table.currency, table.per_tokens) == (4, "USD", 1_000_000)
    as_json = tmp_path / "prices.json"
    as_json.write_bytes(msgspec.json.encode(msgspec.toml.decode(TABLE.read_bytes())))
    again = PriceTable.load(as_json)
    for provider, model in FIGURES:
        assert again.price(provider, model) == table.price(provider, model) is not None
    assert table.price("someone", "o4-mini") is not None  # "*": any provider
    assert table.price("anthropic", "unknown") is None


@pytest.mark.parametrize("name", ["travel.sse", "support.jsonl"])
def test_cost_of_each_usage_entry(name: str) -> None:
    table = PriceTable.load(TABLE)
    for event in finished(name):
        for u in event["usage"]:
            entry = msgspec.convert(u, type=TokenUsage)
            assert table.cost(entry) == pytest.approx(expected_cost(u))
    assert table.cost(TokenUsage(model="nobody-prices-this", input_tokens=5)) is None
    assert table.total([]) is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"prices": [{"model": "m", "input": -1, "output": 1}]}', "input must be a finite"),
        ('{"prices": [{"model": "m", "input": 1}]}', "output"),
        ('{"prices": [{"model": "m", "input": 1, "output": 1, "colour": 1}]}', "colour"),
        ('{"perTokens": 0}', "perTokens"),
        ('{"per_tokens": 0}', "per_tokens must be at least 1"),
        ("not json", "JSON"),
    ],
)
def test_a_bad_table_names_the_file_and_what(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    assert str(path) in str(caught.value) and needle in str(caught.value)
    assert isinstance(caught.value, agui_meta.AguiMetaError)
    with pytest.raises(PriceTableError, match="cannot be read"):
        PriceTable.load(tmp_path / "missing.toml")


def test_the_ledger_puts_the_cost_on_each_run() -> None:
    table = PriceTable.load(TABLE)
    ledger = agui_meta.Ledger(prices=table)
    agui_meta.run_sync([agui_meta.Enforce(), *agui_meta.DefaultStages(ledger=ledger)],
                       events("support.jsonl"))  # fmt: skip
    costs = [r.cost for r in ledger.runs]
    assert costs == [
        pytest.approx(sum(expected_cost(u) for u in e["usage"])) for e in finished("support.jsonl")
    ]
    assert json.loads(ledger.to_json())["runs"][0]["cost"] == costs[0]
    bare = agui_meta.Ledger()  # no table: no cost, and nothing new in the JSON
    agui_meta.run_sync([agui_meta.Enforce(), *agui_meta.DefaultStages(ledger=bare)],
                       events("support.jsonl"))  # fmt: skip
    assert [r.cost for r in bare.runs] == [None, None]
    assert "cost" not in json.loads(bare.to_json())["runs"][0]


def _with_scope(wire: list[dict[str, Any]], scope: str) -> list[dict[str, Any]]:
    out = []
    for e in wire:
        if e["type"] == "RUN_STARTED":
            e = {**e, "metadata": {**e.get("metadata", {}), agui_meta._usage.SCOPE_KEY: scope}}
        out.append(e)
    return out


def test_the_meter_totals_cost_by_thread_provider_model_and_scope() -> None:
    meter = agui_meta.UsageMeter(prices=PriceTable.load(TABLE))
    feeds = [
        ("support.jsonl", "tenant-a"),
        ("travel.sse", "tenant-b"),
        ("support.jsonl", "tenant-a"),
    ]
    for name, scope in feeds:  # support twice: the same runs, counted once
        ledger = agui_meta.Ledger(on_run=meter.add_run)
        agui_meta.run_sync([agui_meta.Enforce(), *agui_meta.DefaultStages(ledger=ledger)],
                           _with_scope(events(name), scope))  # fmt: skip
    snap = meter.snapshot()
    assert snap.cost is not None and snap.cost.currency == "USD"
    by_scope = {
        "tenant-a": sum(expected_cost(u) for e in finished("support.jsonl") for u in e["usage"]),
        "tenant-b": sum(expected_cost(u) for e in finished("travel.sse") for u in e["usage"]),
    }
    assert snap.cost.scopes == pytest.approx(by_scope)
    assert snap.cost.total == pytest.approx(sum(by_scope.values()))
    threads = {e["threadId"] for n in ("support.jsonl", "travel.sse") for e in finished(n)}
    assert set(snap.cost.threads) == threads
    assert sum(snap.cost.threads.values()) == pytest.approx(snap.cost.total)
    assert sum(snap.cost.providers.values()) == pytest.approx(snap.cost.total)
    assert sum(snap.cost.models.values()) == pytest.approx(snap.cost.total)
    assert snap.scopes["tenant-a"].input_tokens == sum(
        u["inputTokens"] for e in finished("support.jsonl") for u in e["usage"]
    )
    assert {r.scope for r in snap.runs} == {"tenant-a", "tenant-b"}
    assert all(r.cost is not None for r in snap.runs)


def test_scopes_are_bounded() -> None:
    meter = agui_meta.UsageMeter(max_labels=2)
    usage = [TokenUsage(model="m", input_tokens=1)]
    for n in range(5):
        meter.add("t", f"r{n}", usage, scope=f"s{n}")
    snap = meter.snapshot()
    assert set(snap.scopes) == {"s0", "s1", agui_meta._usage.OTHER}
    assert sum(u.input_tokens or 0 for u in snap.scopes.values()) == 5


def test_otel_puts_the_cost_on_spans_and_a_counter() -> None:
    from tests.test_otel import Telemetry

    tel = Telemetry()
    tel.run(_with_scope(events("support.jsonl"), "tenant-a"), prices=PriceTable.load(TABLE))
    chats = [s for s in tel.spans() if s.name.startswith("chat ")]
    usage = [u for e in finished("support.jsonl") for u in e["usage"]]
    assert sorted(s.attributes["agui.usage.cost"] for s in chats) == pytest.approx(  # type: ignore[index]
        sorted(expected_cost(u) for u in usage)
    )
    assert {s.attributes["agui.usage.currency"] for s in chats} == {"USD"}  # type: ignore[index]
    runs = [s for s in tel.spans() if s.name == "invoke_agent"]
    assert {s.attributes["agui.scope"] for s in runs} == {"tenant-a"}  # type: ignore[index]
    points = tel.points("agui.usage.cost")
    assert {p.attributes["agui.scope"] for p in points} == {"tenant-a"}
    assert sum(p.value for p in points) == pytest.approx(sum(expected_cost(u) for u in usage))


def test_the_meter_publishes_cost_and_scopes() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    meter = agui_meta.UsageMeter(prices=PriceTable.load(TABLE))
    meter.add("t", "r", [TokenUsage(provider="openai", model="gpt-4.1", input_tokens=10**6)],
              scope="acme")  # fmt: skip
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter.observe(provider.get_meter("test"))
    data = reader.get_metrics_data()
    points = {
        m.name: list(m.data.data_points)
        for rm in data.resource_metrics  # type: ignore[union-attr]
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert [p.value for p in points["agui_meta.cost"]] == [2.0]
    assert [dict(p.attributes) for p in points["agui_meta.scope.cost"]] == [{"agui.scope": "acme"}]
    assert {
        p.attributes["gen_ai.token.type"]: p.value for p in points["agui_meta.scope.token.usage"]
    } == {"input": 10**6}
    provider.shutdown()


def test_replay_shows_the_cost_of_each_run() -> None:
    done = cli("replay", "--prices", str(TABLE), str(STREAMS / "support.jsonl"))
    assert done.returncode == 0, done.stderr
    for event in finished("support.jsonl"):
        cost = sum(expected_cost(u) for u in event["usage"])
        assert f"cost {cost:.6f} USD" in done.stdout
    as_json = cli("replay", "--json", "--prices", str(TABLE), str(STREAMS / "support.jsonl"))
    runs = json.loads(as_json.stdout)["ledger"]["runs"]
    assert [r["cost"] for r in runs] == pytest.approx(
        [sum(expected_cost(u) for u in e["usage"]) for e in finished("support.jsonl")]
    )


def test_replay_with_a_bad_table_says_so(tmp_path: Path) -> None:
    bad = tmp_path / "prices.toml"
    bad.write_text("currency = 3\n")
    done = cli("replay", "--prices", str(bad), str(STREAMS / "support.jsonl"))
    assert done.returncode == 2
    assert str(bad) in done.stderr and "currency" in done.stderr


def test_a_price_is_validated_in_python() -> None:
    with pytest.raises(PriceTableError, match="reasoning"):
        PriceTable([Price(model="m", input=1, output=1, reasoning=float("nan"))])
    table = PriceTable.from_dict(
        {"currency": "EUR", "prices": [{"model": "m", "input": 1, "output": 2}]}
    )
    assert table.cost(TokenUsage(model="m", input_tokens=1_000_000, output_tokens=1_000_000)) == 3.0
