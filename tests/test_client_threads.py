"""HttpAgent(thread_store=...): a stored thread continued across agents and restarts.

Against real servers on 127.0.0.1: the scripted agent of ``tests/servers.py`` (uvicorn), a
SQLite file in a temporary directory, and a real ``redis-server`` (``tests/redis_server.py``;
redis-py's asyncio client runs on asyncio only, so the Redis tests do too).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import agui_meta
from agui_meta.threads import MemoryThreadStore, SQLiteThreadStore, ThreadSnapshot, VersionConflict
from tests.doc_blocks import doc_block
from tests.helpers import redis_server
from tests.servers import agent_app, serve

pytestmark = pytest.mark.anyio

FIRST = [{"id": "u-1", "role": "user", "content": "What's the weather?"}]
STATE = {"tz": "Europe/Lisbon"}
RUNS: list[dict[str, Any]] = [
    {
        "runId": "r1",
        "tools": [{"name": "weather", "description": "Local weather", "parameters": {}}],
    },
    {
        "runId": "r2",
        "addMessages": [
            {"id": "tool-1", "role": "tool", "toolCallId": "r1-call", "content": "sunny, 24 °C"}
        ],
    },
    {
        "runId": "r3",
        "addMessages": [{"id": "u-2", "role": "user", "content": "snapshot"}],
        "forwardedProps": {"mode": "brief"},
    },
]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Any]]:
    app = agent_app()
    with serve(app) as url:
        yield url, app


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


def bodies(app: Any) -> list[bytes]:
    return app.state.agents["bodies"]  # type: ignore[no-any-return]


async def do_run(agent: agui_meta.HttpAgent, run: dict[str, Any]) -> agui_meta.RunResult:
    for message in run.get("addMessages", []):
        agent.add_message(message)
    return await agent.run_agent(
        run_id=run["runId"], tools=run.get("tools", []), forwarded_props=run.get("forwardedProps")
    )


async def one_agent(url: str) -> tuple[agui_meta.HttpAgent, list[dict[str, Any]]]:
    """The three runs by one agent without a store, and the inputs it sent (thread id aside)."""
    agent = agui_meta.HttpAgent(url, thread_id="whole", messages=FIRST, state=STATE)
    inputs = []
    for spec in RUNS:
        for message in spec.get("addMessages", []):
            agent.add_message(message)
        async with agent.run(
            run_id=spec["runId"],
            tools=spec.get("tools", []),
            forwarded_props=spec.get("forwardedProps"),
        ) as run:
            async for _ in run.batches():
                pass
        inputs.append({**run.input, "threadId": "-"})
    return agent, inputs


async def continue_after_restart(
    server: tuple[str, Any], open_store: Callable[[], Any], close_store: Callable[[Any], Any]
) -> None:
    """Two runs by one agent, a "restart" (a new store object and agent), the third run."""
    url, app = server
    url += "/thread"
    whole, whole_inputs = await one_agent(url)

    threads = open_store()
    first = agui_meta.HttpAgent(
        url, thread_id="durable", messages=FIRST, state=STATE, thread_store=threads
    )
    for run in RUNS[:2]:
        await do_run(first, run)
    assert first.snapshot is not None and first.snapshot.version == 2
    held, held_state = first.messages_wire(), first.state
    await close_store(threads)

    threads = open_store()  # the restart: a new connection, a new agent
    try:
        second = agui_meta.HttpAgent(url, thread_id="durable", thread_store=threads)
        assert second.messages_wire() == [] and second.snapshot is None  # nothing loaded yet
        sent_before = len(bodies(app))
        result = await do_run(second, RUNS[2])
        [sent] = [json.loads(b) for b in bodies(app)[sent_before:]]
        # The input carries the stored thread (activity left out, as always) and the new message.
        assert sent["messages"] == [m for m in held if m["role"] != "activity"] + [
            RUNS[2]["addMessages"][0]
        ]
        assert sent["state"] == held_state
        assert {**sent, "threadId": "-"} == whole_inputs[2]
        # The thread ends as if one agent had done every run.
        assert second.messages_wire() == whole.messages_wire()
        assert second.state == whole.state
        assert result.new_messages == [m for m in whole.messages_wire() if m["id"] == "r3-s"]
        stored = await threads.load("durable")
        assert stored is not None and stored.version == 3
        assert stored.messages == whole.messages_wire() and stored.state == whole.state
        assert (stored.ledger.runs, stored.ledger.last_run_id) == (3, "r3")
        assert second.snapshot == stored
    finally:
        await close_store(threads)


async def _close_sqlite(threads: SQLiteThreadStore) -> None:
    threads.close()


async def test_a_restarted_agent_continues_a_sqlite_thread(
    server: tuple[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "threads.db"
    await continue_after_restart(server, lambda: SQLiteThreadStore(path), _close_sqlite)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_restarted_agent_continues_a_redis_thread(
    server: tuple[str, Any], redis_url: str
) -> None:
    import redis.asyncio

    from agui_meta.redis import RedisThreadStore

    def open_store() -> RedisThreadStore:
        return RedisThreadStore(redis.asyncio.Redis.from_url(redis_url), namespace="restart")

    async def close_store(threads: RedisThreadStore) -> None:
        await threads.client.aclose()

    await continue_after_restart(server, open_store, close_store)


async def test_a_memory_store_keeps_the_thread_and_changes_nothing_else(
    server: tuple[str, Any],
) -> None:
    url, app = server
    whole, whole_inputs = await one_agent(url + "/thread")
    threads = MemoryThreadStore()
    agent = agui_meta.HttpAgent(
        url + "/thread", thread_id="mem", messages=FIRST, state=STATE, thread_store=threads
    )
    sent_before = len(bodies(app))
    results = [await do_run(agent, run) for run in RUNS]
    sent = [{**json.loads(b), "threadId": "-"} for b in bodies(app)[sent_before:]]
    assert sent == whole_inputs
    assert agent.messages_wire() == whole.messages_wire() and agent.state == whole.state
    assert [r.run_id for r in results] == ["r1", "r2", "r3"]
    assert [r.run_id for r in agent.ledger.runs] == ["r1", "r2", "r3"]
    stored = await threads.load("mem")
    assert stored is not None and stored.version == 3 and stored == agent.snapshot
    assert threads.thread_ids() == ["mem"]


async def test_without_a_store_nothing_is_loaded_or_saved(server: tuple[str, Any]) -> None:
    url, _ = server
    agent = agui_meta.HttpAgent(url + "/thread", messages=FIRST)
    await agent.run_agent(run_id="n1")
    assert agent.snapshot is None and agent.thread_store is None
    for method in (agent.load, agent.save):
        with pytest.raises(agui_meta.UsageError, match=r"needs a thread store"):
            await method()


async def conflict_on(threads: Any, url: str) -> None:
    a = agui_meta.HttpAgent(url, thread_id="shared", messages=FIRST, thread_store=threads)
    b = agui_meta.HttpAgent(url, thread_id="shared", messages=FIRST, thread_store=threads)
    assert await a.load() is None and await b.load() is None  # both start from version 0
    await a.run_agent(run_id="a1")
    a_thread = a.messages_wire()
    with pytest.raises(VersionConflict) as caught:
        await b.run_agent(run_id="b1")
    conflict = caught.value
    assert (conflict.thread_id, conflict.expected, conflict.actual) == ("shared", 0, 1)
    assert str(conflict) == (
        "thread 'shared': version conflict: the save builds on version 0, the stored version is 1"
    )
    stored = await threads.load("shared")
    assert stored is not None and stored.version == 1 and stored.messages == a_thread
    # b still holds its unsaved run, refuses to run on it, and is usable after a load.
    assert [m["id"] for m in b.messages_wire()] == ["u-1", "b1-t"]
    assert b.snapshot is not None and b.snapshot.version == 0
    with pytest.raises(agui_meta.UsageError, match=r"await agent\.load\(\)") as refused:
        await b.run_agent(run_id="b2")
    assert refused.value.__cause__ is conflict
    assert await b.load() == stored
    assert b.messages_wire() == a_thread
    b.add_message({"id": "t-a1", "role": "tool", "toolCallId": "a1-call", "content": "rain"})
    await b.run_agent(run_id="b2")
    assert b.snapshot is not None and b.snapshot.version == 2
    stored = await threads.load("shared")
    assert stored is not None and stored.messages == b.messages_wire()
    assert stored.ledger.runs == 2  # a's run and b's second one: the lost run is not counted
    # a's copy is now behind: its next save conflicts the other way round.
    with pytest.raises(VersionConflict, match=r"builds on version 1, the stored version is 2"):
        await a.save()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_two_agents_on_one_thread_the_second_save_conflicts(
    server: tuple[str, Any], tmp_path: Path, kind: str
) -> None:
    url, _ = server
    if kind == "memory":
        await conflict_on(MemoryThreadStore(), url + "/thread")
    else:
        with SQLiteThreadStore(tmp_path / "threads.db") as threads:
            await conflict_on(threads, url + "/thread")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_agents_on_one_redis_thread_the_second_save_conflicts(
    server: tuple[str, Any], redis_url: str
) -> None:
    import redis.asyncio

    from agui_meta.redis import RedisThreadStore

    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await conflict_on(RedisThreadStore(client, namespace="conflict"), server[0] + "/thread")
    finally:
        await client.aclose()


async def test_a_run_error_is_saved_with_what_was_assembled(server: tuple[str, Any]) -> None:
    url, _ = server
    threads = MemoryThreadStore()
    agent = agui_meta.HttpAgent(url + "/run-error", thread_id="err", thread_store=threads)
    with pytest.raises(agui_meta.RunFailed, match="the model refused"):
        await agent.run_agent(run_id="e")
    stored = await threads.load("err")
    assert stored is not None and stored.version == 1
    assert stored.messages == [{"id": "e-1", "role": "assistant", "content": "Partial"}]
    assert (stored.ledger.last_status, stored.ledger.statuses) == ("error", {"error": 1})
    assert [u.input_tokens for u in stored.ledger.usage] == [5]
    # A second writer's failed run: the conflict is raised, with the run's own error as cause.
    other = agui_meta.HttpAgent(url + "/run-error", thread_id="err", thread_store=threads)
    await other.load()
    await threads.save(stored.advance(agui_meta.Store()))  # someone else saves version 2
    with pytest.raises(VersionConflict) as caught:
        await other.run_agent(run_id="e3")
    assert isinstance(caught.value.__cause__, agui_meta.RunFailed)
    assert (caught.value.expected, caught.value.actual) == (1, 2)


async def test_a_failed_request_saves_nothing(server: tuple[str, Any]) -> None:
    url, _ = server
    threads = MemoryThreadStore()
    agent = agui_meta.HttpAgent(url + "/500", thread_id="down", thread_store=threads)
    with pytest.raises(agui_meta.HttpStatusError):
        await agent.run_agent()
    assert await threads.load("down") is None  # no event came: the thread did not change


async def test_the_first_load_keeps_what_the_agent_was_given() -> None:
    threads = MemoryThreadStore()
    stored = ThreadSnapshot(thread_id="t").advance(
        agui_meta.Store([*FIRST, {"id": "a-1", "role": "assistant", "content": "Sunny"}], STATE)
    )
    await threads.save(stored)
    # The same first message (a program that always passes it), a new one, an assigned state.
    agent = agui_meta.HttpAgent("http://127.0.0.1:9", thread_id="t", messages=FIRST, state={"x": 1})
    agent.thread_store = threads
    agent.add_message({"id": "u-2", "role": "user", "content": "And tomorrow?"})
    assert await agent.load() == stored
    assert [m["id"] for m in agent.messages_wire()] == ["u-1", "a-1", "u-2"]
    assert agent.state == STATE  # state= starts a new thread only
    assigned = agui_meta.HttpAgent("http://127.0.0.1:9", thread_id="t", thread_store=threads)
    assigned.state = {"tz": "UTC"}
    await assigned.load()
    assert assigned.state == {"tz": "UTC"} and len(assigned.messages_wire()) == 2
    # A message the stored thread holds with other content is an error, not a silent choice.
    clash = agui_meta.HttpAgent(
        "http://127.0.0.1:9",
        thread_id="t",
        messages=[{"id": "a-1", "role": "assistant", "content": "Rainy"}],
        thread_store=threads,
    )
    with pytest.raises(agui_meta.UsageError, match=r"message 'a-1' differs .* \(version 1\)"):
        await clash.load()
    # A later load replaces: what was not saved is dropped.
    agent.add_message({"id": "u-3", "role": "user", "content": "unsaved"})
    await agent.load()
    assert [m["id"] for m in agent.messages_wire()] == ["u-1", "a-1"]


class GatedStore(MemoryThreadStore):
    """A real in-memory store whose saves wait until the test releases them."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = anyio.Event()
        self.release = anyio.Event()

    async def save(self, snapshot: ThreadSnapshot) -> None:
        self.entered.set()
        await self.release.wait()
        await super().save(snapshot)


