"""Chaos on a real redis-server: the results always equal one process's, exactly once.

Worker processes (``agui-meta worker``) run while a producer ingests; then, by scenario:
workers are killed with SIGKILL at random points and replaced; a worker is paused with SIGSTOP
for longer than its lease, then resumed; the Redis server itself is killed and restarted from
its append-only file (``appendfsync always``) while everything runs. In every case the final
threads, outputs and usage equal :func:`agui_meta.redis.run_local` over the same envelopes,
with zero duplicated and zero missing output keys. Each scenario is seeded (the seed is in the
test id) and bounded in time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests import needs

needs.module("redis", reason="the redis extra is not installed")
import redis.asyncio
import redis.exceptions

from agui_meta.redis import Envelope, Keys, publish, run_local
from tests.helpers import redis_server
from tests.redis_helpers import assert_same, committed, expected, workload
from tests.redis_server import RedisServer

pytestmark = pytest.mark.anyio

LEASE = "1"
NAMESPACE = "chaos"
SHARDS = 6


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path) as srv:
        yield srv


class Workers:
    """Worker processes started by this test (and only those are signalled)."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url = url
        self.directory = directory
        self.live: list[subprocess.Popen[bytes]] = []
        self.names: dict[str, subprocess.Popen[bytes]] = {}
        self.started = 0

    def start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        log = open(self.directory / f"worker-{self.started}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agui_meta",
                "worker",
                "--redis",
                self.url,
                "--namespace",
                NAMESPACE,
                "--lease",
                LEASE,
                "--batch",
                "3",
                "--shards",
                str(SHARDS),
                "--name",
                f"w{self.started}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.live.append(process)
        self.names[f"w{self.started}"] = process
        return process

    async def registered(self, count: int) -> None:
        """Until ``count`` workers have sent their first heartbeat."""
        client = redis.asyncio.Redis.from_url(self.url)
        try:
            with anyio.fail_after(30):
                while await client.zcard(Keys(NAMESPACE).workers) < count:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
        finally:
            await client.aclose()

    async def busiest(self) -> subprocess.Popen[bytes]:
        """The live worker holding the most shard leases (waiting until one holds any)."""
        client = redis.asyncio.Redis.from_url(self.url)
        keys = Keys(NAMESPACE)
        try:
            with anyio.fail_after(30):
                while True:
                    held: dict[str, int] = {}
                    for n in range(SHARDS):
                        value = await client.get(keys.lease(n))
                        if value is not None:
                            name = value.decode().split(" ", 1)[1]
                            held[name] = held.get(name, 0) + 1
                    live = [
                        (held.get(name, 0), name)
                        for name, p in self.names.items()
                        if p in self.live
                    ]
                    if max(live)[0]:
                        return self.names[max(live)[1]]
                    await anyio.sleep(0.05)
        finally:
            await client.aclose()

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        self.live.remove(process)

    def stop_all(self) -> None:
        for process in list(self.live):
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGKILL)
            process.wait(10)
        self.live.clear()

    def logs(self) -> str:
        return "\n".join(p.read_text()[-1500:] for p in sorted(self.directory.glob("worker-*.log")))


def _schedule(rng: random.Random, sources: list[list[Envelope]]) -> list[Envelope]:
    """A random interleaving of the threads, each thread's envelopes in order."""
    queues: dict[str, list[Envelope]] = {}
    for source in sources:
        queues.setdefault(source[0].thread, []).extend(source)
    out: list[Envelope] = []
    while queues:
        thread = rng.choice(sorted(queues))
        out.append(queues[thread].pop(0))
        if not queues[thread]:
            del queues[thread]
    return out


async def _ingest(url: str, order: list[Envelope], rng: random.Random) -> None:
    """Publish in small pipelines with pauses; after any failure, send the same ones again."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        i = 0
        while i < len(order):
            chunk = order[i : i + rng.randint(1, 6)]
            try:
                await publish(client, chunk, namespace=NAMESPACE, shards=SHARDS, pipeline=3)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
                await anyio.sleep(0.05)
                continue  # the retry is idempotent: what was appended is skipped
            i += len(chunk)
            await anyio.sleep(rng.uniform(0, 0.02))
    finally:
        await client.aclose()


async def _wait_done(url: str, total: int, within: float) -> dict:
    """Until every envelope was counted once and nothing is pending (or the timeout)."""
    client = redis.asyncio.Redis.from_url(url)
    deadline = time.monotonic() + within
    try:
        while True:
            try:
                got = await committed(client, NAMESPACE)
            except (redis.exceptions.ConnectionError, OSError):
                got = None
            if got is not None:
                counted = got["usage"].get("entries", 0)
                assert counted <= total, f"{counted} entries counted, {total} ingested"
                if counted == total and got["pending"] == 0:
                    # Everything is committed: read again, so that no part of what is
                    # returned was read while the last commits were still arriving.
                    return await committed(client, NAMESPACE)
            if time.monotonic() > deadline:
                raise AssertionError(f"not done after {within} s: {got and got['usage']}")
            await anyio.sleep(0.1)
    finally:
        await client.aclose()


@pytest.mark.parametrize("scenario", ["sigkill", "sigstop", "redis-restart"])
@pytest.mark.parametrize("seed", [int(os.environ.get("AGUI_META_CHAOS_SEED", "7"))])
async def test_chaos_results_equal_one_process(
    server: RedisServer, tmp_path: Path, scenario: str, seed: int
) -> None:
    rng = random.Random(f"{scenario}-{seed}")
    sources = workload(8, batch=2)
    order = _schedule(rng, sources)
    want = expected(run_local(order))
    workers = Workers(server.url, tmp_path)
    try:
        for _ in range(2):
            workers.start()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_ingest, server.url, order, rng)
            if scenario == "sigkill":
                for _ in range(4):
                    await anyio.sleep(rng.uniform(0.3, 1.2))
                    workers.kill(await workers.busiest())
                    workers.start()
            elif scenario == "sigstop":
                await anyio.sleep(rng.uniform(0.8, 1.5))
                paused = await workers.busiest()
                paused.send_signal(signal.SIGSTOP)
                await anyio.sleep(float(LEASE) * 2.5)  # well past its lease: others take over
                paused.send_signal(signal.SIGCONT)
            else:
                await workers.registered(2)  # both past their start-up
                await anyio.sleep(rng.uniform(0.2, 0.8))
                server.restart()  # SIGKILL, then start again from the append-only file
        got = await _wait_done(server.url, len(order), within=40)
        (tmp_path / "got.json").write_text(json.dumps(got, indent=1))
        (tmp_path / "want.json").write_text(json.dumps(want, indent=1))
        assert_same(got, want)
        # No worker gave up on the way (a paused one resumes, a restarted server is waited for).
        assert [p.poll() for p in workers.live] == [None] * len(workers.live), workers.logs()
        if scenario != "redis-restart":
            # The chaos took effect: shards changed owner (each lease has its own token).
            client = redis.asyncio.Redis.from_url(server.url)
            keys = Keys(NAMESPACE)
            tokens = [int(await client.get(keys.fence(n)) or 0) for n in range(SHARDS)]
            await client.aclose()
            assert sum(tokens) > SHARDS, tokens
    except BaseException:
        workers.stop_all()
        print(workers.logs())
        raise
    finally:
        workers.stop_all()
