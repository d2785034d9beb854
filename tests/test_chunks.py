"""Chunk expansion (``expand_chunks``) against the reference client's ``transformChunks`` 1.0.0.

Test names follow the official suites they port (CH: chunks/__tests__/transform.test.ts,
CH-MD: transform-metadata.test.ts, CH-ROLE: transform-roles.test.ts); the expected events come
from the reference source (chunks/transform.ts) and were checked against the installed
reference by piping the same inputs through its ``transformChunks``.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from agui_meta import run_sync
from agui_meta._chunks import ExpandChunks
from agui_meta._events import (
    EVENT_TYPES,
    AnyEvent,
    CustomEvent,
    Event,
    RawEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    SubagentFinishedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agui_meta._exceptions import ChunkError, Report
from agui_meta._stage import Context

# Short names for the events the tests build by hand.
TChunk = TextMessageChunkEvent
TStart = TextMessageStartEvent
TContent = TextMessageContentEvent
TEnd = TextMessageEndEvent
CChunk = ToolCallChunkEvent
CStart = ToolCallStartEvent
CArgs = ToolCallArgsEvent
CEnd = ToolCallEndEvent
RChunk = ReasoningMessageChunkEvent
RStart = ReasoningMessageStartEvent
RContent = ReasoningMessageContentEvent
REnd = ReasoningMessageEndEvent

FINISHED = RunFinishedEvent(thread_id="thread-123", run_id="run-123")


def expand(*events: Event) -> list[Any]:
    return run_sync([ExpandChunks()], events)


def types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


# ---------------------------------------------------------------------------------------------
# CH: chunks/__tests__/transform.test.ts


def test_should_transform_a_single_text_message_chunk_into_start_content_and_end_events() -> None:
    out = expand(TChunk(message_id="msg-123", delta="Hello, world!"), FINISHED)
    assert out == [
        TStart(message_id="msg-123", role="assistant"),
        TContent(message_id="msg-123", delta="Hello, world!"),
        TEnd(message_id="msg-123"),
        FINISHED,
    ]


def test_should_transform_multiple_text_message_chunks_with_the_same_id() -> None:
    out = expand(
        TChunk(message_id="msg-123", delta="Hello"),
        TChunk(message_id="msg-123", delta=", world!"),
        FINISHED,
    )
    assert out == [
        TStart(message_id="msg-123", role="assistant"),
        TContent(message_id="msg-123", delta="Hello"),
        TContent(message_id="msg-123", delta=", world!"),
        TEnd(message_id="msg-123"),
        FINISHED,
    ]


def test_should_transform_a_single_tool_call_chunk_into_start_args_and_end_events() -> None:
    out = expand(
        CChunk(tool_call_id="tool-123", tool_call_name="testTool", delta='{"arg1": "value1"}'),
        FINISHED,
    )
    assert out == [
        CStart(tool_call_id="tool-123", tool_call_name="testTool"),
        CArgs(tool_call_id="tool-123", delta='{"arg1": "value1"}'),
        CEnd(tool_call_id="tool-123"),
        FINISHED,
    ]


def test_should_handle_switching_from_text_message_to_tool_call() -> None:
    out = expand(
        TChunk(message_id="msg-123", delta="Hello"),
        CChunk(tool_call_id="tool-123", tool_call_name="testTool", delta="{}"),
        FINISHED,
    )
    assert types(out) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]


def test_should_pass_through_non_chunk_events() -> None:
    started = RunStartedEvent(thread_id="thread-123", run_id="run-123")
    out = expand(started)
    assert out == [started]
    assert out[0] is started


def test_should_close_current_message_when_encountering_a_non_chunk_event() -> None:
    started = RunStartedEvent(thread_id="thread-123", run_id="run-123")
    out = expand(TChunk(message_id="msg-123", delta="Hello"), started)
    assert out == [
        TStart(message_id="msg-123", role="assistant"),
        TContent(message_id="msg-123", delta="Hello"),
        TEnd(message_id="msg-123"),
        started,
    ]


def test_should_handle_text_message_chunks_with_different_ids() -> None:
    out = expand(
        TChunk(message_id="msg-123", delta="Hello"),
        TChunk(message_id="msg-456", delta="Different message"),
        FINISHED,
    )
    assert out == [
        TStart(message_id="msg-123", role="assistant"),
        TContent(message_id="msg-123", delta="Hello"),
        TEnd(message_id="msg-123"),
        TStart(message_id="msg-456", role="assistant"),
        TContent(message_id="msg-456", delta="Different message"),
        TEnd(message_id="msg-456"),
        FINISHED,
    ]


def test_should_handle_errors_when_first_text_message_chunk_has_no_id() -> None:
    with pytest.raises(ChunkError, match=r"^First TEXT_MESSAGE_CHUNK must have a messageId") as e:
        expand(TChunk(delta="This will fail"))
    assert e.value.index == 0
    assert e.value.path == "$.messageId"


def test_should_handle_errors_when_first_tool_call_chunk_has_no_id() -> None:
    with pytest.raises(ChunkError, match=r"^First TOOL_CALL_CHUNK must have a toolCallId"):
        expand(CChunk(delta="This will fail"))


def test_should_handle_errors_when_first_tool_call_chunk_has_no_name() -> None:
    with pytest.raises(
        ChunkError, match=r"^First TOOL_CALL_CHUNK must have a toolCallName.*'tool-123'"
    ) as e:
        expand(CChunk(tool_call_id="tool-123", delta="This will fail"))
    assert e.value.path == "$.toolCallName"


def test_first_reasoning_message_chunk_without_id_is_an_error() -> None:
    with pytest.raises(ChunkError, match=r"^First REASONING_MESSAGE_CHUNK must have a messageId"):
        expand(RChunk(delta="x"))


def test_should_handle_tool_call_chunks_with_parent_message_id() -> None:
    out = expand(
        CChunk(
            tool_call_id="tool-123",
            tool_call_name="testTool",
            parent_message_id="parent-msg-123",
            delta='{"arg1": "value1"}',
        ),
        FINISHED,
    )
    assert out == [
        CStart(
            tool_call_id="tool-123", tool_call_name="testTool", parent_message_id="parent-msg-123"
        ),
        CArgs(tool_call_id="tool-123", delta='{"arg1": "value1"}'),
        CEnd(tool_call_id="tool-123"),
        FINISHED,
    ]


def test_synthesized_tool_call_start_has_no_parent_message_id_when_chunk_has_none() -> None:
    (start,) = expand(CChunk(tool_call_id="t", tool_call_name="f"))
    assert start.parent_message_id is UNSET
    assert "parentMessageId" not in msgspec.json.decode(msgspec.json.encode(start))


def test_should_pass_through_raw_events_without_transformation() -> None:
    raw = RawEvent(event={"some": "data"}, source="test-source")
    out = expand(raw)
    assert out == [raw]
    assert out[0] is raw


def test_should_handle_a_complex_sequence_of_mixed_events() -> None:
    out = expand(
        TChunk(message_id="msg-123", delta="Hello"),
        CChunk(tool_call_id="tool-123", tool_call_name="testTool", delta="{}"),
        TChunk(message_id="msg-456", delta="After tool call"),
        FINISHED,
    )
    assert out == [
        TStart(message_id="msg-123", role="assistant"),
        TContent(message_id="msg-123", delta="Hello"),
        TEnd(message_id="msg-123"),
        CStart(tool_call_id="tool-123", tool_call_name="testTool"),
        CArgs(tool_call_id="tool-123", delta="{}"),
        CEnd(tool_call_id="tool-123"),
        TStart(message_id="msg-456", role="assistant"),
        TContent(message_id="msg-456", delta="After tool call"),
        TEnd(message_id="msg-456"),
        FINISHED,
    ]


def test_should_handle_text_message_chunks_without_delta() -> None:
    out = expand(TChunk(message_id="msg-123"), FINISHED)
    assert out == [
        TStart(message_id="msg-123", role="assistant"),
        TEnd(message_id="msg-123"),
        FINISHED,
    ]


def test_should_handle_tool_call_chunks_without_delta() -> None:
    out = expand(CChunk(tool_call_id="tool-123", tool_call_name="testTool"), FINISHED)
    assert out == [
        CStart(tool_call_id="tool-123", tool_call_name="testTool"),
        CEnd(tool_call_id="tool-123"),
        FINISHED,
    ]


def test_should_generate_exactly_one_start_and_one_end_event_for_multiple_chunks_with_same_id() -> (
    None
):
    parts = ["First part", "Second part", "Third part", "Fourth part"]
    out = expand(*(TChunk(message_id="msg-123", delta=p) for p in parts), FINISHED)
    assert out == [
        TStart(message_id="msg-123", role="assistant"),
        *(TContent(message_id="msg-123", delta=p) for p in parts),
        TEnd(message_id="msg-123"),
        FINISHED,
    ]


def test_should_handle_interleaved_chunks_with_different_message_and_tool_call_ids() -> None:
    out = expand(
        TChunk(message_id="msg-1", delta="First message part 1"),
        CChunk(tool_call_id="tool-1", tool_call_name="firstTool", delta='{"a": 1'),
        TChunk(message_id="msg-1", delta="First message part 2"),
        TChunk(message_id="msg-2", delta="Second message"),
        CChunk(tool_call_id="tool-2", tool_call_name="secondTool", delta='{"b": 2}'),
        CChunk(tool_call_id="tool-1", tool_call_name="firstTool", delta="}"),
        FINISHED,
    )
    # One lane: each switch closes the open stream, and a returning id opens afresh.
    assert len(out) == 19
    assert out == [
        TStart(message_id="msg-1", role="assistant"),
        TContent(message_id="msg-1", delta="First message part 1"),
        TEnd(message_id="msg-1"),
        CStart(tool_call_id="tool-1", tool_call_name="firstTool"),
        CArgs(tool_call_id="tool-1", delta='{"a": 1'),
        CEnd(tool_call_id="tool-1"),
        TStart(message_id="msg-1", role="assistant"),
        TContent(message_id="msg-1", delta="First message part 2"),
        TEnd(message_id="msg-1"),
        TStart(message_id="msg-2", role="assistant"),
        TContent(message_id="msg-2", delta="Second message"),
        TEnd(message_id="msg-2"),
        CStart(tool_call_id="tool-2", tool_call_name="secondTool"),
        CArgs(tool_call_id="tool-2", delta='{"b": 2}'),
        CEnd(tool_call_id="tool-2"),
        CStart(tool_call_id="tool-1", tool_call_name="firstTool"),
        CArgs(tool_call_id="tool-1", delta="}"),
        CEnd(tool_call_id="tool-1"),
        FINISHED,
    ]


def test_should_pass_name_from_text_message_chunk_to_text_message_start() -> None:
    out = expand(TChunk(message_id="m", name="helper", delta="hi"), FINISHED)
    assert out[0] == TStart(message_id="m", role="assistant", name="helper")
    assert out[1] == TContent(message_id="m", delta="hi")  # the name rides the START only


def test_should_not_include_name_on_text_message_start_when_chunk_has_no_name() -> None:
    out = expand(TChunk(message_id="m", delta="hi"), FINISHED)
    assert out[0].name is UNSET
    assert "name" not in msgspec.json.decode(msgspec.json.encode(out[0]))


def test_explicit_start_does_not_open_a_chunk_stream() -> None:
    # An explicit START is passed through; a chunk with that id then opens a second START
    # (the verifier, not this stage, rejects that).
    start = TStart(message_id="m")
    out = expand(start, TChunk(message_id="m", delta="x"))
    assert out == [
        start,
        TStart(message_id="m", role="assistant"),
        TContent(message_id="m", delta="x"),
    ]


# ---------------------------------------------------------------------------------------------
# CH-ROLE: chunks/__tests__/transform-roles.test.ts
# The official list also has "tool", which the 1.0 schema rejects on a chunk (enforcement
# fails the stream); here the decoder rejects it, so only the four legal roles are ported.


@pytest.mark.parametrize("role", ["developer", "system", "assistant", "user"])
def test_should_preserve_role_when_transforming_text_message_chunks(role: Any) -> None:
    out = expand(TChunk(message_id=f"msg-{role}", role=role, delta=f"Hello from {role}"), FINISHED)
    assert out == [
        TStart(message_id=f"msg-{role}", role=role),
        TContent(message_id=f"msg-{role}", delta=f"Hello from {role}"),
        TEnd(message_id=f"msg-{role}"),
        FINISHED,
    ]


def test_should_default_to_assistant_role_when_chunk_has_no_role() -> None:
    out = expand(TChunk(message_id="msg-default", delta="Hello default"), FINISHED)
    assert out[0] == TStart(message_id="msg-default", role="assistant")


def test_should_handle_multiple_chunks_with_different_roles() -> None:
    out = expand(
        TChunk(message_id="msg-user", role="user", delta="User message"),
        TChunk(message_id="msg-system", role="system", delta="System message"),
        FINISHED,
    )
    assert out == [
        TStart(message_id="msg-user", role="user"),
        TContent(message_id="msg-user", delta="User message"),
        TEnd(message_id="msg-user"),
        TStart(message_id="msg-system", role="system"),
        TContent(message_id="msg-system", delta="System message"),
        TEnd(message_id="msg-system"),
        FINISHED,
    ]


def test_synthesized_reasoning_message_start_has_role_reasoning() -> None:
    out = expand(RChunk(message_id="r", delta="think"), FINISHED)
    assert out == [
        RStart(message_id="r", role="reasoning"),
        RContent(message_id="r", delta="think"),
        REnd(message_id="r"),
        FINISHED,
    ]


# ---------------------------------------------------------------------------------------------
# CH-MD: chunks/__tests__/transform-metadata.test.ts


class TestChunkMetadataPropagation:
    """CH-MD `chunk metadata propagation`."""

    def test_stamps_a_text_chunks_metadata_onto_both_synthesized_events(self) -> None:
        md = {"acme.model": "m-1"}
        out = expand(TChunk(message_id="m", delta="hi", metadata=md), FINISHED)
        assert out == [
            TStart(message_id="m", role="assistant", metadata=md),
            TContent(message_id="m", delta="hi", metadata=md),
            TEnd(message_id="m"),
            FINISHED,
        ]
        # Stamped by reference, not copied: events are immutable and the accumulator copies.
        assert out[0].metadata is md and out[1].metadata is md

    def test_stamps_a_tool_call_chunks_metadata_onto_the_start_and_args_events(self) -> None:
        md = {"acme.latency": 3}
        out = expand(
            CChunk(tool_call_id="t", tool_call_name="f", delta="{}", metadata=md), FINISHED
        )
        assert out == [
            CStart(tool_call_id="t", tool_call_name="f", metadata=md),
            CArgs(tool_call_id="t", delta="{}", metadata=md),
            CEnd(tool_call_id="t"),
            FINISHED,
        ]

    def test_stamps_a_reasoning_chunks_metadata_onto_the_start_and_content_events(self) -> None:
        md = {"acme.effort": "high"}
        out = expand(RChunk(message_id="r", delta="x", metadata=md), FINISHED)
        assert out == [
            RStart(message_id="r", role="reasoning", metadata=md),
            RContent(message_id="r", delta="x", metadata=md),
            REnd(message_id="r"),
            FINISHED,
        ]

    def test_leaves_metadata_absent_on_synthesized_events_when_the_chunk_carries_none(self) -> None:
        out = expand(
            TChunk(message_id="m", delta="hi"), CChunk(tool_call_id="t", tool_call_name="f")
        )
        assert all(e.metadata is UNSET for e in out)


class TestChunkMetadataDoesNotLeakAcrossAMessageBoundary:
    """CH-MD `chunk metadata does not leak across a message boundary`."""

    def test_does_not_put_the_new_chunks_metadata_on_the_end_that_closes_the_previous_message(
        self,
    ) -> None:
        out = expand(
            TChunk(message_id="m1", delta="a", metadata={"k": 1}),
            TChunk(message_id="m2", delta="b", metadata={"k": 2}),
        )
        assert out == [
            TStart(message_id="m1", role="assistant", metadata={"k": 1}),
            TContent(message_id="m1", delta="a", metadata={"k": 1}),
            TEnd(message_id="m1"),
            TStart(message_id="m2", role="assistant", metadata={"k": 2}),
            TContent(message_id="m2", delta="b", metadata={"k": 2}),
        ]

    def test_does_not_leak_across_a_switch_from_a_text_chunk_to_a_tool_call_chunk(self) -> None:
        out = expand(
            TChunk(message_id="m1", delta="a"),
            CChunk(tool_call_id="t", tool_call_name="f", delta="{}", metadata={"k": 2}),
        )
        assert out == [
            TStart(message_id="m1", role="assistant"),
            TContent(message_id="m1", delta="a"),
            TEnd(message_id="m1"),
            CStart(tool_call_id="t", tool_call_name="f", metadata={"k": 2}),
            CArgs(tool_call_id="t", delta="{}", metadata={"k": 2}),
        ]

    def test_does_not_mutate_the_incoming_chunk_event(self) -> None:
        md = {"k": {"nested": [1]}}
        chunk = TChunk(message_id="m", delta="x", metadata=md)
        before = msgspec.json.encode(chunk)
        expand(chunk, TChunk(metadata={"k": 2}), FINISHED)
        assert msgspec.json.encode(chunk) == before
        assert md == {"k": {"nested": [1]}}


class TestMetadataOnlyContinuationChunks:
    """CH-MD `metadata-only continuation chunks`."""

    def test_preserves_metadata_from_a_text_chunk_that_carries_no_delta(self) -> None:
        out = expand(
            TChunk(message_id="m", delta="Hi"),
            TChunk(message_id="m", metadata={"acme.usage": 12, "acme.finish": "stop"}),
        )
        assert out == [
            TStart(message_id="m", role="assistant"),
            TContent(message_id="m", delta="Hi"),
            TContent(message_id="m", delta="", metadata={"acme.usage": 12, "acme.finish": "stop"}),
        ]

    def test_preserves_metadata_from_a_tool_call_chunk_that_carries_no_delta(self) -> None:
        out = expand(
            CChunk(tool_call_id="t", tool_call_name="f", delta="{}"),
            CChunk(metadata={"acme.ms": 40}),
        )
        assert out == [
            CStart(tool_call_id="t", tool_call_name="f"),
            CArgs(tool_call_id="t", delta="{}"),
            CArgs(tool_call_id="t", delta="", metadata={"acme.ms": 40}),
        ]

    def test_preserves_metadata_from_a_reasoning_chunk_that_carries_no_delta(self) -> None:
        out = expand(RChunk(message_id="r", delta="x"), RChunk(metadata={"acme.tokens": 7}))
        assert out == [
            RStart(message_id="r", role="reasoning"),
            RContent(message_id="r", delta="x"),
            RContent(message_id="r", delta="", metadata={"acme.tokens": 7}),
        ]

    def test_emits_nothing_extra_for_a_continuation_chunk_with_neither_delta_nor_metadata(
        self,
    ) -> None:
        out = expand(
            TChunk(message_id="m", delta="Hi"),
            TChunk(message_id="m"),
            TChunk(),
            TChunk(role="assistant"),  # repeats the defaulted role: agrees, adds nothing
            TChunk(timestamp=5),  # a timestamp alone is not carried
        )
        assert out == [
            TStart(message_id="m", role="assistant"),
            TContent(message_id="m", delta="Hi"),
        ]

    def test_does_not_carry_a_metadata_only_chunks_metadata_onto_the_next_message(self) -> None:
        out = expand(
            TChunk(message_id="m1", delta="a"),
            TChunk(metadata={"acme.usage": 1}),
            TChunk(message_id="m2", delta="b"),
        )
        assert out == [
            TStart(message_id="m1", role="assistant"),
            TContent(message_id="m1", delta="a"),
            TContent(message_id="m1", delta="", metadata={"acme.usage": 1}),
            TEnd(message_id="m1"),
            TStart(message_id="m2", role="assistant"),
            TContent(message_id="m2", delta="b"),
        ]


def test_metadata_only_chunk_with_a_new_id_rides_the_start_without_an_empty_delta() -> None:
    out = expand(TChunk(message_id="m1", delta="a"), TChunk(message_id="m2", metadata={"k": 1}))
    assert out == [
        TStart(message_id="m1", role="assistant"),
        TContent(message_id="m1", delta="a"),
        TEnd(message_id="m1"),
        TStart(message_id="m2", role="assistant", metadata={"k": 1}),
    ]


def test_empty_metadata_object_still_makes_an_empty_delta_continuation() -> None:
    out = expand(
        TChunk(message_id="m"),
        TChunk(metadata={}),
        CChunk(tool_call_id="t", tool_call_name="f"),
        CChunk(metadata={}),
        RChunk(message_id="r", subagent_run_id="s1"),
        RChunk(metadata={}),
    )
    assert out == [
        TStart(message_id="m", role="assistant"),
        TContent(message_id="m", delta="", metadata={}),
        TEnd(message_id="m"),
        CStart(tool_call_id="t", tool_call_name="f"),
        CArgs(tool_call_id="t", delta="", metadata={}),
        RStart(message_id="r", role="reasoning", subagent_run_id="s1"),
        RContent(message_id="r", delta="", metadata={}, subagent_run_id="s1"),
    ]


# ---------------------------------------------------------------------------------------------
# rawEvent, timestamp, deltas, tag-only continuations


def test_raw_event_rides_the_content_event_not_the_start() -> None:
    out = expand(TChunk(message_id="m", delta="x", raw_event={"p": 1}, metadata={"k": 1}))
    assert out == [
        TStart(message_id="m", role="assistant", metadata={"k": 1}),
        TContent(message_id="m", delta="x", raw_event={"p": 1}, metadata={"k": 1}),
    ]


@pytest.mark.parametrize("opener", [True, False], ids=["opener", "continuation"])
def test_raw_event_only_chunk_becomes_an_empty_delta_content_event(opener: bool) -> None:
    head = [] if opener else [CChunk(tool_call_id="t", tool_call_name="f", delta="{")]
    chunk = (
        CChunk(tool_call_id="t", tool_call_name="f", raw_event=["x"])
        if opener
        else CChunk(raw_event=["x"])
    )
    out = expand(*head, chunk)
    assert out[-2:] == (
        [
            CStart(tool_call_id="t", tool_call_name="f"),
            CArgs(tool_call_id="t", delta="", raw_event=["x"]),
        ]
        if opener
        else [
            CArgs(tool_call_id="t", delta="{"),
            CArgs(tool_call_id="t", delta="", raw_event=["x"]),
        ]
    )


def test_timestamp_is_not_carried_onto_synthesized_events() -> None:
    out = expand(
        RChunk(message_id="r", delta="x", timestamp=100),
        RChunk(metadata={"k": 1}, timestamp=101),
        RChunk(message_id="r2", timestamp=102),
        RunErrorEvent(message="boom", timestamp=103),
    )
    assert out == [
        RStart(message_id="r", role="reasoning"),
        RContent(message_id="r", delta="x"),
        RContent(message_id="r", delta="", metadata={"k": 1}),
        REnd(message_id="r"),
        RStart(message_id="r2", role="reasoning"),
        REnd(message_id="r2"),
        RunErrorEvent(message="boom", timestamp=103),
    ]


def test_empty_string_delta_is_a_content_event() -> None:
    out = expand(TChunk(message_id="m", delta=""), TChunk(delta=""))
    assert out == [
        TStart(message_id="m", role="assistant"),
        TContent(message_id="m", delta=""),
        TContent(message_id="m", delta=""),
    ]


def test_tag_only_continuation_becomes_nothing() -> None:
    # The reference's empty-delta rule fires for a ``null`` tag, which the decoder rejects; a
    # continuation carrying only a string tag synthesizes nothing.
    out = expand(
        TChunk(message_id="a", delta="x", subagent_run_id="s1"),
        TChunk(subagent_run_id="s1"),
        TChunk(message_id="a", subagent_run_id="s1"),
    )
    assert out == [
        TStart(message_id="a", role="assistant", subagent_run_id="s1"),
        TContent(message_id="a", delta="x", subagent_run_id="s1"),
    ]


# ---------------------------------------------------------------------------------------------
# Empty-string ids


def test_empty_string_reasoning_id_opens_a_new_stream() -> None:
    out = expand(
        RChunk(message_id="r", delta="x"),
        RChunk(message_id="", delta="y"),
        RChunk(message_id="", delta="z"),
        RChunk(delta="w"),
        FINISHED,
    )
    assert out == [
        RStart(message_id="r", role="reasoning"),
        RContent(message_id="r", delta="x"),
        REnd(message_id="r"),
        RStart(message_id="", role="reasoning"),
        RContent(message_id="", delta="y"),
        RContent(message_id="", delta="z"),
        RContent(message_id="", delta="w"),
        REnd(message_id=""),
        FINISHED,
    ]


def test_empty_string_ids_and_tags_are_present_values() -> None:
    out = expand(
        TChunk(message_id="", delta="a"),
        CChunk(tool_call_id="", tool_call_name="f", subagent_run_id=""),
        TChunk(delta="b"),  # the parent lane's text stream, not the "" lane's tool call
        CChunk(delta="{}"),  # the sole open tool call: the "" lane's
        FINISHED,
    )
    assert out == [
        TStart(message_id="", role="assistant"),
        TContent(message_id="", delta="a"),
        CStart(tool_call_id="", tool_call_name="f", subagent_run_id=""),
        TContent(message_id="", delta="b"),
        CArgs(tool_call_id="", delta="{}", subagent_run_id=""),
        TEnd(message_id=""),
        CEnd(tool_call_id="", subagent_run_id=""),
        FINISHED,
    ]


# ---------------------------------------------------------------------------------------------
# Lanes


def test_interleaved_subagent_lanes_assemble_independently() -> None:
    out = expand(
        TChunk(message_id="a", delta="A1", subagent_run_id="s1"),
        TChunk(message_id="b", delta="B1", subagent_run_id="s2"),
        TChunk(delta="A2", subagent_run_id="s1"),  # id-less, tagged: its lane
        TChunk(message_id="b", delta="B2"),  # id held by s2: continues there, tagged s2
        SubagentFinishedEvent(subagent_run_id="s1"),  # closes s1's lane only
        TChunk(delta="B3"),  # untagged, parent has none: the sole open text stream (s2)
        TChunk(message_id="p", delta="P"),  # an unheld id, untagged: opens in the parent lane
        FINISHED,  # closes s2 then the parent, in opening order
    )
    assert out == [
        TStart(message_id="a", role="assistant", subagent_run_id="s1"),
        TContent(message_id="a", delta="A1", subagent_run_id="s1"),
        TStart(message_id="b", role="assistant", subagent_run_id="s2"),
        TContent(message_id="b", delta="B1", subagent_run_id="s2"),
        TContent(message_id="a", delta="A2", subagent_run_id="s1"),
        TContent(message_id="b", delta="B2", subagent_run_id="s2"),
        TEnd(message_id="a", subagent_run_id="s1"),
        SubagentFinishedEvent(subagent_run_id="s1"),
        TContent(message_id="b", delta="B3", subagent_run_id="s2"),
        TStart(message_id="p", role="assistant"),
        TContent(message_id="p", delta="P"),
        TEnd(message_id="b", subagent_run_id="s2"),
        TEnd(message_id="p"),
        FINISHED,
    ]


def test_untagged_idless_chunk_prefers_the_parent_lanes_stream() -> None:
    out = expand(
        TChunk(message_id="a", delta="x", subagent_run_id="s1"),
        TChunk(message_id="p", delta="y"),
        TChunk(delta="z"),
    )
    assert out[-1] == TContent(message_id="p", delta="z")


def test_untagged_idless_chunk_falls_back_to_the_sole_open_stream_of_its_kind() -> None:
    out = expand(
        TChunk(message_id="a", delta="x", subagent_run_id="s1"),
        CChunk(tool_call_id="t1", tool_call_name="f"),  # the parent lane holds a tool call
        TChunk(delta="y", metadata={"k": 1}),
        CChunk(delta="{}"),
    )
    assert out == [
        TStart(message_id="a", role="assistant", subagent_run_id="s1"),
        TContent(message_id="a", delta="x", subagent_run_id="s1"),
        CStart(tool_call_id="t1", tool_call_name="f"),
        TContent(message_id="a", delta="y", subagent_run_id="s1", metadata={"k": 1}),
        CArgs(tool_call_id="t1", delta="{}"),
    ]


def test_a_lane_holds_one_stream_of_any_kind() -> None:
    out = expand(
        TChunk(message_id="a", delta="x", subagent_run_id="s1"),
        RChunk(message_id="r", delta="y", subagent_run_id="s1"),
        TChunk(message_id="p", delta="z"),
    )
    assert out == [
        TStart(message_id="a", role="assistant", subagent_run_id="s1"),
        TContent(message_id="a", delta="x", subagent_run_id="s1"),
        TEnd(message_id="a", subagent_run_id="s1"),
        RStart(message_id="r", role="reasoning", subagent_run_id="s1"),
        RContent(message_id="r", delta="y", subagent_run_id="s1"),
        TStart(message_id="p", role="assistant"),
        TContent(message_id="p", delta="z"),
    ]


def test_run_level_events_close_lanes_in_the_order_their_streams_opened() -> None:
    error = RunErrorEvent(message="boom")
    out = expand(
        TChunk(message_id="p1", delta="x"),
        CChunk(tool_call_id="t1", tool_call_name="f", subagent_run_id="s1"),
        RChunk(message_id="r1", delta="y"),  # reopens the parent lane: it now closes last
        error,
    )
    assert out == [
        TStart(message_id="p1", role="assistant"),
        TContent(message_id="p1", delta="x"),
        CStart(tool_call_id="t1", tool_call_name="f", subagent_run_id="s1"),
        TEnd(message_id="p1"),
        RStart(message_id="r1", role="reasoning"),
        RContent(message_id="r1", delta="y"),
        CEnd(tool_call_id="t1", subagent_run_id="s1"),
        REnd(message_id="r1"),
        error,
    ]


def _sample(name: str, tag: str | None) -> Event:
    """One valid event of each non-chunk type, attributed to ``tag`` where it can be."""
    t: dict[str, Any] = {} if tag is None else {"subagentRunId": tag}
    sub = {"subagentRunId": tag or "s0"}
    fields: dict[str, dict[str, Any]] = {
        "TEXT_MESSAGE_START": {"messageId": "e", **t},
        "TEXT_MESSAGE_CONTENT": {"messageId": "e", "delta": "d", **t},
        "TEXT_MESSAGE_END": {"messageId": "e", **t},
        "TOOL_CALL_START": {"toolCallId": "e", "toolCallName": "f", **t},
        "TOOL_CALL_ARGS": {"toolCallId": "e", "delta": "d", **t},
        "TOOL_CALL_END": {"toolCallId": "e", **t},
        "TOOL_CALL_RESULT": {"messageId": "e", "toolCallId": "e", "content": "c", **t},
        "STATE_SNAPSHOT": {"snapshot": {}, **t},
        "STATE_DELTA": {"delta": [], **t},
        "MESSAGES_SNAPSHOT": {"messages": []},
        "ACTIVITY_SNAPSHOT": {"messageId": "e", "activityType": "x", "content": {}, **t},
        "ACTIVITY_DELTA": {"messageId": "e", "activityType": "x", "patch": [], **t},
        "RAW": {"event": None, **t},
        "CUSTOM": {"name": "n", "value": None, **t},
        "RUN_STARTED": {"threadId": "t", "runId": "r"},
        "RUN_FINISHED": {"threadId": "t", "runId": "r"},
        "RUN_ERROR": {"message": "m"},
        "STEP_STARTED": {"stepName": "s", **t},
        "STEP_FINISHED": {"stepName": "s", **t},
        "REASONING_START": {"messageId": "e", **t},
        "REASONING_MESSAGE_START": {"messageId": "e", "role": "reasoning", **t},
        "REASONING_MESSAGE_CONTENT": {"messageId": "e", "delta": "d", **t},
        "REASONING_MESSAGE_END": {"messageId": "e", **t},
        "REASONING_END": {"messageId": "e", **t},
        "REASONING_ENCRYPTED_VALUE": {
            "subtype": "message",
            "entityId": "e",
            "encryptedValue": "v",
            **t,
        },
        "SUBAGENT_STARTED": {**sub, "name": "n"},
        "SUBAGENT_FINISHED": sub,
        "SUBAGENT_ERROR": {**sub, "message": "m"},
    }
    event: Event = msgspec.convert({"type": name, **fields[name]}, AnyEvent)
    return event


# Which events close which lanes, from the reference's transformChunks switch.
CLOSE_OWN_LANE = [
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT",
    "STATE_DELTA",
    "CUSTOM",
    "STEP_STARTED",
    "STEP_FINISHED",
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_END",
]
CLOSE_ALL_LANES = ["RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"]
CLOSE_SUBAGENT_LANE = ["SUBAGENT_FINISHED", "SUBAGENT_ERROR"]
CLOSE_NOTHING = [
    "RAW",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_DELTA",
    "REASONING_ENCRYPTED_VALUE",
    "SUBAGENT_STARTED",
]
CHUNKS = ["TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"]


def test_the_closing_rules_cover_all_31_event_types() -> None:
    listed = CLOSE_OWN_LANE + CLOSE_ALL_LANES + CLOSE_SUBAGENT_LANE + CLOSE_NOTHING + CHUNKS
    assert sorted(listed) == sorted(EVENT_TYPES)


# Two lanes with a stream open: the parent's text "p", then subagent s1's tool call "a".
OPENERS = [
    TChunk(message_id="p", delta="x"),
    CChunk(tool_call_id="a", tool_call_name="f", subagent_run_id="s1"),
]
OPENED = [
    TStart(message_id="p", role="assistant"),
    TContent(message_id="p", delta="x"),
    CStart(tool_call_id="a", tool_call_name="f", subagent_run_id="s1"),
]
END_P = TEnd(message_id="p")
END_A = CEnd(tool_call_id="a", subagent_run_id="s1")


@pytest.mark.parametrize("name", CLOSE_OWN_LANE)
@pytest.mark.parametrize("tag", [None, "s1", "s2"])
def test_explicit_events_close_only_their_own_lane(name: str, tag: str | None) -> None:
    event = _sample(name, tag)
    out = expand(*OPENERS, event)
    closed = {None: [END_P], "s1": [END_A], "s2": []}[tag]
    assert out == [*OPENED, *closed, event]
    assert out[-1] is event


@pytest.mark.parametrize("name", CLOSE_ALL_LANES)
def test_run_level_events_close_every_lane(name: str) -> None:
    event = _sample(name, None)
    assert expand(*OPENERS, event) == [*OPENED, END_P, END_A, event]


@pytest.mark.parametrize("name", CLOSE_SUBAGENT_LANE)
@pytest.mark.parametrize("tag", ["s1", "s2"])
def test_subagent_terminals_close_that_subagents_lane(name: str, tag: str) -> None:
    event = _sample(name, tag)
    closed = [END_A] if tag == "s1" else []
    assert expand(*OPENERS, event) == [*OPENED, *closed, event]


@pytest.mark.parametrize("name", CLOSE_NOTHING)
@pytest.mark.parametrize("tag", [None, "s1"])
def test_raw_activity_encrypted_value_and_subagent_started_close_nothing(
    name: str, tag: str | None
) -> None:
    event = _sample(name, tag)
    out = expand(
        *OPENERS,
        event,
        TChunk(delta="y"),
        CChunk(delta="{}", subagent_run_id="s1"),
    )
    # Both streams are still open: the continuations need no new START.
    assert out == [
        *OPENED,
        event,
        TContent(message_id="p", delta="y"),
        CArgs(tool_call_id="a", delta="{}", subagent_run_id="s1"),
    ]


def test_closing_event_on_a_lane_with_nothing_open_just_passes() -> None:
    custom = CustomEvent(name="c", value=1, subagent_run_id="s9")
    assert expand(custom) == [custom]


# ---------------------------------------------------------------------------------------------
# Continuations that contradict their opener, lane-tag mismatch, ambiguity


@pytest.mark.parametrize(
    ("opener", "continuation", "message"),
    [
        (
            TChunk(message_id="m", delta="x"),
            TChunk(role="user", delta="y"),
            (
                "Cannot continue text message 'm': chunk role 'user' does not match the open "
                "stream's role 'assistant'."
            ),
        ),
        (
            TChunk(message_id="m", role="user", delta="x"),
            TChunk(message_id="m", role="assistant"),
            (
                "Cannot continue text message 'm': chunk role 'assistant' does not match the open "
                "stream's role 'user'."
            ),
        ),
        (
            TChunk(message_id="m", delta="x"),
            TChunk(name="bot"),
            (
                "Cannot continue text message 'm': chunk name 'bot' does not match the open "
                "stream's name (absent)."
            ),
        ),
        (
            TChunk(message_id="m", name="a"),
            TChunk(message_id="m", name="b", delta="x"),
            (
                "Cannot continue text message 'm': chunk name 'b' does not match the open "
                "stream's name 'a'."
            ),
        ),
        (
            CChunk(tool_call_id="t", tool_call_name="f"),
            CChunk(tool_call_name="g", delta="{}"),
            (
                "Cannot continue tool call 't': chunk toolCallName 'g' does not match the open "
                "stream's toolCallName 'f'."
            ),
        ),
        (
            CChunk(tool_call_id="t", tool_call_name="f"),
            CChunk(tool_call_id="t", parent_message_id="pm"),
            (
                "Cannot continue tool call 't': chunk parentMessageId 'pm' does not match the open "
                "stream's parentMessageId (absent)."
            ),
        ),
        (
            CChunk(tool_call_id="t", tool_call_name="f", parent_message_id="p1"),
            CChunk(parent_message_id="p2"),
            (
                "Cannot continue tool call 't': chunk parentMessageId 'p2' does not match the open "
                "stream's parentMessageId 'p1'."
            ),
        ),
    ],
)
def test_a_continuation_that_contradicts_its_opener_is_an_error(
    opener: Event, continuation: Event, message: str
) -> None:
    with pytest.raises(ChunkError) as e:
        expand(opener, continuation)
    assert e.value.reason == message
    assert e.value.index == 1


def test_a_continuation_may_repeat_its_openers_fields() -> None:
    out = expand(
        TChunk(message_id="m", name="n", delta="a"),
        TChunk(message_id="m", role="assistant", name="n", delta="b"),
        CChunk(tool_call_id="t", tool_call_name="f", parent_message_id="m"),
        CChunk(tool_call_id="t", tool_call_name="f", parent_message_id="m", delta="{}"),
    )
    assert types(out) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
    ]


def test_a_new_id_is_an_opener_so_its_fields_are_not_compared() -> None:
    out = expand(TChunk(message_id="m1", role="user"), TChunk(message_id="m2", role="system"))
    assert out[-1] == TStart(message_id="m2", role="system")


@pytest.mark.parametrize(
    ("opener", "continuation", "message"),
    [
        (
            TChunk(message_id="a", delta="x"),
            TChunk(message_id="a", delta="y", subagent_run_id="s1"),
            (
                "Cannot continue text message 'a': chunk subagentRunId 's1' does not match the open "
                "stream's subagent '(the parent agent)'."
            ),
        ),
        (
            CChunk(tool_call_id="t", tool_call_name="f", subagent_run_id="s1"),
            CChunk(tool_call_id="t", delta="{}", subagent_run_id="s2"),
            (
                "Cannot continue tool call 't': chunk subagentRunId 's2' does not match the open "
                "stream's subagent 's1'."
            ),
        ),
        (
            RChunk(message_id="r", subagent_run_id="s1"),
            RChunk(message_id="r", metadata={"k": 1}, subagent_run_id=""),
            (
                "Cannot continue reasoning message 'r': chunk subagentRunId '' does not match the "
                "open stream's subagent 's1'."
            ),
        ),
    ],
)
def test_a_tag_that_contradicts_the_lane_holding_the_id_is_an_error(
    opener: Event, continuation: Event, message: str
) -> None:
    with pytest.raises(ChunkError) as e:
        expand(opener, continuation)
    assert e.value.reason == message
    assert e.value.path == "$.subagentRunId"


def test_an_untagged_chunk_naming_a_held_id_continues_in_the_holders_lane() -> None:
    out = expand(
        TChunk(message_id="a", delta="x", subagent_run_id="s1"),
        TChunk(message_id="a", delta="y"),
    )
    assert out[-1] == TContent(message_id="a", delta="y", subagent_run_id="s1")


@pytest.mark.parametrize(
    ("chunk", "open_a", "open_b", "message"),
    [
        (
            TChunk(delta="?"),
            TChunk(message_id="a", subagent_run_id="s1"),
            TChunk(message_id="b", subagent_run_id="s2"),
            (
                "Ambiguous TEXT_MESSAGE_CHUNK: it carries neither a messageId nor a subagentRunId, "
                "but 2 lanes have an open text message"
            ),
        ),
        (
            CChunk(delta="?"),
            CChunk(tool_call_id="a", tool_call_name="f", subagent_run_id="s1"),
            CChunk(tool_call_id="b", tool_call_name="f", subagent_run_id="s2"),
            (
                "Ambiguous TOOL_CALL_CHUNK: it carries neither a toolCallId nor a subagentRunId, "
                "but 2 lanes have an open tool call"
            ),
        ),
        (
            RChunk(metadata={"k": 1}),
            RChunk(message_id="a", subagent_run_id="s1"),
            RChunk(message_id="b", subagent_run_id="s2"),
            (
                "Ambiguous REASONING_MESSAGE_CHUNK: it carries neither a messageId nor a "
                "subagentRunId, but 2 lanes have an open reasoning message"
            ),
        ),
    ],
)
def test_an_idless_untagged_chunk_with_several_candidate_lanes_is_ambiguous(
    chunk: Event, open_a: Event, open_b: Event, message: str
) -> None:
    # The parent lane holds another kind of stream, so it is no candidate.
    other = (
        CChunk(tool_call_id="x", tool_call_name="f")
        if chunk.type != "TOOL_CALL_CHUNK"
        else TChunk(message_id="x")
    )
    with pytest.raises(ChunkError) as e:
        expand(open_a, open_b, other, chunk)
    assert e.value.reason.startswith(message)
    assert "'s1'" in e.value.reason and "'s2'" in e.value.reason
    assert e.value.index == 3


def test_an_idless_chunk_tagged_to_a_lane_with_nothing_of_its_kind_open_is_an_error() -> None:
    with pytest.raises(ChunkError, match=r"^First TEXT_MESSAGE_CHUNK must have a messageId"):
        expand(TChunk(message_id="a", delta="x"), TChunk(delta="y", subagent_run_id="s1"))
    with pytest.raises(ChunkError, match=r"^First TOOL_CALL_CHUNK must have a toolCallId"):
        expand(TChunk(message_id="a", subagent_run_id="s1"), CChunk(subagent_run_id="s1"))


def test_a_rejected_chunk_changes_nothing_in_keep_going_mode() -> None:
    reports: list[Report] = []
    out = run_sync(
        [ExpandChunks()],
        [
            TChunk(message_id="a", delta="x"),
            CChunk(delta="{}"),  # no id: rejected before it could close the text stream
            TChunk(delta="y"),
            TChunk(role="user"),  # contradicts the opener: rejected
            TChunk(delta="z"),
        ],
        mode="keep_going",
        on_report=reports.append,
    )
    assert out == [
        TStart(message_id="a", role="assistant"),
        TContent(message_id="a", delta="x"),
        TContent(message_id="a", delta="y"),
        TContent(message_id="a", delta="z"),
    ]
    assert [(r.code, r.index, r.severity) for r in reports] == [
        ("ChunkError", 1, "error"),
        ("ChunkError", 3, "error"),
    ]


# ---------------------------------------------------------------------------------------------
# Completion


def test_a_stream_that_ends_without_a_closing_event_gets_no_end() -> None:
    out = expand(
        TChunk(message_id="m", delta="Hi", subagent_run_id="s1"),
        CChunk(tool_call_id="t", tool_call_name="f"),
        RChunk(message_id="r", subagent_run_id="s2"),
        TChunk(metadata={"acme.usage": 3}, subagent_run_id="s1"),
    )
    assert out == [
        TStart(message_id="m", role="assistant", subagent_run_id="s1"),
        TContent(message_id="m", delta="Hi", subagent_run_id="s1"),
        CStart(tool_call_id="t", tool_call_name="f"),
        RStart(message_id="r", role="reasoning", subagent_run_id="s2"),
        TContent(message_id="m", delta="", subagent_run_id="s1", metadata={"acme.usage": 3}),
    ]


def test_close_emits_nothing_and_forgets_open_streams() -> None:
    out: list[Event] = []
    stage = ExpandChunks()
    feed = stage.connect(out.append, Context())
    feed(TChunk(message_id="m", delta="Hi"))
    feed(CChunk(tool_call_id="t", tool_call_name="f", subagent_run_id="s1"))
    del out[:]
    stage.close()
    assert out == []
    # Nothing is open any more: an id-less chunk has no stream to continue.
    with pytest.raises(ChunkError, match=r"^First TEXT_MESSAGE_CHUNK"):
        feed(TChunk(delta="x"))
    feed(FINISHED)
    assert out == [FINISHED]


def test_expand_chunks_returns_a_fresh_stage() -> None:
    a, b = ExpandChunks(), ExpandChunks()
    assert isinstance(a, ExpandChunks) and a is not b


# ---------------------------------------------------------------------------------------------
# Properties over random chunk streams (the event-for-event comparison with the reference's
# transformChunks was run outside the test suite, on many thousands of random streams).

_ids = st.sampled_from(["a", "b", ""])
_tags = st.sampled_from([UNSET, UNSET, "s1", "s2"])
_md = st.one_of(st.just(UNSET), st.fixed_dictionaries({"k": st.integers(0, 3)}))
_delta = st.sampled_from([UNSET, "", "x"])
_maybe = st.one_of(st.just(UNSET), _ids)


@st.composite
def _event(draw: st.DrawFn) -> Event:
    kind = draw(st.integers(0, 5))
    common: dict[str, Any] = {
        "subagent_run_id": draw(_tags),
        "metadata": draw(_md),
        "timestamp": draw(st.sampled_from([UNSET, 7])),
        "raw_event": draw(st.sampled_from([UNSET, UNSET, {"r": 1}])),
    }
    if kind == 0:
        return TChunk(message_id=draw(_maybe), delta=draw(_delta), **common)
    if kind == 1:
        name = draw(st.sampled_from([UNSET, "f", "f"]))
        return CChunk(tool_call_id=draw(_maybe), tool_call_name=name, delta=draw(_delta), **common)
    if kind == 2:
        return RChunk(message_id=draw(_maybe), delta=draw(_delta), **common)
    if kind == 3:
        return CustomEvent(name="c", value=None, **common)
    if kind == 4:
        return RawEvent(event=None, **common)
    del common["subagent_run_id"]
    return RunFinishedEvent(thread_id="t", run_id="r", **common)


@settings(max_examples=300, deadline=None)
@given(st.lists(_event(), max_size=25))
def test_expansion_properties(events: list[Event]) -> None:
    reports: list[Report] = []
    out = run_sync([ExpandChunks()], events, mode="keep_going", on_report=reports.append)
    passed = [e for e in events if not e.type.endswith("_CHUNK")]
    chunk_metadata = [id(e.metadata) for e in events if e.type.endswith("_CHUNK")]
    inputs = {id(e) for e in passed}
    # Non-chunk events come out unchanged (the same objects), in order; no chunk comes out.
    assert [e for e in out if id(e) in inputs] == passed
    synthesized = [e for e in out if id(e) not in inputs]
    assert not any(e.type.endswith("_CHUNK") for e in synthesized)
    open_now: set[tuple[str, str]] = set()
    for e in synthesized:
        assert e.timestamp is UNSET
        assert e.metadata is UNSET or id(e.metadata) in chunk_metadata
        kind, _, phase = e.type.rpartition("_")
        key = (kind, e.tool_call_id if kind == "TOOL_CALL" else e.message_id)
        if phase == "START":
            assert key not in open_now
            open_now.add(key)
        else:
            assert key in open_now
            if phase == "END":
                assert e.metadata is UNSET and e.raw_event is UNSET
                open_now.discard(key)
    assert all(r.code == "ChunkError" for r in reports)
