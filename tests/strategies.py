"""Hypothesis strategies for AG-UI event streams, as wire dicts (camelCase JSON objects).

- :func:`json_values`, :func:`metadata`: JSON values that mean the same in Python and in
  JavaScript: integers within +-2**53, no integral or negative-zero floats (``JSON.stringify(1.0)``
  is ``"1"``), no lone surrogates, and never a ``__proto__`` key (the two places where the
  specification overrides the reference are tested elsewhere).
- :func:`runs`: the events of one or more runs, valid or nearly so: text messages, tool calls
  (with and without parents) and their results, reasoning, activity snapshots and deltas, state
  snapshots and deltas, chunks of the three kinds (with id-less continuations and subagent
  lanes), messages snapshots, steps, RAW/CUSTOM, with metadata on a random subset of events.
- :func:`cases`: a case for the conformance command, ``{"name", "events", "messages"?,
  "state"?}``, optionally with prior history and state.
- :func:`misordered_cases`: the same, with events swapped, moved, dropped or repeated, to be run
  without order verification.

Ids come from small pools, so collisions (an id reused across kinds, a tool call replayed, a
parent that names a user message) happen often enough to be exercised.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

Event = dict[str, Any]

SAFE_INT = 2**53

_KEYS = st.one_of(
    st.sampled_from(["", "ag-ui", "usage", "model", "finish", "ключ", "🔑", "a.b/c~d", "toString"]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6),
).filter(lambda key: key != "__proto__")

_FLOATS = st.one_of(
    st.sampled_from([0.5, -1.25, 3.141592653589793, 1e-7, 2.5e-300, -0.001, 123.456]),
    st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False).filter(
        lambda f: not f.is_integer()
    ),
)

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-SAFE_INT, max_value=SAFE_INT),
    _FLOATS,
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10),
)


@functools.cache
def json_values(max_leaves: int = 10) -> st.SearchStrategy[Any]:
    """Any JSON value (nested objects and arrays, nulls, floats, unicode keys)."""
    return st.recursive(
        _SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


@functools.cache
def metadata() -> st.SearchStrategy[dict[str, Any]]:
    """A metadata object: any keys (including ``""`` and ``"ag-ui"``), any JSON values."""
    return st.dictionaries(_KEYS, json_values(6), max_size=4)


_WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_MESSAGE_IDS = ["m1", "m2", "m3", "a1", "u1", "x"]
_CALL_IDS = ["c1", "c2", "c3", "x"]
_LANES = ["s1", "s2"]


class _Builder:
    """Draws one run's segments; ids are fresh unless a collision is drawn on purpose."""

    def __init__(self, draw: st.DrawFn, history_ids: list[str]) -> None:
        self.draw = draw
        self.counter = 0
        self.history_ids = history_ids
        self.parents: list[str] = []

    def fresh(self, prefix: str, pool: list[str]) -> str:
        if self.draw(st.integers(0, 9)) == 0:
            return self.draw(st.sampled_from(pool + self.history_ids))
        self.counter += 1
        return f"{prefix}{self.counter}"

    def meta(self, event: Event) -> Event:
        if self.draw(st.integers(0, 3)) == 0:
            event["metadata"] = self.draw(metadata())
        return event

    def tagged(self, event: Event, lane: str | None) -> Event:
        if lane is not None:
            event["subagentRunId"] = lane
        return self.meta(event)

    def words(self, min_size: int = 0) -> list[str]:
        return self.draw(st.lists(_WORDS, min_size=min_size, max_size=4))

    # Each segment is a list of events that must keep their relative order.

    def text(self, lane: str | None) -> list[Event]:
        mid = self.fresh("m", _MESSAGE_IDS)
        start: Event = {"type": "TEXT_MESSAGE_START", "messageId": mid}
        role = self.draw(st.sampled_from([None, None, "assistant", "user", "system", "developer"]))
        if role is not None:
            start["role"] = role
        if self.draw(st.booleans()):
            start["name"] = self.draw(_WORDS)
        if lane is None:
            self.parents.append(mid)
        events = [self.tagged(start, lane)]
        for delta in self.words():
            events.append(
                self.tagged(
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta}, lane
                )
            )
        events.append(self.tagged({"type": "TEXT_MESSAGE_END", "messageId": mid}, lane))
        return events

    def tool(self, lane: str | None) -> list[Event]:
        cid = self.fresh("c", _CALL_IDS)
        start: Event = {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "f"}
        choice = self.draw(st.integers(0, 3))
        if lane is None and choice and self.parents + self.history_ids:
            start["parentMessageId"] = self.draw(st.sampled_from(self.parents + self.history_ids))
        elif choice == 3:
            start["parentMessageId"] = self.fresh("p", _MESSAGE_IDS)
        events = [self.tagged(start, lane)]
        for delta in self.words():
            events.append(
                self.tagged({"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": delta}, lane)
            )
        events.append(self.tagged({"type": "TOOL_CALL_END", "toolCallId": cid}, lane))
        if self.draw(st.booleans()):
            content: Any = self.draw(
                st.one_of(
                    _WORDS,
                    st.lists(st.builds(lambda t: {"type": "text", "text": t}, _WORDS), max_size=2),
                )
            )
            result: Event = {
                "type": "TOOL_CALL_RESULT",
                "messageId": self.fresh("t", ["t1", "t2"]),
                "toolCallId": cid,
                "content": content,
            }
            events.append(self.tagged(result, lane))
        return events

    def reasoning(self, lane: str | None) -> list[Event]:
        mid = self.fresh("r", _MESSAGE_IDS)
        events = [
            self.tagged(
                {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}, lane
            )
        ]
        for delta in self.words():
            events.append(
                self.tagged(
                    {"type": "REASONING_MESSAGE_CONTENT", "messageId": mid, "delta": delta}, lane
                )
            )
        events.append(self.tagged({"type": "REASONING_MESSAGE_END", "messageId": mid}, lane))
        if self.draw(st.booleans()):
            span = self.fresh("rs", [mid])
            events = [
                self.tagged({"type": "REASONING_START", "messageId": span}, lane),
                *events,
                self.tagged({"type": "REASONING_END", "messageId": span}, lane),
            ]
        if self.draw(st.booleans()):
            subtype, entity = self.draw(
                st.sampled_from([("message", mid), ("tool-call", "c1"), ("message", "u1")])
            )
            events.append(
                self.tagged(
                    {
                        "type": "REASONING_ENCRYPTED_VALUE",
                        "subtype": subtype,
                        "entityId": entity,
                        "encryptedValue": self.draw(_WORDS),
                    },
                    lane if entity == mid else None,
                )
            )
        return events

    def patch(self) -> list[dict[str, Any]]:
        ops = []
        for _ in range(self.draw(st.integers(0, 3))):
            op = self.draw(st.sampled_from(["add", "add", "replace", "remove", "test"]))
            path = self.draw(st.sampled_from(["/a", "/b", "/list/-", "/list/0", "/n/x", ""]))
            entry: dict[str, Any] = {"op": op, "path": path}
            if op != "remove":
                entry["value"] = self.draw(json_values(4))
            ops.append(entry)
        return ops

    def activity(self, lane: str | None) -> list[Event]:
        aid = self.fresh("act", _MESSAGE_IDS)
        atype = self.draw(st.sampled_from(["progress", "search"]))
        events = []
        for _ in range(self.draw(st.integers(1, 2))):
            snapshot: Event = {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": aid,
                "activityType": atype,
                "content": self.draw(st.dictionaries(_KEYS, json_values(4), max_size=3))
                | {"list": [], "n": {}},
            }
            replace = self.draw(st.sampled_from([None, True, False]))
            if replace is not None:
                snapshot["replace"] = replace
            events.append(self.tagged(snapshot, lane))
            for _ in range(self.draw(st.integers(0, 2))):
                delta = {"type": "ACTIVITY_DELTA", "messageId": aid, "activityType": atype}
                events.append(self.tagged({**delta, "patch": self.patch()}, lane))
        return events

    def state(self, lane: str | None) -> list[Event]:
        if self.draw(st.integers(0, 3)) == 0:
            snapshot = self.draw(st.one_of(json_values(6), st.just({"list": [], "n": {}})))
            return [self.tagged({"type": "STATE_SNAPSHOT", "snapshot": snapshot}, lane)]
        return [self.tagged({"type": "STATE_DELTA", "delta": self.patch()}, lane)]

    def chunks(self, lane: str | None) -> list[Event]:
        kind = self.draw(
            st.sampled_from(["TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"])
        )
        if kind == "TOOL_CALL_CHUNK":
            key, entity = "toolCallId", self.fresh("c", _CALL_IDS)
            first: Event = {"type": kind, key: entity, "toolCallName": "f"}
            if lane is None and self.parents and self.draw(st.booleans()):
                first["parentMessageId"] = self.draw(st.sampled_from(self.parents))
        else:
            key, entity = "messageId", self.fresh("m", _MESSAGE_IDS)
            first = {"type": kind, key: entity}
            if kind == "TEXT_MESSAGE_CHUNK":
                role = self.draw(st.sampled_from([None, "assistant", "user"]))
                if role is not None:
                    first["role"] = role
                if lane is None:
                    self.parents.append(entity)
        if self.draw(st.booleans()):
            first["delta"] = self.draw(_WORDS)
        events = [self.tagged(first, lane)]
        for _ in range(self.draw(st.integers(0, 4))):
            chunk: Event = {"type": kind}
            if self.draw(st.integers(0, 3)) == 0:
                chunk[key] = entity
            if self.draw(st.integers(0, 3)):
                chunk["delta"] = self.draw(_WORDS)
            tag = lane if lane is not None and self.draw(st.booleans()) else None
            events.append(self.tagged(chunk, tag))
        return events

    def misc(self, lane: str | None) -> list[Event]:
        which = self.draw(st.integers(0, 3))
        if which == 0:
            return [self.tagged({"type": "RAW", "event": self.draw(json_values(4))}, lane)]
        if which == 1:
            custom = {"type": "CUSTOM", "name": "c", "value": self.draw(json_values(4))}
            return [self.tagged(custom, lane)]
        if which == 2:
            step = self.fresh("step", ["step"])
            return [
                self.tagged({"type": "STEP_STARTED", "stepName": step}, lane),
                self.tagged({"type": "STEP_FINISHED", "stepName": step}, lane),
            ]
        messages = self.draw(st.lists(history_message(), max_size=3))
        snapshot: Event = {"type": "MESSAGES_SNAPSHOT", "messages": messages}
        if self.draw(st.booleans()):
            scope = self.draw(st.sampled_from([None, [], ["progress"], ["search", "progress"]]))
            snapshot["metadata"] = {"@ag-ui/client": {"authoritativeActivityTypes": scope}}
        return [self.meta(snapshot)]


