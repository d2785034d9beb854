"""Events per second through Redis: 1 and 2 worker processes against one process; ingest batching.

    .venv/bin/python -m benchmarks.redis_workers [--threads N] [--copies K]

Starts its own redis-server (127.0.0.1, a free port, AOF on with ``appendfsync everysec`` or
``--fsync always``, in a temporary directory), builds a workload of the three recorded streams
over ``--threads`` threads (each stream repeated ``--copies`` times as successive runs), and
measures, side by side in one run:

- ``streaming pipeline``: each thread's frames through ``wrap(...).drain()`` with the stages a
  worker runs (keep-going, unfinished runs reported), no outputs, no snapshots: the cost of
  the events themselves, which the issue's targets compare with;
- ``one process``: :func:`agui_meta.redis.run_local` over the same envelopes (no Redis);
- ``ingest, batch B``: :func:`agui_meta.redis.publish` of envelopes of at most B events;
- ``1 worker`` / ``2 workers``: ``agui-meta worker`` processes, from their start until every
  entry is committed (process start-up included; the figure is events over that time); their
  CPU per event after the first commit (``/proc/PID/schedstat``, Linux, read with the event
  counter when it first moves and at the end: start-up, imports and what a first batch pays
  once left out) and over the whole of their ``Worker.run`` (their ``--stats``); and the
  bytes the server read meanwhile per event (``INFO stats``: mostly the commits, whose thread
  snapshots grow with each thread's length: compare ``--threads 320 --copies 10`` with
  ``--threads 32 --copies 100``, about as many events in runs of the same streams).

Needs redis-server and the redis extra.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import redis.asyncio

import agui_meta
from agui_meta.redis import Envelope, Keys, envelopes, publish, read_frames, run_local

STREAMS = Path(__file__).parent.parent / "examples" / "streams"
NAMES = ["travel.sse", "support.jsonl", "broken.jsonl"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(directory: Path, fsync: str) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = _port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(directory),
            "--appendonly",
            "yes",
            "--appendfsync",
            fsync,
            "--save",
            "",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.02)
    return process, f"redis://127.0.0.1:{port}/0"


def workload(threads: int, copies: int, batch: int) -> list[Envelope]:
    frames = {name: read_frames(str(STREAMS / name)) for name in NAMES}
    out: list[Envelope] = []
    for t in range(threads):
        stream = frames[NAMES[t % len(NAMES)]] * copies
        out += envelopes(stream, thread=f"thread-{t}", source=f"s-{t}", batch=batch)
    return out


def thread_streams(threads: int, copies: int) -> list[bytes]:
    """Each thread's frames as one JSON-lines stream: what the workload's envelopes carry."""
    frames = {name: read_frames(str(STREAMS / name)) for name in NAMES}
    return [
        b"".join(f + b"\n" for f in frames[NAMES[t % len(NAMES)]] * copies) for t in range(threads)
    ]


async def stream_all(streams: list[bytes]) -> None:
    """The streaming pipeline over every thread: ``wrap(...).drain()``, one stream a thread."""
    for data in streams:
        stages = agui_meta.DefaultStages(verify=agui_meta.Verify(report_unfinished=True))
        async with agui_meta.wrap([data], *stages, mode="keep_going", on_report=_ignore) as stream:
            await stream.drain()


def _ignore(report: object) -> None:
    pass


def events(order: list[Envelope]) -> int:
    return sum(len(e.frames) for e in order)


async def _flush(url: str) -> None:
    client = redis.asyncio.Redis.from_url(url)
    await client.flushall()
    await client.aclose()


async def _ingest(url: str, order: list[Envelope], ns: str, pipeline: int) -> float:
    client = redis.asyncio.Redis.from_url(url)
    start = time.perf_counter()
    await publish(client, order, namespace=ns, shards=16, pipeline=pipeline)
    elapsed = time.perf_counter() - start
    await client.aclose()
    return elapsed


def _spawn(url: str, ns: str, n: int) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agui_meta",
                "worker",
                "--redis",
                url,
                "--namespace",
                ns,
                "--lease",
                "5",
                "--name",
                f"bench-{i}",
                "--stats",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for i in range(n)
    ]


async def _received(client: redis.asyncio.Redis) -> int:
    """The bytes the server has read from its clients so far (``INFO stats``)."""
    return int((await client.info("stats"))["total_net_input_bytes"])


def _cpu_of(pid: int) -> float:
    """The CPU seconds a (single-threaded) process has run so far: ``/proc/PID/schedstat``'s
    nanoseconds (Linux)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


