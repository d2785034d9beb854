"""Order verification (``verify``) against the reference client's ``verifyEvents`` 1.0.0.

Cases named with a sentence port the official suites under ``client/src/verify/__tests__``
(V-LIFE ``verify.lifecycle``, V-TXT ``verify.text-messages``, V-TC ``verify.tool-calls``, V-EV
``verify.events``, V-STEP ``verify.steps``, V-CONC ``verify.concurrent``, V-MULTI
``verify.multiple-runs``, SUB ``subagent-verify``); the others cover what 1.0 added (reasoning,
owner-keyed steps, subagent lifecycle, ownership). Every expectation, accepted or rejected at
which event, comes from the reference source (verify/verify.ts) and was confirmed by running the
same events through the installed reference's ``verifyEvents``; the last test re-checks random
streams against it when Node.js is available.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_meta import run_sync
from agui_meta._events import AnyEvent, Event
from agui_meta._exceptions import Report, StrictError, VerifyError
from agui_meta._stage import Context
from agui_meta._verify import OpenItems, Verify

# ---------------------------------------------------------------------------------------------
# Wire-event builders (camelCase dicts, so the same cases can be fed to the reference)

Wire = dict[str, Any]


def _by(event: Wire, by: str | None) -> Wire:
    if by is not None:
        event["subagentRunId"] = by
    return event


def rs(run: str = "r1", messages: list[Wire] | None = None) -> Wire:
    event: Wire = {"type": "RUN_STARTED", "threadId": "t1", "runId": run}
    if messages is not None:
        event["input"] = {"threadId": "t1", "runId": run, "messages": messages}
    return event


def rf(run: str = "r1") -> Wire:
    return {"type": "RUN_FINISHED", "threadId": "t1", "runId": run}


def rerr() -> Wire:
    return {"type": "RUN_ERROR", "message": "boom"}


def ts(mid: str, by: str | None = None) -> Wire:
    return _by({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}, by)


def tc(mid: str, by: str | None = None) -> Wire:
    return _by({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": "hi"}, by)


def te(mid: str, by: str | None = None) -> Wire:
    return _by({"type": "TEXT_MESSAGE_END", "messageId": mid}, by)


def cs(tid: str, by: str | None = None, parent: str | None = None) -> Wire:
    event: Wire = {"type": "TOOL_CALL_START", "toolCallId": tid, "toolCallName": "search"}
    if parent is not None:
        event["parentMessageId"] = parent
    return _by(event, by)


def ca(tid: str, by: str | None = None) -> Wire:
    return _by({"type": "TOOL_CALL_ARGS", "toolCallId": tid, "delta": "{}"}, by)


def ce(tid: str, by: str | None = None) -> Wire:
    return _by({"type": "TOOL_CALL_END", "toolCallId": tid}, by)


def cr(mid: str, tid: str, by: str | None = None) -> Wire:
    return _by(
        {"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": tid, "content": "ok"}, by
    )


def ss(name: str, by: str | None = None) -> Wire:
    return _by({"type": "STEP_STARTED", "stepName": name}, by)


def sf(name: str, by: str | None = None) -> Wire:
    return _by({"type": "STEP_FINISHED", "stepName": name}, by)


def rstart(mid: str, by: str | None = None) -> Wire:
    return _by({"type": "REASONING_START", "messageId": mid}, by)


def rend(mid: str, by: str | None = None) -> Wire:
    return _by({"type": "REASONING_END", "messageId": mid}, by)


def rms(mid: str, by: str | None = None) -> Wire:
    return _by({"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}, by)


def rmc(mid: str, by: str | None = None) -> Wire:
    return _by({"type": "REASONING_MESSAGE_CONTENT", "messageId": mid, "delta": "hm"}, by)


def rme(mid: str, by: str | None = None) -> Wire:
    return _by({"type": "REASONING_MESSAGE_END", "messageId": mid}, by)


def rev(subtype: str, eid: str, by: str | None = None) -> Wire:
    return _by(
        {
            "type": "REASONING_ENCRYPTED_VALUE",
            "subtype": subtype,
            "entityId": eid,
            "encryptedValue": "enc",
        },
        by,
    )


def sub_s(sid: str, parent: str | None = None) -> Wire:
    event: Wire = {"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": "helper"}
    if parent is not None:
        event["parentSubagentRunId"] = parent
    return event


def sub_f(sid: str) -> Wire:
    return {"type": "SUBAGENT_FINISHED", "subagentRunId": sid}


def sub_e(sid: str) -> Wire:
    return {"type": "SUBAGENT_ERROR", "subagentRunId": sid, "message": "failed"}


def act_s(mid: str, by: str | None = None, replace: bool | None = None) -> Wire:
    event: Wire = {"type": "ACTIVITY_SNAPSHOT", "messageId": mid, "activityType": "plan"}
    event["content"] = {"steps": []}
    if replace is not None:
        event["replace"] = replace
    return _by(event, by)


def act_d(mid: str, by: str | None = None) -> Wire:
    return _by(
        {"type": "ACTIVITY_DELTA", "messageId": mid, "activityType": "plan", "patch": []}, by
    )


def snap(*messages: Wire) -> Wire:
    return {"type": "MESSAGES_SNAPSHOT", "messages": list(messages)}


def msg(mid: str, role: str = "user", by: str | None = None, calls: tuple[str, ...] = ()) -> Wire:
    """A message for a snapshot or a run input."""
    message: Wire = {"id": mid, "role": role}
    if role == "activity":
        message.update(activityType="plan", content={})
    elif role != "assistant":
        message["content"] = "text"
    if calls:
        message["toolCalls"] = [
            {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for c in calls
        ]
    return _by(message, by)


def custom() -> Wire:
    return {"type": "CUSTOM", "name": "note", "value": {"x": 1}}


def raw() -> Wire:
    return {"type": "RAW", "event": {"vendor": "x"}}


def state_snapshot() -> Wire:
    return {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}


def state_delta() -> Wire:
    return {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n", "value": 2}]}


# ---------------------------------------------------------------------------------------------
# Cases


class Case(NamedTuple):
    name: str
    events: list[Wire]
    reject: int | None = None  # index of the rejected event; None: the stream is accepted
    rule: str | None = None
    says: str | None = None  # a phrase the error message must contain


def decode(events: list[Wire]) -> list[Event]:
    return [msgspec.convert(e, AnyEvent) for e in events]


V_LIFE = [
    Case("should require RUN_STARTED as the first event", [ts("m1")], 0, "run.first-event",
         "First event must be 'RUN_STARTED'"),
    Case("should allow RUN_ERROR at any time (even as first event)", [rerr()]),
    Case("should not allow multiple RUN_STARTED events", [rs(), rs()], 1, "run.already-active",
         "Cannot send 'RUN_STARTED' while a run is still active"),
    Case("should not allow events after RUN_FINISHED (except RUN_ERROR)",
         [rs(), rf(), ts("m1")], 2, "run.after-finished",
         "Cannot send event type 'TEXT_MESSAGE_START': The run has already finished"),
    Case("should allow RUN_ERROR after RUN_FINISHED", [rs(), rf(), rerr()]),
    Case("should not allow any events after RUN_ERROR", [rs(), rerr(), ts("m1")], 2,
         "run.after-error", "The run has already errored with 'RUN_ERROR'"),
]  # fmt: skip

V_TXT = [
    Case("should not allow starting a text message before RUN_STARTED", [ts("m1"), rs()], 0,
         "run.first-event"),
    Case("should not allow TEXT_MESSAGE_CONTENT before TEXT_MESSAGE_START", [rs(), tc("m1")], 1,
         "text.not-open", "No active text message found with ID 'm1'"),
    Case("should not allow TEXT_MESSAGE_END before TEXT_MESSAGE_START", [rs(), te("m1")], 1,
         "text.not-open", "Cannot send 'TEXT_MESSAGE_END' event"),
    Case("should allow tool calls to start during text messages",
         [rs(), ts("m1"), tc("m1"), cs("t1"), ca("t1"), ce("t1"), tc("m1"), te("m1"), rf()]),
    Case("should allow RAW, CUSTOM, STATE_SNAPSHOT, STATE_DELTA, MESSAGES_SNAPSHOT inside a text "
         "message",
         [rs(), ts("m1"), raw(), custom(), state_snapshot(), state_delta(), snap(), tc("m1"),
          te("m1"), rf()]),
    Case("should allow lifecycle events during text messages",
         [rs(), ts("m1"), ss("s"), tc("m1"), sf("s"), te("m1"), rf()]),
]  # fmt: skip

V_TC = [
    Case("should not allow starting a tool call before RUN_STARTED", [cs("t1")], 0,
         "run.first-event"),
    Case("should not allow TOOL_CALL_ARGS before TOOL_CALL_START", [rs(), ca("t1")], 1,
         "tool-call.not-open", "No active tool call found with ID 't1'"),
    Case("should not allow TOOL_CALL_END before TOOL_CALL_START", [rs(), ce("t1")], 1,
         "tool-call.not-open", "Cannot send 'TOOL_CALL_END' event"),
    Case("should allow text messages to start during tool calls",
         [rs(), cs("t1"), ca("t1"), ts("m1"), tc("m1"), te("m1"), ca("t1"), ce("t1"), rf()]),
    Case("should allow RAW, CUSTOM, STATE_SNAPSHOT, STATE_DELTA, MESSAGES_SNAPSHOT inside a tool "
         "call",
         [rs(), cs("t1"), raw(), custom(), state_snapshot(), state_delta(), snap(), ca("t1"),
          ce("t1"), rf()]),
    Case("should allow lifecycle events during tool calls",
         [rs(), cs("t1"), ss("s"), ca("t1"), sf("s"), ce("t1"), rf()]),
]  # fmt: skip

V_EV = [
    Case("should ensure message content has the same ID as message start",
         [rs(), ts("m1"), tc("m2")], 2, "text.not-open", "'m2'"),
    Case("should not allow ending a message that wasn't started", [rs(), te("m1")], 1,
         "text.not-open"),
    Case("should require TEXT_MESSAGE_START before TEXT_MESSAGE_CONTENT with the same ID",
         [rs(), ts("m2"), tc("m1")], 2, "text.not-open"),
    Case("should require TEXT_MESSAGE_START before TEXT_MESSAGE_END with the same ID",
         [rs(), ts("m2"), te("m1")], 2, "text.not-open"),
    Case("should ensure tool call args has the same ID as tool call start",
         [rs(), cs("t1"), ca("t2")], 2, "tool-call.not-open", "'t2'"),
    Case("should not allow ending a tool call that wasn't started", [rs(), ce("t1")], 1,
         "tool-call.not-open"),
    Case("should allow CUSTOM and RAW in any context",
         [rs(), custom(), raw(), ts("m1"), custom(), raw(), te("m1"), cs("t1"), raw(), custom(),
          ce("t1"), rf()]),
    Case("should allow state-related events in appropriate contexts",
         [rs(), state_snapshot(), state_delta(), snap(msg("u1")), rf()]),
    Case("should allow special events outside of tool calls",
         [rs(), cs("t1"), ce("t1"), custom(), raw(), state_delta(), rf()]),
    Case("should allow STATE_SNAPSHOT events", [rs(), state_snapshot(), state_snapshot(), rf()]),
]  # fmt: skip

V_STEP = [
    Case("should ensure step end has the same name as step start", [rs(), ss("a"), sf("b")], 2,
         "step.not-open", "Cannot send 'STEP_FINISHED' for step \"b\" that was not started"),
    Case("should not allow ending a step that wasn't started", [rs(), sf("a")], 1,
         "step.not-open"),
    Case("should not allow starting a step with a name that's already active",
         [rs(), ss("a"), ss("a")], 2, "step.already-open",
         "Step \"a\" is already active for 'STEP_STARTED'"),
    Case("should allow properly nested steps",
         [rs(), ss("a"), ss("b"), sf("b"), sf("a"), rf()]),
    Case("should require all steps to be ended before run ends", [rs(), ss("a"), ss("b"), sf("a"),
         rf()], 4, "run.finished-open-steps",
         "Cannot send 'RUN_FINISHED' while steps are still active: b"),
]  # fmt: skip

V_CONC = [
    Case("should reject starting a text message with an ID already in progress",
         [rs(), ts("m1"), ts("m1")], 2, "text.already-open",
         "A text message with ID 'm1' is already in progress"),
    Case("should reject content for non-existent message ID", [rs(), ts("m1"), tc("zz")], 2,
         "text.not-open"),
    Case("should reject starting a tool call with an ID already in progress",
         [rs(), cs("t1"), cs("t1")], 2, "tool-call.already-open",
         "A tool call with ID 't1' is already in progress"),
    Case("should reject args for non-existent tool call ID", [rs(), cs("t1"), ca("zz")], 2,
         "tool-call.not-open"),
    Case("should allow concurrent text messages with different IDs",
         [rs(), ts("m1"), ts("m2"), tc("m1"), tc("m2"), te("m2"), te("m1"), rf()]),
    Case("should allow concurrent tool calls with different IDs",
         [rs(), cs("t1"), cs("t2"), ca("t2"), ca("t1"), ce("t1"), ce("t2"), rf()]),
    Case("should allow overlapping text messages and tool calls",
         [rs(), ts("m1"), cs("t1"), tc("m1"), ca("t1"), te("m1"), ce("t1"), rf()]),
    Case("should allow lifecycle events during concurrent messages and tool calls",
         [rs(), ts("m1"), cs("t1"), ss("s1"), tc("m1"), ca("t1"), sf("s1"), te("m1"), ce("t1"),
          rf()]),
    Case("should handle complex concurrent scenario with many overlapping events",
         [rs(), ss("plan"), ts("m1"), ts("m2"), cs("t1", parent="m1"), cs("t2"), tc("m2"),
          ca("t1"), custom(), ca("t2"), te("m1"), ce("t2"), state_delta(), ce("t1"), tc("m2"),
          te("m2"), sf("plan"), rf()]),
    Case("should reject RUN_FINISHED while text messages are still active",
         [rs(), ts("m1"), ts("m2"), rf()], 3, "run.finished-open-text-messages",
         "Cannot send 'RUN_FINISHED' while text messages are still active: m1, m2"),
    Case("should reject RUN_FINISHED while tool calls are still active",
         [rs(), cs("t1"), rf()], 2, "run.finished-open-tool-calls",
         "Cannot send 'RUN_FINISHED' while tool calls are still active: t1"),
]  # fmt: skip

V_MULTI = [
    Case("should not allow new RUN_STARTED while run is active", [rs(), ts("m1"), te("m1"),
         rs("r2")], 3, "run.already-active"),
    Case("should still block events after RUN_ERROR within the same run",
         [rs(), rerr(), rerr()], 2, "run.after-error"),
    Case("should allow a new RUN_STARTED after RUN_ERROR",
         [rs(), rerr(), rs("r2"), ts("m1"), te("m1"), rf("r2")]),
    Case("should replay a thread containing an errored run without dropping later runs",
         [rs(), ts("m1"), cs("t1"), ss("s"), rerr(), rs("r2"), ts("m1"), cs("t1"), ce("t1"),
          te("m1"), ss("s"), sf("s"), rf("r2"), rs("r3"), rf("r3")]),
    Case("should allow multiple sequential runs",
         [rs(), ts("m1"), te("m1"), rf(), rs("r2"), ts("m2"), te("m2"), rf("r2")]),
    Case("should allow reusing message IDs across different runs",
         [rs(), ts("m1"), te("m1"), cs("t1"), ce("t1"), rf(), rs("r2"), ts("m1"), te("m1"),
          cs("t1"), ce("t1"), rf("r2")]),
    Case("should allow three sequential runs",
         [rs(), rf(), rs("r2"), rf("r2"), rs("r3"), rf("r3")]),
    Case("should handle complex scenario with multiple runs and various event types",
         [rs(), ss("a"), ts("m1"), state_snapshot(), te("m1"), sf("a"), rf(), rs("r2"),
          cs("t1"), custom(), ca("t1"), ce("t1"), cr("tr1", "t1"), rf("r2"), rerr(),
          rs("r3"), raw(), rf("r3")]),
]  # fmt: skip

SUBAGENT_LIFECYCLE = [
    Case("should allow a well-formed subagent lifecycle within a run",
         [rs(), sub_s("s1"), sub_f("s1"), rf()]),
    Case("should reject a duplicate SUBAGENT_STARTED for the same id",
         [rs(), sub_s("s1"), sub_s("s1")], 2, "subagent.already-active",
         "subagent 's1' is already active"),
    Case("should reject SUBAGENT_FINISHED for an id that never started", [rs(), sub_f("s1")], 1,
         "subagent.not-active", "no active subagent found with ID 's1'"),
    Case("should reject SUBAGENT_STARTED whose parentSubagentId was not started",
         [rs(), sub_s("s1", parent="missing-parent")], 1, "subagent.unknown-parent",
         "parentSubagentRunId 'missing-parent' has not been started in this run"),
    Case("should reject RUN_FINISHED while a subagent is still open", [rs(), sub_s("s1"), rf()],
         2, "run.finished-open-subagents",
         "Cannot send 'RUN_FINISHED' while subagents are still active: s1"),
    Case("should allow a stream with no subagent lifecycle events",
         [rs(), ts("m1", by="s1"), te("m1", by="s1"), rf()]),
    # 1.0 lifecycle rules
    Case("subagent ids are per invocation: no restart after SUBAGENT_FINISHED",
         [rs(), sub_s("s1"), sub_f("s1"), sub_s("s1")], 3, "subagent.id-reused",
         "Subagent IDs are per-invocation and cannot be reused"),
    Case("no restart after SUBAGENT_ERROR either", [rs(), sub_s("s1"), sub_e("s1"), sub_s("s1")],
         3, "subagent.id-reused"),
    Case("SUBAGENT_ERROR closes the subagent", [rs(), sub_s("s1"), sub_e("s1"), rf()]),
    Case("SUBAGENT_ERROR needs an active id", [rs(), sub_s("s1"), sub_e("s2")], 2,
         "subagent.not-active", "Cannot send 'SUBAGENT_ERROR'"),
    Case("SUBAGENT_FINISHED twice", [rs(), sub_s("s1"), sub_f("s1"), sub_f("s1")], 3,
         "subagent.not-active"),
    Case("a parent may have finished before its child starts",
         [rs(), sub_s("p"), sub_f("p"), sub_s("c", parent="p"), sub_f("c"), rf()]),
    Case("a child of an active parent", [rs(), sub_s("p"), sub_s("c", parent="p"), sub_f("c"),
         sub_f("p"), rf()]),
    Case("a parent from an earlier run is unknown",
         [rs(), sub_s("p"), sub_f("p"), rf(), rs("r2"), sub_s("c", parent="p")], 5,
         "subagent.unknown-parent"),
    Case("a new run may reuse subagent ids",
         [rs(), sub_s("s1"), sub_f("s1"), rf(), rs("r2"), sub_s("s1"), sub_f("s1"), rf("r2")]),
    Case("the empty string is a subagent id of its own",
         [rs(), sub_s(""), sub_s("s1", parent=""), sub_f("s1"), sub_f(""), rf()]),
    Case("RUN_ERROR may end a run with subagents open", [rs(), sub_s("s1"), rerr()]),
]  # fmt: skip

REASONING = [
    Case("a reasoning span and the message inside it may share an id",
         [rs(), rstart("r1"), rms("r1"), rmc("r1"), rme("r1"), rend("r1"), rf()]),
    Case("a reasoning span with differently named messages",
         [rs(), rstart("sp"), rms("a"), rme("a"), rms("b"), rmc("b"), rme("b"), rend("sp"), rf()]),
    Case("REASONING_START for an open span", [rs(), rstart("r1"), rstart("r1")], 2,
         "reasoning-span.already-open", "A reasoning span with ID 'r1' is already in progress"),
    Case("REASONING_MESSAGE_START for an open reasoning message", [rs(), rms("r1"), rms("r1")],
         2, "reasoning-message.already-open",
         "A reasoning message with ID 'r1' is already in progress"),
    Case("REASONING_MESSAGE_CONTENT without an opener", [rs(), rmc("r1")], 1,
         "reasoning-message.not-open", "No active reasoning message found with ID 'r1'"),
    Case("REASONING_MESSAGE_CONTENT inside a span but without a message",
         [rs(), rstart("r1"), rmc("r1")], 2, "reasoning-message.not-open"),
    Case("REASONING_MESSAGE_END without an opener", [rs(), rme("r1")], 1,
         "reasoning-message.not-open", "Cannot send 'REASONING_MESSAGE_END' event"),
    Case("REASONING_END without REASONING_START", [rs(), rms("r1"), rme("r1"), rend("r1")], 3,
         "reasoning-span.not-open", "No active reasoning span found with ID 'r1'"),
    Case("REASONING_END closes the span only",
         [rs(), rstart("r1"), rms("r1"), rend("r1"), rmc("r1"), rme("r1"), rend("r1")], 6,
         "reasoning-span.not-open"),
    Case("a closed reasoning message may be opened again",
         [rs(), rms("r1"), rme("r1"), rms("r1"), rmc("r1"), rme("r1"), rf()]),
    Case("RUN_FINISHED while a reasoning message is open (checked before spans)",
         [rs(), rstart("r1"), rms("r1"), rf()], 3, "run.finished-open-reasoning-messages",
         "Cannot send 'RUN_FINISHED' while reasoning messages are still active: r1"),
    Case("RUN_FINISHED while a reasoning span is open", [rs(), rstart("r1"), rms("r2"),
         rme("r2"), rf()], 4, "run.finished-open-reasoning-spans",
         "Cannot send 'RUN_FINISHED' while reasoning spans are still active: r1"),
    Case("reasoning ids and text message ids are separate",
         [rs(), ts("x"), rms("x"), rstart("x"), rme("x"), te("x"), rend("x"), rf()]),
]  # fmt: skip

RUNS = [
    Case("an empty stream is accepted (nothing is checked at the end)", []),
    Case("a stream may end inside a run", [rs(), ts("m1"), tc("m1")]),
    Case("RUN_FINISHED twice", [rs(), rf(), rf()], 2, "run.after-finished",
         "Cannot send event type 'RUN_FINISHED'"),
    Case("RUN_STARTED after RUN_FINISHED and RUN_ERROR", [rs(), rf(), rerr(), rs("r2"), rf("r2")]),
    Case("after RUN_FINISHED then RUN_ERROR, only RUN_STARTED",
         [rs(), rf(), rerr(), rf()], 3, "run.after-error"),
    Case("RUN_STARTED may follow a first-event RUN_ERROR", [rerr(), rs(), rf()]),
    Case("a first-event RUN_ERROR blocks the rest", [rerr(), custom()], 1, "run.after-error"),
    Case("RUN_ERROR ends a run with everything open",
         [rs(), ts("m1"), cs("t1"), ss("a"), rms("r1"), rstart("r2"), sub_s("s1"), rerr()]),
    Case("RUN_FINISHED checks steps before text messages", [rs(), ts("m1"), ss("a"), rf()], 3,
         "run.finished-open-steps"),
    Case("RUN_FINISHED checks text messages before reasoning",
         [rs(), rms("r1"), ts("m1"), rf()], 3, "run.finished-open-text-messages"),
    Case("RUN_FINISHED checks reasoning before tool calls",
         [rs(), cs("t1"), rstart("r1"), rf()], 3, "run.finished-open-reasoning-spans"),
    Case("RUN_FINISHED checks tool calls before subagents", [rs(), sub_s("s1"), cs("t1"), rf()],
         3, "run.finished-open-tool-calls"),
    Case("a chunk event is passed on (it is expanded before verification)",
         [rs(), {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"}, rf()]),
    Case("a chunk event is still subject to the run rules",
         [{"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"}], 0, "run.first-event"),
    Case("TOOL_CALL_RESULT and ACTIVITY_DELTA need no known target",
         [rs(), cr("tr1", "nope"), act_d("nope"), rf()]),
]  # fmt: skip

STEPS = [
    Case("a parent and a subagent may both have a step of the same name open",
         [rs(), ss("tools"), ss("tools", by="s1"), sf("tools", by="s1"), sf("tools"), rf()]),
    Case("a subagent may not finish the parent's step",
         [rs(), ss("tools"), sf("tools", by="s1")], 2, "step.wrong-owner",
         "Cannot send 'STEP_FINISHED' for step \"tools\" attributed to subagent 's1': that step "
         "is open under the parent agent. A step must be finished by whoever started it."),
    Case("the parent may not finish a subagent's step",
         [rs(), ss("tools", by="s1"), sf("tools")], 2, "step.wrong-owner",
         "attributed to the parent agent: that step is open under subagent 's1'"),
    Case("the parent and a subagent called '' are different owners",
         [rs(), ss("a", by=""), sf("a")], 2, "step.wrong-owner", "subagent ''"),
    Case("a step open under one subagent only", [rs(), ss("a", by="s1"), ss("a", by="s1")], 2,
         "step.already-open", "in subagent 's1'"),
    Case("RUN_FINISHED names the owner of an open subagent step",
         [rs(), ss("a", by="s1"), ss("b"), rf()], 3, "run.finished-open-steps",
         "steps are still active: a (subagent 's1'), b"),
    Case("a finished step name may start again", [rs(), ss("a"), sf("a"), ss("a"), sf("a"), rf()]),
]  # fmt: skip

OWNERSHIP = [
    # Text messages
    Case("a tagged continuation of a parent-owned message",
         [rs(), ts("m1"), tc("m1", by="s1")], 2, "owner.mismatch",
         "Cannot send 'TEXT_MESSAGE_CONTENT': subagentRunId 's1' does not match the message "
         "'m1' opener's subagent '(the parent agent)'."),
    Case("an untagged continuation never disagrees",
         [rs(), ts("m1", by="s1"), tc("m1"), te("m1"), rf()]),
    Case("TEXT_MESSAGE_END from another subagent",
         [rs(), ts("m1", by="s1"), te("m1", by="s2")], 2, "owner.mismatch", "opener's subagent "
         "'s1'"),
    Case("a subagent called '' is not the parent", [rs(), ts("m1"), tc("m1", by="")], 2,
         "owner.mismatch"),
    Case("reopening a closed message under another owner",
         [rs(), ts("m1", by="s1"), te("m1"), ts("m1", by="s2")], 3, "owner.mismatch"),
    Case("an untagged reopen keeps the first owner",
         [rs(), ts("m1", by="s1"), te("m1"), ts("m1"), tc("m1", by="s1"), tc("m1", by="s2")], 5,
         "owner.mismatch"),
    Case("owners are forgotten by a new run",
         [rs(), ts("m1", by="s1"), te("m1"), rf(), rs("r2"), ts("m1", by="s2"), te("m1"),
          rf("r2")]),
    Case("owners are kept per entity kind",
         [rs(), ts("x", by="s1"), cs("x", by="s2"), ca("x", by="s2"), rms("x", by="s3"),
          rme("x", by="s3"), ce("x"), te("x", by="s1"), rf()]),
    # Tool calls
    Case("TOOL_CALL_ARGS from another owner", [rs(), cs("t1", by="s1"), ca("t1", by="s2")], 2,
         "owner.mismatch", "does not match the tool call 't1' opener's subagent 's1'"),
    Case("TOOL_CALL_START must agree with its parent message's owner",
         [rs(), ts("m1", by="s1"), cs("t1", by="s2", parent="m1")], 2, "owner.tool-call-parent",
         "Cannot send 'TOOL_CALL_START': subagentRunId 's2' does not match its parent message "
         "'m1' owner 's1'. A tool call belongs to the message that carries it."),
    Case("a tagged tool call in a parent-owned message",
         [rs(), ts("m1"), cs("t1", by="s1", parent="m1")], 2, "owner.tool-call-parent",
         "owner '(the parent agent)'"),
    Case("an untagged tool call inherits its parent message's owner",
         [rs(), ts("m1", by="s1"), cs("t1", parent="m1"), ca("t1", by="s1"), ca("t1", by="s2")],
         4, "owner.mismatch"),
    Case("an untagged tool call with an unknown parent message belongs to the parent agent",
         [rs(), cs("t1", parent="zz"), ca("t1", by="s1")], 2, "owner.mismatch"),
    Case("an untagged reopen of a tool call under another owner's message",
         [rs(), ts("m1", by="s1"), ts("m2"), cs("t1", parent="m1"), ce("t1"),
          cs("t1", parent="m2")], 5, "owner.tool-call-reparented",
         "tool call 't1' is owned by 's1' but its parent message 'm2' is owned by "
         "'(the parent agent)'"),
    Case("an untagged reopen under a message of the same owner",
         [rs(), ts("m1", by="s1"), ts("m2", by="s1"), cs("t1", parent="m1"), ce("t1"),
          cs("t1", parent="m2"), ce("t1"), te("m1"), te("m2"), rf()]),
    Case("a tagged reopen of a tool call under another owner",
         [rs(), cs("t1", by="s1"), ce("t1"), cs("t1", by="s2")], 3, "owner.mismatch"),
    Case("TOOL_CALL_RESULT records the owner of the message it mints",
         [rs(), cr("m9", "t1", by="s1"), ts("m9", by="s2")], 2, "owner.mismatch"),
    Case("TOOL_CALL_RESULT: the newest result's owner wins",
         [rs(), cr("m9", "t1", by="s1"), cr("m9", "t1", by="s2"), ts("m9", by="s2"), te("m9"),
          rf()]),
    Case("an untagged TOOL_CALL_RESULT hands the message to the parent",
         [rs(), ts("m9", by="s1"), te("m9"), cr("m9", "t1"), ts("m9", by="s1")], 4,
         "owner.mismatch"),
    Case("TOOL_CALL_RESULT re-owns even an open text message",
         [rs(), ts("m1", by="s1"), cr("m1", "t1", by="s2"), tc("m1", by="s1")], 3,
         "owner.mismatch", "opener's subagent 's2'"),
    Case("MESSAGES_SNAPSHOT re-owns an open text message",
         [rs(), ts("m1", by="s1"), snap(msg("m1", "assistant", by="s2")), tc("m1", by="s2"),
          tc("m1", by="s1")], 4, "owner.mismatch"),
    # Reasoning
    Case("a reasoning span and its message share one owner",
         [rs(), rstart("r1", by="s1"), rms("r1", by="s2")], 2, "owner.mismatch",
         "does not match the reasoning message 'r1' opener's subagent 's1'"),
    Case("REASONING_END from another owner", [rs(), rstart("r1", by="s1"), rend("r1", by="s2")],
         2, "owner.mismatch"),
    Case("REASONING_MESSAGE_CONTENT tagged on a parent-owned message",
         [rs(), rms("r1"), rmc("r1", by="s1")], 2, "owner.mismatch"),
    # Encrypted values
    Case("an encrypted value for a tool call is checked after the call closed",
         [rs(), cs("t1", by="s1"), ce("t1"), rev("tool-call", "t1", by="s2")], 3,
         "owner.mismatch", "Cannot send 'REASONING_ENCRYPTED_VALUE': subagentRunId 's2' does "
         "not match the tool call 't1'"),
    Case("an encrypted value for a reasoning message",
         [rs(), rms("r1", by="s1"), rme("r1"), rev("message", "r1", by="s2")], 3,
         "owner.mismatch", "the message 'r1'"),
    Case("an encrypted value for a text message is checked against the text owner first",
         [rs(), ts("x", by="s1"), te("x"), rms("x", by="s2"), rme("x"),
          rev("message", "x", by="s2")], 5, "owner.mismatch"),
    Case("the encrypted value's subtype picks the kind",
         [rs(), ts("x", by="s1"), cs("x", by="s2"), rev("tool-call", "x", by="s2"),
          rev("message", "x", by="s1"), rev("message", "x"), ce("x"), te("x"), rf()]),
    Case("an encrypted value for an unknown entity", [rs(), rev("message", "zz", by="s1"), rf()]),
    # Activity
    Case("ACTIVITY_DELTA from another owner", [rs(), act_s("a1", by="s1"), act_d("a1", by="s2")],
         2, "owner.mismatch", "does not match the activity 'a1' opener's subagent 's1'"),
    Case("a replacing ACTIVITY_SNAPSHOT re-owns the activity",
         [rs(), act_s("a1", by="s1"), act_s("a1", by="s2"), act_d("a1", by="s2"), rf()]),
    Case("an explicit replace: true re-owns the activity",
         [rs(), act_s("a1", by="s1"), act_s("a1", replace=True), act_d("a1", by="s1")], 3,
         "owner.mismatch"),
    Case("ACTIVITY_SNAPSHOT with replace: false keeps the owner",
         [rs(), act_s("a1", by="s1"), act_s("a1", by="s2", replace=False), act_d("a1", by="s2")],
         3, "owner.mismatch"),
    Case("ACTIVITY_SNAPSHOT with replace: false owns a new activity",
         [rs(), act_s("a1", by="s1", replace=False), act_d("a1", by="s2")], 2, "owner.mismatch"),
    # Snapshots and run input
    Case("MESSAGES_SNAPSHOT records message owners",
         [rs(), snap(msg("m1", by="s1")), ts("m1", by="s2")], 2, "owner.mismatch"),
    Case("MESSAGES_SNAPSHOT records tool call owners from the message",
         [rs(), snap(msg("a1", "assistant", by="s1", calls=("t1", "t2"))), cs("t2", by="s2")], 2,
         "owner.mismatch", "tool call 't2'"),
    Case("MESSAGES_SNAPSHOT: an untagged message belongs to the parent",
         [rs(), snap(msg("m1")), ts("m1", by="s1")], 2, "owner.mismatch"),
    Case("MESSAGES_SNAPSHOT replaces recorded owners",
         [rs(), ts("m1", by="s1"), te("m1"), snap(msg("m1", by="s2")), ts("m1", by="s2"),
          te("m1"), rf()]),
    Case("MESSAGES_SNAPSHOT: the last message with an id wins",
         [rs(), snap(msg("m1", by="s1"), msg("m1", by="s2")), ts("m1", by="s2"), te("m1"), rf()]),
    Case("MESSAGES_SNAPSHOT seeds reasoning owners",
         [rs(), snap(msg("r1", "reasoning", by="s1")), ts("r1", by="s2"), te("r1"),
          rms("r1", by="s2")], 4, "owner.mismatch"),
    Case("MESSAGES_SNAPSHOT seeds activity owners",
         [rs(), snap(msg("a1", "activity", by="s1")), act_d("a1", by="s2")], 2,
         "owner.mismatch"),
    Case("ACTIVITY_SNAPSHOT with replace: false keeps a seeded owner",
         [rs(), snap(msg("a1", "activity", by="s1")), act_s("a1", by="s2", replace=False),
          act_d("a1", by="s2")], 3, "owner.mismatch"),
    Case("RUN_STARTED input seeds owners",
         [rs(messages=[msg("m1", by="s1")]), ts("m1", by="s2")], 1, "owner.mismatch"),
    Case("RUN_STARTED input: the first message with an id wins",
         [rs(messages=[msg("m1", by="s1"), msg("m1", by="s2")]), ts("m1", by="s2")], 1,
         "owner.mismatch"),
    Case("RUN_STARTED input: the first claim of a tool call wins",
         [rs(messages=[msg("a1", "assistant", by="s1", calls=("t1",)),
                       msg("a2", "assistant", by="s2", calls=("t1",))]),
          cs("t1", by="s1"), ce("t1"), rf()]),
    Case("RUN_STARTED input of a later run",
         [rs(), ts("m1", by="s1"), te("m1"), rf(), rs("r2", messages=[msg("m1", by="s2")]),
          ts("m1", by="s2"), te("m1"), rf("r2")]),
]  # fmt: skip

ALL_CASES = {
    "lifecycle": V_LIFE,
    "text_messages": V_TXT,
    "tool_calls": V_TC,
    "events": V_EV,
    "steps": V_STEP,
    "concurrent": V_CONC,
    "multiple_runs": V_MULTI,
    "subagents": SUBAGENT_LIFECYCLE,
    "reasoning": REASONING,
    "runs": RUNS,
    "owner_keyed_steps": STEPS,
    "ownership": OWNERSHIP,
}


def outcome(events: list[Wire]) -> tuple[int | None, str | None, str | None]:
    """(index, rule, message) of the rejection, all None when the stream is accepted."""
    decoded = decode(events)
    try:
        out = run_sync([Verify()], decoded)
    except VerifyError as exc:
        return exc.index, exc.rule, exc.reason
    assert all(a is b for a, b in zip(out, decoded, strict=True))  # passed on untouched
    return None, None, None


def check(case: Case) -> None:
    index, rule, message = outcome(case.events)
    assert (index, rule) == (case.reject, case.rule), message
    if case.says is not None:
        assert message is not None
        assert case.says in message


def _params(cases: list[Case]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])


@_params(V_LIFE)
def test_lifecycle(case: Case) -> None:
    check(case)


@_params(V_TXT)
def test_text_messages(case: Case) -> None:
    check(case)


@_params(V_TC)
def test_tool_calls(case: Case) -> None:
    check(case)


@_params(V_EV)
def test_events(case: Case) -> None:
    check(case)


@_params(V_STEP)
def test_steps(case: Case) -> None:
    check(case)


@_params(V_CONC)
def test_concurrent(case: Case) -> None:
    check(case)


@_params(V_MULTI)
def test_multiple_runs(case: Case) -> None:
    check(case)


@_params(SUBAGENT_LIFECYCLE)
def test_subagent_lifecycle(case: Case) -> None:
    check(case)


@_params(REASONING)
def test_reasoning(case: Case) -> None:
    check(case)


@_params(RUNS)
def test_runs(case: Case) -> None:
    check(case)


@_params(STEPS)
def test_owner_keyed_steps(case: Case) -> None:
    check(case)


@_params(OWNERSHIP)
def test_ownership(case: Case) -> None:
    check(case)


# ---------------------------------------------------------------------------------------------
# The stage itself: errors, keep-going mode, open items, the end of the stream


def test_error_carries_rule_and_index() -> None:
    with pytest.raises(VerifyError) as info:
        run_sync([Verify()], decode([rs(), ts("m1"), ts("m1")]))
    assert info.value.rule == "text.already-open"
    assert info.value.index == 2
    assert str(info.value).endswith("(event 2)")


def test_rejected_event_is_not_passed_on() -> None:
    out: list[Event] = []
    stage = Verify()
    stage.connect(out.append, Context())
    events = decode([rs(), te("m1"), ts("m1")])
    stage.feed(events[0])
    with pytest.raises(VerifyError):
        stage.feed(events[1])
    stage.feed(events[2])
    assert out == [events[0], events[2]]


def test_keep_going_reports_and_skips_rejected_events() -> None:
    reports: list[Report] = []
    events = decode([rs(), tc("m1"), ts("m1"), tc("m1"), te("m1"), te("m1"), rf()])
    out = run_sync([Verify()], events, mode="keep_going", on_report=reports.append)
    assert out == [events[0], events[2], events[3], events[4], events[6]]
    assert [(r.code, r.index, r.severity) for r in reports] == [
        ("text.not-open", 1, "error"),
        ("text.not-open", 5, "error"),
    ]


def test_keep_going_state_describes_accepted_events_only() -> None:
    # A rejected first event does not count as the first event: the next one must still
    # open a run, and a rejected RUN_FINISHED leaves the run active.
    reports: list[Report] = []
    events = decode([ts("m1"), tc("m1"), rs(), ts("m1"), rf(), te("m1"), rf()])
    out = run_sync([Verify()], events, mode="keep_going", on_report=reports.append)
    assert [r.code for r in reports] == [
        "run.first-event",
        "run.first-event",
        "run.finished-open-text-messages",
    ]
    assert out == [events[2], events[3], events[5], events[6]]


def test_open_items() -> None:
    stage = Verify()
    stage.connect(lambda event: None, Context())
    assert stage.open_items() == OpenItems(run="none")
    for event in decode(
        [rs(), ts("m2"), ts("m1"), cs("t1"), rstart("r1"), rms("r2"), ss("b", by="s1"), ss("a"),
         sub_s("s1")]
    ):  # fmt: skip
        stage.feed(event)
    assert stage.open_items() == OpenItems(
        run="active",
        text_messages=("m2", "m1"),
        tool_calls=("t1",),
        reasoning_messages=("r2",),
        reasoning_spans=("r1",),
        steps=(("b", "s1"), ("a", None)),
        subagents=("s1",),
    )
    assert stage.open_items().describe() == (
        "steps: b (subagent 's1'), a; text messages: m2, m1; reasoning messages: r2; "
        "reasoning spans: r1; tool calls: t1; subagents: s1"
    )
    stage.feed(decode([rerr()])[0])
    assert stage.run_state == "errored"
    assert stage.open_items().text_messages == ("m2", "m1")  # kept until the next run
    stage.feed(decode([rs("r2")])[0])
    assert stage.open_items() == OpenItems(run="active")
    stage.feed(decode([rf("r2")])[0])
    assert stage.open_items() == OpenItems(run="finished")
    assert stage.open_items().describe() == ""


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # In keep-going mode the rejected RUN_FINISHED leaves the run active:
        pytest.param([rs(), ts("m1"), rf()], ["stream-ended-open"], id="finish-rejected"),
        pytest.param([rs(), ts("m1"), te("m1"), rf()], [], id="complete"),
        pytest.param([rs(), ts("m1"), rerr()], [], id="errored"),
        pytest.param([], ["stream-ended-empty"], id="empty"),
        pytest.param([rs()], ["stream-ended-open"], id="open-run"),
        pytest.param([rs(), rf(), rs("r2"), ts("m1")], ["stream-ended-open"], id="last-run-open"),
    ],
)
def test_report_unfinished(events: list[Wire], expected: list[str]) -> None:
    reports: list[Report] = []
    run_sync(
        [Verify(report_unfinished=True)],
        decode(events),
        mode="keep_going",
        on_report=reports.append,
    )
    assert [r.code for r in reports if r.severity == "warning"] == expected


def test_report_unfinished_names_what_is_open() -> None:
    reports: list[Report] = []
    run_sync(
        [Verify(report_unfinished=True)],
        decode([rs("r7"), ts("m1"), ss("a", by="s1")]),
        on_report=reports.append,
    )
    (report,) = reports
    assert report.code == "stream-ended-open"
    assert report.index is None
    assert report.message == (
        "The stream ended without 'RUN_FINISHED' or 'RUN_ERROR': run 'r7' is still active "
        "(still open: steps: a (subagent 's1'); text messages: m1)."
    )


def test_unfinished_stream_is_not_reported_by_default() -> None:
    reports: list[Report] = []
    run_sync([Verify()], decode([rs(), ts("m1")]), on_report=reports.append)
    assert reports == []


def test_report_unfinished_strict() -> None:
    with pytest.raises(StrictError, match="still active"):
        run_sync([Verify(report_unfinished=True)], decode([rs()]), mode="strict")


def test_each_verify_has_its_own_state() -> None:
    first, second = Verify(), Verify()
    assert first is not second
    run_sync([first], decode([rs(), ts("m1")]))
    assert len(run_sync([second], decode([rs(), ts("m1")]))) == 2  # no "run already active"


# ---------------------------------------------------------------------------------------------
# Differential: random streams against the reference (needs Node.js; see tests/oracle.py)

_MIDS = ("m1", "m2", "x", "")
_TIDS = ("t1", "t2", "x")
_SIDS = ("s1", "s2", "")
_tags = st.one_of(st.none(), st.sampled_from(_SIDS))
_mid = st.sampled_from(_MIDS)
_tid = st.sampled_from(_TIDS)

_snapshot_message = st.builds(
    msg,
    st.sampled_from(_MIDS + _TIDS),
    st.sampled_from(["user", "assistant", "reasoning", "activity"]),
    _tags,
    st.lists(_tid, max_size=2).map(tuple),
).map(lambda m: m if m["role"] == "assistant" else {k: v for k, v in m.items() if k != "toolCalls"})

_event = st.one_of(
    st.builds(rs, st.sampled_from(["r1", "r2"]), st.none() | st.lists(_snapshot_message, max_size=2)),
    st.builds(rf),
    st.builds(rerr),
    st.builds(ts, _mid, _tags),
    st.builds(tc, _mid, _tags),
    st.builds(te, _mid, _tags),
    st.builds(cs, _tid, _tags, st.none() | st.sampled_from(_MIDS)),
    st.builds(ca, _tid, _tags),
    st.builds(ce, _tid, _tags),
    st.builds(cr, st.sampled_from(_MIDS), _tid, _tags),
    st.builds(rstart, _mid, _tags),
    st.builds(rend, _mid, _tags),
    st.builds(rms, _mid, _tags),
    st.builds(rmc, _mid, _tags),
    st.builds(rme, _mid, _tags),
    st.builds(rev, st.sampled_from(["tool-call", "message"]), st.sampled_from(_MIDS + _TIDS), _tags),
    st.builds(act_s, _mid, _tags, st.none() | st.booleans()),
    st.builds(act_d, _mid, _tags),
    st.builds(ss, st.sampled_from(["a", "b"]), _tags),
    st.builds(sf, st.sampled_from(["a", "b"]), _tags),
    st.builds(sub_s, st.sampled_from(_SIDS), st.none() | st.sampled_from(_SIDS)),
    st.builds(sub_f, st.sampled_from(_SIDS)),
    st.builds(sub_e, st.sampled_from(_SIDS)),
    st.builds(snap, _snapshot_message, _snapshot_message),
)  # fmt: skip


@st.composite
def _streams(draw: st.DrawFn) -> list[Wire]:
    """Streams that mostly pass: each event is redrawn a few times while ours rejects it."""
    stage = Verify()
    stage.connect(lambda event: None, Context())
    events: list[Wire] = [rs()] if draw(st.booleans()) or draw(st.booleans()) else []
    for event in events:
        stage.feed(decode([event])[0])
    for _ in range(draw(st.integers(0, 30))):
        for _ in range(6):
            event = draw(_event)
            try:
                stage.feed(decode([event])[0])
            except VerifyError:
                continue
            break
        events.append(event)
    events.append(draw(_event))
    return events


@pytest.fixture(scope="module")
def oracle() -> Any:
    try:
        from oracle import OracleUnavailable, oracle_missing, run_oracle
    except ImportError:  # pragma: no cover - the harness is part of the test suite
        pytest.skip("tests/oracle.py is not importable")
    try:
        run_oracle([{"name": "probe", "events": []}])
    except OracleUnavailable as exc:  # pragma: no cover - depends on the machine
        oracle_missing(exc)
    return run_oracle


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(events=_streams())
def test_random_streams_match_the_reference(oracle: Any, events: list[Wire]) -> None:
    # The reference stops at the first error, so the rejected event is pinned down by running
    # the stream up to it (accepted) and through it (rejected).
    index, rule, message = outcome(events)
    if index is None:
        (result,) = oracle([{"name": "all", "events": events}])
        assert "error" not in result, result
    else:
        before, through = oracle(
            [{"name": "before", "events": events[:index]},
             {"name": "through", "events": events[: index + 1]}]
        )  # fmt: skip
        assert "error" not in before, (rule, message, before)
        assert "error" in through, (rule, message)


def test_owners_and_subagents_of_the_run() -> None:
    # What a gateway's connect prelude reads: the recorded owners, and the run's subagents in
    # the order they started with the event that ended each (None while active).
    stage = Verify(max_closed_ids=2)
    reports: list[Report] = []
    stage.connect(lambda event: None, Context("default", reports.append))
    events = decode(
        [
            rs(),
            {"type": "SUBAGENT_STARTED", "subagentRunId": "a", "name": "A"},
            {
                "type": "SUBAGENT_STARTED",
                "subagentRunId": "b",
                "name": "B",
                "parentSubagentRunId": "a",
                "metadata": {"k": 1},
            },
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "a", "result": 1},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "subagentRunId": "b"},
            {"type": "TEXT_MESSAGE_START", "messageId": "p"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "t",
                "toolCallName": "f",
                "parentMessageId": "m",
            },
            {"type": "REASONING_START", "messageId": "r", "subagentRunId": "b"},
            {"type": "SUBAGENT_STARTED", "subagentRunId": "c", "name": "C"},
            {"type": "SUBAGENT_ERROR", "subagentRunId": "c", "message": "x"},
        ]
    )
    for event in events:
        stage.feed(event)
    assert stage.owner("message", "m") == "b"
    assert stage.owner("tool-call", "t") == "b"  # inherited from its message
    assert stage.owner("reasoning", "r") == "b"
    assert stage.owner("message", "p") is None  # the parent agent
    assert stage.owner("activity", "m") is None  # nothing recorded
    assert stage.subagents() == [(events[1], events[3]), (events[2], None), (events[8], events[9])]
    for sid in ("d", "e"):  # past max_closed_ids=2 the oldest ended one is forgotten
        stage.feed(decode([{"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": sid}])[0])
        stage.feed(decode([{"type": "SUBAGENT_FINISHED", "subagentRunId": sid}])[0])
    assert [start.subagent_run_id for start, _ in stage.subagents()] == ["b", "d", "e"]
    assert [r.code for r in reports] == ["verify-forgot-ids"]
    stage.feed(decode([rerr()])[0])
    stage.feed(decode([rs("r2")])[0])
    assert stage.subagents() == [] and stage.owner("message", "m") is None
