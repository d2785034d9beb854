"""The wire model: every event type round-trips exactly; values under opaque keys are kept."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agui_meta
from agui_meta import from_agui_core, to_agui_core
from agui_meta.events import (
    EVENT_TYPES,
    AssistantMessage,
    CustomEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    TextMessageStartEvent,
    ToolCall,
    UserMessage,
    decode_event,
    decode_message,
    encode_event,
)

META = {"acme.trace": "t-1", "ag-ui": {"x": [1, 2]}, "acme.none": None}
MESSAGES: list[dict[str, Any]] = [
    {
        "id": "d",
        "role": "developer",
        "content": "be brief",
        "name": "dev",
        "encryptedValue": "e",
        "subagentRunId": "s",
        "metadata": META,
    },
    {"id": "s", "role": "system", "content": "sys", "name": "n", "encryptedValue": "e"},
    {
        "id": "a",
        "role": "assistant",
        "content": "hi",
        "name": "bot",
        "encryptedValue": "e",
        "subagentRunId": "s",
        "metadata": {},
        "toolCalls": [
            {
                "id": "tc1",
                "type": "function",
                "function": {"name": "f", "arguments": '{"a":1}'},
                "encryptedValue": "e",
                "metadata": META,
            },
            {"id": "tc2", "type": "function", "function": {"name": "g", "arguments": ""}},
        ],
    },
    {"id": "a2", "role": "assistant"},
    {
        "id": "u",
        "role": "user",
        "name": "me",
        "content": [
            {"type": "text", "text": "look", "id": "p1", "metadata": [1, "x"]},
            {"type": "image", "source": {"type": "data", "value": "AAA", "mimeType": "image/png"}},
            {
                "type": "audio",
                "id": "p3",
                "source": {"type": "url", "value": "https://a", "mimeType": "audio/ogg"},
                "metadata": {"k": None},
            },
            {"type": "video", "source": {"type": "url", "value": "https://v"}},
            {
                "type": "document",
                "source": {
                    "type": "file",
                    "value": "file-1",
                    "provider": "openai",
                    "mimeType": "a/b",
                },
            },
            {"type": "document", "source": {"type": "file", "value": "file-2"}, "metadata": 3},
        ],
    },
    {"id": "u2", "role": "user", "content": "plain"},
    {
        "id": "t",
        "role": "tool",
        "toolCallId": "tc1",
        "content": [{"type": "text", "text": "result"}],
        "error": "boom",
        "encryptedValue": "e",
        "metadata": META,
    },
    {"id": "t2", "role": "tool", "toolCallId": "tc2", "content": "ok"},
    {
        "id": "ac",
        "role": "activity",
        "activityType": "plan",
        "content": {"steps": [{"done": False}], "n": None},
        "subagentRunId": "s",
        "metadata": META,
    },
    {"id": "r", "role": "reasoning", "content": "hmm", "encryptedValue": "e", "metadata": {}},
]
BASE = {"timestamp": 1718000000000, "rawEvent": {"provider": {"id": 1}}, "metadata": META}
TAG = {"subagentRunId": "sub-1"}
INTERRUPT = {
    "id": "i1",
    "reason": "approval",
    "message": "ok?",
    "toolCallId": "tc1",
    "responseSchema": {"type": "object"},
    "expiresAt": "2026-01-01T00:00:00Z",
    "subagentRunId": "s",
    "metadata": META,
}
USAGE = {
    "provider": "p",
    "model": "m",
    "inputTokens": 10,
    "outputTokens": 20,
    "totalTokens": 30,
    "reasoningTokens": 5,
    "cachedInputTokens": 2,
    "cacheWriteInputTokens": 1,
}
RUN_INPUT = {
    "threadId": "t",
    "runId": "r",
    "messages": MESSAGES,
    "protocolVersion": "1.0",
    "parentRunId": "p",
    "state": {"a": [1, {"b": None}]},
    "tools": [
        {"name": "f", "description": "d", "parameters": {"type": "object"}, "metadata": META},
        {"name": "g", "description": "d"},
    ],
    "context": [{"description": "d", "value": "v"}],
    "forwardedProps": {"x": 1},
    "resume": [
        {"interruptId": "i1", "status": "resolved", "payload": {"ok": True}, "metadata": META},
        {"interruptId": "i2", "status": "cancelled"},
    ],
}

#: Every event type with every optional field set (and nested objects where it has them).
FULL: list[dict[str, Any]] = [
    {"type": "TEXT_MESSAGE_START", **BASE, **TAG, "messageId": "m", "role": "user", "name": "n"},
    {"type": "TEXT_MESSAGE_CONTENT", **BASE, **TAG, "messageId": "m", "delta": "d"},
    {"type": "TEXT_MESSAGE_END", **BASE, **TAG, "messageId": "m"},
    {
        "type": "TEXT_MESSAGE_CHUNK",
        **BASE,
        **TAG,
        "messageId": "m",
        "role": "developer",
        "delta": "d",
        "name": "n",
    },
    {
        "type": "TOOL_CALL_START",
        **BASE,
        **TAG,
        "toolCallId": "tc",
        "toolCallName": "f",
        "parentMessageId": "m",
    },
    {"type": "TOOL_CALL_ARGS", **BASE, **TAG, "toolCallId": "tc", "delta": "{"},
    {"type": "TOOL_CALL_END", **BASE, **TAG, "toolCallId": "tc"},
    {
        "type": "TOOL_CALL_CHUNK",
        **BASE,
        **TAG,
        "toolCallId": "tc",
        "toolCallName": "f",
        "parentMessageId": "m",
        "delta": "x",
    },
    {
        "type": "TOOL_CALL_RESULT",
        **BASE,
        **TAG,
        "messageId": "m",
        "toolCallId": "tc",
        "content": MESSAGES[4]["content"],
        "role": "tool",
    },
    {"type": "STATE_SNAPSHOT", **BASE, **TAG, "snapshot": {"a": [1, None, {"b": 2.5}]}},
    {
        "type": "STATE_DELTA",
        **BASE,
        **TAG,
        "delta": [
            {"op": "add", "path": "/a", "value": None},
            {"op": "remove", "path": "/b", "value": "leftover"},
            {"op": "replace", "path": "/c~1d", "value": [1]},
            {"op": "move", "from": "/x", "path": "/y"},
            {"op": "copy", "from": "", "path": "/z", "note": {"spec-open": True}},
            {"op": "test", "path": "/~0", "value": {"k": 1}},
        ],
    },
    {"type": "MESSAGES_SNAPSHOT", **BASE, "messages": MESSAGES},
    {
        "type": "ACTIVITY_SNAPSHOT",
        **BASE,
        **TAG,
        "messageId": "m",
        "activityType": "plan",
        "content": {"steps": []},
        "replace": False,
    },
    {
        "type": "ACTIVITY_DELTA",
        **BASE,
        **TAG,
        "messageId": "m",
        "activityType": "plan",
        "patch": [{"op": "add", "path": "/steps/-", "value": {"done": True}}],
    },
    {"type": "RAW", **BASE, **TAG, "event": {"anything": [None]}, "source": "openai"},
    {"type": "CUSTOM", **BASE, **TAG, "name": "n", "value": [1, "two", None]},
    {
        "type": "RUN_STARTED",
        **BASE,
        "threadId": "t",
        "runId": "r",
        "protocolVersion": "1.0",
        "parentRunId": "p",
        "input": RUN_INPUT,
    },
    {
        "type": "RUN_FINISHED",
        **BASE,
        "threadId": "t",
        "runId": "r",
        "result": {"answer": 42},
        "outcome": {"type": "interrupt", "interrupts": [INTERRUPT, {"id": "i2", "reason": "r"}]},
        "usage": [USAGE, {}],
    },
    {"type": "RUN_ERROR", **BASE, "message": "m", "code": "c", "usage": [USAGE]},
    {"type": "STEP_STARTED", **BASE, **TAG, "stepName": "s"},
    {"type": "STEP_FINISHED", **BASE, **TAG, "stepName": "s"},
    {"type": "REASONING_START", **BASE, **TAG, "messageId": "r"},
    {"type": "REASONING_MESSAGE_START", **BASE, **TAG, "messageId": "r", "role": "reasoning"},
    {"type": "REASONING_MESSAGE_CONTENT", **BASE, **TAG, "messageId": "r", "delta": "d"},
    {"type": "REASONING_MESSAGE_END", **BASE, **TAG, "messageId": "r"},
    {"type": "REASONING_MESSAGE_CHUNK", **BASE, **TAG, "messageId": "r", "delta": "d"},
    {"type": "REASONING_END", **BASE, **TAG, "messageId": "r"},
    {
        "type": "REASONING_ENCRYPTED_VALUE",
        **BASE,
        **TAG,
        "subtype": "tool-call",
        "entityId": "tc",
        "encryptedValue": "enc",
    },
    {
        "type": "SUBAGENT_STARTED",
        **BASE,
        "subagentRunId": "s",
        "name": "n",
        "description": "d",
        "parentSubagentRunId": "ps",
        "parentToolCallId": "tc",
        "parentMessageId": "m",
    },
    {
        "type": "SUBAGENT_FINISHED",
        **BASE,
        "subagentRunId": "s",
        "result": "done",
        "outcome": {"type": "suspended", "interruptIds": ["i1"]},
    },
    {"type": "SUBAGENT_ERROR", **BASE, "subagentRunId": "s", "message": "m", "code": "c"},
]

#: Every event type with its required fields only.
MINIMAL: list[dict[str, Any]] = [
    {"type": "TEXT_MESSAGE_START", "messageId": "m"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": ""},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "TEXT_MESSAGE_CHUNK"},
    {"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": ""},
    {"type": "TOOL_CALL_END", "toolCallId": "tc"},
    {"type": "TOOL_CALL_CHUNK"},
    {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "tc", "content": ""},
    {"type": "STATE_SNAPSHOT", "snapshot": None},
    {"type": "STATE_DELTA", "delta": []},
    {"type": "MESSAGES_SNAPSHOT", "messages": []},
    {"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "a", "content": {}},
    {"type": "ACTIVITY_DELTA", "messageId": "m", "activityType": "a", "patch": []},
    {"type": "RAW", "event": None},
    {"type": "CUSTOM", "name": "n", "value": None},
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    {"type": "RUN_ERROR", "message": "m"},
    {"type": "STEP_STARTED", "stepName": "s"},
    {"type": "STEP_FINISHED", "stepName": "s"},
    {"type": "REASONING_START", "messageId": "r"},
    {"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning"},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": ""},
    {"type": "REASONING_MESSAGE_END", "messageId": "r"},
    {"type": "REASONING_MESSAGE_CHUNK"},
    {"type": "REASONING_END", "messageId": "r"},
    {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": "message",
        "entityId": "m",
        "encryptedValue": "",
    },
    {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s"},
    {"type": "SUBAGENT_ERROR", "subagentRunId": "s", "message": "m"},
]

#: Nested variants the full cases do not cover (other outcomes, minimal run input …).
NESTED: list[dict[str, Any]] = [
    {
        "type": "RUN_FINISHED",
        "threadId": "t",
        "runId": "r",
        "outcome": {"type": "success", "pendingToolCallIds": ["tc1", "tc2"]},
    },
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "cancelled"}},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "success"}},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "suspended"}},
    {
        "type": "RUN_STARTED",
        "threadId": "t",
        "runId": "r",
        "input": {"threadId": "t", "runId": "r", "messages": []},
    },
    {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "tc", "content": []},
    {"type": "STATE_SNAPSHOT", "snapshot": [1, "x", 2.5, True, None]},
    {"type": "RAW", "event": "text"},
    {"type": "CUSTOM", "name": "n", "value": 0},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": False},
]

ALL_CASES = [*FULL, *MINIMAL, *NESTED]


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [str(case["type"]) for case in cases]


def test_the_cases_cover_all_31_types() -> None:
    assert len(EVENT_TYPES) == 31
    assert {case["type"] for case in FULL} == set(EVENT_TYPES)
    assert {case["type"] for case in MINIMAL} == set(EVENT_TYPES)


@pytest.mark.parametrize("case", ALL_CASES, ids=_ids(ALL_CASES))
def test_decode_then_encode_gives_back_the_same_json(case: dict[str, Any]) -> None:
    wire = json.dumps(case).encode()
    event = decode_event(wire)
    assert event is not None
    assert type(event) is EVENT_TYPES[case["type"]]
    assert event.type == case["type"]
    assert json.loads(encode_event(event)) == case
    # the same from text, from the decoded dict, and from the event itself
    assert decode_event(wire.decode()) == event
    assert decode_event(json.loads(wire)) == event
    assert decode_event(event) is event


@pytest.mark.parametrize("case", ALL_CASES, ids=_ids(ALL_CASES))
def test_agui_core_round_trip(case: dict[str, Any]) -> None:
    event = decode_event(json.dumps(case).encode())
    assert event is not None
    model = to_agui_core(event)
    assert type(model).__name__ == type(event).__name__
    assert json.loads(model.model_dump_json(by_alias=True)) == case
    assert from_agui_core(model) == event


def test_messages_round_trip_alone_and_through_agui_core() -> None:
    for wire in MESSAGES:
        message = decode_message(json.dumps(wire))
        assert json.loads(msgspec.json.encode(message)) == wire
        assert decode_message(wire) == message
        model = to_agui_core(message)
        assert json.loads(model.model_dump_json(by_alias=True)) == wire
        assert from_agui_core(model) == message


def test_the_event_type_is_a_class_attribute() -> None:
    for name, cls in EVENT_TYPES.items():
        assert cls.type == name
        assert issubclass(cls, agui_meta.events.Event)


def test_absent_optionals_are_omitted_never_null() -> None:
    event = TextMessageStartEvent(message_id="m")
    assert encode_event(event) == b'{"type":"TEXT_MESSAGE_START","messageId":"m"}'
    assert event.metadata is msgspec.UNSET


def test_empty_metadata_is_kept_distinct_from_absent() -> None:
    event = decode_event(b'{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":{}}')
    assert event is not None
    assert event.metadata == {}
    assert encode_event(event) == b'{"type":"TEXT_MESSAGE_END","metadata":{},"messageId":"m"}'


# The values under metadata keys are data: kept exactly, whatever they are.
EXACT_METADATA: dict[str, Any] = {
    "null": None,
    "": "empty key",
    "__proto__": {"polluted": True},
    "constructor": 1,
    "日本語 🎉": "unicode key",
    "big": 2**64 + 1,
    "huge": -(10**40),
    "max-safe+1": 9007199254740993,
    "float": 0.1,
    "exp": 1.5e300,
    "negzero-float": -0.0,
    "nested": {"a": [None, {"b": [[], {}]}], "c": None},
    "array": [1, 2.5, "x", None, True, False],
    'esc"aped\n': "\u0000\u001f",
}


def _metadata_carriers(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """Events holding ``metadata`` at every kind of carrier."""
    message = {"id": "m", "role": "user", "content": "x", "metadata": metadata}
    call = {
        "id": "tc",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
        "metadata": metadata,
    }
    return [
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": metadata},
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [message, {"id": "a", "role": "assistant", "toolCalls": [call]}],
        },
        {
            "type": "RUN_STARTED",
            "threadId": "t",
            "runId": "r",
            "input": {
                "threadId": "t",
                "runId": "r",
                "messages": [message],
                "tools": [{"name": "f", "description": "d", "metadata": metadata}],
                "resume": [{"interruptId": "i", "status": "resolved", "metadata": metadata}],
            },
        },
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r",
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": "i", "reason": "r", "metadata": metadata}],
            },
        },
    ]


@pytest.mark.parametrize("case", _metadata_carriers(EXACT_METADATA), ids=lambda c: c["type"])
def test_metadata_values_are_kept_exactly(case: dict[str, Any]) -> None:
    wire = json.dumps(case).encode()
    for data in (wire, json.loads(wire)):
        event = decode_event(data)
        assert event is not None
        for _path, metadata in agui_meta.iter_metadata(event):
            assert metadata == EXACT_METADATA
            assert list(metadata) == list(EXACT_METADATA)  # key order too
            assert type(metadata["big"]) is int
            assert type(metadata["float"]) is float
            assert str(metadata["negzero-float"]) == "-0.0"
        again = json.loads(encode_event(event))
        assert again == case
    # through ag_ui.core as well (the Python SDK keeps nulls inside values)
    event = decode_event(wire)
    assert event is not None
    assert from_agui_core(to_agui_core(event)) == event


def test_integers_beyond_64_bits_survive_bytes_exactly() -> None:
    wire = b'{"type":"CUSTOM","name":"n","value":123456789012345678901234567890,"metadata":{"n":-98765432109876543210987654321}}'
    event = decode_event(wire)
    assert isinstance(event, CustomEvent)
    assert event.value == 123456789012345678901234567890
    assert encode_event(event) == (
        b'{"type":"CUSTOM","metadata":{"n":-98765432109876543210987654321},'
        b'"name":"n","value":123456789012345678901234567890}'
    )


def test_tool_call_type_is_required_on_the_wire_and_in_python() -> None:
    call = ToolCall(id="t", type="function", function=FunctionCall(name="f", arguments=""))
    assert msgspec.json.encode(call) == (
        b'{"id":"t","type":"function","function":{"name":"f","arguments":""}}'
    )
    with pytest.raises(TypeError):
        ToolCall(id="t", function=FunctionCall(name="f", arguments=""))  # type: ignore[call-arg]


def test_events_are_frozen() -> None:
    event = TextMessageStartEvent(message_id="m")
    with pytest.raises(AttributeError):
        event.message_id = "x"  # type: ignore[misc]


def test_run_input_null_state_reads_as_absent() -> None:
    # RunAgentInputSchema.state: null is transformed to undefined by the reference's schema.
    event = decode_event(
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r",'
        b'"input":{"threadId":"t","runId":"r","messages":[],"state":null}}'
    )
    assert isinstance(event, agui_meta.events.RunStartedEvent)
    assert event.input is not msgspec.UNSET
    assert event.input.state is msgspec.UNSET


def test_snapshot_messages_are_typed() -> None:
    event = decode_event(json.dumps({"type": "MESSAGES_SNAPSHOT", "messages": MESSAGES}))
    assert isinstance(event, MessagesSnapshotEvent)
    roles = [m.role for m in event.messages]
    assert roles == [m["role"] for m in MESSAGES]
    assistant = event.messages[2]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls is not msgspec.UNSET
    assert assistant.tool_calls[0].metadata == META
    user = event.messages[4]
    assert isinstance(user, UserMessage)
    assert isinstance(user.content, list)
    assert [type(p).__name__ for p in user.content] == [
        "TextPart",
        "ImagePart",
        "AudioPart",
        "VideoPart",
        "DocumentPart",
        "DocumentPart",
    ]


def test_every_event_round_trips_through_sse_and_json_lines() -> None:
    """decode(encode(x)) == x for every event, through both byte encodings and their decoders."""
    events = [agui_meta.events.decode_event(case) for case in ALL_CASES]
    sse = b"".join(agui_meta.framing.encode_sse(agui_meta.events.encode_event(e)) for e in events)
    jsonl = b"".join(
        agui_meta.framing.encode_jsonl(agui_meta.events.encode_event(e)) for e in events
    )
    for blob, decoder in [
        (sse, agui_meta.framing.SSEDecoder()),
        (jsonl, agui_meta.framing.JsonLinesDecoder()),
    ]:
        frames = [f for i in range(0, len(blob), 97) for f in decoder.feed(blob[i : i + 97])]
        frames += decoder.close()
        assert [agui_meta.events.decode_event(f) for f in frames] == events


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="/~01a\n", max_size=8))
def test_a_patch_path_is_a_json_pointer_as_rfc_6901_writes_it(path: str) -> None:
    from agui_meta._events import _check_patch

    pointer = re.compile(r"(/([^/~]|~[01])*)*")  # RFC 6901's grammar, whole
    try:
        _check_patch([{"op": "remove", "path": path}], "delta")
    except ValueError as exc:
        assert "Invalid JSON Pointer" in str(exc) and "$.delta[0].path" in str(exc)
        assert pointer.fullmatch(path) is None
    else:
        assert pointer.fullmatch(path) is not None