async def _workers(
    url: str, ns: str, n: int, total_entries: int
) -> tuple[float, float, float, int]:
    """Wall time until every entry is committed (process start-up included); the workers' CPU
    time per event after their first commit (start-up, imports and what a first batch pays
    once left out: the CPU and the event counter read when the first events are counted and
    at the end); their CPU time while their ``Worker.run`` ran (their ``--stats``), per event;
    the bytes the server read meanwhile (the workers' commits, reads and lease steps)."""
    client = redis.asyncio.Redis.from_url(url)
    usage = Keys(ns).usage
    received = await _received(client)
    start = time.perf_counter()
    procs = _spawn(url, ns, n)
    first: tuple[float, int] | None = None
    try:
        while True:
            entries, events = await client.hmget(usage, ["entries", "events"])
            cpu = sum(_cpu_of(p.pid) for p in procs)
            done = int(events or 0)
            if first is None and done:
                first = cpu, done
            if int(entries or 0) >= total_entries:
                elapsed = time.perf_counter() - start
                sent = await _received(client) - received
                assert first is not None
                steady = (cpu - first[0]) / max(1, done - first[1])
                return elapsed, steady, _stop(procs) / done, sent
            await asyncio.sleep(0.005)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        await client.aclose()


def _stop(procs: list[subprocess.Popen[bytes]]) -> float:
    """Interrupt the workers (Ctrl-C: they release their leases and print their counters) and
    add up the CPU time of their runs."""
    for p in procs:
        p.send_signal(signal.SIGINT)
    cpu = 0.0
    for p in procs:
        out, _ = p.communicate(timeout=60)
        cpu += msgspec.json.decode(out.splitlines()[-1])["cpu"]
    return cpu


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server, url = start_redis(Path(tmp), args.fsync)
        try:
            rows: list[tuple[str, int, float]] = []
            order = workload(args.threads, args.copies, 64)
            n = events(order)
            streams = thread_streams(args.threads, args.copies)
            walls, cpus, stream_cpus = [], [], []
            for _ in range(3):  # the best of three, interleaved
                start, cpu = time.perf_counter(), time.process_time()
                run_local(order)
                walls.append(time.perf_counter() - start)
                cpus.append(time.process_time() - cpu)
                cpu = time.process_time()
                await stream_all(streams)
                stream_cpus.append(time.process_time() - cpu)
            rows.append(("one process (run_local, no Redis)", n, min(walls)))
            sent_rows: list[tuple[str, int]] = []
            cpu_rows = [
                ("one process (run_local, no Redis)", min(cpus)),
                ("streaming pipeline (wrap(...).drain())", min(stream_cpus)),
            ]
            for batch in (1, 16, 64, 256):
                cut = workload(args.threads, args.copies, batch)
                await _flush(url)
                elapsed = await _ingest(url, cut, "bench", 64)
                rows.append((f"ingest, batch {batch} ({len(cut)} envelopes)", n, elapsed))
            for workers in (1, 2):
                await _flush(url)
                await _ingest(url, order, "bench", 64)
                elapsed, steady, whole, sent = await _workers(url, "bench", workers, len(order))
                name = f"{workers} worker process{'es' if workers > 1 else ''}"
                rows.append((name, n, elapsed))
                cpu_rows.append((f"{name}, after the first commit", steady * n))
                cpu_rows.append((f"{name}, all of Worker.run", whole * n))
                sent_rows.append((name, sent))
        finally:
            server.kill()
            server.wait()
    base = rows[0][1] / rows[0][2]
    print(f"{n} events, {args.threads} threads, appendfsync {args.fsync}")
    print(f"{'':48} {'events/s':>10} {'vs one process':>15}")
    for name, count, elapsed in rows:
        rate = count / elapsed
        print(f"{name:48} {rate:>10,.0f} {rate / base:>14.2f}x")
    local = cpu_rows[0][1] / n
    streaming = cpu_rows[1][1] / n
    print("\nCPU per event")
    print(f"{'':48} {'us/event':>10} {'vs one process':>15} {'vs streaming':>13}")
    for name, spent in cpu_rows:
        print(
            f"{name:48} {spent / n * 1e6:>10.2f} {spent / n / local:>14.2f}x "
            f"{spent / n / streaming:>12.2f}x"
        )
    ingested = sum(len(e.encode()) for e in order) / n
    print(
        "\nBytes the server read from the workers per event (commits: outputs and the threads'"
        f" snapshots; an envelope carries {ingested:,.0f} bytes an event)"
    )
    for name, sent in sent_rows:
        print(f"{name:48} {sent / n:>10,.0f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--fsync", choices=["everysec", "always"], default="everysec")
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