@st.composite
def history_message(draw: st.DrawFn) -> dict[str, Any]:
    """One well-formed message of any of the seven roles, ids from the shared pools."""
    role = draw(
        st.sampled_from(
            ["user", "assistant", "assistant", "system", "tool", "activity", "reasoning"]
        )
    )
    message: dict[str, Any] = {
        "id": draw(st.sampled_from([*_MESSAGE_IDS, "h1", "h2"])),
        "role": role,
    }
    if role in ("user", "system", "reasoning"):
        message["content"] = draw(_WORDS)
    elif role == "assistant":
        if draw(st.booleans()):
            message["content"] = draw(_WORDS)
        if draw(st.booleans()):
            message["toolCalls"] = [
                {
                    "id": draw(st.sampled_from(_CALL_IDS)),
                    "type": "function",
                    "function": {"name": "f", "arguments": draw(_WORDS)},
                }
            ]
    elif role == "tool":
        message["content"] = draw(_WORDS)
        message["toolCallId"] = draw(st.sampled_from(_CALL_IDS))
    else:
        message["activityType"] = draw(st.sampled_from(["progress", "search"]))
        message["content"] = {"n": draw(st.integers(0, 9))}
    if draw(st.integers(0, 2)) == 0:
        message["metadata"] = draw(metadata())
    return message


