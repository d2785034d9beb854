"""Many runs at once, with clients that leave and come back; nothing is left behind.

The gateway is served by uvicorn in the test's own event loop, so that the loop's tasks can be
counted: after 100 concurrent runs whose clients each leave in the middle of the run and come
back with ``Last-Event-ID`` once it has gone on without them, every client has its whole run,
every thread is saved once, and the tasks, the active runs and the open connections are back
to what they were before. Then, in a fresh interpreter (``tests/gateway_thousand.py``), the
same with a thousand runs, and with two hundred across two replicas on Redis, where memory and
file descriptors are measured too.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agui_meta.gateway import Gateway
from tests import needs
from tests.gateway_agents import frames, release, run_body, scripted, types
from tests.helpers import redis_server
from tests.oracle import REPO_ROOT

pytestmark = pytest.mark.anyio

RUNS = 100
SCRIPT_LENGTH = 14


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_hundred_runs_whose_clients_leave_and_come_back() -> None:
    uvicorn = needs.module("uvicorn")
    gateway = Gateway({"scripted": scripted}, max_runs=RUNS, linger=60)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(gateway, lifespan="on", log_level="critical", ws="none")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as serving:
        serving.start_soon(server.serve, [sock])
        while not server.started:  # noqa: ASYNC110 - uvicorn's flag: nothing to wait on
            await anyio.sleep(0.01)
        baseline = len(anyio.get_running_tasks())
        results: dict[int, list[tuple[str | None, dict[str, Any]]]] = {}

        left = 0

        async def client(http: httpx.AsyncClient, n: int) -> None:
            # One client for all: a leaving client's connection is closed, not pooled.
            nonlocal left
            body = run_body(f"t{n}", "r", [{"id": "u", "role": "user", "content": str(n)}],
                            hold="load")  # fmt: skip
            received = b""
            async with http.stream("POST", url + "/agents/scripted/run", json=body) as answer:
                async for chunk in answer.aiter_bytes():
                    received += chunk
                    if len(frames(received)) >= 3:
                        break  # leave in the middle of the run (it holds at its 4th event)
            first = frames(received)
            left += 1
            if left == RUNS:
                release("load")  # every client has left: the runs go on without them
            while gateway.registry.active_run(f"t{n}") is not None:  # noqa: ASYNC110 - polled
                await anyio.sleep(0.01)
            headers = {"Last-Event-ID": first[-1][0] or ""}
            rest = await http.post(url + "/agents/scripted/run", json=body, headers=headers)
            assert rest.status_code == 200, rest.text
            results[n] = first + frames(rest.content)

        limits = httpx.Limits(max_connections=2 * RUNS)
        async with (
            httpx.AsyncClient(timeout=60, limits=limits) as http,
            anyio.create_task_group() as clients,
        ):
            for n in range(RUNS):
                clients.start_soon(client, http, n)
        assert len(results) == RUNS
        for n, got in results.items():
            assert len(types(e for _, e in got)) == SCRIPT_LENGTH, n
            assert got[-1][1]["type"] == "RUN_FINISHED"
            ids = [i for i, _ in got]
            assert len(set(ids)) == SCRIPT_LENGTH  # every event once
        async with httpx.AsyncClient(timeout=60) as http:
            for n in range(0, RUNS, 10):
                saved = (await http.get(f"{url}/threads/t{n}")).json()
                assert saved["version"] == 1 and saved["ledger"]["runs"] == 1
        assert len(gateway.registry) == 0
        with anyio.fail_after(30):
            while len(anyio.get_running_tasks()) > baseline:  # noqa: ASYNC110 - counted
                await anyio.sleep(0.01)  # connections closing
        server.should_exit = True
    sock.close()


def thousand(runs: int, *redis: str) -> dict[str, Any]:
    """``tests/gateway_thousand.py``'s figures (see there), checked: every returning client got
    its whole run, no run is left active, and the tasks and descriptors are back to the
    baseline (a warm-up round's). Memory: the peak resident set grew by less than 384 KiB per
    run (the clients' side included: they share the process), and what stays resident at the
    end, once the allocator's free memory is returned, by less than 256 KiB per run."""
    needs.module("uvicorn")
    args = [sys.executable, "-m", "tests.gateway_thousand", str(runs), *redis]
    done = subprocess.run(
        args, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    base, final = got["baseline"], got["final"]
    assert got["failed"] == [] and got["active"] == 0
    assert final["tasks"] <= base["tasks"] and final["fds"] <= base["fds"], got
    assert got["peak_rss"] - base["rss"] < runs * 384 * 1024, got
    assert final["rss"] - base["rss"] < runs * 256 * 1024, got
    return got


@pytest.mark.slow
def test_a_thousand_runs_whose_clients_leave_and_come_back() -> None:
    got = thousand(1000)
    # What the gateway held is gone: a leak of one object per run would show a thousand (the
    # few hundred of slack are caches of the interpreter and the libraries, up to +200 seen).
    assert got["final"]["objects"] - got["baseline"]["objects"] < 500, got


@pytest.mark.slow
def test_two_hundred_runs_across_two_replicas_on_redis(tmp_path: Path) -> None:
    # Each client starts its run on one replica and comes back on the other. The Redis pools'
    # connections stay open (and allocated) until closed, so objects are not compared here.
    with redis_server(tmp_path, fsync="no") as server:
        thousand(200, "--redis", server.url)


def test_the_gateway_benchmark_runs() -> None:
    # Speed is never asserted: this only keeps `python -m benchmarks.gateway` working.
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gateway", "--events", "50", "--rounds", "1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| EventStreamResponse |" in done.stdout and "| Gateway (run) |" in done.stdout
    assert "| gateway | connect mid-run, first byte | stop, until ended and saved |" in done.stdout
    assert "| embedded |" in done.stdout
