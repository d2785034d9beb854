"""The gateway (embedded): detached runs, join, resume, stop, owned threads, scopes, limits.

Every test serves a real :class:`~agui_meta.gateway.Gateway` with uvicorn on 127.0.0.1 (its
lifespan on: the runs live in its task group) and talks to it over HTTP, with httpx or
:class:`~agui_meta.HttpAgent`. The agents are real too: a scripted generator that tests can
hold mid-run (``tests/gateway_agents.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from agui_meta.gateway import Gateway, SQLiteCatalog
from agui_meta.threads import MemoryThreadStore, SQLiteThreadStore
from tests.gateway_agents import (
    areached,
    endless,
    failing,
    frames,
    reached,
    release,
    run_body,
    scripted,
    types,
    wait_until,
)
from tests.servers import serve

pytestmark = pytest.mark.anyio

SCRIPT = [
    "RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS",
    "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STATE_SNAPSHOT", "STEP_FINISHED",
    "RUN_FINISHED",
]  # fmt: skip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def served(gateway: Gateway) -> Any:
    return serve(gateway, lifespan="on")


@pytest.fixture
def gateway() -> Gateway:
    return Gateway({"scripted": scripted, "endless": endless, "failing": failing}, linger=60)


@pytest.fixture
def url(gateway: Gateway) -> Iterator[str]:
    with served(gateway) as base:
        yield base


def post(url: str, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(url + path, json=body, headers=headers, timeout=30)


async def active(client: httpx.AsyncClient, url: str, run_id: str) -> bool:
    """Whether thread ``t``'s active run is ``run_id`` (a poll: waits a little when not)."""
    found = (await client.get(url + "/threads/t")).json().get("activeRunId") == run_id
    if not found:
        await anyio.sleep(0.005)
    return found


def thread(url: str, thread_id: str, **headers: str) -> httpx.Response:
    return httpx.get(f"{url}/threads/{thread_id}", headers=headers, timeout=30)


# ---------------------------------------------------------------------------------------------
# Runs


def test_a_run_streams_with_ids_and_saves_the_thread(url: str) -> None:
    answer = post(url, "/agents/scripted/run", run_body("t", "r1", [USER]))
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    got = frames(answer.content)
    assert types(e for _, e in got) == SCRIPT
    ids = [i for i, _ in got]
    key = ids[0].split(":")[0]  # type: ignore[union-attr]
    assert ids == [f"{key}:{n}" for n in range(len(SCRIPT))]
    saved = thread(url, "t").json()
    assert saved["version"] == 1 and saved["activeRunId"] is None
    assert [m["id"] for m in saved["messages"]] == ["u1", "r1-m", "r1-r"]
    assert saved["messages"][1]["toolCalls"][0]["function"]["arguments"] == '{"q": "x"}'
    assert saved["state"] == {"turns": 1}
    assert saved["ledger"]["lastRunId"] == "r1" and saved["ledger"]["lastStatus"] == "finished"


USER = {"id": "u1", "role": "user", "content": "hi"}


def test_a_client_sends_only_its_new_messages_and_the_agent_gets_the_whole_thread(url: str) -> None:
    post(url, "/agents/scripted/run", run_body("t", "r1", [USER]))
    second = {"id": "u2", "role": "user", "content": "more"}
    answer = post(url, "/agents/scripted/run", run_body("t", "r2", [second]))
    text = [e for _, e in frames(answer.content) if e["type"] == "TEXT_MESSAGE_CONTENT"]
    # The agent saw the whole thread: u1, r1-m, r1-r, u2 (and the state of run 1).
    assert text[1]["delta"] == "lo: 4 messages, last 'more'"
    saved = thread(url, "t").json()
    assert [m["id"] for m in saved["messages"]] == ["u1", "r1-m", "r1-r", "u2", "r2-m", "r2-r"]
    assert saved["state"] == {"turns": 2} and saved["version"] == 2


