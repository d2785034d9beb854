"""The bad-input catalogue: every kind of broken stream, through the public API, from bytes.

Each row of :data:`CATALOGUE` is one kind of bad input, written as the stream's entries (events
encoded as SSE or JSON lines, or raw bytes) with one bad entry. Every row is run through
``agui_meta.wrap(source, ExpandChunks(), Verify(), Accumulate(store))`` in the three modes:

- default: the package's own error (never a ``KeyError``, ``RecursionError``,
  ``UnicodeDecodeError`` … from deep inside), naming what and where: the event index, the byte
  offset and line of the frame, the JSON path; or, where the reference client only warns, a
  report with its code, index and path, and the stream goes on;
- keep-going: one report with the same location, the pipeline completes, and the store holds
  exactly what the stream without the bad entry builds (and, with the oracle, what the
  reference client builds from it): nothing before or after the bad event is lost. Rows marked
  ``fatal`` end the stream in every mode (the stream cannot be read past them, as in the
  reference); the store then holds what the entries before them built;
- strict: the first problem raises.

Locations are not written by hand: offsets and lines are computed from where the bad entry (or
the bad line inside it) sits in the rendered bytes. Expected stores come from the reference
client (the ``oracle`` tests) or from the specification's rules for the simple streams written
out here.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import pytest

import agui_meta
from agui_meta import (
    Accumulate,
    AguiMetaError,
    ApplyError,
    ChunkError,
    DataError,
    DecodeError,
    ExpandChunks,
    FramingError,
    MetadataError,
    Report,
    StrictError,
    Verify,
    VerifyError,
)
from agui_meta._fastdecode import MAX_NESTING
from tests.oracle import OracleServer, assert_same_result

pytestmark = pytest.mark.anyio

Event = dict[str, Any]
Format = Literal["sse", "jsonl"]

RUN: Event = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISH: Event = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def text(mid: str, *deltas: str, **start: Any) -> list[Event]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": mid, **start},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": d} for d in deltas),
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
    ]


def tool(cid: str, *deltas: str, **start: Any) -> list[Event]:
    return [
        {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "f", **start},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": d} for d in deltas),
        {"type": "TOOL_CALL_END", "toolCallId": cid},
    ]


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Raw:
    """An entry written as raw bytes, framing included (one frame, or none)."""

    data: bytes


def sse_raw(payload: bytes) -> Raw:
    return Raw(b"data: " + payload + b"\n\n")


Entry = Event | Raw


def render(entries: Sequence[Entry], fmt: Format) -> tuple[bytes, list[int]]:
    """The stream's bytes and the byte offset where each entry starts."""
    out = bytearray()
    starts = []
    for entry in entries:
        starts.append(len(out))
        if isinstance(entry, Raw):
            out += entry.data
        elif fmt == "sse":
            out += b"data: " + dumps(entry) + b"\n\n"
        else:
            out += dumps(entry) + b"\n"
    return bytes(out), starts


@dataclass(frozen=True)
class Case:
    """One kind of bad input.

    ``bad`` is the index of the bad entry (every entry is one frame, so it is also the event
    index). ``error`` is what default mode raises (``None``: the reference only warns, and
    ``code`` is the warning's report code); ``code`` is also the code of the keep-going report
    (the rule of a :class:`VerifyError`, else the error's class name). ``at`` is a byte
    string inside the bad entry where the error points (default: the entry's first byte);
    ``path`` the JSON path it names; ``what`` a phrase its message contains.
    """

    description: str
    entries: list[Entry]
    bad: int
    error: type[DataError] | None
    code: str
    what: str
    path: str | None = None
    at: bytes | None = None
    fmt: Format = "sse"
    fatal: bool = False  # ends the stream in keep-going mode too (documented)
    equivalent: list[Event] | None = None  # the good stream keep-going must equal
    oracle: bool = True  # the reference client can run these events (no framing problem)
    stages: Literal["default", "no-verify", "no-chunks"] = "default"
    options: dict[str, Any] = field(default_factory=dict)

    def data(self) -> bytes:
        return render(self.entries, self.fmt)[0]

    def offset(self) -> int:
        data, starts = render(self.entries, self.fmt)
        start = starts[self.bad]
        return start if self.at is None else data.index(self.at, start)

    def line(self) -> int:
        return self.data()[: self.offset()].count(b"\n") + 1

    def good(self) -> list[Event]:
        """The stream without its bad entry (what keep-going must build)."""
        if self.equivalent is not None:
            return self.equivalent
        return [e for i, e in enumerate(self.entries) if i != self.bad and not isinstance(e, Raw)]

    def before(self) -> list[Event]:
        return [e for e in self.entries[: self.bad] if not isinstance(e, Raw)]


def row(name: str, case: Case) -> Any:
    return pytest.param(case, id=name)


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


CALL_RESULT = {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "ok"}
ACTIVITY = {
    "type": "ACTIVITY_SNAPSHOT",
    "messageId": "a1",
    "activityType": "progress",
    "content": {"n": 1},
}

