"""Resource bounds within one run (issue 11, item 7): the verifier's, the store's and the
ledger's per-run tables, and items opened and never closed.

Each bound is tested with a small limit passed in (fast), for what it keeps, what it refuses
and how it says so (the error or report names what and where); the memory tests measure one
long run with eviction at two lengths and assert that the peak does not grow with the run
(a structural assertion: no time is measured).
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import agui_meta
from agui_meta import Report, VerifyError
from tests.helpers import python_child

Event = dict[str, Any]
RUN: Event = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISH: Event = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def text(mid: str, **tag: str) -> list[Event]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant", **tag},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": "hi", **tag},
        {"type": "TEXT_MESSAGE_END", "messageId": mid, **tag},
    ]


def tool(tid: str, *, answered: bool = True) -> list[Event]:
    events: list[Event] = [
        {"type": "TOOL_CALL_START", "toolCallId": tid, "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": tid, "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": tid},
    ]
    if answered:
        events.append(
            {
                "type": "TOOL_CALL_RESULT",
                "toolCallId": tid,
                "messageId": f"r-{tid}",
                "content": "ok",
            }
        )
    return events


def _event(data: Event) -> agui_meta.events.Event:
    event = agui_meta.events.decode_event(data)
    assert event is not None
    return event


def run(stages: list[Any], events: list[Event], mode: str = "default") -> list[Report]:
    reports: list[Report] = []
    agui_meta.run_sync(stages, events, mode=mode, on_report=reports.append)  # type: ignore[arg-type]
    return reports


# ---------------------------------------------------------------------------------------------
# Items opened and never closed: Verify(max_open_items=...)


def test_an_opener_past_max_open_items_is_rejected_naming_the_id_and_the_event() -> None:
    events = [RUN, *[text(f"m{i}")[0] for i in range(3)], text("m3")[0]]
    with pytest.raises(VerifyError) as caught:
        run([agui_meta.Verify(max_open_items=3)], events)
    error = caught.value
    assert error.rule == "limit.open-items"
    assert error.index == 4
    message = str(error)
    assert "'m3'" in message and "run 'r'" in message and "max_open_items=3" in message
    assert "text messages 3" in message


def test_the_open_items_of_every_kind_count_together() -> None:
    events = [
        RUN,
        {"type": "STEP_STARTED", "stepName": "s"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "sub", "name": "n"},
        {"type": "REASONING_START", "messageId": "rs"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"},
    ]
    verify = agui_meta.Verify(max_open_items=5)
    run([verify], events)  # five open: accepted
    for opener in (
        text("m")[0],
        {"type": "STEP_STARTED", "stepName": "t"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "sub2", "name": "n"},
    ):
        with pytest.raises(VerifyError, match=r"limit\.open-items|max_open_items=5") as caught:
            verify.feed(_event(opener))
        assert caught.value.rule == "limit.open-items"
        assert "tool calls 1" in str(caught.value) and "steps 1" in str(caught.value)
    # Closing one makes room again.
    verify.feed(_event({"type": "TOOL_CALL_END", "toolCallId": "c"}))
    verify.feed(_event(text("m")[0]))
    assert verify.open_items().text_messages == ("m",)


def test_in_keep_going_mode_an_opener_past_the_limit_is_skipped_and_nothing_is_held() -> None:
    stages = agui_meta.DefaultStages(
        agui_meta.Store(evict_completed=True), verify=agui_meta.Verify(max_open_items=2)
    )
    events = [RUN, text("a")[0], text("b")[0], *text("c"), text("d")[0]]
    reports = run(list(stages), events, mode="keep_going")
    errors = [r for r in reports if r.severity == "error"]
    # c's START, CONTENT and END, d's START: rejected, each named at its event.
    assert [r.index for r in errors] == [3, 4, 5, 6]
    assert "limit.open-items" in errors[0].message or "max_open_items=2" in errors[0].message
    assert "'c'" in errors[0].message and "'d'" in errors[3].message
    assert [m.id for m in stages.store.messages()] == ["a", "b"]  # c and d were never opened
    assert stages.verify is not None and stages.verify.open_items().text_messages == ("a", "b")


def test_a_million_opened_messages_stop_at_the_limit() -> None:
    # Cheap with the default limit: the stream ends at the 10,001st opener (default mode).
    def events() -> Iterator[Event]:
        yield RUN
        for i in range(1_000_000):
            yield text(f"m{i}")[0]

    stages = agui_meta.DefaultStages(agui_meta.Store(evict_completed=True))
    with pytest.raises(VerifyError) as caught:
        agui_meta.run_sync(list(stages), events())
    assert caught.value.rule == "limit.open-items"
    assert caught.value.index == 10_001
    assert "'m10000'" in str(caught.value)


# ---------------------------------------------------------------------------------------------
# Records of closed items: Verify(max_closed_ids=...)


def test_closed_ids_past_the_limit_are_forgotten_counted_and_reported_once_per_run() -> None:
    verify = agui_meta.Verify(max_closed_ids=3)
    events = [RUN, *[e for i in range(6) for e in text(f"m{i}", subagentRunId="s")]]
    reports = run([verify], [*events, FINISH, *events])
    # m4's START makes four closed records besides an open one: m0 goes, then m1 at m5's.
    assert verify.forgotten_ids == 2 + 2
    forgot = [r for r in reports if r.code == "verify-forgot-ids"]
    assert [r.index for r in forgot] == [13, 33]  # m4's START, in each run
    assert all(r.severity == "info" for r in forgot)
    assert "message 'm0'" in forgot[0].message and "max_closed_ids=3" in forgot[0].message
    assert list(verify._message_owners) == ["m2", "m3", "m4", "m5"]  # m5 was open at its record


def test_a_recent_closed_id_is_still_checked_a_forgotten_one_is_accepted() -> None:
    events = [RUN, *[e for i in range(5) for e in text(f"m{i}", subagentRunId="s")]]
    # m3 is remembered: reopening it under another subagent breaks owner.mismatch.
    with pytest.raises(VerifyError) as caught:
        run([agui_meta.Verify(max_closed_ids=3)], [*events, text("m3", subagentRunId="x")[0]])
    assert caught.value.rule == "owner.mismatch"
    # m0 was forgotten (as documented): its reopen under another owner is accepted.
    run([agui_meta.Verify(max_closed_ids=3)], [*events, text("m0", subagentRunId="x")[0]])
    # Without the bound, the reference's rule holds for every id of the run.
    with pytest.raises(VerifyError):
        run([agui_meta.Verify(max_closed_ids=None)], [*events, text("m0", subagentRunId="x")[0]])


def test_an_open_items_owner_is_never_forgotten() -> None:
    events = [RUN, text("open", subagentRunId="s")[0]]
    events += [e for i in range(5) for e in text(f"m{i}")]
    events.append(
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "open", "delta": "x", "subagentRunId": "y"}
    )
    with pytest.raises(VerifyError) as caught:
        run([agui_meta.Verify(max_closed_ids=2)], events)
    assert caught.value.rule == "owner.mismatch"


def test_finished_subagents_are_bounded_too() -> None:
    def sub(sid: str, **parent: str) -> list[Event]:
        return [
            {"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": "n", **parent},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": sid, "result": 1},
        ]

    events = [RUN, *[e for i in range(4) for e in sub(f"s{i}")]]  # s0 forgotten at s3's end
    with pytest.raises(VerifyError) as caught:  # a recent one: reuse is detected
        run([agui_meta.Verify(max_closed_ids=3)], [*events, *sub("s3")])
    assert caught.value.rule == "subagent.id-reused"
    verify = agui_meta.Verify(max_closed_ids=3)
    reports = run([verify], [*events, *sub("s0"), *sub("child", parentSubagentRunId="gone")])
    assert verify.forgotten_ids >= 1
    assert [r.code for r in reports] == ["verify-forgot-ids"]
    assert "subagent 's0'" in reports[0].message


# ---------------------------------------------------------------------------------------------
# The run's tool-call tally: Store(max_tool_call_ids=...), Ledger(max_entries=...)


def test_the_store_tally_refuses_past_its_limit_with_a_warning_naming_the_call() -> None:
    store = agui_meta.Store(evict_completed=True, max_tool_call_ids=2)
    events = [RUN, *[e for i in range(4) for e in tool(f"c{i}", answered=False)]]
    reports = run([agui_meta.Accumulate(store)], events)
    assert store.pending_tool_call_ids == ["c0", "c1"]
    full = [r for r in reports if r.code == "tool-call-tally-full"]
    assert len(full) == 1 and full[0].severity == "warning"
    assert full[0].index == 7 and full[0].path == "$.toolCallId"  # c2's TOOL_CALL_START
    assert "'c2'" in full[0].message and "max_tool_call_ids=2" in full[0].message
    # A new run starts a new tally.
    run([agui_meta.Accumulate(store)], [RUN, *tool("d", answered=False)])
    assert store.pending_tool_call_ids == ["d"]


def test_the_store_tally_forgets_the_oldest_answered_id_with_an_info_report() -> None:
    store = agui_meta.Store(max_tool_call_ids=2)
    events = [RUN, *[e for i in range(3) for e in tool(f"c{i}")]]
    reports = run([agui_meta.Accumulate(store)], events)
    assert store.pending_tool_call_ids == []
    forgot = [r for r in reports if r.code == "tool-call-tally-forgot"]
    assert len(forgot) == 1 and forgot[0].severity == "info" and forgot[0].index == 12
    # c2 is remembered: restarting it leaves it answered; c0 was forgotten: it counts again.
    run([agui_meta.Accumulate(store)], [*tool("c2", answered=False), *tool("c0", answered=False)])
    assert store.pending_tool_call_ids == ["c0"]


def test_the_ledger_tally_is_bounded_by_max_entries_and_counted() -> None:
    ledger: agui_meta.Ledger[Any] = agui_meta.Ledger(max_entries=2)
    events = [RUN, *[e for i in range(4) for e in tool(f"c{i}", answered=False)], FINISH]
    run([agui_meta.Enforce(), ledger], events)
    record = ledger.runs[0]
    assert record.outcome.pending_tool_call_ids == ["c0", "c1"]  # type: ignore[union-attr]
    assert record.dropped_entries == 2 + 2  # records of c2, c3; the tally's c2, c3
    answered: agui_meta.Ledger[Any] = agui_meta.Ledger(max_entries=2)
    run(
        [agui_meta.Enforce(), answered],
        [RUN, *[e for i in range(3) for e in tool(f"c{i}")], FINISH],
    )
    # c2's record (at its START, and again at its RESULT); c0 forgotten when c2 was answered.
    assert answered.runs[0].dropped_entries == 2 + 1


# ---------------------------------------------------------------------------------------------
# Memory of one long run, with eviction: flat, whatever its length


def _sse(events: Iterator[Event]) -> Iterator[bytes]:
    batch: list[bytes] = []
    for event in events:
        batch.append(b"data: " + json.dumps(event).encode() + b"\n\n")
        if len(batch) == 512:
            yield b"".join(batch)
            batch = []
    yield b"".join(batch)


def _one_run(n: int, kind: str) -> Iterator[Event]:
    yield RUN
    for i in range(n):
        yield from text(f"message-{i:07d}") if kind == "messages" else tool(f"call-{i:07d}")
    yield FINISH


def _peak(n: int, kind: str, limit: int | None = None) -> int:
    """The traced peak of the default pipeline over one run of ``n`` items, with eviction;
    with ``limit``, every per-run bound is set to it (else the defaults, 10,000).

    Measured in a fresh interpreter: in a long test session CPython skips full collections
    while the objects that survived earlier tests outnumber new ones four to one, so cyclic
    garbage would pile up with the stream's length and the peak would measure the session.
    """
    code = (
        "from tests.test_bounds import _peak_here\n"
        f"_peak_here(1000, {kind!r}, {limit!r})  # imports and caches, outside the measurement\n"
        f"print(_peak_here({n}, {kind!r}, {limit!r}))"
    )
    done = python_child(code)
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.split()[-1])


def _peak_here(n: int, kind: str, limit: int | None = None) -> int:
    """:func:`_peak`, in this interpreter."""
    if limit is None:
        stages = agui_meta.DefaultStages(agui_meta.Store(evict_completed=True))
    else:
        stages = agui_meta.DefaultStages(
            agui_meta.Store(evict_completed=True, max_tool_call_ids=limit),
            verify=agui_meta.Verify(max_closed_ids=limit, max_open_items=limit),
            ledger=agui_meta.Ledger(max_entries=limit),
        )

    async def main() -> None:
        async with agui_meta.wrap(_sse(_one_run(n, kind)), *stages, on_report=_ignore) as stream:
            await stream.drain()

    # An evicted tool call and its message refer to each other, so they wait for the cyclic
    # collector, whose full collections CPython runs when the long-lived objects grew by a
    # quarter: a peak that follows the collector, not the tables. Collect the oldest
    # generation more often, so that what is measured is what the stages hold.
    thresholds = gc.get_threshold()
    gc.set_threshold(700, 2, 2)
    tracemalloc.start()
    try:
        anyio.run(main)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        gc.set_threshold(*thresholds)
        assert not list(stages.store.messages())


def _ignore(report: Report) -> None:
    pass


@pytest.mark.slow
def test_one_long_run_of_messages_with_eviction_costs_memory_independent_of_its_length() -> None:
    # Both lengths are past the default limits (10,000), so both hold full tables. Before the
    # bounds, the verifier's owner records held every message id of the run: 2x the peak here.
    small, large = _peak(12_000, "messages"), _peak(36_000, "messages")
    assert large < 1.4 * small, (small, large)


@pytest.mark.slow
def test_one_long_run_of_tool_calls_with_eviction_costs_memory_independent_of_its_length() -> None:
    # Small limits, so that both lengths are far past them (the defaults: the benchmark).
    # Before the bounds, the verifier's records and the store's and the ledger's tallies held
    # every call of the run. An evicted call and its message wait for the collector's full
    # collections (see _peak_here), so both lengths are past the point where the garbage
    # they leave reaches its steady peak (about 7,000 calls).
    small, large = _peak(8_000, "tool calls", limit=500), _peak(24_000, "tool calls", limit=500)
    assert large < 1.3 * small, (small, large)


def test_the_benchmarks_generated_runs_are_valid_streams() -> None:
    from benchmarks._memprobe import _generated

    for spec, runs, messages in (("messages:5", 1, 5), ("tools:5:2", 3, 10)):
        stages = agui_meta.DefaultStages()

        async def main(spec: str = spec, stages: Any = stages) -> None:
            async with agui_meta.wrap(_generated(spec), *stages, format="sse") as stream:
                await stream.drain()

        anyio.run(main)
        assert len(stages.ledger.runs) == runs
        assert all(run.status == "finished" for run in stages.ledger.runs)
        assert len(list(stages.store.messages())) == messages
