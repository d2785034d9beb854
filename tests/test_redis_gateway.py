"""The gateway across replicas on Redis (agui_meta.redis.redis_gateway), on a real redis-server.

Two replicas (``tests/redis_gateway_app.py``), each a uvicorn server on 127.0.0.1 with its own
Redis client, share one ``redis-server`` (``tests/redis_server.py``) and a fresh namespace. A
run accepted by one replica executes there; the other joins it, connects to its thread, stops
it, resumes it with ``Last-Event-ID``. For the death of a replica, one runs in a process of its
own and is killed with SIGKILL. Each case is compared with an undisturbed run of the same input
(the agent's output depends only on its input). ``anyio.fail_after`` only guards against hangs.
redis-py's asyncio client runs on asyncio only, so these tests do too.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from agui_meta.framing import Frame, SSEDecoder
from tests.helpers import uvicorn_process
from tests.needs import missing
from tests.redis_server import RedisServer
from tests.servers import serve

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
GUARD = 30  # seconds: a hang guard, not a timing assertion
USER = {"id": "u1", "role": "user", "content": "hi"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        import redis.asyncio  # noqa: F401
    except ImportError:
        missing("the redis extra is not installed: the Redis gateway tests cannot run")
    srv = RedisServer(tmp_path_factory.mktemp("redis"), fsync="everysec")
    srv.start()
    yield srv.url
    srv.stop()


_namespaces = iter(range(10**6))


def fresh() -> str:
    return f"gw{next(_namespaces)}"


@contextlib.contextmanager
def replicas(redis_url: str, **options: Any) -> Iterator[tuple[str, str]]:
    """Two replicas sharing Redis and a fresh namespace: their base URLs."""
    from tests.redis_gateway_app import replica

    namespace = fresh()
    a, b = replica(redis_url, namespace, **options), replica(redis_url, namespace, **options)
    with serve(a, lifespan="on") as url_a, serve(b, lifespan="on") as url_b:
        yield url_a, url_b


@contextlib.contextmanager
def replica_process(
    redis_url: str, namespace: str, *, log: Path | None = None, **options: Any
) -> Iterator[tuple[str, Any]]:
    """A replica in a process of its own (uvicorn), to be killed: (its URL, the process);
    its standard error into ``log`` when given."""
    env = {
        "AGUI_GW_REDIS": redis_url,
        "AGUI_GW_NAMESPACE": namespace,
        "AGUI_GW_OPTIONS": json.dumps(options),
    }
    with uvicorn_process("tests.redis_gateway_app:from_env", env, log=log, guard=GUARD) as served:
        yield served


async def until_active(client: httpx.AsyncClient, url: str, thread_id: str, run_id: str) -> None:
    """Wait until ``url`` reports ``run_id`` active on the thread (another replica runs it)."""
    with anyio.fail_after(GUARD):
        while (await thread(client, url, thread_id)).get("activeRunId") != run_id:  # noqa: ASYNC110 - state in Redis
            await anyio.sleep(0.02)


def body(thread: str, run: str = "r1", **props: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [USER],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": props,
    }


def events_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [json.loads(f.data) for f in frames]


async def stream(
    client: httpx.AsyncClient,
    url: str,
    data: dict[str, Any] | None = None,
    *,
    last_id: str | None = None,
    upto: int | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, list[Frame]]:
    """POST and read the SSE answer (all of it, or its first ``upto`` frames)."""
    sent = {"Accept": "text/event-stream", **(headers or {})}
    if last_id is not None:
        sent["Last-Event-ID"] = last_id
    decoder = SSEDecoder()
    frames: list[Frame] = []
    with anyio.fail_after(GUARD):
        async with client.stream("POST", url, json=data or {}, headers=sent) as response:
            if response.status_code != 200:
                await response.aread()
                return response.status_code, frames
            async for chunk in response.aiter_bytes():
                frames += [f for f in decoder.feed(chunk) if f.data]
                if upto is not None and len(frames) >= upto:
                    return 200, frames[:upto]
    return 200, frames + [f for f in decoder.close() if f.data]


async def thread(client: httpx.AsyncClient, url: str, thread_id: str, **kw: Any) -> Any:
    return (await client.get(f"{url}/threads/{thread_id}", **kw)).json()


def renamed(events: list[dict[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    """``events`` with thread ``old`` named ``new``."""
    return json.loads(json.dumps(events).replace(f'"{old}"', f'"{new}"'))  # type: ignore[no-any-return]


def same_thread(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal messages, state and ledger counts (the thread ids differ)."""
    assert got["messages"] == want["messages"]
    assert got["state"] == want["state"]
    assert got["version"] == want["version"]
    assert got["activeRunId"] is None
    assert got["ledger"] == want["ledger"]