CATALOGUE = [
    # -- framing: bytes that are not frames --------------------------------------------------
    row(
        "truncated-json",
        Case(
            "a frame whose JSON stops half-way, mid-stream",
            [
                RUN,
                sse_raw(b'{"type":"TEXT_MESSAGE_START","messageId":"m"'),
                *text("n", "x"),
                FINISH,
            ],
            1,
            DecodeError,
            "DecodeError",
            "truncated",
        ),
    ),
    row(
        "invalid-utf8-sse-data",
        Case(
            "an SSE data line that is not UTF-8",
            [
                RUN,
                sse_raw(b'{"type":"CUSTOM","name":"\xff\xfe","value":1}'),
                *text("m", "x"),
                FINISH,
            ],
            1,
            FramingError,
            "FramingError",
            "not valid UTF-8",
        ),
    ),
    row(
        "invalid-utf8-second-data-line",
        Case(
            "the second data line of a multi-line SSE event is not UTF-8 (the error names it)",
            [RUN, Raw(b'data: {"type":"CUSTOM",\ndata: "name":"\xc3(","value":1}\n\n'), FINISH],
            1,
            FramingError,
            "FramingError",
            "not valid UTF-8",
            at=b'data: "name"',
        ),
    ),
    row(
        "invalid-utf8-sse-event-field",
        Case(
            "an SSE `event:` field that is not UTF-8",
            [
                RUN,
                Raw(b'event: \xe2\x82\ndata: {"type":"CUSTOM","name":"n","value":1}\n\n'),
                FINISH,
            ],
            1,
            FramingError,
            "FramingError",
            "SSE event type is not valid UTF-8",
        ),
    ),
    row(
        "invalid-utf8-json-line",
        Case(
            "a JSON line that is not UTF-8",
            [RUN, Raw(b'{"type":"CUSTOM","name":"\x80","value":1}\n'), *text("m", "x"), FINISH],
            1,
            FramingError,
            "FramingError",
            "JSON line is not valid UTF-8",
            fmt="jsonl",
        ),
    ),
    row(
        "two-events-without-blank-line",
        Case(
            "a broken SSE frame: two events with no blank line between them become one frame",
            [
                RUN,
                Raw(
                    b'data: {"type":"CUSTOM","name":"a","value":1}\n'
                    b'data: {"type":"CUSTOM","name":"b","value":2}\n\n'
                ),
                FINISH,
            ],
            1,
            DecodeError,
            "DecodeError",
            "trailing characters",
        ),
    ),
    row(
        "empty-data-field",
        Case(
            "a broken SSE frame: a `data` field with nothing in it",
            [RUN, Raw(b"data\n\n"), *text("m", "x"), FINISH],
            1,
            DecodeError,
            "DecodeError",
            "invalid JSON",
        ),
    ),
    row(
        "binary-garbage-json-line",
        Case(
            "binary garbage in the middle of a JSON-lines stream",
            [RUN, Raw(b"\x89PNG\r\n"), *text("m", "x"), FINISH],
            1,
            FramingError,
            "FramingError",
            "not valid UTF-8",
            fmt="jsonl",
        ),
    ),
    row(
        "ascii-garbage-json-line",
        Case(
            "a line of text that is not JSON in a JSON-lines stream",
            [RUN, Raw(b"<html>502 Bad Gateway</html>\n"), *text("m", "x"), FINISH],
            1,
            DecodeError,
            "DecodeError",
            "invalid JSON",
            fmt="jsonl",
        ),
    ),
    row(
        "binary-garbage-stream",
        Case(
            "a stream that starts with binary garbage: neither SSE nor JSON lines",
            [Raw(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), RUN, FINISH],
            0,
            FramingError,
            "FramingError",
            "cannot tell the stream's format",
            fatal=True,
            oracle=False,
        ),
    ),
    row(
        "cut-mid-frame-sse",
        Case(
            "an SSE stream cut off in the middle of its last frame",
            [RUN, *text("m", "x"), Raw(b'data: {"type":"TEXT_MESSAGE_START","mess')],
            4,
            FramingError,
            "FramingError",
            "truncated inside its last frame",
        ),
    ),
    row(
        "cut-mid-frame-jsonl",
        Case(
            "a JSON-lines stream cut off in the middle of its last line",
            [RUN, *text("m", "x"), Raw(b'{"type":"RUN_FINISHED","threadId":"t","ru')],
            4,
            FramingError,
            "FramingError",
            "truncated inside its last frame",
            fmt="jsonl",
        ),
    ),
    row(
        "frame-over-size-limit",
        Case(
            "an event larger than max_frame_size (here 4 KiB): refused before it is all held",
            [
                RUN,
                *text("m", "x"),
                {"type": "CUSTOM", "name": "big", "value": "x" * 10_000},
                FINISH,
            ],
            4,
            FramingError,
            "FramingError",
            "max_frame_size=4096",
            fatal=True,
            oracle=False,  # the limit here is ours (the reference's is 10 MB)
            options={"max_frame_size": 4096},
        ),
    ),
    row(
        "nested-100000-deep",
        Case(
            "a value nested 100,000 arrays deep (msgspec and Python both have a depth limit)",
            [
                RUN,
                sse_raw(b'{"type":"CUSTOM","name":"n","value":' + nested(100_000) + b"}"),
                FINISH,
            ],
            1,
            DecodeError,
            "DecodeError",
            "nested more than 128 levels deep",
            path="$.value",
            oracle=False,
        ),
    ),
    row(
        "nested-deeper-than-the-limit-in-metadata",
        Case(
            "metadata nested 600 deep: decodable by msgspec, too deep to copy into the store",
            [
                RUN,
                sse_raw(
                    b'{"type":"TEXT_MESSAGE_START","messageId":"m","metadata":{"a":'
                    + nested(600)
                    + b"}}"
                ),
                *text("n", "x"),
                FINISH,
            ],
            1,
            DecodeError,
            "DecodeError",
            "nested more than 128 levels deep",
            path="$.metadata",
            oracle=False,
        ),
    ),
    # -- decoding: frames that are not AG-UI events ------------------------------------------
    row(
        "non-object-frame",
        Case(
            "a frame that is JSON but not an object",
            [RUN, sse_raw(b"[1,2]"), *text("m", "x"), FINISH],
            1,
            DecodeError,
            "DecodeError",
            "not a JSON object (it is an array)",
            path="$",
        ),
    ),
    row(
        "null-frame",
        Case(
            "a frame that is the JSON `null`",
            [RUN, sse_raw(b"null"), FINISH],
            1,
            DecodeError,
            "DecodeError",
            "not a JSON object (it is null)",
            path="$",
        ),
    ),
    row(
        "frame-without-type",
        Case(
            "an object without `type`",
            [RUN, {"messageId": "m", "delta": "x"}, *text("m", "x"), FINISH],
            1,
            DecodeError,
            "DecodeError",
            "no event type",
            path="$.type",
            oracle=False,  # the reference's transport rejects it, its in-memory agents drop it
        ),
    ),
    row(
        "non-string-type",
        Case(
            "an object whose `type` is not a string",
            [RUN, {"type": 7}, FINISH],
            1,
            DecodeError,
            "DecodeError",
            "no event type",
            path="$.type",
            oracle=False,
        ),
    ),
    row(
        "unknown-type",
        Case(
            "an event of a type AG-UI 1.0 does not know: dropped with a warning, as the reference",
            [RUN, {"type": "TEXT_MESSAGE_DELTA", "messageId": "m"}, *text("m", "x"), FINISH],
            1,
            None,
            "unknown-event-type",
            "dropped an event of unknown type",
            path="$.type",
        ),
    ),
    row(
        "unknown-field",
        Case(
            "an unknown property: stripped with a warning, the event kept",
            [RUN, *text("m", "x"), {"type": "CUSTOM", "name": "n", "value": 1, "extra": 2}, FINISH],
            4,
            None,
            "unknown-field",
            "removed unknown property `extra`",
            path="$.extra",
            equivalent=[RUN, *text("m", "x"), {"type": "CUSTOM", "name": "n", "value": 1}, FINISH],
        ),
    ),
    row(
        "missing-required-field",
        Case(
            "TEXT_MESSAGE_CONTENT without its `delta`",
            [RUN, *text("m", "a"), {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"}, FINISH],
            4,
            DecodeError,
            "DecodeError",
            "missing required field `delta`",
            path="$.delta",
            # Without the bad CONTENT, the END before it closed m: the good stream is valid.
        ),
    ),
    row(
        "wrong-field-type",
        Case(
            "a `messageId` that is a number",
            [RUN, {"type": "TEXT_MESSAGE_START", "messageId": 5}, *text("m", "x"), FINISH],
            1,
            DecodeError,
            "DecodeError",
            "Expected `str`, got `int`",
            path="$.messageId",
        ),
    ),
    row(
        "wrong-type-nested",
        Case(
            "a message inside MESSAGES_SNAPSHOT whose `content` is a number",
            [
                RUN,
                *text("m", "x"),
                {
                    "type": "MESSAGES_SNAPSHOT",
                    "messages": [{"id": "u", "role": "user", "content": 1}],
                },
                FINISH,
            ],
            4,
            DecodeError,
            "DecodeError",
            "got `int`",
            path="$.messages[0].content",
        ),
    ),
    row(
        "float-timestamp",
        Case(
            "a timestamp with a fraction (AG-UI timestamps are integers)",
            [RUN, {"type": "CUSTOM", "name": "n", "value": 1, "timestamp": 1.5}, FINISH],
            1,
            DecodeError,
            "DecodeError",
            "Expected `int`, got `float`",
            path="$.timestamp",
        ),
    ),
    row(
        "null-subagent-run-id",
        Case(
            "`subagentRunId: null` (a tag is a string or absent, never null)",
            [
                RUN,
                *text("m", "x"),
                {"type": "CUSTOM", "name": "n", "value": 1, "subagentRunId": None},
            ],
            4,
            DecodeError,
            "DecodeError",
            "got `null`",
            path="$.subagentRunId",
        ),
    ),
    row(
        "metadata-null",
        Case(
            "`metadata: null` on an event (the specification forbids it)",
            [RUN, {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": None}, FINISH],
            1,
            MetadataError,
            "MetadataError",
            "`metadata` must be absent or a JSON object, not null",
            path="$.metadata",
        ),
    ),
    row(
        "metadata-not-an-object",
        Case(
            "`metadata` that is an array (see also the per-carrier test below)",
            [RUN, *text("m", "x"), {"type": "CUSTOM", "name": "n", "value": 1, "metadata": [1]}],
            4,
            MetadataError,
            "MetadataError",
            "not array",
            path="$.metadata",
        ),
    ),
    row(
        "patch-not-an-array",
        Case(
            "a STATE_DELTA whose `delta` is an object, not a JSON Patch array",
            [
                RUN,
                {"type": "STATE_DELTA", "delta": {"op": "add", "path": "/a", "value": 1}},
                FINISH,
            ],
            1,
            DecodeError,
            "DecodeError",
            "Expected `array`, got `object`",
            path="$.delta",
        ),
    ),
    row(
        "invalid-patch-operation",
        Case(
            "a JSON Patch operation with an unknown `op`: removed with a warning, the rest applied",
            [
                RUN,
                {
                    "type": "STATE_DELTA",
                    "delta": [
                        {"op": "merge", "path": "/a", "value": 1},
                        {"op": "add", "path": "/b", "value": 2},
                    ],
                },
                FINISH,
            ],
            1,
            None,
            "unknown-variant",
            'unrecognised `op` "merge"',
            path="$.delta[0]",
            equivalent=[
                RUN,
                {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/b", "value": 2}]},
                FINISH,
            ],
        ),
    ),
    row(
        "failing-state-patch",
        Case(
            "a JSON Patch that cannot apply (replace of a missing path): warned, state unchanged",
            [
                RUN,
                {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}},
                {
                    "type": "STATE_DELTA",
                    "delta": [
                        {"op": "add", "path": "/b", "value": 2},
                        {"op": "replace", "path": "/nope/x", "value": 1},
                    ],
                },
                *text("m", "x"),
                FINISH,
            ],
            2,
            None,
            "patch-failed",
            "Failed to apply state patch",
            path="$.delta[1]",
        ),
    ),
    row(
        "failing-activity-patch",
        Case(
            "an ACTIVITY_DELTA whose `test` fails: warned, content unchanged, metadata still merged",
            [
                RUN,
                ACTIVITY,
                {
                    "type": "ACTIVITY_DELTA",
                    "messageId": "a1",
                    "activityType": "progress",
                    "patch": [{"op": "test", "path": "/n", "value": 2}],
                    "metadata": {"acme.seen": True},
                },
                FINISH,
            ],
            2,
            None,
            "patch-failed",
            "Failed to apply activity patch for 'a1'",
            path="$.patch[0]",
            equivalent=[RUN, {**ACTIVITY, "metadata": {"acme.seen": True}}, FINISH],
        ),
    ),
    # -- order: events the reference's verifier rejects --------------------------------------
    row(
        "first-event-not-run-started",
        Case(
            "a stream whose first event is not RUN_STARTED",
            [{"type": "CUSTOM", "name": "n", "value": 1}, RUN, *text("m", "x"), FINISH],
            0,
            VerifyError,
            "run.first-event",
            "First event must be 'RUN_STARTED'",
        ),
    ),
    row(
        "content-for-unknown-id",
        Case(
            "TEXT_MESSAGE_CONTENT for a message that was never started",
            [
                RUN,
                *text("m", "x"),
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "zz", "delta": "y"},
            ],
            4,
            VerifyError,
            "text.not-open",
            "No active text message found with ID 'zz'",
        ),
    ),
    row(
        "content-for-unknown-id-unverified",
        Case(
            "the same without the verify stage: the reference's reducer warns and skips it",
            [
                RUN,
                *text("m", "x"),
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "zz", "delta": "y"},
            ],
            4,
            None,
            "missing-target",
            "No message found with ID 'zz'",
            path="$.messageId",
            stages="no-verify",
        ),
    ),
    row(
        "args-for-unknown-id",
        Case(
            "TOOL_CALL_ARGS for a tool call that was never started",
            [RUN, *tool("c1", "{}"), {"type": "TOOL_CALL_ARGS", "toolCallId": "c9", "delta": "{"}],
            4,
            VerifyError,
            "tool-call.not-open",
            "No active tool call found with ID 'c9'",
        ),
    ),
    row(
        "end-for-unknown-id",
        Case(
            "TEXT_MESSAGE_END for a message that is not open",
            [RUN, *text("m", "x"), {"type": "TEXT_MESSAGE_END", "messageId": "m"}, FINISH],
            4,
            VerifyError,
            "text.not-open",
            "No active text message found with ID 'm'",
        ),
    ),
    row(
        "duplicate-start",
        Case(
            "TEXT_MESSAGE_START for a message already open",
            [
                RUN,
                {"type": "TEXT_MESSAGE_START", "messageId": "m"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a"},
                {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"acme.n": 1}},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "b"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m"},
                FINISH,
            ],
            3,
            VerifyError,
            "text.already-open",
            "already in progress",
        ),
    ),
    row(
        "duplicate-tool-call-start",
        Case(
            "TOOL_CALL_START for a tool call already open",
            [
                RUN,
                {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
                {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "g"},
                {"type": "TOOL_CALL_END", "toolCallId": "c1"},
                FINISH,
            ],
            2,
            VerifyError,
            "tool-call.already-open",
            "already in progress",
        ),
    ),
    row(
        "event-after-run-finished",
        Case(
            "an event after RUN_FINISHED (only RUN_STARTED or RUN_ERROR may follow)",
            [RUN, *text("m", "x"), FINISH, {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}}],
            5,
            VerifyError,
            "run.after-finished",
            "The run has already finished",
        ),
    ),
    row(
        "run-finished-with-open-items",
        Case(
            "RUN_FINISHED while a text message and a tool call are still open",
            [
                RUN,
                {"type": "TEXT_MESSAGE_START", "messageId": "m"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"},
                {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
                FINISH,
                {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            ],
            4,
            VerifyError,
            "run.finished-open-text-messages",
            "while text messages are still active: m",
        ),
    ),
    # -- chunks: shorthand that cannot be expanded -------------------------------------------
    row(
        "chunk-without-id",
        Case(
            "a TEXT_MESSAGE_CHUNK that opens a stream without a messageId",
            [RUN, {"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}, *text("m", "y"), FINISH],
            1,
            ChunkError,
            "ChunkError",
            "First TEXT_MESSAGE_CHUNK must have a messageId",
            path="$.messageId",
        ),
    ),
    row(
        "tool-chunk-without-name",
        Case(
            "a TOOL_CALL_CHUNK that opens a stream without a toolCallName",
            [RUN, {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "delta": "{}"}, FINISH],
            1,
            ChunkError,
            "ChunkError",
            "must have a toolCallName",
            path="$.toolCallName",
        ),
    ),
    row(
        "ambiguous-chunk-lanes",
        Case(
            "an id-less, untagged chunk while two subagent lanes have a text message open",
            [
                RUN,
                {
                    "type": "TEXT_MESSAGE_CHUNK",
                    "messageId": "a",
                    "subagentRunId": "s1",
                    "delta": "x",
                },
                {
                    "type": "TEXT_MESSAGE_CHUNK",
                    "messageId": "b",
                    "subagentRunId": "s2",
                    "delta": "y",
                },
                {"type": "TEXT_MESSAGE_CHUNK", "delta": "z"},
                {"type": "TEXT_MESSAGE_CHUNK", "subagentRunId": "s1", "delta": "!"},
                FINISH,
            ],
            3,
            ChunkError,
            "ChunkError",
            "Ambiguous TEXT_MESSAGE_CHUNK",
        ),
    ),
    row(
        "chunk-in-the-wrong-lane",
        Case(
            "a chunk naming an open message but another subagent's lane",
            [
                RUN,
                {
                    "type": "TEXT_MESSAGE_CHUNK",
                    "messageId": "a",
                    "subagentRunId": "s1",
                    "delta": "x",
                },
                {
                    "type": "TEXT_MESSAGE_CHUNK",
                    "messageId": "a",
                    "subagentRunId": "s2",
                    "delta": "y",
                },
                FINISH,
            ],
            2,
            ChunkError,
            "ChunkError",
            "does not match the open stream's subagent 's1'",
            path="$.subagentRunId",
        ),
    ),
    row(
        "raw-chunk-reaching-accumulate",
        Case(
            "a *_CHUNK event applied without the expand_chunks stage (the reference throws too)",
            [RUN, {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "x"}, *text("n", "y")],
            1,
            ApplyError,
            "ApplyError",
            "TEXT_MESSAGE_CHUNK must be transformed before being applied",
            stages="no-chunks",
            oracle=False,  # the reference always expands chunks
        ),
    ),
]


# ---------------------------------------------------------------------------------------------
# Running a case


@dataclass
class Outcome:
    error: BaseException | None
    reports: list[Report]
    store: agui_meta.Store
    outputs: int

    def result(self) -> dict[str, Any]:
        """The store as a conformance result line (what the reference would hold)."""
        return {"messages": self.store.messages_wire(), "state": self.store.state}


def stages_for(kind: str, store: agui_meta.Store) -> tuple[Any, ...]:
    if kind == "no-verify":
        return (ExpandChunks(), Accumulate(store))
    if kind == "no-chunks":
        return (Verify(), Accumulate(store))
    return (ExpandChunks(), Verify(), Accumulate(store))


async def run(
    source: Any,
    *,
    mode: agui_meta.Mode = "default",
    stages: str = "default",
    **options: Any,
) -> Outcome:
    store = agui_meta.Store()
    reports: list[Report] = []
    outputs = 0
    error: BaseException | None = None
    try:
        async with agui_meta.wrap(
            source, *stages_for(stages, store), mode=mode, on_report=reports.append, **options
        ) as stream:
            async for _ in stream:
                outputs += 1
    except Exception as exc:  # noqa: BLE001 - each test asserts what it allows
        error = exc
    return Outcome(error, reports, store, outputs)


async def run_case(case: Case, mode: agui_meta.Mode) -> Outcome:
    return await run([case.data()], mode=mode, stages=case.stages, **case.options)


async def run_events(events: list[Event], stages: str = "default") -> Outcome:
    """The good stream, as dicts, in default mode: it must run without a problem."""
    outcome = await run(events, stages=stages)
    assert outcome.error is None, outcome.error
    return outcome


def assert_where(case: Case, where: DataError | Report) -> None:
    """``where`` names the bad entry: its index, path, byte offset and line."""
    assert where.index == case.bad
    assert where.path == case.path
    assert (where.offset, where.line) == (case.offset(), case.line())
    text = str(where)
    assert f"event {case.bad}" in text
    assert f"byte {case.offset()}" in text and f"line {case.line()}" in text
    if case.path is not None:
        assert f"`{case.path}`" in text
    assert case.what in text


def test_the_catalogue_has_at_least_30_kinds() -> None:
    assert len(CATALOGUE) >= 30
    assert len({p.id for p in CATALOGUE}) == len(CATALOGUE)


# ---------------------------------------------------------------------------------------------
# The three modes


@pytest.mark.parametrize("case", CATALOGUE)
async def test_default_mode_gives_the_package_error_with_its_location(case: Case) -> None:
    outcome = await run_case(case, "default")
    if case.error is None:
        assert outcome.error is None
        [report] = [r for r in outcome.reports if r.code == case.code]
        assert report.severity == "warning"
        assert_where(case, report)
        return
    error = outcome.error
    assert type(error) is case.error, repr(error)
    # The package's own error, raised on purpose: not a crash from deep inside.
    assert isinstance(error, AguiMetaError)
    assert type(error).__module__ == "agui_meta"
    assert_where(case, error)
    if isinstance(error, VerifyError):
        assert error.rule == case.code
    # What the entries before the bad one built is in the store.
    if not case.fatal:
        before = await run_events(case.before(), case.stages)
        assert outcome.result() == before.result()


@pytest.mark.parametrize("case", CATALOGUE)
async def test_keep_going_reports_the_problem_and_loses_nothing_else(case: Case) -> None:
    outcome = await run_case(case, "keep_going")
    if case.fatal:
        assert type(outcome.error) is case.error
        assert_where(case, outcome.error)
        expected = await run_events(case.before(), case.stages)
    else:
        assert outcome.error is None, repr(outcome.error)
        if case.error is None:
            [report] = [r for r in outcome.reports if r.code == case.code]
            assert report.severity == "warning"
        else:
            [report] = [r for r in outcome.reports if r.severity == "error"]
            assert report.code == case.code
        assert_where(case, report)
        expected = await run_events(case.good(), case.stages)
    assert outcome.result() == expected.result()


@pytest.mark.parametrize("case", CATALOGUE)
async def test_strict_mode_stops_at_the_first_problem(case: Case) -> None:
    outcome = await run_case(case, "strict")
    error = outcome.error
    if case.error is None:
        assert isinstance(error, StrictError)
        assert error.report.code == case.code
    else:
        assert type(error) is case.error
    assert isinstance(error, DataError)
    assert_where(case, error)
    assert outcome.reports == []  # nothing before it was a problem


@pytest.mark.parametrize("case", [c for c in CATALOGUE if c.values[0].oracle])
def test_the_reference_agrees(case: Case, oracle: OracleServer) -> None:
    """The reference fails on the bad events where we raise, and builds what keep-going keeps."""
    events = [e for e in case.entries if not isinstance(e, Raw)]
    bad = {"name": "bad", "events": events}
    result = oracle.run_one(bad, verify=case.stages != "no-verify")
    if case.error is None or any(isinstance(e, Raw) for e in case.entries):
        assert "error" not in result, result
    else:
        assert "error" in result, result
    good = {"name": "good", "events": case.good()}
    expected = oracle.run_one(good, verify=case.stages != "no-verify")
    store = agui_meta.Store()
    agui_meta.run_sync(
        [agui_meta.Enforce(), *stages_for(case.stages, store)],
        [dumps(e) for e in case.good()],
        on_report=lambda r: None,
    )
    assert_same_result({"messages": store.messages_wire(), "state": store.state}, expected, good)


async def test_strict_mode_stops_at_the_first_of_several_problems() -> None:
    entries: list[Entry] = [
        RUN,
        {"type": "CUSTOM", "name": "n", "value": 1, "extra": True},  # a warning (stripped)
        *text("m", "x"),
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},  # an error
        {"type": "FOO"},  # a warning (dropped)
        FINISH,
    ]
    data = render(entries, "sse")[0]
    strict = await run([data], mode="strict")
    assert isinstance(strict.error, StrictError) and strict.error.index == 1
    default = await run([data])
    assert isinstance(default.error, VerifyError) and default.error.index == 5
    assert [r.index for r in default.reports] == [1]
    keep = await run([data], mode="keep_going")
    assert keep.error is None
    assert [(r.index, r.severity) for r in keep.reports] == [
        (1, "warning"),
        (5, "error"),
        (6, "warning"),
    ]


# ---------------------------------------------------------------------------------------------
# `metadata` null or not an object, at every carrier

CARRIERS: list[tuple[str, Event, str]] = [
    ("event", {"type": "CUSTOM", "name": "n", "value": 1}, "$.metadata"),
    ("event-without-destination", dict(RUN), "$.metadata"),
    *(
        (
            f"{role}-message",
            {"type": "MESSAGES_SNAPSHOT", "messages": [message]},
            "$.messages[0].metadata",
        )
        for role, message in [
            ("user", {"id": "u", "role": "user", "content": "hi"}),
            ("assistant", {"id": "a", "role": "assistant", "content": "hi"}),
            ("system", {"id": "s", "role": "system", "content": "be brief"}),
            ("developer", {"id": "d", "role": "developer", "content": "be brief"}),
            ("tool", {"id": "t", "role": "tool", "content": "ok", "toolCallId": "c"}),
            (
                "activity",
                {"id": "x", "role": "activity", "activityType": "p", "content": {"n": 1}},
            ),
            ("reasoning", {"id": "r", "role": "reasoning", "content": "hmm"}),
        ]
    ),
    (
        "tool-call",
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [
                {
                    "id": "a",
                    "role": "assistant",
                    "toolCalls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}
                    ],
                }
            ],
        },
        "$.messages[0].toolCalls[0].metadata",
    ),
    (
        "input-message",
        {
            **RUN,
            "input": {
                "threadId": "t",
                "runId": "r",
                "messages": [{"id": "u", "role": "user", "content": "x"}],
            },
        },
        "$.input.messages[0].metadata",
    ),
    (
        "tool",
        {
            **RUN,
            "input": {
                "threadId": "t",
                "runId": "r",
                "messages": [],
                "tools": [{"name": "f", "description": "d"}],
            },
        },
        "$.input.tools[0].metadata",
    ),
    (
        "resume-entry",
        {
            **RUN,
            "input": {
                "threadId": "t",
                "runId": "r",
                "messages": [],
                "resume": [{"interruptId": "i", "status": "resolved"}],
            },
        },
        "$.input.resume[0].metadata",
    ),
    (
        "interrupt",
        {
            **FINISH,
            "outcome": {"type": "interrupt", "interrupts": [{"id": "i", "reason": "confirm"}]},
        },
        "$.outcome.interrupts[0].metadata",
    ),
]


def _with_metadata(event: Event, path: str, value: Any) -> Event:
    """A deep copy of ``event`` with ``value`` at ``path`` (a path ending in ``.metadata``)."""
    event = json.loads(json.dumps(event))
    target: Any = event
    for part in path[2:].replace("[", ".").replace("]", "").split(".")[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    target["metadata"] = value
    return event


@pytest.mark.parametrize(
    "value", [None, [], "x", 1, True], ids=["null", "array", "string", "number", "boolean"]
)
@pytest.mark.parametrize(("carrier", "event", "path"), CARRIERS, ids=[c[0] for c in CARRIERS])
async def test_metadata_null_or_not_an_object_at_every_carrier(
    carrier: str, event: Event, path: str, value: Any
) -> None:
    bad = _with_metadata(event, path, value)
    if bad["type"] == "RUN_STARTED":  # a second run: skipping it leaves the first one whole
        entries: list[Entry] = [RUN, *text("m", "x"), FINISH, bad]
        index = 5
    elif bad["type"] == "RUN_FINISHED":
        entries = [RUN, *text("m", "x"), bad]
        index = 4
    else:
        entries = [RUN, *text("m", "x"), bad, FINISH]
        index = 4
    data, starts = render(entries, "sse")
    outcome = await run([data])
    error = outcome.error
    assert type(error) is MetadataError, repr(error)
    assert (error.index, error.offset, error.path) == (index, starts[index], path)
    assert "`metadata` must be absent or a JSON object" in str(error)
    keep = await run([data], mode="keep_going")
    assert keep.error is None
    [report] = keep.reports
    assert (report.code, report.index, report.offset, report.path) == (
        "MetadataError",
        index,
        starts[index],
        path,
    )
    # The good events are all kept.
    assert keep.store.messages_wire() == [{"id": "m", "role": "assistant", "content": "x"}]


# ---------------------------------------------------------------------------------------------
# Depth and size: clean errors, bounded memory


@pytest.mark.parametrize("depth", [MAX_NESTING, 300, 600, 950, 5_000, 100_000])
@pytest.mark.parametrize(
    ("template", "path"),
    [
        (b'{"type":"CUSTOM","name":"n","value":%s}', "$.value"),
        (b'{"type":"TEXT_MESSAGE_START","messageId":"m","metadata":{"a":%s}}', "$.metadata"),
        (b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"","rawEvent":%s}', "$.rawEvent"),
        (b'{"type":"STATE_SNAPSHOT","snapshot":%s}', "$.snapshot"),
        (b'{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":%s}]}', "$.delta"),
        (b'{"type":"RAW","event":%s,"unknown":1}', "$.event"),  # the slow path
        (b'{"type":"RUN_FINISHED","threadId":"t","runId":"r","metadata":{"a":%s}}', "$.metadata"),
    ],
    ids=["custom", "metadata", "content-raw-event", "state", "patch", "slow-path", "run-metadata"],
)
async def test_values_nested_too_deeply_give_a_clean_error(
    template: bytes, path: str, depth: int
) -> None:
    """Deeper than MAX_NESTING: a DecodeError naming the member, never a RecursionError.

    msgspec alone would decode up to Python's recursion limit (less the stack in use), and
    values just under it would then break whatever recurses over them next: copying metadata
    into the store, comparing in a patch, encoding the ledger, the caller's own code.
    """
    frame = template.replace(b"%s", nested(depth))
    data = render([RUN, sse_raw(frame), FINISH], "sse")[0]
    for mode in ("default", "keep_going"):
        store = agui_meta.Store()
        led = agui_meta.Ledger()
        reports: list[Report] = []
        error: BaseException | None = None
        try:
            async with agui_meta.wrap(
                [data],
                ExpandChunks(),
                Verify(),
                Accumulate(store),
                led,
                mode=mode,
                on_report=reports.append,
            ) as stream:
                await stream.drain()
        except Exception as exc:  # noqa: BLE001 - asserted below
            error = exc
        if mode == "default":
            problem: DataError | Report | None = error  # type: ignore[assignment]
        else:
            assert error is None
            [problem] = [r for r in reports if r.severity == "error"]
        assert isinstance(problem, (DecodeError, Report)), repr(problem)
        assert (problem.index, problem.path, problem.offset) == (1, path, data.index(frame) - 6)
        assert f"nested more than {MAX_NESTING} levels deep" in str(problem)
        # Whatever got in can be read back out, copied and encoded.
        assert json.loads(json.dumps(store.messages_wire())) == []
        led.to_json()


@pytest.mark.parametrize("depth", [MAX_NESTING - 2, MAX_NESTING - 1])
async def test_values_nested_up_to_the_limit_are_accepted_and_usable(depth: int) -> None:
    # The event object is level 1 and the metadata object level 2: `a` adds `depth` levels.
    frame = b'{"type":"TEXT_MESSAGE_START","messageId":"m","metadata":{"a":%s}}'.replace(
        b"%s", nested(depth)
    )
    outcome = await run([render([RUN, sse_raw(frame)], "sse")[0]], mode="strict")
    if depth + 2 > MAX_NESTING:
        assert isinstance(outcome.error, DecodeError)
        return
    assert outcome.error is None
    [message] = outcome.store.messages_wire()
    assert json.dumps(message["metadata"]["a"]).count("[") == depth
    assert (
        agui_meta.events.encode_event(
            agui_meta.events.TextMessageStartEvent(message_id="m", metadata=message["metadata"])
        ).count(b"[")
        == depth
    )


async def test_state_grown_too_deep_by_patches_fails_the_patch_not_the_stream() -> None:
    # Each delta adds 100 levels below the deepest point: no single event is too deep, the
    # state would be.
    def level(n: int) -> Any:
        value: Any = []
        for _ in range(n - 1):
            value = [value]
        return value

    events: list[Event] = [RUN, {"type": "STATE_SNAPSHOT", "snapshot": {"a": level(100)}}]
    path = "/a"
    for _ in range(9):
        events.append(
            {
                "type": "STATE_DELTA",
                "delta": [{"op": "add", "path": path + "/0" * 99 + "/-", "value": level(100)}],
            }
        )
        path += "/0" * 100
    events += [
        {"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "/a", "path": "/b"}]},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/c", "value": 1}]},
        FINISH,
    ]
    outcome = await run([render(events, "sse")[0]])
    assert outcome.error is None
    # The first delta would take the state past 127 levels (what a STATE_SNAPSHOT can carry):
    # it fails, the later deltas find no path, and the state stays one that can be sent again.
    reports = outcome.reports
    assert [(r.code, r.index, r.path) for r in reports] == [
        ("patch-failed", i, "$.delta[0]") for i in range(2, 11)
    ]
    assert "would nest the document more than 127 levels deep" in reports[0].message
    assert outcome.store.state["c"] == 1 and outcome.store.state["b"] == outcome.store.state["a"]


async def test_an_oversized_frame_is_refused_in_bounded_memory() -> None:
    """A 64 MiB event arriving in 64 KiB reads: refused after about max_frame_size bytes."""
    limit = 256 * 1024
    head = render([RUN], "sse")[0] + b'data: {"type":"CUSTOM","name":"big","value":"'
    pulled = 0

    async def source() -> AsyncIterator[bytes]:
        nonlocal pulled
        yield head
        for _ in range(1024):
            pulled += 1
            yield b"x" * 65536

    tracemalloc.start()
    try:
        outcome = await run(source(), max_frame_size=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    error = outcome.error
    assert isinstance(error, FramingError)
    assert (error.index, error.offset, error.line) == (1, head.rindex(b"data: {"), 3)
    assert f"max_frame_size={limit}" in str(error)
    assert pulled <= limit // 65536 + 2  # the stream was abandoned as soon as it was too big
    assert peak < 8 * limit


# ---------------------------------------------------------------------------------------------
# Valid but unusual: must just work

HELLO = [
    RUN,
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"acme.model": "x"}},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hé"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": ""},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "llo"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"acme.tokens": 3}},
    FINISH,
]
#: What the specification says HELLO builds: the deltas joined, the metadata merged key by key.
HELLO_MESSAGES = [
    {
        "id": "m",
        "role": "assistant",
        "content": "Héllo",
        "metadata": {"acme.model": "x", "acme.tokens": 3},
    }
]


