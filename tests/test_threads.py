"""Thread snapshots and the thread stores (memory, SQLite): round trips, hydration, compare-and-set."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

import agui_meta
import agui_meta.events
import agui_meta.threads
from agui_meta.threads import (
    LedgerSummary,
    MemoryThreadStore,
    SQLiteThreadStore,
    ThreadSnapshot,
    VersionConflict,
)

pytestmark = pytest.mark.anyio

STREAMS = Path(__file__).parent.parent / "examples" / "streams"


def _replay(name: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "agui_meta", "replay", "--json", str(STREAMS / name)],
        capture_output=True,
        check=True,
    ).stdout
    return json.loads(out)


async def _run(source: object, store: agui_meta.Store | None = None) -> agui_meta.DefaultStages:
    stages = agui_meta.DefaultStages(store)
    async with agui_meta.wrap(source, *stages) as stream:
        await stream.drain()
    return stages


def test_docstring_examples_run() -> None:
    # Found through the public module, which the objects name as theirs.
    result = doctest.testmod(agui_meta.threads, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3
    assert result.failed == 0


@pytest.mark.parametrize("name", ["travel.sse", "support.jsonl"])
async def test_a_snapshot_keeps_the_conversation_as_replay_shows_it(name: str) -> None:
    stages = await _run((STREAMS / name).read_bytes())
    snap = ThreadSnapshot.from_store("t", stages.store).advance(stages.store, stages.ledger.runs)
    expected = _replay(name)
    again = ThreadSnapshot.from_json(snap.to_json())
    assert again == snap
    assert json.loads(json.dumps(snap.to_builtins())) == json.loads(snap.to_json())
    assert again.messages == expected["messages"]
    assert again.state == expected["state"]
    assert again.version == 1
    assert again.ledger.runs == len(expected["ledger"]["runs"])
    store = again.to_store()
    assert store.messages_wire() == expected["messages"]
    assert store.state == expected["state"]
    assert store.pending_interrupts == stages.store.pending_interrupts


async def test_the_snapshot_events_hydrate_a_fresh_client() -> None:
    stages = await _run((STREAMS / "support.jsonl").read_bytes())
    snap = ThreadSnapshot.from_store("t", stages.store)
    events = snap.to_events()
    assert [type(e) for e in events] == [
        agui_meta.events.MessagesSnapshotEvent,
        agui_meta.events.StateSnapshotEvent,
    ]
    hydrated = await _run(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            *events,
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ]
    )
    assert hydrated.store.messages_wire() == stages.store.messages_wire()
    assert hydrated.store.state == stages.store.state


async def test_a_store_seeded_from_a_snapshot_continues_the_thread() -> None:
    first = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "Hi", "metadata": {"x.a": 1}},
        {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
    ]
    second = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "!", "metadata": {"x.b": 2}},
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 2}]},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"},
    ]
    whole = await _run(first + second)
    one = await _run(first)
    snap = ThreadSnapshot.from_store("t", one.store).advance(one.store, one.ledger.runs)
    two = await _run(second, snap.to_store())
    assert two.store.messages_wire() == whole.store.messages_wire()
    assert two.store.state == whole.store.state == {"n": 2}
    nxt = snap.advance(two.store, two.ledger.runs)
    assert (nxt.version, nxt.ledger.runs, nxt.ledger.last_run_id) == (2, 2, "r2")
    assert nxt.ledger.statuses == {"finished": 2}


def test_the_ledger_summary_sums_usage_over_runs() -> None:
    usage = [agui_meta.events.TokenUsage(provider="p", model="m", input_tokens=3)]
    runs = [
        agui_meta.RunRecord(run_id="a", status="finished", usage=usage),
        agui_meta.RunRecord(run_id="b", status="error", usage=usage),
    ]
    summary = LedgerSummary().add(runs[:1]).add(runs[1:])
    assert summary.runs == 2
    assert summary.statuses == {"finished": 1, "error": 1}
    assert (summary.last_run_id, summary.last_status) == ("b", "error")
    assert msgspec.to_builtins(summary.usage) == [{"provider": "p", "model": "m", "inputTokens": 6}]


def test_a_stored_message_that_is_not_valid_is_an_error_naming_it() -> None:
    snap = ThreadSnapshot(thread_id="t", messages=[{"id": "m", "role": "user", "metadata": None}])
    with pytest.raises(agui_meta.MetadataError, match="metadata"):
        snap.to_events()


@pytest.fixture(params=["memory", "sqlite"])
def thread_store(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "memory":
        yield MemoryThreadStore()
    else:
        with SQLiteThreadStore(tmp_path / "threads.db") as store:
            yield store


async def test_compare_and_set_on_the_version(thread_store) -> None:
    assert await thread_store.load("t") is None
    base = ThreadSnapshot(thread_id="t")
    one = base.advance(agui_meta.Store(state={"v": 1}))
    await thread_store.save(one)
    assert (await thread_store.load("t")) == one
    with pytest.raises(VersionConflict) as info:
        await thread_store.save(base.advance(agui_meta.Store(state={"v": "lost"})))
    assert (info.value.thread_id, info.value.expected, info.value.actual) == ("t", 0, 1)
    two = one.advance(agui_meta.Store(state={"v": 2}))
    await thread_store.save(two)
    with pytest.raises(VersionConflict):
        await thread_store.save(two)  # built on 1, but 2 is stored now
    skipped = ThreadSnapshot(thread_id="t", version=4)
    with pytest.raises(VersionConflict) as info:
        await thread_store.save(skipped)
    assert info.value.actual == 2
    assert (await thread_store.load("t")).state == {"v": 2}
    with pytest.raises(agui_meta.UsageError, match="version 1 or more"):
        await thread_store.save(base)


async def test_concurrent_writers_one_wins_each_version(thread_store) -> None:
    wins: list[str] = []
    losses: list[int] = []

    async def writer(name: str) -> None:
        base = ThreadSnapshot(thread_id="t")
        try:
            await thread_store.save(base.advance(agui_meta.Store(state={"by": name})))
            wins.append(name)
        except VersionConflict as exc:
            losses.append(exc.actual)

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(writer, f"w{i}")
    assert len(wins) == 1
    assert losses == [1] * 7
    assert (await thread_store.load("t")).state == {"by": wins[0]}


async def test_sqlite_snapshots_survive_the_process(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    with SQLiteThreadStore(path) as store:
        await store.save(ThreadSnapshot(thread_id="t").advance(agui_meta.Store(state=[1, 2])))
    code = (
        "import anyio, sys\n"
        "from agui_meta.threads import SQLiteThreadStore\n"
        "async def main():\n"
        "    with SQLiteThreadStore(sys.argv[1]) as s:\n"
        "        print((await s.load('t')).state)\n"
        "anyio.run(main)\n"
    )
    out = await anyio.run_process([sys.executable, "-c", code, str(path)])
    assert out.stdout.decode().strip() == "[1, 2]"


async def test_the_memory_store_keeps_its_own_copy() -> None:
    store = MemoryThreadStore()
    snap = ThreadSnapshot(thread_id="t", version=1, state={"a": [1]})
    await store.save(snap)
    snap.state["a"].append(2)
    assert (await store.load("t")).state == {"a": [1]}
    assert store.thread_ids() == ["t"]
