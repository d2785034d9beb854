"""A thousand concurrent runs whose clients leave and come back, measured in a fresh interpreter.

    python -m tests.gateway_thousand RUNS [--redis URL]

Serves the gateway with uvicorn on 127.0.0.1 in this interpreter's event loop (with ``--redis``,
two replicas of :func:`agui_meta.gateway.redis_gateway` on that Redis, each with its own client:
every client starts its run on the first and comes back on the second). Each of RUNS clients,
all at once, posts a run of :func:`chatty`, leaves after its first few events, stays away for
a moment (the run goes on without it, and may end meanwhile), and comes back with
``Last-Event-ID``; then every thread is deleted. Prints one JSON object: the runs whose
returning client did not get its whole run, and, at the baseline (after a warm-up round, the
same way), at the end and at the peak, the process's resident memory, its open file descriptors
and the event loop's tasks (with Redis, once the pools' idle connections are closed: a pool
keeps what it opened; ``pooled`` says how many). :mod:`tests.test_gateway_load` runs it and holds it to its bounds:
a long test session's heap would measure the session, not the gateway.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx

from agui_meta.events import RunAgentInput
from agui_meta.gateway import Gateway, redis_gateway
from tests.gateway_agents import frames

DELTAS = 24
EVENTS = DELTAS + 4
LEAVE = 3  # frames a client reads before it leaves
WARM_UP = 20


async def chatty(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    """A text message of DELTAS deltas, a short pause before each."""
    tid, rid, m = input.thread_id, input.run_id, f"{input.run_id}-m"
    yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
    yield {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"}
    for n in range(DELTAS):
        await anyio.sleep(0.005)
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": f"{tid}:{n} "}
    yield {"type": "TEXT_MESSAGE_END", "messageId": m}
    yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid}


def whole(thread_id: str, got: list[tuple[str | None, dict[str, Any]]]) -> bool:
    """Whether ``got`` is the whole run of ``chatty`` on ``thread_id``, each event once."""
    text = "".join(e.get("delta", "") for _, e in got)
    return (
        len(got) == EVENTS
        and len({i for i, _ in got}) == EVENTS
        and got[0][1]["type"] == "RUN_STARTED"
        and got[-1][1]["type"] == "RUN_FINISHED"
        and text == "".join(f"{thread_id}:{n} " for n in range(DELTAS))
    )


def rss() -> tuple[int, int]:
    """The resident set and its peak (since the last reset), in bytes."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # "5": reset the peak resident set size
        f.write("5")


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def tasks() -> int:
    return len(anyio.get_running_tasks())