def _sse_lines(event: Event, *, eol: bytes = b"\n") -> bytes:
    return b"data: " + dumps(event) + eol + eol


def _hello_sse(eol: bytes = b"\n") -> bytes:
    return b"".join(_sse_lines(e, eol=eol) for e in HELLO)


def _hello_jsonl(eol: bytes = b"\n") -> bytes:
    return b"".join(dumps(e) + eol for e in HELLO)


def _multiline(event: Event) -> bytes:
    # The JSON pretty-printed over several `data:` lines (SSE joins them with LF).
    text = json.dumps(event, indent=1, ensure_ascii=False).encode()
    return b"".join(b"data:" + line + b"\n" for line in text.split(b"\n")) + b"\n"


UNUSUAL = [
    pytest.param(_hello_sse(), id="plain-sse"),
    pytest.param(_hello_jsonl(), id="plain-jsonl"),
    pytest.param(b"".join(_multiline(e) for e in HELLO), id="multi-line-data"),
    pytest.param(_hello_sse(b"\r\n"), id="sse-crlf"),
    pytest.param(_hello_sse(b"\r"), id="sse-cr"),
    pytest.param(_hello_jsonl(b"\r\n"), id="jsonl-crlf"),
    pytest.param(b"\xef\xbb\xbf" + _hello_sse(), id="sse-bom"),
    pytest.param(b"\xef\xbb\xbf" + _hello_jsonl(), id="jsonl-bom"),
    pytest.param(
        b": welcome\n\n"
        + b"".join(b":keep-alive\n\n" + _sse_lines(e) + b":\n" for e in HELLO)
        + b": bye\n",
        id="comments-and-keep-alives",
    ),
    pytest.param(
        b"".join(
            b"event: message\nid: " + str(i).encode() + b"\nretry: 1000\n" + _sse_lines(e)
            for i, e in enumerate(HELLO)
        ),
        id="sse-event-id-retry-fields",
    ),
    pytest.param(b"".join(b"data:" + dumps(e) + b"\n\n" for e in HELLO), id="data-without-space"),
    pytest.param(
        b"\n\n" + b"".join(dumps(e) + b"\n\n   \n" for e in HELLO), id="jsonl-blank-lines"
    ),
    pytest.param(_hello_sse()[:-2], id="sse-last-frame-unterminated"),
    pytest.param(_hello_jsonl()[:-1], id="jsonl-last-line-unterminated"),
]

