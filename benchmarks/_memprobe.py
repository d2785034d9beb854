"""One memory measurement, in a process of its own (run by ``benchmarks.run``).

Streams a workload file through the full default pipeline in 64 KiB reads, as a long-lived
proxy would, and prints one JSON object: the events processed, the seconds taken, the resident
set size after imports (``baseline_rss``) and at its peak (``peak_rss``, the kernel's high-water
mark, bytes), the messages the store retained, and with ``--tracemalloc`` the peak of memory
allocated through Python's allocators while streaming (``traced_peak``, bytes).

    python -m benchmarks._memprobe FILE --format sse [--evict] [--tracemalloc]
    python -m benchmarks._memprobe --generate messages:1000000[:RUN] [--evict] [--tracemalloc]

``--generate KIND:N[:RUN]`` streams generated SSE instead of a file (the same 64 KiB reads):
``N`` text messages (``messages``: START, one CONTENT, END) or answered tool calls
(``tools``: START, ARGS, END, RESULT), all in one run, or in runs of ``RUN`` items each.
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


def _generated(spec: str) -> Iterator[bytes]:
    """SSE of ``KIND:N[:RUN]`` (see the module documentation), in reads of about 64 KiB."""
    kind, _, rest = spec.partition(":")
    count, _, per_run = rest.partition(":")
    n, run_size = int(count), int(per_run) if per_run else 0
    if kind not in ("messages", "tools"):
        raise SystemExit(f"--generate: KIND is 'messages' or 'tools', not {kind!r}")
    buffer: list[bytes] = []
    size = 0
    runs = 0

    def frame(event: dict[str, Any]) -> None:
        nonlocal size
        data = b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"
        buffer.append(data)
        size += len(data)

    for i in range(n):
        if i == 0 or (run_size and i % run_size == 0):
            if i:
                frame({"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{runs}"})
            runs += 1
            frame({"type": "RUN_STARTED", "threadId": "t", "runId": f"r{runs}"})
        if kind == "messages":
            mid = f"message-{i:08d}"
            frame({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
            frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": "Hello there"})
            frame({"type": "TEXT_MESSAGE_END", "messageId": mid})
        else:
            tid = f"call-{i:08d}"
            frame({"type": "TOOL_CALL_START", "toolCallId": tid, "toolCallName": "lookup"})
            frame({"type": "TOOL_CALL_ARGS", "toolCallId": tid, "delta": '{"q":"x"}'})
            frame({"type": "TOOL_CALL_END", "toolCallId": tid})
            frame(
                {
                    "type": "TOOL_CALL_RESULT",
                    "toolCallId": tid,
                    "messageId": f"result-{i:08d}",
                    "content": "ok",
                }
            )
        if size >= READ_SIZE:
            yield b"".join(buffer)
            buffer.clear()
            size = 0
    frame({"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{runs}"})
    yield b"".join(buffer)


def _chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb", buffering=0) as fh:
        while chunk := fh.read(READ_SIZE):
            yield chunk


async def _run(path: str, fmt: str, evict: bool, generate: str | None = None) -> dict[str, Any]:
    store = agui_meta.Store(evict_completed=evict)
    reports: list[Any] = []
    t0 = time.perf_counter()
    async with agui_meta.wrap(
        _chunks(path) if generate is None else _generated(generate),
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
    p.add_argument("file", nargs="?")
    p.add_argument("--generate", metavar="KIND:N[:RUN]")
    p.add_argument("--format", choices=("sse", "jsonl"), default="sse")
    p.add_argument("--evict", action="store_true")
    p.add_argument("--tracemalloc", action="store_true")
    a = p.parse_args(argv)
    if (a.file is None) == (a.generate is None):
        p.error("give a FILE or --generate, not both")
    anyio.run(_nothing)  # load the event loop's modules before taking the baseline
    baseline = _rss_peak()
    if a.tracemalloc:
        import tracemalloc

        tracemalloc.start()
    result = anyio.run(_run, a.file, a.format, a.evict, a.generate)
    if a.tracemalloc:
        result["traced_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    result["baseline_rss"] = baseline
    result["peak_rss"] = _rss_peak()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
