"""Machine instructions per event, counted with callgrind: figures no neighbour can disturb.

    python -m benchmarks.instructions                 # the table of benchmarks/README.md
    python -m benchmarks.instructions --configs full,full-unfused

Each configuration runs in a fresh interpreter under ``valgrind --tool=callgrind`` twice, on
the first ``--base`` and the first ``--events`` events of the generated workload (seed 1), and
its cost per event is the difference of the two totals divided by the difference in events,
less the same figure for ``setup`` (which prepares the inputs and runs nothing; the durable rows
have ``setup-durable``, which also prepares theirs), so imports,
interpreter start-up and input preparation cancel out. callgrind counts instructions, not
time: the same code, inputs and interpreter give the same count whatever else the machine is
doing. Needs ``valgrind`` on the PATH (Debian's package); about 15 seconds per configuration.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Configuration -> what it measures, in table order. Levels add one stage each, as the
#: stage-by-stage contenders of ``benchmarks.run`` do.
CONFIGS: dict[str, str] = {
    "setup": "preparing the inputs (subtracted from every other row but the durable ones)",
    "setup-durable": "preparing the inputs and the durable workload (subtracted from the"
    " durable rows)",
    "floor": "msgspec decode of the frames (the floor)",
    "framing-sse": "SSE framing (`SSEDecoder`), 16 KiB chunks",
    "framing-jsonl": "JSON-lines framing, 16 KiB chunks",
    "sdk": "Python SDK parse (`ag_ui.core` + pydantic)",
    "decode": "`wrap()` from SSE bytes: framing, decoding, the entry stage, `drain()`",
    "expand_chunks": "+ `expand_chunks`",
    "verify": "+ `verify`",
    "accumulate": "+ `accumulate`",
    "full": "+ `ledger`: the full pipeline",
    "full-unfused": "the full pipeline without the fused fast path",
    "full-jsonl": "the full pipeline from JSON lines, 16 KiB chunks",
    "content": "the full pipeline on a stream of text deltas of one message (the fast path)",
    "durable-stream": "the recorded streams over 32 threads, each thread through `wrap(...).drain()`"
    " with a worker's stages (`benchmarks.redis_workers`' streaming pipeline)",
    "durable-local": "the same events as envelopes through `run_local` (a thread's runs as segments)",
}
_LEVEL = {"decode": 0, "expand_chunks": 1, "verify": 2, "accumulate": 3, "full": 4}
_COLLECTED = re.compile(rb"Collected\s*:\s*([\d,]+)")


def _child(config: str, n: int) -> None:
    """Run one configuration on the first ``n`` events (inside valgrind)."""
    import anyio
    import msgspec

    import agui_meta
    from agui_meta._framing import make_decoder
    from benchmarks import run
    from benchmarks._stages import stages

    if "AGUI_META_BENCH_CACHE" in os.environ:
        run._cache = Path(os.environ["AGUI_META_BENCH_CACHE"])
    w = run.generated(int(os.environ.get("AGUI_META_BENCH_EVENTS", "10000")))
    frames = w.frames[:n]
    sse = b"".join(b"data: " + f + b"\n\n" for f in frames)
    jsonl = b"".join(f + b"\n" for f in frames)
    sse_chunks = [sse[i : i + run.CHUNK] for i in range(0, len(sse), run.CHUNK)]
    # The workload's text deltas, in order, made the body of one message of one run.
    first = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"'
    deltas = [
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"' + f[f.index(b'"', len(first)) + 1 :]
        for f in w.frames
        if f.startswith(first)
    ]
    deltas = (deltas * (n // max(len(deltas), 1) + 1))[: max(n - 4, 0)]
    run_started = b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}'
    content = [
        run_started,
        b'{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}',
        *deltas,
        b'{"type":"TEXT_MESSAGE_END","messageId":"m"}',
        run_started.replace(b"STARTED", b"FINISHED"),
    ]
    content_sse = b"".join(b"data: " + f + b"\n\n" for f in content)
    content_chunks = [content_sse[i : i + run.CHUNK] for i in range(0, len(content_sse), run.CHUNK)]
    jsonl_chunks = [jsonl[i : i + run.CHUNK] for i in range(0, len(jsonl), run.CHUNK)]

    if config.startswith("durable-") or config == "setup-durable":
        durable = _durable_inputs(n)
    if config.startswith("setup"):
        return
    if config == "durable-local":
        from agui_meta.redis import run_local

        run_local(durable[0])
        return
    if config == "durable-stream":
        from benchmarks.redis_workers import stream_all

        anyio.run(stream_all, durable[1])
        return
    if config == "floor":
        decode = msgspec.json.Decoder(agui_meta.events.AnyEvent).decode
        for f in frames:
            decode(f)
    elif config.startswith("framing-"):
        fmt = config.removeprefix("framing-")
        framer = make_decoder(fmt)  # type: ignore[arg-type]
        for chunk in sse_chunks if fmt == "sse" else jsonl_chunks:
            framer.feed(chunk)
        framer.close()
    elif config == "sdk":
        import pydantic
        from ag_ui.core import Event

        validate = pydantic.TypeAdapter(Event).validate_json
        for f in frames:
            validate(f)
    else:
        fuse = config != "full-unfused"
        chain = stages(_LEVEL.get(config, 4), store=agui_meta.Store())
        source = {"content": content_chunks, "full-jsonl": jsonl_chunks}.get(config, sse_chunks)
        reports: list[agui_meta.Report] = []

        async def main() -> None:
            async with agui_meta.wrap(
                source, *chain, on_report=reports.append, fuse=fuse
            ) as stream:
                await stream.drain()

        anyio.run(main)
        if reports:  # a workload the pipeline does not take silently measures something else
            raise RuntimeError(f"{config}: {len(reports)} reports, the first: {reports[0]}")


def _durable_inputs(n: int) -> tuple[list[Any], list[bytes]]:
    """The first ``n`` events of ``benchmarks.redis_workers``' workload (32 threads, each of its
    recorded stream 20 times, envelopes of 64 events), as envelopes and as one JSON-lines stream
    per thread."""
    from benchmarks.redis_workers import workload

    order, left = [], n
    for envelope in workload(32, 20, 64):
        if left <= 0:
            break
        if len(envelope.frames) > left:
            envelope = type(envelope)(
                envelope.thread,
                envelope.source,
                envelope.seq,
                envelope.frames[:left],
                received=envelope.received,
            )
        order.append(envelope)
        left -= len(envelope.frames)
    per_thread: dict[str, list[bytes]] = {}
    for envelope in order:
        per_thread.setdefault(envelope.thread, []).extend(envelope.frames)
    return order, [b"".join(f + b"\n" for f in frames) for frames in per_thread.values()]


def count(config: str, n: int, *, valgrind: str = "valgrind") -> int:
    """Instructions of one run of ``config`` on ``n`` events, whole process."""
    done = subprocess.run(
        [
            valgrind,
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--child",
            config,
            str(n),
        ],
        capture_output=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(
            f"callgrind run of {config!r} on {n} events failed:\n{done.stderr.decode()[-2000:]}"
        )
    return int(found.group(1).replace(b",", b""))


def per_event(
    configs: list[str],
    base: int,
    events: int,
    counter: Callable[[str, int], int] = count,
    log: Callable[[str], Any] = lambda line: print(line, file=sys.stderr, flush=True),
) -> dict[str, int]:
    """Instructions per event of each configuration, less its set-up's (``setup``, or
    ``setup-durable`` for the durable rows, whose inputs only they prepare)."""
    wanted = [c for c in configs if not c.startswith("setup")]
    setups = {_setup_of(c) for c in wanted}
    raw: dict[str, float] = {}
    for config in [*sorted(setups), *wanted]:
        log(f"callgrind: {config}")
        raw[config] = (counter(config, events) - counter(config, base)) / (events - base)
    return {c: round(raw[c] - raw[_setup_of(c)]) for c in wanted}


def _setup_of(config: str) -> str:
    return "setup-durable" if config.startswith("durable-") else "setup"


def table(figures: dict[str, int]) -> str:
    """The figures as a markdown table, with each pipeline row's share of the full pipeline."""
    full = figures.get("full")
    lines = ["| configuration | instructions/event | of the full pipeline |", "|---|---:|---:|"]
    for config, value in figures.items():
        share = f"{value / full:.0%}" if full else "—"
        lines.append(f"| {CONFIGS[config]} | {value:,} | {share} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__)
    p.add_argument("--configs", help="comma-separated, from: " + ", ".join(CONFIGS))
    p.add_argument("--events", type=int, default=10_000, help="events of the long run")
    p.add_argument("--base", type=int, default=2_000, help="events of the short run")
    p.add_argument("--cache", help="workload cache directory (default: benchmarks/results/cache)")
    p.add_argument("--child", nargs=2, metavar=("CONFIG", "N"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _child(a.child[0], int(a.child[1]))
        return 0
    configs = (
        a.configs.split(",") if a.configs else [c for c in CONFIGS if not c.startswith("setup")]
    )
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        p.error(f"unknown configurations: {', '.join(unknown)}")
    if not 0 < a.base < a.events:
        p.error("--base must be positive and smaller than --events")
    if shutil.which("valgrind") is None:
        p.error("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    from benchmarks import run

    if a.cache:
        run._cache = Path(a.cache)
        os.environ["AGUI_META_BENCH_CACHE"] = str(Path(a.cache).resolve())
    run.generated(a.events)  # written to the cache now, not inside a measured run
    os.environ["AGUI_META_BENCH_EVENTS"] = str(a.events)
    print(table(per_event(configs, a.base, a.events)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
