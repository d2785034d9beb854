"""agui-meta's ``HttpAgent`` with a gateway: only new messages, stop, connect and follow."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from agui_meta.gateway import Gateway
from tests.gateway_agents import asking, await_until, endless, scripted
from tests.servers import serve

pytestmark = pytest.mark.anyio

USER = {"id": "u1", "role": "user", "content": "hi"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def gateway() -> Gateway:
    return Gateway({"scripted": scripted, "endless": endless, "asking": asking})


@pytest.fixture
def url(gateway: Gateway) -> Iterator[str]:
    with serve(gateway, lifespan="on") as base:
        yield base


def stored(url: str, thread_id: str) -> dict[str, Any]:
    return httpx.get(f"{url}/threads/{thread_id}", timeout=30).json()  # type: ignore[no-any-return]


async def test_send_messages_new_sends_only_what_the_gateway_does_not_hold(url: str) -> None:
    agent = agui_meta.HttpAgent(
        f"{url}/agents/scripted/run", thread_id="t", messages=[USER], send_messages="new"
    )
    async with agent.run(run_id="r1") as run:
        async for _ in run.batches():
            pass
    assert [m["id"] for m in run.input["messages"]] == ["u1"]  # unknown yet: everything
    agent.add_message({"id": "u2", "role": "user", "content": "more"})
    async with agent.run(run_id="r2") as run:
        async for _ in run.batches():
            pass
    assert [m["id"] for m in run.input["messages"]] == ["u2"]
    assert "lo: 4 messages, last 'more'" in agent.messages_wire()[-2]["content"]
    assert stored(url, "t")["messages"] == agent.messages_wire()


async def test_stop_from_another_client_ends_the_run_cancelled(gateway: Gateway, url: str) -> None:
    running = agui_meta.HttpAgent(f"{url}/agents/endless/run", thread_id="t", messages=[USER])
    stopper = agui_meta.HttpAgent(f"{url}/agents/endless/run", thread_id="t")
    results: list[agui_meta.RunResult] = []

    async def run() -> None:
        results.append(await running.run_agent(run_id="r1"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await await_until(lambda: gateway.registry.active_run("t") is not None, "the run to start")
        answer = await stopper.stop()
    assert answer == {"threadId": "t", "runId": "r1", "ended": True}
    [result] = results
    assert isinstance(result.outcome, agui_meta.RunCancelled)
    assert running.messages_wire() == stored(url, "t")["messages"]
    with pytest.raises(agui_meta.HttpStatusError) as raised:
        await stopper.stop()
    assert raised.value.status == 404


async def test_connect_follow_streams_later_runs_into_the_agent(url: str) -> None:
    writer = agui_meta.HttpAgent(f"{url}/agents/scripted/run", thread_id="t", messages=[USER])
    await writer.run_agent(run_id="r1")
    reader = agui_meta.HttpAgent(f"{url}/agents/scripted/run", thread_id="t")
    runs_seen: list[str] = []
    async with reader.connect(follow=True) as stream:
        async for update in stream:
            event = update.event
            if isinstance(event, agui_meta.events.RunFinishedEvent):
                runs_seen.append(event.run_id)
                if len(runs_seen) == 1:  # the prelude: now two runs by another client
                    for run_id in ("r2", "r3"):
                        writer.add_message({"id": f"u-{run_id}", "role": "user", "content": "x"})
                        await writer.run_agent(run_id=run_id)
                if len(runs_seen) == 3:
                    break
    assert runs_seen[1:] == ["r2", "r3"]
    assert reader.messages_wire() == writer.messages_wire() == stored(url, "t")["messages"]
    assert reader.state == {"turns": 3}


async def test_connect_needs_a_gateway_url() -> None:
    agent = agui_meta.HttpAgent("http://127.0.0.1:9/agent")
    with pytest.raises(agui_meta.UsageError, match="agents/NAME/run"):
        async with agent.connect():
            pass


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_in_process_on_both_backends_run_stop_and_connect() -> None:
    # The gateway's own task group on the test's event loop, called through ASGI (no socket).
    gateway = Gateway({"scripted": scripted, "endless": endless})
    async with gateway.running():
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            url = "http://gw/agents/endless/run"
            running = agui_meta.HttpAgent(url, http_client=http, thread_id="t", messages=[USER])
            results: list[agui_meta.RunResult] = []

            async def run() -> None:
                results.append(await running.run_agent(run_id="r1"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await await_until(lambda: gateway.registry.active_run("t") is not None, "a run")
                stopper = agui_meta.HttpAgent(url, http_client=http, thread_id="t")
                assert (await stopper.stop())["ended"] is True
            assert isinstance(results[0].outcome, agui_meta.RunCancelled)
            fresh = agui_meta.HttpAgent(url, http_client=http, thread_id="t")
            await fresh.connect_agent()
            assert fresh.messages_wire() == running.messages_wire()
            assert len(gateway.registry) == 0


async def test_interrupts_are_the_threads_and_a_connecting_client_must_answer_them(
    url: str,
) -> None:
    asker = agui_meta.HttpAgent(f"{url}/agents/asking/run", thread_id="t", messages=[USER])
    result = await asker.run_agent(run_id="r1")
    assert [i.id for i in result.pending_interrupts] == ["i1"]
    assert stored(url, "t")["interrupts"] == [
        {"id": "i1", "reason": "confirmation", "message": "Go ahead?"}
    ]
    other = agui_meta.HttpAgent(f"{url}/agents/asking/run", thread_id="t", send_messages="new")
    await other.connect_agent()  # the prelude's RUN_FINISHED carries the open interrupt
    assert [i.id for i in other.pending_interrupts] == ["i1"]
    with pytest.raises(agui_meta.UsageError):
        await other.run_agent(run_id="r2")  # the client insists on an answer, before sending
    answer = [{"interruptId": "i1", "status": "resolved", "payload": True}]
    done = await other.run_agent(run_id="r2", resume=answer)
    assert done.new_messages[-1]["content"] == "Done: resolved"
    thread = stored(url, "t")
    assert thread["interrupts"] == [] and thread["messages"] == other.messages_wire()


async def test_the_documented_fastapi_mount_serves_the_gateway_under_its_prefix() -> None:
    from tests.doc_blocks import doc_block

    namespace: dict[str, Any] = {}
    block = doc_block('app.mount("/ai", gateway)')
    exec(compile(block.code, block.path, "exec"), namespace)  # noqa: S102 - the docs' own code
    with serve(namespace["app"], lifespan="on") as base:
        alice = {"x-user": "alice"}
        agent = agui_meta.HttpAgent(
            f"{base}/ai/agents/demo/run", thread_id="t", headers=alice, messages=[USER]
        )
        result = await agent.run_agent(forwarded_props={"delay": 0})
        assert result.new_messages[0]["content"] == "You said: hi"
        async with httpx.AsyncClient(timeout=30) as http:
            mine = (await http.get(f"{base}/ai/threads", headers=alice)).json()
            theirs = (await http.get(f"{base}/ai/threads", headers={"x-user": "bob"})).json()
        assert mine == {"threads": [{"threadId": "t", "activeRunId": None}]}
        assert theirs == {"threads": []}


def hostile_stop_app(body: bytes, status: int = 200) -> Any:
    """A "gateway" whose stop route answers ``body`` with ``status``, streamed in 64 KiB parts."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def stop(request: Request) -> StreamingResponse:
        async def parts() -> Any:
            for start in range(0, len(body), 1 << 16):
                yield body[start : start + (1 << 16)]

        return StreamingResponse(parts(), status_code=status, media_type="application/json")

    return Starlette(routes=[Route("/agents/a/stop", stop, methods=["POST"])])


# Leaving an httpx body early lets httpx's own nested generators be garbage-collected
# unexhausted, which trio reports; httpx issue #3686 (as in test_framing.py).
@pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning")
@pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning")
@pytest.mark.parametrize(
    ("body", "status", "error", "match"),
    [
        (b'{"threadId": "' + b"x" * (8 << 20) + b'"}', 200, agui_meta.DataError, "larger than"),
        (b"[1, 2]", 200, agui_meta.DataError, "not a JSON object"),
        (b"<html>" * 100_000, 502, agui_meta.HttpStatusError, "502"),
    ],
)
async def test_stop_reads_the_answer_in_bounds(
    body: bytes, status: int, error: type[Exception], match: str
) -> None:
    import gc

    with serve(hostile_stop_app(body, status)) as base:
        agent = agui_meta.HttpAgent(base + "/agents/a/run", thread_id="t", max_frame_size=1 << 20)
        with pytest.raises(error, match=match) as caught:
            await agent.stop()
        if isinstance(caught.value, agui_meta.HttpStatusError):
            assert len(caught.value.body) <= 512  # the first bytes of the error only
    gc.collect()  # httpx's generators are finalized here, under this test's filters
