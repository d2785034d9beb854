"""The run ledger (agui_meta.Ledger): records run metadata, passes the stream through untouched.

Expected values come from the input streams themselves (the ledger records metadata as sent),
from the specification, and from the reference client: the pending tool calls and interrupts
that ``defaultApplyEvents`` hands to ``onRunFinishedEvent`` and the sums of ``aggregateTokenUsage``
were produced by ``tests/ledger_ref.cjs`` on these very streams, and
:func:`test_reference_agrees` re-runs that script when the oracle is available.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_meta import Usage, UsageError, aggregate_token_usage, run_sync
from agui_meta._events import AnyEvent, Event, Interrupt, TokenUsage
from agui_meta._ledger import (
    Ledger,
    LedgerSnapshot,
    RunCancelled,
    RunInterrupted,
    RunRecord,
    RunSuccess,
)
from agui_meta._tokens import COUNTS
from agui_meta.events import decode_event

# ---------------------------------------------------------------------------------------------
# Streams (AG-UI wire JSON)


def _started(run: str, **kw: Any) -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": "t1", "runId": run, **kw}


def _finished(run: str, **kw: Any) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": "t1", "runId": run, **kw}


def _tool_call(call: str, **kw: Any) -> list[dict[str, Any]]:
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "lookup", **kw},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": call},
    ]


BIG = 123456789012345678901234567890

USAGE_R1 = [
    {"provider": "openai", "model": "gpt", "inputTokens": 10, "outputTokens": 5},
    {"provider": "anthropic", "model": "claude", "inputTokens": 7, "cachedInputTokens": 3},
    {
        "provider": "openai",
        "model": "gpt",
        "inputTokens": 1,
        "totalTokens": 2,
        "reasoningTokens": 0,
    },
]
INTERRUPTS_R4 = [
    {
        "id": "i1",
        "reason": "approval",
        "toolCallId": "c9",
        "metadata": {"acme.risk": "high", "acme.n": None},
    },
    {"id": "i2", "reason": "input", "subagentRunId": "sa1"},
]

#: Six runs of one thread, valid for the reference verifier.
MULTI: list[dict[str, Any]] = [
    _started("r1", protocolVersion="1.0", metadata={"acme.trace": "abc", "ag-ui": {"x": 1}}),
    {"type": "STEP_STARTED", "stepName": "plan", "metadata": {"acme.step": 1}},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "metadata": {"acme.tm": True}},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    *_tool_call("c1", parentMessageId="m1"),
    *_tool_call("c2", parentMessageId="m1"),
    {"type": "TOOL_CALL_RESULT", "messageId": "t-c1", "toolCallId": "c1", "content": "ok"},
    {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": "sa1",
        "name": "researcher",
        "description": "finds things",
        "parentToolCallId": "c2",
        "parentMessageId": "m1",
        "metadata": {"acme.sub": "start"},
    },
    {"type": "STEP_STARTED", "stepName": "tools", "subagentRunId": "sa1"},
    {
        "type": "STEP_FINISHED",
        "stepName": "tools",
        "subagentRunId": "sa1",
        "metadata": {"acme.ms": 12},
    },
    {
        "type": "CUSTOM",
        "name": "progress",
        "value": {"pct": 50},
        "subagentRunId": "sa1",
        "metadata": {"acme.c": None},
    },
    {
        "type": "RAW",
        "event": None,
        "source": "provider",
        "metadata": {"acme.big": BIG, "acme.f": 1.0},
    },
    {"type": "RAW", "event": {"k": 1}},
    {
        "type": "SUBAGENT_FINISHED",
        "subagentRunId": "sa1",
        "result": {"found": 3},
        "outcome": {"type": "suspended", "interruptIds": ["i9"]},
        "metadata": {"acme.sub": "end"},
    },
    {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": "sa2",
        "name": "coder",
        "parentSubagentRunId": "sa1",
    },
    {
        "type": "SUBAGENT_ERROR",
        "subagentRunId": "sa2",
        "message": "crashed",
        "code": "E42",
        "metadata": {"acme.err": [1, 2]},
    },
    {"type": "STEP_FINISHED", "stepName": "plan", "metadata": {"acme.step": 2}},
    _finished(
        "r1",
        result={"answer": 42},
        metadata={"acme.finish": "stop", "acme.none": None},
        usage=USAGE_R1,
    ),
    _started("r2", parentRunId="r1"),
    *_tool_call("c3"),
    _finished("r2", outcome={"type": "success", "pendingToolCallIds": ["x1", "x2"]}),
    _started("r3"),
    *_tool_call("c4"),
    *_tool_call("c5"),
    {"type": "TOOL_CALL_RESULT", "messageId": "t-c5", "toolCallId": "c5", "content": "ok"},
    _finished("r3", outcome={"type": "success", "pendingToolCallIds": []}),
    _started("r4"),
    _finished("r4", result="waiting", outcome={"type": "interrupt", "interrupts": INTERRUPTS_R4}),
    _started("r5"),
    _finished("r5", outcome={"type": "cancelled"}, metadata={"acme.why": "user"}),
    _started("r6", metadata={"acme.try": 2}),
    *_tool_call("c6"),
    {
        "type": "RUN_ERROR",
        "message": "model overloaded",
        "code": "overloaded",
        "usage": [{"provider": "openai", "inputTokens": 4}],
        "metadata": {"acme.retry": True},
    },
]

#: Chunked tool calls (the ledger placed before chunk expansion sees only chunks).
CHUNKS: list[dict[str, Any]] = [
    _started("r1"),
    {"type": "TOOL_CALL_CHUNK", "toolCallId": "k1", "toolCallName": "f", "delta": "{"},
    {"type": "TOOL_CALL_CHUNK", "toolCallId": "k1", "delta": "}"},
    {"type": "TOOL_CALL_CHUNK", "toolCallId": "k2", "toolCallName": "g"},
    {"type": "TOOL_CALL_RESULT", "messageId": "t-k2", "toolCallId": "k2", "content": "ok"},
    _finished("r1"),
]

#: A result that arrives before its call starts still answers it.
RESULT_FIRST: list[dict[str, Any]] = [
    _started("r1"),
    {"type": "TOOL_CALL_RESULT", "messageId": "t-c1", "toolCallId": "c1", "content": "early"},
    *_tool_call("c2"),
    *_tool_call("c1"),
    _finished("r1"),
]

AGGREGATE: list[dict[str, Any]] = [
    {"provider": "a", "model": "m", "inputTokens": 1},
    {"model": "m", "outputTokens": 2},
    {"provider": "a", "model": "m", "inputTokens": 3, "outputTokens": 4, "totalTokens": 0},
    {"provider": "", "model": "m", "totalTokens": 5},
    {"provider": "b", "cacheWriteInputTokens": 9},
    {"provider": "a", "model": "m2"},
    {"provider": "a", "model": "m", "cachedInputTokens": 2},
]

# What the reference client reports on these streams (tests/ledger_ref.cjs): per ended run, the
# onRunFinishedEvent outcome and pendingToolCallIds, and aggregateTokenUsage of the usage.
REF_MULTI_PENDING = [["c2"], ["x1", "x2"], ["c4"]]
REF_MULTI_USAGE_R1 = [
    {
        "provider": "openai",
        "model": "gpt",
        "inputTokens": 11,
        "outputTokens": 5,
        "totalTokens": 2,
        "reasoningTokens": 0,
    },
    {"provider": "anthropic", "model": "claude", "inputTokens": 7, "cachedInputTokens": 3},
]
REF_CHUNKS_PENDING = ["k1"]
REF_RESULT_FIRST_PENDING = ["c2"]
REF_AGGREGATE = [
    {
        "provider": "a",
        "model": "m",
        "inputTokens": 4,
        "outputTokens": 4,
        "totalTokens": 0,
        "cachedInputTokens": 2,
    },
    {"model": "m", "outputTokens": 2, "totalTokens": 5},
    {"provider": "b", "cacheWriteInputTokens": 9},
    {"provider": "a", "model": "m2"},
]


# ---------------------------------------------------------------------------------------------
# Helpers


def events_of(wire: list[dict[str, Any]]) -> list[Event]:
    return [msgspec.json.decode(msgspec.json.encode(e), type=AnyEvent) for e in wire]


def at(wire: list[dict[str, Any]], type_: str, start: int = 0, **fields: Any) -> int:
    """The index of the first event of ``type_`` with ``fields``, from ``start``."""
    for i in range(start, len(wire)):
        e = wire[i]
        if e["type"] == type_ and all(e.get(k) == v for k, v in fields.items()):
            return i
    raise LookupError(type_)


def counts(wire: list[dict[str, Any]]) -> dict[str, int]:
    result: dict[str, int] = {}
    for e in wire:
        result[e["type"]] = result.get(e["type"], 0) + 1
    return result


def run_ledger(wire: list[dict[str, Any]], **kw: Any) -> tuple[Ledger[Any], list[RunRecord]]:
    ended: list[RunRecord] = []
    led = Ledger(ended.append, **kw)
    events = events_of(wire)
    out = run_sync([led], events)
    assert len(out) == len(events)
    assert all(a is b for a, b in zip(out, events, strict=True))
    return led, ended


#: What the ledger records about times and tool calls, tested on their own in
#: ``tests/test_ledger_times.py``; :func:`core` leaves it out of the records compared here.
TIMES_AND_TOOLS = frozenset({"startedAt", "startedClock", "endedAt", "endedClock", "toolCalls"})


def core(value: Any) -> Any:
    """A record (as builtins) without its times and tool-call records, at any depth."""
    if isinstance(value, list):
        return [core(v) for v in value]
    if isinstance(value, dict):
        return {k: core(v) for k, v in value.items() if k not in TIMES_AND_TOOLS}
    return value


@dataclass(frozen=True)
class FakeUpdate:
    """Shaped like the accumulator's ``Update(event, item, done)``."""

    event: Event
    item: Any
    done: bool