@st.composite
def runs(draw: st.DrawFn, history_ids: list[str] | None = None) -> list[Event]:
    """The events of one to three runs, each wrapped in RUN_STARTED/RUN_FINISHED."""
    events: list[Event] = []
    for index in range(draw(st.integers(1, 3))):
        run_id = f"r{index + 1}"
        builder = _Builder(draw, history_ids or [])
        lanes = draw(st.lists(st.sampled_from(_LANES), max_size=2, unique=True))
        lifecycle = draw(st.booleans())
        segments: list[list[Event]] = []
        atomic: list[bool] = []
        makers = [
            builder.text,
            builder.text,
            builder.tool,
            builder.reasoning,
            builder.activity,
            builder.state,
            builder.chunks,
            builder.chunks,
            builder.misc,
        ]
        for _ in range(draw(st.integers(0, 6))):
            maker = draw(st.sampled_from(makers))
            lane = draw(st.sampled_from([None, *lanes]))
            segments.append(maker(lane))
            # Chunk streams are kept contiguous most of the time: an explicit event in the
            # same lane closes them, and an id-less continuation after that is an error.
            atomic.append(maker == builder.chunks and draw(st.integers(0, 4)) > 0)
        order = _interleave(draw, segments, atomic)
        started: Event = {"type": "RUN_STARTED", "threadId": "t", "runId": run_id}
        if draw(st.integers(0, 4)) == 0:
            started["input"] = {
                "threadId": "t",
                "runId": run_id,
                "messages": draw(st.lists(history_message(), max_size=3)),
            }
        events.append(builder.meta(started))
        if lifecycle:
            events += [{"type": "SUBAGENT_STARTED", "subagentRunId": s, "name": s} for s in lanes]
        events += order
        if lifecycle:
            events += [{"type": "SUBAGENT_FINISHED", "subagentRunId": s} for s in lanes]
        events.append(builder.meta({"type": "RUN_FINISHED", "threadId": "t", "runId": run_id}))
    return events