#: A line that is no SSE field: ignored as the standard says, and reported (what it carried is
#: not part of any event, as with a misspelt ``DATA:``).
NON_FIELD = (
    _sse_lines(HELLO[0])
    + b"\x89garbage line, not a field\n\n"
    + _hello_sse()[len(_sse_lines(HELLO[0])) :]
)


def _chunkings(data: bytes) -> Iterator[list[bytes]]:
    yield [data]
    yield [data[i : i + 1] for i in range(len(data))]  # byte by byte: splits CRLF, BOM, UTF-8
    yield [data[i : i + 7] for i in range(0, len(data), 7)]


async def test_a_line_that_is_no_sse_field_is_ignored_with_a_report() -> None:
    at = len(_sse_lines(HELLO[0]))
    for chunks in _chunkings(NON_FIELD):
        outcome = await run(chunks)
        assert outcome.error is None, repr(outcome.error)
        [report] = outcome.reports
        assert (report.code, report.severity, report.offset, report.index) == (
            "sse-unknown-field",
            "warning",
            at,
            1,
        )
        assert report.line == NON_FIELD[:at].count(b"\n") + 1
        assert outcome.store.messages_wire() == HELLO_MESSAGES
        strict = await run(chunks, mode="strict")
        assert isinstance(strict.error, StrictError)


