"""The prelude that joins a run in progress (``agui_meta._join``), at every event of a run.

A client that joins a gateway run mid-way gets ``join_prelude`` (built from the run's store and
verifier at that point), then the rest of the run. Generated runs with nested subagents
(``tests/strategies.py``: subagents started under others, some ended before their children,
each interleaving its own steps, messages, tool calls and reasoning with the parent's) are cut
at every event; the official client (the oracle, verifier on) must accept each joined stream
and end with the thread it gets from the whole run, and so must agui-meta's default stages.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings

import agui_meta
from agui_meta._join import join_prelude
from tests.oracle import OracleServer
from tests.strategies import nested_subagent_run

Event = dict[str, Any]


def prelude(events: list[Event], verify: agui_meta.Verify | None = None) -> list[Event]:
    """The prelude a client joining after ``events`` gets, as wire dicts."""
    stages = agui_meta.DefaultStages(verify=verify or agui_meta.Verify())
    agui_meta.run_sync(stages, events, on_report=lambda report: None)
    assert stages.verify is not None
    frames = join_prelude("t", "r", stages.store, stages.verify)
    return [json.loads(frame.partition(b"data: ")[2]) for frame in frames]


def joined(events: list[Event], cut: int) -> list[Event]:
    """What a client joining after ``events[:cut]`` receives: the prelude, then the rest."""
    return prelude(events[:cut]) + events[cut:]


def ours(events: list[Event]) -> tuple[list[dict[str, Any]], Any]:
    stages = agui_meta.DefaultStages()
    agui_meta.run_sync(stages, events)
    return stages.store.messages_wire(), stages.store.state


def check_every_cut(oracle: OracleServer, events: list[Event]) -> None:
    cuts = range(1, len(events))  # after RUN_STARTED, before RUN_FINISHED
    cases: list[dict[str, Any]] = [{"name": "whole", "events": events}]
    cases += [{"name": f"joined after {cut}", "events": joined(events, cut)} for cut in cuts]
    whole, *results = oracle.run(cases)
    assert "error" not in whole, whole  # the strategy's runs are valid
    assert ours(events) == (whole["messages"], whole["state"])
    for cut, case, result in zip(cuts, cases[1:], results, strict=True):
        where = f"joined after event {cut}: {case['events']}"
        assert "error" not in result, (where, result)
        assert (result["messages"], result["state"]) == (whole["messages"], whole["state"]), where
        assert ours(case["events"]) == (whole["messages"], whole["state"]), where


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(events=nested_subagent_run())
def test_a_client_joining_at_any_event_ends_with_the_whole_runs_thread(
    oracle: OracleServer, events: list[Event]
) -> None:
    check_every_cut(oracle, events)


def sub(sid: str, **fields: Any) -> Event:
    return {"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": sid.upper(), **fields}


def text(kind: str, mid: str, owner: str | None = None, **fields: Any) -> Event:
    event = {"type": f"TEXT_MESSAGE_{kind}", "messageId": mid, **fields}
    if owner is not None:
        event["subagentRunId"] = owner
    return event


RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}

#: "a" starts "b" and ends before it; "b" starts "c"; their items interleave with the parent's
#: and stay open across "a"'s end; "d", started after, names the ended "a" as its parent.
NESTED: list[Event] = [
    RUN,
    text("START", "p", role="assistant"),
    text("CONTENT", "p", delta="Asking"),
    sub("a", description="plans", parentMessageId="p", metadata={"acme.depth": 1}),
    sub("b", parentSubagentRunId="a"),
    {"type": "STEP_STARTED", "stepName": "search", "subagentRunId": "b"},
    text("START", "bm", "b", role="assistant", metadata={"acme.model": "m-3"}),
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "a", "result": {"plan": 1}},
    text("CONTENT", "bm", "b", delta="Looking"),
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "bt",
        "toolCallName": "search",
        "parentMessageId": "bm",
        "subagentRunId": "b",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "bt", "delta": '{"q": '},
    sub("c", parentSubagentRunId="b", parentToolCallId="bt"),
    {"type": "REASONING_START", "messageId": "cs", "subagentRunId": "c"},
    {
        "type": "REASONING_MESSAGE_START",
        "messageId": "cr",
        "role": "reasoning",
        "subagentRunId": "c",
    },
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "bt2",
        "toolCallName": "fetch",
        "parentMessageId": "bm",
    },
    {"type": "TOOL_CALL_END", "toolCallId": "bt2", "subagentRunId": "b"},
    {
        "type": "REASONING_MESSAGE_CONTENT",
        "messageId": "cr",
        "delta": "Reading",
        "subagentRunId": "c",
    },
    text("START", "q", role="assistant"),
    text("END", "q"),
    {"type": "REASONING_MESSAGE_END", "messageId": "cr", "subagentRunId": "c"},
    {"type": "REASONING_END", "messageId": "cs", "subagentRunId": "c"},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "c"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "bt", "delta": '"x"}', "subagentRunId": "b"},
    {"type": "TOOL_CALL_END", "toolCallId": "bt", "subagentRunId": "b"},
    text("END", "bm", "b"),
    {"type": "STEP_FINISHED", "stepName": "search", "subagentRunId": "b"},
    sub("d", parentSubagentRunId="a"),
    {"type": "SUBAGENT_ERROR", "subagentRunId": "d", "message": "no time", "code": "late"},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "b"},
    text("CONTENT", "p", delta=", answered"),
    text("END", "p"),
    FINISHED,
]


def test_nested_subagents_joined_at_every_event(oracle: OracleServer) -> None:
    check_every_cut(oracle, NESTED)


def test_the_prelude_starts_the_runs_subagents_again_with_their_items_under_them() -> None:
    events = prelude(NESTED[:17])
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    # Each subagent as it started (ids, parents, metadata), in order; "a" ended again at once.
    assert events[3:7] == [NESTED[3], NESTED[7], NESTED[4], NESTED[11]]
    assert events[7:] == [
        {"type": "STEP_STARTED", "stepName": "search", "subagentRunId": "b"},
        {"type": "REASONING_START", "messageId": "cs", "subagentRunId": "c"},
        {"type": "REASONING_MESSAGE_START", "messageId": "cr", "role": "reasoning"},
        {"type": "TEXT_MESSAGE_START", "messageId": "p"},
        {"type": "TEXT_MESSAGE_START", "messageId": "bm"},
        # "bm"'s calls from its first open one on, in order: "bt" left open, "bt2" ended.
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "bt",
            "toolCallName": "search",
            "parentMessageId": "bm",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "bt", "delta": '{"q": '},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "bt2",
            "toolCallName": "fetch",
            "parentMessageId": "bm",
        },
        {"type": "TOOL_CALL_END", "toolCallId": "bt2"},
    ]
    # The streaming messages are in the snapshot where they stand, with their owner and text.
    snapshot = events[1]["messages"]
    assert [(m["id"], m.get("subagentRunId"), m.get("content")) for m in snapshot] == [
        ("p", None, "Asking"), ("bm", "b", "Looking"), ("cr", "c", "Reading"),
    ]  # fmt: skip
    assert "toolCalls" not in snapshot[1] or snapshot[1]["toolCalls"] == []


def test_a_subagent_whose_parent_the_verifier_forgot_starts_without_it(
    oracle: OracleServer,
) -> None:
    # Past max_closed_ids the oldest ended subagent is forgotten: not started again, and a
    # child naming it goes without parentSubagentRunId (the joining verifier would refuse it).
    events = [RUN, sub("a"), sub("b", parentSubagentRunId="a"),
              {"type": "SUBAGENT_FINISHED", "subagentRunId": "a"}, sub("x"),
              {"type": "SUBAGENT_FINISHED", "subagentRunId": "x"}]  # fmt: skip
    joining = prelude(events, agui_meta.Verify(max_closed_ids=1))
    assert [e for e in joining if e["type"].startswith("SUBAGENT")] == [
        {"type": "SUBAGENT_STARTED", "subagentRunId": "b", "name": "B"},
        events[4],
        events[5],
    ]
    tail = [{"type": "SUBAGENT_FINISHED", "subagentRunId": "b"}, FINISHED]
    [result] = oracle.run([{"name": "forgotten", "events": joining + tail}])
    assert "error" not in result, result