# ---------------------------------------------------------------------------------------------
# The multi-run stream


def test_multi_run_records() -> None:
    led, ended = run_ledger(MULTI)
    assert [r.run_id for r in led.runs] == ["r1", "r2", "r3", "r4", "r5", "r6"]
    assert [r.status for r in led.runs] == ["finished"] * 5 + ["error"]
    assert ended == led.runs
    assert led.current is None
    assert led.dropped_runs == 0

    r1_end = at(MULTI, "RUN_FINISHED")
    sa2 = at(MULTI, "SUBAGENT_STARTED", subagentRunId="sa2")
    r1 = core(led.to_builtins()["runs"][0])
    assert r1 == {
        "threadId": "t1",
        "runId": "r1",
        "protocolVersion": "1.0",
        "status": "finished",
        "startedIndex": 0,
        "finishedIndex": r1_end,
        "startedMetadata": {"acme.trace": "abc", "ag-ui": {"x": 1}},
        "finishedMetadata": {"acme.finish": "stop", "acme.none": None},
        "outcome": {
            "type": "success",
            "result": {"answer": 42},
            "pendingToolCallIds": REF_MULTI_PENDING[0],
            "pendingFrom": "stream",
        },
        "usage": USAGE_R1,
        "aggregatedUsage": REF_MULTI_USAGE_R1,
        "steps": [
            {
                "name": "plan",
                "status": "finished",
                "startedIndex": at(MULTI, "STEP_STARTED", stepName="plan"),
                "finishedIndex": at(MULTI, "STEP_FINISHED", stepName="plan"),
                "startedMetadata": {"acme.step": 1},
                "finishedMetadata": {"acme.step": 2},
            },
            {
                "name": "tools",
                "subagentRunId": "sa1",
                "status": "finished",
                "startedIndex": at(MULTI, "STEP_STARTED", stepName="tools"),
                "finishedIndex": at(MULTI, "STEP_FINISHED", stepName="tools"),
                "finishedMetadata": {"acme.ms": 12},
            },
        ],
        "subagents": [
            {
                "subagentRunId": "sa1",
                "name": "researcher",
                "description": "finds things",
                "parentToolCallId": "c2",
                "parentMessageId": "m1",
                "status": "finished",
                "startedIndex": at(MULTI, "SUBAGENT_STARTED"),
                "endedIndex": at(MULTI, "SUBAGENT_FINISHED"),
                "startedMetadata": {"acme.sub": "start"},
                "finishedMetadata": {"acme.sub": "end"},
                "outcome": "suspended",
                "interruptIds": ["i9"],
                "result": {"found": 3},
            },
            {
                "subagentRunId": "sa2",
                "name": "coder",
                "parentSubagentRunId": "sa1",
                "status": "error",
                "startedIndex": sa2,
                "endedIndex": at(MULTI, "SUBAGENT_ERROR"),
                "errorMetadata": {"acme.err": [1, 2]},
                "errorMessage": "crashed",
                "errorCode": "E42",
            },
        ],
        "rawEvents": [
            {
                "index": at(MULTI, "RAW"),
                "source": "provider",
                "metadata": {"acme.big": BIG, "acme.f": 1.0},
            },
            {"index": at(MULTI, "RAW") + 1},
        ],
        "customEvents": [
            {
                "index": at(MULTI, "CUSTOM"),
                "name": "progress",
                "subagentRunId": "sa1",
                "metadata": {"acme.c": None},
            }
        ],
        "eventCounts": counts(MULTI[: r1_end + 1]),
        "droppedEntries": 0,
    }
    assert list(r1["eventCounts"]) == list(counts(MULTI[: r1_end + 1]))  # first-appearance order


