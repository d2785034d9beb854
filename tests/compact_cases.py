"""Compaction cases: hand-written ones (one per rule of ``compactEvents``) and a seeded generator.

``tests/golden/compact_cases.jsonl`` holds :data:`NAMED` in the oracle's case format and
``tests/golden/compact_expected.jsonl`` what the official client's ``compactEvents`` 1.0.0
returns for them (``python -m tests.compact_cases`` rewrites both with the oracle).
:func:`generated` draws streams that exercise every rule at once: a few message and tool-call
ids opened, continued, restarted and ended in any order, state windows with good and failing
patches, run events, and interleaved events of every other kind.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.oracle import prepare_oracle

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES_FILE = GOLDEN / "compact_cases.jsonl"
EXPECTED_FILE = GOLDEN / "compact_expected.jsonl"

RS = {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"}
RF = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"}


def _ts(mid: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant", **kw}


def _tc(mid: str, delta: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta, **kw}


def _te(mid: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_END", "messageId": mid, **kw}


def _cs(cid: str, name: str = "search", **kw: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": name, **kw}


def _ca(cid: str, delta: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": delta, **kw}


def _ce(cid: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_END", "toolCallId": cid, **kw}


def _snap(value: Any, **kw: Any) -> dict[str, Any]:
    return {"type": "STATE_SNAPSHOT", "snapshot": value, **kw}


def _delta(*ops: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "STATE_DELTA", "delta": list(ops), **kw}


NAMED: list[dict[str, Any]] = [
    {
        "name": "text deltas joined, metadata merged",
        "events": [
            RS,
            _ts("m", metadata={"p": "openai"}),
            _tc("m", "Hel", metadata={"a": 1, "k": 1}),
            _tc("m", "", metadata={"k": 2}),
            _tc("m", "lo", timestamp=7, rawEvent={"x": 1}),
            _te("m", metadata={"finish": "stop"}),
            RF,
        ],
    },
    {
        "name": "no delta carried metadata",
        "events": [_ts("m"), _tc("m", "a"), _tc("m", "b"), _te("m")],
    },
    {
        "name": "tool args joined, metadata merged",
        "events": [
            _cs("c", parentMessageId="m", metadata={"s": 1}),
            _ca("c", '{"q":', metadata={"u": 1}),
            _ca("c", '"x"}', metadata={"u": 2, "v": None}),
            _ce("c"),
        ],
    },
    {
        "name": "interleaved events wait for the text message",
        "events": [
            _ts("m"),
            {"type": "CUSTOM", "name": "n", "value": 1},
            _tc("m", "x"),
            {"type": "RAW", "event": {"e": 1}},
            _te("m"),
            {"type": "CUSTOM", "name": "after", "value": None},
        ],
    },
    {
        "name": "interleaved events wait for the first open text, else the tool call",
        "events": [
            _cs("c"),
            {"type": "STEP_STARTED", "stepName": "s"},
            _ts("m1"),
            _ts("m2"),
            {"type": "STEP_FINISHED", "stepName": "s"},
            _tc("m2", "two"),
            _te("m2"),
            _tc("m1", "one"),
            _te("m1"),
            _ca("c", "{}"),
            _ce("c"),
        ],
    },
    {
        "name": "content without a start does not hold events",
        "events": [_tc("m", "x"), {"type": "CUSTOM", "name": "n", "value": 0}, _te("m")],
    },
    {
        "name": "run events are never held back",
        "events": [RS, _ts("m"), _tc("m", "x"), RF, _te("m")],
    },
    {
        "name": "start repeated before any delta: metadata merged",
        "events": [
            _ts("m", metadata={"a": 1, "k": 1}),
            _ts("m", metadata={"k": 2}),
            _tc("m", "x"),
            _te("m"),
        ],
    },
    {
        "name": "start repeated after a delta keeps the first metadata",
        "events": [
            _ts("m", metadata={"a": 1}),
            _tc("m", "x", metadata={"k": 1}),
            _ts("m", role="assistant", name="fixed", metadata={"k": 2, "b": 2}),
            _tc("m", "y", metadata={"k": 3}),
            _te("m"),
        ],
    },
    {
        "name": "tool start repeated after args: corrected name wins",
        "events": [
            _cs("c", "wrong"),
            _ca("c", "{"),
            _cs("c", "right", metadata={"r": 1}),
            _ca("c", "}"),
            _ce("c"),
        ],
    },
    {
        "name": "parallel tool calls ended in reverse order",
        "events": [
            _cs("a", metadata={"i": "a"}),
            _cs("b", metadata={"i": "b"}),
            _ca("a", "{}"),
            _ca("b", "{}"),
            _ce("b"),
            _ce("a"),
        ],
    },
    {
        "name": "open groups at the end: texts, then tools, then state",
        "events": [
            _snap({"n": 1}),
            _cs("c"),
            _ca("c", "{"),
            _ts("m"),
            _tc("m", "x"),
            {"type": "CUSTOM", "name": "held", "value": "h"},
        ],
    },
    {
        "name": "state: snapshot and deltas become one snapshot",
        "events": [
            RS,
            _snap({"a": 1}, metadata={"s": 1}),
            _delta({"op": "add", "path": "/b", "value": 2}),
            _delta({"op": "replace", "path": "/a", "value": 3}, metadata={"t": 2}),
            RF,
        ],
    },
    {
        "name": "state: only deltas pass through",
        "events": [
            RS,
            _delta({"op": "add", "path": "/b", "value": 2}, metadata={"d": 1}),
            _delta({"op": "add", "path": "/c", "value": 3}),
            RF,
        ],
    },
    {
        "name": "state: folding starts at the last snapshot, metadata of the whole window",
        "events": [
            _delta({"op": "add", "path": "/x", "value": 1}, metadata={"a": 1}),
            _snap({"y": 2}),
            _delta({"op": "add", "path": "/z", "value": 3}),
            _snap({"w": 4}, metadata={"b": 2}),
            _delta({"op": "add", "path": "/v", "value": 5}),
        ],
    },
    {
        "name": "state: a failing patch is skipped whole",
        "events": [
            _snap({"a": 1}),
            _delta({"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/missing"}),
            _delta(
                {"op": "test", "path": "/a", "value": 2}, {"op": "add", "path": "/c", "value": 3}
            ),
            _delta({"op": "add", "path": "/d", "value": 4}),
        ],
    },
    {
        "name": "state: one window per run, flushed by every run event",
        "events": [
            _snap({"pre": True}),
            RS,
            _snap({"r": 1}),
            RF,
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
            _snap({"r": 2}),
            {"type": "RUN_ERROR", "message": "boom"},
            _snap({"after": 1}),
        ],
    },
    {
        "name": "state events move after messages but not across runs",
        "events": [RS, _snap({"a": 1}), _ts("m"), _tc("m", "x"), _te("m"), _snap({"a": 2}), RF],
    },
    {
        "name": "reasoning is not compacted",
        "events": [
            {"type": "REASONING_START", "messageId": "r"},
            {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "a"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "b"},
            {"type": "REASONING_MESSAGE_END", "messageId": "rm"},
            {"type": "REASONING_END", "messageId": "r"},
        ],
    },
    {
        "name": "chunks are interleaved events",
        "events": [
            _ts("m"),
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "x", "delta": "c"},
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "t", "toolCallName": "f", "delta": "{}"},
            _te("m"),
        ],
    },
    {
        "name": "a message id reused after its end opens a new group",
        "events": [
            _ts("m"),
            _tc("m", "a"),
            _te("m"),
            _ts("m", metadata={"second": True}),
            _tc("m", "b"),
            _te("m"),
        ],
    },
    {
        "name": "end without start or content",
        "events": [_te("m", metadata={"e": 1}), _ce("c", metadata={"e": 2})],
    },
    {
        "name": "snapshots, results and activity are held",
        "events": [
            _ts("m"),
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "tm",
                "toolCallId": "c",
                "content": "ok",
                "metadata": {"r": 1},
            },
            {"type": "MESSAGES_SNAPSHOT", "messages": []},
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": "a",
                "activityType": "plan",
                "content": {"s": 1},
            },
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "a",
                "activityType": "plan",
                "patch": [{"op": "add", "path": "/t", "value": 2}],
            },
            _tc("m", "x"),
            _te("m"),
        ],
    },
    {
        "name": "subagent events are held like any other",
        "events": [
            _ts("m"),
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "helper"},
            {
                "type": "TEXT_MESSAGE_START",
                "messageId": "sm",
                "role": "assistant",
                "subagentRunId": "s1",
            },
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "sm",
                "delta": "sub",
                "subagentRunId": "s1",
                "metadata": {"m": 1},
            },
            {"type": "TEXT_MESSAGE_END", "messageId": "sm", "subagentRunId": "s1"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
            _tc("m", "main"),
            _te("m"),
        ],
    },
    {
        "name": "metadata values replaced whole, nulls and empty objects kept",
        "events": [
            _tc("m", "a", metadata={"u": {"in": 1}, "n": None}),
            _tc("m", "b", metadata={"u": {"out": 2}}),
            _tc("m", "c", metadata={}),
            _te("m"),
        ],
    },
]

_KINDS = ["text", "tool", "state", "run", "other"]
_OTHER = [
    {"type": "CUSTOM", "name": "c", "value": [1, 2]},
    {"type": "RAW", "event": {"raw": True}, "source": "s"},
    {"type": "STEP_STARTED", "stepName": "plan"},
    {"type": "STEP_FINISHED", "stepName": "plan", "metadata": {"ms": 3}},
    {"type": "TOOL_CALL_RESULT", "messageId": "res", "toolCallId": "c0", "content": "42"},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "think"},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "ch", "delta": "k"},
    {"type": "ACTIVITY_SNAPSHOT", "messageId": "act", "activityType": "p", "content": {}},
]


def _metadata(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.5:
        return {}
    keys = rng.sample(["a", "b", "k", "acme.latency_ms", "ag-ui"], rng.randint(0, 3))
    values: list[Any] = [None, 0, 1.5, "v", [1], {"x": {"y": 2}}, True, ""]
    return {"metadata": {key: rng.choice(values) for key in keys}}


def _patch_op(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["a", "b", "c"])
    return rng.choice(
        [
            {"op": "add", "path": f"/{key}", "value": rng.randint(0, 9)},
            {"op": "replace", "path": f"/{key}", "value": [rng.randint(0, 9)]},
            {"op": "remove", "path": f"/{key}"},
            {"op": "test", "path": f"/{key}", "value": 1},
            {"op": "copy", "from": f"/{key}", "path": "/copied"},
        ]
    )


def _event(rng: random.Random, run: list[int]) -> dict[str, Any]:
    kind = rng.choices(_KINDS, weights=[6, 4, 2, 1, 2])[0]
    extra = _metadata(rng)
    if rng.random() < 0.1:
        extra["timestamp"] = rng.randint(0, 10**12)
    if kind == "text":
        mid = rng.choice(["m1", "m2", "m3"])
        which = rng.choices(["start", "content", "end"], weights=[2, 5, 2])[0]
        if which == "start":
            if rng.random() < 0.3:
                extra["name"] = rng.choice(["a", "b"])
            return _ts(mid, **extra)
        if which == "content":
            return _tc(mid, rng.choice(["", "x", "yz", "é", "\n"]), **extra)
        return _te(mid, **extra)
    if kind == "tool":
        cid = rng.choice(["c1", "c2"])
        which = rng.choices(["start", "args", "end"], weights=[2, 5, 2])[0]
        if which == "start":
            if rng.random() < 0.3:
                extra["parentMessageId"] = "m1"
            return _cs(cid, rng.choice(["f", "g"]), **extra)
        if which == "args":
            return _ca(cid, rng.choice(["", "{", "}", '"q"']), **extra)
        return _ce(cid, **extra)
    if kind == "state":
        if rng.random() < 0.4:
            return _snap(
                {k: rng.randint(0, 3) for k in rng.sample("abc", rng.randint(0, 3))}, **extra
            )
        return _delta(*[_patch_op(rng) for _ in range(rng.randint(1, 3))], **extra)
    if kind == "run":
        run[0] += 1
        which = rng.choice(["started", "finished", "error"])
        if which == "started":
            return {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{run[0]}", **extra}
        if which == "finished":
            return {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{run[0]}", **extra}
        return {"type": "RUN_ERROR", "message": "failed", **extra}
    return {**rng.choice(_OTHER), **extra}


def generated(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` random compaction cases, the same for the same seed."""
    rng = random.Random(seed)
    cases = []
    for n in range(count):
        run = [0]
        events = [_event(rng, run) for _ in range(rng.randint(0, 30))]
        cases.append({"name": f"generated {seed}/{n}", "events": events})
    return cases


def run_reference_compact(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The official ``compactEvents`` over ``cases`` (``compact.cjs``, one Node.js process)."""
    directory = prepare_oracle()
    with tempfile.TemporaryDirectory(prefix="agui-compact-") as tmp:
        path = Path(tmp) / "cases.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
        done = subprocess.run(
            ["node", str(directory / "compact.cjs"), str(path)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [r["name"] for r in results] == [c["name"] for c in cases]
    return results


def _write_golden() -> None:  # pragma: no cover - run by hand with the oracle
    CASES_FILE.write_text("".join(json.dumps(c) + "\n" for c in NAMED), encoding="utf-8")
    results = run_reference_compact(NAMED)
    EXPECTED_FILE.write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    print(f"wrote {len(NAMED)} cases to {CASES_FILE} and {EXPECTED_FILE}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    _write_golden()