async def test_http_agent_continues_a_gateway_thread_with_the_full_transcript(url: str) -> None:
    agent = agui_meta.HttpAgent(url + "/agents/scripted/run", thread_id="t", messages=[USER])
    await agent.run_agent(run_id="r1")
    agent.add_message({"id": "u2", "role": "user", "content": "again"})
    await agent.run_agent(run_id="r2")  # sends the whole transcript: it matches the thread
    saved = thread(url, "t").json()
    assert saved["messages"] == agent.messages_wire()
    assert saved["state"] == agent.state == {"turns": 2}


def test_a_transcript_that_rewrites_the_thread_is_refused(url: str) -> None:
    post(url, "/agents/scripted/run", run_body("t", "r1", [USER]))
    changed = {**USER, "content": "something else"}
    answer = post(url, "/agents/scripted/run", run_body("t", "r2", [changed]))
    assert answer.status_code == 409
    assert "messages[0] (id 'u1') differs" in answer.json()["error"]
    assert thread(url, "t").json()["version"] == 1  # nothing ran


def test_bad_bodies_are_400_with_the_reason(url: str) -> None:
    answer = httpx.post(url + "/agents/scripted/run", content=b"{nope", timeout=30)
    assert answer.status_code == 400 and "not JSON" in answer.json()["error"]
    answer = post(url, "/agents/scripted/run", {"threadId": "t", "runId": 3, "messages": []})
    assert answer.status_code == 400 and "RunAgentInput" in answer.json()["error"]
    assert post(url, "/agents/nobody/run", run_body("t", "r")).status_code == 404


def test_the_same_run_posted_again_joins_it(url: str) -> None:
    async def main() -> tuple[bytes, bytes]:
        async with httpx.AsyncClient(timeout=30) as client:
            body = run_body("t", "r1", [USER], hold="join")
            first_body = b""

            async def first() -> None:
                nonlocal first_body
                answer = await client.post(url + "/agents/scripted/run", json=body)
                first_body = answer.content

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await areached("join")
                second = client.post(url + "/agents/scripted/run", json=body)
                release("join")
                again = await second
        return first_body, again.content

    one, two = anyio.run(main)
    assert frames(one) == frames(two)  # the same events, with the same ids
    assert types(e for _, e in frames(one)) == SCRIPT
    assert thread(url, "t").json()["ledger"]["runs"] == 1  # one run, not two


def test_a_disconnect_does_not_cancel_the_run_and_last_event_id_resumes_it(url: str) -> None:
    received = []
    with httpx.stream(
        "POST", url + "/agents/scripted/run", json=run_body("t", "r1", [USER], hold="drop"),
        timeout=30,
    ) as answer:  # fmt: skip
        for chunk in answer.iter_bytes():
            received.append(chunk)
            if frames(b"".join(received)) and len(frames(b"".join(received))) >= 4:
                break  # leave in the middle of the text message
    reached("drop")
    release("drop")  # the run goes on without a reader
    before = frames(b"".join(received))
    last_id = before[-1][0]
    assert last_id is not None
    wait_until(lambda: thread(url, "t").json()["version"] == 1, "the run to end and be saved")
    rest = httpx.post(
        url + "/agents/scripted/run",
        json=run_body("t", "r1", [USER]),
        headers={"Last-Event-ID": last_id},
        timeout=30,
    )
    assert rest.status_code == 200 and rest.headers["agui-meta-resumed"] == last_id
    after = frames(rest.content)
    assert types(e for _, e in before + after) == SCRIPT
    gone = post(url, "/agents/scripted/run", run_body("t", "r1"), **{"Last-Event-ID": "x:1"})
    assert gone.status_code == 410


async def test_http_agent_reconnects_through_the_gateway(url: str) -> None:
    agent = agui_meta.HttpAgent(
        url + "/agents/scripted/run", thread_id="t", messages=[USER], reconnect=2
    )
    result = await agent.run_agent(run_id="r1")
    assert [m["id"] for m in result.new_messages] == ["r1-m", "r1-r"]


# ---------------------------------------------------------------------------------------------
# Stop, busy threads, capacity