async def test_a_run_on_a_is_joined_connected_and_read_on_b(redis_url: str) -> None:
    with replicas(redis_url) as (a, b):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            _, undisturbed = await stream(client, f"{a}/agents/slow/run", body("t0", deltas=8))
            want = await thread(client, a, "t0")
            slow = body("t1", deltas=8, pause=0.1)
            _, head = await stream(client, f"{a}/agents/slow/run", slow, upto=3)
            assert (await thread(client, b, "t1"))["activeRunId"] == "r1"  # B sees it run
            # A fresh client connects on B while the run executes on A.
            tab = agui_meta.HttpAgent(f"{b}/agents/slow/run", http_client=client, thread_id="t1")
            await tab.connect_agent()
            # The same run posted to B joins it from its first event.
            _, joined = await stream(client, f"{b}/agents/slow/run", slow)
            got = await thread(client, b, "t1")
    assert [f.id for f in joined[:3]] == [f.id for f in head]
    assert events_of(joined) == renamed(events_of(undisturbed), "t0", "t1")
    same_thread(got, want)
    assert tab.messages_wire() == got["messages"]
    assert tab.state == got["state"]


async def test_a_follower_on_b_gets_the_later_runs_executed_on_a(redis_url: str) -> None:
    with replicas(redis_url) as (a, b):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            await stream(client, f"{a}/agents/slow/run", body("t"))
            followed: list[Frame] = []

            async def follow() -> None:
                decoder = SSEDecoder()
                connect = {"threadId": "t", "follow": True}
                async with client.stream("POST", f"{b}/agents/slow/connect", json=connect) as got:
                    async for chunk in got.aiter_bytes():
                        followed.extend(f for f in decoder.feed(chunk) if f.data)
                        if any(json.loads(f.data).get("runId") == "r2" and
                               json.loads(f.data)["type"] == "RUN_FINISHED" for f in followed):  # fmt: skip
                            return

            with anyio.fail_after(GUARD):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    while not followed:  # noqa: ASYNC110 - the prelude arrived: attached
                        await anyio.sleep(0.01)
                    _, direct = await stream(client, f"{a}/agents/slow/run", body("t", "r2"))
    events = events_of(followed)
    later = [n for n, e in enumerate(events) if e["type"] == "RUN_STARTED" and e["runId"] == "r2"]
    assert events[later[0] :] == events_of(direct)
    assert [e["type"] for e in events[: later[0]]] == [
        "RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED",
    ]  # fmt: skip


async def test_stop_on_b_reaches_the_run_executing_on_a(redis_url: str) -> None:
    with replicas(redis_url) as (a, b):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            slow = body("t", deltas=1000, pause=0.05)
            async with anyio.create_task_group() as tg:
                got: list[Frame] = []

                async def read() -> None:
                    got.extend((await stream(client, f"{a}/agents/slow/run", slow))[1])

                tg.start_soon(read)
                await until_active(client, b, "t", "r1")
                stopped = await client.post(f"{b}/agents/slow/stop", json={"threadId": "t"})
            again = await client.post(f"{b}/agents/slow/stop", json={"threadId": "t"})
            saved = await thread(client, a, "t")
    assert stopped.status_code == 200
    assert stopped.json() == {"threadId": "t", "runId": "r1", "ended": True}
    assert again.status_code == 404
    events = events_of(got)
    assert events[-2:] == [
        {"type": "TEXT_MESSAGE_END", "messageId": "r1-m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1", "outcome": {"type": "cancelled"}},
    ]
    assert [e["type"] for e in events].count("RUN_FINISHED") == 1
    said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert saved["version"] == 1 and saved["activeRunId"] is None
    assert saved["messages"] == [USER, {"id": "r1-m", "role": "assistant", "content": said}]
    assert saved["ledger"]["runs"] == 1


async def test_two_runs_at_once_on_one_thread_one_is_refused(redis_url: str) -> None:
    with replicas(redis_url) as (a, b):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            _, undisturbed = await stream(client, f"{a}/agents/slow/run", body("t0", "r0"))
            answers: dict[str, tuple[int, list[Frame]]] = {}

            async def post(name: str, url: str) -> None:
                answers[name] = await stream(client, url, body("t", name, deltas=5, pause=0.05))

            async with anyio.create_task_group() as tg:
                tg.start_soon(post, "ra", f"{a}/agents/slow/run")
                tg.start_soon(post, "rb", f"{b}/agents/slow/run")
            saved = await thread(client, b, "t")
    statuses = sorted(status for status, _ in answers.values())
    assert statuses == [200, 409]
    [(winner, (_, frames))] = [(n, found) for n, found in answers.items() if found[0] == 200]
    assert len(events_of(frames)) == len(events_of(undisturbed)) + 2  # two more deltas
    assert saved["version"] == 1 and saved["ledger"]["lastRunId"] == winner