async def _let_cancellation_arrive() -> None:
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


async def test_a_cancellation_during_the_save_waits_for_it_and_goes_through(
    server: tuple[str, Any],
) -> None:
    url, _ = server
    threads = GatedStore()
    agent = agui_meta.HttpAgent(
        url + "/thread", thread_id="c", messages=FIRST, thread_store=threads
    )
    scope = anyio.CancelScope()
    finished: list[bool] = []

    async def run() -> None:
        with scope:
            await agent.run_agent(run_id="c1")
            finished.append(True)  # not reached: the cancellation is not swallowed

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await threads.entered.wait()
        scope.cancel()
        await _let_cancellation_arrive()
        threads.release.set()
    assert scope.cancelled_caught and finished == []
    stored = await threads.load("c")
    assert stored is not None and stored.version == 1  # the save completed
    assert agent.snapshot == stored  # and the agent knows it: the next save builds on it
    agent.add_message({"id": "t", "role": "tool", "toolCallId": "c1-call", "content": "fog"})
    await agent.run_agent(run_id="c2")
    assert agent.snapshot is not None and agent.snapshot.version == 2


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_asyncio_task_cancel_during_the_save_waits_for_it(
    server: tuple[str, Any],
) -> None:
    url, _ = server
    threads = GatedStore()
    agent = agui_meta.HttpAgent(
        url + "/thread", thread_id="c", messages=FIRST, thread_store=threads
    )
    task = asyncio.ensure_future(agent.run_agent(run_id="c1"))
    await threads.entered.wait()
    task.cancel()
    await _let_cancellation_arrive()
    assert not task.done()  # held by the save
    threads.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert agent.snapshot is not None and agent.snapshot.version == 1
    assert (await threads.load("c")) == agent.snapshot


