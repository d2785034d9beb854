"""The embedded gateway: events per second against ``EventStreamResponse`` alone; connect; stop.

    .venv/bin/python -m benchmarks.gateway [--events N] [--rounds R] [--redis URL]

Serves, each with uvicorn on 127.0.0.1 in a process of its own, the same generator agent (N
text deltas, no pauses) twice: through :class:`agui_meta.EventStreamResponse` (the agent in
the request, the default stages) and through :class:`agui_meta.gateway.Gateway` (a detached
run: the default stages, the run log, the thread saved at the end). A client in this process
POSTs a run and reads the raw body with httpx, so the figures are the server's work plus the
HTTP transfer, not a client pipeline. Then, on the gateway:

- time to first byte of ``connect`` to a thread whose run is in progress (its prelude built
  from the run's store);
- time from ``POST …/stop`` to its answer, which comes once the run has ended (the agent
  cancelled, the items closed, ``RUN_FINISHED`` written, the thread saved).

With ``--redis URL`` (a Redis of its own: the benchmark writes under the namespace
``bench-N``), the same on the gateway across replicas (:func:`agui_meta.gateway.redis_gateway`):
one replica (run and read on it), two replicas, two processes (the run posted to A, read
to its end on B; connect on B to a run A executes; stop on B for it), and a front replica
(``execute=False``) with a separate executor process (:func:`agui_meta.gateway.executor`): the
run posted to the front, dispatched through Redis, executed by the executor, read on the front.

Medians over ``--rounds``; the CPU time per event of each process beside the wall time: the
client's (``time.process_time``) and each server's (user + system time from
``/proc/PID/stat``, so Linux only: elsewhere the servers' column says ``nan``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Literal

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import agui_meta
from agui_meta.events import RunAgentInput
from agui_meta.gateway import Gateway, executor, redis_gateway

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@contextlib.contextmanager
def serve(deltas: int, *args: str) -> Iterator[tuple[str, int]]:
    """A server process (``--serve ARGS``, see :func:`server`) whose agent sends ``deltas``
    text deltas: its base URL and process id."""
    command = [sys.executable, "-m", "benchmarks.gateway", f"--events={deltas}", "--serve", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url:
            raise SystemExit(f"the server did not start: {command}")
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu(processes: Sequence[int | str]) -> list[float]:
    """The CPU seconds (user + system) each process has used: a process id (read from
    ``/proc/PID/stat``; NaN where it cannot be read), or the URL of a Redis (its ``INFO cpu``)."""
    found = []
    for process in processes:
        if isinstance(process, str):
            import redis

            with redis.Redis.from_url(process) as client:
                info = client.info("cpu")
            found.append(float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))
            continue
        try:
            with open(f"/proc/{process}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            found.append((int(fields[11]) + int(fields[12])) / TICK)  # utime, stime
        except OSError:
            found.append(float("nan"))
    return found


def server(kind: str, events: int, redis_url: str | None, namespace: str | None) -> None:
    """Serve ``kind`` (``direct``, ``gateway``, ``redis``, ``front``: a replica that executes
    nothing) on a free port of 127.0.0.1 until terminated; its base URL is the first line
    written. ``executor``: execute the runs dispatched in ``namespace`` (its first line says
    it has started)."""
    import uvicorn

    agent = make_agent(events - 4)
    app: Any
    if kind == "direct":
        app = direct_app(agent)
    elif kind == "gateway":
        app = Gateway({"a": agent}, max_events=events + 10)
    elif kind == "executor":
        anyio.run(execute, agent, events, redis_url, namespace, backend="asyncio")
        return
    else:
        import redis.asyncio

        assert redis_url and namespace
        client = redis.asyncio.Redis.from_url(redis_url, max_connections=1000)
        app = redis_gateway(
            client,
            {"a": agent},
            namespace=namespace,
            max_events=events + 10,
            execute=kind != "front",
        )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)  # a client may connect before the server has started: it waits
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    lifespan: Literal["on", "off"] = "off" if kind == "direct" else "on"
    config = uvicorn.Config(app, lifespan=lifespan, log_level="critical", ws="none")
    uvicorn.Server(config).run(sockets=[sock])


async def execute(agent: Any, events: int, redis_url: str | None, namespace: str | None) -> None:
    """An executor process (:func:`agui_meta.gateway.executor`) until terminated."""
    import redis.asyncio

    assert redis_url and namespace
    client = redis.asyncio.Redis.from_url(redis_url, max_connections=1000)
    async with executor(client, {"a": agent}, namespace=namespace, max_events=events + 10):
        print("executor", flush=True)
        await anyio.sleep_forever()


def make_agent(deltas: int) -> Any:
    async def agent(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
        tid, rid, m = input.thread_id, input.run_id, f"{input.run_id}-m"
        yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
        yield {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"}
        props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
        for n in range(deltas):
            yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": f"w{n} "}
            if props.get("hold") and n == 0:
                await anyio.sleep_forever()  # until stopped
        yield {"type": "TEXT_MESSAGE_END", "messageId": m}
        yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid}

    return agent


def direct_app(agent: Any) -> Starlette:
    async def endpoint(request: Request) -> Response:
        probe = {"type": "RUN_STARTED", "threadId": "-", "runId": "-"}
        event = agui_meta.EventDecoder().decode({**probe, "input": await request.json()})
        assert isinstance(event, agui_meta.events.RunStartedEvent)
        assert isinstance(event.input, RunAgentInput)
        return agui_meta.EventStreamResponse(agent(event.input), *agui_meta.DefaultStages())

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


def body(thread_id: str, run_id: str, **props: Any) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "messages": [], "forwardedProps": props}


Row = tuple[
    str, float, float, list[float]
]  # name, wall, client CPU, each server's CPU (and Redis's)


def timed_runs(name: str, url: str, pids: Sequence[int | str], rounds: int) -> Row:
    """Median wall and CPU seconds (the client's, each server's) of one run read to its end."""
    return runs_read(name, url, url, pids, rounds, joined=False)


def runs_read(
    name: str,
    url: str,
    other: str,
    pids: Sequence[int | str],
    rounds: int,
    *,
    joined: bool = True,
) -> Row:
    """Median wall and CPU seconds of one run posted to ``url`` and read to its end (on
    ``other`` when ``joined``: the run executes on the first server, is joined on the other)."""
    walls, cpus, servers = [], [], []
    with httpx.Client(timeout=300) as client:
        for n in range(rounds + 1):
            wall, own, theirs = time.perf_counter(), time.process_time(), cpu(pids)
            run = body(f"{'joined' if joined else 'bench'}-{n}", f"r{n}")
            if joined:
                with client.stream("POST", url, json=run) as started:
                    next(started.iter_bytes())  # the run executes on the first server
            answer = client.post(other, json=run)  # joined from its first event if joined
            assert answer.status_code == 200 and b"RUN_FINISHED" in answer.content
            if n:  # the first round warms up
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - own)
                servers.append([b - a for a, b in zip(theirs, cpu(pids), strict=True)])
    each = [statistics.median(one[i] for one in servers) for i in range(len(pids))]
    return name, statistics.median(walls), statistics.median(cpus), each


def connect_and_stop(url: str, rounds: int, other: str | None = None) -> tuple[float, float]:
    """Median seconds to the first byte of a connect mid-run, and of a stop (both on ``other``
    when given, the run executing on ``url``)."""
    firsts, stops = [], []
    other = other or url
    with httpx.Client(timeout=60) as client:
        for n in range(rounds):
            thread = f"held-{n}-{other.rsplit(':', 1)[-1]}"
            with client.stream("POST", f"{url}/agents/a/run", json=body(thread, "r", hold=1)) as r:
                next(r.iter_bytes())  # the run has started; it waits mid-message
                start = time.perf_counter()
                with client.stream(
                    "POST", f"{other}/agents/a/connect", json={"threadId": thread}
                ) as joined:
                    next(joined.iter_bytes())
                    firsts.append(time.perf_counter() - start)
                start = time.perf_counter()
                stopped = client.post(f"{other}/agents/a/stop", json={"threadId": thread})
                stops.append(time.perf_counter() - start)
                assert stopped.json()["ended"] is True
    return statistics.median(firsts), statistics.median(stops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="text deltas per run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--redis", metavar="URL", help="also the gateway on this Redis")
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)  # a server process
    args = parser.parse_args()
    events = args.events + 4
    if args.serve:
        kind, *redis = args.serve
        server(kind, events, *(redis or [None, None]))
        return
    rows = []
    with serve(args.events, "direct") as (direct, pid):
        rows.append(timed_runs("EventStreamResponse", direct + "/agent", [pid], args.rounds))
    with serve(args.events, "gateway") as (url, pid):
        rows.append(timed_runs("Gateway (run)", url + "/agents/a/run", [pid], args.rounds))
        first, stop = connect_and_stop(url, args.rounds)
    timings = [("embedded", first, stop)]
    if args.redis:
        rows += on_redis(args.redis, args.events, args.rounds, timings)
    print(f"{args.events:,} text deltas per run ({events:,} events), median of {args.rounds}\n")
    print("| server | events/s | µs CPU per event: client | each server | redis-server |")
    print("|---|---|---|---|---|")
    for name, wall, own, each in rows:
        per = [f"{c / events * 1e6:.1f}" for c in each]
        theirs, redis = (per[:-1], per[-1]) if name.startswith("Redis") else (per, "-")
        line = f"{events / wall:,.0f} | {own / events * 1e6:.1f} | {' + '.join(theirs)} | {redis}"
        print(f"| {name} | {line} |")
    print("\n| gateway | connect mid-run, first byte | stop, until ended and saved |")
    print("|---|---|---|")
    for name, first, stop in timings:
        print(f"| {name} | {first * 1000:.1f} ms | {stop * 1000:.1f} ms |")


def on_redis(
    url: str, deltas: int, rounds: int, timings: list[tuple[str, float, float]]
) -> list[Row]:
    """The rows of the gateway on Redis: one replica, then two (run on A, read on B)."""
    namespace = f"bench-{time.time_ns()}"
    rows = []
    with (
        serve(deltas, "redis", url, namespace) as (a, pa),
        serve(deltas, "redis", url, namespace) as (b, pb),
    ):
        rows.append(timed_runs("Redis, 1 replica (run)", a + "/agents/a/run", [pa, url], rounds))
        joined = runs_read(
            "Redis, 2 replicas (run on A, read on B)",
            a + "/agents/a/run",
            b + "/agents/a/run",
            [pa, pb, url],
            rounds,
        )
        rows.append(joined)
        timings.append(("Redis, 1 replica", *connect_and_stop(a, rounds)))
        timings.append(("Redis, 2 replicas (on B, run on A)", *connect_and_stop(a, rounds, b)))
    namespace = f"bench-{time.time_ns()}"
    with (
        serve(deltas, "front", url, namespace) as (front, pf),
        serve(deltas, "executor", url, namespace) as (_, pe),
    ):
        name = "Redis, front + executor (run on the front)"
        rows.append(timed_runs(name, front + "/agents/a/run", [pf, pe, url], rounds))
        timings.append(("Redis, front + executor (on the front)", *connect_and_stop(front, rounds)))
    return rows


if __name__ == "__main__":
    main()