async def test_scopes_hold_across_replicas(redis_url: str) -> None:
    with replicas(redis_url) as (a, b):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            alice, bob = {"X-Scope": "alice"}, {"X-Scope": "bob"}
            status, _ = await stream(client, f"{a}/agents/slow/run", body("t"), headers=alice)
            assert status == 200
            assert (await client.get(f"{b}/threads/t", headers=bob)).status_code == 404
            assert (await client.get(f"{b}/threads", headers=bob)).json() == {"threads": []}
            theirs = await stream(
                client, f"{b}/agents/slow/connect", {"threadId": "t"}, headers=bob
            )
            run = await stream(client, f"{b}/agents/slow/run", body("t", "r2"), headers=bob)
            stop = await client.post(f"{b}/agents/slow/stop", json={"threadId": "t"}, headers=bob)
            gone = await client.delete(f"{b}/threads/t", headers=bob)
            mine = (await client.get(f"{b}/threads", headers=alice)).json()
            kept = await client.get(f"{b}/threads/t", headers=alice)
    assert theirs[0] == run[0] == stop.status_code == gone.status_code == 404
    assert mine == {"threads": [{"threadId": "t", "activeRunId": None}]}
    assert kept.status_code == 200 and kept.json()["version"] == 1


def client_messages(sent: list[dict[str, Any]], events: list[dict[str, Any]]) -> Any:
    """The messages a client that sent ``sent`` holds after applying ``events``."""
    stages = agui_meta.DefaultStages(agui_meta.Store(sent))
    agui_meta.run_sync(stages, events)
    return stages.store.messages_wire()


def ids_follow(frames: list[Frame]) -> None:
    """One run's ids, each once and in order: ``KEY:0``, ``KEY:1``, …"""
    key = (frames[0].id or "").split(":")[0]
    assert [f.id for f in frames] == [f"{key}:{n}" for n in range(len(frames))]


async def test_the_client_of_a_killed_replica_resumes_on_the_other(redis_url: str) -> None:
    from tests.redis_gateway_app import replica

    namespace = fresh()
    with (
        replica_process(redis_url, namespace) as (a, process),
        serve(replica(redis_url, namespace), lifespan="on") as b,
    ):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            _, undisturbed = await stream(client, f"{b}/agents/slow/run", body("t0", deltas=20))
            want = await thread(client, b, "t0")
            slow = body("t", deltas=20, pause=0.05)
            await stream(client, f"{b}/agents/slow/run", slow, upto=1)  # B executes it
            _, head = await stream(client, f"{a}/agents/slow/run", slow, upto=5)  # A serves it
            process.kill()  # SIGKILL
            process.wait(GUARD)
            status, rest = await stream(client, f"{b}/agents/slow/run", slow, last_id=head[-1].id)
            got = await thread(client, b, "t")
    assert status == 200
    ids_follow(head + rest)
    assert events_of(head + rest) == renamed(events_of(undisturbed), "t0", "t")
    same_thread(got, want)


async def test_a_killed_executor_ends_its_run_with_an_error_once(redis_url: str) -> None:
    from tests.redis_gateway_app import replica

    namespace = fresh()
    with (
        replica_process(redis_url, namespace, lease=0.6) as (a, process),
        serve(replica(redis_url, namespace, lease=0.6), lifespan="on") as b,
    ):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            slow = body("t", deltas=1000, pause=0.05)
            _, head = await stream(client, f"{a}/agents/slow/run", slow, upto=4)
            process.kill()  # SIGKILL: the executor dies mid-run
            process.wait(GUARD)
            status, rest = await stream(client, f"{b}/agents/slow/run", slow, last_id=head[-1].id)
            lost = await thread(client, b, "t")
            # The thread is free again: the next run starts and is saved after the lost one.
            _, again = await stream(client, f"{b}/agents/slow/run", body("t", "r2"))
            after = await thread(client, b, "t")
    assert status == 200
    ids_follow(head + rest)
    events = events_of(head + rest)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "executor_lost"
    assert [e["type"] for e in events].count("RUN_ERROR") == 1
    assert all(e["type"] == "TEXT_MESSAGE_CONTENT" for e in events[2:-1])
    assert lost["version"] == 1 and lost["activeRunId"] is None
    # What the client holds after these events is what the thread keeps: its message, and the
    # partial text the lost run streamed.
    assert lost["messages"] == client_messages([USER], events) and lost["state"] == {}
    assert len(lost["messages"][-1]["content"]) > 0
    assert lost["ledger"] == {
        "runs": 1,
        "lastRunId": "r1",
        "lastStatus": "error",
        "statuses": {"error": 1},
    }
    # The next run's agent gets the thread as kept (its snapshot counts the messages it got).
    assert events_of(again)[-1]["type"] == "RUN_FINISHED"
    assert after["version"] == 2 and after["ledger"]["runs"] == 2
    assert after["messages"][:-1] == lost["messages"] and after["messages"][-1]["id"] == "r2-m"
    assert after["state"] == {"messages": len(lost["messages"])}


