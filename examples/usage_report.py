"""A token-usage report from the run ledger of recorded streams.

    python examples/usage_report.py                        # the streams in examples/streams
    python examples/usage_report.py recording.sse more.jsonl

Token usage travels on RUN_FINISHED (and RUN_ERROR) events, whose metadata and usage the
specification assigns to no item. ``agui_meta.Ledger()`` records them per run; this script
sums them per provider and model over every run of every file, with
``agui_meta.aggregate_token_usage`` (a count nobody reported stays "-", not 0).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio

import agui_meta

STREAMS = Path(__file__).resolve().parent / "streams"
COLUMNS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("total", "total_tokens"),
    ("reasoning", "reasoning_tokens"),
    ("cached", "cached_input_tokens"),
)


async def runs_of(path: Path) -> tuple[list[agui_meta.RunRecord], int]:
    """The runs of one recorded stream, and how many bad events were skipped."""
    ledger = agui_meta.Ledger()
    problems: list[agui_meta.Report] = []
    # The whole file at once: wrap() tells SSE from JSON lines by the first bytes. In
    # keep-going mode a bad event is reported and skipped instead of ending the report.
    async with agui_meta.wrap(
        await anyio.Path(path).read_bytes(),
        agui_meta.ExpandChunks(),
        agui_meta.Verify(),
        ledger,
        mode="keep_going",
        on_report=problems.append,
    ) as stream:
        await stream.drain()
    return ledger.runs, sum(1 for p in problems if p.severity == "error")


def _label(value: object) -> str:
    return value if isinstance(value, str) else "-"


def _count(value: object) -> str:
    return str(value) if isinstance(value, int) else "-"


async def report(paths: list[Path]) -> list[agui_meta.Usage]:
    """Print the runs of each file, then usage per provider and model; return the totals."""
    entries: list[agui_meta.Usage] = []
    for path in paths:
        runs, skipped = await runs_of(path)
        note = f" ({skipped} bad events skipped)" if skipped else ""
        print(f"{path.name}: {len(runs)} run{'' if len(runs) == 1 else 's'}{note}")
        for run in runs:
            tokens = sum(
                u.total_tokens for u in run.aggregated_usage if isinstance(u.total_tokens, int)
            )
            print(f"  {_label(run.run_id)}: {run.status}, {tokens} tokens")
            entries.extend(run.usage)
    totals = agui_meta.aggregate_token_usage(entries)
    print()
    header = f"{'provider':<12}{'model':<20}" + "".join(f"{name:>10}" for name, _ in COLUMNS)
    print(header)
    print("-" * len(header))
    for usage in totals:
        counts = "".join(f"{_count(getattr(usage, field)):>10}" for _, field in COLUMNS)
        print(f"{_label(usage.provider):<12}{_label(usage.model):<20}{counts}")
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        help="recorded streams, SSE or JSON lines (default: examples/streams/*)",
    )
    args = parser.parse_args(argv)
    paths = args.files or sorted(p for p in STREAMS.iterdir() if p.suffix in (".sse", ".jsonl"))
    anyio.run(report, paths)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
