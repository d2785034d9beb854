"""Runs dispatched to executors through Redis (a front replica, ``agui-meta executor`` processes).

A front replica (``redis_gateway(..., execute=False)``, a uvicorn server in this process)
accepts runs and dispatches them through the shards' dispatch streams; ``agui-meta executor``
processes (the command line, as a user starts it) take them from the consumer group. Each case
is compared with an undisturbed run of the same input (the agent's output depends only on its
input). The executor is killed with SIGKILL mid-run, stopped from the front, missing, or fed a
malformed entry. ``anyio.fail_after`` only guards against hangs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from agui_meta.gateway import Gateway
from tests.redis_gateway_app import replica, slow
from tests.servers import official_http_agent, serve
from tests.test_redis_gateway import (
    GUARD,
    ROOT,
    USER,
    body,
    events_of,
    fresh,
    ids_follow,
    redis_url,
    stream,
    thread,
    until_active,
)

pytestmark = pytest.mark.anyio
__all__ = ["redis_url"]  # the module's redis-server fixture

AGENT = "slow=tests.redis_gateway_app:slow"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.contextmanager
def executor_process(
    redis_url: str, namespace: str, log: Path, *args: str
) -> Iterator[subprocess.Popen[bytes]]:
    """``agui-meta executor`` for ``namespace`` (with the agent ``slow`` unless ``args`` name
    agents), its standard error into ``log``; started
    (its first line written), stopped with SIGTERM after the block (or killed by the test)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "agui_meta", "executor", "--redis", redis_url]
    command += ["--namespace", namespace, *args]
    if "--agent" not in args:
        command += ["--agent", AGENT]
    with open(log, "wb") as errors:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=errors)
    try:
        deadline = time.monotonic() + GUARD
        while b"agui-meta executor " not in log.read_bytes():  # its first line: started
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the executor did not start"
            time.sleep(0.02)  # a poll interval, not a measured time
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(GUARD)
            except subprocess.TimeoutExpired:  # pragma: no cover - a bug: do not hang
                process.kill()
                process.wait()


async def redis_check(redis_url: str) -> Any:
    import redis.asyncio

    return redis.asyncio.Redis.from_url(redis_url)


async def dispatch_left(redis_url: str, namespace: str) -> tuple[int, int]:
    """Entries left in the namespace's dispatch streams, and entries pending in the group."""
    from agui_meta.redis import GatewayKeys

    keys = GatewayKeys(namespace)
    check = await redis_check(redis_url)
    left = pending = 0
    try:
        for shard in range(keys.shards):
            name = keys.dispatch(keys.tag(shard))
            left += await check.xlen(name)
            if await check.exists(name) and await check.xinfo_groups(name):
                pending += (await check.xpending(name, "executors"))["pending"]
    finally:
        await check.aclose()
    return left, pending


async def test_a_front_dispatches_to_an_executor_process_as_an_embedded_gateway_runs(
    redis_url: str, tmp_path: Path
) -> None:
    namespace = fresh()
    spec = {
        "threadId": "t",
        "runs": [
            {"runId": "r1", "addMessages": [USER], "forwardedProps": {"deltas": 4}},
            {"runId": "r2", "addMessages": [{"id": "u2", "role": "user", "content": "again"}]},
        ],
    }
    with (
        serve(Gateway({"slow": slow}), lifespan="on") as embedded,
        serve(replica(redis_url, namespace, execute=False), lifespan="on") as front,
        executor_process(redis_url, namespace, tmp_path / "x.log", "--name", "ex1") as ex,
    ):
        want = await anyio.to_thread.run_sync(
            official_http_agent, f"{embedded}/agents/slow/run", spec, tmp_path
        )
        got = await anyio.to_thread.run_sync(
            official_http_agent, f"{front}/agents/slow/run", spec, tmp_path
        )
        async with httpx.AsyncClient(timeout=GUARD) as client:
            stored, undisturbed = (
                await thread(client, embedded, "t"),
                await thread(client, front, "t"),
            )
            _, direct = await stream(client, f"{embedded}/agents/slow/run", body("d"))
            _, dispatched = await stream(client, f"{front}/agents/slow/run", body("d"))
    assert got == want and all("error" not in line for line in got)
    for name in ("messages", "state", "version", "ledger", "activeRunId"):
        assert undisturbed[name] == stored[name], name
    assert events_of(dispatched) == events_of(direct)
    ids_follow(dispatched)
    from agui_meta.redis import GatewayKeys

    check = await redis_check(redis_url)
    try:
        key = (dispatched[0].id or "").split(":")[0]
        executed_by = await check.hget(GatewayKeys(namespace).run(key), "executor")
    finally:
        await check.aclose()
    assert executed_by == b"ex1"  # the executor process ran it, not the front
    assert ex.returncode == 0  # stopped by SIGTERM, as its help says
    assert await dispatch_left(redis_url, namespace) == (0, 0)  # each entry acknowledged