def test_multi_run_outcomes() -> None:
    led, _ = run_ledger(MULTI)
    _, r2, r3, r4, r5, r6 = led.runs
    assert r2.parent_run_id == "r1"
    # A non-empty list named by the outcome wins over the stream's tally ...
    assert r2.outcome == RunSuccess(
        pending_tool_call_ids=REF_MULTI_PENDING[1], pending_from="outcome"
    )
    # ... an empty one does not: the pending calls are derived.
    assert r3.outcome == RunSuccess(
        pending_tool_call_ids=REF_MULTI_PENDING[2], pending_from="stream"
    )
    assert r3.outcome.pending_tool_call_ids == ["c4"]
    interrupts = msgspec.convert(INTERRUPTS_R4, list[Interrupt])
    assert r4.outcome == RunInterrupted(result="waiting", interrupts=interrupts)
    assert isinstance(r4.outcome, RunInterrupted)
    assert r4.outcome.interrupts[0].metadata == {"acme.risk": "high", "acme.n": None}
    assert r5.outcome == RunCancelled()
    assert r5.finished_metadata == {"acme.why": "user"}
    assert r6.outcome is None
    assert (r6.error_message, r6.error_code) == ("model overloaded", "overloaded")
    assert r6.error_metadata == {"acme.retry": True}
    assert r6.started_metadata == {"acme.try": 2}
    assert r6.usage == [Usage(provider="openai", input_tokens=4)]
    assert r6.aggregated_usage == [Usage(provider="openai", input_tokens=4)]
    assert r6.usage[0].model is None  # absent: None, never the wire's UNSET
    assert r6.error_index == len(MULTI) - 1
    assert r6.finished_index is None
    # Counts per run partition the stream.
    total: dict[str, int] = {}
    for r in led.runs:
        for k, v in r.event_counts.items():
            total[k] = total.get(k, 0) + v
    assert total == counts(MULTI)
    # As the reference's agent.pendingInterrupts: reset by the later runs' RUN_FINISHED.
    assert led.pending_interrupts == []