@pytest.mark.parametrize("data", UNUSUAL)
async def test_valid_but_unusual_streams_just_work(data: bytes) -> None:
    for chunks in _chunkings(data):
        for mode in ("default", "strict"):
            outcome = await run(chunks, mode=mode)
            assert outcome.error is None, repr(outcome.error)
            assert outcome.reports == []
            assert outcome.store.messages_wire() == HELLO_MESSAGES
            assert outcome.store.state == {}


async def test_an_empty_stream_works() -> None:
    for source in ([], [b""], [b"", b""], [b"\n\n\n"], ["   \r\n"]):
        outcome = await run(source, mode="strict")
        assert outcome.error is None
        assert (outcome.outputs, outcome.reports) == (0, [])
        assert outcome.store.messages_wire() == [] and outcome.store.state == {}


async def test_a_tool_result_for_an_unknown_call_is_appended_as_the_reference_does() -> None:
    # The reference neither warns nor fails: with no assistant message owning the call, the
    # tool message goes at the end (apply/default.ts, TOOL_CALL_RESULT).
    events = [RUN, *text("m", "x"), {**CALL_RESULT, "toolCallId": "nope"}, FINISH]
    outcome = await run([render(events, "sse")[0]], mode="strict")
    assert outcome.error is None and outcome.reports == []
    assert outcome.store.messages_wire() == [
        {"id": "m", "role": "assistant", "content": "x"},
        {"id": "t1", "role": "tool", "content": "ok", "toolCallId": "nope"},
    ]