def _interleave(draw: st.DrawFn, segments: list[list[Event]], atomic: list[bool]) -> list[Event]:
    """Merge segments in a drawn order that keeps each segment's own order."""
    queues = [
        [list(s)] if whole else [[e] for e in s] for s, whole in zip(segments, atomic, strict=True)
    ]
    out: list[Event] = []
    while any(queues):
        live = [i for i, q in enumerate(queues) if q]
        pick = live[draw(st.integers(0, len(live) - 1))]
        out += queues[pick].pop(0)
    return out


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    """A conformance case: valid-ish runs, optionally with prior history and state."""
    case: dict[str, Any] = {"name": "hypothesis"}
    history: list[dict[str, Any]] = []
    if draw(st.booleans()):
        history = draw(st.lists(history_message(), max_size=4))
        case["messages"] = history
    if draw(st.booleans()):
        case["state"] = draw(st.dictionaries(_KEYS, json_values(4), max_size=3)) | {"list": []}
    case["events"] = draw(runs([m["id"] for m in history if m["role"] == "assistant"]))
    return case


@st.composite
def misordered_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A case whose events were perturbed: swapped, moved, dropped or repeated."""
    case = draw(cases())
    events = list(case["events"])
    for _ in range(draw(st.integers(1, 5))):
        if not events:
            break
        i = draw(st.integers(0, len(events) - 1))
        action = draw(st.sampled_from(["swap", "move", "drop", "repeat"]))
        if action == "swap":
            j = draw(st.integers(0, len(events) - 1))
            events[i], events[j] = events[j], events[i]
        elif action == "move":
            event = events.pop(i)
            events.insert(draw(st.integers(0, len(events))), event)
        elif action == "drop":
            del events[i]
        else:
            events.insert(draw(st.integers(0, len(events))), dict(events[i]))
    return {**case, "events": events}


@st.composite
def nested_subagent_run(draw: st.DrawFn) -> list[Event]:
    """One valid run in which subagents start (some under others, some ending before their
    children) and interleave their own steps, text messages, tool calls and results and
    reasoning with the parent agent's, every event of an item tagged by its owner or untagged
    (an absent tag never disagrees). Everything is closed before ``RUN_FINISHED``, so the
    official verifier accepts it whole."""
    b = _Builder(draw, [])
    events: list[Event] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STATE_SNAPSHOT", "snapshot": {}},
    ]
    count = 0

    def fresh(prefix: str) -> str:
        nonlocal count
        count += 1
        return f"{prefix}{count}"

    active: list[str] = []  # subagents
    started: list[str] = []
    messages: dict[str, str | None] = {}  # assistant messages (for tool calls): their owner
    text: dict[str, str | None] = {}  # open items: their owner
    calls: dict[str, str | None] = {}
    ended_calls: list[str] = []
    reasoning: dict[str, str | None] = {}
    spans: dict[str, str | None] = {}
    steps: dict[tuple[str | None, str], None] = {}

    def tag(event: Event, owner: str | None, *, always: bool = False) -> Event:
        """Tagged by ``owner`` (continuations only sometimes), with metadata sometimes."""
        if owner is not None and (always or draw(st.booleans())):
            event["subagentRunId"] = owner
        return b.meta(event)

    def pick(table: dict[Any, Any]) -> Any:
        return draw(st.sampled_from(sorted(table, key=str)))

    ops = ["subagent", "subagent", "end-subagent", "text", "text", "content", "content",
           "end-text", "call", "args", "end-call", "result", "reasoning", "reasoning-content",
           "end-reasoning", "span", "end-span", "step", "end-step", "state"]  # fmt: skip
    for _ in range(draw(st.integers(4, 30))):
        op = draw(st.sampled_from(ops))
        owner = draw(st.sampled_from([None, *active]))
        if op == "subagent":
            sid = f"s{len(started) + 1}"
            start: Event = {"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": f"n{sid}"}
            if started and draw(st.integers(0, 2)):
                start["parentSubagentRunId"] = draw(st.sampled_from(started))
            if draw(st.booleans()):
                start["description"] = draw(_WORDS)
            if ended_calls and draw(st.booleans()):
                start["parentToolCallId"] = draw(st.sampled_from(ended_calls))
            if messages and draw(st.booleans()):
                start["parentMessageId"] = pick(messages)
            events.append(b.meta(start))
            active.append(sid)
            started.append(sid)
        elif op == "end-subagent" and active:
            sid = draw(st.sampled_from(active))
            active.remove(sid)
            if draw(st.booleans()):
                end: Event = {"type": "SUBAGENT_FINISHED", "subagentRunId": sid}
                if draw(st.booleans()):
                    end["result"] = draw(json_values(3).filter(lambda v: v is not None))
            else:
                end = {"type": "SUBAGENT_ERROR", "subagentRunId": sid, "message": "failed"}
            events.append(b.meta(end))
        elif op == "text":
            mid = fresh("m")
            start = {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}
            events.append(tag(start, owner, always=True))
            text[mid] = messages[mid] = owner
        elif op in ("content", "end-text") and text:
            mid = pick(text)
            if op == "content":
                delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": draw(_WORDS)}
                events.append(tag(delta, text[mid]))
            else:
                events.append(tag({"type": "TEXT_MESSAGE_END", "messageId": mid}, text.pop(mid)))
        elif op == "call" and messages:
            parent = pick(messages)
            cid = fresh("c")
            start = {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "f",
                     "parentMessageId": parent}  # fmt: skip
            events.append(tag(start, messages[parent]))
            calls[cid] = messages[parent]
        elif op in ("args", "end-call") and calls:
            cid = pick(calls)
            if op == "args":
                args = {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": draw(_WORDS)}
                events.append(tag(args, calls[cid]))
            else:
                events.append(tag({"type": "TOOL_CALL_END", "toolCallId": cid}, calls.pop(cid)))
                ended_calls.append(cid)
        elif op == "result" and ended_calls:
            result = {"type": "TOOL_CALL_RESULT", "messageId": fresh("t"),
                      "toolCallId": draw(st.sampled_from(ended_calls)), "content": draw(_WORDS)}  # fmt: skip
            events.append(tag(result, owner, always=True))
        elif op == "reasoning":
            mid = fresh("r")
            start = {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}
            events.append(tag(start, owner, always=True))
            reasoning[mid] = owner
        elif op in ("reasoning-content", "end-reasoning") and reasoning:
            mid = pick(reasoning)
            if op == "reasoning-content":
                delta = {"type": "REASONING_MESSAGE_CONTENT", "messageId": mid,
                         "delta": draw(_WORDS)}  # fmt: skip
                events.append(tag(delta, reasoning[mid]))
            else:
                end = {"type": "REASONING_MESSAGE_END", "messageId": mid}
                events.append(tag(end, reasoning.pop(mid)))
        elif op == "span":
            mid = fresh("rs")
            events.append(tag({"type": "REASONING_START", "messageId": mid}, owner, always=True))
            spans[mid] = owner
        elif op == "end-span" and spans:
            mid = pick(spans)
            events.append(tag({"type": "REASONING_END", "messageId": mid}, spans.pop(mid)))
        elif op == "step":
            name = draw(st.sampled_from(["plan", "act"]))
            if (owner, name) not in steps:
                events.append(tag({"type": "STEP_STARTED", "stepName": name}, owner, always=True))
                steps[owner, name] = None
        elif op == "end-step" and steps:
            owner, name = pick(steps)
            del steps[owner, name]
            events.append(tag({"type": "STEP_FINISHED", "stepName": name}, owner, always=True))
        elif op == "state":
            events.append({"type": "STATE_DELTA", "delta": [
                {"op": "add", "path": f"/k{len(events)}", "value": draw(json_values(3))}]})  # fmt: skip
    for cid in calls:
        events.append({"type": "TOOL_CALL_END", "toolCallId": cid})
    events += [{"type": "TEXT_MESSAGE_END", "messageId": m} for m in text]
    events += [{"type": "REASONING_MESSAGE_END", "messageId": m} for m in reasoning]
    events += [{"type": "REASONING_END", "messageId": m} for m in spans]
    for owner, name in steps:
        events.append(tag({"type": "STEP_FINISHED", "stepName": name}, owner, always=True))
    events += [{"type": "SUBAGENT_FINISHED", "subagentRunId": s} for s in active]
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return events
