"""The decoding policy, as the reference client 1.0.0 enforces it.

Expected values come from the reference's source: client/src/enforce/{enforce,strip}.ts (unknown
types dropped, unknown material stripped with its path, malformed known fields fatal),
client/src/middleware/{compatibility-boundary,legacy-content}.ts (legacy nulls, binary parts,
THINKING_* translation), client/src/transform/http.ts (frames that are not objects or carry no
type) and core/src/generated/schemas.ts (what each field admits).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET

import agui_meta
from agui_meta import (
    AguiWarning,
    DataError,
    DecodeError,
    Enforce,
    EventDecoder,
    FramingError,
    MetadataError,
    Report,
    StrictError,
    run_sync,
)
from agui_meta._framing import Frame
from agui_meta.events import decode_event, encode_event
from tests.test_events import ALL_CASES

# ---------------------------------------------------------------------------------------------
# helpers


def decode_all(
    events: list[Any], *, mode: Any = "default"
) -> tuple[list[dict[str, Any] | None], list[Report]]:
    """Decode a stream with one decoder; the events as wire JSON (None when dropped), reports."""
    reports: list[Report] = []
    decoder = EventDecoder()
    ctx = agui_meta.Context(mode, reports.append)  # as in a pipeline: the context's index
    out: list[dict[str, Any] | None] = []
    for index, event in enumerate(events):
        data = json.dumps(event).encode() if isinstance(event, dict) else event
        ctx.index = index
        decoded = decoder.decode(data, ctx)
        out.append(None if decoded is None else json.loads(encode_event(decoded)))
    return out, reports


def decode_one(event: dict[str, Any]) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
    """Decode one event from bytes and from a dict (same result): wire JSON and (code, path)s."""
    results = []
    for data in (json.dumps(event).encode(), event):
        reports: list[Report] = []
        decoded = EventDecoder(on_report=reports.append).decode(data)
        wire = None if decoded is None else json.loads(encode_event(decoded))
        results.append((wire, [(r.code, r.path or "") for r in reports]))
    assert results[0] == results[1]
    return results[0]


def error_of(event: Any) -> DataError:
    """The error decoding ``event`` raises (from bytes and from a dict: the same path)."""
    errors = []
    inputs = [json.dumps(event).encode(), event] if isinstance(event, dict) else [event]
    for data in inputs:
        with pytest.raises(DataError) as info:
            EventDecoder(on_report=lambda r: None).decode(data)
        errors.append(info.value)
    assert len({(type(e), e.path) for e in errors}) == 1, errors
    return errors[0]


RUN = {"threadId": "t", "runId": "r"}
CALL: dict[str, Any] = {"id": "tc", "type": "function", "function": {"name": "f", "arguments": ""}}


def snapshot(*messages: Any) -> dict[str, Any]:
    return {"type": "MESSAGES_SNAPSHOT", "messages": list(messages)}


def run_started(**run_input: Any) -> dict[str, Any]:
    return {"type": "RUN_STARTED", **RUN, "input": {**RUN, "messages": [], **run_input}}


# ---------------------------------------------------------------------------------------------
# Unknown properties: removed and reported with the JSON path


def test_unknown_properties_are_removed_with_their_paths() -> None:
    event = snapshot(
        {"id": "u", "role": "user", "content": "x", "foo": 1},
        {
            "id": "a",
            "role": "assistant",
            "toolCalls": [{**CALL, "foo": {"deep": 1}, "function": {**CALL["function"], "z": 0}}],
        },
    )
    event["toString"] = 1
    wire, reports = decode_one(event)
    assert wire == snapshot(
        {"id": "u", "role": "user", "content": "x"},
        {"id": "a", "role": "assistant", "toolCalls": [CALL]},
    )
    assert reports == [
        ("unknown-field", "$.messages[0].foo"),
        ("unknown-field", "$.messages[1].toolCalls[0].function.z"),  # in document order
        ("unknown-field", "$.messages[1].toolCalls[0].foo"),
        ("unknown-field", "$.toString"),
    ]


def test_a_report_says_where_and_what() -> None:
    reports: list[Report] = []
    decoder = EventDecoder(on_report=reports.append)
    frame = Frame(b'{"type":"TEXT_MESSAGE_END","messageId":"m","a b":1}', offset=120, line=7)
    events = list(decoder.decode_iter([b'{"type":"TEXT_MESSAGE_END","messageId":"m"}', frame]))
    assert events == [agui_meta.events.TextMessageEndEvent(message_id="m")] * 2
    (report,) = reports
    assert report.code == "unknown-field"
    assert report.severity == "warning"
    assert (report.index, report.offset, report.line) == (1, 120, 7)
    assert report.path == '$["a b"]'
    assert report.event_type == "TEXT_MESSAGE_END"
    assert "a b" in report.message and "TEXT_MESSAGE_END" in report.message
    assert str(report).startswith("[unknown-field] ")


def test_without_a_callback_reports_are_warnings() -> None:
    with pytest.warns(AguiWarning, match=r"unknown property `extra`"):
        event = decode_event(b'{"type":"TEXT_MESSAGE_END","messageId":"m","extra":1}')
    assert event == agui_meta.events.TextMessageEndEvent(message_id="m")


def test_strict_mode_turns_a_report_into_an_error() -> None:
    decoder = EventDecoder(mode="strict")
    with pytest.raises(StrictError) as info:
        list(decoder.decode_iter([b'{"type":"TEXT_MESSAGE_END","messageId":"m","extra":1}']))
    assert info.value.report.code == "unknown-field"
    assert info.value.path == "$.extra"
    assert info.value.index == 0


def test_subagent_run_id_is_stripped_where_the_protocol_has_none() -> None:
    # RUN_STARTED, RUN_FINISHED, RUN_ERROR, MESSAGES_SNAPSHOT and ToolCall carry no attribution.
    tag = {"subagentRunId": "s"}
    for event in (
        {"type": "RUN_STARTED", **RUN},
        {"type": "RUN_FINISHED", **RUN},
        {"type": "RUN_ERROR", "message": "m"},
        snapshot(),
    ):
        assert decode_one({**event, **tag}) == (event, [("unknown-field", "$.subagentRunId")])
    assistant = {"id": "a", "role": "assistant", "toolCalls": [CALL]}
    wire, reports = decode_one(snapshot({**assistant, "toolCalls": [{**CALL, **tag}]}))
    assert wire == snapshot(assistant)
    assert reports == [("unknown-field", "$.messages[0].toolCalls[0].subagentRunId")]
    # ... but it is kept on the attributable events and on messages
    kept = snapshot({"id": "u", "role": "user", "content": "x", **tag})
    assert decode_one(kept) == (kept, [])
    kept = {"type": "TEXT_MESSAGE_END", "messageId": "m", **tag}
    assert decode_one(kept) == (kept, [])


def test_opaque_positions_pass_through_whole() -> None:
    odd = {"zz": 1, "__proto__": None, "nested": {"unknown": [1]}}
    event = run_started(
        state=odd,
        forwardedProps=odd,
        tools=[{"name": "f", "description": "d", "parameters": odd, "metadata": odd}],
        resume=[{"interruptId": "i", "status": "resolved", "payload": odd, "metadata": odd}],
        messages=[
            {
                "id": "u",
                "role": "user",
                "content": [{"type": "text", "text": "t", "metadata": odd}],
                "metadata": odd,
            },
            {"id": "a", "role": "activity", "activityType": "x", "content": odd},
        ],
    )
    event.update(rawEvent=odd, metadata=odd)
    assert decode_one(event) == (event, [])
    for other in (
        {"type": "STATE_SNAPSHOT", "snapshot": odd},
        {"type": "RAW", "event": odd},
        {"type": "CUSTOM", "name": "n", "value": odd},
        {"type": "RUN_FINISHED", **RUN, "result": odd},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "a", "content": odd},
        {
            "type": "RUN_FINISHED",
            **RUN,
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": "i", "reason": "r", "responseSchema": odd}],
            },
        },
    ):
        assert decode_one(other) == (other, [])


# ---------------------------------------------------------------------------------------------
# Unrecognised union members: an element is removed, an optional key removed, a required key
# drops its containing object


def test_unknown_or_missing_roles_remove_the_message() -> None:
    keep = {"id": "c", "role": "user", "content": "x"}
    wire, reports = decode_one(
        snapshot(
            {"id": "a", "role": "bot", "content": "x"},
            {"id": "b", "content": "x"},
            keep,
            {"id": "d", "role": ["assistant"]},
        )
    )
    assert wire == snapshot(keep)
    assert reports == [
        ("unknown-variant", "$.messages[0]"),
        ("unknown-variant", "$.messages[1]"),
        ("unknown-variant", "$.messages[3]"),
    ]


def test_a_removed_element_takes_its_inner_reports_with_it() -> None:
    # strip.ts truncates what the descent named when the element goes whole.
    wire, reports = decode_one(
        snapshot({"id": "a", "role": "bot", "foo": 1, "toolCalls": [{**CALL, "x": 1}]})
    )
    assert wire == snapshot()
    assert reports == [("unknown-variant", "$.messages[0]")]


def test_unknown_part_and_source_types() -> None:
    text = {"type": "text", "text": "t"}
    event = {
        "type": "TOOL_CALL_RESULT",
        "messageId": "m",
        "toolCallId": "tc",
        "content": [
            {"type": "weird", "text": "t"},
            text,
            # the source is required: an unknown source kind removes the whole part
            {"type": "image", "source": {"type": "blob", "value": "x"}, "extra": 1},
            {"type": "audio", "source": {"value": "x"}},
            {"type": "video", "source": {"type": "url", "value": "v", "extra": 1}},
        ],
    }
    wire, reports = decode_one(event)
    assert wire is not None
    assert wire["content"] == [text, {"type": "video", "source": {"type": "url", "value": "v"}}]
    assert reports == [
        ("unknown-variant", "$.content[0]"),
        ("unknown-variant", "$.content[2]"),
        ("unknown-variant", "$.content[3]"),
        ("unknown-field", "$.content[4].source.extra"),
    ]


def test_unknown_outcome_types_remove_the_outcome() -> None:
    # An outcome nobody recognises is stripped, so the run reads as success.
    wire, reports = decode_one({"type": "RUN_FINISHED", **RUN, "outcome": {"type": "paused"}})
    assert wire == {"type": "RUN_FINISHED", **RUN}
    assert reports == [("unknown-variant", "$.outcome")]
    wire, reports = decode_one(
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"interruptIds": []}}
    )
    assert wire == {"type": "SUBAGENT_FINISHED", "subagentRunId": "s"}
    assert reports == [("unknown-variant", "$.outcome")]


def test_patch_operations_are_open_but_unknown_ops_are_removed() -> None:
    delta = [
        {"op": "add", "path": "/a", "value": 1, "extra": {"kept": True}},
        {"op": "bogus", "path": "/b"},
        {"path": "/c"},
        {"op": 5},
        {"op": "remove", "path": "/d", "value": "leftover"},
    ]
    wire, reports = decode_one({"type": "STATE_DELTA", "delta": delta})
    assert wire == {"type": "STATE_DELTA", "delta": [delta[0], delta[4]]}
    assert reports == [
        ("unknown-variant", "$.delta[1]"),
        ("unknown-variant", "$.delta[2]"),
        ("unknown-variant", "$.delta[3]"),
    ]
    wire, reports = decode_one(
        {"type": "ACTIVITY_DELTA", "messageId": "m", "activityType": "a", "patch": [{"op": "x"}]}
    )
    assert wire == {"type": "ACTIVITY_DELTA", "messageId": "m", "activityType": "a", "patch": []}
    assert reports == [("unknown-variant", "$.patch[0]")]


def test_a_wrongly_shaped_value_in_a_union_position_is_fatal_not_stripped() -> None:
    assert error_of({"type": "RUN_FINISHED", **RUN, "outcome": "success"}).path == "$.outcome"
    assert error_of(snapshot("x")).path == "$.messages[0]"
    assert error_of(snapshot([{"id": "a", "role": "user"}])).path == "$.messages[0]"
    assert error_of({"type": "STATE_DELTA", "delta": [5]}).path == "$.delta[0]"


# ---------------------------------------------------------------------------------------------
# Unknown event types


def test_unknown_event_types_are_dropped_with_a_report() -> None:
    out, reports = decode_all(
        [{"type": "FOO", "x": 1}, {"type": "TEXT_MESSAGE_END", "messageId": "m"}]
    )
    assert out == [None, {"type": "TEXT_MESSAGE_END", "messageId": "m"}]
    assert [(r.code, r.index, r.path, r.event_type) for r in reports] == [
        ("unknown-event-type", 0, "$.type", "FOO")
    ]
    assert "FOO" in reports[0].message


def test_the_enforce_stage_emits_nothing_for_a_dropped_event() -> None:
    reports: list[Report] = []
    out = run_sync(
        [Enforce()],
        [b'{"type":"NOPE"}', {"type": "TEXT_MESSAGE_END", "messageId": "m"}],
        on_report=reports.append,
    )
    assert out == [agui_meta.events.TextMessageEndEvent(message_id="m")]
    assert [(r.code, r.index) for r in reports] == [("unknown-event-type", 0)]


@pytest.mark.parametrize(
    "frame",
    [b'{"x":1}', b'{"type":5}', b'{"type":""}', b'{"type":null}', b'{"type":["RAW"]}'],
)
def test_a_frame_without_a_string_type_is_an_error(frame: bytes) -> None:
    # client/src/transform/http.ts: "Invalid event: the frame carries no event type."
    with pytest.raises(DecodeError, match="carries no event type") as info:
        EventDecoder().decode(frame)
    assert info.value.path == "$.type"


@pytest.mark.parametrize("event", [{"x": 1}, {"type": 5}, {"type": ""}, {"type": None}])
def test_an_in_memory_event_without_a_string_type_is_dropped(event: dict[str, Any]) -> None:
    # In-memory events reach enforcement, which drops what it does not recognise.
    reports: list[Report] = []
    assert EventDecoder(on_report=reports.append).decode(event) is None
    assert [(r.code, r.path) for r in reports] == [("unknown-event-type", "$.type")]


@pytest.mark.parametrize(
    ("frame", "what"),
    [(b"[1]", "an array"), (b'"x"', "a string"), (b"1", "a number"), (b"null", "null")],
)
def test_a_frame_that_is_not_an_object_is_an_error(frame: bytes, what: str) -> None:
    with pytest.raises(DecodeError, match=f"not a JSON object \\(it is {what}\\)"):
        EventDecoder().decode(frame)


# ---------------------------------------------------------------------------------------------
# Legacy producers: the nulls the compatibility boundary reads as absent


@pytest.mark.parametrize(
    ("event", "path"),
    [
        ({"type": "TEXT_MESSAGE_END", "messageId": "m", "rawEvent": None}, "$.rawEvent"),
        ({"type": "RUN_STARTED", **RUN, "rawEvent": None}, "$.rawEvent"),
        (
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "t",
                "toolCallName": "f",
                "parentMessageId": None,
            },
            "$.parentMessageId",
        ),
        (
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "t", "parentMessageId": None},
            "$.parentMessageId",
        ),
        ({"type": "RUN_FINISHED", **RUN, "outcome": None}, "$.outcome"),
        ({"type": "RUN_FINISHED", **RUN, "result": None}, "$.result"),
        ({"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "result": None}, "$.result"),
        (run_started(forwardedProps=None), "$.input.forwardedProps"),
        (
            run_started(tools=[{"name": "f", "description": "d", "parameters": None}]),
            "$.input.tools[0].parameters",
        ),
        (
            run_started(resume=[{"interruptId": "i", "status": "resolved", "payload": None}]),
            "$.input.resume[0].payload",
        ),
        (
            snapshot(
                {
                    "id": "u",
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "url", "value": "v"}, "metadata": None}
                    ],
                }
            ),
            "$.messages[0].content[0].metadata",
        ),
        (
            run_started(
                messages=[
                    {
                        "id": "t",
                        "role": "tool",
                        "toolCallId": "tc",
                        "content": [
                            {"type": "text", "text": "x"},
                            {
                                "type": "document",
                                "source": {"type": "file", "value": "f"},
                                "metadata": None,
                            },
                        ],
                    }
                ]
            ),
            "$.input.messages[0].content[1].metadata",
        ),
    ],
)
def test_legacy_nulls_read_as_absent(event: dict[str, Any], path: str) -> None:
    wire, reports = decode_one(event)
    assert reports == [("legacy-null", path)]
    segments = re.findall(r"\.(\w+)|\[(\d+)\]", path)
    expected = json.loads(json.dumps(event))
    target = expected
    for name, index in segments[:-1]:
        target = target[name] if name else target[int(index)]
    del target[segments[-1][0]]
    assert wire == expected


def test_several_legacy_nulls_in_one_event() -> None:
    wire, reports = decode_one(
        {"type": "RUN_FINISHED", **RUN, "result": None, "outcome": None, "rawEvent": None}
    )
    assert wire == {"type": "RUN_FINISHED", **RUN}
    assert reports == [
        ("legacy-null", "$.rawEvent"),
        ("legacy-null", "$.result"),
        ("legacy-null", "$.outcome"),
    ]


@pytest.mark.parametrize(
    ("event", "path"),
    [
        ({"type": "TEXT_MESSAGE_END", "messageId": "m", "subagentRunId": None}, "$.subagentRunId"),
        ({"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": None}, "$.outcome"),
        (
            {
                "type": "SUBAGENT_STARTED",
                "subagentRunId": "s",
                "name": "n",
                "parentMessageId": None,
            },
            "$.parentMessageId",
        ),
        ({"type": "RUN_ERROR", "message": "m", "code": None}, "$.code"),
        ({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": None}, "$.role"),
        (
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "m",
                "toolCallId": "t",
                "content": [
                    {"type": "image", "source": {"type": "url", "value": "v"}, "metadata": None}
                ],
            },
            "$.content[0].metadata",
        ),
        (
            snapshot(
                {
                    "id": "u",
                    "role": "user",
                    "content": [{"type": "text", "text": "t", "metadata": None}],
                }
            ),
            "$.messages[0].content[0].metadata",
        ),
        (
            snapshot({"id": "u", "role": "user", "content": "x", "subagentRunId": None}),
            "$.messages[0].subagentRunId",
        ),
    ],
)
def test_other_nulls_stay_fatal(event: dict[str, Any], path: str) -> None:
    error = error_of(event)
    assert isinstance(error, DecodeError)
    assert error.path == path


# ---------------------------------------------------------------------------------------------
# Legacy `binary` content parts (legacy-content.ts)


def _user(*parts: Any) -> dict[str, Any]:
    return {"id": "u", "role": "user", "content": list(parts)}


def test_binary_parts_become_media_parts() -> None:
    wire, reports = decode_one(
        snapshot(
            _user(
                {"type": "binary", "mimeType": "image/png", "data": "AAA", "filename": "f.png"},
                {"type": "binary", "mimeType": "audio/ogg", "url": "https://a", "id": "dropped"},
                {"type": "binary", "mimeType": "video/mp4", "data": "V", "url": "https://ignored"},
                {
                    "type": "binary",
                    "mimeType": "application/pdf",
                    "url": "https://d",
                    "filename": "",
                },
                {"type": "binary", "mimeType": "text/plain", "id": "only-an-id"},
                {"type": "binary", "mimeType": 5, "data": "x"},
            )
        )
    )
    assert wire == snapshot(
        _user(
            {
                "type": "image",
                "source": {"type": "data", "value": "AAA", "mimeType": "image/png"},
                "metadata": {"filename": "f.png"},
            },
            {
                "type": "audio",
                "source": {"type": "url", "value": "https://a", "mimeType": "audio/ogg"},
            },
            {"type": "video", "source": {"type": "data", "value": "V", "mimeType": "video/mp4"}},
            {
                "type": "document",
                "source": {"type": "url", "value": "https://d", "mimeType": "application/pdf"},
            },
        )
    )
    assert reports == [
        ("legacy-shape", "$.messages[0].content[0]"),
        ("legacy-shape", "$.messages[0].content[1]"),
        ("legacy-shape", "$.messages[0].content[2]"),
        ("legacy-shape", "$.messages[0].content[3]"),
        # an id-only part cannot be converted, stays binary, and is then stripped
        ("legacy-shape", "$.messages[0].content[4]"),
        ("unknown-variant", "$.messages[0].content[4]"),
        # a non-string mimeType is not a legacy binary part at all: an unknown part type
        ("unknown-variant", "$.messages[0].content[5]"),
    ]


def test_a_binary_part_mirroring_a_modern_part_is_removed() -> None:
    modern = {"type": "image", "source": {"type": "data", "value": "AAA", "mimeType": "image/png"}}
    named = {**modern, "metadata": {"filename": "f.png"}}
    # the mirror may come first; only a modern part that keeps the filename absorbs it
    wire, _ = decode_one(
        snapshot(_user({"type": "binary", "mimeType": "image/png", "data": "AAA"}, modern))
    )
    assert wire == snapshot(_user(modern))
    binary = {"type": "binary", "mimeType": "image/png", "data": "AAA", "filename": "f.png"}
    wire, _ = decode_one(snapshot(_user(binary, modern)))
    assert wire == snapshot(_user(named, modern))
    wire, _ = decode_one(snapshot(_user(named, binary)))
    assert wire == snapshot(_user(named))


def test_binary_parts_in_the_run_input_are_upgraded_too_but_not_in_tool_results() -> None:
    binary = {"type": "binary", "mimeType": "image/png", "url": "https://i"}
    wire, reports = decode_one(run_started(messages=[_user(binary)]))
    image = {
        "type": "image",
        "source": {"type": "url", "value": "https://i", "mimeType": "image/png"},
    }
    assert wire == run_started(messages=[_user(image)])
    assert reports == [("legacy-shape", "$.input.messages[0].content[0]")]
    wire, reports = decode_one(
        {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "t", "content": [binary]}
    )
    assert wire == {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "t", "content": []}
    assert reports == [("unknown-variant", "$.content[0]")]


# ---------------------------------------------------------------------------------------------
# THINKING_* (compatibility-boundary.ts: a per-stream state machine)


def _is_uuid4(value: Any) -> bool:
    return isinstance(value, str) and uuid.UUID(value).version == 4


def test_thinking_events_translate_to_reasoning_events() -> None:
    out, reports = decode_all(
        [
            {"type": "THINKING_START", "title": "Plan", "timestamp": 5},
            {"type": "THINKING_TEXT_MESSAGE_START", "metadata": {"k": 1}},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "a"},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "b", "messageId": "ignored"},
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_TEXT_MESSAGE_START"},
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_END"},
        ]
    )
    assert all(event is not None for event in out)
    events: list[dict[str, Any]] = out  # type: ignore[assignment]
    span, first, second = events[0]["messageId"], events[1]["messageId"], events[5]["messageId"]
    assert all(_is_uuid4(x) for x in (span, first, second))
    assert len({span, first, second}) == 3
    assert events == [
        {"type": "REASONING_START", "timestamp": 5, "messageId": span},
        {
            "type": "REASONING_MESSAGE_START",
            "metadata": {"k": 1},
            "messageId": first,
            "role": "reasoning",
        },
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": first, "delta": "a"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": first, "delta": "b"},
        {"type": "REASONING_MESSAGE_END", "messageId": first},
        {"type": "REASONING_MESSAGE_START", "messageId": second, "role": "reasoning"},
        {"type": "REASONING_MESSAGE_END", "messageId": second},
        {"type": "REASONING_END", "messageId": span},
    ]
    assert [(r.code, r.index, r.path) for r in reports] == [
        ("legacy-shape", 0, "$.type"),
        ("legacy-shape", 0, "$.title"),  # the title is lost: REASONING_START has none
        ("legacy-shape", 1, "$.type"),
        ("legacy-shape", 2, "$.type"),
        ("legacy-shape", 3, "$.type"),
        ("legacy-shape", 4, "$.type"),
        ("legacy-shape", 5, "$.type"),
        ("legacy-shape", 6, "$.type"),
        ("legacy-shape", 7, "$.type"),
    ]
    assert all(r.severity == "warning" for r in reports)


def test_thinking_continuations_without_an_opener_mint_an_id_each() -> None:
    out, reports = decode_all(
        [
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "x"},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "y"},
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_END"},
            # after an END the id is forgotten: the next continuation mints again
            {"type": "THINKING_TEXT_MESSAGE_START"},
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_TEXT_MESSAGE_END"},
        ]
    )
    ids = [event["messageId"] for event in out if event is not None]
    assert all(_is_uuid4(i) for i in ids)
    assert len(set(ids[:4])) == 4
    assert ids[4] == ids[5] != ids[6]
    minted = [r for r in reports if r.path == "$.messageId"]
    assert [r.index for r in minted] == [0, 1, 2, 3, 6]
    assert all(i in r.message for r, i in zip(minted, [*ids[:4], ids[6]], strict=True))


def test_thinking_state_is_per_decoder() -> None:
    a, b = EventDecoder(on_report=lambda r: None), EventDecoder(on_report=lambda r: None)
    start = a.decode(b'{"type":"THINKING_TEXT_MESSAGE_START"}')
    other = b.decode(b'{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"x"}')
    mine = a.decode(b'{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"x"}')
    assert start is not None and other is not None and mine is not None
    assert mine.message_id == start.message_id != other.message_id  # type: ignore[attr-defined]
    a.reset()
    after = a.decode(b'{"type":"THINKING_TEXT_MESSAGE_END"}')
    assert after is not None
    assert after.message_id != start.message_id  # type: ignore[attr-defined]


def test_translated_thinking_events_are_then_enforced() -> None:
    (wire,), reports = decode_all([{"type": "THINKING_START", "foo": 1}])
    assert wire is not None and set(wire) == {"type", "messageId"}
    assert [(r.code, r.path) for r in reports] == [
        ("legacy-shape", "$.type"),
        ("unknown-field", "$.foo"),
    ]
    assert isinstance(error_of({"type": "THINKING_START", "metadata": None}), MetadataError)
    error = error_of({"type": "THINKING_TEXT_MESSAGE_CONTENT"})
    assert error.path == "$.delta"


# ---------------------------------------------------------------------------------------------
# Malformed known fields: errors with the index and the JSON path, chained to msgspec's


@pytest.mark.parametrize(
    ("event", "path", "match"),
    [
        (
            {"type": "TEXT_MESSAGE_START", "messageId": 5},
            "$.messageId",
            "Expected `str`, got `int`",
        ),
        ({"type": "TEXT_MESSAGE_START"}, "$.messageId", "missing required field `messageId`"),
        ({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "tool"}, "$.role", "tool"),
        (
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "timestamp": 1.5},
            "$.timestamp",
            "float",
        ),
        (
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "timestamp": 2**53},
            "$.timestamp",
            "<= 9007199254740991",
        ),
        ({"type": "REASONING_MESSAGE_START", "messageId": "m"}, "$.role", "role"),
        ({"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "assistant"}, "$.role", ""),
        ({"type": "SUBAGENT_STARTED", "name": "n"}, "$.subagentRunId", "subagentRunId"),
        ({"type": "RAW"}, "$.event", "event"),
        (
            {"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "a", "content": [1]},
            "$.content",
            "array",
        ),
        (
            {"type": "RUN_FINISHED", **RUN, "outcome": {"type": "interrupt", "interrupts": []}},
            "$.outcome.interrupts",
            "length >= 1",
        ),
        (
            {"type": "RUN_ERROR", "message": "m", "usage": [{"inputTokens": -1}]},
            "$.usage[0].inputTokens",
            ">= 0",
        ),
        (
            {"type": "RUN_ERROR", "message": "m", "usage": [{"inputTokens": 0.5}]},
            "$.usage[0].inputTokens",
            "float",
        ),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "a", "value": 1}]},
            "$.delta[0].path",
            "JSON Pointer",
        ),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/a~2"}]},
            "$.delta[0].path",
            "JSON Pointer",
        ),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "\n"}]},
            "$.delta[0].path",
            "JSON Pointer",
        ),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "move", "path": "/a"}]},
            "$.delta[0].from",
            "`from`",
        ),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a"}]},
            "$.delta[0].value",
            "`value`",
        ),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "copy", "from": 1, "path": "/a"}]},
            "$.delta[0].from",
            "got `int`",
        ),
        (
            snapshot(
                {
                    "id": "a",
                    "role": "assistant",
                    "toolCalls": [{"id": "t", "function": {"name": "f", "arguments": ""}}],
                }
            ),
            "$.messages[0].toolCalls[0].type",
            "`type`",
        ),
        (
            snapshot({"id": "a", "role": "assistant", "toolCalls": [{**CALL, "type": "fn"}]}),
            "$.messages[0].toolCalls[0].type",
            "fn",
        ),
        (run_started(context=[{"description": "d"}]), "$.input.context[0].value", "`value`"),
        (
            run_started(resume=[{"interruptId": "i", "status": "done"}]),
            "$.input.resume[0].status",
            "done",
        ),
        (
            {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "t", "content": {"a": 1}},
            "$.content",
            "object",
        ),
        (
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "rawEvent": None, "timestamp": True},
            "$.timestamp",
            "bool",
        ),
    ],
)
def test_malformed_fields_are_decode_errors_with_their_path(
    event: dict[str, Any], path: str, match: str
) -> None:
    error = error_of(event)
    assert type(error) is DecodeError
    assert error.path == path
    assert match in str(error)
    assert isinstance(error.__cause__, msgspec.ValidationError)


def test_errors_name_the_index_and_the_frame() -> None:
    stream = [
        b'{"type":"TEXT_MESSAGE_END","messageId":"m"}',
        Frame(b'{"type":"TEXT_MESSAGE_END","messageId":1}', offset=42, line=3),
    ]
    with pytest.raises(DecodeError) as info:
        list(EventDecoder().decode_iter(stream))
    error = info.value
    assert (error.index, error.offset, error.line, error.path) == (1, 42, 3, "$.messageId")
    assert "event 1" in str(error) and "line 3" in str(error) and "byte 42" in str(error)


def test_the_pipeline_context_index_wins() -> None:
    ctx = agui_meta.Context()
    ctx.index = 17
    with pytest.raises(DecodeError) as info:
        EventDecoder().decode(b'{"type":"TEXT_MESSAGE_END"}', ctx)
    assert info.value.index == 17


def test_a_one_shot_decode_has_no_index() -> None:
    with pytest.raises(DecodeError) as info:
        decode_event(b'{"type":"TEXT_MESSAGE_END"}')
    assert info.value.index is None
    assert info.value.path == "$.messageId"


def test_invalid_json_names_the_byte() -> None:
    with pytest.raises(DecodeError, match=r"invalid JSON: .*\(byte 14\)") as info:
        EventDecoder().decode(b'{"type":"RAW",}')
    assert isinstance(info.value.__cause__, msgspec.DecodeError)
    assert type(info.value) is DecodeError


def test_a_truncated_last_frame_is_a_framing_error() -> None:
    frame = Frame(b'{"type":"RAW","ev', offset=0, line=1, final_unterminated=True)
    with pytest.raises(FramingError, match="truncated"):
        EventDecoder().decode(frame)


def test_keep_going_with_the_decoders_own_context_skips_the_event() -> None:
    reports: list[Report] = []
    decoder = EventDecoder(mode="keep_going", on_report=reports.append)
    assert decoder.decode(b'{"type":"TEXT_MESSAGE_END"}') is None
    stream = [b"[]", b'{"type":"TEXT_MESSAGE_END","messageId":"m"}', b"{"]
    assert list(decoder.decode_iter(stream)) == [
        agui_meta.events.TextMessageEndEvent(message_id="m")
    ]
    assert [(r.code, r.severity, r.index, r.path) for r in reports] == [
        ("DecodeError", "error", None, "$.messageId"),  # decode() alone does not count
        ("DecodeError", "error", 0, "$"),
        ("DecodeError", "error", 2, None),
    ]


# ---------------------------------------------------------------------------------------------
# JavaScript numbers: an integral float is the integer


@pytest.mark.parametrize("number", ["1.0", "1e3", "-0.0", "1.5e2", "9007199254740991.0"])
def test_integral_floats_read_as_integers_in_integer_positions(number: str) -> None:
    wire = f'{{"type":"RUN_ERROR","message":"m","timestamp":{number},"usage":[{{"totalTokens":{number.lstrip("-")}}}]}}'
    event = decode_event(wire.encode())
    assert isinstance(event, agui_meta.events.RunErrorEvent)
    assert event.timestamp == int(float(number))
    assert type(event.timestamp) is int
    assert event.usage is not UNSET
    assert type(event.usage[0].total_tokens) is int


def test_floats_elsewhere_stay_floats() -> None:
    event = decode_event(b'{"type":"CUSTOM","name":"n","value":1.0,"metadata":{"x":2.0}}')
    assert isinstance(event, agui_meta.events.CustomEvent)
    assert type(event.value) is float
    assert event.metadata == {"x": 2.0} and type(event.metadata["x"]) is float


# ---------------------------------------------------------------------------------------------
# Inputs: bytes, text, buffers, dicts, Events, ag_ui models, Frames


def test_every_input_kind_gives_the_same_event() -> None:
    wire = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}'
    expected = agui_meta.events.TextMessageContentEvent(message_id="m", delta="d")
    from ag_ui.core import TextMessageContentEvent as CoreEvent

    inputs: list[Any] = [
        wire,
        wire.decode(),
        bytearray(wire),
        memoryview(wire),
        json.loads(wire),
        expected,
        Frame(wire, 0, 1),
        CoreEvent(message_id="m", delta="d"),
    ]
    decoder = EventDecoder()
    for data in inputs:
        assert decoder.decode(data) == expected
    assert run_sync([Enforce()], inputs) == [expected] * len(inputs)


def test_a_valid_event_object_passes_as_itself() -> None:
    event = agui_meta.events.TextMessageStartEvent(message_id="m", metadata={"a": None})
    assert EventDecoder().decode(event) is event


def test_a_python_built_event_with_a_legacy_null_is_repaired_and_reported() -> None:
    event = agui_meta.events.ToolCallStartEvent(
        tool_call_id="t",
        tool_call_name="f",
        parent_message_id=None,  # type: ignore[arg-type]
    )
    reports: list[Report] = []
    decoded = EventDecoder(on_report=reports.append).decode(event)
    assert decoded == agui_meta.events.ToolCallStartEvent(tool_call_id="t", tool_call_name="f")
    assert [(r.code, r.path) for r in reports] == [("legacy-null", "$.parentMessageId")]


def test_a_python_built_event_holding_a_non_json_value_is_a_decode_error() -> None:
    event = agui_meta.events.CustomEvent(name="n", value=object())
    with pytest.raises(DecodeError, match="cannot be serialised as JSON") as info:
        EventDecoder().decode(event)
    assert info.value.__cause__ is not None


def test_an_ag_ui_model_with_an_extra_field_is_stripped_like_the_wire() -> None:
    from ag_ui.core import TextMessageEndEvent as CoreEvent

    reports: list[Report] = []
    model = CoreEvent(message_id="m", extra_field=1)  # type: ignore[call-arg]
    decoded = EventDecoder(on_report=reports.append).decode(model)
    assert decoded == agui_meta.events.TextMessageEndEvent(message_id="m")
    # ag_ui.core keeps unknown fields under the name they were given
    assert [(r.code, r.path) for r in reports] == [("unknown-field", "$.extra_field")]


@pytest.mark.parametrize("data", [object(), 3, None, [1], 2.5])
def test_anything_else_is_a_decode_error(data: Any) -> None:
    with pytest.raises(DecodeError):
        EventDecoder().decode(data)


def test_a_dict_input_is_never_modified() -> None:
    event = run_started(
        messages=[
            _user({"type": "binary", "mimeType": "image/png", "data": "A"}),
            {"id": "x", "role": "bot"},
        ],
        forwardedProps=None,
        extra=1,
    )
    event["rawEvent"] = None
    before = json.loads(json.dumps(event))
    EventDecoder(on_report=lambda r: None).decode(event)
    assert event == before


def test_decode_message_applies_the_same_policy() -> None:
    reports: list[str] = []
    with pytest.warns(AguiWarning) as caught:
        message = agui_meta.events.decode_message(
            {
                "id": "u",
                "role": "user",
                "content": [{"type": "binary", "mimeType": "a/b", "data": "x"}],
                "q": 1,
            }
        )
    reports = [str(w.message) for w in caught]
    assert message == agui_meta.events.UserMessage(
        id="u",
        content=[
            agui_meta.events.DocumentPart(
                source=agui_meta.events.DataSource(value="x", mime_type="a/b")
            )
        ],
    )
    assert len(reports) == 2
    with pytest.raises(DecodeError, match="role"):
        agui_meta.events.decode_message({"id": "u", "role": "bot"})
    with pytest.raises(MetadataError):
        agui_meta.events.decode_message(
            {"id": "u", "role": "user", "content": "", "metadata": None}
        )


# ---------------------------------------------------------------------------------------------
# Nothing but the package's own errors, whatever comes in


def _decode_quietly(data: Any) -> None:
    decoder = EventDecoder(on_report=lambda r: None)
    try:
        result = decoder.decode(data)
    except DataError:
        return
    assert result is None or isinstance(result, agui_meta.events.Event)
    if result is not None:  # whatever decodes re-encodes and decodes to itself
        assert decoder.decode(encode_event(result)) == result


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(
    [
        "type", "messageId", "delta", "metadata", "messages", "role", "content", "toolCalls",
        "id", "function", "outcome", "interrupts", "input", "timestamp", "rawEvent", "usage",
        "patch", "op", "path", "value", "source", "subagentRunId", "title", "threadId", "runId",
    ]
)  # fmt: skip
TYPES = st.sampled_from(
    [*agui_meta.events.EVENT_TYPES, "THINKING_START", "THINKING_TEXT_MESSAGE_CONTENT", "X", ""]
)
ROLES = st.sampled_from(["user", "assistant", "tool", "activity", "reasoning", "bot", "binary"])
EVENTISH = st.recursive(
    st.none()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
    | ROLES
    | TYPES,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(FIELD_NAMES, children, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_arbitrary_bytes_give_only_package_errors(data: bytes) -> None:
    _decode_quietly(data)


@settings(max_examples=300)
@given(JSON)
def test_arbitrary_json_values_give_only_package_errors(value: Any) -> None:
    _decode_quietly(json.dumps(value).encode())
    _decode_quietly(value)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(TYPES, st.dictionaries(FIELD_NAMES, EVENTISH, max_size=6))
def test_event_shaped_junk_gives_only_package_errors(kind: str, fields: dict[str, Any]) -> None:
    event = {**fields, "type": kind}
    _decode_quietly(json.dumps(event).encode())
    _decode_quietly(event)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_CASES), st.data())
def test_perturbed_valid_events_give_only_package_errors(
    case: dict[str, Any], data: st.DataObject
) -> None:
    event = json.loads(json.dumps(case))
    for _ in range(data.draw(st.integers(1, 3))):
        target = event
        # walk down a random path of objects, then set or delete a key there
        while True:
            children = [k for k, v in target.items() if isinstance(v, dict)]
            lists = [
                v[0]
                for v in target.values()
                if isinstance(v, list) and v and isinstance(v[0], dict)
            ]
            options = [target[k] for k in children] + lists
            if not options or data.draw(st.booleans()):
                break
            target = data.draw(st.sampled_from(options))
        key = data.draw(FIELD_NAMES | st.sampled_from(sorted(target) or ["x"]))
        if key in target and data.draw(st.booleans()):
            del target[key]
        else:
            target[key] = data.draw(EVENTISH)
    _decode_quietly(json.dumps(event).encode())
    _decode_quietly(event)


# ---------------------------------------------------------------------------------------------
# A differential spot check against the reference client (tests/oracle.py)

STRIP_CASES: list[dict[str, Any]] = [
    snapshot(
        {"id": "a", "role": "bot", "content": "x"},
        {"id": "b", "role": "user", "content": "x", "foo": {"bar": 1}},
        {
            "id": "c",
            "role": "assistant",
            "toolCalls": [{**CALL, "subagentRunId": "s", "function": {**CALL["function"], "z": 1}}],
            "metadata": {"k": None, "": [1]},
        },
        _user(
            {"type": "image", "source": {"type": "blob", "value": "x"}},
            {"type": "text", "text": "t", "extra": 1, "metadata": {"open": True}},
            {"type": "binary", "mimeType": "image/png", "data": "AAA", "filename": "f.png"},
            {"type": "binary", "mimeType": "text/plain", "id": "only"},
            {"type": "audio", "source": {"type": "url", "value": "v"}, "metadata": None},
        ),
        {"id": "r", "role": "reasoning", "content": "r", "name": "not on reasoning"},
        {"id": "t", "role": "tool", "toolCallId": "tc", "content": [{"type": "x"}], "error": "e"},
        {
            "id": "ac",
            "role": "activity",
            "activityType": "a",
            "content": {"any": {"thing": 1}},
            "q": 1,
        },
    ),
]


def test_stripped_snapshots_match_the_reference(oracle: Any) -> None:
    cases: list[dict[str, Any]] = [
        {"name": f"strip-{i}", "events": [{"type": "RUN_STARTED", **RUN}, event]}
        for i, event in enumerate(STRIP_CASES)
    ]
    expected = oracle.run(cases, verify=False)
    for case, reference in zip(cases, expected, strict=True):
        ours, _ = decode_all(case["events"])
        assert ours[1] is not None
        assert "messages" in reference, reference
        assert ours[1]["messages"] == reference["messages"]


def test_json_nested_deeper_than_msgspec_recurses_is_a_decode_error() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    for wire in (
        b'{"type":"CUSTOM","name":"n","value":' + deep + b"}",
        b'{"type":"CUSTOM","name":"n","extra":1,"value":' + deep + b"}",
    ):
        with pytest.raises(DecodeError, match="nested more than 128 levels deep"):
            EventDecoder().decode(wire)
    value: list[Any] = []
    inner = value
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    with pytest.raises(DecodeError, match="nested more than 128 levels deep"):
        EventDecoder().decode(agui_meta.events.CustomEvent(name="n", value=value))
    # a dict meets the limits JSON text meets, wherever the deep value sits
    for event in ({"type": value}, {"type": "CUSTOM", "name": "n", "value": value}):
        with pytest.raises(DecodeError, match="nested more than 128 levels deep"):
            EventDecoder().decode(event)


def test_long_values_are_cut_short_in_messages() -> None:
    reports: list[Report] = []
    decoded = EventDecoder(on_report=reports.append).decode(
        snapshot({"id": "a", "role": "x" * 10_000})
    )
    assert decoded == agui_meta.events.MessagesSnapshotEvent(messages=[])
    assert len(reports[0].message) < 200
