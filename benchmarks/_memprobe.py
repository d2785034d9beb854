"""One memory measurement, in a process of its own (run by ``benchmarks.run``).

Streams a workload file through the full default pipeline in 64 KiB reads, as a long-lived
proxy would, and prints one JSON object: the events processed, the seconds taken, the resident
set size after imports (``baseline_rss``) and at its peak (``peak_rss``, the kernel's high-water
mark, bytes), the messages the store retained, and with ``--tracemalloc`` the peak of memory
allocated through Python's allocators while streaming (``traced_peak``, bytes).

    python -m benchmarks._memprobe FILE --format sse [--evict] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio

import agui_meta

from ._stages import stages

READ_SIZE = 64 * 1024


def _rss_peak() -> int:
    """The peak resident set size of this process, in bytes.

    On Linux, ``VmHWM`` of ``/proc/self/status``: unlike ``ru_maxrss``, which a child inherits
    from the process that forked it (so a small probe started by a big harness would report
    the harness's peak), it belongs to this program alone.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS: bytes, Linux: KiB


async def _nothing() -> None:
    pass


def _chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb", buffering=0) as fh:
        while chunk := fh.read(READ_SIZE):
            yield chunk


async def _run(path: str, fmt: str, evict: bool) -> dict[str, Any]:
    store = agui_meta.Store(evict_completed=evict)
    reports: list[Any] = []
    t0 = time.perf_counter()
    async with agui_meta.wrap(
        _chunks(path),
        *stages(store=store),
        format=fmt,
        on_report=reports.append,
    ) as stream:
        count = await stream.drain()
    seconds = time.perf_counter() - t0
    return {
        "outputs": count,
        "seconds": seconds,
        "retained_messages": sum(1 for _ in store.messages()),
        "reports": len(reports),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--format", choices=("sse", "jsonl"), default="sse")
    p.add_argument("--evict", action="store_true")
    p.add_argument("--tracemalloc", action="store_true")
    a = p.parse_args(argv)
    anyio.run(_nothing)  # load the event loop's modules before taking the baseline
    baseline = _rss_peak()
    if a.tracemalloc:
        import tracemalloc

        tracemalloc.start()
    result = anyio.run(_run, a.file, a.format, a.evict)
    if a.tracemalloc:
        result["traced_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    result["baseline_rss"] = baseline
    result["peak_rss"] = _rss_peak()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