def test_metadata_is_shared_not_copied() -> None:
    events = events_of(MULTI)
    led = Ledger()
    run_sync([led], events)
    r1 = led.runs[0]
    assert r1.started_metadata is events[0].metadata
    assert r1.raw_events[0].metadata is events[at(MULTI, "RAW")].metadata


def test_records_are_not_tracked_by_the_cyclic_collector() -> None:
    # A record holds what the ledger made of JSON (lists, dicts, strings, numbers, other
    # records), never itself or its ledger: no record can be part of a reference cycle, so
    # none is an object the collector walks (a process of many pipelines keeps many).
    import gc

    led, _ = run_ledger(MULTI)
    records: list[Any] = []
    for run in led.runs:
        records += [run, *run.steps, *run.subagents, *run.tool_calls, *run.raw_events]
        records += [*run.custom_events, *([run.outcome] if run.outcome else [])]
    kinds = {type(r).__name__ for r in records}
    assert {"RunRecord", "StepRecord", "SubagentRecord", "ToolCallRecord", "RawRecord"} <= kinds
    assert not any(gc.is_tracked(r) for r in records)
    assert not gc.is_tracked(led.snapshot())


def test_pending_interrupts_follow_the_last_run() -> None:
    led, _ = run_ledger(MULTI[: at(MULTI, "RUN_FINISHED", runId="r4") + 1])
    assert led.pending_interrupts == msgspec.convert(INTERRUPTS_R4, list[Interrupt])


def test_pending_from_chunks_before_expansion() -> None:
    led, _ = run_ledger(CHUNKS)
    assert led.runs[0].outcome == RunSuccess(pending_tool_call_ids=REF_CHUNKS_PENDING)


def test_result_before_start_answers_the_call() -> None:
    led, _ = run_ledger(RESULT_FIRST)
    assert led.runs[0].outcome == RunSuccess(pending_tool_call_ids=REF_RESULT_FIRST_PENDING)


def test_tally_is_per_run() -> None:
    wire = [_started("r1"), *_tool_call("a"), _finished("r1"), _started("r2"), _finished("r2")]
    led, _ = run_ledger(wire)
    assert [r.outcome for r in led.runs] == [
        RunSuccess(pending_tool_call_ids=["a"]),
        RunSuccess(pending_tool_call_ids=[]),
    ]


# ---------------------------------------------------------------------------------------------
# Token usage


def _wire_usage(wire: list[dict[str, Any]]) -> list[TokenUsage]:
    return msgspec.convert(wire, list[TokenUsage])


def _usage(wire: list[dict[str, Any]]) -> list[Usage]:
    return msgspec.convert(wire, list[Usage])


def test_aggregate_like_the_reference() -> None:
    result = aggregate_token_usage(_wire_usage(AGGREGATE))
    assert msgspec.to_builtins(result) == REF_AGGREGATE
    # Entries as agui-meta reports them sum the same.
    assert aggregate_token_usage(_usage(AGGREGATE)) == result


def test_aggregate_empty_and_zero() -> None:
    assert aggregate_token_usage([]) == []
    # Zero is reported, not absent; an entry with no counts yields a labels-only group.
    assert aggregate_token_usage(
        _wire_usage([{"provider": "p", "inputTokens": 0}, {"provider": "p"}])
    ) == [Usage(provider="p", input_tokens=0)]


