"""The ledger's times (event timestamp or time of receipt) and its tool-call records.

Expectations come from the events themselves (their timestamps, ids, deltas, metadata) and from
an injected clock, never from a previous run. The same records must come out of bare events and
of the accumulator's updates, fused or not (``tests/test_fuse.py`` compares the two paths).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import msgspec
import pytest

import agui_meta
from agui_meta import Ledger, run_sync
from agui_meta._ledger import ToolCallRecord
from tests.example_streams import GOOD, events
from tests.test_ledger import events_of


def _clock() -> Any:
    """A clock that ticks 1000, 1001, … (milliseconds) at each call."""
    return itertools.count(1000).__next__


def _bare(wire: list[dict[str, Any]], **kw: Any) -> agui_meta.Ledger[Any]:
    led = Ledger(clock=_clock(), **kw)
    run_sync([led], events_of(wire))
    return led


def _behind_the_accumulator(wire: list[dict[str, Any]], fuse: bool = True) -> Ledger[Any]:
    led = Ledger(clock=_clock())
    stages = agui_meta.DefaultStages(verify=False, ledger=led)
    run_sync([agui_meta.Enforce(), *stages], wire, fuse=fuse)
    return led


RUN = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 50},
    {"type": "STEP_STARTED", "stepName": "plan"},
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "search",
        "parentMessageId": "m1",
        "metadata": {"p.a": 1},
        "timestamp": 60,
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q": "é', "metadata": {"p.b": 2}},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"}', "metadata": {"p.a": 3}},
    {"type": "TOOL_CALL_END", "toolCallId": "c1", "timestamp": 70},
    {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "book"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": "{}"},
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "tm1",
        "toolCallId": "c1",
        "content": "ok",
        "metadata": {"p.r": True},
        "timestamp": 80,
    },
    {"type": "STEP_FINISHED", "stepName": "plan", "timestamp": 90},
    {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "helper", "timestamp": 91},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
]
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "timestamp": 99}


def test_times_come_from_the_event_timestamp_else_the_clock() -> None:
    led = _bare([*RUN, FINISHED])
    (run,) = led.runs
    assert (run.started_at, run.started_clock) == (50, "event")
    assert (run.ended_at, run.ended_clock) == (99, "event")
    (step,) = run.steps
    # STEP_STARTED has no timestamp: the first reading of the clock.
    assert (step.started_at, step.started_clock) == (1000, "receipt")
    assert (step.ended_at, step.ended_clock) == (90, "event")
    (sub,) = run.subagents
    assert (sub.started_at, sub.started_clock, sub.ended_clock) == (91, "event", "receipt")
    c1, c2 = run.tool_calls
    assert (c1.started_at, c1.ended_at, c1.result_at) == (60, 70, 80)
    assert {c1.started_clock, c1.ended_clock, c1.result_clock} == {"event"}
    assert c2.started_clock == "receipt" and c2.ended_at is None


def test_a_run_ended_by_the_stream_takes_the_latest_time_it_knew() -> None:
    led = _bare(RUN)
    (run,) = led.runs
    assert run.status == "incomplete"
    sub = run.subagents[0]
    assert (run.ended_at, run.ended_clock) == (sub.ended_at, "receipt")
    again = _bare([*RUN[:-1], {**RUN[0], "runId": "r2", "timestamp": 500}])
    first, second = again.runs
    assert (first.ended_at, first.ended_clock) == (91, "event")  # the subagent's start
    assert (second.started_at, second.ended_at) == (500, 500)


def test_tool_call_records_on_bare_events() -> None:
    led = _bare([*RUN, FINISHED])
    c1, c2 = led.runs[0].tool_calls
    args = '{"q": "é' + '"}'
    assert msgspec.to_builtins(c1) == {
        "toolCallId": "c1",
        "name": "search",
        "parentMessageId": "m1",
        "status": "answered",
        "pending": False,
        "argumentsLength": len(args),
        "metadata": {"p.a": 3, "p.b": 2},
        "resultMessageId": "tm1",
        "resultMetadata": {"p.r": True},
        "startedIndex": 2,
        "endedIndex": 5,
        "resultIndex": 8,
        "startedAt": 60,
        "startedClock": "event",
        "endedAt": 70,
        "endedClock": "event",
        "resultAt": 80,
        "resultClock": "event",
    }
    assert (c2.name, c2.status, c2.pending, c2.arguments_length) == ("book", "incomplete", True, 2)
    # The stream's pending calls (the reference's rule) agree with the records.
    assert led.runs[0].outcome.pending_tool_call_ids == ["c2"]  # type: ignore[union-attr]


@pytest.mark.parametrize("fuse", [True, False])
def test_behind_the_accumulator_the_records_are_the_stores(fuse: bool) -> None:
    led = _behind_the_accumulator([*RUN, FINISHED], fuse=fuse)
    assert led.to_builtins() == _bare([*RUN, FINISHED]).to_builtins()


def test_pending_follows_the_outcome_when_it_names_calls() -> None:
    named = {**FINISHED, "outcome": {"type": "success", "pendingToolCallIds": ["c1"]}}
    c1, c2 = _bare([*RUN, named]).runs[0].tool_calls
    assert (c1.pending, c2.pending) == (True, False)
    errored = _bare([*RUN, {"type": "RUN_ERROR", "message": "x"}]).runs[0]
    assert [t.pending for t in errored.tool_calls] == [False, True]
    assert errored.status == "error" and errored.ended_clock == "receipt"


def test_a_result_without_its_start_and_the_bound() -> None:
    wire = [
        RUN[0],
        {"type": "TOOL_CALL_RESULT", "messageId": "tm", "toolCallId": "ghost", "content": "x"},
        *[
            {"type": "TOOL_CALL_START", "toolCallId": f"c{i}", "toolCallName": "f"}
            for i in range(5)
        ],
        FINISHED,
    ]
    led = _bare(wire, max_entries=3)
    run = led.runs[0]
    ghost = run.tool_calls[0]
    assert (ghost.name, ghost.status, ghost.started_index) == (
        None,
        "answered",
        None,
    )
    assert [t.tool_call_id for t in run.tool_calls] == ["ghost", "c0", "c1"]
    # The tally that derives the pending calls is bounded by max_entries too: it tracks the
    # first three pending calls; each call past a bound is counted (c2-c4 as records, c3-c4 in
    # the tally), never silently lost.
    assert run.dropped_entries == 3 + 2
    assert run.outcome.pending_tool_call_ids == ["c0", "c1", "c2"]  # type: ignore[union-attr]


def test_before_chunk_expansion_a_chunk_is_timed_by_its_own_timestamp() -> None:
    wire = [
        RUN[0],
        {
            "type": "TOOL_CALL_CHUNK",
            "toolCallId": "c",
            "toolCallName": "f",
            "delta": "{",
            "timestamp": 61,
            "metadata": {"k": 1},
        },
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "delta": "}", "metadata": {"j": 2}},
        FINISHED,
    ]
    (call,) = _bare(wire).runs[0].tool_calls
    assert (call.started_at, call.started_clock, call.name) == (61, "event", "f")
    assert (call.arguments_length, call.metadata, call.pending) == (2, {"k": 1, "j": 2}, True)


def test_the_json_reads_back() -> None:
    led = _bare([*RUN, FINISHED])
    back = msgspec.json.decode(led.to_json(), type=agui_meta.LedgerSnapshot)
    assert back.runs[0].tool_calls[0] == led.runs[0].tool_calls[0]
    assert isinstance(back.runs[0].tool_calls[0], ToolCallRecord)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_the_bundled_streams(name: str) -> None:
    wire = events(name)
    led = _behind_the_accumulator(wire)
    starts = [e for e in wire if e["type"] == "RUN_STARTED"]
    assert [r.started_at for r in led.runs] == [e.get("timestamp") for e in starts]
    # Calls open at TOOL_CALL_START or at a TOOL_CALL_CHUNK naming them; both kinds of
    # event in these streams name their call on every delta.
    kinds = ("TOOL_CALL_START", "TOOL_CALL_CHUNK", "TOOL_CALL_ARGS")
    ids = list(dict.fromkeys(e["toolCallId"] for e in wire if e["type"] in kinds[:2]))
    records = [t for r in led.runs for t in r.tool_calls]
    assert [t.tool_call_id for t in records] == ids
    for record in records:
        mine = [e for e in wire if e.get("toolCallId") == record.tool_call_id]
        args = "".join(e.get("delta", "") for e in mine if e["type"] in kinds)
        assert record.arguments_length == len(args)
        results = [e for e in mine if e["type"] == "TOOL_CALL_RESULT"]
        assert (record.status == "answered") is bool(results)
        if results:
            assert record.result_message_id == results[0]["messageId"]
        # A TOOL_CALL_START, or the START that expand_chunks synthesizes from a chunk (which
        # has no timestamp, as the reference's): timed by the event that opened the call.
        assert (record.started_at, record.started_clock) == (mine[0]["timestamp"], "event")
    assert json.loads(led.to_json())["runs"]


def test_records_behind_the_accumulator_are_plain_data() -> None:
    # The store's merged metadata is copied into the record, so any encoder writes it.
    led = _behind_the_accumulator([*RUN, FINISHED])
    for tool in led.runs[0].tool_calls:
        assert tool.metadata is None or type(tool.metadata) is dict
        assert tool.result_metadata is None or type(tool.result_metadata) is dict
    assert msgspec.to_builtins(led.runs[0])["toolCalls"][0]["metadata"] == {"p.a": 3, "p.b": 2}