def test_stop_cancels_the_agent_and_the_run_ends_cancelled(url: str) -> None:
    async def main() -> tuple[bytes, httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            streamed = b""

            async def run() -> None:
                nonlocal streamed
                answer = await client.post(
                    url + "/agents/endless/run", json=run_body("t", "r1", [USER])
                )
                streamed = answer.content

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                while not await active(client, url, "r1"):
                    pass
                stopped = await client.post(url + "/agents/endless/stop", json={"threadId": "t"})
        return streamed, stopped

    streamed, stopped = anyio.run(main)
    assert stopped.status_code == 200
    assert stopped.json() == {"threadId": "t", "runId": "r1", "ended": True}
    events = [e for _, e in frames(streamed)]
    assert types(events)[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert events[-1]["outcome"] == {"type": "cancelled"}
    saved = thread(url, "t").json()
    assert saved["activeRunId"] is None and saved["messages"][-1]["content"] == "..."
    assert saved["ledger"]["lastStatus"] == "finished"
    nothing = post(url, "/agents/endless/stop", {"threadId": "t"})
    assert nothing.status_code == 404 and "no run is active" in nothing.json()["error"]


def test_a_second_run_on_a_busy_thread_is_refused_naming_the_active_run(url: str) -> None:
    def busy() -> None:
        reached("busy")
        answer = post(url, "/agents/scripted/run", run_body("t", "r2"))
        assert answer.status_code == 409
        assert "'r1'" in answer.json()["error"]
        deleted = httpx.delete(url + "/threads/t", timeout=30)
        assert deleted.status_code == 409
        release("busy")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, busy)
            async with httpx.AsyncClient(timeout=30) as client:
                await client.post(
                    url + "/agents/scripted/run", json=run_body("t", "r1", [USER], hold="busy")
                )

    anyio.run(main)
    assert thread(url, "t").json()["ledger"]["runs"] == 1


def test_a_superseding_gateway_stops_the_active_run_first() -> None:
    gateway = Gateway({"endless": endless, "scripted": scripted}, on_busy="supersede")
    with served(gateway) as url:

        async def main() -> bytes:
            async with httpx.AsyncClient(timeout=30) as client:
                first = b""

                async def run() -> None:
                    nonlocal first
                    answer = await client.post(
                        url + "/agents/endless/run", json=run_body("t", "r1", [USER])
                    )
                    first = answer.content

                async with anyio.create_task_group() as tg:
                    tg.start_soon(run)
                    while not await active(client, url, "r1"):
                        pass
                    second = await client.post(
                        url + "/agents/scripted/run", json=run_body("t", "r2")
                    )
                    assert types(e for _, e in frames(second.content)) == SCRIPT
            return first

        first = anyio.run(main)
        assert [e for _, e in frames(first)][-1]["outcome"] == {"type": "cancelled"}
        ledger = thread(url, "t").json()["ledger"]
        assert ledger["runs"] == 2 and ledger["lastRunId"] == "r2"


def test_past_max_runs_the_gateway_answers_503_with_retry_after() -> None:
    gateway = Gateway({"scripted": scripted}, max_runs=1, retry_after=7)

    def full(url: str) -> None:
        reached("full")
        answer = post(url, "/agents/scripted/run", run_body("other", "r"))
        assert answer.status_code == 503 and answer.headers["retry-after"] == "7"
        assert thread(url, "other").status_code == 404  # a refused run claims no thread
        release("full")

    with served(gateway) as url:

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, full, url)
                async with httpx.AsyncClient(timeout=30) as client:
                    await client.post(
                        url + "/agents/scripted/run", json=run_body("t", "r1", hold="full")
                    )

        anyio.run(main)
        assert post(url, "/agents/scripted/run", run_body("other", "r")).status_code == 200