async def test_a_paused_executor_past_its_lease_is_fenced_out(
    redis_url: str, tmp_path: Path
) -> None:
    import redis.asyncio

    from agui_meta.redis import GatewayKeys
    from tests.redis_gateway_app import replica

    namespace, log = fresh(), tmp_path / "a.log"
    with (
        replica_process(redis_url, namespace, log=log, lease=0.6) as (a, process),
        serve(replica(redis_url, namespace, lease=0.6), lifespan="on") as b,
    ):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            slow = body("t", deltas=1000, pause=0.02)
            _, head = await stream(client, f"{a}/agents/slow/run", slow, upto=4)
            process.send_signal(signal.SIGSTOP)  # paused past its lease: B takes the run over
            try:
                _, rest = await stream(client, f"{b}/agents/slow/run", slow, last_id=head[-1].id)
                ended = await thread(client, b, "t")
            finally:
                process.send_signal(signal.SIGCONT)
            # A wakes up holding a run that is no longer its own: it notices and stops.
            with anyio.fail_after(GUARD):
                while b"was taken over" not in log.read_bytes():  # noqa: ASYNC110 - another process
                    await anyio.sleep(0.02)
            after = await thread(client, b, "t")
    key = (head[0].id or "").split(":")[0]
    check = redis.asyncio.Redis.from_url(redis_url)
    try:
        entries: Any = await check.xrange(GatewayKeys(namespace).replay(key))
    finally:
        await check.aclose()
    ids_follow(head + rest)
    assert events_of(rest)[-1]["code"] == "executor_lost"
    # Nothing A had queued got into the log after the takeover: the events the client read,
    # then the end marker.
    assert len(entries) == len(head + rest) + 1 and b"end" in entries[-1][1]
    assert ended == after and after["version"] == 1 and after["ledger"]["lastStatus"] == "error"
    assert after["messages"] == client_messages([USER], events_of(head + rest))


async def lost_with_more_log(
    redis_url: str, more: list[dict[str, Any] | bytes], **options: Any
) -> tuple[list[dict[str, Any]], list[Frame], Any, str]:
    """A run on replica A, killed mid-run with SIGKILL; then ``more`` entries (events, or raw
    ``d`` fields) appended to its log as a writer of the log would; then replica B (with
    ``options``) starts and takes the run over. The events A logged, what a client resuming on
    B read, the thread as B saved it, the namespace."""
    import redis.asyncio

    from agui_meta.framing import encode_sse
    from agui_meta.redis import GatewayKeys
    from tests.redis_gateway_app import replica

    namespace = fresh()
    keys = GatewayKeys(namespace)
    check: Any = redis.asyncio.Redis.from_url(redis_url)
    slow = body("t", deltas=1000, pause=0.05)
    try:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            with replica_process(redis_url, namespace, lease=0.6) as (a, process):
                _, head = await stream(client, f"{a}/agents/slow/run", slow, upto=4)
                process.kill()  # SIGKILL: no replica left to sweep until B starts
                process.wait(GUARD)
            key = (head[0].id or "").split(":")[0]
            log = keys.replay(key)
            logged = [
                json.loads(SSEDecoder().feed(d[b"d"])[0].data) for _, d in await check.xrange(log)
            ]
            for n, item in enumerate(more, start=len(logged)):
                data = (
                    item
                    if isinstance(item, bytes)
                    else encode_sse(json.dumps(item).encode(), id=f"{key}:{n}")
                )
                await check.xadd(log, {"d": data}, id=f"0-{n + 1}")
            with serve(replica(redis_url, namespace, lease=0.6, **options), lifespan="on") as b:
                _, rest = await stream(client, f"{b}/agents/slow/run", slow, last_id=head[-1].id)
                saved = await thread(client, b, "t")
    finally:
        await check.aclose()
    return logged, rest, saved, namespace