def test_aggregate_keys_on_the_pair() -> None:
    # Documented deviation: the reference's string key ("a b" + " " + "c") merges these two.
    wire = [
        {"provider": "a b", "model": "c", "inputTokens": 1},
        {"provider": "a", "model": "b c", "inputTokens": 2},
    ]
    assert aggregate_token_usage(_wire_usage(wire)) == _usage(wire)


def test_aggregate_is_exact_beyond_double_precision() -> None:
    n = 2**53 - 1
    assert aggregate_token_usage(_wire_usage([{"inputTokens": n}, {"inputTokens": n}])) == [
        Usage(input_tokens=2 * n)
    ]


_LABELS = st.sampled_from([None, "", "p", "a b"])
_COUNT = st.one_of(st.none(), st.integers(0, 2**53 - 1))


@st.composite
def _entries(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Usage entries by field name (snake case), absent members left out."""
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        entry = {"provider": draw(_LABELS), "model": draw(_LABELS)}
        entry.update({name: draw(_COUNT) for name in COUNTS})
        entries.append({k: v for k, v in entry.items() if v is not None})
    return entries


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_usage_has_the_wire_entrys_fields() -> None:
    # Usage.from_wire copies TokenUsage field by field: the two must name the same fields.
    assert Usage.__struct_fields__ == TokenUsage.__struct_fields__


@settings(max_examples=300, deadline=None)
@given(_entries())
def test_usage_from_the_wire_and_its_sum(by_name: list[dict[str, Any]]) -> None:
    wire = [{_camel(k): v for k, v in entry.items()} for entry in by_name]
    entries = _wire_usage(wire)
    # Each entry: its fields, absent as None.
    for entry in entries:
        fields = msgspec.structs.asdict(entry)
        assert Usage.from_wire(entry) == Usage(
            **{k: None if v is msgspec.UNSET else v for k, v in fields.items()}
        )
    # The sum: one group per (provider, model), absent with empty, labels of the first entry,
    # a count summed over the entries that report it (one entry or many alike).
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in by_name:
        key = (entry.get("provider") or "", entry.get("model") or "")
        group = groups.setdefault(
            key, {"provider": entry.get("provider"), "model": entry.get("model")}
        )
        for name in COUNTS:
            if name in entry:
                group[name] = group.get(name, 0) + entry[name]
    assert aggregate_token_usage(entries) == [Usage(**g) for g in groups.values()]
    assert aggregate_token_usage(_usage(wire)) == aggregate_token_usage(entries)


# ---------------------------------------------------------------------------------------------
# Run boundaries


def test_stream_starting_with_run_error() -> None:
    wire = [{"type": "RUN_ERROR", "message": "no agent", "metadata": {"acme.k": 1}}]
    led, ended = run_ledger(wire)
    (record,) = ended
    assert core(msgspec.to_builtins(record)) == {
        "status": "error",
        "errorIndex": 0,
        "errorMetadata": {"acme.k": 1},
        "errorMessage": "no agent",
        "usage": [],
        "aggregatedUsage": [],
        "steps": [],
        "subagents": [],
        "rawEvents": [],
        "customEvents": [],
        "eventCounts": {"RUN_ERROR": 1},
        "droppedEntries": 0,
    }
    assert led.runs == [record]


def test_run_error_after_run_finished_amends_the_run() -> None:
    wire = [
        _started("r1"),
        _finished("r1", usage=[{"provider": "p", "inputTokens": 1}]),
        {
            "type": "RUN_ERROR",
            "message": "aborted",
            "code": "abort",
            "usage": [{"provider": "p", "inputTokens": 2, "outputTokens": 3}],
        },
        _started("r2"),
        _finished("r2"),
    ]
    statuses: list[tuple[str, str]] = []
    led = Ledger(lambda r: statuses.append((str(r.run_id), r.status)))
    run_sync([led], events_of(wire))
    assert statuses == [("r1", "finished"), ("r1", "error"), ("r2", "finished")]
    r1 = led.runs[0]
    assert len(led.runs) == 2
    assert (r1.finished_index, r1.error_index) == (1, 2)
    assert r1.outcome == RunSuccess()
    assert r1.error_message == "aborted"
    assert r1.event_counts == {"RUN_STARTED": 1, "RUN_FINISHED": 1, "RUN_ERROR": 1}
    assert r1.usage == _usage(
        [
            {"provider": "p", "inputTokens": 1},
            {"provider": "p", "inputTokens": 2, "outputTokens": 3},
        ]
    )
    assert r1.aggregated_usage == [Usage(provider="p", input_tokens=3, output_tokens=3)]


def test_events_before_the_first_run_and_a_run_started_twice() -> None:
    # Unverified streams: the ledger records what it sees.
    wire = [
        {"type": "CUSTOM", "name": "hello", "value": None},
        _started("r1"),
        {"type": "STEP_STARTED", "stepName": "s"},
        _started("r2"),
        _finished("r2"),
        {"type": "RAW", "event": 1},
        {"type": "RUN_ERROR", "message": "late"},
    ]
    led, ended = run_ledger(wire)
    assert ended == led.runs
    pre, r1, r2, post = led.runs
    assert (pre.run_id, pre.status, pre.event_counts) == (
        None,
        "incomplete",
        {"CUSTOM": 1},
    )
    assert pre.custom_events[0].name == "hello"
    assert (r1.run_id, r1.status) == ("r1", "incomplete")
    assert r1.steps[0].status == "incomplete"
    assert (r2.run_id, r2.status) == ("r2", "finished")
    # RAW after RUN_FINISHED opens an id-less record, which the RUN_ERROR then ends.
    assert (post.run_id, post.status, post.error_message) == (None, "error", "late")
    assert post.event_counts == {"RAW": 1, "RUN_ERROR": 1}


def test_run_finished_names_an_unstarted_run() -> None:
    wire = [{"type": "TEXT_MESSAGE_START", "messageId": "m"}, _finished("r9")]
    led, _ = run_ledger(wire)
    (record,) = led.runs
    assert (record.thread_id, record.run_id, record.status) == ("t1", "r9", "finished")
    assert record.started_index is None


def test_close_ends_an_open_run_as_incomplete() -> None:
    wire = [
        _started("r1"),
        {"type": "STEP_STARTED", "stepName": "s"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "sa", "name": "n"},
    ]
    led = Ledger()
    events = events_of(wire)
    for e in events:
        led.feed(e)
    assert led.current is not None and led.current.status == "running"
    assert led.runs == [led.current]
    seen: list[str] = []
    led.on_run = lambda r: seen.append(r.status)
    led.close()
    led.close()  # idempotent
    assert seen == ["incomplete"]
    (record,) = led.runs
    assert record.steps[0].status == "incomplete"
    assert record.subagents[0].status == "incomplete"
    assert record.started_index == -1  # fed outside a pipeline
    assert led.current is None


def test_callback_order_and_record_state() -> None:
    seen: list[tuple[str, str, int]] = []

    def on_run(record: RunRecord) -> None:
        # The record is complete when the callback runs.
        seen.append((str(record.run_id), record.status, sum(record.event_counts.values())))

    led = Ledger(on_run)
    run_sync([led], events_of([*MULTI, _started("r7"), *_tool_call("z")]))
    assert seen == [(str(r.run_id), r.status, sum(r.event_counts.values())) for r in led.runs]
    assert [s[0] for s in seen] == ["r1", "r2", "r3", "r4", "r5", "r6", "r7"]
    assert seen[-1] == ("r7", "incomplete", 4)


def test_steps_repeat_and_unmatched_finish() -> None:
    wire = [
        _started("r1"),
        {"type": "STEP_FINISHED", "stepName": "orphan", "metadata": {"k": 0}},
        {"type": "STEP_STARTED", "stepName": "s", "metadata": {"k": 1}},
        {"type": "STEP_FINISHED", "stepName": "s"},
        {"type": "STEP_STARTED", "stepName": "s", "metadata": {"k": 2}},
        {"type": "STEP_STARTED", "stepName": "s", "subagentRunId": "x"},
        {"type": "STEP_FINISHED", "stepName": "s", "metadata": {"k": 3}},
        {"type": "STEP_FINISHED", "stepName": "s", "subagentRunId": "x"},
        _finished("r1"),
    ]
    led, _ = run_ledger(wire)
    steps = core(msgspec.to_builtins(led.runs[0].steps))
    assert steps == [
        {"name": "orphan", "status": "finished", "finishedIndex": 1, "finishedMetadata": {"k": 0}},
        {
            "name": "s",
            "status": "finished",
            "startedIndex": 2,
            "finishedIndex": 3,
            "startedMetadata": {"k": 1},
        },
        {
            "name": "s",
            "status": "finished",
            "startedIndex": 4,
            "finishedIndex": 6,
            "startedMetadata": {"k": 2},
            "finishedMetadata": {"k": 3},
        },
        {
            "name": "s",
            "subagentRunId": "x",
            "status": "finished",
            "startedIndex": 5,
            "finishedIndex": 7,
        },
    ]


def test_subagent_finished_without_outcome_is_success() -> None:
    wire = [
        _started("r1"),
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "ghost"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "success"}},
    ]
    led, _ = run_ledger(wire)
    ghost, sub = led.runs[0].subagents
    assert (ghost.name, ghost.status, ghost.outcome) == (None, "finished", "success")
    assert ghost.started_index is None
    assert (sub.name, sub.outcome, sub.interrupt_ids) == ("n", "success", None)


# ---------------------------------------------------------------------------------------------
# Placement: before or after accumulation


def test_after_accumulation_records_the_same() -> None:
    events = events_of(MULTI)
    plain = Ledger(clock=lambda: 1.0)
    run_sync([plain], events)
    updates = [FakeUpdate(e, None, False) for e in events]
    wrapped = Ledger(clock=lambda: 1.0)
    out = run_sync([wrapped], updates)
    assert all(a is b for a, b in zip(out, updates, strict=True))
    assert len(out) == len(updates)
    assert wrapped.to_json() == plain.to_json()


def test_other_items_pass_through_unrecorded() -> None:
    items: list[Any] = ["text", 3, None, FakeUpdate.__new__(FakeUpdate)]
    led = Ledger()
    out = run_sync([led], items)
    assert all(a is b for a, b in zip(out, items, strict=True))
    assert led.runs == []


def test_event_subclass_is_recognised() -> None:
    from agui_meta._events import RunStartedEvent

    class MyStart(RunStartedEvent, kw_only=True, frozen=True):
        pass

    led = Ledger()
    run_sync([led], [MyStart(thread_id="t", run_id="r")])
    assert led.runs[0].run_id == "r"
    assert led.runs[0].event_counts == {"RUN_STARTED": 1}


# ---------------------------------------------------------------------------------------------
# JSON


def test_json_round_trips_and_keeps_metadata_exactly() -> None:
    led, _ = run_ledger(MULTI)
    data = led.to_json()
    assert msgspec.json.decode(data, type=LedgerSnapshot) == led.snapshot()
    assert msgspec.json.decode(data) == led.to_builtins()
    # The snapshot and each record serialise the same way: bytes, and dicts for json.dumps.
    assert led.snapshot().to_json() == data
    assert json.loads(json.dumps(led.snapshot().to_builtins())) == led.to_builtins()
    for n, record in enumerate(led.runs):
        assert isinstance(record.to_json(), bytes)
        assert json.loads(record.to_json()) == json.loads(json.dumps(record.to_builtins()))
        assert record.to_builtins() == led.to_builtins()["runs"][n]
    raw = json.loads(data)["runs"][0]["rawEvents"][0]["metadata"]
    assert raw == {"acme.big": BIG, "acme.f": 1.0}
    assert type(raw["acme.big"]) is int and type(raw["acme.f"]) is float
    # The metadata objects appear byte for byte as sent.
    for e in MULTI:
        if "metadata" in e and e["type"] in ("RUN_STARTED", "RUN_FINISHED", "RAW", "CUSTOM"):
            assert msgspec.json.encode(e["metadata"]) in data
    assert b'"acme.none":null' in data
    assert json.loads(data)["droppedRuns"] == 0


def test_empty_metadata_stays_distinct_from_absent() -> None:
    led, _ = run_ledger([_started("r1", metadata={}), _finished("r1")])
    record = led.to_builtins()["runs"][0]
    assert record["startedMetadata"] == {}
    assert "finishedMetadata" not in record


# ---------------------------------------------------------------------------------------------
# Bounds


def test_max_runs_keeps_the_newest() -> None:
    wire: list[dict[str, Any]] = []
    for i in range(5):
        wire += [_started(f"r{i}"), _finished(f"r{i}")]
    led, ended = run_ledger(wire, max_runs=2)
    assert [r.run_id for r in ended] == ["r0", "r1", "r2", "r3", "r4"]
    assert [r.run_id for r in led.runs] == ["r3", "r4"]
    assert led.dropped_runs == 3
    assert json.loads(led.to_json())["droppedRuns"] == 3


def test_max_runs_zero_still_reports() -> None:
    led, ended = run_ledger([_started("r1"), _finished("r1")], max_runs=0)
    assert [r.run_id for r in ended] == ["r1"]
    assert led.runs == []
    assert led.dropped_runs == 1


def test_max_entries_bounds_per_run_lists() -> None:
    wire = [
        _started("r1"),
        *({"type": "RAW", "event": i} for i in range(3)),
        *({"type": "CUSTOM", "name": f"c{i}", "value": i} for i in range(3)),
        {"type": "STEP_STARTED", "stepName": "a"},
        {"type": "STEP_STARTED", "stepName": "b"},
        {"type": "STEP_STARTED", "stepName": "c"},
        {"type": "STEP_FINISHED", "stepName": "c"},
    ]
    led, _ = run_ledger(wire, max_entries=2)
    record = led.runs[0]
    assert [r.index for r in record.raw_events] == [1, 2]
    assert [c.name for c in record.custom_events] == ["c0", "c1"]
    assert [s.name for s in record.steps] == ["a", "b"]
    assert record.dropped_entries == 1 + 1 + 2  # RAW, CUSTOM, step c started and finished
    assert record.event_counts["RAW"] == 3


@pytest.mark.parametrize("kw", [{"max_runs": -1}, {"max_entries": -1}])
def test_bad_bounds(kw: dict[str, int]) -> None:
    with pytest.raises(UsageError, match="must be >= 0"):
        Ledger(**kw)


def test_callback_errors_propagate() -> None:
    def boom(record: RunRecord) -> None:
        raise RuntimeError("sink down")

    with pytest.raises(RuntimeError, match="sink down"):
        run_sync([Ledger(boom)], events_of([_started("r1"), _finished("r1")]))


# ---------------------------------------------------------------------------------------------
# The reference, live


def test_reference_agrees() -> None:
    """Re-derive the reference values above with the official client, when it is available."""
    oracle = pytest.importorskip("oracle")
    try:
        directory = oracle.prepare_oracle()
    except oracle.OracleUnavailable as exc:
        oracle.oracle_missing(exc)
    cases = [
        {"name": "multi", "events": MULTI},
        {"name": "chunks", "events": CHUNKS},
        {"name": "result_first", "events": RESULT_FIRST},
        {"name": "aggregate", "aggregate": AGGREGATE},
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in cases))
        script = Path(__file__).with_name("ledger_ref.cjs")
        done = subprocess.run(
            ["node", str(script), str(directory), str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    multi, chunks, result_first, aggregate = (json.loads(line) for line in done.stdout.splitlines())
    ended = multi["ended"]
    assert [e.get("pendingToolCallIds") for e in ended[:3]] == REF_MULTI_PENDING
    assert ended[0]["usage"] == REF_MULTI_USAGE_R1
    assert [e.get("outcome", "error") for e in ended] == [
        "success",
        "success",
        "success",
        "interrupt",
        "cancelled",
        "error",
    ]
    assert ended[3]["interrupts"] == INTERRUPTS_R4
    assert chunks["ended"][0]["pendingToolCallIds"] == REF_CHUNKS_PENDING
    assert result_first["ended"][0]["pendingToolCallIds"] == REF_RESULT_FIRST_PENDING
    assert aggregate["aggregate"] == REF_AGGREGATE
    # And ours, on the same inputs.
    led, _ = run_ledger(MULTI)
    for record, ref in zip(led.runs, ended, strict=True):
        if isinstance(record.outcome, RunSuccess):
            assert record.outcome.pending_tool_call_ids == ref["pendingToolCallIds"]
        if "usage" in ref:
            assert msgspec.to_builtins(record.aggregated_usage) == ref["usage"]


# ---------------------------------------------------------------------------------------------
# In an async pipeline


@pytest.mark.anyio
async def test_in_a_pipeline() -> None:
    pipeline = pytest.importorskip("agui_meta._pipeline")
    ended: list[str] = []
    led = Ledger(lambda r: ended.append(f"{r.run_id}:{r.status}"))
    wire = [*MULTI[: at(MULTI, "RUN_FINISHED", runId="r2") + 1], _started("r3")]
    events = events_of(wire)
    out: list[Any] = []
    async with pipeline.wrap(events, led) as stream:
        async for item in stream:
            out.append(item)
    assert out == events
    assert ended == ["r1:finished", "r2:finished", "r3:incomplete"]
    assert led.runs[0].finished_index == at(MULTI, "RUN_FINISHED")
    assert led.runs[0].raw_events[0].index == at(MULTI, "RAW")


def test_absent_record_fields_are_none_and_omitted_from_json() -> None:
    led = Ledger()
    led.feed(decode_event({"type": "CUSTOM", "name": "c", "value": 1}))
    led.feed(decode_event({"type": "STEP_STARTED", "stepName": "s"}))
    (record,) = led.runs
    assert (record.run_id, record.thread_id, record.outcome, record.error_message) == (
        None,
        None,
        None,
        None,
    )
    (step,) = record.steps
    assert (step.subagent_run_id, step.finished_index, step.started_metadata) == (None, None, None)
    assert record.custom_events[0].metadata is None
    run = json.loads(led.to_json())["runs"][0]
    # Absent fields are left out; defaults that say something are written, as before.
    assert "runId" not in run and "outcome" not in run
    assert (run["status"], run["usage"], run["droppedEntries"]) == ("running", [], 0)
    assert run["steps"][0]["status"] == "running" and "subagentRunId" not in run["steps"][0]
    assert msgspec.json.decode(led.to_json(), type=LedgerSnapshot).runs == led.runs
    # A result is any JSON value but null (a null on the wire is read as absent): None.
    led.close()
    finished = Ledger()
    finished.feed(decode_event({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}))
    outcome = finished.runs[0].outcome
    assert isinstance(outcome, RunSuccess) and outcome.result is None
    assert b"result" not in finished.to_json()
