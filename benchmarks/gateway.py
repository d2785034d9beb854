"""The embedded gateway: events per second against ``EventStreamResponse`` alone; connect; stop.

    .venv/bin/python -m benchmarks.gateway [--events N] [--rounds R] [--redis URL]

Serves, with uvicorn on 127.0.0.1 in a thread of this process, the same generator agent (N
text deltas, no pauses) twice: through :class:`agui_meta.EventStreamResponse` (the agent in
the request, the default stages) and through :class:`agui_meta.gateway.Gateway` (a detached
run: the default stages, the run log, the thread saved at the end). A client in the main
thread POSTs a run and reads the raw body with httpx, so the figures are the server's work
plus the HTTP transfer, not a client pipeline. Then, on the gateway:

- time to first byte of ``connect`` to a thread whose run is in progress (its prelude built
  from the run's store);
- time from ``POST …/stop`` to its answer, which comes once the run has ended (the agent
  cancelled, the items closed, ``RUN_FINISHED`` written, the thread saved).

With ``--redis URL`` (a Redis of its own: the benchmark writes under the namespace
``bench-N``), the same on the gateway across replicas (:func:`agui_meta.gateway.redis_gateway`):
one replica (run and read on it), and two replicas in this process, each with its own Redis
client (the run posted to A, read to its end on B; connect on B to a run A executes; stop on B
for it).

Medians over ``--rounds``; process CPU time per event beside the wall time (client and server
share the process).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import agui_meta
from agui_meta.events import RunAgentInput
from agui_meta.gateway import Gateway, redis_gateway

HOLD = threading.Event()


@contextlib.contextmanager
def serve(app: Any, *, lifespan: Literal["on", "off"] = "off") -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 (a free port) in a thread; its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan=lifespan, log_level="critical", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise SystemExit("the server did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def make_agent(deltas: int) -> Any:
    async def agent(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
        tid, rid, m = input.thread_id, input.run_id, f"{input.run_id}-m"
        yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
        yield {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"}
        props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
        for n in range(deltas):
            yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": f"w{n} "}
            if props.get("hold") and n == 0:
                while not HOLD.is_set():  # noqa: ASYNC110 - set by the client's thread
                    await anyio.sleep(0.001)
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


def timed_runs(url: str, rounds: int) -> tuple[float, float]:
    """Median wall and CPU seconds of one run read to its end."""
    walls, cpus = [], []
    with httpx.Client(timeout=300) as client:
        for n in range(rounds + 1):
            wall, cpu = time.perf_counter(), time.process_time()
            answer = client.post(url, json=body(f"bench-{n}", f"r{n}"))
            assert answer.status_code == 200 and b"RUN_FINISHED" in answer.content
            if n:  # the first round warms up
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def joined_runs(url: str, other: str, rounds: int) -> tuple[float, float]:
    """Median wall and CPU seconds of one run posted to ``url``, read to its end on ``other``."""
    walls, cpus = [], []
    with httpx.Client(timeout=300) as client:
        for n in range(rounds + 1):
            wall, cpu = time.perf_counter(), time.process_time()
            run = body(f"joined-{n}", f"r{n}")
            with client.stream("POST", url, json=run) as started:
                next(started.iter_bytes())  # the run executes on the first replica
            answer = client.post(other, json=run)  # the same run: joined from its first event
            assert answer.status_code == 200 and b"RUN_FINISHED" in answer.content
            if n:
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def connect_and_stop(url: str, rounds: int, other: str | None = None) -> tuple[float, float]:
    """Median seconds to the first byte of a connect mid-run, and of a stop (both on ``other``
    when given, the run executing on ``url``)."""
    firsts, stops = [], []
    other = other or url
    with httpx.Client(timeout=60) as client:
        for n in range(rounds):
            HOLD.clear()
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
    HOLD.set()
    return statistics.median(firsts), statistics.median(stops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="text deltas per run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--redis", metavar="URL", help="also the gateway on this Redis")
    args = parser.parse_args()
    agent = make_agent(args.events)
    events = args.events + 4
    rows = []
    with serve(direct_app(agent)) as direct:
        rows.append(("EventStreamResponse", *timed_runs(direct + "/agent", args.rounds)))
    gateway = Gateway({"a": agent}, max_events=events + 10)
    with serve(gateway, lifespan="on") as url:
        rows.append(("Gateway (run)", *timed_runs(url + "/agents/a/run", args.rounds)))
        first, stop = connect_and_stop(url, args.rounds)
    timings = [("embedded", first, stop)]
    if args.redis:
        rows += on_redis(args.redis, agent, events, args.rounds, timings)
    print(f"{args.events:,} text deltas per run ({events:,} events), median of {args.rounds}\n")
    print("| server | events/s | µs CPU per event (client + server) |")
    print("|---|---|---|")
    for name, wall, cpu in rows:
        print(f"| {name} | {events / wall:,.0f} | {cpu / events * 1e6:.1f} |")
    print("\n| gateway | connect mid-run, first byte | stop, until ended and saved |")
    print("|---|---|---|")
    for name, first, stop in timings:
        print(f"| {name} | {first * 1000:.1f} ms | {stop * 1000:.1f} ms |")


def on_redis(
    url: str, agent: Any, events: int, rounds: int, timings: list[tuple[str, float, float]]
) -> list[tuple[str, float, float]]:
    """The rows of the gateway on Redis: one replica, then two (run on A, read on B)."""
    import redis.asyncio

    namespace = f"bench-{time.time_ns()}"

    def replica() -> Any:
        client = redis.asyncio.Redis.from_url(url)  # used in the replica's event loop only
        return redis_gateway(client, {"a": agent}, namespace=namespace, max_events=events + 10)

    rows = []
    a, b = replica(), replica()
    with serve(a, lifespan="on") as url_a, serve(b, lifespan="on") as url_b:
        rows.append(("Redis, 1 replica (run)", *timed_runs(url_a + "/agents/a/run", rounds)))
        joined = joined_runs(url_a + "/agents/a/run", url_b + "/agents/a/run", rounds)
        rows.append(("Redis, 2 replicas (run on A, read on B)", *joined))
        timings.append(("Redis, 1 replica", *connect_and_stop(url_a, rounds)))
        timings.append(
            ("Redis, 2 replicas (on B, run on A)", *connect_and_stop(url_a, rounds, url_b))
        )
    return rows


if __name__ == "__main__":
    main()