async def test_an_executor_killed_mid_run_ends_it_with_an_error_and_another_serves_the_next(
    redis_url: str, tmp_path: Path
) -> None:
    namespace = fresh()
    budget = ["--budget-tokens", "100000"]
    fronts = [replica(redis_url, namespace, execute=False, lease=0.6) for _ in range(2)]
    with serve(fronts[0], lifespan="on") as front, serve(fronts[1], lifespan="on") as other:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            slow_run = body("t", deltas=1000, pause=0.05, tokens=7)
            with executor_process(
                redis_url, namespace, tmp_path / "a.log", "--lease", "0.6", *budget
            ) as process:
                _, head = await stream(client, f"{front}/agents/slow/run", slow_run, upto=4)
                process.kill()  # SIGKILL: the executor dies mid-run
                process.wait(GUARD)
            # The client resumes on the other front (Last-Event-ID): every event once.
            status, rest = await stream(
                client, f"{other}/agents/slow/run", slow_run, last_id=head[-1].id
            )
            lost = await thread(client, front, "t")
            with executor_process(redis_url, namespace, tmp_path / "b.log", *budget):
                _, again = await stream(
                    client, f"{front}/agents/slow/run", body("t", "r2", tokens=7)
                )
            after = await thread(client, front, "t")
    assert status == 200
    ids_follow(head + rest)
    events = events_of(head + rest)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "executor_lost"
    assert [e["type"] for e in events].count("RUN_ERROR") == 1
    assert lost["version"] == 1 and lost["activeRunId"] is None
    assert lost["ledger"] == {
        "runs": 1,
        "lastRunId": "r1",
        "lastStatus": "error",
        "statuses": {"error": 1},
    }
    assert events_of(again)[-1]["type"] == "RUN_FINISHED"
    assert after["version"] == 2 and after["ledger"]["runs"] == 2
    assert after["messages"][-1]["id"] == "r2-m"
    # Usage: the lost run reported none; the next one is charged once.
    from agui_meta import Budget
    from agui_meta.redis import GatewayKeys

    check = await redis_check(redis_url)
    try:
        totals = await check.hgetall(
            GatewayKeys(namespace).budget(
                "", 86400, Budget[Any](max_tokens=1, period=86400).window()
            )
        )
    finally:
        await check.aclose()
    assert totals[b"tokens"] == b"7"
    assert len([k for k in totals if k.startswith(b"r:")]) == 1
    assert await dispatch_left(redis_url, namespace) == (0, 0)  # the lost run's entry acked