async def test_a_lost_runs_corrupt_log_entry_is_reported_and_the_thread_kept_before_it(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    more: list[dict[str, Any] | bytes] = [
        b"data: {not json\n\n",
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1-m", "delta": "after the bad one"},
    ]
    logged, rest, saved, namespace = await lost_with_more_log(redis_url, more)
    error = events_of(rest[-1:])[0]
    assert error["type"] == "RUN_ERROR" and error["code"] == "executor_lost"
    # Kept: what a client applying the log up to the bad entry holds, then the error.
    assert saved["messages"] == client_messages([USER], [*logged, error])
    assert "after the bad one" not in json.dumps(saved["messages"])
    assert saved["version"] == 1 and saved["activeRunId"] is None
    assert saved["ledger"]["lastStatus"] == "error" and saved["ledger"]["runs"] == 1
    bad = f"0-{len(logged) + 1}"
    [report] = [
        r.getMessage() for r in caplog.records if f"entry {bad} of stream" in r.getMessage()
    ]
    assert f"{namespace}" in report and "cannot be read" in report


async def test_a_run_lost_after_its_log_ended_it_is_saved_as_it_ended_and_charged_once(
    redis_url: str,
) -> None:
    import redis.asyncio

    from agui_meta.redis import GatewayKeys

    usage = [{"model": "m-1", "inputTokens": 7, "outputTokens": 0}]
    more: list[dict[str, Any] | bytes] = [  # the executor wrote its end, then died
        {"type": "TEXT_MESSAGE_END", "messageId": "r1-m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1", "usage": usage},
    ]
    limits = agui_meta.Budget[Any](max_tokens=1000, period=86400)
    logged, rest, saved, namespace = await lost_with_more_log(redis_url, more, budget=limits)
    assert events_of(rest)[-1]["type"] == "RUN_FINISHED"  # no error after the run's own end
    assert saved["messages"] == client_messages([USER], [*logged, *more])  # type: ignore[list-item]
    assert saved["version"] == 1 and saved["ledger"]["lastStatus"] == "finished"
    assert saved["ledger"]["usage"][0]["inputTokens"] == 7
    check: Any = redis.asyncio.Redis.from_url(redis_url)
    try:
        totals = await check.hgetall(GatewayKeys(namespace).budget("", 86400, limits.window()))
    finally:
        await check.aclose()
    assert totals[b"tokens"] == b"7" and len([k for k in totals if k.startswith(b"r:")]) == 1


async def test_a_lost_run_whose_log_lost_its_head_records_the_error_only(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import redis.asyncio

    from agui_meta.redis import GatewayKeys
    from tests.redis_gateway_app import replica

    namespace = fresh()
    keys = GatewayKeys(namespace)
    check: Any = redis.asyncio.Redis.from_url(redis_url)
    fast = body("t", deltas=100_000, pause=0.002)
    try:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            with replica_process(redis_url, namespace, lease=0.6, max_events=4) as (a, process):
                _, head = await stream(client, f"{a}/agents/slow/run", fast, upto=1)
                log = keys.replay((head[0].id or "").split(":")[0])
                with anyio.fail_after(GUARD):  # until the log is past max_events, trimmed
                    while (await check.xrange(log, count=1))[0][0] == b"0-1":  # noqa: ASYNC110 - another process
                        await anyio.sleep(0.02)
                process.kill()
                process.wait(GUARD)
            with serve(replica(redis_url, namespace, lease=0.6), lifespan="on") as b:
                with anyio.fail_after(GUARD):  # until B took the run over and saved the thread
                    while (await thread(client, b, "t")).get("version") != 1:  # noqa: ASYNC110 - state in Redis
                        await anyio.sleep(0.02)
                saved = await thread(client, b, "t")
    finally:
        await check.aclose()
    assert saved["messages"] == [] and saved["activeRunId"] is None
    assert saved["ledger"]["lastStatus"] == "error" and saved["ledger"]["runs"] == 1
    [report] = [r.getMessage() for r in caplog.records if "were trimmed" in r.getMessage()]
    assert f"of stream '{log}'" in report and "records its error only" in report


async def test_threads_and_runs_survive_a_redis_restart_from_its_aof(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path)  # appendfsync always: nothing acknowledged is lost
    srv.start()
    try:
        with replicas(srv.url) as (a, b):
            async with httpx.AsyncClient(timeout=GUARD) as client:
                await stream(client, f"{a}/agents/slow/run", body("t"))
                before = await thread(client, a, "t")
                srv.restart()  # SIGKILL, then started again from its append-only file
                got = await thread(client, b, "t")
                tab = agui_meta.HttpAgent(f"{b}/agents/slow/run", http_client=client, thread_id="t")
                await tab.connect_agent()
                listed = (await client.get(f"{b}/threads")).json()
                _, second = await stream(client, f"{b}/agents/slow/run", body("t", "r2"))
                after = await thread(client, a, "t")
    finally:
        srv.stop()
    assert got == before
    assert tab.messages_wire() == before["messages"]
    assert listed == {"threads": [{"threadId": "t", "activeRunId": None}]}
    assert events_of(second)[-1]["type"] == "RUN_FINISHED"
    assert after["version"] == 2 and after["messages"][:2] == before["messages"]


def test_the_command_line_serves_one_thread_from_two_replicas(redis_url: str) -> None:
    from tests.test_gateway_cli import DEMO, cli, gateway

    on_redis = ("--threads", "redis", "--redis", redis_url, "--namespace", fresh())
    with gateway(*DEMO, *on_redis) as (a, _), gateway(*DEMO, *on_redis) as (b, _b):
        ran = cli("run", f"{a}/agents/demo/run", "-m", "hello", "--thread-id", "t1")
        on_a = httpx.get(f"{a}/threads/t1", timeout=GUARD).json()
        on_b = httpx.get(f"{b}/threads/t1", timeout=GUARD).json()
        listed = httpx.get(f"{b}/threads", timeout=GUARD).json()
    assert ran.returncode == 0, ran.stderr
    assert on_a == on_b
    assert on_b["version"] == 1 and on_b["messages"][0]["content"] == "hello"
    assert listed == {"threads": [{"threadId": "t1", "activeRunId": None}]}


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (("--threads", "redis"), "--threads redis and --redis URL go together"),
        (("--redis", "redis://127.0.0.1:1/0"), "--threads redis and --redis URL go together"),
        (("--threads", "redis", "--redis", "http://x"), "Redis URL must specify one of"),
        (("--threads", "disk"), "--threads is memory, sqlite:PATH or redis"),
    ],
)
def test_bad_redis_arguments_exit_2_with_the_reason(argv: tuple[str, ...], reason: str) -> None:
    from tests.test_gateway_cli import DEMO, cli

    done = cli("gateway", *DEMO, *argv)
    assert done.returncode == 2
    assert reason in done.stderr


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.redis_cluster import RedisClusterNodes

    nodes = RedisClusterNodes(tmp_path_factory.mktemp("cluster"))
    nodes.start()
    try:
        yield nodes.url
    finally:
        nodes.stop()


