"""Hostile but well-formed streams: what one more key, item or run costs as a stream grows.

    python -m benchmarks.hostile            # about a minute
    python -m benchmarks.hostile --quick    # a smoke run (seconds)
    python -m benchmarks.hostile --one-run  # one long run in constant memory (a minute or two)

Each row runs the default pipeline (``DefaultStages()``) on one SSE stream read as **one
chunk**, so that every ``Update`` of the stream is held at once (the worst case for memory),
and reports the time and the peak of traced memory (``tracemalloc``, a separate run) per
event. A cost that stays flat as the stream grows is O(1) per event; one that grows with it is
not. Rows:

- ``one key per event``: every content delta of one message adds a metadata key (the issue's
  1.8 MB stream is about 30,000 of them). Before the persistent merge (``MergedMetadata``),
  every update held a full copy: quadratic time and memory. The ``copy per update`` column
  shows that cost, computed here the way the accumulator used to merge, side by side.
- ``plain deltas``: the same stream without metadata, the floor for the row above.

``--one-run`` measures instead the peak resident set size of the default pipeline with
``Store(evict_completed=True)`` over 1,000,000 messages and 500,000 answered tool calls (sizes
from ``--one-run-sizes``), each in one run and, for comparison, in runs of 1,000 items, each
measurement in a process of its own (``benchmarks._memprobe --generate``): with the per-run
bounds (the verifier's ``max_closed_ids``, the tallies' limits) both take the same memory.

Times are medians of ``--rounds`` runs, on whatever the machine gives; ratios within one run
are what holds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import anyio

import agui_meta


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def keyed_stream(n: int, *, metadata: bool) -> bytes:
    run = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    events: list[dict[str, Any]] = [run, {"type": "TEXT_MESSAGE_START", "messageId": "m"}]
    for i in range(n):
        event: dict[str, Any] = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}
        if metadata:
            event["metadata"] = {f"acme.k{i}": i}
        events.append(event)
    events += [
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    return _sse(events)


def pipeline(data: bytes) -> list[Any]:
    """The default pipeline over ``data`` as one chunk; every update, held."""

    async def go() -> list[Any]:
        async with agui_meta.wrap([data], *agui_meta.DefaultStages()) as stream:
            return [update async for update in stream]

    return anyio.run(go)


def copy_per_update(n: int) -> list[Any]:
    """What the accumulator did before: a new full dict per merge, held by each update."""
    held: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for i in range(n):
        current = {**current, f"acme.k{i}": i}
        held.append(current)
    return held


def measure(work: Callable[[], Any], rounds: int) -> tuple[float, int]:
    """(median seconds, peak traced bytes) of ``work()``."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    try:
        work()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return statistics.median(times), peak


def one_run(messages: int, tools: int) -> list[dict[str, Any]]:
    """Peak RSS of long runs against short ones (see the module documentation)."""
    import subprocess

    rows = []
    print("| items | kind | items per run | peak RSS (MiB) | RSS after imports (MiB) | seconds |")
    print("|---:|---|---:|---:|---:|---:|")
    for kind, n in (("messages", messages), ("tools", tools)):
        for per_run in (0, 1000):
            spec = f"{kind}:{n}" + (f":{per_run}" if per_run else "")
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks._memprobe", "--generate", spec, "--evict"],
                capture_output=True,
                text=True,
                check=True,
            )
            probe = json.loads(done.stdout)
            row = {"kind": kind, "items": n, "per_run": per_run or n, **probe}
            rows.append(row)
            print(
                f"| {n:,} | {'messages' if kind == 'messages' else 'tool calls'} "
                f"| {row['per_run']:,} | {probe['peak_rss'] / 2**20:.1f} "
                f"| {probe['baseline_rss'] / 2**20:.1f} | {probe['seconds']:.1f} |"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile", description=__doc__)
    parser.add_argument("--sizes", default="1000,4000,16000,30000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--copy-up-to",
        type=int,
        default=4000,
        help="largest size for the copy-per-update column (its memory is quadratic: 16,000 "
        "events take 3.5 GB, 30,000 take 13 GB)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON ('-': stdout)")
    parser.add_argument(
        "--one-run", action="store_true", help="peak RSS of one long run (see the module)"
    )
    parser.add_argument("--one-run-sizes", default="1000000,500000", help="messages,tool calls")
    args = parser.parse_args(argv)
    if args.one_run:
        messages, tools = (int(x) for x in args.one_run_sizes.split(","))
        if args.quick:
            messages, tools = 3000, 2000
        one_rows = one_run(messages, tools)
        if args.json:
            text = json.dumps(
                {"command": "python -m benchmarks.hostile --one-run", "rows": one_rows}
            )
            if args.json == "-":
                sys.stdout.write(text + "\n")
            else:
                with open(args.json, "w") as out:
                    out.write(text + "\n")
        return 0
    sizes = [200, 800] if args.quick else [int(s) for s in args.sizes.split(",")]
    rounds = 1 if args.quick else args.rounds
    pipeline(keyed_stream(10, metadata=True))  # imports and caches, outside the measurements
    rows = []
    print(
        "| events | one key per event: µs/event | KiB/event | plain deltas: µs/event "
        "| KiB/event | copy per update: µs/event | KiB/event |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        keyed = keyed_stream(n, metadata=True)
        plain = keyed_stream(n, metadata=False)
        k_time, k_peak = measure(lambda: pipeline(keyed), rounds)  # noqa: B023
        p_time, p_peak = measure(lambda: pipeline(plain), rounds)  # noqa: B023
        c_time, c_peak = (
            measure(lambda: copy_per_update(n), rounds)  # noqa: B023
            if n <= args.copy_up_to
            else (float("nan"), 0)
        )
        row = {
            "events": n,
            "keyed_us": k_time / n * 1e6,
            "keyed_kib": (k_peak - len(keyed)) / n / 1024,
            "plain_us": p_time / n * 1e6,
            "plain_kib": (p_peak - len(plain)) / n / 1024,
            "copy_us": c_time / n * 1e6,
            "copy_kib": c_peak / n / 1024 if c_peak else float("nan"),
        }
        rows.append(row)
        print(
            f"| {n:,} | {row['keyed_us']:.2f} | {row['keyed_kib']:.2f} | {row['plain_us']:.2f} "
            f"| {row['plain_kib']:.2f} | {row['copy_us']:.2f} | {row['copy_kib']:.2f} |"
        )
    if args.json:
        text = json.dumps({"command": "python -m benchmarks.hostile", "rows": rows}, indent=1)
        if args.json == "-":
            sys.stdout.write(text + "\n")
        else:
            with open(args.json, "w") as out:
                out.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
