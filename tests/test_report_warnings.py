"""Reports as warnings when no ``on_report`` is given: repeats summed up, bounded, at the caller.

A legacy producer reports once per event; a hostile one can make every report's text differ.
Without a handler each report used to become its own warning, kept in the warnings registry of
an agui-meta module (300,000 reports: 131 MB) and pointing inside agui-meta.
"""

from __future__ import annotations

import doctest
import gc
import sys
import tracemalloc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest

import agui_meta
import agui_meta._warn
from agui_meta import AguiWarning

RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
END = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def stages() -> list[Any]:
    return [agui_meta.Enforce(), *agui_meta.DefaultStages()]


def legacy_stream(deltas: int) -> list[dict[str, Any]]:
    """A producer of the retired THINKING_* events: every one of them is reported."""
    return [
        RUN,
        {"type": "THINKING_TEXT_MESSAGE_START"},
        *({"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": f"{i} "} for i in range(deltas)),
        {"type": "THINKING_TEXT_MESSAGE_END"},
        END,
    ]


def unknown_fields(n: int) -> list[dict[str, Any]]:
    """``n`` events each with an unknown property of its own name: every report text differs."""
    return [RUN, *({"type": "CUSTOM", "name": "x", "value": i, f"extra{i}": i} for i in range(n))]


@contextmanager
def caught(action: str = "always") -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter(action)
        yield got


def agui_warnings(got: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in got if issubclass(w.category, AguiWarning)]


def registered() -> int:
    """Entries in every module's warnings registry."""
    return sum(
        len(getattr(module, "__warningregistry__", None) or ())
        for module in list(sys.modules.values())
    )


# ---------------------------------------------------------------------------------------------
# Repeats summed up


def test_a_legacy_producer_gets_one_warning_per_kind_not_one_per_event() -> None:
    with caught() as got:
        agui_meta.run_sync(stages(), legacy_stream(500))
    texts = [str(w.message) for w in agui_warnings(got)]
    # One per code: the first in full, then the counts at 10 and 100, then the total.
    assert texts[0].startswith("[legacy-shape] ")
    tail = "(the first is shown above; pass on_report= to receive each)"
    assert texts[1:] == [
        f"[legacy-shape] 10 reports of this kind so far in this stream {tail}",
        f"[legacy-shape] 100 reports of this kind so far in this stream {tail}",
        f"[legacy-shape] 502 reports of this kind in this stream, events 1 to 502 {tail}",
    ]


def test_every_report_still_reaches_an_on_report_handler() -> None:
    reports: list[agui_meta.Report] = []
    with caught() as got:
        agui_meta.run_sync(stages(), legacy_stream(500), on_report=reports.append)
    assert agui_warnings(got) == []
    assert len(reports) == 502


def test_each_code_is_told_apart_and_each_stream_counts_anew() -> None:
    stream = [*legacy_stream(3)[:-1], *unknown_fields(3)[1:]]
    with caught() as got:
        agui_meta.run_sync(stages(), stream)
        agui_meta.run_sync(stages(), stream)
    codes = [str(w.message).split("]")[0] + "]" for w in agui_warnings(got)]
    per_run = ["[legacy-shape]", "[unknown-field]", "[legacy-shape]", "[unknown-field]"]
    assert codes == per_run + per_run
    assert "5 reports of this kind in this stream, events 1 to 5" in str(got[2].message)


def test_a_stream_with_more_codes_than_are_told_apart_counts_the_rest_together() -> None:
    handler = agui_meta._warn.ReportWarnings()
    limit = agui_meta._warn.MAX_CODES
    with caught() as got:
        for i in range(limit + 50):
            handler(agui_meta.Report(code=f"code-{i}", message="m", index=i))
        handler.finish()
    texts = [str(w.message) for w in got]
    assert len(texts) == limit + 3  # the first other, its count at 10, its total
    assert f"more than {limit} codes" in texts[limit]
    assert texts[-1].startswith(
        f"[(other codes)] 50 reports of this kind in this stream, events {limit} to"
    )
    assert len(handler._counts) == 0


def test_the_module_examples_run() -> None:
    assert doctest.testmod(agui_meta._warn, raise_on_error=True).attempted >= 2


# ---------------------------------------------------------------------------------------------
# Bounded


@pytest.mark.slow
def test_reports_with_different_texts_leave_nothing_behind() -> None:
    """Python's default action keeps a registry entry per distinct text and place: 20,000
    reports left 5,000 entries (300,000 left 131 MB). Now nothing is kept."""
    events = unknown_fields(5_000)
    agui_meta.run_sync(stages(), events[:50], on_report=lambda r: None)
    gc.collect()
    before = registered()
    tracemalloc.start()
    try:
        with caught("default") as got:
            agui_meta.run_sync(stages(), events)
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(agui_warnings(got)) <= 6
    assert registered() <= before
    assert kept < 300_000, f"{kept} bytes kept after the run"


# ---------------------------------------------------------------------------------------------
# At the caller


@pytest.mark.anyio
@pytest.mark.parametrize("prefetch", [0, 2])
async def test_warnings_point_at_the_callers_code(prefetch: int) -> None:
    with caught() as got:
        async with agui_meta.wrap(legacy_stream(20), prefetch=prefetch) as stream:
            async for _ in stream:
                pass
    found = agui_warnings(got)
    assert len(found) == 3
    assert {w.filename for w in found} == {__file__}


def test_run_sync_warnings_point_at_the_callers_line() -> None:
    with caught() as got:
        agui_meta.run_sync(stages(), legacy_stream(1))
    (first, _), line = agui_warnings(got), sys._getframe().f_lineno - 1
    assert (first.filename, first.lineno) == (__file__, line)


def test_the_pipeline_of_another_task_points_where_it_was_made() -> None:
    async def main() -> int:
        stream = agui_meta.wrap(legacy_stream(2), prefetch=1)
        line = sys._getframe().f_lineno - 1
        async with stream:
            await stream.drain()
        return line

    with caught() as got:
        line = anyio.run(main)
    found = agui_warnings(got)
    assert found and all(w.filename == __file__ for w in found)
    assert line in {w.lineno for w in found}


def test_a_stage_fed_outside_any_chain_warns_at_the_line_that_feeds_it() -> None:
    # A stage made outside a pipeline has a context of its own, whose warnings handler does
    # not walk the frames of the code making it: its warnings point at the code feeding it.
    stage = agui_meta.Enforce()
    with caught() as got:
        stage.feed(RUN)
        stage.feed({"type": "THINKING_TEXT_MESSAGE_START"})
        line = sys._getframe().f_lineno - 1
    (first,) = agui_warnings(got)
    assert (first.filename, first.lineno) == (__file__, line)