async def test_on_a_redis_cluster_the_threads_spread_over_the_masters(cluster_url: str) -> None:
    import redis.asyncio

    from agui_meta.redis import GatewayKeys
    from tests.redis_gateway_app import replica

    namespace = fresh()
    a = replica(cluster_url, namespace, cluster=True)
    # A front: it dispatches; with max_runs=1, each run it posts after the first finds the
    # earlier one ended in Redis (a pipeline over the cluster's slots) before it dispatches.
    b = replica(cluster_url, namespace, cluster=True, execute=False, max_runs=1)
    threads = [f"t{n}" for n in range(8)]
    with serve(a, lifespan="on") as url_a, serve(b, lifespan="on") as url_b:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            _, undisturbed = await stream(client, f"{url_a}/agents/slow/run", body("u", deltas=4))
            want = await thread(client, url_a, "u")
            for name in threads:  # run on A, joined and read on B
                slow = body(name, deltas=4, pause=0.02)
                _, head = await stream(client, f"{url_a}/agents/slow/run", slow, upto=2)
                _, joined = await stream(client, f"{url_b}/agents/slow/run", slow)
                assert [f.id for f in joined[:2]] == [f.id for f in head]
                assert events_of(joined) == renamed(events_of(undisturbed), "u", name)
                same_thread(await thread(client, url_b, name), want)
            # Stop on B, for a run executing on A.
            long = body("s", deltas=1000, pause=0.05)
            async with anyio.create_task_group() as tg:
                got: list[Frame] = []

                async def read() -> None:
                    got.extend((await stream(client, f"{url_a}/agents/slow/run", long))[1])

                tg.start_soon(read)
                await until_active(client, url_b, "s", "r1")
                stopped = await client.post(f"{url_b}/agents/slow/stop", json={"threadId": "s"})
            # Runs posted to B are dispatched through the shards' streams and executed by A.
            for name in ("d0", "d1", "d2"):
                _, dispatched = await stream(
                    client, f"{url_b}/agents/slow/run", body(name, deltas=4)
                )
                assert events_of(dispatched) == renamed(events_of(undisturbed), "u", name)
                same_thread(await thread(client, url_a, name), want)
            listed = (await client.get(f"{url_b}/threads")).json()["threads"]
    assert stopped.json()["ended"] is True
    assert events_of(got)[-1]["outcome"] == {"type": "cancelled"}
    assert sorted(t["threadId"] for t in listed) == sorted([*threads, "u", "s", "d0", "d1", "d2"])
    # Where the threads' keys live: on more than one master.
    check = redis.asyncio.RedisCluster.from_url(cluster_url)
    try:
        await check.initialize()
        keys = GatewayKeys(namespace)
        nodes = [check.get_node_from_key(keys.thread(name)) for name in threads]
        homes = {node.name for node in nodes if node is not None}
        streams = [keys.dispatch(keys.tag(shard)) for shard in range(keys.shards)]
        found = [check.get_node_from_key(name) for name in streams]
        dispatch_homes = {node.name for node in found if node is not None}
        left = [await check.xlen(name) for name in streams]
    finally:
        await check.aclose()
    assert len(homes) >= 2
    assert len(dispatch_homes) >= 2  # the dispatch streams spread over the masters too
    assert left == [0] * keys.shards  # every dispatched run acknowledged


