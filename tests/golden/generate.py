"""Build the golden conformance corpus and its expected results.

Run ``python tests/golden/generate.py`` from anywhere: it rewrites ``cases.jsonl`` (run with
verification), ``cases_noverify.jsonl`` (run with ``--no-verify``) and the ``expected*.jsonl``
files beside them, the latter produced by the official reference client through
``../shared/oracle/apply.cjs`` (installed into ``.cache/oracle`` on first use). Everything here is
deterministic: the generated streams use a fixed seed, and the ids the reference mints at random
(``THINKING_*`` translation) are stored as ``<minted-N>`` placeholders (see
``tests/oracle.py``), so an unchanged generator rewrites byte-identical files.

Case names read ``category/what-it-shows``; where a case ports a scenario of the official test
suites, its name follows that test's name (see ``../shared/reference/agui-rules-0.0.58.md``).
A case may declare what it expects (an error or not); the generator checks every declaration
against the oracle's result and refuses to write files that contradict one, so a case meant to
show a rejection cannot silently turn into one that shows nothing.

``tests/golden/spec_overrides.jsonl`` is not written here: its expectations are hand-written
from the specification (the two places where the project deliberately differs from the
reference).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

Event = dict[str, Any]
Case = dict[str, Any]

# ---------------------------------------------------------------------------------------------
# Registry


class Corpus:
    def __init__(self) -> None:
        self.verified: list[Case] = []
        self.unverified: list[Case] = []
        # name -> True (must error) / False (must not error); absent: not declared
        self.intent: dict[str, bool] = {}
        self._names: set[str] = set()

    def add(
        self,
        name: str,
        events: Iterable[Any],
        *,
        messages: list[dict[str, Any]] | None = None,
        state: Any = None,
        verify: bool = True,
        error: bool | None = False,
        mirror: bool = False,
    ) -> None:
        """Register a case.

        :param verify: which file the case goes to (with or without order verification).
        :param error: whether the reference must reject the case (``None``: not declared).
        :param mirror: also add the case, unchecked, to the ``--no-verify`` file as
            ``noverify/<name>`` (used for streams the verifier rejects, to pin down what the
            reducer alone makes of them).
        """
        if name in self._names:
            raise ValueError(f"duplicate case name {name!r}")
        self._names.add(name)
        case: Case = {"name": name, "events": list(flatten(events))}
        if messages is not None:
            case["messages"] = messages
        if state is not None:
            case["state"] = state
        (self.verified if verify else self.unverified).append(case)
        if error is not None:
            self.intent[name] = error
        if mirror:
            self.add(
                f"noverify/{name}",
                case["events"],
                messages=messages,
                state=state,
                verify=False,
                error=None,
            )


def flatten(items: Iterable[Any]) -> Iterable[Event]:
    for item in items:
        if isinstance(item, dict):
            yield item
        else:
            yield from flatten(item)


# ---------------------------------------------------------------------------------------------
# Event and message builders (wire dicts, camelCase)


def E(type_: str, **fields: Any) -> Event:
    return {"type": type_, **fields}


def RS(run_id: str = "r1", **f: Any) -> Event:
    return E("RUN_STARTED", threadId="t1", runId=run_id, **f)


def RF(run_id: str = "r1", **f: Any) -> Event:
    return E("RUN_FINISHED", threadId="t1", runId=run_id, **f)


def RE(message: str = "boom", **f: Any) -> Event:
    return E("RUN_ERROR", message=message, **f)


def run(*events: Any, run_id: str = "r1") -> list[Event]:
    return [RS(run_id), *flatten(events), RF(run_id)]


def TS(mid: str, **f: Any) -> Event:
    return E("TEXT_MESSAGE_START", messageId=mid, **f)


def TC(mid: str, delta: str, **f: Any) -> Event:
    return E("TEXT_MESSAGE_CONTENT", messageId=mid, delta=delta, **f)


def TE(mid: str, **f: Any) -> Event:
    return E("TEXT_MESSAGE_END", messageId=mid, **f)


def text(mid: str, *deltas: str, **start: Any) -> list[Event]:
    tag = {"subagentRunId": start["subagentRunId"]} if "subagentRunId" in start else {}
    return [TS(mid, **start), *(TC(mid, d, **tag) for d in deltas), TE(mid, **tag)]


def CS(cid: str, name: str = "search", **f: Any) -> Event:
    return E("TOOL_CALL_START", toolCallId=cid, toolCallName=name, **f)


def CA(cid: str, delta: str, **f: Any) -> Event:
    return E("TOOL_CALL_ARGS", toolCallId=cid, delta=delta, **f)


def CE(cid: str, **f: Any) -> Event:
    return E("TOOL_CALL_END", toolCallId=cid, **f)


def call(cid: str, name: str = "search", *deltas: str, **start: Any) -> list[Event]:
    tag = {"subagentRunId": start["subagentRunId"]} if "subagentRunId" in start else {}
    return [CS(cid, name, **start), *(CA(cid, d, **tag) for d in deltas), CE(cid, **tag)]


def CR(mid: str, cid: str, content: Any = "ok", **f: Any) -> Event:
    return E("TOOL_CALL_RESULT", messageId=mid, toolCallId=cid, content=content, **f)


def RMS(mid: str, **f: Any) -> Event:
    return E("REASONING_MESSAGE_START", messageId=mid, role="reasoning", **f)


def RMC(mid: str, delta: str, **f: Any) -> Event:
    return E("REASONING_MESSAGE_CONTENT", messageId=mid, delta=delta, **f)


def RME(mid: str, **f: Any) -> Event:
    return E("REASONING_MESSAGE_END", messageId=mid, **f)


def reasoning(mid: str, *deltas: str, **start: Any) -> list[Event]:
    tag = {"subagentRunId": start["subagentRunId"]} if "subagentRunId" in start else {}
    return [RMS(mid, **start), *(RMC(mid, d, **tag) for d in deltas), RME(mid, **tag)]


def RSTART(mid: str, **f: Any) -> Event:
    return E("REASONING_START", messageId=mid, **f)


def REND(mid: str, **f: Any) -> Event:
    return E("REASONING_END", messageId=mid, **f)


def REV(subtype: str, entity: str, value: str = "enc", **f: Any) -> Event:
    return E(
        "REASONING_ENCRYPTED_VALUE", subtype=subtype, entityId=entity, encryptedValue=value, **f
    )


def AS(mid: str, atype: str, content: dict[str, Any], **f: Any) -> Event:
    return E("ACTIVITY_SNAPSHOT", messageId=mid, activityType=atype, content=content, **f)


def AD(mid: str, atype: str, patch: list[dict[str, Any]], **f: Any) -> Event:
    return E("ACTIVITY_DELTA", messageId=mid, activityType=atype, patch=patch, **f)


def SS(snapshot: Any, **f: Any) -> Event:
    return E("STATE_SNAPSHOT", snapshot=snapshot, **f)


def SD(delta: list[dict[str, Any]], **f: Any) -> Event:
    return E("STATE_DELTA", delta=delta, **f)


def MS(messages: list[dict[str, Any]], **f: Any) -> Event:
    return E("MESSAGES_SNAPSHOT", messages=messages, **f)


def TXC(**f: Any) -> Event:
    return E("TEXT_MESSAGE_CHUNK", **f)


def TLC(**f: Any) -> Event:
    return E("TOOL_CALL_CHUNK", **f)


def RNC(**f: Any) -> Event:
    return E("REASONING_MESSAGE_CHUNK", **f)


def SUB_S(sid: str, name: str = "helper", **f: Any) -> Event:
    return E("SUBAGENT_STARTED", subagentRunId=sid, name=name, **f)


def SUB_F(sid: str, **f: Any) -> Event:
    return E("SUBAGENT_FINISHED", subagentRunId=sid, **f)


def SUB_E(sid: str, message: str = "failed", **f: Any) -> Event:
    return E("SUBAGENT_ERROR", subagentRunId=sid, message=message, **f)


def STEP_S(name: str, **f: Any) -> Event:
    return E("STEP_STARTED", stepName=name, **f)


def STEP_F(name: str, **f: Any) -> Event:
    return E("STEP_FINISHED", stepName=name, **f)


def op(
    op_: str, path: str, value: Any = ..., *, from_: str | None = None, **f: Any
) -> dict[str, Any]:
    patch: dict[str, Any] = {"op": op_}
    if from_ is not None:
        patch["from"] = from_
    patch["path"] = path
    if value is not ...:
        patch["value"] = value
    patch.update(f)
    return patch


def M(id_: str, role: str, content: Any = ..., **f: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"id": id_, "role": role}
    if content is not ...:
        message["content"] = content
    message.update(f)
    return message


def user(id_: str, content: Any = "hi", **f: Any) -> dict[str, Any]:
    return M(id_, "user", content, **f)


def asst(id_: str, content: Any = ..., **f: Any) -> dict[str, Any]:
    return M(id_, "assistant", content, **f)


def system(id_: str, content: str = "be brief", **f: Any) -> dict[str, Any]:
    return M(id_, "system", content, **f)


def developer(id_: str, content: str = "dev note", **f: Any) -> dict[str, Any]:
    return M(id_, "developer", content, **f)


def tool_msg(id_: str, call_id: str, content: Any = "result", **f: Any) -> dict[str, Any]:
    return M(id_, "tool", content, toolCallId=call_id, **f)


def activity(id_: str, atype: str = "progress", content: Any = None, **f: Any) -> dict[str, Any]:
    return M(id_, "activity", {"step": 1} if content is None else content, activityType=atype, **f)


def rmsg(id_: str, content: str = "thinking", **f: Any) -> dict[str, Any]:
    return M(id_, "reasoning", content, **f)


def tcall(id_: str, name: str = "search", args: str = "", **f: Any) -> dict[str, Any]:
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}, **f}


def text_part(text_: str, **f: Any) -> dict[str, Any]:
    return {"type": "text", "text": text_, **f}


def image_part(url: str = "https://x.test/a.png", **f: Any) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "url", "value": url, "mimeType": "image/png"}, **f}


def run_input(messages: list[dict[str, Any]], **f: Any) -> dict[str, Any]:
    return {"threadId": "t1", "runId": "r1", "messages": messages, **f}


ALL_ROLES = {
    "developer": developer("x"),
    "system": system("x"),
    "assistant": asst("x", "hello"),
    "user": user("x"),
    "tool": tool_msg("x", "c0"),
    "activity": activity("x"),
    "reasoning": rmsg("x"),
}


# ---------------------------------------------------------------------------------------------
# Categories


def metadata_cases(c: Corpus) -> None:
    c.add(
        "meta/text-merges-across-start-content-end-last-write-wins",
        run(
            TS("m1", metadata={"a": 1, "b": 1}),
            TC("m1", "Hel", metadata={"b": 2, "c": 2}),
            TC("m1", "lo"),
            TE("m1", metadata={"c": 3, "usage": {"in": 3, "out": 5}}),
        ),
    )
    c.add("meta/text-leaves-metadata-absent-when-no-event-carries-any", run(text("m1", "a", "b")))
    c.add(
        "meta/text-keeps-a-null-value-rather-than-dropping-the-key",
        run(TS("m1", metadata={"finish": None}), TC("m1", "x"), TE("m1")),
    )
    c.add(
        "meta/null-value-overwrites-earlier-value",
        run(TS("m1", metadata={"a": 1, "b": 2}), TC("m1", "x", metadata={"a": None}), TE("m1")),
    )
    c.add(
        "meta/null-value-under-key-then-value-again",
        run(TS("m1", metadata={"a": None}), TC("m1", "x"), TE("m1", metadata={"a": 0})),
    )
    c.add(
        "meta/empty-object-creates-empty-metadata",
        run(TS("m1", metadata={}), TC("m1", "x"), TE("m1")),
    )
    c.add(
        "meta/empty-object-on-end-only-creates-empty-metadata",
        run(TS("m1"), TC("m1", "x"), TE("m1", metadata={})),
    )
    c.add(
        "meta/changes-nothing-when-a-later-event-carries-an-empty-object",
        run(TS("m1", metadata={"a": 1}), TC("m1", "x", metadata={}), TE("m1", metadata={})),
    )
    c.add(
        "meta/replaces-a-nested-object-wholesale",
        run(
            TS("m1", metadata={"trace": {"id": "a", "span": 1}, "keep": True}),
            TC("m1", "x"),
            TE("m1", metadata={"trace": {"span": 2}}),
        ),
    )
    c.add(
        "meta/replaces-an-array-instead-of-concatenating-it",
        run(
            TS("m1", metadata={"tags": ["a", "b", "c"]}),
            TC("m1", "x"),
            TE("m1", metadata={"tags": ["d"]}),
        ),
    )
    c.add(
        "meta/replaces-a-nested-object-under-the-reserved-key",
        run(
            TS("m1", metadata={"ag-ui": {"a": 1, "b": {"c": 2}}}),
            TC("m1", "x", metadata={"ag-ui": {"b": {"d": 3}}}),
            TE("m1"),
        ),
    )
    c.add(
        "meta/reserved-key-accepts-any-value",
        run(TS("m1", metadata={"ag-ui": [1, "two", None]}), TE("m1", metadata={"ag-ui": "plain"})),
    )
    c.add(
        "meta/unknown-keys-empty-unicode-and-punctuation",
        run(
            TS(
                "m1",
                metadata={
                    "": 1,
                    "ключ": "значение",
                    "🔑": {"x": [1]},
                    "a.b/c~d": 3,
                    " ": " ",
                    "toString": 1,
                    "constructor": {"name": "x"},
                },
            ),
            TC("m1", "x", metadata={"": "replaced", "日本": None}),
            TE("m1"),
        ),
    )
    c.add(
        "meta/accepts-every-json-value-shape-under-a-key",
        run(
            TS(
                "m1",
                metadata={
                    "s": "str",
                    "i": 42,
                    "neg": -7,
                    "f": 3.25,
                    "tiny": 1.5e-300,
                    "big": 9007199254740991,
                    "t": True,
                    "fa": False,
                    "n": None,
                    "arr": [1, [2, [3, {"deep": None}]], {}],
                    "obj": {"a": {"b": {"c": []}}},
                    "empty_s": "",
                    "empty_a": [],
                    "empty_o": {},
                },
            ),
            TE("m1"),
        ),
    )
    c.add(
        "meta/same-key-changes-type-across-events",
        run(
            TS("m1", metadata={"v": {"a": 1}}),
            TC("m1", "x", metadata={"v": [1, 2]}),
            TC("m1", "y", metadata={"v": "s"}),
            TE("m1", metadata={"v": None}),
        ),
    )
    c.add(
        "meta/many-keys-accumulate",
        run(
            TS("m1", metadata={f"k{i:02d}": i for i in range(40)}),
            *(
                TC("m1", str(i), metadata={f"k{i:02d}": -i, f"n{i:02d}": i})
                for i in range(0, 40, 3)
            ),
            TE("m1"),
        ),
    )
    c.add(
        "meta/deeply-nested-value",
        run(
            TS("m1", metadata={"d": {"a": [{"b": [{"c": [{"d": [{"e": "bottom"}]}]}]}]}}), TE("m1")
        ),
    )
    c.add(
        "meta/unicode-values-and-escapes",
        run(
            TS(
                "m1",
                metadata={
                    "q": '"quoted"\n\ttab\\',
                    "emoji": "👩‍💻",
                    "nul": "a\u0000b",
                    "rtl": "مرحبا",
                    "bmp": "\uffff",
                },
            ),
            TE("m1"),
        ),
    )
    c.add(
        "meta/reasoning-merges-across-the-reasoning-message-lifecycle",
        run(
            RMS("r1", metadata={"a": 1, "b": 1}),
            RMC("r1", "th", metadata={"b": 2}),
            RMC("r1", "ink"),
            RME("r1", metadata={"c": 3}),
        ),
    )
    c.add("meta/reasoning-empty-object", run(RMS("r1"), RMC("r1", "x"), RME("r1", metadata={})))
    c.add("meta/reasoning-null-value", run(RMS("r1", metadata={"x": None}), RME("r1")))
    c.add(
        "meta/merges-tool-call-event-metadata-into-the-tool-call-itself",
        run(
            TS("a1"),
            TC("a1", "let me check"),
            TE("a1"),
            CS("c1", "search", parentMessageId="a1", metadata={"a": 1, "b": 1}),
            CA("c1", '{"q":', metadata={"b": 2}),
            CA("c1", '"x"}'),
            CE("c1", metadata={"c": 3}),
        ),
    )
    c.add(
        "meta/tool-call-metadata-never-reaches-created-parent",
        run(CS("c1", "search", metadata={"p": 1}), CA("c1", "{}", metadata={"q": 2}), CE("c1")),
    )
    c.add(
        "meta/assistant-text-and-its-tool-call-keep-separate-metadata",
        run(
            TS("a1", metadata={"msg": 1}),
            TC("a1", "x"),
            CS("c1", "f", parentMessageId="a1", metadata={"call": 1}),
            TE("a1", metadata={"msg": 2}),
            CE("c1", metadata={"call": 2}),
        ),
    )
    c.add(
        "meta/each-of-several-tool-calls-on-one-parent-keeps-its-own",
        run(
            TS("a1"),
            TE("a1"),
            CS("c1", "f", parentMessageId="a1", metadata={"n": 1}),
            CS("c2", "g", parentMessageId="a1", metadata={"n": 2}),
            CA("c2", "{}", metadata={"late": "c2"}),
            CA("c1", "{}", metadata={"late": "c1"}),
            CE("c2", metadata={"end": 2}),
            CE("c1"),
            CS("c3", "h", parentMessageId="a1"),
            CE("c3"),
        ),
    )
    c.add(
        "meta/puts-tool-result-metadata-on-the-tool-message-it-creates",
        run(
            call("c1", "f", "{}", metadata={"call": True}),
            CR("t1", "c1", "42", metadata={"latency_ms": 12, "cached": None}),
        ),
    )
    c.add("meta/tool-result-without-metadata-has-none", run(call("c1", "f", "{}"), CR("t1", "c1")))
    c.add("meta/tool-result-empty-object", run(call("c1"), CR("t1", "c1", metadata={})))
    c.add(
        "meta/activity-snapshot-metadata-lands-on-activity",
        run(AS("act1", "progress", {"pct": 0}, metadata={"source": "planner"})),
    )
    c.add(
        "meta/activity-keeps-accumulated-metadata-when-a-replacing-snapshot-carries-none",
        run(
            AS("act1", "progress", {"pct": 0}, metadata={"a": 1}),
            AS("act1", "progress", {"pct": 50}),
            AS("act1", "progress", {"pct": 100}, replace=True),
        ),
    )
    c.add(
        "meta/activity-replacing-snapshot-merges-on-top",
        run(
            AS("act1", "progress", {"pct": 0}, metadata={"a": 1, "b": 1}),
            AS("act1", "progress", {"pct": 100}, metadata={"b": 2, "c": 3}),
        ),
    )
    c.add(
        "meta/activity-merges-across-a-snapshot-and-a-following-delta",
        run(
            AS("act1", "progress", {"pct": 0}, metadata={"a": 1}),
            AD("act1", "progress", [op("replace", "/pct", 10)], metadata={"b": 2}),
            AD("act1", "progress", [op("replace", "/pct", 20)], metadata={"a": 3}),
        ),
    )
    c.add(
        "meta/activity-delta-still-merges-metadata-but-leaves-content-unchanged",
        run(
            AS("act1", "progress", {"pct": 0}, metadata={"a": 1}),
            AD("act1", "progress", [op("remove", "/missing")], metadata={"usage": 7}),
        ),
    )
    c.add(
        "meta/activity-delta-failing-test-op-keeps-metadata",
        run(
            AS("act1", "progress", {"pct": 0}),
            AD(
                "act1",
                "progress-2",
                [op("test", "/pct", 99), op("replace", "/pct", 1)],
                metadata={"kept": True},
            ),
        ),
    )
    c.add(
        "meta/activity-replace-false-merges-metadata-only",
        run(
            AS("act1", "progress", {"pct": 0}, metadata={"a": 1}),
            AS("act1", "other", {"pct": 99}, replace=False, metadata={"b": 2}),
        ),
    )
    c.add(
        "meta/activity-replace-false-on-non-activity-merges-nothing",
        run(text("m1", "hi"), AS("m1", "progress", {"pct": 1}, replace=False, metadata={"x": 1})),
    )
    c.add(
        "meta/activity-replace-on-non-activity-discards-old-metadata",
        run(
            TS("m1", metadata={"old": 1}),
            TC("m1", "hi"),
            TE("m1"),
            AS("m1", "progress", {"pct": 1}, metadata={"new": 1}),
        ),
    )
    c.add(
        "meta/activity-delta-unknown-id-merges-nothing",
        run(AD("nope", "progress", [op("add", "/a", 1)], metadata={"x": 1})),
    )
    c.add(
        "meta/activity-delta-on-non-activity-merges-nothing",
        run(text("m1", "hi"), AD("m1", "progress", [op("add", "/a", 1)], metadata={"x": 1})),
    )
    c.add("meta/activity-empty-object-creates-empty", run(AS("act1", "p", {}, metadata={})))
    c.add(
        "meta/stamps-a-text-chunk-metadata-onto-both-synthesized-events",
        run(TXC(messageId="m1", delta="Hi", metadata={"a": 1})),
    )
    c.add(
        "meta/stamps-a-tool-call-chunk-metadata-onto-the-start-and-args-events",
        run(TLC(toolCallId="c1", toolCallName="f", delta="{}", metadata={"a": 1})),
    )
    c.add(
        "meta/stamps-a-reasoning-chunk-metadata-onto-the-start-and-content-events",
        run(RNC(messageId="r1", delta="hm", metadata={"a": 1})),
    )
    c.add(
        "meta/preserves-metadata-from-a-text-chunk-that-carries-no-delta",
        run(TXC(messageId="m1", delta="Hello"), TXC(metadata={"finish": "stop"})),
    )
    c.add(
        "meta/preserves-metadata-from-a-tool-call-chunk-that-carries-no-delta",
        run(TLC(toolCallId="c1", toolCallName="f", delta="{}"), TLC(metadata={"finish": "tool"})),
    )
    c.add(
        "meta/preserves-metadata-from-a-reasoning-chunk-that-carries-no-delta",
        run(RNC(messageId="r1", delta="hm"), RNC(metadata={"tokens": 5})),
    )
    c.add(
        "meta/metadata-only-continuation-with-same-id",
        run(
            TXC(messageId="m1", delta="a", metadata={"k": 1}),
            TXC(messageId="m1", metadata={"k": 2}),
        ),
    )
    c.add(
        "meta/emits-nothing-extra-for-a-continuation-chunk-with-neither-delta-nor-metadata",
        run(TXC(messageId="m1", delta="a"), TXC(), TXC(messageId="m1"), TXC(delta="b")),
    )
    c.add(
        "meta/does-not-carry-a-metadata-only-chunk-metadata-onto-the-next-message",
        run(
            TXC(messageId="m1", delta="a"),
            TXC(metadata={"only": "m1"}),
            TXC(messageId="m2", delta="b"),
        ),
    )
    c.add(
        "meta/does-not-put-the-new-chunk-metadata-on-the-end-that-closes-the-previous-message",
        run(
            TXC(messageId="m1", delta="a", metadata={"m": 1}),
            TXC(messageId="m2", delta="b", metadata={"m": 2}),
        ),
    )
    c.add(
        "meta/does-not-leak-across-a-switch-from-a-text-chunk-to-a-tool-call-chunk",
        run(
            TXC(messageId="m1", delta="a", metadata={"text": 1}),
            TLC(
                toolCallId="c1",
                toolCallName="f",
                parentMessageId="m1",
                delta="{}",
                metadata={"tool": 1},
            ),
        ),
    )
    c.add(
        "meta/metadata-only-chunk-with-new-id-rides-the-new-start",
        run(TXC(messageId="m1", delta="a"), TXC(messageId="m2", metadata={"opened": True})),
    )
    c.add(
        "meta/lands-a-final-usage-only-chunk-metadata-on-the-message",
        run(
            TXC(messageId="m1", role="assistant", delta="The answer", metadata={"model": "x"}),
            TXC(delta=" is 42"),
            TXC(metadata={"usage": {"input": 10, "output": 4}, "finish": "stop"}),
        ),
    )
    c.add("meta/chunk-empty-object", run(TXC(messageId="m1", delta="a", metadata={})))
    c.add(
        "meta/chunk-continuation-with-delta-merges",
        run(
            TXC(messageId="m1", delta="a", metadata={"a": 1}),
            TXC(delta="b", metadata={"a": 2, "b": 1}),
        ),
    )
    c.add(
        "meta/never-reaches-a-message-from-non-message-events",
        run(
            STEP_S("plan", metadata={"step": 1}),
            TS("m1"),
            TC("m1", "x"),
            TE("m1"),
            SS({"a": 1}, metadata={"state": 1}),
            SD([op("add", "/b", 2)], metadata={"delta": 1}),
            E("RAW", event={"k": 1}, metadata={"raw": 1}),
            E("CUSTOM", name="c", value=1, metadata={"custom": 1}),
            RSTART("rs", metadata={"span": 1}),
            REND("rs", metadata={"span": 2}),
            REV("message", "m1", metadata={"enc": 1}),
            STEP_F("plan", metadata={"step": 2}),
        ),
    )
    c.add(
        "meta/run-started-and-run-finished-metadata-stay-on-the-event",
        [RS(metadata={"run": 1}), text("m1", "x"), RF(metadata={"usage": {"total": 9}})],
    )
    c.add(
        "meta/subagent-lifecycle-metadata-stays-on-the-event",
        run(
            SUB_S("s1", metadata={"a": 1}),
            text("m1", "x", subagentRunId="s1"),
            SUB_F("s1", metadata={"b": 2}),
        ),
    )
    c.add(
        "meta/messages-snapshot-carries-each-message-own-metadata-and-not-the-event",
        run(MS([user("u1", metadata={"own": 1}), asst("a1", "hi")], metadata={"event": 1})),
    )
    c.add(
        "meta/merges-a-later-event-metadata-onto-a-snapshot-provided-message",
        run(
            MS([asst("a1", "hi", metadata={"a": 1})]),
            TS("a1", metadata={"b": 2}),
            TC("a1", "!"),
            TE("a1", metadata={"a": 3}),
        ),
    )
    c.add(
        "meta/snapshot-replaces-accumulated-metadata-wholesale",
        run(
            TS("a1", metadata={"streamed": 1}),
            TC("a1", "x"),
            TE("a1"),
            MS([asst("a1", "x", metadata={"canonical": 1})]),
        ),
    )
    c.add(
        "meta/snapshot-message-without-metadata-inherits-nothing",
        run(TS("a1", metadata={"streamed": 1}), TC("a1", "x"), TE("a1"), MS([asst("a1", "x")])),
    )
    c.add(
        "meta/keeps-encrypted-value-metadata-off-the-message-it-names",
        run(reasoning("r1", "x"), REV("message", "r1", "sealed", metadata={"enc": 1})),
    )
    c.add(
        "meta/encrypted-value-for-tool-call-leaves-tool-call-metadata",
        run(
            call("c1", "f", "{}", metadata={"a": 1}),
            REV("tool-call", "c1", "sealed", metadata={"b": 2}),
        ),
    )
    c.add(
        "meta/start-on-existing-history-message-merges",
        [RS(), TS("u1", metadata={"b": 2}), TC("u1", "!"), TE("u1"), RF()],
        messages=[user("u1", "hello", metadata={"a": 1})],
    )
    c.add(
        "meta/start-on-existing-message-with-empty-object",
        [RS(), TS("u1", metadata={}), TE("u1"), RF()],
        messages=[user("u1", "hello")],
    )
    c.add(
        "meta/tool-call-start-replay-merges-into-existing-call",
        run(CS("c1", "f", metadata={"a": 1}), CE("c1"), CS("c1", "f", metadata={"b": 2}), CE("c1")),
    )
    c.add(
        "meta/run-started-input-existing-message-keeps-old-metadata",
        [
            RS(
                input=run_input(
                    [user("u1", "NEW", metadata={"n": 1}), user("u2", "two", metadata={"m": 2})]
                )
            ),
            RF(),
        ],
        messages=[user("u1", "OLD", metadata={"o": 1})],
    )
    c.add(
        "meta/text-events-on-activity-id-drop-their-metadata",
        run(
            AS("act1", "p", {"x": 1}, metadata={"act": 1}),
            TS("act1", metadata={"text": 1}),
            TC("act1", "x", metadata={"text": 2}),
            TE("act1", metadata={"text": 3}),
        ),
    )
    c.add(
        "meta/reasoning-events-on-activity-id-drop-their-metadata",
        run(
            AS("act1", "p", {"x": 1}),
            RMS("act1", metadata={"r": 1}),
            RMC("act1", "x", metadata={"r": 2}),
            RME("act1", metadata={"r": 3}),
        ),
    )
    c.add(
        "meta/subagent-tagged-events-merge-like-any-other",
        run(
            TS("m1", subagentRunId="s1", metadata={"a": 1}),
            TC("m1", "x", subagentRunId="s1", metadata={"b": 2}),
            TE("m1", subagentRunId="s1", metadata={"a": 3}),
        ),
    )
    c.add(
        "meta/history-message-metadata-untouched-by-unrelated-events",
        [RS(), text("m1", "x"), RF()],
        messages=[user("u1", "hi", metadata={"keep": {"me": [1, 2]}})],
    )
    c.add(
        "meta/tool-result-content-parts-keep-part-metadata",
        run(
            call("c1"),
            CR(
                "t1",
                "c1",
                [text_part("a", metadata={"p": 1}), image_part(metadata=["any", "value"])],
                metadata={"m": 1},
            ),
        ),
    )
    c.add(
        "meta/metadata-on-content-event-for-message-from-history",
        [RS(), TC("a0", " more", metadata={"x": 1}), RF()],
        messages=[asst("a0", "prior")],
        verify=False,
    )
    c.add(
        "meta/content-for-unknown-message-drops-metadata",
        [RS(), TC("ghost", "x", metadata={"x": 1}), TE("ghost", metadata={"y": 1}), RF()],
        verify=False,
    )
    c.add(
        "meta/tool-args-for-unknown-call-drops-metadata",
        [RS(), CA("ghost", "{}", metadata={"x": 1}), CE("ghost", metadata={"y": 1}), RF()],
        verify=False,
    )


def text_cases(c: Corpus) -> None:
    c.add("text/should-handle-text-message-events-correctly", run(text("m1", "Hello", " world")))
    c.add("text/role-defaults-to-assistant", run(TS("m1"), TC("m1", "x"), TE("m1")))
    for role in ("developer", "system", "assistant", "user"):
        c.add(f"text/role-{role}-kept", run(TS("m1", role=role), TC("m1", "x"), TE("m1")))
    c.add("text/role-tool-rejected-by-schema", run(TS("m1", role="tool"), TE("m1")), error=True)
    c.add(
        "text/should-set-name-on-message-when-text-message-start-has-name",
        run(TS("m1", name="bot"), TC("m1", "x"), TE("m1")),
    )
    c.add(
        "text/should-not-set-name-on-message-when-text-message-start-has-no-name",
        run(TS("m1"), TE("m1")),
    )
    c.add("text/empty-name-kept", run(TS("m1", name=""), TE("m1")))
    c.add(
        "text/should-handle-multiple-text-messages-correctly",
        run(text("m1", "one"), text("m2", "two"), text("m3", "three", role="user")),
    )
    c.add(
        "text/should-allow-concurrent-text-messages-with-different-ids",
        run(TS("m1"), TS("m2"), TC("m2", "b"), TC("m1", "a"), TC("m2", "b"), TE("m1"), TE("m2")),
    )
    c.add(
        "text/empty-delta-allowed",
        run(TS("m1"), TC("m1", ""), TC("m1", "x"), TC("m1", ""), TE("m1")),
    )
    c.add("text/start-without-content", run(TS("m1"), TE("m1")))
    c.add("text/unicode-content", run(text("m1", "héllo ", "世界 ", "👋🏽", '\n\t"q"')))
    c.add(
        "text/should-not-create-duplicate-message-when-text-start-uses-same-id-as-tool-call-parent",
        run(CS("c1", "f", parentMessageId="a1"), CE("c1"), TS("a1"), TC("a1", "done"), TE("a1")),
    )
    c.add(
        "text/reuse-existing-start-keeps-role-name-and-content",
        [RS(), TS("u1", role="assistant", name="bot"), TC("u1", " more"), TE("u1"), RF()],
        messages=[user("u1", "hello", name="alice")],
    )
    c.add(
        "text/reuse-existing-start-on-system-message",
        [RS(), TS("s1", role="user"), TC("s1", "+"), TE("s1"), RF()],
        messages=[system("s1", "rules")],
    )
    c.add(
        "text/reopen-after-end-in-same-run-appends",
        run(text("m1", "first"), text("m1", " second", role="user", name="ignored")),
    )
    c.add(
        "text/content-replaces-non-string-content",
        [RS(), TS("u1"), TC("u1", "flat"), TE("u1"), RF()],
        messages=[user("u1", [text_part("part"), image_part()])],
    )
    c.add(
        "text/content-on-assistant-without-content-starts-from-empty",
        run(CS("c1", "f", parentMessageId="a1"), CE("c1"), TS("a1"), TC("a1", "after"), TE("a1")),
    )
    c.add(
        "text/start-on-reasoning-id-keeps-reasoning-role",
        run(reasoning("r1", "think"), TS("r1"), TC("r1", " out loud"), TE("r1")),
    )
    c.add(
        "text/start-on-tool-message-appends-to-its-content",
        run(call("c1"), CR("t1", "c1", "res"), TS("t1"), TC("t1", "+text"), TE("t1")),
    )
    c.add(
        "text/content-replaces-tool-message-parts",
        run(call("c1"), CR("t1", "c1", [text_part("part")]), TS("t1"), TC("t1", "flat"), TE("t1")),
    )
    c.add(
        "text/start-on-activity-is-dropped",
        run(AS("act1", "p", {"a": 1}), TS("act1", role="user"), TC("act1", "x"), TE("act1")),
    )
    c.add("text/subagent-tag-copied-onto-created-message", run(text("m1", "x", subagentRunId="s1")))
    c.add(
        "text/subagent-tag-not-copied-onto-reused-message",
        [RS(), TS("u1", subagentRunId="s1"), TE("u1", subagentRunId="s1"), RF()],
        messages=[user("u1")],
    )
    c.add(
        "text/continuation-tag-never-written",
        [RS(), TS("m1"), TC("m1", "x", subagentRunId="s2"), TE("m1", subagentRunId="s3"), RF()],
        verify=False,
    )
    c.add(
        "text/content-before-start-is-skipped",
        [RS(), TC("m1", "lost"), TS("m1"), TC("m1", "kept"), TE("m1"), RF()],
        verify=False,
    )
    c.add("text/end-without-start-changes-nothing", [RS(), TE("m1"), RF()], verify=False)
    c.add(
        "text/duplicate-start-while-active-reuses",
        [RS(), TS("m1"), TC("m1", "a"), TS("m1", role="user"), TC("m1", "b"), TE("m1"), RF()],
        verify=False,
    )
    c.add(
        "text/message-appended-after-history",
        [RS(), text("m2", "new"), RF()],
        messages=[user("u1"), asst("a1", "old")],
    )
    c.add(
        "text/rawevent-and-timestamp-accepted",
        run(
            TS("m1", timestamp=1700000000000, rawEvent={"provider": "x"}),
            TC("m1", "x", rawEvent="raw-string", timestamp=-5),
            TE("m1", rawEvent=[1, 2]),
        ),
    )


def reasoning_cases(c: Corpus) -> None:
    c.add(
        "reasoning/basic-message",
        run(RSTART("rs1"), reasoning("r1", "Let me ", "think"), REND("rs1")),
    )
    c.add(
        "reasoning/should-not-create-duplicate-message-when-start-uses-existing-message-id",
        run(
            RMS("r1"),
            RMC("r1", "First part"),
            RME("r1"),
            RMS("r1"),
            RMC("r1", " Second part"),
            RME("r1"),
        ),
    )
    c.add("reasoning/span-creates-no-message", run(RSTART("rs1"), REND("rs1")))
    c.add(
        "reasoning/span-and-message-may-share-an-id",
        run(RSTART("r1"), RMS("r1"), RMC("r1", "x"), RME("r1"), REND("r1")),
    )
    c.add(
        "reasoning/start-on-existing-non-reasoning-keeps-role",
        [RS(), RMS("a1"), RMC("a1", " hmm"), RME("a1"), RF()],
        messages=[asst("a1", "answer")],
    )
    c.add(
        "reasoning/content-replaces-non-string-content",
        [RS(), RMS("u1"), RMC("u1", "flat"), RME("u1"), RF()],
        messages=[user("u1", [text_part("a")])],
    )
    c.add(
        "reasoning/start-on-activity-is-dropped",
        run(AS("act1", "p", {"a": 1}), RMS("act1"), RMC("act1", "x"), RME("act1")),
    )
    c.add(
        "reasoning/subagent-tag-copied-onto-created-message",
        run(reasoning("r1", "x", subagentRunId="s1")),
    )
    c.add("reasoning/empty-delta", run(reasoning("r1", "", "a", "")))
    c.add(
        "reasoning/message-start-without-role-rejected",
        run(E("REASONING_MESSAGE_START", messageId="r1"), RME("r1")),
        error=True,
    )
    c.add(
        "reasoning/message-start-with-wrong-role-rejected",
        run(E("REASONING_MESSAGE_START", messageId="r1", role="assistant"), RME("r1")),
        error=True,
    )
    c.add(
        "reasoning/encrypted-value-on-reasoning-message",
        run(reasoning("r1", "x"), REV("message", "r1", "sealed-1")),
    )
    c.add(
        "reasoning/encrypted-value-on-user-message",
        [RS(), REV("message", "u1", "sealed-u"), RF()],
        messages=[user("u1")],
    )
    c.add(
        "reasoning/encrypted-value-on-activity-ignored",
        run(AS("act1", "p", {}), REV("message", "act1", "sealed")),
    )
    c.add(
        "reasoning/encrypted-value-unknown-entity-ignored",
        run(REV("message", "nobody", "x"), REV("tool-call", "nothing", "y")),
    )
    c.add(
        "reasoning/encrypted-value-on-tool-call",
        run(call("c1", "f", "{}"), REV("tool-call", "c1", "sealed-c")),
    )
    c.add(
        "reasoning/encrypted-value-tool-call-subtype-does-not-touch-message-with-same-id",
        run(
            text("c1", "msg named c1"),
            CS("c1", "f", parentMessageId="a1"),
            CE("c1"),
            REV("tool-call", "c1", "for-call"),
        ),
    )
    c.add(
        "reasoning/encrypted-value-message-subtype-does-not-touch-tool-call",
        run(call("c1"), REV("message", "c1", "for-message")),
    )
    c.add(
        "reasoning/encrypted-value-overwrites-previous",
        [RS(), REV("message", "r0", "second"), RF()],
        messages=[rmsg("r0", "old", encryptedValue="first")],
    )
    c.add(
        "reasoning/encrypted-value-first-tool-call-match-wins",
        [RS(), REV("tool-call", "c1", "only-first"), RF()],
        messages=[asst("a1", toolCalls=[tcall("c1")]), asst("a2", toolCalls=[tcall("c1")])],
    )
    c.add(
        "reasoning/encrypted-value-first-message-match-wins",
        [RS(), REV("message", "dup", "only-first"), RF()],
        messages=[user("dup", "one"), user("dup", "two")],
    )
    c.add(
        "reasoning/encrypted-value-tool-call-only-searches-assistants",
        [RS(), REV("tool-call", "c1", "x"), RF()],
        messages=[user("u1", toolCalls=[tcall("c1")])],
    )
    c.add(
        "reasoning/content-for-unknown-message-skipped",
        [RS(), RMC("ghost", "x"), RME("ghost"), RF()],
        verify=False,
    )
    c.add(
        "reasoning/interleaved-with-text",
        run(RMS("r1"), TS("m1"), RMC("r1", "why"), TC("m1", "because"), RME("r1"), TE("m1")),
    )


def tool_cases(c: Corpus) -> None:
    c.add(
        "tool/should-handle-a-single-tool-call-correctly",
        run(call("c1", "get_weather", '{"city":', '"Paris"}')),
    )
    c.add("tool/no-parent-creates-assistant-keyed-by-tool-call-id", run(call("c1")))
    c.add("tool/should-handle-multiple-tool-calls-correctly", run(call("c1", "f"), call("c2", "g")))
    c.add(
        "tool/should-handle-tool-calls-with-parent-message-id-correctly",
        run(text("a1", "checking"), call("c1", "f", "{}", parentMessageId="a1")),
    )
    c.add(
        "tool/should-find-parent-via-full-array-search-when-tool-result-sits-between-two-tool-calls",
        run(
            text("a1", "x"),
            call("c1", parentMessageId="a1"),
            CR("t1", "c1"),
            call("c2", "g", parentMessageId="a1"),
            CR("t2", "c2"),
        ),
    )
    c.add(
        "tool/should-find-parent-via-full-array-search-when-multiple-messages-precede-it",
        [
            RS(),
            call("c1", parentMessageId="a1"),
            call("c2", "g", parentMessageId="a1"),
            CR("t1", "c1", "r1"),
            CR("t2", "c1", "r2"),
            RF(),
        ],
        messages=[user("u1"), asst("a1", "sure"), user("u2", "and?")],
    )
    c.add(
        "tool/should-fall-back-to-tool-call-id-when-parent-collides-with-a-non-assistant-message",
        [RS(), call("c1", parentMessageId="u1"), RF()],
        messages=[user("u1")],
    )
    c.add(
        "tool/parent-collision-with-reasoning-message",
        run(reasoning("r1", "x"), call("c1", parentMessageId="r1")),
    )
    c.add(
        "tool/parent-collision-fallback-id-not-checked-for-uniqueness",
        [RS(), call("dup", parentMessageId="u1"), RF()],
        messages=[user("u1"), user("dup", "same id as the call")],
    )
    c.add(
        "tool/should-create-new-assistant-message-when-parent-is-not-found-anywhere",
        run(call("c1", parentMessageId="p9")),
    )
    c.add("tool/empty-parent-message-id-counts-as-absent", run(call("c1", parentMessageId="")))
    c.add(
        "tool/should-handle-multiple-tool-calls-on-the-same-parent-message",
        run(
            text("a1", "x"),
            CS("c1", "f", parentMessageId="a1"),
            CS("c2", "g", parentMessageId="a1"),
            CS("c3", "h", parentMessageId="a1"),
            CA("c2", "2"),
            CA("c1", "1"),
            CA("c3", "3"),
            CE("c3"),
            CE("c1"),
            CE("c2"),
        ),
    )
    c.add(
        "tool/consecutive-calls-without-parent-get-separate-messages",
        run(call("c1"), call("c2"), call("c3")),
    )
    c.add(
        "tool/does-not-append-a-second-entry-when-the-same-start-is-applied-twice",
        run(CS("c1", "f"), CA("c1", "{}"), CE("c1"), CS("c1", "f"), CE("c1")),
    )
    c.add(
        "tool/does-not-append-a-second-entry-for-a-tool-call-carried-from-a-previous-run",
        [RS(), CS("c1", "f", parentMessageId="a1"), CA("c1", "more"), CE("c1"), RF()],
        messages=[asst("a1", toolCalls=[tcall("c1", "f", '{"x":1}')])],
    )
    c.add(
        "tool/does-not-create-a-stray-assistant-message-when-a-replayed-start-names-an-unknown-parent",
        run(call("c1", "f", "{}"), CS("c1", "f", parentMessageId="nowhere"), CE("c1")),
    )
    c.add(
        "tool/updates-the-existing-entry-in-place-when-a-start-reuses-an-id-under-a-different-name",
        run(call("c1", "old_name", "{}"), CS("c1", "new_name"), CE("c1")),
    )
    c.add(
        "tool/replay-keeps-arguments-and-appends-later-args",
        run(call("c1", "f", '{"a":'), CS("c1", "f"), CA("c1", "1}"), CE("c1")),
    )
    c.add(
        "tool/replay-finds-call-in-non-assistant-message",
        [RS(), CS("c1", "renamed"), CA("c1", "+"), CE("c1"), RF()],
        messages=[user("u1", "odd", toolCalls=[tcall("c1", "f", "x")])],
    )
    c.add(
        "tool/args-accumulate-including-empty-deltas",
        run(CS("c1"), CA("c1", ""), CA("c1", '{"k"'), CA("c1", ""), CA("c1", ':"v"}'), CE("c1")),
    )
    c.add("tool/arguments-need-not-be-json", run(call("c1", "f", "not json {")))
    c.add(
        "tool/args-before-start-are-skipped",
        [RS(), CA("c1", "lost"), CS("c1"), CA("c1", "kept"), CE("c1"), RF()],
        verify=False,
    )
    c.add(
        "tool/result-placed-immediately-after-owner",
        run(text("a1", "x"), call("c1", parentMessageId="a1"), text("a2", "after"), CR("t1", "c1")),
    )
    c.add(
        "tool/places-a-tool-result-immediately-after-its-tool-call-even-when-it-arrives-after-trailing-text",
        run(call("c1", parentMessageId="a1"), text("a2", "follow-up"), CR("t1", "c1", "sunny")),
    )
    c.add(
        "tool/result-goes-after-earlier-results-of-same-owner",
        run(
            text("a1", "x"),
            call("c1", parentMessageId="a1"),
            call("c2", parentMessageId="a1"),
            text("a2", "later"),
            CR("t1", "c1", "one"),
            CR("t2", "c2", "two"),
            CR("t3", "c1", "three"),
        ),
    )
    c.add(
        "tool/result-skips-only-tool-messages-directly-after-owner",
        [RS(), CR("t2", "c1", "new"), RF()],
        messages=[
            asst("a1", toolCalls=[tcall("c1")]),
            tool_msg("t1", "c1"),
            user("u1"),
            tool_msg("tx", "zz"),
        ],
    )
    c.add("tool/result-without-owner-is-appended", run(text("m1", "x"), CR("t1", "unknown-call")))
    c.add(
        "tool/result-before-call-start-is-appended",
        [RS(), CR("t1", "c1"), call("c1"), RF()],
        verify=False,
    )
    c.add(
        "tool/duplicate-result-id-gives-two-messages",
        run(call("c1"), CR("t1", "c1", "a"), CR("t1", "c1", "b")),
    )
    c.add(
        "tool/result-owner-is-first-assistant-holding-the-call",
        [RS(), CR("t9", "c1"), RF()],
        messages=[
            user("u0"),
            asst("a1", toolCalls=[tcall("c1")]),
            user("u1"),
            asst("a2", toolCalls=[tcall("c1")]),
        ],
    )
    c.add(
        "tool/result-owner-must-be-assistant",
        [RS(), CR("t9", "c1"), RF()],
        messages=[user("u1", toolCalls=[tcall("c1")]), asst("a1", "x")],
    )
    c.add(
        "tool/result-content-parts",
        run(call("c1"), CR("t1", "c1", [text_part("hello", id="p1"), image_part(id="p2")])),
    )
    c.add("tool/result-empty-content", run(call("c1"), CR("t1", "c1", "")))
    c.add("tool/result-explicit-role-tool", run(call("c1"), CR("t1", "c1", "x", role="tool")))
    c.add(
        "tool/result-role-other-than-tool-rejected",
        run(call("c1"), CR("t1", "c1", "x", role="user")),
        error=True,
    )
    c.add("tool/result-subagent-tag-copied", run(call("c1"), CR("t1", "c1", subagentRunId="s1")))
    c.add(
        "tool/result-id-equal-to-existing-message", run(text("m1", "x"), call("c1"), CR("m1", "c1"))
    )
    c.add("tool/created-owner-takes-the-start-tag", run(call("c1", subagentRunId="s1")))
    c.add(
        "tool/existing-owner-tag-not-changed",
        run(
            text("a1", "x"),
            CS("c1", parentMessageId="a1", subagentRunId="s1"),
            CE("c1", subagentRunId="s1"),
        ),
        verify=False,
    )
    c.add(
        "tool/tool-call-id-may-equal-a-message-id",
        run(text("x1", "msg"), call("x1", parentMessageId="x1")),
    )
    c.add(
        "tool/call-on-history-assistant-without-tool-calls",
        [RS(), call("c1", parentMessageId="a0"), RF()],
        messages=[asst("a0", "prior")],
    )
    c.add(
        "tool/result-for-history-call",
        [RS(), CR("t1", "c0", "late answer"), RF()],
        messages=[user("u0"), asst("a0", toolCalls=[tcall("c0")]), asst("a9", "tail")],
    )
    c.add(
        "tool/parallel-calls-interleaved",
        run(
            TS("a1"),
            CS("c1", "f", parentMessageId="a1"),
            CA("c1", "{"),
            CS("c2", "g", parentMessageId="a1"),
            CA("c2", "["),
            CA("c1", "}"),
            TC("a1", "txt"),
            CA("c2", "]"),
            CE("c2"),
            CE("c1"),
            TE("a1"),
            CR("t2", "c2"),
            CR("t1", "c1"),
        ),
    )


def activity_cases(c: Corpus) -> None:
    c.add(
        "activity/creates-and-updates-activity-messages-via-snapshot-and-delta",
        run(
            AS("act1", "search", {"status": "running", "hits": []}),
            AD("act1", "search", [op("add", "/hits/-", "a"), op("replace", "/status", "done")]),
        ),
    )
    c.add(
        "activity/replace-absent-replaces",
        run(AS("act1", "p", {"a": 1}), AS("act1", "q", {"b": 2})),
    )
    c.add(
        "activity/replaces-existing-activity-message-when-replace-is-true",
        run(AS("act1", "p", {"a": 1}), AS("act1", "p", {"b": 2}, replace=True)),
    )
    c.add(
        "activity/does-not-replace-existing-activity-message-when-replace-is-false",
        run(AS("act1", "p", {"a": 1}), AS("act1", "q", {"b": 2}, replace=False)),
    )
    c.add(
        "activity/adds-activity-message-when-replace-is-false-and-none-exists",
        run(AS("act1", "p", {"a": 1}, replace=False)),
    )
    c.add(
        "activity/replaces-non-activity-message-when-replace-is-true",
        [RS(), AS("u1", "p", {"a": 1}, replace=True), RF()],
        messages=[user("u1", "hello", name="n", metadata={"x": 1})],
    )
    c.add(
        "activity/does-not-alter-non-activity-message-when-replace-is-false",
        [RS(), AS("u1", "p", {"a": 1}, replace=False), RF()],
        messages=[user("u1", "hello")],
    )
    c.add(
        "activity/replace-absent-on-tool-assistant-overwrites",
        run(call("c1"), AS("c1", "p", {"replaced": True})),
    )
    c.add(
        "activity/maintains-replace-semantics-across-runs",
        [
            *run(AS("act1", "p", {"v": 1})),
            *run(AS("act1", "p", {"v": 2}, replace=False), run_id="r2"),
            *run(AS("act1", "p", {"v": 3}), run_id="r3"),
        ],
    )
    c.add(
        "activity/appends-operations-via-delta-when-snapshot-starts-with-an-empty-array",
        run(
            AS("act1", "log", {"ops": []}),
            AD("act1", "log", [op("add", "/ops/-", {"n": 1})]),
            AD("act1", "log", [op("add", "/ops/-", {"n": 2})]),
        ),
    )
    c.add(
        "activity/delta-sets-activity-type",
        run(AS("act1", "p", {"a": 1}), AD("act1", "renamed", [op("replace", "/a", 2)])),
    )
    c.add(
        "activity/delta-with-empty-patch-sets-activity-type",
        run(AS("act1", "p", {"a": 1}), AD("act1", "renamed", [])),
    )
    c.add("activity/delta-unknown-id-ignored", run(AD("nope", "p", [op("add", "/a", 1)])))
    c.add(
        "activity/delta-on-non-activity-ignored",
        run(text("m1", "x"), AD("m1", "p", [op("add", "/a", 1)])),
    )
    c.add(
        "activity/delta-failing-patch-leaves-content-and-type",
        run(AS("act1", "p", {"a": 1}), AD("act1", "q", [op("replace", "/missing", 1)])),
    )
    c.add(
        "activity/delta-is-all-or-nothing",
        run(
            AS("act1", "p", {"a": 1}),
            AD("act1", "p", [op("add", "/b", 2), op("remove", "/zzz"), op("add", "/c", 3)]),
        ),
    )
    c.add(
        "activity/delta-test-op",
        run(
            AS("act1", "p", {"a": 1}),
            AD("act1", "p", [op("test", "/a", 1), op("add", "/ok", True)]),
        ),
    )
    c.add(
        "activity/delta-replace-root",
        run(AS("act1", "p", {"a": 1}), AD("act1", "p", [op("replace", "", {"fresh": 1})])),
    )
    c.add(
        "activity/delta-proto-path-banned",
        run(AS("act1", "p", {"a": 1}), AD("act1", "p", [op("add", "/__proto__", {"x": 1})])),
    )
    c.add(
        "activity/delta-after-replace-false-patches-existing",
        run(
            AS("act1", "p", {"a": 1}),
            AS("act1", "p", {"z": 9}, replace=False),
            AD("act1", "p", [op("add", "/b", 2)]),
        ),
    )
    c.add(
        "activity/replace-reattributes-to-the-new-tag",
        run(AS("act1", "p", {"a": 1}), AS("act1", "p", {"a": 2}, subagentRunId="s1")),
    )
    c.add(
        "activity/replace-without-tag-removes-tag",
        run(AS("act1", "p", {"a": 1}, subagentRunId="s1"), AS("act1", "p", {"a": 2})),
    )
    c.add(
        "activity/replace-false-keeps-tag",
        run(
            AS("act1", "p", {"a": 1}, subagentRunId="s1"), AS("act1", "p", {"a": 2}, replace=False)
        ),
        verify=False,
    )
    c.add(
        "activity/delta-tag-not-written",
        run(AS("act1", "p", {"a": 1}), AD("act1", "p", [op("add", "/b", 1)], subagentRunId="s2")),
        verify=False,
    )
    c.add(
        "activity/content-is-any-object",
        run(AS("act1", "p", {"nested": {"list": [1, {"x": None}], "s": "é"}, "n": 1.5})),
    )
    c.add("activity/content-array-rejected", run(AS("act1", "p", [1, 2])), error=True)  # type: ignore[arg-type]
    c.add(
        "activity/several-activities-keep-their-order",
        run(
            AS("a1", "p", {"i": 1}),
            text("m1", "x"),
            AS("a2", "p", {"i": 2}),
            AS("a1", "p", {"i": 3}),
        ),
    )
    c.add(
        "activity/snapshot-on-history-activity",
        [RS(), AD("h1", "p", [op("add", "/k", 1)]), RF()],
        messages=[activity("h1", "p", {"j": 0}, metadata={"h": 1})],
    )
    c.add(
        "activity/delta-move-and-copy",
        run(
            AS("act1", "p", {"a": {"x": 1}, "b": []}),
            AD("act1", "p", [op("copy", "/c", from_="/a"), op("move", "/b/-", from_="/a/x")]),
        ),
    )


def snapshot_cases(c: Corpus) -> None:
    conv = [user("m1", "hi"), asst("asst-1", "hello")]
    c.add(
        "snapshot/preserves-activity-message-between-conversation-messages",
        [RS(), MS([*conv, user("m2", "more")]), RF()],
        messages=[conv[0], activity("act-1"), conv[1]],
    )
    c.add(
        "snapshot/keeps-activity-message-ordering-after-its-anchor",
        [RS(), MS([*conv, asst("asst-2", "again")]), RF()],
        messages=[*conv, activity("act-1")],
    )
    c.add(
        "snapshot/preserves-activity-at-start-of-messages",
        [RS(), MS(conv), RF()],
        messages=[activity("act-0"), *conv],
    )
    c.add(
        "snapshot/preserves-multiple-activities-with-different-anchors",
        [RS(), MS(conv), RF()],
        messages=[activity("act-0"), conv[0], activity("act-1"), conv[1], activity("act-2")],
    )
    c.add(
        "snapshot/preserves-activity-position-when-its-preceding-message-is-removed",
        [RS(), MS([conv[1]]), RF()],
        messages=[conv[0], activity("act-1"), conv[1]],
    )
    c.add(
        "snapshot/keeps-activities-in-position-when-new-messages-are-added-by-snapshot",
        [RS(), MS([*conv, user("m3"), asst("asst-3", "x")]), RF()],
        messages=[conv[0], activity("act-1"), conv[1]],
    )
    c.add(
        "snapshot/preserves-reasoning-messages",
        [RS(), MS(conv), RF()],
        messages=[conv[0], rmsg("r1"), conv[1]],
    )
    c.add(
        "snapshot/preserves-both-activity-and-reasoning-messages",
        [RS(), MS([*conv, user("m9")]), RF()],
        messages=[conv[0], rmsg("r1"), activity("act-1"), conv[1]],
    )
    c.add(
        "snapshot/matching-reasoning-id-takes-the-snapshot-version",
        [RS(), MS([*conv, asst("r1", "now assistant")]), RF()],
        messages=[conv[0], rmsg("r1"), conv[1]],
    )
    c.add(
        "snapshot/preserves-activity-position-when-a-message-id-changes-in-snapshot",
        [
            RS(),
            MS(
                [user("m1"), asst("asst-1", "a"), asst("asst-2", "b"), tool_msg("tool-canon", "c1")]
            ),
            RF(),
        ],
        messages=[
            user("m1"),
            asst("asst-1", "a"),
            activity("act-1"),
            asst("asst-2", "b"),
            tool_msg("tool-local", "c1"),
        ],
    )
    c.add(
        "snapshot/replaces-streamed-reasoning-with-the-snapshot-canonical-copy-when-ids-differ",
        [
            RS(),
            reasoning("r-stream", "thinking"),
            text("a1", "answer"),
            MS([user("u1"), rmsg("r-canon", "thinking"), asst("a1", "answer")]),
            RF(),
        ],
        messages=[user("u1")],
    )
    c.add(
        "snapshot/replaces-streamed-reasoning-when-the-snapshot-arrives-before-the-assistant-streamed",
        [
            RS(),
            reasoning("r-stream", "t"),
            MS([user("u1"), rmsg("r-canon", "t")]),
            text("a1", "answer"),
            RF(),
        ],
        messages=[user("u1")],
    )
    c.add(
        "snapshot/converges-multi-turn-reasoning-to-one-message-per-turn",
        [
            RS(),
            reasoning("r-2", "turn two"),
            text("a2", "two"),
            MS(
                [
                    user("u1"),
                    rmsg("rc-1", "turn one"),
                    asst("a1", "one"),
                    user("u2"),
                    rmsg("rc-2", "turn two"),
                    asst("a2", "two"),
                ]
            ),
            RF(),
        ],
        messages=[user("u1"), rmsg("r-1", "turn one"), asst("a1", "one"), user("u2")],
    )
    c.add(
        "snapshot/still-preserves-activity-messages-when-the-snapshot-carries-reasoning",
        [RS(), MS([user("u1"), rmsg("rc", "x")]), RF()],
        messages=[user("u1"), activity("act-1"), rmsg("r-local")],
    )
    c.add(
        "snapshot/updates-an-id-stable-reasoning-message-with-the-snapshot-version",
        [RS(), MS([user("u1"), rmsg("r1", "canonical", metadata={"c": 1})]), RF()],
        messages=[user("u1"), rmsg("r1", "streamed", metadata={"s": 1})],
    )
    c.add(
        "snapshot/replaces-an-existing-activity-message-with-the-snapshot-version",
        [RS(), MS([user("u1"), activity("act-1", "p", {"v": "snap"})]), RF()],
        messages=[user("u1"), activity("act-1", "p", {"v": "local"})],
    )
    c.add(
        "snapshot/appends-an-activity-message-the-client-does-not-have-yet",
        [RS(), MS([user("u1"), activity("act-new")]), RF()],
        messages=[user("u1")],
    )
    c.add(
        "snapshot/drops-a-local-activity-the-snapshot-leaves-out-once-it-carries-activity",
        [RS(), MS([user("u1"), activity("act-2")]), RF()],
        messages=[user("u1"), activity("act-1")],
    )
    c.add(
        "snapshot/keeps-client-activity-when-the-snapshot-carries-none",
        [RS(), MS([user("u1"), asst("a1", "x")]), RF()],
        messages=[user("u1"), activity("act-1")],
    )
    c.add(
        "snapshot/order-of-the-snapshot-is-not-imposed-on-retained-messages",
        [RS(), MS([user("b"), user("a"), user("c")]), RF()],
        messages=[user("a"), user("b"), user("z")],
    )
    c.add(
        "snapshot/deletes-a-user-message-the-snapshot-omits",
        [RS(), MS([asst("a1", "x")]), RF()],
        messages=[user("u1"), asst("a1", "old")],
    )
    c.add(
        "snapshot/empty-snapshot-clears-history",
        [RS(), MS([]), RF()],
        messages=[user("u1"), asst("a1", "x"), tool_msg("t1", "c1")],
    )
    c.add(
        "snapshot/empty-snapshot-keeps-client-only-activity-and-reasoning",
        [RS(), MS([]), RF()],
        messages=[user("u1"), activity("act-1"), rmsg("r1")],
    )
    c.add(
        "snapshot/all-seven-roles",
        run(
            MS(
                [
                    developer("d1"),
                    system("s1"),
                    asst("a1", "x", name="bot", toolCalls=[tcall("c1", "f", "{}")]),
                    user("u1", [text_part("t"), image_part()], name="me"),
                    tool_msg("t1", "c1", "r", error="bad"),
                    activity("act1"),
                    rmsg("r1", "hm", encryptedValue="enc"),
                ]
            )
        ),
    )
    c.add(
        "snapshot/streaming-continues-on-snapshot-messages",
        run(
            MS([asst("a1", "part one", toolCalls=[tcall("c1", "f", "{")])]),
            TS("a1"),
            TC("a1", ", part two"),
            TE("a1"),
            CA("c1", "}"),
            CE("c1"),
        ),
        verify=False,
    )
    c.add(
        "snapshot/tool-call-replay-on-snapshot-call",
        run(MS([asst("a1", toolCalls=[tcall("c1", "f", "{}")])]), call("c1", "g", "x")),
    )
    c.add(
        "snapshot/duplicate-ids-inside-snapshot",
        run(MS([user("u1", "first"), user("u1", "second")])),
    )
    c.add(
        "snapshot/duplicate-local-ids-both-replaced",
        [RS(), MS([user("u1", "snap")]), RF()],
        messages=[user("u1", "one"), user("u1", "two")],
    )
    for label, value, extra in [
        ("scope-null-owns-every-activity-type", None, []),
        ("scope-array-owns-listed-types", ["search"], []),
        ("scope-empty-array-owns-nothing", [], []),
        ("scope-array-with-non-strings-owns-nothing", ["search", 1], []),
        ("scope-non-array-value-owns-nothing", "search", []),
        ("scope-null-with-snapshot-activity", None, [activity("act-new", "other")]),
        ("scope-array-with-snapshot-activity", ["other"], [activity("act-new", "other")]),
    ]:
        c.add(
            f"snapshot/{label}",
            [
                RS(),
                MS(
                    [user("u1"), *extra],
                    metadata={"@ag-ui/client": {"authoritativeActivityTypes": value, "other": 1}},
                ),
                RF(),
            ],
            messages=[
                user("u1"),
                activity("act-s", "search"),
                activity("act-o", "other"),
                rmsg("r1"),
            ],
        )
    for label, value in [
        ("client-key-false-owns-nothing", False),
        ("client-key-zero-owns-nothing", 0),
        ("client-key-string-owns-nothing", "x"),
        ("client-key-array-owns-nothing", ["search"]),
        ("client-key-null-owns-nothing", None),
        ("client-key-object-without-field-uses-legacy-inference", {"unrelated": True}),
    ]:
        c.add(
            f"snapshot/{label}",
            [
                RS(),
                MS([user("u1"), activity("act-new", "other")], metadata={"@ag-ui/client": value}),
                RF(),
            ],
            messages=[user("u1"), activity("act-s", "search")],
        )
    c.add(
        "snapshot/client-key-absent-uses-legacy-inference",
        [
            RS(),
            MS(
                [user("u1"), activity("act-new", "other")],
                metadata={"ag-ui": {"authoritativeActivityTypes": []}},
            ),
            RF(),
        ],
        messages=[user("u1"), activity("act-s", "search")],
    )
    c.add(
        "snapshot/matching-id-updates-even-when-type-is-not-owned",
        [
            RS(),
            MS(
                [user("u1"), activity("act-s", "search", {"v": "snap"})],
                metadata={"@ag-ui/client": {"authoritativeActivityTypes": []}},
            ),
            RF(),
        ],
        messages=[
            user("u1"),
            activity("act-s", "search", {"v": "local"}),
            activity("act-o", "other"),
        ],
    )
    c.add(
        "snapshot/null-subagent-tag-rejected-by-schema",
        run(MS([user("u1", subagentRunId=None)])),
        error=True,
    )
    c.add(
        "snapshot/subagent-tags-kept",
        run(MS([user("u1", subagentRunId="s1"), asst("a1", "x", subagentRunId="s2")])),
    )
    c.add(
        "snapshot/messages-snapshot-mid-stream-overwrites-what-stream-built",
        [
            RS(),
            TS("a1"),
            TC("a1", "streamed"),
            MS([user("u1"), asst("a1", "canonical")]),
            TC("a1", "+more"),
            TE("a1"),
            RF(),
        ],
    )


def run_started_cases(c: Corpus) -> None:
    c.add(
        "rsi/should-add-messages-from-run-started-input-that-are-not-already-present",
        [RS(input=run_input([user("u1", "hi"), asst("a1", "yo")])), text("a2", "new"), RF()],
    )
    c.add(
        "rsi/should-not-duplicate-messages-that-already-exist-by-id",
        [RS(input=run_input([user("u1", "NEW"), user("u2", "two")])), RF()],
        messages=[user("u1", "OLD")],
    )
    c.add(
        "rsi/should-handle-run-started-event-without-input-field",
        [RS(), RF()],
        messages=[user("u1")],
    )
    c.add(
        "rsi/run-started-input-without-messages-is-a-schema-error",
        [RS(input={"threadId": "t1", "runId": "r1"}), RF()],
        error=True,
    )
    c.add("rsi/input-with-empty-messages", [RS(input=run_input([])), RF()], messages=[user("u1")])
    c.add(
        "rsi/should-add-messages-before-other-events-in-the-same-run",
        [RS(input=run_input([user("u1", "question")])), text("a1", "answer"), RF()],
    )
    c.add(
        "rsi/should-handle-multiple-runs-with-input-messages",
        [
            RS(input=run_input([user("u1", "q1")])),
            text("a1", "r1"),
            RF(),
            RS("r2", input=run_input([user("u1", "q1"), asst("a1", "r1"), user("u2", "q2")])),
            text("a2", "r2"),
            RF("r2"),
        ],
    )
    c.add(
        "rsi/input-state-does-not-change-state",
        [RS(input=run_input([], state={"from": "input"})), RF()],
        state={"kept": True},
    )
    c.add(
        "rsi/input-tools-context-forwarded-props-resume-accepted",
        [
            RS(
                input=run_input(
                    [user("u1")],
                    tools=[
                        {
                            "name": "f",
                            "description": "d",
                            "parameters": {"type": "object"},
                            "metadata": {"t": 1},
                        }
                    ],
                    context=[{"description": "d", "value": "v"}],
                    forwardedProps={"any": ["thing"]},
                    resume=[
                        {
                            "interruptId": "i1",
                            "status": "resolved",
                            "payload": {"ok": True},
                            "metadata": {"r": 1},
                        },
                        {"interruptId": "i2", "status": "cancelled"},
                    ],
                    parentRunId="r0",
                    protocolVersion="1.0",
                )
            ),
            RF(),
        ],
    )
    c.add(
        "rsi/input-activity-message-is-appended", [RS(input=run_input([activity("act-1")])), RF()]
    )
    c.add(
        "rsi/input-all-seven-roles",
        [
            RS(
                input=run_input(
                    [
                        developer("d1"),
                        system("s1"),
                        asst("a1", toolCalls=[tcall("c1")]),
                        user("u1"),
                        tool_msg("t1", "c1"),
                        activity("act1"),
                        rmsg("r1"),
                    ]
                )
            ),
            RF(),
        ],
    )
    c.add(
        "rsi/input-messages-with-duplicate-ids-keep-first",
        [RS(input=run_input([user("u1", "first"), user("u1", "second")])), RF()],
    )
    c.add(
        "rsi/input-message-then-stream-extends-it",
        [
            RS(input=run_input([asst("a1", "prior")])),
            TS("a1"),
            TC("a1", " continued"),
            TE("a1"),
            RF(),
        ],
    )
    c.add(
        "rsi/input-messages-subagent-tags-kept",
        [RS(input=run_input([user("u1", subagentRunId="s1")])), RF()],
    )
    c.add(
        "rsi/run-started-protocol-version-and-parent-run-id",
        [RS(protocolVersion="1.0", parentRunId="r0"), text("m1", "x"), RF()],
    )


def state_cases(c: Corpus) -> None:
    c.add("state/snapshot-replaces-state", run(SS({"a": 1}), SS({"b": 2})), state={"initial": True})
    c.add("state/snapshot-null", run(SS(None)), state={"a": 1})
    c.add("state/snapshot-array", run(SS([1, "two", None])))
    c.add("state/snapshot-scalar", run(SS("just a string")))
    c.add("state/snapshot-number", run(SS(3.5)))
    c.add("state/snapshot-false", run(SS(False)))
    c.add(
        "state/initial-state-survives-a-run-without-state-events", [RS(), RF()], state={"k": [1, 2]}
    )
    c.add("state/initial-state-is-patched", run(SD([op("add", "/b", 2)])), state={"a": 1})
    c.add("state/initial-array-state", run(SD([op("add", "/0", "first")])), state=["x"])
    c.add("state/delta-add", run(SS({}), SD([op("add", "/a", {"b": [1]})])))
    c.add("state/delta-add-replaces-existing-member", run(SS({"a": 1}), SD([op("add", "/a", 2)])))
    c.add("state/delta-replace", run(SS({"a": 1}), SD([op("replace", "/a", [1, 2])])))
    c.add("state/delta-remove", run(SS({"a": 1, "b": 2}), SD([op("remove", "/a")])))
    c.add("state/delta-move", run(SS({"a": 1, "b": {}}), SD([op("move", "/b/c", from_="/a")])))
    c.add("state/delta-copy", run(SS({"a": {"x": 1}}), SD([op("copy", "/b", from_="/a")])))
    c.add(
        "state/delta-test-passes",
        run(
            SS({"a": [1, {"b": None}]}),
            SD([op("test", "/a", [1, {"b": None}]), op("add", "/ok", 1)]),
        ),
    )
    c.add(
        "state/delta-test-fails-all-or-nothing",
        run(SS({"a": 1}), SD([op("add", "/b", 2), op("test", "/a", 2), op("add", "/c", 3)])),
    )
    c.add(
        "state/delta-test-is-type-strict",
        run(SS({"a": 1}), SD([op("test", "/a", "1"), op("add", "/x", 1)])),
    )
    c.add(
        "state/delta-test-int-equals-float",
        run(SS({"a": 1}), SD([op("test", "/a", 1.0), op("add", "/x", 1)])),
    )
    c.add("state/delta-remove-missing-fails", run(SS({"a": 1}), SD([op("remove", "/zz")])))
    c.add("state/delta-replace-missing-fails", run(SS({"a": 1}), SD([op("replace", "/zz", 1)])))
    c.add("state/delta-add-to-missing-parent-fails", run(SS({}), SD([op("add", "/a/b", 1)])))
    c.add("state/delta-add-root-replaces-document", run(SS({"a": 1}), SD([op("add", "", [1])])))
    c.add("state/delta-replace-root", run(SS({"a": 1}), SD([op("replace", "", "s")])))
    c.add(
        "state/delta-array-append-dash",
        run(SS({"l": [1]}), SD([op("add", "/l/-", 2), op("add", "/l/0", 0)])),
    )
    c.add(
        "state/delta-array-index-equal-to-length", run(SS({"l": [1]}), SD([op("add", "/l/1", 2)]))
    )
    c.add(
        "state/delta-array-index-out-of-range-fails",
        run(SS({"l": [1]}), SD([op("add", "/l/5", 2)])),
    )
    c.add(
        "state/delta-array-index-leading-zero-fails",
        run(SS({"l": [1, 2]}), SD([op("replace", "/l/01", 9)])),
    )
    c.add(
        "state/delta-array-index-not-a-number-fails",
        run(SS({"l": [1]}), SD([op("replace", "/l/x", 9)])),
    )
    c.add("state/delta-array-remove", run(SS({"l": [1, 2, 3]}), SD([op("remove", "/l/1")])))
    c.add(
        "state/delta-numeric-key-on-object",
        run(SS({}), SD([op("add", "/0", "zero"), op("add", "/-", "dash")])),
    )
    c.add(
        "state/delta-escaped-pointer",
        run(SS({}), SD([op("add", "/a~1b", 1), op("add", "/c~0d", 2), op("add", "/", 3)])),
    )
    c.add("state/delta-empty-patch", run(SS({"a": 1}), SD([])))
    c.add(
        "state/delta-value-null",
        run(SS({"a": 1}), SD([op("replace", "/a", None), op("add", "/b", None)])),
    )
    c.add("state/delta-on-null-state-fails", run(SS(None), SD([op("add", "/a", 1)])))
    c.add(
        "state/delta-on-scalar-state-root-add", run(SS(5), SD([op("add", "", {"now": "object"})]))
    )
    c.add(
        "state/delta-proto-path-banned",
        run(SS({"a": 1}), SD([op("add", "/__proto__", {"polluted": True})])),
    )
    c.add(
        "state/delta-nested-proto-path-banned",
        run(SS({"a": {}}), SD([op("add", "/a/__proto__", 1)])),
    )
    c.add(
        "state/delta-constructor-prototype-banned",
        run(SS({"constructor": {}}), SD([op("add", "/constructor/prototype", 1)])),
    )
    c.add(
        "state/delta-constructor-key-allowed",
        run(SS({}), SD([op("add", "/constructor", 1), op("add", "/prototype", 2)])),
    )
    c.add(
        "state/delta-move-into-own-child-fails",
        run(SS({"a": {"b": 1}}), SD([op("move", "/a/b/c", from_="/a")])),
    )
    c.add(
        "state/delta-move-missing-from-fails",
        run(SS({"a": 1}), SD([op("move", "/b", from_="/zz")])),
    )
    c.add(
        "state/delta-sequence-of-patches",
        run(
            SS({"n": 0}),
            *(SD([op("replace", "/n", i)]) for i in range(1, 6)),
            SD([op("remove", "/n")]),
        ),
    )
    c.add(
        "state/failed-delta-then-good-delta",
        run(SS({"a": 1}), SD([op("remove", "/nope")]), SD([op("add", "/b", 2)])),
    )
    c.add(
        "state/snapshot-after-deltas",
        run(SD([op("add", "/a", 1)]), SS({"reset": True}), SD([op("add", "/b", 2)])),
    )
    c.add(
        "state/unknown-patch-op-is-removed",
        run(SS({"a": 1}), SD([{"op": "merge", "path": "/a", "value": 2}, op("add", "/b", 2)])),
    )
    c.add(
        "state/patch-extra-members-are-kept-and-ignored",
        run(
            SS({"a": 1}),
            SD([op("remove", "/a", value="leftover", note="x"), op("add", "/b", 2, extra=[1])]),
        ),
    )
    c.add(
        "state/invalid-json-pointer-is-a-schema-error",
        run(SS({}), SD([op("add", "a", 1)])),
        error=True,
    )
    c.add(
        "state/invalid-escape-in-pointer-is-a-schema-error",
        run(SS({}), SD([op("add", "/a~2", 1)])),
        error=True,
    )
    c.add(
        "state/add-without-value-is-a-schema-error",
        run(SS({}), SD([{"op": "add", "path": "/a"}])),
        error=True,
    )
    c.add(
        "state/add-with-null-value", run(SS({}), SD([{"op": "add", "path": "/a", "value": None}]))
    )
    c.add("state/deep-values-kept", run(SS({"x": {"y": [{"z": [None, True, 1.25, "s"]}]}})))
    c.add(
        "state/tagged-state-events-apply-run-wide",
        run(SS({"a": 1}, subagentRunId="s1"), SD([op("add", "/b", 2)], subagentRunId="s2")),
    )


def chunk_cases(c: Corpus) -> None:
    c.add(
        "chunk/should-transform-a-single-text-message-chunk-into-start-content-and-end-events",
        run(TXC(messageId="m1", delta="Hello")),
    )
    c.add(
        "chunk/should-transform-multiple-text-message-chunks-with-the-same-id",
        run(TXC(messageId="m1", delta="Hel"), TXC(messageId="m1", delta="lo"), TXC(delta="!")),
    )
    c.add(
        "chunk/should-transform-a-single-tool-call-chunk-into-start-args-and-end-events",
        run(TLC(toolCallId="c1", toolCallName="f", delta='{"a":1}')),
    )
    c.add(
        "chunk/should-handle-errors-when-first-text-message-chunk-has-no-id",
        run(TXC(delta="x")),
        error=True,
        mirror=False,
    )
    c.add(
        "chunk/should-handle-errors-when-first-tool-call-chunk-has-no-id",
        run(TLC(toolCallName="f", delta="x")),
        error=True,
    )
    c.add(
        "chunk/should-handle-errors-when-first-tool-call-chunk-has-no-name",
        run(TLC(toolCallId="c1", delta="x")),
        error=True,
    )
    c.add("chunk/first-reasoning-chunk-without-id-is-an-error", run(RNC(delta="x")), error=True)
    c.add(
        "chunk/first-chunk-without-id-errors-also-unverified",
        [TXC(delta="x")],
        verify=False,
        error=True,
    )
    c.add(
        "chunk/should-handle-tool-call-chunks-with-parent-message-id",
        run(
            TXC(messageId="a1", delta="x"),
            TLC(toolCallId="c1", toolCallName="f", parentMessageId="a1", delta="{}"),
        ),
    )
    c.add("chunk/should-handle-text-message-chunks-without-delta", run(TXC(messageId="m1")))
    c.add(
        "chunk/should-handle-tool-call-chunks-without-delta",
        run(TLC(toolCallId="c1", toolCallName="f")),
    )
    c.add(
        "chunk/should-generate-exactly-one-start-and-one-end-for-multiple-chunks-with-same-id",
        run(*(TXC(messageId="m1", delta=str(i)) for i in range(5))),
    )
    c.add(
        "chunk/should-pass-name-from-text-message-chunk-to-text-message-start",
        run(TXC(messageId="m1", name="bot", delta="x")),
    )
    c.add(
        "chunk/should-not-include-name-on-start-when-chunk-has-no-name",
        run(TXC(messageId="m1", delta="x")),
    )
    for role in ("developer", "system", "assistant", "user"):
        c.add(
            f"chunk/should-preserve-role-{role}-when-transforming-text-message-chunks",
            run(TXC(messageId="m1", role=role, delta="x")),
        )
    c.add(
        "chunk/should-default-to-assistant-role-when-chunk-has-no-role",
        run(TXC(messageId="m1", delta="x")),
    )
    c.add(
        "chunk/role-tool-in-a-chunk-is-a-schema-error",
        run(TXC(messageId="m1", role="tool", delta="x")),
        error=True,
    )
    c.add(
        "chunk/should-handle-multiple-chunks-with-different-roles",
        run(
            TXC(messageId="m1", role="user", delta="q"),
            TXC(messageId="m2", role="assistant", delta="a"),
            TXC(messageId="m3", role="system", delta="s"),
        ),
    )
    c.add(
        "chunk/should-close-current-message-when-encountering-a-non-chunk-event",
        run(TXC(messageId="m1", delta="a"), E("CUSTOM", name="x", value=1), text("m2", "b")),
    )
    c.add(
        "chunk/should-pass-through-raw-events-without-transformation",
        run(TXC(messageId="m1", delta="a"), E("RAW", event={"x": 1}), TXC(delta="b")),
    )
    c.add(
        "chunk/activity-events-do-not-close-the-stream",
        run(
            TXC(messageId="m1", delta="a"), AS("act1", "p", {}), AD("act1", "p", []), TXC(delta="b")
        ),
    )
    c.add(
        "chunk/encrypted-value-does-not-close-the-stream",
        run(RNC(messageId="r1", delta="a"), REV("message", "r1", "e"), RNC(delta="b")),
    )
    c.add(
        "chunk/subagent-started-does-not-close-the-stream",
        run(TXC(messageId="m1", delta="a"), SUB_S("s1"), TXC(delta="b"), SUB_F("s1")),
    )
    for label, closer in [
        ("state-snapshot", SS({"a": 1})),
        ("state-delta", SD([])),
        ("custom", E("CUSTOM", name="n", value=None)),
        ("step", [STEP_S("s"), STEP_F("s")]),
        ("reasoning-start", [RSTART("rs"), REND("rs")]),
        ("tool-result", CR("t1", "zz")),
        ("messages-snapshot", MS([])),
    ]:
        c.add(
            f"chunk/{label}-closes-the-open-stream-so-an-id-less-chunk-fails",
            run(TXC(messageId="m1", delta="a"), closer, TXC(delta="b")),
            error=True,
        )
    c.add("chunk/run-error-closes-the-open-stream", [RS(), TXC(messageId="m1", delta="a"), RE()])
    c.add(
        "chunk/should-handle-switching-from-text-message-to-tool-call",
        run(
            TXC(messageId="m1", delta="Let me"),
            TLC(toolCallId="c1", toolCallName="f", delta="{}"),
            TLC(delta="+"),
        ),
    )
    c.add(
        "chunk/should-handle-text-message-chunks-with-different-ids",
        run(TXC(messageId="m1", delta="a"), TXC(messageId="m2", delta="b"), TXC(delta="c")),
    )
    c.add(
        "chunk/should-handle-a-complex-sequence-of-mixed-events",
        run(
            TXC(messageId="m1", delta="Hi"),
            STEP_S("s"),
            TLC(toolCallId="c1", toolCallName="f", delta="{"),
            TLC(delta="}"),
            STEP_F("s"),
            CR("t1", "c1"),
            TXC(messageId="m2", delta="done"),
        ),
    )
    c.add(
        "chunk/should-handle-interleaved-chunks-with-different-message-and-tool-call-ids",
        run(
            TXC(messageId="msg-1", delta="A"),
            TLC(toolCallId="tool-1", toolCallName="f", delta="{"),
            TXC(messageId="msg-1", delta="B"),
            TLC(toolCallId="tool-1", toolCallName="f", delta="}"),
            TXC(messageId="msg-2", delta="C"),
            TLC(toolCallId="tool-2", toolCallName="g", parentMessageId="msg-2", delta="[]"),
        ),
        error=None,
    )
    c.add(
        "chunk/returning-to-an-earlier-id-opens-it-again",
        run(
            TXC(messageId="m1", delta="a"),
            TXC(messageId="m2", delta="b"),
            TXC(messageId="m1", delta="c"),
        ),
    )
    c.add(
        "chunk/explicit-start-then-chunk-with-same-id-is-a-second-start",
        [RS(), TS("m1"), TXC(messageId="m1", delta="x"), RF()],
        error=True,
        mirror=True,
    )
    c.add(
        "chunk/chunk-then-explicit-content-closes-the-chunk-stream",
        run(TXC(messageId="m1", delta="a"), TC("m1", "b")),
        error=True,
        mirror=True,
    )
    c.add(
        "chunk/continuation-may-repeat-role-and-name-with-the-same-value",
        run(
            TXC(messageId="m1", role="user", name="n", delta="a"),
            TXC(role="user", name="n", delta="b"),
        ),
    )
    c.add(
        "chunk/continuation-repeating-default-role-assistant-agrees",
        run(TXC(messageId="m1", delta="a"), TXC(role="assistant", delta="b")),
    )
    c.add(
        "chunk/continuation-with-conflicting-role-is-an-error",
        run(TXC(messageId="m1", role="user", delta="a"), TXC(role="assistant", delta="b")),
        error=True,
    )
    c.add(
        "chunk/continuation-with-conflicting-name-is-an-error",
        run(TXC(messageId="m1", name="a", delta="a"), TXC(messageId="m1", name="b", delta="b")),
        error=True,
    )
    c.add(
        "chunk/continuation-adding-a-name-the-opener-lacked-is-an-error",
        run(TXC(messageId="m1", delta="a"), TXC(name="late", delta="b")),
        error=True,
    )
    c.add(
        "chunk/tool-continuation-with-conflicting-name-is-an-error",
        run(TLC(toolCallId="c1", toolCallName="f", delta="a"), TLC(toolCallName="g", delta="b")),
        error=True,
    )
    c.add(
        "chunk/tool-continuation-with-conflicting-parent-is-an-error",
        run(
            TLC(toolCallId="c1", toolCallName="f", parentMessageId="p1"), TLC(parentMessageId="p2")
        ),
        error=True,
    )
    c.add(
        "chunk/tool-continuation-adding-a-parent-is-an-error",
        run(TLC(toolCallId="c1", toolCallName="f"), TLC(parentMessageId="p1", delta="x")),
        error=True,
    )
    c.add(
        "chunk/tool-continuation-repeating-fields-agrees",
        run(
            TLC(toolCallId="c1", toolCallName="f", parentMessageId="p1", delta="{"),
            TLC(toolCallId="c1", toolCallName="f", parentMessageId="p1", delta="}"),
        ),
    )
    c.add(
        "chunk/empty-string-message-id-is-an-id", run(TXC(messageId="", delta="a"), TXC(delta="b"))
    )
    c.add(
        "chunk/empty-string-id-after-open-stream-opens-a-new-one",
        run(TXC(messageId="m1", delta="a"), TXC(messageId="", delta="b")),
    )
    c.add(
        "chunk/an-empty-string-reasoning-message-id-opens-a-new-stream",
        run(RNC(messageId="r1", delta="a"), RNC(messageId="", delta="b")),
    )
    c.add(
        "chunk/reasoning-chunks-accumulate",
        run(RNC(messageId="r1", delta="a"), RNC(delta="b"), RNC(messageId="r1", delta="c")),
    )
    c.add(
        "chunk/reasoning-chunk-role-is-stripped",
        run(RNC(messageId="r1", delta="a", role="reasoning")),
    )
    c.add(
        "chunk/reasoning-chunk-closed-by-text-chunk",
        run(RNC(messageId="r1", delta="a"), TXC(messageId="m1", delta="b")),
    )
    c.add(
        "chunk/opening-another-kind-closes-the-lane",
        run(
            TLC(toolCallId="c1", toolCallName="f", delta="{}"),
            RNC(messageId="r1", delta="x"),
            TXC(messageId="m1", delta="y"),
        ),
    )
    c.add(
        "chunk/rawevent-only-chunk-emits-empty-content",
        run(TXC(messageId="m1", delta="a"), TXC(rawEvent={"p": 1})),
    )
    c.add("chunk/rawevent-on-first-chunk-without-delta", run(TXC(messageId="m1", rawEvent="r")))
    c.add(
        "chunk/tool-chunk-args-accumulate",
        run(
            TLC(toolCallId="c1", toolCallName="f", delta='{"a"'),
            TLC(delta=":"),
            TLC(toolCallId="c1", delta="1}"),
        ),
    )
    c.add(
        "chunk/tool-chunk-parent-null-is-legacy-absent",
        run(TLC(toolCallId="c1", toolCallName="f", parentMessageId=None, delta="{}")),
    )
    c.add(
        "chunk/tool-chunk-then-result",
        run(TLC(toolCallId="c1", toolCallName="f", delta="{}"), CR("t1", "c1")),
    )
    c.add(
        "chunk/no-end-when-the-stream-completes-without-a-run-terminal",
        [RS(), TXC(messageId="m1", delta="open"), TLC(toolCallId="c9", toolCallName="f")],
    )
    c.add("chunk/no-run-at-all", [TXC(messageId="m1", delta="x")], verify=False)
    c.add(
        "chunk/run-finished-closes-the-stream-verified",
        run(TXC(messageId="m1", delta="x"), RNC(messageId="r1", delta="y")),
    )
    c.add(
        "chunk/subagent-tag-on-chunk-tags-created-message",
        run(TXC(messageId="m1", delta="x", subagentRunId="s1")),
    )
    c.add(
        "chunk/null-tag-on-chunk-is-a-schema-error",
        run(TXC(messageId="m1", delta="x", subagentRunId=None)),
        error=True,
    )
    # lanes
    c.add(
        "chunk/two-subagents-interleave-chunked-messages-without-damage",
        run(
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            TXC(messageId="b", delta="B1", subagentRunId="s2"),
            TXC(delta="A2", subagentRunId="s1"),
            TXC(delta="B2", subagentRunId="s2", metadata={"b": 1}),
            TXC(messageId="a", delta="A3", metadata={"a": 1}),
        ),
    )
    c.add(
        "chunk/id-less-tagged-chunk-goes-to-its-lane",
        run(
            TXC(messageId="p", delta="P1"),
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            TXC(delta="A2", subagentRunId="s1"),
            TXC(delta="P2"),
        ),
    )
    c.add(
        "chunk/id-less-untagged-chunk-prefers-the-parent-lane",
        run(
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            TXC(messageId="p", delta="P1"),
            TXC(delta="P2"),
        ),
    )
    c.add(
        "chunk/id-less-untagged-chunk-goes-to-the-sole-open-stream",
        run(TXC(messageId="a", delta="A1", subagentRunId="s1"), TXC(delta="A2")),
    )
    c.add(
        "chunk/id-less-untagged-chunk-sole-stream-with-parent-on-other-kind",
        run(
            TLC(toolCallId="c1", toolCallName="f", delta="{"),
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            TXC(delta="A2"),
            TLC(delta="}"),
        ),
    )
    c.add(
        "chunk/ambiguous-id-less-untagged-chunk-is-an-error",
        run(
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            TXC(messageId="b", delta="B1", subagentRunId="s2"),
            TXC(delta="?"),
        ),
        error=True,
    )
    c.add(
        "chunk/named-id-continues-in-its-lane-even-untagged",
        run(TXC(messageId="a", delta="A1", subagentRunId="s1"), TXC(messageId="a", delta="A2")),
    )
    c.add(
        "chunk/tag-disagreeing-with-the-lane-holding-the-id-is-an-error",
        run(
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            TXC(messageId="a", delta="A2", subagentRunId="s2"),
        ),
        error=True,
    )
    c.add(
        "chunk/tagged-opener-in-parent-held-id-is-an-error",
        run(TXC(messageId="a", delta="A1"), TXC(messageId="a", delta="A2", subagentRunId="s1")),
        error=True,
    )
    c.add(
        "chunk/explicit-event-closes-only-its-own-lane",
        run(
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            text("p", "parent text"),
            TXC(delta="A2", subagentRunId="s1"),
        ),
    )
    c.add(
        "chunk/tagged-explicit-event-closes-that-lane",
        run(
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            STEP_S("x", subagentRunId="s1"),
            STEP_F("x", subagentRunId="s1"),
            TXC(delta="A2", subagentRunId="s1"),
        ),
        error=True,
    )
    c.add(
        "chunk/subagent-finished-closes-its-lane",
        run(
            SUB_S("s1"),
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            SUB_F("s1"),
            TXC(messageId="p", delta="P"),
        ),
    )
    c.add(
        "chunk/subagent-error-closes-its-lane-only",
        run(
            SUB_S("s1"),
            TXC(messageId="p", delta="P1"),
            TXC(messageId="a", delta="A1", subagentRunId="s1"),
            SUB_E("s1"),
            TXC(delta="P2"),
        ),
    )
    c.add(
        "chunk/run-finished-closes-all-lanes",
        run(
            TXC(messageId="a", delta="A", subagentRunId="s1"),
            TLC(toolCallId="c", toolCallName="f", subagentRunId="s2"),
            RNC(messageId="r", delta="R"),
        ),
    )
    c.add(
        "chunk/lane-tag-carried-to-tool-start-and-created-owner",
        run(TLC(toolCallId="c1", toolCallName="f", delta="{}", subagentRunId="s1")),
    )
    c.add(
        "chunk/opener-only-tagging-producer",
        run(
            SUB_S("s1"),
            RNC(messageId="r1", delta="a", subagentRunId="s1"),
            RNC(delta="b"),
            RNC(delta="c"),
            SUB_F("s1"),
        ),
    )


def verify_cases(c: Corpus) -> None:
    def rej(name: str, events: Any, **kw: Any) -> None:
        c.add(f"verify/{name}", events, error=True, mirror=True, **kw)

    def ok(name: str, events: Any, **kw: Any) -> None:
        c.add(f"verify/{name}", events, **kw)

    rej("should-require-run-started-as-the-first-event", [text("m1", "x"), RF()])
    rej("should-not-allow-starting-a-tool-call-before-run-started", [call("c1"), RS(), RF()])
    ok("should-allow-run-error-at-any-time-even-as-first-event", [RE("early")])
    ok("run-error-as-first-event-then-new-run", [RE("early"), *run(text("m1", "x"))])
    rej("should-not-allow-multiple-run-started-events", [RS(), RS("r2"), RF()])
    rej("should-not-allow-events-after-run-finished-except-run-error", [*run(), text("m1", "late")])
    ok("should-allow-run-error-after-run-finished", [*run(text("m1", "x")), RE()])
    rej("second-run-finished-is-rejected", [*run(), RF()])
    rej(
        "should-not-allow-any-events-after-run-error",
        [RS(), text("m1", "x"), RE(), text("m2", "late")],
    )
    rej("second-run-error-is-rejected", [RS(), RE(), RE("again")])
    ok(
        "should-allow-a-new-run-started-after-run-error",
        [RS(), TS("m1"), RE(), *run(text("m2", "x"), run_id="r2")],
    )
    ok(
        "run-error-with-open-streams-is-allowed",
        [RS(), TS("m1"), CS("c1"), STEP_S("s"), RMS("r1"), RE()],
    )
    ok(
        "should-allow-multiple-sequential-runs",
        [*run(text("m1", "a")), *run(text("m2", "b"), run_id="r2")],
    )
    ok(
        "should-allow-reusing-message-ids-across-different-runs",
        [*run(text("m1", "a")), *run(text("m1", "b"), run_id="r2")],
    )
    ok(
        "should-allow-three-sequential-runs",
        [
            *run(text("m1", "a")),
            *run(call("c1"), run_id="r2"),
            *run(reasoning("x", "y"), run_id="r3"),
        ],
    )
    ok(
        "should-replay-a-thread-containing-an-errored-run-without-dropping-later-runs",
        [
            *run(text("m1", "a")),
            RS("r2"),
            TS("m2"),
            TC("m2", "partial"),
            RE(),
            *run(text("m3", "c"), run_id="r3"),
        ],
    )
    ok(
        "new-run-forgets-streams-left-open-by-an-errored-run",
        [RS(), TS("m1"), RE(), RS("r2"), TS("m1"), TE("m1"), RF("r2")],
    )
    rej(
        "should-reject-starting-a-text-message-with-an-id-already-in-progress",
        run(TS("m1"), TS("m1"), TE("m1")),
    )
    rej("should-not-allow-text-message-content-before-text-message-start", run(TC("m1", "x")))
    rej("should-not-allow-text-message-end-before-text-message-start", run(TE("m1")))
    rej(
        "should-ensure-message-content-has-the-same-id-as-message-start",
        run(TS("m1"), TC("m2", "x"), TE("m1")),
    )
    rej("content-after-end-is-rejected", run(TS("m1"), TE("m1"), TC("m1", "x")))
    ok("text-id-can-be-started-again-after-end", run(text("m1", "a"), text("m1", "b")))
    rej(
        "should-reject-starting-a-tool-call-with-an-id-already-in-progress",
        run(CS("c1"), CS("c1"), CE("c1")),
    )
    rej("should-not-allow-tool-call-args-before-tool-call-start", run(CA("c1", "{}")))
    rej("should-not-allow-tool-call-end-before-tool-call-start", run(CE("c1")))
    rej(
        "should-ensure-tool-call-args-has-the-same-id-as-tool-call-start",
        run(CS("c1"), CA("c2", "x"), CE("c1")),
    )
    ok(
        "should-allow-concurrent-tool-calls-with-different-ids",
        run(CS("c1"), CS("c2", "g"), CA("c2", "b"), CA("c1", "a"), CE("c2"), CE("c1")),
    )
    ok(
        "should-allow-overlapping-text-messages-and-tool-calls",
        run(
            TS("m1"),
            CS("c1", parentMessageId="m1"),
            TC("m1", "x"),
            CA("c1", "{}"),
            TE("m1"),
            CE("c1"),
        ),
    )
    ok(
        "should-allow-lifecycle-events-during-concurrent-messages-and-tool-calls",
        run(
            TS("m1"),
            CS("c1"),
            STEP_S("s"),
            SS({"a": 1}),
            E("CUSTOM", name="c", value=1),
            E("RAW", event=1),
            MS([user("u1")]),
            STEP_F("s"),
            TE("m1"),
            CE("c1"),
        ),
    )
    ok(
        "should-allow-raw-custom-state-and-snapshots-inside-a-text-message",
        run(
            TS("m1"),
            E("RAW", event={}),
            E("CUSTOM", name="n", value=[]),
            SS({}),
            SD([]),
            TC("m1", "x"),
            TE("m1"),
        ),
    )
    rej(
        "should-not-allow-starting-a-step-with-a-name-that-is-already-active",
        run(STEP_S("s"), STEP_S("s")),
    )
    rej("should-not-allow-ending-a-step-that-was-not-started", run(STEP_F("s")))
    rej("should-ensure-step-end-has-the-same-name-as-step-start", run(STEP_S("a"), STEP_F("b")))
    ok(
        "should-allow-properly-nested-steps",
        run(STEP_S("a"), STEP_S("b"), STEP_F("b"), STEP_F("a")),
    )
    ok("steps-may-close-out-of-order", run(STEP_S("a"), STEP_S("b"), STEP_F("a"), STEP_F("b")))
    ok(
        "step-can-be-restarted-after-finish",
        run(STEP_S("a"), STEP_F("a"), STEP_S("a"), STEP_F("a")),
    )
    ok(
        "parent-and-subagent-may-both-have-the-same-step-open",
        run(
            STEP_S("tools"),
            STEP_S("tools", subagentRunId="s1"),
            STEP_F("tools", subagentRunId="s1"),
            STEP_F("tools"),
        ),
    )
    rej(
        "step-finished-under-another-owner-is-rejected",
        run(STEP_S("tools"), STEP_F("tools", subagentRunId="s1")),
    )
    rej(
        "subagent-step-finished-untagged-is-rejected",
        run(STEP_S("tools", subagentRunId="s1"), STEP_F("tools")),
    )
    ok(
        "empty-string-subagent-is-its-own-step-owner",
        run(STEP_S("x"), STEP_S("x", subagentRunId=""), STEP_F("x", subagentRunId=""), STEP_F("x")),
    )
    rej("should-require-all-steps-to-be-ended-before-run-ends", run(STEP_S("a")))
    rej("should-reject-run-finished-while-text-messages-are-still-active", run(TS("m1")))
    rej("should-reject-run-finished-while-tool-calls-are-still-active", run(CS("c1")))
    rej("run-finished-while-reasoning-message-active-is-rejected", run(RMS("r1")))
    rej("run-finished-while-reasoning-span-active-is-rejected", run(RSTART("r1")))
    rej("run-finished-while-subagent-active-is-rejected", run(SUB_S("s1")))
    rej("reasoning-message-start-twice-is-rejected", run(RMS("r1"), RMS("r1"), RME("r1")))
    rej("reasoning-content-without-start-is-rejected", run(RMC("r1", "x")))
    rej("reasoning-message-end-without-start-is-rejected", run(RME("r1")))
    rej("reasoning-span-start-twice-is-rejected", run(RSTART("r1"), RSTART("r1"), REND("r1")))
    rej("reasoning-span-end-without-start-is-rejected", run(REND("r1")))
    rej(
        "reasoning-span-end-does-not-close-the-message",
        run(RSTART("r1"), RMS("r1"), REND("r1"), RMC("r1", "x")),
    )
    ok("reasoning-message-reopen-after-end", run(reasoning("r1", "a"), reasoning("r1", "b")))
    ok("tool-call-result-for-an-unknown-call-is-not-checked", run(CR("t1", "nobody")))
    ok("activity-delta-for-an-unknown-id-is-not-checked", run(AD("nope", "p", [])))
    ok(
        "there-is-no-check-when-the-stream-completes",
        [RS(), TS("m1"), TC("m1", "open"), CS("c1"), STEP_S("s")],
    )
    ok(
        "encrypted-value-for-unknown-entity-is-allowed",
        run(REV("message", "x", "e"), REV("tool-call", "y", "e")),
    )
    # subagent lifecycle
    ok(
        "subagent-lifecycle",
        run(
            SUB_S("s1", description="d"), SUB_F("s1", outcome={"type": "success"}, result={"r": 1})
        ),
    )
    ok(
        "subagent-suspended-outcome",
        run(SUB_S("s1"), SUB_F("s1", outcome={"type": "suspended", "interruptIds": ["i1"]})),
    )
    ok("subagent-error-ends-it", run(SUB_S("s1"), SUB_E("s1", code="E1")))
    ok(
        "nested-subagent-with-started-parent",
        run(SUB_S("s1"), SUB_S("s2", parentSubagentRunId="s1"), SUB_F("s2"), SUB_F("s1")),
    )
    ok(
        "nested-subagent-with-finished-parent",
        run(SUB_S("s1"), SUB_F("s1"), SUB_S("s2", parentSubagentRunId="s1"), SUB_F("s2")),
    )
    rej(
        "subagent-started-twice-while-active-is-rejected",
        run(SUB_S("s1"), SUB_S("s1"), SUB_F("s1")),
    )
    rej(
        "subagent-ids-are-per-invocation-and-cannot-be-reused",
        run(SUB_S("s1"), SUB_F("s1"), SUB_S("s1"), SUB_F("s1")),
    )
    ok(
        "subagent-id-may-be-reused-in-a-new-run",
        [*run(SUB_S("s1"), SUB_F("s1")), *run(SUB_S("s1"), SUB_F("s1"), run_id="r2")],
    )
    rej(
        "subagent-parent-not-started-is-rejected",
        run(SUB_S("s2", parentSubagentRunId="s1"), SUB_F("s2")),
    )
    rej("subagent-finished-without-start-is-rejected", run(SUB_F("s1")))
    rej("subagent-error-without-start-is-rejected", run(SUB_E("s1")))
    ok(
        "subagent-unknown-outcome-type-is-stripped",
        run(SUB_S("s1"), SUB_F("s1", outcome={"type": "weird"})),
    )
    ok(
        "attribution-only-stream-without-subagent-events-is-valid",
        run(text("m1", "x", subagentRunId="ghost"), call("c1", subagentRunId="ghost")),
    )
    ok(
        "subagent-tag-after-subagent-finished-is-allowed",
        run(SUB_S("s1"), SUB_F("s1"), text("m1", "late", subagentRunId="s1")),
    )
    # ownership
    rej(
        "tagged-continuation-on-a-parent-owned-message-is-rejected",
        run(TS("m1"), TC("m1", "x", subagentRunId="s1"), TE("m1")),
    )
    rej(
        "continuation-tag-disagreeing-with-opener-is-rejected",
        run(
            TS("m1", subagentRunId="s1"),
            TC("m1", "x", subagentRunId="s2"),
            TE("m1", subagentRunId="s1"),
        ),
    )
    rej(
        "end-tag-disagreeing-with-opener-is-rejected",
        run(TS("m1", subagentRunId="s1"), TE("m1", subagentRunId="s2")),
    )
    ok(
        "untagged-continuation-always-agrees",
        run(TS("m1", subagentRunId="s1"), TC("m1", "x"), TE("m1")),
    )
    rej(
        "reopen-by-a-different-owner-is-rejected",
        run(
            text("m1", "a", subagentRunId="s1"),
            TS("m1", subagentRunId="s2"),
            TE("m1", subagentRunId="s2"),
        ),
    )
    ok(
        "untagged-reopen-keeps-the-first-owner",
        run(
            text("m1", "a", subagentRunId="s1"),
            TS("m1"),
            TC("m1", "b", subagentRunId="s1"),
            TE("m1"),
        ),
    )
    rej(
        "tool-call-start-tag-disagreeing-with-parent-message-owner-is-rejected",
        run(text("a1", "x"), call("c1", parentMessageId="a1", subagentRunId="s1")),
    )
    ok(
        "tool-call-start-untagged-inherits-parent-owner",
        run(
            text("a1", "x", subagentRunId="s1"),
            CS("c1", parentMessageId="a1"),
            CA("c1", "{}", subagentRunId="s1"),
            CE("c1"),
        ),
    )
    rej(
        "untagged-tool-call-inheriting-owner-rejects-another-tag",
        run(
            text("a1", "x", subagentRunId="s1"),
            CS("c1", parentMessageId="a1"),
            CA("c1", "{}", subagentRunId="s2"),
            CE("c1"),
        ),
    )
    rej(
        "tool-call-reopened-under-a-parent-with-a-different-owner-is-rejected",
        run(
            text("a1", "x", subagentRunId="s1"),
            text("a2", "y", subagentRunId="s2"),
            call("c1", parentMessageId="a1"),
            call("c1", parentMessageId="a2"),
        ),
    )
    rej(
        "tool-args-tag-disagreeing-is-rejected",
        run(CS("c1", subagentRunId="s1"), CA("c1", "x", subagentRunId="s2"), CE("c1")),
    )
    rej(
        "activity-delta-tag-disagreeing-is-rejected",
        run(AS("act1", "p", {}, subagentRunId="s1"), AD("act1", "p", [], subagentRunId="s2")),
    )
    rej(
        "activity-delta-tagged-on-parent-owned-activity-is-rejected",
        run(AS("act1", "p", {}), AD("act1", "p", [], subagentRunId="s2")),
    )
    ok(
        "replacing-activity-snapshot-re-owns",
        run(
            AS("act1", "p", {}, subagentRunId="s1"),
            AS("act1", "p", {"v": 2}, subagentRunId="s2"),
            AD("act1", "p", [op("add", "/x", 1)], subagentRunId="s2"),
        ),
    )
    rej(
        "replace-false-snapshot-does-not-re-own",
        run(
            AS("act1", "p", {}, subagentRunId="s1"),
            AS("act1", "p", {}, replace=False, subagentRunId="s2"),
            AD("act1", "p", [], subagentRunId="s2"),
        ),
    )
    rej(
        "tool-call-result-records-the-minted-message-owner",
        run(call("c1"), CR("t1", "c1", subagentRunId="s1"), TS("t1", subagentRunId="s2"), TE("t1")),
    )
    ok(
        "tool-call-result-newest-mint-wins",
        run(
            call("c1"),
            CR("t1", "c1", subagentRunId="s1"),
            CR("t1", "c1", subagentRunId="s2"),
            TS("t1", subagentRunId="s2"),
            TE("t1"),
        ),
    )
    rej(
        "messages-snapshot-seeds-owners",
        run(MS([asst("a1", "x", subagentRunId="s1")]), TS("a1", subagentRunId="s2"), TE("a1")),
    )
    rej(
        "messages-snapshot-seeds-tool-call-owners-from-their-message",
        run(
            MS([asst("a1", toolCalls=[tcall("c1")], subagentRunId="s1")]),
            CS("c1", subagentRunId="s2"),
            CE("c1"),
        ),
    )
    ok(
        "messages-snapshot-re-seeds-owners-authoritatively",
        run(
            text("a1", "x", subagentRunId="s1"),
            MS([asst("a1", "x", subagentRunId="s2")]),
            TS("a1", subagentRunId="s2"),
            TE("a1"),
        ),
    )
    rej(
        "messages-snapshot-untagged-message-is-parent-owned",
        run(MS([user("u1")]), TS("u1", subagentRunId="s1"), TE("u1")),
    )
    rej(
        "run-started-input-seeds-owners",
        [
            RS(input=run_input([asst("a1", "x", subagentRunId="s1")])),
            TS("a1", subagentRunId="s2"),
            TE("a1"),
            RF(),
        ],
    )
    ok(
        "run-started-input-seeds-only-unclaimed-ids",
        [
            RS(
                input=run_input(
                    [asst("a1", "x", subagentRunId="s1"), asst("a1", "y", subagentRunId="s2")]
                )
            ),
            TS("a1", subagentRunId="s1"),
            TE("a1"),
            RF(),
        ],
    )
    rej(
        "reasoning-reopen-by-a-different-owner-is-rejected",
        run(RSTART("r1", subagentRunId="s1"), RMS("r1", subagentRunId="s2"), RME("r1"), REND("r1")),
    )
    rej(
        "reasoning-content-tag-disagreeing-is-rejected",
        run(RMS("r1", subagentRunId="s1"), RMC("r1", "x", subagentRunId="s2"), RME("r1")),
    )
    rej(
        "encrypted-value-for-tool-call-checks-the-call-owner",
        run(call("c1", subagentRunId="s1"), REV("tool-call", "c1", "e", subagentRunId="s2")),
    )
    rej(
        "encrypted-value-for-message-checks-the-message-owner",
        run(text("m1", "x", subagentRunId="s1"), REV("message", "m1", "e", subagentRunId="s2")),
    )
    rej(
        "encrypted-value-for-message-checks-the-reasoning-owner",
        run(
            reasoning("r1", "x", subagentRunId="s1"), REV("message", "r1", "e", subagentRunId="s2")
        ),
    )
    ok(
        "encrypted-value-with-matching-tag",
        run(call("c1", subagentRunId="s1"), REV("tool-call", "c1", "e", subagentRunId="s1")),
    )
    ok(
        "owners-are-per-kind",
        run(
            text("x", "msg", subagentRunId="s1"),
            call("x", subagentRunId="s2"),
            REV("tool-call", "x", "e", subagentRunId="s2"),
        ),
    )
    ok(
        "owners-cleared-by-a-new-run",
        [
            *run(text("m1", "a", subagentRunId="s1")),
            *run(text("m1", "b", subagentRunId="s2"), run_id="r2"),
        ],
    )
    ok(
        "interrupt-outcome",
        [
            RS(),
            text("m1", "x"),
            RF(
                outcome={
                    "type": "interrupt",
                    "interrupts": [
                        {
                            "id": "i1",
                            "reason": "approval",
                            "message": "ok?",
                            "toolCallId": "c1",
                            "responseSchema": {"type": "object"},
                            "expiresAt": "2030-01-01T00:00:00Z",
                            "metadata": {"m": 1},
                            "subagentRunId": "s1",
                        }
                    ],
                }
            ),
        ],
    )
    ok("cancelled-outcome", [RS(), RF(outcome={"type": "cancelled"})])
    ok(
        "success-outcome-with-pending-tool-call-ids",
        [
            RS(),
            call("c1"),
            RF(
                outcome={"type": "success", "pendingToolCallIds": ["c1"]},
                result={"x": 1},
                usage=[
                    {
                        "provider": "p",
                        "model": "m",
                        "inputTokens": 1,
                        "outputTokens": 2,
                        "totalTokens": 3,
                        "reasoningTokens": 0,
                        "cachedInputTokens": 0,
                        "cacheWriteInputTokens": 0,
                    }
                ],
            ),
        ],
    )
    ok("run-error-with-code-and-usage", [RS(), RE("bad", code="E42", usage=[{"inputTokens": 5}])])


def enforce_cases(c: Corpus) -> None:
    def bad(name: str, events: Any, **kw: Any) -> None:
        c.add(f"enforce/{name}", events, error=True, **kw)

    def ok(name: str, events: Any, **kw: Any) -> None:
        c.add(f"enforce/{name}", events, **kw)

    ok("unknown-event-type-is-dropped", run(E("SOMETHING_NEW", x=1), text("m1", "x"), E("", y=2)))
    ok("unknown-event-type-dropped-before-verification", [E("HELLO"), *run(text("m1", "x"))])
    ok(
        "unknown-properties-on-events-are-stripped",
        run(
            TS("m1", extra=1, toString="x", constructor=2),
            TC("m1", "x", future={"a": 1}),
            TE("m1", flag=True),
        ),
    )
    ok(
        "subagent-run-id-on-run-events-is-stripped",
        [
            RS(subagentRunId="s1"),
            MS([user("u1")], subagentRunId="s1"),
            text("m1", "x"),
            RF(subagentRunId="s1"),
        ],
    )
    ok(
        "unknown-properties-on-snapshot-messages-are-stripped",
        run(
            MS(
                [
                    user("u1", extra="drop me"),
                    asst("a1", "x", toolCalls=[tcall("c1", extra=1, subagentRunId="s1")], flag=1),
                    tool_msg("t1", "c1", name="tools-have-no-name"),
                    activity("act1", name="no-name", encryptedValue="no"),
                    rmsg("r1", name="no-name"),
                ]
            )
        ),
    )
    ok(
        "unknown-properties-in-function-call-are-stripped",
        run(
            MS(
                [
                    asst(
                        "a1",
                        toolCalls=[
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}", "strict": True},
                            }
                        ],
                    )
                ]
            )
        ),
    )
    ok(
        "unknown-properties-on-input-messages-are-stripped",
        [RS(input=run_input([user("u1", extra=1)])), RF()],
    )
    ok(
        "unknown-role-in-snapshot-is-dropped",
        run(MS([user("u1"), M("w1", "wizard", "abracadabra"), user("u2")])),
    )
    ok(
        "unknown-role-in-run-started-input-is-dropped",
        [RS(input=run_input([M("w1", "wizard", "x"), user("u1")])), RF()],
    )
    ok(
        "unknown-content-part-type-is-dropped",
        run(MS([user("u1", [text_part("a"), {"type": "hologram", "x": 1}, text_part("b")])])),
    )
    ok(
        "unknown-source-type-drops-the-whole-part",
        run(
            MS(
                [
                    user(
                        "u1",
                        [
                            {"type": "image", "source": {"type": "carrier-pigeon", "value": "x"}},
                            text_part("kept"),
                        ],
                    )
                ]
            )
        ),
    )
    ok(
        "all-source-types",
        run(
            MS(
                [
                    user(
                        "u1",
                        [
                            {
                                "type": "image",
                                "source": {
                                    "type": "data",
                                    "value": "AAAA",
                                    "mimeType": "image/png",
                                },
                                "id": "p1",
                            },
                            {
                                "type": "audio",
                                "source": {"type": "url", "value": "https://x.test/a.mp3"},
                            },
                            {
                                "type": "video",
                                "source": {
                                    "type": "file",
                                    "value": "file-123",
                                    "provider": "openai",
                                    "mimeType": "video/mp4",
                                },
                            },
                            {
                                "type": "document",
                                "source": {
                                    "type": "url",
                                    "value": "https://x.test/d.pdf",
                                    "mimeType": "application/pdf",
                                },
                                "metadata": {"pages": 3},
                            },
                        ],
                    )
                ]
            )
        ),
    )
    ok(
        "unknown-properties-on-content-parts-are-stripped",
        run(
            call("c1"),
            CR(
                "t1",
                "c1",
                [
                    text_part("a", extra=1),
                    {
                        "type": "image",
                        "source": {"type": "url", "value": "u", "extra": 2},
                        "extra": 3,
                    },
                ],
            ),
        ),
    )
    ok(
        "unknown-patch-op-is-removed-from-activity-delta",
        run(
            AS("act1", "p", {"a": 1}),
            AD("act1", "p", [{"op": "increment", "path": "/a"}, op("add", "/b", 2)]),
        ),
    )
    ok(
        "unknown-outcome-type-is-removed-so-the-run-reads-as-success",
        [RS(), RF(outcome={"type": "exploded", "why": "?"}), *run(text("m1", "next"), run_id="r2")],
    )
    ok(
        "unknown-properties-in-outcome-and-interrupts-are-stripped",
        [
            RS(),
            RF(
                outcome={
                    "type": "interrupt",
                    "extra": 1,
                    "interrupts": [{"id": "i1", "reason": "r", "extra": 2}],
                }
            ),
        ],
    )
    ok(
        "token-usage-unknown-properties-are-stripped",
        [RS(), RF(usage=[{"inputTokens": 1, "costUsd": 0.1}])],
    )
    ok(
        "timestamp-integer-accepted",
        run(TS("m1", timestamp=0), TE("m1", timestamp=9007199254740991)),
    )
    bad("timestamp-float-is-fatal", run(TS("m1", timestamp=1.5), TE("m1")))
    bad(
        "timestamp-beyond-safe-integer-is-fatal",
        run(TS("m1", timestamp=9007199254740992), TE("m1")),
    )
    bad("timestamp-string-is-fatal", run(TS("m1", timestamp="2024-01-01"), TE("m1")))
    ok("raw-event-null-is-legacy-absent", run(TS("m1", rawEvent=None), TE("m1", rawEvent=None)))
    ok(
        "raw-event-any-value",
        run(TS("m1", rawEvent=False), TC("m1", "x", rawEvent=0), TE("m1", rawEvent="")),
    )
    for event in (
        TS("m1"),
        TC("m1", "x"),
        TE("m1"),
        CS("c1"),
        CA("c1", "x"),
        CE("c1"),
        CR("t1", "c1"),
        SS({}),
        SD([]),
        MS([]),
        AS("a", "p", {}),
        AD("a", "p", []),
        E("RAW", event=1),
        E("CUSTOM", name="n", value=1),
        STEP_S("s"),
        RSTART("r"),
        RMS("r"),
        RMC("r", "x"),
        RME("r"),
        REND("r"),
        REV("message", "m1"),
        SUB_S("s1"),
        SUB_F("s1"),
        SUB_E("s1"),
        TXC(messageId="m1", delta="x"),
        TLC(toolCallId="c1", toolCallName="f"),
        RNC(messageId="r1", delta="x"),
    ):
        bad(
            f"null-metadata-on-{event['type'].lower().replace('_', '-')}-is-fatal",
            run({**event, "metadata": None}),
        )
    bad("null-metadata-on-run-started-is-fatal", [RS(metadata=None), RF()])
    bad("null-metadata-on-run-finished-is-fatal", [RS(), RF(metadata=None)])
    bad("null-metadata-on-run-error-is-fatal", [RS(), RE(metadata=None)])
    bad("null-metadata-fatal-also-unverified", [TS("m1", metadata=None)], verify=False)
    bad("array-metadata-is-fatal", run(TS("m1", metadata=[1, 2]), TE("m1")))
    bad("string-metadata-is-fatal", run(TS("m1", metadata="x"), TE("m1")))
    bad("number-metadata-is-fatal", run(TS("m1", metadata=1), TE("m1")))
    for role, message in ALL_ROLES.items():
        bad(
            f"null-metadata-on-{role}-message-in-messages-snapshot-is-fatal",
            run(MS([{**message, "metadata": None}])),
        )
        bad(
            f"null-metadata-on-{role}-message-in-run-started-input-is-fatal",
            [RS(input=run_input([{**message, "metadata": None}])), RF()],
        )
        ok(f"absent-metadata-on-{role}-message-is-fine", run(MS([message])))
        ok(
            f"metadata-on-{role}-message-in-snapshot-is-kept",
            run(MS([{**message, "metadata": {"r": role}}])),
        )
    bad(
        "null-metadata-on-tool-call-in-messages-snapshot-is-fatal",
        run(MS([asst("a1", toolCalls=[tcall("c1", metadata=None)])])),
    )
    bad(
        "null-metadata-on-tool-call-in-run-started-input-is-fatal",
        [RS(input=run_input([asst("a1", toolCalls=[tcall("c1", metadata=None)])])), RF()],
    )
    bad(
        "null-metadata-on-tool-is-fatal",
        [
            RS(input=run_input([], tools=[{"name": "f", "description": "d", "metadata": None}])),
            RF(),
        ],
    )
    bad(
        "null-metadata-on-interrupt-is-fatal",
        [
            RS(),
            RF(
                outcome={
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "r", "metadata": None}],
                }
            ),
        ],
    )
    bad(
        "null-metadata-on-resume-entry-is-fatal",
        [
            RS(
                input=run_input(
                    [], resume=[{"interruptId": "i1", "status": "resolved", "metadata": None}]
                )
            ),
            RF(),
        ],
    )
    ok(
        "metadata-on-tool-interrupt-and-resume-is-plain-data",
        [
            RS(
                input=run_input(
                    [],
                    tools=[{"name": "f", "description": "d", "metadata": {}}],
                    resume=[{"interruptId": "i1", "status": "cancelled", "metadata": {"sig": "x"}}],
                )
            ),
            RF(
                outcome={
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "r", "metadata": {"a": None}}],
                }
            ),
        ],
    )
    bad("text-part-metadata-null-is-fatal", run(MS([user("u1", [text_part("a", metadata=None)])])))
    ok(
        "media-part-metadata-null-is-legacy-absent",
        run(MS([user("u1", [image_part(metadata=None)])])),
    )
    ok(
        "media-part-metadata-null-in-input-is-legacy-absent",
        [RS(input=run_input([user("u1", [image_part(metadata=None)])])), RF()],
    )
    ok(
        "part-metadata-any-non-null-value",
        run(MS([user("u1", [text_part("a", metadata=[1]), image_part(metadata="s")])])),
    )
    ok("legacy-parent-message-id-null-is-absent", run(CS("c1", parentMessageId=None), CE("c1")))
    ok("legacy-outcome-null-is-absent", [RS(), RF(outcome=None)])
    ok("legacy-result-null-is-absent", [RS(), RF(result=None)])
    ok("legacy-subagent-result-null-is-absent", run(SUB_S("s1"), SUB_F("s1", result=None)))
    ok(
        "legacy-binary-data-part-is-upgraded",
        run(
            MS(
                [
                    user(
                        "u1",
                        [
                            {
                                "type": "binary",
                                "mimeType": "image/png",
                                "data": "AAAA",
                                "filename": "a.png",
                            },
                            {
                                "type": "binary",
                                "mimeType": "audio/wav",
                                "url": "https://x.test/a.wav",
                            },
                            {"type": "binary", "mimeType": "application/pdf", "data": "JVBE"},
                            {
                                "type": "binary",
                                "mimeType": "video/mp4",
                                "url": "https://x.test/v.mp4",
                                "filename": "v.mp4",
                            },
                        ],
                    )
                ]
            )
        ),
    )
    ok(
        "legacy-binary-part-in-input-is-upgraded",
        [
            RS(
                input=run_input(
                    [
                        user(
                            "u1",
                            [
                                {
                                    "type": "binary",
                                    "mimeType": "image/jpeg",
                                    "url": "https://x.test/a.jpg",
                                }
                            ],
                        )
                    ]
                )
            ),
            RF(),
        ],
    )
    ok(
        "legacy-binary-part-with-only-an-id-is-dropped",
        run(
            MS(
                [
                    user(
                        "u1",
                        [
                            {"type": "binary", "mimeType": "image/png", "id": "file-1"},
                            text_part("kept"),
                        ],
                    )
                ]
            )
        ),
    )
    ok(
        "legacy-input-nulls-are-absent",
        [
            RS(
                input=run_input(
                    [],
                    forwardedProps=None,
                    tools=[{"name": "f", "description": "d", "parameters": None}],
                    resume=[{"interruptId": "i1", "status": "resolved", "payload": None}],
                    state=None,
                )
            ),
            RF(),
        ],
    )
    bad("missing-required-field-is-fatal", run(E("TEXT_MESSAGE_CONTENT", messageId="m1")))
    bad("wrongly-typed-field-is-fatal", run(TS("m1"), TC("m1", 5), TE("m1")))  # type: ignore[arg-type]
    bad("message-id-number-is-fatal", run(TS(1), TE(1)))  # type: ignore[arg-type]
    bad("subagent-started-without-id-is-fatal", run(E("SUBAGENT_STARTED", name="x")))
    bad("subagent-started-without-name-is-fatal", run(E("SUBAGENT_STARTED", subagentRunId="s1")))
    bad("subagent-run-id-null-is-fatal", run(TS("m1", subagentRunId=None), TE("m1")))
    bad(
        "interrupt-null-subagent-run-id-is-fatal",
        [
            RS(),
            RF(
                outcome={
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "r", "subagentRunId": None}],
                }
            ),
        ],
    )
    bad(
        "interrupt-outcome-with-no-interrupts-is-fatal",
        [RS(), RF(outcome={"type": "interrupt", "interrupts": []})],
    )
    bad("negative-token-count-is-fatal", [RS(), RF(usage=[{"inputTokens": -1}])])
    bad("non-integer-token-count-is-fatal", [RS(), RF(usage=[{"outputTokens": 1.5}])])
    bad("input-tools-null-is-fatal", [RS(input={**run_input([]), "tools": None}), RF()])
    bad(
        "context-entry-missing-value-is-fatal",
        [RS(input=run_input([], context=[{"description": "d"}])), RF()],
    )
    bad(
        "tool-call-type-not-function-is-fatal",
        run(
            MS(
                [
                    asst(
                        "a1",
                        toolCalls=[
                            {
                                "id": "c1",
                                "type": "other",
                                "function": {"name": "f", "arguments": ""},
                            }
                        ],
                    )
                ]
            )
        ),
    )
    bad("user-content-number-is-fatal", run(MS([user("u1", 5)])))
    bad("subagent-finished-outcome-null-is-fatal", run(SUB_S("s1"), SUB_F("s1", outcome=None)))
    bad(
        "subagent-suspended-interrupt-ids-non-string-is-fatal",
        run(SUB_S("s1"), SUB_F("s1", outcome={"type": "suspended", "interruptIds": [1]})),
    )
    bad(
        "subagent-started-description-null-is-fatal",
        run(SUB_S("s1", description=None), SUB_F("s1")),
    )
    bad("raw-event-field-missing-is-fatal", run(E("RAW")))
    ok("raw-event-null-event-is-fine", run(E("RAW", event=None, source="s")))
    ok("custom-null-value-is-fine", run(E("CUSTOM", name="n", value=None)))
    bad("custom-without-value-is-fatal", run(E("CUSTOM", name="n")))
    bad("encrypted-value-unknown-subtype-is-fatal", run(REV("span", "x")))
    bad("state-snapshot-without-snapshot-is-fatal", run(E("STATE_SNAPSHOT")))
    bad(
        "messages-snapshot-message-without-id-is-fatal", run(MS([{"role": "user", "content": "x"}]))
    )
    bad(
        "activity-delta-patch-not-an-array-is-fatal",
        run(AS("a", "p", {}), AD("a", "p", {"op": "add"})),
    )  # type: ignore[arg-type]
    c.add("enforce/event-type-that-is-not-a-string-is-dropped", run(E(5), text("m1", "x")))  # type: ignore[arg-type]


def thinking_cases(c: Corpus) -> None:
    c.add(
        "thinking/legacy-events-translate-to-reasoning-with-minted-ids",
        run(
            E("THINKING_START", title="Planning"),
            E("THINKING_TEXT_MESSAGE_START"),
            E("THINKING_TEXT_MESSAGE_CONTENT", delta="Step 1. "),
            E("THINKING_TEXT_MESSAGE_CONTENT", delta="Step 2."),
            E("THINKING_TEXT_MESSAGE_END"),
            E("THINKING_END"),
            text("m1", "Answer"),
        ),
    )
    c.add(
        "thinking/two-thinking-messages-get-two-ids",
        run(
            E("THINKING_START"),
            E("THINKING_TEXT_MESSAGE_START"),
            E("THINKING_TEXT_MESSAGE_CONTENT", delta="a"),
            E("THINKING_TEXT_MESSAGE_END"),
            E("THINKING_TEXT_MESSAGE_START"),
            E("THINKING_TEXT_MESSAGE_CONTENT", delta="b"),
            E("THINKING_TEXT_MESSAGE_END"),
            E("THINKING_END"),
        ),
    )
    c.add(
        "thinking/metadata-on-thinking-message-lands-on-the-reasoning-message",
        run(
            E("THINKING_TEXT_MESSAGE_START", metadata={"a": 1}),
            E("THINKING_TEXT_MESSAGE_CONTENT", delta="x", metadata={"b": 2}),
            E("THINKING_TEXT_MESSAGE_END", metadata={"a": 3}),
        ),
    )
    c.add(
        "thinking/content-without-opener-names-a-minted-id-and-is-rejected",
        run(E("THINKING_TEXT_MESSAGE_CONTENT", delta="orphan")),
        error=True,
    )
    c.add(
        "thinking/content-without-opener-unverified-builds-nothing",
        [
            RS(),
            E("THINKING_TEXT_MESSAGE_CONTENT", delta="orphan"),
            E("THINKING_TEXT_MESSAGE_END"),
            RF(),
        ],
        verify=False,
    )
    c.add("thinking/end-without-start-is-rejected", run(E("THINKING_END")), error=True)
    c.add(
        "thinking/mixed-with-reasoning-events",
        run(
            reasoning("r1", "modern"),
            E("THINKING_TEXT_MESSAGE_START"),
            E("THINKING_TEXT_MESSAGE_CONTENT", delta="legacy"),
            E("THINKING_TEXT_MESSAGE_END"),
        ),
    )


def subagent_cases(c: Corpus) -> None:
    c.add(
        "subagent/lifecycle-events-build-nothing",
        run(
            SUB_S("s1", description="d", parentToolCallId="c1", parentMessageId="m1"),
            SUB_F("s1", result="done", outcome={"type": "success"}),
        ),
    )
    c.add(
        "subagent/attribution-on-every-created-item",
        run(
            SUB_S("s1"),
            text("m1", "hi", subagentRunId="s1"),
            reasoning("r1", "hm", subagentRunId="s1"),
            call("c1", "f", "{}", subagentRunId="s1"),
            CR("t1", "c1", "ok", subagentRunId="s1"),
            AS("act1", "p", {"a": 1}, subagentRunId="s1"),
            SUB_F("s1"),
        ),
    )
    c.add(
        "subagent/delegation-inside-a-parent-tool-call",
        run(
            text("a1", "delegating"),
            call("c1", "delegate", "{}", parentMessageId="a1"),
            SUB_S("s1", parentToolCallId="c1"),
            text("sm1", "sub work", subagentRunId="s1"),
            STEP_S("tools", subagentRunId="s1"),
            STEP_F("tools", subagentRunId="s1"),
            SUB_F("s1", result={"answer": 42}),
            CR("t1", "c1", "42"),
            text("a2", "The answer is 42"),
        ),
    )
    c.add(
        "subagent/two-subagents-stream-interleaved-explicit-events",
        run(
            SUB_S("s1"),
            SUB_S("s2"),
            TS("m1", subagentRunId="s1"),
            TS("m2", subagentRunId="s2"),
            TC("m1", "one", subagentRunId="s1"),
            TC("m2", "two", subagentRunId="s2"),
            TE("m2", subagentRunId="s2"),
            TE("m1", subagentRunId="s1"),
            SUB_E("s2", message="oops"),
            SUB_F("s1"),
        ),
    )
    c.add(
        "subagent/nested-subagents",
        run(
            SUB_S("s1"),
            SUB_S("s2", parentSubagentRunId="s1"),
            TXC(messageId="m2", delta="deep", subagentRunId="s2"),
            SUB_F("s2", outcome={"type": "suspended"}),
            TXC(messageId="m1", delta="mid", subagentRunId="s1"),
            SUB_F("s1"),
        ),
    )
    c.add(
        "subagent/tool-call-owner-created-with-tag-only-once",
        run(
            CS("c1", parentMessageId="a9", subagentRunId="s1"),
            CE("c1"),
            CS("c2", parentMessageId="a9"),
            CE("c2"),
        ),
    )


def runfinished_cases(c: Corpus) -> None:
    c.add(
        "run/interrupt-outcome-changes-no-message",
        [
            RS(),
            text("m1", "need approval"),
            call("c1", "dangerous", "{}"),
            RF(
                outcome={
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "tool_approval", "toolCallId": "c1"}],
                }
            ),
        ],
    )
    c.add("run/result-value-changes-nothing", [RS(), RF(result=[1, {"a": None}])])
    c.add(
        "run/events-outside-any-run-unverified",
        [text("m1", "x"), SS({"a": 1}), call("c1")],
        verify=False,
    )
    c.add(
        "run/events-after-run-finished-unverified",
        [*run(text("m1", "a")), text("m2", "b")],
        verify=False,
    )
    c.add("run/empty-stream", [], verify=False)
    c.add("run/empty-stream-verified", [])
    c.add("run/only-run-started", [RS()])
    c.add(
        "run/history-and-state-only", [], messages=[user("u1"), asst("a1", "x")], state={"a": [1]}
    )


# ---------------------------------------------------------------------------------------------
# Generated streams (seeded)


class StreamGen:
    """Builds realistic, valid runs from a seeded ``random.Random``."""

    WORDS = ("the", "quick", "tool", "answer", "é", "日本", "🙂", "data", "\n", " ", "42", '"q"')

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.n = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def words(self, k: int | None = None) -> list[str]:
        k = k if k is not None else self.rng.randint(1, 5)
        return [
            "".join(self.rng.choice(self.WORDS) for _ in range(self.rng.randint(1, 3)))
            for _ in range(k)
        ]

    def value(self, depth: int = 0) -> Any:
        r = self.rng.random()
        if depth > 2 or r < 0.5:
            return self.rng.choice(
                [None, True, False, 0, 7, -3, 2.5, -0.125, "", "v", "ü", 123456789]
            )
        if r < 0.75:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return {
            self.rng.choice(["a", "b", "", "ключ", "x y"]): self.value(depth + 1)
            for _ in range(self.rng.randint(0, 3))
        }

    def meta(self, p: float = 0.4) -> dict[str, Any]:
        if self.rng.random() >= p:
            return {}
        keys = ["usage", "model", "trace", "ag-ui", "vendor.x", "", "finish"]
        return {
            "metadata": {self.rng.choice(keys): self.value() for _ in range(self.rng.randint(0, 3))}
        }

    def tag(self, lane: str | None) -> dict[str, Any]:
        return {"subagentRunId": lane} if lane is not None else {}

    def segment(self, lane: str | None, parents: list[str]) -> list[Event]:
        rng, t = self.rng, self.tag(lane)
        kind = rng.choice(
            ["text", "text", "tool", "reasoning", "activity", "state", "chunk", "chunk-tool", "raw"]
        )
        if kind == "text":
            mid = self.fresh("m")
            if lane is None:
                parents.append(mid)
            return [
                TS(mid, **t, **self.meta()),
                *(TC(mid, w, **self.meta(0.2)) for w in self.words()),
                TE(mid, **self.meta()),
            ]
        if kind == "tool":
            cid = self.fresh("c")
            parent = (
                {"parentMessageId": rng.choice(parents)}
                if parents and lane is None and rng.random() < 0.7
                else {}
            )
            events = [
                CS(cid, rng.choice(["search", "calc"]), **parent, **t, **self.meta()),
                *(
                    CA(cid, w, **self.meta(0.2))
                    for w in ['{"q": ', json.dumps(" ".join(self.words()))]
                ),
                CE(cid, **self.meta()),
            ]
            if rng.random() < 0.8:
                events.append(CR(self.fresh("t"), cid, " ".join(self.words()), **t, **self.meta()))
            return events
        if kind == "reasoning":
            mid = self.fresh("r")
            events = [RSTART(mid, **t), *reasoning(mid, *self.words(), **t), REND(mid, **t)]
            if rng.random() < 0.3:
                events.append(REV("message", mid, "enc-" + mid, **t))
            return events
        if kind == "activity":
            aid = self.fresh("act")
            events = [AS(aid, "progress", {"pct": 0, "log": []}, **t, **self.meta())]
            for i in range(rng.randint(1, 3)):
                events.append(
                    AD(
                        aid,
                        "progress",
                        [op("replace", "/pct", 10 * (i + 1)), op("add", "/log/-", i)],
                        **t,
                        **self.meta(),
                    )
                )
            if rng.random() < 0.3:
                events.append(AS(aid, "progress", {"pct": 100}, **t, **self.meta()))
            return events
        if kind == "state":
            key = rng.choice(["a", "b", "c"])
            return [
                SD([op("add", f"/{key}", self.value())], **t, **self.meta()),
                *([SS({"k": self.value()}, **t)] if rng.random() < 0.2 else []),
            ]
        if kind == "chunk":
            mid = self.fresh("m")
            chunks = [TXC(messageId=mid, delta=self.words(1)[0], **t, **self.meta())]
            chunks += [TXC(delta=w, **t, **self.meta(0.2)) for w in self.words()]
            if rng.random() < 0.5:
                chunks.append(TXC(**t, metadata={"usage": {"out": rng.randint(1, 99)}}))
            return chunks
        if kind == "chunk-tool":
            cid = self.fresh("c")
            return [
                TLC(toolCallId=cid, toolCallName="f", delta="{", **t, **self.meta()),
                TLC(delta='"a": 1}', **t, **self.meta(0.3)),
            ]
        return [
            E("RAW", event={"provider": self.value()}, **t),
            E("CUSTOM", name="c", value=self.value(), **t),
        ]

    def run_events(self, size: int, run_id: str, history: list[str]) -> list[Event]:
        rng = self.rng
        events: list[Event] = [RS(run_id, **self.meta(0.3))]
        parents = list(history)
        lanes: list[str] = []
        while len(events) < size:
            r = rng.random()
            if r < 0.12 and len(lanes) < 2:
                sid = self.fresh("s")
                lanes.append(sid)
                events.append(SUB_S(sid, **self.meta(0.3)))
                continue
            if r < 0.2 and lanes:
                sid = lanes.pop(rng.randrange(len(lanes)))
                events.append(SUB_F(sid, **self.meta(0.3)) if rng.random() < 0.8 else SUB_E(sid))
                continue
            lane = rng.choice(lanes) if lanes and rng.random() < 0.4 else None
            if rng.random() < 0.15:
                step = self.fresh("step")
                events += [
                    STEP_S(step, **self.tag(lane)),
                    *self.segment(lane, parents),
                    STEP_F(step, **self.tag(lane)),
                ]
            else:
                events += self.segment(lane, parents)
        events += [SUB_F(sid) for sid in lanes]
        events.append(RF(run_id, **self.meta(0.3)))
        return events

    def history(self) -> list[dict[str, Any]]:
        rng = self.rng
        messages: list[dict[str, Any]] = [system("h-sys")]
        for i in range(rng.randint(0, 3)):
            messages.append(user(f"h-u{i}", " ".join(self.words())))
            if rng.random() < 0.5:
                messages.append(asst(f"h-a{i}", toolCalls=[tcall(f"h-c{i}", "f", "{}")]))
                messages.append(tool_msg(f"h-t{i}", f"h-c{i}", "done"))
            messages.append(asst(f"h-b{i}", " ".join(self.words()), metadata={"turn": i}))
        return messages

    def case(
        self, size: int, runs: int = 1
    ) -> tuple[list[Event], list[dict[str, Any]] | None, Any]:
        history = self.history() if self.rng.random() < 0.5 else None
        state = {"seed": self.rng.randint(0, 99)} if self.rng.random() < 0.5 else None
        ids = [m["id"] for m in history or [] if m["role"] == "assistant"]
        events: list[Event] = []
        for i in range(runs):
            events += self.run_events(size // runs, f"run{i}", ids)
        return events, history, state

    def perturb(self, events: list[Event]) -> list[Event]:
        rng = self.rng
        events = [dict(e) for e in events]
        for _ in range(rng.randint(1, 4)):
            if not events:
                break
            action = rng.choice(["swap", "drop", "dup", "shuffle-window", "move"])
            i = rng.randrange(len(events))
            if action == "swap":
                j = rng.randrange(len(events))
                events[i], events[j] = events[j], events[i]
            elif action == "drop":
                del events[i]
            elif action == "dup":
                events.insert(rng.randrange(len(events) + 1), dict(events[i]))
            elif action == "shuffle-window":
                window = events[i : i + 6]
                rng.shuffle(window)
                events[i : i + 6] = window
            else:
                moved = events.pop(i)
                events.insert(rng.randrange(len(events) + 1), moved)
        return events


def generated_cases(c: Corpus) -> None:
    gen = StreamGen(random.Random(20240601))
    for i in range(12):
        events, history, state = gen.case(gen.rng.randint(8, 30))
        c.add(f"gen/small-{i:02d}", events, messages=history, state=state)
    for i in range(6):
        events, history, state = gen.case(gen.rng.randint(80, 160), runs=gen.rng.randint(1, 3))
        c.add(f"gen/medium-{i:02d}", events, messages=history, state=state)
    for i in range(2):
        events, history, state = gen.case(1500, runs=2)
        c.add(f"gen/large-{i:02d}", events, messages=history, state=state)
    for i in range(16):
        events, history, state = gen.case(gen.rng.randint(10, 60))
        c.add(
            f"gen/misordered-{i:02d}",
            gen.perturb(events),
            messages=history,
            state=state,
            verify=False,
            error=None,
        )
    for i in range(6):
        events, history, state = gen.case(gen.rng.randint(10, 40))
        c.add(
            f"gen/misordered-verified-{i:02d}",
            gen.perturb(events),
            messages=history,
            state=state,
            error=None,
        )


# ---------------------------------------------------------------------------------------------
# Assembly and files


def build() -> Corpus:
    """All cases, in file order (deterministic)."""
    corpus = Corpus()
    for category in (
        metadata_cases,
        text_cases,
        reasoning_cases,
        tool_cases,
        activity_cases,
        snapshot_cases,
        run_started_cases,
        state_cases,
        chunk_cases,
        verify_cases,
        enforce_cases,
        thinking_cases,
        subagent_cases,
        runfinished_cases,
        generated_cases,
    ):
        category(corpus)
    return corpus


def dumps(cases: list[Case]) -> str:
    """The exact text of a cases or expected file."""
    return "".join(
        json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n" for case in cases
    )


FILES = {
    True: ("cases.jsonl", "expected.jsonl"),
    False: ("cases_noverify.jsonl", "expected_noverify.jsonl"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the golden conformance corpus.")
    parser.add_argument(
        "--cases-only",
        action="store_true",
        help="write the cases files only (no oracle run, expected files untouched)",
    )
    args = parser.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.oracle import normalise_minted_ids, run_official

    corpus = build()
    outputs: dict[str, str] = {}
    problems: list[str] = []
    for verify, cases in ((True, corpus.verified), (False, corpus.unverified)):
        cases_file, expected_file = FILES[verify]
        outputs[cases_file] = dumps(cases)
        if args.cases_only:
            continue
        results = [
            normalise_minted_ids(r, case)
            for r, case in zip(run_official(cases, verify), cases, strict=True)
        ]
        for case, result in zip(cases, results, strict=True):
            want = corpus.intent.get(case["name"])
            if want is not None and want != ("error" in result):
                problems.append(
                    f"{case['name']}: expected {'an error' if want else 'success'}, "
                    f"the reference gave {json.dumps(result)[:300]}"
                )
        outputs[expected_file] = dumps(results)
    if problems:
        print(
            "cases contradict their declared intent:\n  " + "\n  ".join(problems), file=sys.stderr
        )
        return 1
    for name, text_ in outputs.items():
        (HERE / name).write_text(text_, encoding="utf-8")
    print(
        f"{len(corpus.verified)} verified + {len(corpus.unverified)} unverified cases written to {HERE}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