@pytest.mark.parametrize(
    ("options", "code"),
    [({"linger": 0.01}, "abandoned"), ({"max_run_time": 0.05}, "run_timeout")],
)
def test_a_run_nobody_reads_or_that_runs_too_long_is_cancelled(
    options: dict[str, float], code: str
) -> None:
    gateway = Gateway({"endless": endless}, **options)  # type: ignore[arg-type]
    with served(gateway) as url:
        with httpx.stream(
            "POST", url + "/agents/endless/run", json=run_body("t", "r1"), timeout=30
        ) as answer:
            for _ in answer.iter_bytes():
                break  # the first events came: leave
        wait_until(lambda: thread(url, "t").json()["version"] == 1, "the run to be cancelled")
        ledger = thread(url, "t").json()["ledger"]
        assert ledger["lastStatus"] == "error"
        kept = post(url, "/agents/endless/run", run_body("t", "r1"))  # joined: it is kept
        assert [e for _, e in frames(kept.content)][-1]["code"] == code


def test_an_agent_that_fails_ends_its_run_with_run_error(url: str) -> None:
    answer = post(url, "/agents/failing/run", run_body("t", "r1"))
    last = [e for _, e in frames(answer.content)][-1]
    assert last["type"] == "RUN_ERROR" and last["code"] == "agent_error"
    assert "the agent failed: RuntimeError" in last["message"]
    assert thread(url, "t").json()["ledger"]["lastStatus"] == "error"


# ---------------------------------------------------------------------------------------------
# Threads and scopes


def test_threads_are_listed_read_and_deleted(url: str) -> None:
    post(url, "/agents/scripted/run", run_body("a", "r1", [USER]))
    post(url, "/agents/scripted/run", run_body("b", "r1", [USER]))
    listed = httpx.get(url + "/threads", timeout=30).json()["threads"]
    assert listed == [
        {"threadId": "a", "activeRunId": None},
        {"threadId": "b", "activeRunId": None},
    ]
    assert httpx.delete(url + "/threads/a", timeout=30).status_code == 204
    assert thread(url, "a").status_code == 404
    assert [t["threadId"] for t in httpx.get(url + "/threads").json()["threads"]] == ["b"]
    again = post(url, "/agents/scripted/run", run_body("a", "r1", [USER]))  # a new thread
    assert again.status_code == 200 and thread(url, "a").json()["version"] == 1


def test_another_scopes_thread_is_404_on_every_route() -> None:
    def by_header(request: Any) -> str:
        return request.headers.get("x-tenant", "")

    gateway = Gateway({"scripted": scripted}, scope=by_header)
    with served(gateway) as url:
        alice = {"x-tenant": "alice"}
        assert post(url, "/agents/scripted/run", run_body("t", "r1", [USER]), **alice).is_success
        bob = {"x-tenant": "bob"}
        assert thread(url, "t", **bob).status_code == 404
        assert post(url, "/agents/scripted/run", run_body("t", "r2"), **bob).status_code == 404
        assert post(url, "/agents/scripted/run", run_body("t", "r1"), **bob).status_code == 404
        assert post(url, "/agents/scripted/connect", {"threadId": "t"}, **bob).status_code == 404
        assert post(url, "/agents/scripted/stop", {"threadId": "t"}, **bob).status_code == 404
        assert httpx.delete(url + "/threads/t", headers=bob).status_code == 404
        assert httpx.get(url + "/threads", headers=bob).json() == {"threads": []}
        assert [
            t["threadId"] for t in httpx.get(url + "/threads", headers=alice).json()["threads"]
        ] == ["t"]
        assert thread(url, "t", **alice).json()["version"] == 1


# ---------------------------------------------------------------------------------------------
# Durability


def test_threads_survive_a_restart_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    for run_id in ("r1", "r2"):
        with (
            SQLiteThreadStore(path) as threads,
            SQLiteCatalog(path) as catalog,
            served(Gateway({"scripted": scripted}, threads=threads, catalog=catalog)) as url,
        ):
            if run_id == "r1":
                post(url, "/agents/scripted/run", run_body("t", run_id, [USER]))
                continue
            saved = thread(url, "t").json()  # another gateway, the same file
            assert saved["version"] == 1 and saved["messages"][0]["id"] == "u1"
            second = post(url, "/agents/scripted/run", run_body("t", run_id))
            assert "lo: 3 messages" in second.text  # u1, r1-m, r1-r: the stored thread