def test_the_gateway_benchmark_runs_on_redis(redis_url: str) -> None:
    # Speed is never asserted: this only keeps `python -m benchmarks.gateway --redis` working.
    argv = ["-m", "benchmarks.gateway", "--events", "50", "--rounds", "1", "--redis", redis_url]
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    for row in ("Redis, 1 replica (run)", "Redis, 2 replicas (run on A, read on B)"):
        assert f"| {row} |" in done.stdout
    assert "| Redis, 2 replicas (on B, run on A) |" in done.stdout
    assert "| Redis, front + executor (run on the front) |" in done.stdout
    assert "| Redis, front + executor (on the front) |" in done.stdout


async def test_a_thread_is_deleted_on_b_only_when_no_run_is_active(redis_url: str) -> None:
    with replicas(redis_url) as (a, b):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            await stream(client, f"{a}/agents/slow/run", body("t"))
            slow = body("t", "r2", deltas=1000, pause=0.05)
            async with anyio.create_task_group() as tg:
                tg.start_soon(stream, client, f"{a}/agents/slow/run", slow)
                await until_active(client, b, "t", "r2")
                busy = await client.delete(f"{b}/threads/t")
                await client.post(f"{b}/agents/slow/stop", json={"threadId": "t"})
            kept = await thread(client, a, "t")
            gone = await client.delete(f"{b}/threads/t")
            after = await client.get(f"{a}/threads/t")
            listed = (await client.get(f"{a}/threads")).json()
            # The id is free again: a new thread of that name starts from nothing.
            await stream(client, f"{a}/agents/slow/run", body("t", "r3"))
            fresh_thread = await thread(client, b, "t")
    assert busy.status_code == 409 and "'r2'" in busy.json()["error"]
    assert kept["version"] == 2 and kept["ledger"]["runs"] == 2
    assert gone.status_code == 204
    assert after.status_code == 404 and listed == {"threads": []}
    assert fresh_thread["version"] == 1 and fresh_thread["ledger"]["lastRunId"] == "r3"


async def test_a_lost_run_whose_thread_is_corrupt_still_ends(redis_url: str) -> None:
    import redis.asyncio

    from agui_meta.redis import GatewayKeys
    from tests.redis_gateway_app import replica

    namespace = fresh()
    keys = GatewayKeys(namespace)
    check = redis.asyncio.Redis.from_url(redis_url)
    try:
        with (
            replica_process(redis_url, namespace, lease=0.6) as (a, process),
            serve(replica(redis_url, namespace, lease=0.6), lifespan="on") as b,
        ):
            async with httpx.AsyncClient(timeout=GUARD) as client:
                await stream(client, f"{a}/agents/slow/run", body("t"))
                slow = body("t", "r2", deltas=1000, pause=0.05)
                _, head = await stream(client, f"{a}/agents/slow/run", slow, upto=3)
                await check.hset(keys.thread("t"), "snap", b"not a snapshot")
                process.kill()
                process.wait(GUARD)
                _, rest = await stream(client, f"{b}/agents/slow/run", slow, last_id=head[-1].id)
        active = await check.exists(keys.active("t"))
        inflight = await check.zcard(keys.inflight(keys.of("t")))
        kept = await check.hget(keys.thread("t"), "snap")
    finally:
        await check.aclose()
    ids_follow(head + rest)
    assert events_of(rest)[-1]["code"] == "executor_lost"
    assert active == 0 and inflight == 0  # the thread is not held by a run any more
    assert kept == b"not a snapshot"  # left as it was found, for repair