async def test_a_save_that_does_not_end_times_out_and_can_be_retried(
    server: tuple[str, Any],
) -> None:
    url, _ = server
    threads = GatedStore()
    agent = agui_meta.HttpAgent(
        url + "/thread", thread_id="slow", messages=FIRST, thread_store=threads, save_timeout=0.2
    )
    with pytest.raises(TimeoutError):
        await agent.run_agent(run_id="s1")
    assert await threads.load("slow") is None
    with pytest.raises(agui_meta.UsageError, match=r"the last save failed .* agent\.save\(\)"):
        await agent.run_agent(run_id="s2")
    threads.release.set()
    saved = await agent.save()
    assert saved.version == 1 and saved.ledger.runs == 1
    assert (await threads.load("slow")) == saved == agent.snapshot


async def test_the_docs_thread_store_example_runs(
    server: tuple[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(doc_block("async def continue_thread(").code, "docs/http.md", "exec"), namespace)  # noqa: S102 - running the docs is the point
    url = server[0] + "/thread"
    path = str(tmp_path / "threads.db")
    await namespace["continue_thread"](url, path, "Hi")
    await namespace["continue_thread"](url, path, "Hi again")  # a new agent: a restart
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["1 ['user', 'assistant']", "2 ['user', 'assistant', 'user', 'assistant']"]