def test_a_run_in_flight_at_a_crash_is_recorded_as_ended_with_an_error(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"

    async def crashed() -> None:  # what a killed gateway leaves: a journal entry, no save
        with SQLiteCatalog(path) as catalog:
            assert await catalog.claim("", "t")
            await catalog.run_started("t", "r1")

    anyio.run(crashed)
    with SQLiteThreadStore(path) as threads, SQLiteCatalog(path) as catalog:
        with served(Gateway({"scripted": scripted}, threads=threads, catalog=catalog)) as url:
            ledger = thread(url, "t").json()["ledger"]
            assert ledger["lastRunId"] == "r1" and ledger["lastStatus"] == "error"

        async def journal() -> list[tuple[str, str]]:
            return await catalog.in_flight()

        assert anyio.run(journal) == []


def test_a_run_in_flight_at_shutdown_ends_with_an_error_and_is_saved() -> None:
    threads = MemoryThreadStore()
    gateway = Gateway({"endless": endless}, threads=threads)
    with (
        served(gateway) as url,
        httpx.stream(
            "POST", url + "/agents/endless/run", json=run_body("t", "r1"), timeout=30
        ) as answer,
    ):
        for _ in answer.iter_bytes():
            break

    async def load() -> Any:
        return await threads.load("t")

    saved = anyio.run(load)
    assert saved.ledger.last_status == "error" and saved.messages[-1]["content"] == "..."


def test_the_gateway_needs_its_lifespan() -> None:
    gateway = Gateway({"scripted": scripted})
    with serve(gateway, lifespan="off") as url:
        answer = post(url, "/agents/scripted/run", run_body("t", "r1"))
        assert answer.status_code == 503 and "lifespan" in answer.json()["error"]


def test_run_logs_are_bounded_and_a_reader_too_far_behind_is_told() -> None:
    gateway = Gateway({"scripted": scripted}, max_events=4, max_kept=2)
    with served(gateway) as url:
        post(url, "/agents/scripted/run", run_body("t", "r1", [USER]))
        late = post(url, "/agents/scripted/run", run_body("t", "r1"))  # joins from the start
        last = [e for _, e in frames(late.content)][-1]
        assert last["type"] == "RUN_ERROR" and last["code"] == "stream_lost"
        assert "the run log keeps the last 4 events" in last["message"]
        for n in range(2, 6):
            post(url, "/agents/scripted/run", run_body("t", f"r{n}"))
        assert len(gateway.registry._kept) == 2  # the ended runs kept for late clients
        assert ("t", "r1") not in gateway.registry._by_ids
        assert ("t", "r5") in gateway.registry._by_ids


def test_hostile_bodies_get_a_clear_400_or_413() -> None:
    gateway = Gateway({"scripted": scripted}, max_body=1000)
    with served(gateway) as url:
        cases = [
            ("/agents/scripted/stop", {"threadId": 5}, 400, "threadId"),
            ("/agents/scripted/stop", {"threadId": "t", "runId": ["x"]}, 400, "runId"),
            ("/agents/scripted/connect", {"threadId": "t", "follow": "yes"}, 400, "follow"),
            ("/agents/scripted/connect", {"threadId": ""}, 400, "threadId"),
            ("/agents/scripted/run", {"threadId": "t", "runId": "r", "messages": [{"id": 1}]},
             400, "$.messages[0]"),
            ("/agents/scripted/run", {"threadId": "t", "runId": "r", "messages": [],
                                      "padding": "x" * 2000}, 413, "larger than 1000 bytes"),
        ]  # fmt: skip
        for path, body, status, words in cases:
            answer = post(url, path, body)
            assert answer.status_code == status, (path, body, answer.text)
            assert words in answer.json()["error"], answer.text
        array = httpx.post(url + "/agents/scripted/stop", json=[1], timeout=30)
        assert array.status_code == 400 and "not an object" in array.json()["error"]