async def test_the_official_client_connects_on_b_to_a_run_on_a(
    redis_url: str, tmp_path: Path
) -> None:
    from tests.servers import official_http_agent

    with replicas(redis_url) as (a, b):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            await stream(client, f"{a}/agents/slow/run", body("t"))  # a stored thread
            slow = body("t", "r2", deltas=40, pause=0.1)
            official: list[dict[str, Any]] = []

            async def connect() -> None:
                spec = {"threadId": "t", "runs": [{}]}
                url = f"{b}/agents/slow/connect"
                official.extend(
                    await anyio.to_thread.run_sync(official_http_agent, url, spec, tmp_path)
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(stream, client, f"{a}/agents/slow/run", slow)
                await until_active(client, b, "t", "r2")
                tg.start_soon(connect)
            saved = await thread(client, b, "t")
    [line] = official
    assert "error" not in line, line  # the official verifier accepted the whole stream
    assert saved["version"] == 2
    assert line["messages"] == saved["messages"] and line["state"] == saved["state"]


async def test_a_scopes_budget_holds_across_replicas_and_each_run_is_charged_once(
    redis_url: str,
) -> None:
    import types

    import redis.asyncio

    from agui_meta.gateway import MemoryCatalog
    from agui_meta.redis import GatewayKeys
    from agui_meta.redis._runs import RedisRuns
    from agui_meta.threads import MemoryThreadStore
    from tests.redis_gateway_app import replica

    def budget(reports: list[agui_meta.Report]) -> agui_meta.Budget[Any]:
        return agui_meta.Budget(max_tokens=1000, period=86400, on_exceeded=reports.append)

    namespace = fresh()
    on_a: list[agui_meta.Report] = []  # each replica a Budget of its own
    on_b: list[agui_meta.Report] = []
    acme = {"X-Scope": "acme"}
    with (
        serve(replica(redis_url, namespace, budget=budget(on_a)), lifespan="on") as a,
        serve(replica(redis_url, namespace, budget=budget(on_b)), lifespan="on") as b,
    ):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            long = body("t0", deltas=1000, pause=0.02)
            async with anyio.create_task_group() as tg:
                live: list[Frame] = []

                async def read_live() -> None:
                    live.extend(
                        (await stream(client, f"{a}/agents/slow/run", long, headers=acme))[1]
                    )

                tg.start_soon(read_live)
                with anyio.fail_after(GUARD):  # until acme's run executes on A
                    while (await thread(client, b, "t0", headers=acme)).get("activeRunId") != "r1":  # noqa: ASYNC110 - state in Redis
                        await anyio.sleep(0.02)
                _, first = await stream(
                    client, f"{a}/agents/slow/run", body("t1", tokens=600), headers=acme
                )
                # On B, another run of acme takes it to 1200 tokens: B stops A's live run.
                _, crossing = await stream(
                    client, f"{b}/agents/slow/run", body("t2", tokens=600), headers=acme
                )
            _, refused = await stream(
                client, f"{a}/agents/slow/run", body("t3", tokens=5), headers=acme
            )
            _, other = await stream(client, f"{a}/agents/slow/run", body("t4", tokens=900))
    ended = events_of(live)
    assert ended[-1]["type"] == "RUN_ERROR" and ended[-1]["code"] == "budget_exceeded"
    assert "scope 'acme' has spent 1200 tokens of 1000" in ended[-1]["message"]
    assert events_of(first)[-1]["type"] == events_of(crossing)[-1]["type"] == "RUN_FINISHED"
    assert [e["type"] for e in events_of(refused)] == ["RUN_STARTED", "RUN_ERROR"]
    assert events_of(refused)[-1]["code"] == "budget_exceeded"
    assert events_of(other)[-1]["type"] == "RUN_FINISHED"  # another scope
    assert on_b[0].message.startswith("budget exceeded: run 'r1' took scope 'acme'")
    assert len(on_b) == 1 and len(on_a) == 1  # B saw the crossing, A refused t3
    # The totals are in Redis, each run counted once; charging an ended run again, from two
    # replicas at once, adds nothing, and a new run raced by two replicas is counted once.
    keys = GatewayKeys(namespace)
    limits = agui_meta.Budget[Any](max_tokens=1000, period=86400)
    check = redis.asyncio.Redis.from_url(redis_url)
    try:
        name = keys.budget("acme", 86400, limits.window())
        assert await check.hget(name, "tokens") == b"1200"
        assert await check.hget(keys.budget("", 86400, limits.window()), "tokens") == b"900"
        registries = [
            RedisRuns(MemoryThreadStore(), MemoryCatalog(), client=check, keys=keys, budget=limits)
            for _ in range(2)
        ]
        usage = [agui_meta.Usage(input_tokens=600)]
        for run_key in ((first[0].id or "").split(":")[0], keys.run_key("t9", "raced")):
            run: Any = types.SimpleNamespace(key=run_key, scope="acme", run_id="r1", thread_id="t")
            async with anyio.create_task_group() as tg:
                for registry in registries:
                    tg.start_soon(registry.charge, run, usage)
        assert await check.hget(name, "tokens") == b"1800"  # the raced run, once
    finally:
        await check.aclose()


async def test_the_command_lines_redis_pool_is_sized_for_its_max_runs(redis_url: str) -> None:
    # redis-py's default cap (100 connections) fails a replica past about 25 concurrent runs.
    from agui_meta.cli.gateway import redis_client

    for runs in (50, 500):
        client = redis_client(redis_url, runs)
        try:
            assert client.connection_pool.max_connections >= 4 * runs
            assert await client.ping()
        finally:
            await client.aclose()