async def round_of(runs: int, prefix: str, first: str, back: str) -> list[str]:
    """``runs`` clients at once, leaving and coming back; the threads whose client did not get
    its whole run. Every thread is deleted afterwards."""
    failed: list[str] = []

    async def client(http: httpx.AsyncClient, n: int) -> None:
        thread = f"{prefix}{n}"
        body = {"threadId": thread, "runId": "r", "messages": [], "forwardedProps": {}}
        received = b""
        async with http.stream("POST", f"{first}/agents/chatty/run", json=body) as answer:
            if answer.status_code != 200:
                failed.append(f"{thread}: {answer.status_code} {(await answer.aread())!r}")
                return
            async for chunk in answer.aiter_bytes():
                received += chunk
                if len(frames(received)) >= LEAVE:
                    break  # leave in the middle of the run: the connection is closed
        seen = frames(received)[:LEAVE]
        if not seen:
            failed.append(f"{thread}: no event before the stream ended")
            return
        await anyio.sleep((n % 10) * 0.02)  # away for a moment: the run goes on
        headers = {"Last-Event-ID": seen[-1][0] or ""}
        rest = await http.post(f"{back}/agents/chatty/run", json=body, headers=headers)
        if rest.status_code != 200 or not whole(thread, seen + frames(rest.content)):
            failed.append(thread)

    limits = httpx.Limits(max_connections=2 * runs, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        async with anyio.create_task_group() as clients:
            for n in range(runs):
                clients.start_soon(client, http, n)
        for n in range(runs):
            gone = await http.delete(f"{back}/threads/{prefix}{n}")
            if gone.status_code != 204 and f"{prefix}{n}" not in failed:
                failed.append(f"{prefix}{n}: not deleted ({gone.status_code})")
    return failed


async def settled(baseline: dict[str, int]) -> None:
    """Wait (30 s at most) until the tasks and descriptors are down to ``baseline``."""
    with anyio.move_on_after(30):
        while tasks() > baseline["tasks"] or fds() > baseline["fds"]:  # noqa: ASYNC110
            await anyio.sleep(0.05)  # connections closing


def measure() -> dict[str, int]:
    """The live objects, descriptors and tasks, and the resident set before (``untrimmed``) and
    after the C allocator returned its free memory (glibc's ``malloc_trim``, where it is)."""
    gc.collect()
    objects, untrimmed = len(gc.get_objects()), rss()[0]
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return {"rss": rss()[0], "untrimmed": untrimmed, "objects": objects, "fds": fds(),
            "tasks": tasks()}  # fmt: skip


async def main(runs: int, redis_url: str | None) -> dict[str, Any]:
    import uvicorn

    async with contextlib.AsyncExitStack() as stack:
        gateways: list[Gateway] = []
        pools: list[Any] = []
        options: dict[str, Any] = {"max_runs": runs + WARM_UP, "linger": 60, "keep": 60}
        if redis_url is None:
            gateways.append(Gateway({"chatty": chatty}, **options))
        else:
            import redis.asyncio

            namespace = f"thousand-{os.getpid()}"
            for _ in range(2):
                # redis-py pools 100 connections by default; a blocked reader holds one
                client = redis.asyncio.Redis.from_url(redis_url, max_connections=4 * runs)
                stack.push_async_callback(client.aclose)
                pools.append(client.connection_pool)
                gateways.append(
                    redis_gateway(client, {"chatty": chatty}, namespace=namespace, **options)
                )
        socks = [socket.socket() for _ in gateways]
        for sock in socks:
            stack.callback(sock.close)  # once the servers have stopped
            sock.bind(("127.0.0.1", 0))
        urls = [f"http://127.0.0.1:{s.getsockname()[1]}" for s in socks]
        servers = []
        serving = await stack.enter_async_context(anyio.create_task_group())
        for gateway, sock in zip(gateways, socks, strict=True):
            config = uvicorn.Config(
                gateway, lifespan="on", log_level="critical", ws="none", backlog=4 * runs
            )
            server = uvicorn.Server(config)
            servers.append(server)
            serving.start_soon(server.serve, [sock])
        with anyio.fail_after(30):
            while not all(s.started for s in servers):  # noqa: ASYNC110 - uvicorn's flag
                await anyio.sleep(0.01)
        first, back = urls[0], urls[-1]
        failed = await round_of(WARM_UP, "warm", first, back)  # imports, caches, pools
        baseline = measure()
        reset_peak()
        failed += await round_of(runs, "t", first, back)
        peak = rss()[1]
        active = sum(len(g.registry) for g in gateways)
        opened = 0
        for pool in pools:  # a pool keeps what it opened: its idle connections are closed
            opened += len(pool._available_connections)
            await pool.disconnect(inuse_connections=False)
        await settled(baseline)
        final = measure()
        for server in servers:
            server.should_exit = True
    return {
        "runs": runs,
        "failed": failed,
        "active": active,
        "pooled": opened,
        "baseline": baseline,
        "final": final,
        "peak_rss": peak,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", type=int)
    parser.add_argument("--redis", metavar="URL")
    args = parser.parse_args()
    print(json.dumps(anyio.run(main, args.runs, args.redis)))