@pytest.mark.parametrize("prefetch", [0, 1, 3])
async def test_the_index_is_right_behind_an_async_stage_with_prefetch(prefetch: int) -> None:
    """With prefetch the source's side works ahead; an error past an async stage still names
    the event it is about, not the one the prefetch task reached."""
    entries: list[Entry] = [
        RUN,
        *({"type": "CUSTOM", "name": str(i), "value": i} for i in range(4)),
        {"type": "TEXT_MESSAGE_END", "messageId": "zz"},  # event 5: not open
        *({"type": "CUSTOM", "name": "later", "value": i} for i in range(10)),
    ]
    data, starts = render(entries, "jsonl")
    chunks = [data[a:b] for a, b in zip(starts, [*starts[1:], len(data)], strict=True)]

    async def passthrough(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for event in events:
            yield event

    for mode in ("default", "keep_going"):
        reports: list[Report] = []
        error: DataError | None = None
        try:
            async with agui_meta.wrap(
                chunks,
                passthrough,
                ExpandChunks(),
                Verify(),
                Accumulate(agui_meta.Store()),
                mode=mode,
                prefetch=prefetch,
                on_report=reports.append,
            ) as stream:
                async for _ in stream:
                    for _ in range(3):  # let the prefetch task run as far ahead as it can
                        await anyio.lowlevel.checkpoint()
        except DataError as exc:
            error = exc
        [problem] = [error] if mode == "default" else reports
        assert problem is not None and problem.index == 5, (mode, problem)