def official_failed_run(url: str, spec: dict[str, Any]) -> dict[str, Any]:
    """What the official HttpAgent holds after one run, also a failed one
    (``tests/http_agent_failed_ref.cjs``): its messages, state, the RUN_ERROR its subscriber
    got and what ``runAgent`` threw."""
    from tests.oracle import OracleUnavailable, oracle_missing, prepare_oracle

    try:
        directory = prepare_oracle()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    done = subprocess.run(
        ["node", str(ROOT / "tests" / "http_agent_failed_ref.cjs"), str(directory), url],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return line  # type: ignore[no-any-return]


async def test_a_lost_runs_thread_is_what_its_clients_ended_with(
    redis_url: str, tmp_path: Path
) -> None:
    namespace = fresh()
    props = {"deltas": 1000, "pause": 0.05}
    spec = {"threadId": "t", "messages": [USER], "runId": "r1", "forwardedProps": props}
    official: list[dict[str, Any]] = []
    ours: list[Any] = []

    with serve(replica(redis_url, namespace, execute=False, lease=0.6), lifespan="on") as front:
        url = f"{front}/agents/slow/run"

        async def run_official() -> None:
            official.append(await anyio.to_thread.run_sync(official_failed_run, url, spec))

        async def run_ours() -> None:
            agent = agui_meta.HttpAgent(url, thread_id="t", messages=[USER])
            with pytest.raises(agui_meta.RunFailed) as failed:
                await agent.run_agent(run_id="r1", forwarded_props=props)
            ours.extend([failed.value.code, agent.messages_wire(), agent.state])

        async with httpx.AsyncClient(timeout=GUARD) as client:
            with executor_process(
                redis_url, namespace, tmp_path / "a.log", "--lease", "0.6"
            ) as process:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(run_official)
                    await until_active(client, front, "t", "r1")
                    tg.start_soon(run_ours)  # joins the same run
                    # The run has streamed some of its text (a third client joins to see it).
                    await stream(client, url, body("t", deltas=1000, pause=0.05), upto=6)
                    process.kill()  # SIGKILL: the executor dies mid-run
                    process.wait(GUARD)
            saved = await thread(client, front, "t")
            # The run again (the same ids): its log, as any client reads it.
            _, replayed = await stream(client, url, body("t", deltas=1000, pause=0.05))
            # A later connect (the official client) agrees with the clients that followed it.
            [connected] = await anyio.to_thread.run_sync(
                official_http_agent,
                f"{front}/agents/slow/connect",
                {"threadId": "t", "runs": [{}]},
                tmp_path,
            )
    [line] = official
    assert line["error"] is None and line["runError"]["code"] == "executor_lost"
    events = events_of(replayed)
    assert events[-1]["code"] == "executor_lost"
    said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said  # it was cut part way through its text
    # The saved thread is what both clients hold: the user's message, the partial text.
    assert saved["messages"] == [USER, {"id": "r1-m", "role": "assistant", "content": said}]
    assert line["messages"] == saved["messages"] and line["state"] == saved["state"] == {}
    assert ours == ["executor_lost", saved["messages"], saved["state"]]
    assert "error" not in connected and connected["messages"] == saved["messages"]
    # Saved once, its end recorded once.
    assert saved["version"] == 1 and saved["activeRunId"] is None
    assert saved["ledger"] == {
        "runs": 1,
        "lastRunId": "r1",
        "lastStatus": "error",
        "statuses": {"error": 1},
    }
    assert await dispatch_left(redis_url, namespace) == (0, 0)


async def test_stop_on_the_front_reaches_the_executor_process(
    redis_url: str, tmp_path: Path
) -> None:
    namespace = fresh()
    with (
        serve(replica(redis_url, namespace, execute=False), lifespan="on") as front,
        executor_process(redis_url, namespace, tmp_path / "x.log"),
    ):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            long = body("t", deltas=1000, pause=0.05)
            got: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def read() -> None:
                    got.extend((await stream(client, f"{front}/agents/slow/run", long))[1])

                tg.start_soon(read)
                await until_active(client, front, "t", "r1")
                await stream(client, f"{front}/agents/slow/run", long, upto=3)  # begun
                stopped = await client.post(f"{front}/agents/slow/stop", json={"threadId": "t"})
            saved = await thread(client, front, "t")
    assert stopped.status_code == 200
    assert stopped.json() == {"threadId": "t", "runId": "r1", "ended": True}
    events = events_of(got)
    assert events[-1] == {
        "type": "RUN_FINISHED", "threadId": "t", "runId": "r1", "outcome": {"type": "cancelled"},
    }  # fmt: skip
    said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert saved["version"] == 1 and saved["activeRunId"] is None
    assert saved["messages"] == [USER, {"id": "r1-m", "role": "assistant", "content": said}]


async def test_with_no_executor_a_run_ends_with_a_clear_error_after_the_dispatch_timeout(
    redis_url: str,
) -> None:
    namespace = fresh()
    front = replica(redis_url, namespace, execute=False, lease=0.6, dispatch_timeout=0.5)
    with serve(front, lifespan="on") as url:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            status, frames = await stream(client, f"{url}/agents/slow/run", body("t"))
            after = await thread(client, url, "t")
            _, again = await stream(client, f"{url}/agents/slow/run", body("t", "r2"))
    assert status == 200
    events = events_of(frames)
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "no_executor"
    assert "no executor took the run" in events[-1]["message"]
    assert after["activeRunId"] is None and after["ledger"]["lastStatus"] == "error"
    assert events_of(again)[-1]["code"] == "no_executor"  # the thread is free: refused no more
    assert await dispatch_left(redis_url, namespace) == (0, 0)


async def test_a_malformed_dispatch_entry_is_reported_and_parked_and_runs_go_on(
    redis_url: str, tmp_path: Path
) -> None:
    from agui_meta.redis import GatewayKeys

    namespace = fresh()
    keys = GatewayKeys(namespace)
    stream_name = keys.dispatch(keys.tag(3))
    check = await redis_check(redis_url)
    try:
        bad = [
            await check.xadd(stream_name, {"nonsense": "\x1b[2J"}),
            await check.xadd(stream_name, {"key": "s99-x", "holder": "1 s99-x"}),
            await check.xadd(stream_name, {"key": "s3-x", "holder": "1 s3-x"}),  # no such run
        ]
        log = tmp_path / "x.log"
        with (
            serve(replica(redis_url, namespace, execute=False), lifespan="on") as front,
            executor_process(redis_url, namespace, log),
        ):
            async with httpx.AsyncClient(timeout=GUARD) as client:
                _, frames = await stream(client, f"{front}/agents/slow/run", body("t"))
        parked = await check.xrange(f"{stream_name}:parked")
    finally:
        await check.aclose()
    assert events_of(frames)[-1]["type"] == "RUN_FINISHED"
    assert [entry[1][b"entry"] for entry in parked] == bad
    said = log.read_text()
    for entry_id in bad:
        assert f"dispatch entry {entry_id.decode()} of stream {stream_name}" in said
    assert await dispatch_left(redis_url, namespace) == (0, 0)


async def test_a_dispatched_run_the_executor_cannot_start_ends_with_dispatch_error(
    redis_url: str, tmp_path: Path
) -> None:
    from agui_meta.redis import GatewayKeys

    namespace = fresh()
    keys = GatewayKeys(namespace)
    check = await redis_check(redis_url)
    try:
        with serve(replica(redis_url, namespace, execute=False), lifespan="on") as front:
            async with httpx.AsyncClient(timeout=GUARD) as client:
                answers: dict[str, list[Any]] = {}

                async def post(thread_id: str) -> None:
                    url = f"{front}/agents/slow/run"
                    answers[thread_id] = (await stream(client, url, body(thread_id)))[1]

                async with anyio.create_task_group() as tg:
                    tg.start_soon(post, "bent")
                    await until_active(client, front, "bent", "r1")
                    # Its entry rewritten with an input that is not one, before any executor.
                    name = keys.dispatch(keys.of("bent"))
                    [(entry_id, fields)] = await check.xrange(name)
                    await check.xdel(name, entry_id)
                    fields[b"input"] = b'{"threadId": 1}'
                    bent = await check.xadd(name, fields)
                    await check.hset(keys.run(fields[b"key"].decode()), "entry", bent)
                    tg.start_soon(post, "other")
                    await until_active(client, front, "other", "r1")
                    # An executor that has none of the front's agents.
                    log = tmp_path / "x.log"
                    with executor_process(
                        redis_url, namespace, log, "--agent", "else=tests.redis_gateway_app:slow"
                    ):
                        with anyio.fail_after(GUARD):
                            while len(answers) < 2:  # noqa: ASYNC110 - other tasks
                                await anyio.sleep(0.02)
        parked = await check.xrange(f"{name}:parked")
    finally:
        await check.aclose()
    malformed, missing = events_of(answers["bent"]), events_of(answers["other"])
    assert [e["type"] for e in malformed] == ["RUN_STARTED", "RUN_ERROR"]
    assert malformed[-1]["code"] == "dispatch_error"
    assert f"dispatch entry {bent.decode()} of {name} is malformed" in malformed[-1]["message"]
    assert [entry[1][b"entry"] for entry in parked] == [bent]
    assert [e["type"] for e in missing] == ["RUN_STARTED", "RUN_ERROR"]
    assert "has no agent named 'slow'" in missing[-1]["message"]
    assert await dispatch_left(redis_url, namespace) == (0, 0)


async def test_an_executor_takes_no_more_runs_than_its_max_runs_and_loses_none(
    redis_url: str, tmp_path: Path
) -> None:
    from agui_meta.redis import GatewayKeys

    namespace = fresh()
    keys = GatewayKeys(namespace)
    threads = ["a", "b", "c", "d"]
    assert len({keys.of(name) for name in threads}) > 1  # on several dispatch streams
    with serve(replica(redis_url, namespace, execute=False), lifespan="on") as front:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            answers: dict[str, list[Any]] = {}

            async def post(thread_id: str) -> None:
                url = f"{front}/agents/slow/run"
                run = body(thread_id, deltas=3, pause=0.05)
                answers[thread_id] = (await stream(client, url, run))[1]

            async with anyio.create_task_group() as tg:
                for name in threads:  # all waiting before the executor starts
                    tg.start_soon(post, name)
                    await until_active(client, front, name, "r1")
                with executor_process(redis_url, namespace, tmp_path / "x.log", "--max-runs", "1"):
                    with anyio.fail_after(GUARD):
                        while len(answers) < len(threads):  # noqa: ASYNC110 - other tasks
                            await anyio.sleep(0.02)
            saved = [await thread(client, front, name) for name in threads]
    for name in threads:
        assert events_of(answers[name])[-1]["type"] == "RUN_FINISHED", name
    assert [s["version"] for s in saved] == [1] * len(threads)
    assert await dispatch_left(redis_url, namespace) == (0, 0)


def test_the_command_line_runs_a_front_and_an_executor(redis_url: str, tmp_path: Path) -> None:
    from tests.test_gateway_cli import DEMO, cli, gateway

    namespace = fresh()
    front = ("--threads", "redis", "--redis", redis_url, "--namespace", namespace, "--no-execute")
    with (
        gateway(*DEMO) as (embedded, _),
        gateway(*DEMO, *front) as (url, _f),
        executor_process(redis_url, namespace, tmp_path / "x.log", *DEMO, "--name", "cli-ex"),
    ):
        want = cli("run", f"{embedded}/agents/demo/run", "-m", "hello", "--thread-id", "t1")
        ran = cli("run", f"{url}/agents/demo/run", "-m", "hello", "--thread-id", "t1")
        stored = httpx.get(f"{embedded}/threads/t1", timeout=GUARD).json()
        saved = httpx.get(f"{url}/threads/t1", timeout=GUARD).json()
    assert ran.returncode == want.returncode == 0, ran.stderr

    # The same thread but for ids (the command line and the demo make them up).
    def shape(found: dict[str, Any]) -> Any:
        return [(m["role"], m.get("content")) for m in found["messages"]], found["state"]

    assert shape(saved) == shape(stored)
    assert saved["ledger"]["statuses"] == stored["ledger"]["statuses"] == {"finished": 1}
    assert saved["version"] == 1


async def test_sigterm_ends_the_executors_runs_saved_and_exits_0(
    redis_url: str, tmp_path: Path
) -> None:
    namespace = fresh()
    with serve(replica(redis_url, namespace, execute=False), lifespan="on") as front:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            long = body("t", deltas=1000, pause=0.05)
            with executor_process(redis_url, namespace, tmp_path / "x.log") as process:
                _, head = await stream(client, f"{front}/agents/slow/run", long, upto=3)
                process.send_signal(signal.SIGTERM)
                _, rest = await stream(
                    client, f"{front}/agents/slow/run", long, last_id=head[-1].id
                )
                status = process.wait(GUARD)
            saved = await thread(client, front, "t")
    assert status == 0
    ids_follow(head + rest)
    assert events_of(rest)[-1]["code"] == "gateway_shutdown"
    said = "".join(
        e["delta"] for e in events_of(head + rest) if e["type"] == "TEXT_MESSAGE_CONTENT"
    )
    assert saved["version"] == 1 and saved["ledger"]["lastStatus"] == "error"
    assert saved["messages"][-1] == {"id": "r1-m", "role": "assistant", "content": said}
    assert await dispatch_left(redis_url, namespace) == (0, 0)


async def test_a_fronts_dispatched_runs_are_bounded_503_then_room_again(redis_url: str) -> None:
    namespace = fresh()
    options: dict[str, Any] = {"execute": False, "shards": 1, "max_dispatched": 2}
    front = replica(redis_url, namespace, lease=0.6, dispatch_timeout=2.0, **options)
    with serve(front, lifespan="on") as url:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            answers: dict[str, list[Any]] = {}

            async def post(thread_id: str) -> None:
                answers[thread_id] = (
                    await stream(client, f"{url}/agents/slow/run", body(thread_id))
                )[1]

            async with anyio.create_task_group() as tg:
                for name in ("a", "b"):  # both waiting: no executor runs
                    tg.start_soon(post, name)
                    await until_active(client, url, name, "r1")
                full = await client.post(f"{url}/agents/slow/run", json=body("c"))
                claimed = (await client.get(f"{url}/threads/c")).status_code
            status, again = await stream(client, f"{url}/agents/slow/run", body("c"))
    assert full.status_code == 503 and full.headers["Retry-After"] == "1"
    assert "max_dispatched" in full.json()["error"]
    assert claimed == 404  # refused before the thread was claimed
    for name in ("a", "b"):
        assert events_of(answers[name])[-1]["code"] == "no_executor", name
    assert status == 200 and events_of(again)[-1]["code"] == "no_executor"  # room again
    assert await dispatch_left(redis_url, namespace) == (0, 0)


async def test_the_start_script_and_a_fronts_max_runs_refuse_past_their_bounds(
    redis_url: str,
) -> None:
    import redis.asyncio

    from agui_meta._runs import thread_store
    from agui_meta.events import RunAgentInput
    from agui_meta.gateway import AtCapacity, redis_gateway
    from agui_meta.threads import ThreadSnapshot

    async def start(gateway: Gateway, thread_id: str) -> Any:
        base = ThreadSnapshot(thread_id=thread_id)
        run = RunAgentInput(thread_id=thread_id, run_id="r1", messages=[], state={})
        return await gateway.registry.start(
            scope="", agent_name="slow", agent=slow, input=run,
            store=thread_store(base, []), base=base, new_messages=[],
        )  # fmt: skip

    client = redis.asyncio.Redis.from_url(redis_url)
    options: dict[str, Any] = {"execute": False, "shards": 1, "lease": 0.6}
    # The start script itself refuses past max_dispatched (no check_room before it here).
    by_stream = redis_gateway(
        client, {"slow": slow}, namespace=fresh(), max_dispatched=2, dispatch_timeout=2.0,
        **options,
    )  # fmt: skip
    # A front's own runs: max_runs of them not ended.
    by_front = redis_gateway(
        client, {"slow": slow}, namespace=fresh(), max_runs=1, dispatch_timeout=0.5, **options
    )
    try:
        async with by_stream.running(), by_front.running():
            first = [await start(by_stream, name) for name in ("a", "b")]
            with pytest.raises(AtCapacity, match="max_dispatched") as stream_full:
                await start(by_stream, "c")
            one = await start(by_front, "a")
            with pytest.raises(AtCapacity, match="this front's 1 dispatched runs") as front_full:
                await start(by_front, "b")
            assert await one.wait_ended(GUARD)  # no executor: it ends with no_executor
            again = await start(by_front, "b")  # room again
            assert await again.wait_ended(GUARD)
            for run in first:
                assert await run.wait_ended(GUARD)
    finally:
        await client.aclose()
    assert stream_full.value.max_runs == 2 and front_full.value.max_runs == 1


async def test_runs_past_the_executors_max_runs_within_the_bound_all_complete(
    redis_url: str, tmp_path: Path
) -> None:
    namespace = fresh()
    threads = ["a", "b", "c"]
    front = replica(redis_url, namespace, execute=False, max_dispatched=len(threads))
    with (
        serve(front, lifespan="on") as url,
        executor_process(redis_url, namespace, tmp_path / "x.log", "--max-runs", "1"),
    ):
        async with httpx.AsyncClient(timeout=GUARD) as client:
            answers: dict[str, tuple[int, list[Any]]] = {}

            async def post(thread_id: str) -> None:
                run = body(thread_id, deltas=3, pause=0.05)
                answers[thread_id] = await stream(client, f"{url}/agents/slow/run", run)

            async with anyio.create_task_group() as tg:
                for name in threads:
                    tg.start_soon(post, name)
    for name in threads:
        status, frames = answers[name]
        assert status == 200 and events_of(frames)[-1]["type"] == "RUN_FINISHED", name
    assert await dispatch_left(redis_url, namespace) == (0, 0)


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
def test_a_max_dispatched_that_is_not_a_count_is_refused(bad: Any) -> None:
    import redis.asyncio

    from agui_meta.gateway import redis_gateway

    client = redis.asyncio.Redis()  # never connected: the option is refused first
    with pytest.raises(agui_meta.UsageError, match="max_dispatched must be"):
        redis_gateway(client, {"slow": slow}, execute=False, max_dispatched=bad)
