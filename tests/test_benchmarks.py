"""The benchmark harness still runs: a tiny smoke run produces a complete JSON record.

No timing is asserted (speed is measured by ``python -m benchmarks.run``, never tested).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

import agui_meta
from benchmarks import instructions, run, workload
from tests.oracle import oracle_missing


def test_workload_is_exact_seeded_and_valid() -> None:
    first = workload.frames(300, seed=7)
    assert len(first) == 300
    assert first == workload.frames(300, seed=7)
    assert first != workload.frames(300, seed=8)
    chunked = workload.frames(300, seed=7, chunked=True)
    assert len(chunked) == 300
    assert any(b"_CHUNK" in f for f in chunked)
    with_history = workload.frames(300, seed=7, history=20)
    assert len(with_history) == 303
    snapshot = msgspec.json.decode(with_history[1])
    assert snapshot["type"] == "MESSAGES_SNAPSHOT"
    assert len(snapshot["messages"]) == 20
    # The verifier (and the rest of the default pipeline) accepts every variant, silently.
    for frames in (first, chunked, with_history):
        reports: list[agui_meta.Report] = []
        store = agui_meta.Store()
        chain = run.sync_chain(store=store)
        agui_meta.run_sync(chain, frames, on_report=reports.append)
        assert reports == []
        assert frames[0].startswith(b'{"type":"RUN_STARTED"')
        assert frames[-1].startswith(b'{"type":"RUN_FINISHED"')


@pytest.mark.slow
def test_quick_run_writes_a_complete_record(tmp_path: Path) -> None:
    out = tmp_path / "record.json"
    argv = [
        "--quick",
        "--events=300",
        "--sizes=100,300",
        "--histories=0,50",
        "--memory-sizes=500",
        "--rounds=1",
        f"--json={out}",
        f"--cache={tmp_path / 'cache'}",
    ]
    assert run.main(argv) == 0
    record = json.loads(out.read_text())
    for key in (
        "machine",
        "command",
        "main",
        "chunked",
        "scaling",
        "history",
        "concurrent",
        "memory",
    ):
        assert key in record, key
    names = list(record["main"]["contenders"])
    assert names[0].startswith("floor")
    assert any(n.startswith("Python SDK") for n in names)
    assert sum(n.startswith("hand-written") for n in names) == 3  # issue 23's contenders
    assert any(n.startswith("reference") for n in names)
    assert [n for n in names if n.startswith("agui-meta stages")] == [
        f"agui-meta stages: {level}" for level in run.LEVELS[:-1]
    ]
    for name, contender in record["main"]["contenders"].items():
        if contender["available"]:
            assert contender["events"] == 300, name
            assert contender["eps"] > 0, name
            assert len(contender["times_s"]) == contender["rounds"] >= 1, name
        else:
            assert contender["why"], name
    full = record["main"]["contenders"]["agui-meta full pipeline, SSE bytes"]
    assert full["available"]
    assert full["reports"] == 0
    assert full["outputs"] >= 300
    assert [row["events"] for row in record["scaling"]["rows"]] == [100, 300]
    assert [row["history"] for row in record["history"]["rows"]] == [0, 50]
    assert {(row["events"], row["evict"]) for row in record["memory"]["rows"]} == {
        (500, True),
        (500, False),
    }
    for row in record["memory"]["rows"]:
        assert row["peak_rss"] >= row["baseline_rss"] > 0
        assert row["traced_peak"] > 0
    evicted = next(r for r in record["memory"]["rows"] if r["evict"])
    kept = next(r for r in record["memory"]["rows"] if not r["evict"])
    assert evicted["retained_messages"] < kept["retained_messages"]
    concurrent = record["concurrent"]["rows"]
    # each round of at least 3,000 events in a quick run: one pipeline ten times in turn
    assert [(row["pipelines"], row["repeat"], row["events"]) for row in concurrent] == [
        (1, 10, 3000),
        (10, 1, 3000),
    ]
    assert all(row["messages"] == full["messages"] for row in concurrent)
    # the collector's passes of each round, the warm-up's first
    for row in concurrent:
        passes = row["collections"]
        assert len(passes) == row["rounds"] + 1
        assert all(p["full"] >= 0 and p["young_us_per_event"] >= 0 for p in passes)
    idle = record["concurrent"]["idle"]
    assert [(i["streams"], i["prefix_events"]) for i in idle] == [(10, 0), (10, 20)]
    assert all(i["bytes_per_stream"] > 0 and i["gc_objects_per_stream"] > 0 for i in idle)
    assert {t["target"] for t in record["targets"]} >= {
        "full pipeline from SSE bytes ≥ 0.35x the floor",
        "an open binary file as fast as a `Path`",
        "10 concurrent pipelines in one loop within 1.2x one's cost per event",
    }
    reference = record["main"]["contenders"][next(n for n in names if n.startswith("reference"))]
    if not reference["available"]:  # checked last: everything else above was
        oracle_missing(RuntimeError(reference["why"]))
    assert record["main"]["messages_agree_with_reference"] is True


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["sse", "jsonl"])
def test_input_file(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"stream.{fmt}"
    workload.write(path, 200, fmt, seed=3)
    out = tmp_path / "record.json"
    argv = [f"--input={path}", "--rounds=1", "--no-reference", f"--json={out}"]
    assert run.main([*argv, f"--cache={tmp_path / 'cache'}"]) == 0
    record = json.loads(out.read_text())
    assert set(record) >= {"input", "targets"}
    assert "main" not in record
    assert record["input"]["workload"]["events"] == 200
    contenders = record["input"]["contenders"]
    assert contenders["agui-meta full pipeline, JSONL bytes"]["outputs"] >= 200
    ref = contenders["reference: @ag-ui/client 1.0.0 (Node.js), JSONL"]
    assert not ref["available"]
    assert "--no-reference" in ref["why"]


def test_the_recorded_command_holds_no_path_of_the_machine() -> None:
    argv = ["--json", "/tmp/out.json", "--input", "/home/me/s.sse", "--json=/x.json", "--quick"]
    assert run._command(argv) == "python -m benchmarks.run --input s.sse --quick"


def test_instructions_per_event_subtract_the_setup() -> None:
    slopes = {"setup": 1000, "setup-durable": 5000, "floor": 4000, "full": 17000}
    slopes["durable-local"] = 45000

    def fake(config: str, n: int) -> int:
        return 5_000_000 + slopes[config] * n

    figures = instructions.per_event(["floor", "full"], 100, 300, fake, log=lambda _: None)
    assert figures == {"floor": 3000, "full": 16000}
    mixed = instructions.per_event(["durable-local", "full"], 100, 300, fake, log=lambda _: None)
    assert mixed == {"durable-local": 40000, "full": 16000}
    assert "| msgspec decode of the frames (the floor) | 3,000 | 19% |" in instructions.table(
        figures
    )


def test_instructions_children_run_every_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGUI_META_BENCH_EVENTS", "200")
    monkeypatch.setenv("AGUI_META_BENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(run, "_cache", run._cache)  # restored after the children moved it
    for config in instructions.CONFIGS:
        instructions._child(config, 150)
    assert (tmp_path / "w200-s1.sse").is_file()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_are_counted_by_callgrind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGUI_META_BENCH_EVENTS", "200")
    monkeypatch.setenv("AGUI_META_BENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(run, "_cache", tmp_path)
    run.generated(200)
    assert instructions.count("setup", 10) > 1_000_000


def test_the_collector_probe_counts_what_ran_inside_it() -> None:
    import gc

    from benchmarks.run import _Collections

    gc.collect()  # outside: not counted
    with _Collections() as passes:
        gc.collect()
        gc.collect(0)
    record = passes.record(1000)
    assert (record["full"], record["young"]) == (1, 1)
    assert record["full_us_per_event"] > 0
    gc.collect()  # after: not counted either
    assert passes.record(1000)["full"] == 1
