"""The accumulate stage: assembly parity with the reference reducer, and metadata per update.

Classes named after the reference client's test files port their scenarios (the official test
names are in the docstrings; see ../shared/reference/agui-rules-0.0.58.md). Expected values come
from the specification and the reference source (client/src/apply/default.ts 1.0.0);
:class:`TestAgainstTheOracle` runs further cases through the official client itself.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from agui_meta import (
    Accumulate,
    ApplyError,
    MessageItem,
    Report,
    Store,
    ToolCallItem,
    Update,
    UsageError,
    run_sync,
)
from agui_meta._runners import run_case
from agui_meta._stage import Context
from agui_meta.events import AnyEvent, Event
from tests.oracle import OracleServer, assert_same_result


def ev(type: str, **fields: Any) -> Event:
    """An event from its wire form (camelCase keys)."""
    event: Event = msgspec.convert({"type": type, **fields}, AnyEvent)
    return event


RUN = {"threadId": "t1", "runId": "r1"}


def run(
    events: list[Event], store: Store | None = None
) -> tuple[list[Update], Store, list[Report]]:
    store = store if store is not None else Store()
    reports: list[Report] = []
    updates = run_sync([Accumulate(store)], events, on_report=reports.append)
    return updates, store, reports


def wire(store: Store) -> list[dict[str, Any]]:
    return store.messages_wire()


def text(mid: str, content: str, **meta: Any) -> list[Event]:
    md = {"metadata": meta} if meta else {}
    return [
        ev("TEXT_MESSAGE_START", messageId=mid),
        ev("TEXT_MESSAGE_CONTENT", messageId=mid, delta=content, **md),
        ev("TEXT_MESSAGE_END", messageId=mid),
    ]


# ---------------------------------------------------------------------------------------------
# A-MD: default.metadata.test.ts


class TestMetadata:
    def test_merges_across_start_content_and_end_with_the_last_write_winning(self) -> None:
        """metadata merging into text messages > merges across start, content and end…"""
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", metadata={"a": 1, "k": "start"}),
                ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="Hi", metadata={"k": "content"}),
                ev("TEXT_MESSAGE_END", messageId="m", metadata={"usage": {"out": 3}, "k": "end"}),
            ]
        )
        assert wire(store) == [
            {
                "id": "m",
                "role": "assistant",
                "content": "Hi",
                "metadata": {"a": 1, "k": "end", "usage": {"out": 3}},
            }
        ]

    def test_keeps_a_null_value_rather_than_dropping_the_key(self) -> None:
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", metadata={"a": 1}),
                ev("TEXT_MESSAGE_END", messageId="m", metadata={"a": None}),
            ]
        )
        assert wire(store)[0]["metadata"] == {"a": None}

    def test_changes_nothing_when_a_later_event_carries_an_empty_object(self) -> None:
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", metadata={"a": 1}),
                ev("TEXT_MESSAGE_END", messageId="m", metadata={}),
            ]
        )
        assert wire(store)[0]["metadata"] == {"a": 1}

    def test_an_empty_object_creates_an_empty_metadata_object(self) -> None:
        """The reference materialises ``{}`` on a target that had none (M3, observed)."""
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", metadata={}),
                ev("TEXT_MESSAGE_END", messageId="m"),
            ]
        )
        assert wire(store)[0]["metadata"] == {}

    def test_leaves_metadata_absent_when_no_event_carries_any(self) -> None:
        _, store, _ = run(text("m", "x"))
        assert "metadata" not in wire(store)[0]

    def test_does_not_alias_the_event_payload_into_the_message(self) -> None:
        payload = {"usage": {"in": 1}, "tags": ["a"]}
        start = ev("TEXT_MESSAGE_START", messageId="m", metadata=payload)
        _, store, _ = run([start])
        assert start.metadata is not UNSET
        start.metadata["usage"]["in"] = 99
        start.metadata["tags"].append("b")
        start.metadata["new"] = True
        assert wire(store)[0]["metadata"] == {"usage": {"in": 1}, "tags": ["a"]}

    def test_replaces_a_nested_object_under_the_reserved_key_instead_of_deep_merging(self) -> None:
        """wholesale replacement > replaces a nested object under the reserved key…"""
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", metadata={"ag-ui": {"a": 1, "b": 2}}),
                ev("TEXT_MESSAGE_END", messageId="m", metadata={"ag-ui": {"c": 3}}),
            ]
        )
        assert wire(store)[0]["metadata"] == {"ag-ui": {"c": 3}}

    def test_replaces_an_array_instead_of_concatenating_it(self) -> None:
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", metadata={"v": [1, 2]}),
                ev("TEXT_MESSAGE_END", messageId="m", metadata={"v": [3]}),
            ]
        )
        assert wire(store)[0]["metadata"] == {"v": [3]}

    def test_merges_tool_call_event_metadata_into_the_tool_call_itself(self) -> None:
        """metadata on tool calls and results > … also asserts the assistant has no metadata."""
        _, store, _ = run(
            [
                ev(
                    "TOOL_CALL_START",
                    toolCallId="c",
                    toolCallName="f",
                    parentMessageId="m",
                    metadata={"s": 1},
                ),
                ev("TOOL_CALL_ARGS", toolCallId="c", delta="{}", metadata={"a": 2}),
                ev("TOOL_CALL_END", toolCallId="c", metadata={"e": 3, "s": 4}),
            ]
        )
        [message] = wire(store)
        assert "metadata" not in message
        assert message["toolCalls"] == [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
                "metadata": {"s": 4, "a": 2, "e": 3},
            }
        ]

    def test_puts_tool_result_metadata_on_the_tool_message_it_creates(self) -> None:
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
                ev("TOOL_CALL_END", toolCallId="c"),
                ev(
                    "TOOL_CALL_RESULT",
                    messageId="r",
                    toolCallId="c",
                    content="ok",
                    metadata={"ms": 5},
                ),
            ]
        )
        assistant, tool = wire(store)
        assert "metadata" not in assistant
        assert tool == {
            "id": "r",
            "role": "tool",
            "toolCallId": "c",
            "content": "ok",
            "metadata": {"ms": 5},
        }

    def test_merges_across_the_reasoning_message_lifecycle(self) -> None:
        _, store, _ = run(
            [
                ev("REASONING_MESSAGE_START", messageId="r", role="reasoning", metadata={"a": 1}),
                ev("REASONING_MESSAGE_CONTENT", messageId="r", delta="th", metadata={"b": 2}),
                ev("REASONING_MESSAGE_END", messageId="r", metadata={"a": 3}),
            ]
        )
        assert wire(store) == [
            {"id": "r", "role": "reasoning", "content": "th", "metadata": {"a": 3, "b": 2}}
        ]

    def test_keeps_encrypted_value_metadata_off_the_message_it_names(self) -> None:
        updates, store, _ = run(
            [
                ev("REASONING_MESSAGE_START", messageId="r", role="reasoning"),
                ev("REASONING_MESSAGE_END", messageId="r"),
                ev(
                    "REASONING_ENCRYPTED_VALUE",
                    subtype="message",
                    entityId="r",
                    encryptedValue="xyz",
                    metadata={"k": 1},
                ),
            ]
        )
        assert wire(store) == [
            {"id": "r", "role": "reasoning", "content": "", "encryptedValue": "xyz"}
        ]
        assert updates[-1].item is None

    def test_encrypted_value_on_a_tool_call_leaves_its_metadata_untouched(self) -> None:
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", metadata={"a": 1}),
                ev(
                    "REASONING_ENCRYPTED_VALUE",
                    subtype="tool-call",
                    entityId="c",
                    encryptedValue="e",
                    metadata={"b": 2},
                ),
            ]
        )
        [call] = wire(store)[0]["toolCalls"]
        assert call["encryptedValue"] == "e"
        assert call["metadata"] == {"a": 1}

    def test_keeps_accumulated_metadata_when_a_replacing_snapshot_carries_none(self) -> None:
        """metadata on activity messages > keeps accumulated metadata when a replacing…"""
        _, store, _ = run(
            [
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="a",
                    activityType="plan",
                    content={"s": 1},
                    metadata={"k": 1},
                ),
                ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="plan2", content={"s": 2}),
            ]
        )
        assert wire(store) == [
            {
                "id": "a",
                "role": "activity",
                "activityType": "plan2",
                "content": {"s": 2},
                "metadata": {"k": 1},
            }
        ]

    def test_merges_across_a_snapshot_and_a_following_delta(self) -> None:
        _, store, _ = run(
            [
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="a",
                    activityType="p",
                    content={"n": 1},
                    metadata={"a": 1},
                ),
                ev(
                    "ACTIVITY_DELTA",
                    messageId="a",
                    activityType="p",
                    patch=[{"op": "replace", "path": "/n", "value": 2}],
                    metadata={"b": 2},
                ),
            ]
        )
        assert wire(store)[0]["content"] == {"n": 2}
        assert wire(store)[0]["metadata"] == {"a": 1, "b": 2}

    def test_activity_delta_still_merges_metadata_but_leaves_content_unchanged(self) -> None:
        """activity delta metadata when the patch fails > still merges metadata but leaves…"""
        _, store, reports = run(
            [
                ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={"n": 1}),
                ev(
                    "ACTIVITY_DELTA",
                    messageId="a",
                    activityType="other",
                    patch=[{"op": "remove", "path": "/missing"}],
                    metadata={"usage": 1},
                ),
            ]
        )
        assert wire(store) == [
            {
                "id": "a",
                "role": "activity",
                "activityType": "p",
                "content": {"n": 1},
                "metadata": {"usage": 1},
            }
        ]
        assert [r.code for r in reports] == ["patch-failed"]

    def test_carries_each_messages_own_metadata_and_does_not_leak_the_events(self) -> None:
        """metadata through a messages snapshot > carries each message's own metadata…"""
        _, store, _ = run(
            [
                ev(
                    "MESSAGES_SNAPSHOT",
                    metadata={"snap": 1},
                    messages=[
                        {"id": "u", "role": "user", "content": "q", "metadata": {"own": 1}},
                        {"id": "a", "role": "assistant", "content": "r"},
                    ],
                )
            ]
        )
        assert wire(store) == [
            {"id": "u", "role": "user", "content": "q", "metadata": {"own": 1}},
            {"id": "a", "role": "assistant", "content": "r"},
        ]

    def test_merges_a_later_events_metadata_onto_a_snapshot_provided_message(self) -> None:
        _, store, _ = run(
            [
                ev(
                    "MESSAGES_SNAPSHOT",
                    messages=[
                        {"id": "a", "role": "assistant", "content": "r", "metadata": {"x": 1}}
                    ],
                ),
                ev("TEXT_MESSAGE_START", messageId="a", metadata={"y": 2}),
                ev("TEXT_MESSAGE_CONTENT", messageId="a", delta="!"),
            ]
        )
        assert wire(store) == [
            {"id": "a", "role": "assistant", "content": "r!", "metadata": {"x": 1, "y": 2}}
        ]

    def test_never_reaches_a_message_from_run_started_step_started_or_run_finished(self) -> None:
        events = [
            ev("RUN_STARTED", **RUN, metadata={"run": 1}),
            ev("STEP_STARTED", stepName="s", metadata={"step": 1}),
            *text("m", "x"),
            ev("STEP_FINISHED", stepName="s", metadata={"step": 2}),
            ev("RUN_FINISHED", **RUN, metadata={"usage": 9}),
        ]
        _, store, _ = run(events)
        assert wire(store) == [{"id": "m", "role": "assistant", "content": "x"}]

    def test_lands_a_final_usage_only_chunks_metadata_on_the_message(self) -> None:
        """chunked stream end to end > lands a final usage-only chunk's metadata on the message."""
        case = {
            "name": "chunk-usage",
            "events": [
                {"type": "RUN_STARTED", **RUN},
                {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "Hel"},
                {"type": "TEXT_MESSAGE_CHUNK", "delta": "lo"},
                {"type": "TEXT_MESSAGE_CHUNK", "metadata": {"usage": {"total": 7}}},
            ],
        }
        assert run_case(case) == {
            "name": "chunk-usage",
            "messages": [
                {
                    "id": "m",
                    "role": "assistant",
                    "content": "Hello",
                    "metadata": {"usage": {"total": 7}},
                }
            ],
            "state": {},
        }


# ---------------------------------------------------------------------------------------------
# A-TXT: default.text-message.test.ts


class TestTextMessage:
    def test_should_handle_text_message_events_correctly(self) -> None:
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", role="assistant"),
                ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="Hello "),
                ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="world"),
                ev("TEXT_MESSAGE_END", messageId="m"),
            ]
        )
        assert wire(store) == [{"id": "m", "role": "assistant", "content": "Hello world"}]

    def test_should_handle_multiple_text_messages_correctly(self) -> None:
        _, store, _ = run([*text("a", "one"), *text("b", "two")])
        assert [(m["id"], m["content"]) for m in wire(store)] == [("a", "one"), ("b", "two")]

    def test_defaults_the_role_to_assistant_and_keeps_an_explicit_role(self) -> None:
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="a"),
                ev("TEXT_MESSAGE_START", messageId="u", role="user"),
            ]
        )
        assert [m["role"] for m in wire(store)] == ["assistant", "user"]

    def test_should_set_name_on_message_when_text_message_start_has_name(self) -> None:
        _, store, _ = run([ev("TEXT_MESSAGE_START", messageId="m", name="bot")])
        assert wire(store)[0]["name"] == "bot"

    def test_should_not_set_name_on_message_when_text_message_start_has_no_name(self) -> None:
        _, store, _ = run([ev("TEXT_MESSAGE_START", messageId="m")])
        assert "name" not in wire(store)[0]

    def test_should_not_create_duplicate_message_when_start_uses_a_tool_call_parent_id(
        self,
    ) -> None:
        """should not create duplicate message when TEXT_MESSAGE_START uses same ID as
        TOOL_CALL_START parentMessageId"""
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
                ev("TOOL_CALL_END", toolCallId="c"),
                ev("TEXT_MESSAGE_START", messageId="m", name="late"),
                ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="text"),
                ev("TEXT_MESSAGE_END", messageId="m"),
            ]
        )
        [message] = wire(store)
        assert message["content"] == "text"
        assert "name" not in message  # a reused message keeps its role and name
        assert [c["id"] for c in message["toolCalls"]] == ["c"]

    def test_a_start_on_an_existing_user_message_keeps_its_role_and_replaces_parts(self) -> None:
        store = Store([{"id": "u", "role": "user", "content": [{"type": "text", "text": "p"}]}])
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="u", role="assistant"),
                ev("TEXT_MESSAGE_CONTENT", messageId="u", delta="x"),
            ],
            store,
        )
        assert wire(store) == [{"id": "u", "role": "user", "content": "x"}]

    def test_attribution_is_copied_onto_the_created_message_only(self) -> None:
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", subagentRunId="s1"),
                ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="x", subagentRunId="s2"),
                ev("TEXT_MESSAGE_START", messageId="n"),
                ev("TEXT_MESSAGE_CONTENT", messageId="n", delta="y", subagentRunId="s3"),
            ]
        )
        assert [m.get("subagentRunId") for m in wire(store)] == ["s1", None]

    def test_content_for_an_unknown_message_is_reported_and_skipped(self) -> None:
        updates, store, reports = run(
            [
                ev("TEXT_MESSAGE_CONTENT", messageId="nope", delta="x", metadata={"k": 1}),
                ev("TEXT_MESSAGE_END", messageId="nope"),
            ]
        )
        assert wire(store) == []
        assert [u.item for u in updates] == [None, None]
        assert [r.code for r in reports] == ["missing-target", "missing-target"]
        assert "No message found with ID 'nope'" in reports[0].message

    @pytest.mark.parametrize(
        "events",
        [
            [ev("TEXT_MESSAGE_START", messageId="a", metadata={"x": 1})],
            [ev("TEXT_MESSAGE_CONTENT", messageId="a", delta="t", metadata={"x": 1})],
            [ev("TEXT_MESSAGE_END", messageId="a", metadata={"x": 1})],
            [ev("REASONING_MESSAGE_START", messageId="a", role="reasoning", metadata={"x": 1})],
            [ev("REASONING_MESSAGE_CONTENT", messageId="a", delta="t", metadata={"x": 1})],
            [ev("REASONING_MESSAGE_END", messageId="a", metadata={"x": 1})],
        ],
        ids=["text-start", "text-content", "text-end", "rsn-start", "rsn-content", "rsn-end"],
    )
    def test_text_and_reasoning_aimed_at_an_activity_message_are_dropped(
        self, events: list[Event]
    ) -> None:
        first = ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={"k": 1})
        updates, store, reports = run([first, *events])
        assert wire(store) == [
            {"id": "a", "role": "activity", "activityType": "p", "content": {"k": 1}}
        ]
        assert updates[-1].item is None
        assert [r.code for r in reports] == ["activity-collision"]


# ---------------------------------------------------------------------------------------------
# A-TC: default.tool-calls.test.ts, and A-CONC: default.concurrent.test.ts


def _call(call_id: str, name: str = "f", arguments: str = "") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class TestToolCalls:
    def test_should_handle_a_single_tool_call_correctly(self) -> None:
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="search"),
                ev("TOOL_CALL_ARGS", toolCallId="c", delta='{"q":'),
                ev("TOOL_CALL_ARGS", toolCallId="c", delta='"x"}'),
                ev("TOOL_CALL_END", toolCallId="c"),
            ]
        )
        assert wire(store) == [
            {"id": "c", "role": "assistant", "toolCalls": [_call("c", "search", '{"q":"x"}')]}
        ]

    def test_should_handle_multiple_tool_calls_correctly(self) -> None:
        """Calls without a parent get an assistant message each, keyed by the call id."""
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c1", toolCallName="a"),
                ev("TOOL_CALL_END", toolCallId="c1"),
                ev("TOOL_CALL_START", toolCallId="c2", toolCallName="b"),
                ev("TOOL_CALL_END", toolCallId="c2"),
            ]
        )
        assert [(m["id"], len(m["toolCalls"])) for m in wire(store)] == [("c1", 1), ("c2", 1)]

    def test_should_handle_tool_calls_with_parent_message_id_correctly(self) -> None:
        _, store, _ = run(
            [
                *text("m", "let me look"),
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
                ev("TOOL_CALL_END", toolCallId="c"),
            ]
        )
        assert wire(store) == [
            {"id": "m", "role": "assistant", "content": "let me look", "toolCalls": [_call("c")]}
        ]

    def test_should_find_parent_via_full_array_search_when_multiple_messages_precede_it(
        self,
    ) -> None:
        store = Store(
            [
                {"id": "u1", "role": "user", "content": "q"},
                {"id": "m", "role": "assistant", "content": ""},
                {"id": "u2", "role": "user", "content": "q2"},
            ]
        )
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
                ev("TOOL_CALL_RESULT", messageId="r1", toolCallId="c", content="1"),
                ev("TOOL_CALL_RESULT", messageId="r2", toolCallId="c", content="2"),
            ],
            store,
        )
        assert [m["id"] for m in wire(store)] == ["u1", "m", "r1", "r2", "u2"]

    def test_should_find_parent_via_full_array_search_when_result_sits_between_two_calls(
        self,
    ) -> None:
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c1", toolCallName="f", parentMessageId="m"),
                ev("TOOL_CALL_RESULT", messageId="r1", toolCallId="c1", content="1"),
                ev("TOOL_CALL_START", toolCallId="c2", toolCallName="g", parentMessageId="m"),
            ]
        )
        assert [m["id"] for m in wire(store)] == ["m", "r1"]
        assert [c["id"] for c in wire(store)[0]["toolCalls"]] == ["c1", "c2"]

    def test_should_fall_back_to_tool_call_id_when_parent_collides_with_a_non_assistant(
        self,
    ) -> None:
        store = Store([{"id": "u", "role": "user", "content": "q"}])
        _, store, reports = run(
            [ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="u")], store
        )
        assert [(m["id"], m["role"]) for m in wire(store)] == [("u", "user"), ("c", "assistant")]
        assert [r.code for r in reports] == ["parent-not-assistant"]

    def test_should_create_new_assistant_message_when_parent_is_not_found_anywhere(self) -> None:
        _, store, _ = run(
            [ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="p")]
        )
        assert wire(store) == [{"id": "p", "role": "assistant", "toolCalls": [_call("c")]}]

    def test_an_empty_parent_id_counts_as_absent(self) -> None:
        _, store, _ = run(
            [ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="")]
        )
        assert wire(store)[0]["id"] == "c"

    def test_a_created_owner_takes_the_start_events_tag(self) -> None:
        _, store, _ = run(
            [
                ev(
                    "TOOL_CALL_START",
                    toolCallId="c",
                    toolCallName="f",
                    parentMessageId="p",
                    subagentRunId="s",
                ),
                ev(
                    "TOOL_CALL_START",
                    toolCallId="d",
                    toolCallName="f",
                    parentMessageId="p",
                    subagentRunId="t",
                ),
            ]
        )
        [owner] = wire(store)
        assert owner["subagentRunId"] == "s"
        assert all("subagentRunId" not in call for call in owner["toolCalls"])

    def test_places_a_result_right_after_its_call_even_after_a_trailing_text(self) -> None:
        """places a tool result immediately after its tool call even when the result arrives
        after a trailing assistant text"""
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m1"),
                ev("TOOL_CALL_END", toolCallId="c"),
                ev("TOOL_CALL_RESULT", messageId="t1", toolCallId="c", content="a"),
                *text("txt", "follow-up"),
                ev("TOOL_CALL_RESULT", messageId="t2", toolCallId="c", content="b"),
            ]
        )
        assert [m["id"] for m in wire(store)] == ["m1", "t1", "t2", "txt"]

    def test_a_result_without_an_owner_is_appended_and_ids_are_not_deduplicated(self) -> None:
        _, store, _ = run(
            [
                ev("TOOL_CALL_RESULT", messageId="r", toolCallId="x", content="a"),
                ev("TOOL_CALL_RESULT", messageId="r", toolCallId="x", content="b"),
            ]
        )
        assert [(m["id"], m["content"]) for m in wire(store)] == [("r", "a"), ("r", "b")]

    def test_does_not_append_a_second_entry_when_the_same_start_is_applied_twice(self) -> None:
        """TOOL_CALL_START idempotency > does not append a second entry when the same
        TOOL_CALL_START is applied twice"""
        start = ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m")
        _, store, _ = run([start, ev("TOOL_CALL_ARGS", toolCallId="c", delta="{}"), start])
        assert wire(store) == [
            {"id": "m", "role": "assistant", "toolCalls": [_call("c", "f", "{}")]}
        ]

    def test_does_not_append_a_second_entry_for_a_call_carried_from_a_previous_run(self) -> None:
        store = Store([{"id": "m", "role": "assistant", "toolCalls": [_call("c", "f", "{}")]}])
        _, store, _ = run(
            [ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m")], store
        )
        assert wire(store) == [
            {"id": "m", "role": "assistant", "toolCalls": [_call("c", "f", "{}")]}
        ]

    def test_does_not_create_a_stray_assistant_when_a_replay_names_an_unknown_parent(
        self,
    ) -> None:
        _, store, _ = run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m"),
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="other"),
            ]
        )
        assert [m["id"] for m in wire(store)] == ["m"]

    def test_updates_the_existing_entry_in_place_when_a_start_reuses_an_id_under_a_new_name(
        self,
    ) -> None:
        updates, store, reports = run(
            [
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="old", metadata={"a": 1}),
                ev("TOOL_CALL_ARGS", toolCallId="c", delta="{}"),
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="new", metadata={"b": 2}),
            ]
        )
        [call] = wire(store)[0]["toolCalls"]
        assert call["function"] == {"name": "new", "arguments": "{}"}
        assert call["metadata"] == {"a": 1, "b": 2}
        assert updates[0].item is updates[2].item
        assert [r.code for r in reports] == ["tool-call-renamed"]
        assert "'c'" in reports[0].message

    def test_args_and_end_for_an_unknown_call_are_reported_and_skipped(self) -> None:
        updates, store, reports = run(
            [ev("TOOL_CALL_ARGS", toolCallId="x", delta="{}"), ev("TOOL_CALL_END", toolCallId="x")]
        )
        assert wire(store) == [] and [u.item for u in updates] == [None, None]
        assert [r.code for r in reports] == ["missing-target"] * 2

    def test_tool_calls_have_their_own_key_space(self) -> None:
        """A tool call id equal to a message id does not make the message its owner."""
        _, store, _ = run(
            [
                *text("same", "hello"),
                ev("TOOL_CALL_START", toolCallId="same", toolCallName="f", parentMessageId="p"),
                ev("TOOL_CALL_ARGS", toolCallId="same", delta="{}"),
                ev("TEXT_MESSAGE_START", messageId="same"),
                ev("TEXT_MESSAGE_CONTENT", messageId="same", delta="!"),
            ]
        )
        assert wire(store) == [
            {"id": "same", "role": "assistant", "content": "hello!"},
            {"id": "p", "role": "assistant", "toolCalls": [_call("same", "f", "{}")]},
        ]


class TestConcurrent:
    def test_should_handle_multiple_tool_calls_on_the_same_parent_message(self) -> None:
        events = [
            ev("TOOL_CALL_START", toolCallId=f"c{i}", toolCallName=f"f{i}", parentMessageId="m")
            for i in range(3)
        ]
        events += [ev("TOOL_CALL_ARGS", toolCallId=f"c{i}", delta=str(i)) for i in (2, 0, 1)]
        events += [ev("TOOL_CALL_END", toolCallId=f"c{i}") for i in (1, 2, 0)]
        _, store, _ = run(events)
        [owner] = wire(store)
        assert owner["toolCalls"] == [_call(f"c{i}", f"f{i}", str(i)) for i in range(3)]

    def test_interleaved_text_messages_keep_their_own_content_and_metadata(self) -> None:
        _, store, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="a", metadata={"who": "a"}),
                ev("TEXT_MESSAGE_START", messageId="b", metadata={"who": "b"}),
                ev("TEXT_MESSAGE_CONTENT", messageId="b", delta="B1"),
                ev("TEXT_MESSAGE_CONTENT", messageId="a", delta="A1", metadata={"n": 1}),
                ev("TEXT_MESSAGE_CONTENT", messageId="b", delta="B2"),
                ev("TEXT_MESSAGE_END", messageId="a"),
                ev("TEXT_MESSAGE_END", messageId="b", metadata={"n": 2}),
            ]
        )
        assert wire(store) == [
            {"id": "a", "role": "assistant", "content": "A1", "metadata": {"who": "a", "n": 1}},
            {"id": "b", "role": "assistant", "content": "B1B2", "metadata": {"who": "b", "n": 2}},
        ]


# ---------------------------------------------------------------------------------------------
# A-RSN: default.reasoning.test.ts


class TestReasoning:
    def test_creates_a_reasoning_message_and_no_message_for_the_span(self) -> None:
        _, store, _ = run(
            [
                ev("REASONING_START", messageId="span"),
                ev("REASONING_MESSAGE_START", messageId="r", role="reasoning", subagentRunId="s"),
                ev("REASONING_MESSAGE_CONTENT", messageId="r", delta="think"),
                ev("REASONING_MESSAGE_END", messageId="r"),
                ev("REASONING_END", messageId="span"),
            ]
        )
        assert wire(store) == [
            {"id": "r", "role": "reasoning", "content": "think", "subagentRunId": "s"}
        ]

    def test_should_not_create_duplicate_message_when_start_uses_existing_message_id(
        self,
    ) -> None:
        def part(delta: str) -> list[Event]:
            return [
                ev("REASONING_MESSAGE_START", messageId="r", role="reasoning"),
                ev("REASONING_MESSAGE_CONTENT", messageId="r", delta=delta),
                ev("REASONING_MESSAGE_END", messageId="r"),
            ]

        _, store, _ = run([*part("First part"), *part(" Second part")])
        assert wire(store) == [
            {"id": "r", "role": "reasoning", "content": "First part Second part"}
        ]

    def test_a_reasoning_start_on_an_existing_assistant_message_keeps_its_role(self) -> None:
        store = Store([{"id": "a", "role": "assistant", "content": "c"}])
        _, store, _ = run(
            [
                ev("REASONING_MESSAGE_START", messageId="a", role="reasoning"),
                ev("REASONING_MESSAGE_CONTENT", messageId="a", delta="+"),
            ],
            store,
        )
        assert wire(store) == [{"id": "a", "role": "assistant", "content": "c+"}]

    @pytest.mark.parametrize(
        "chunk",
        [
            ev("TEXT_MESSAGE_CHUNK", messageId="m", delta="x"),
            ev("TOOL_CALL_CHUNK", toolCallId="c", toolCallName="f"),
            ev("REASONING_MESSAGE_CHUNK", messageId="r", delta="x"),
        ],
        ids=lambda e: e.type,
    )
    def test_should_throw_error_for_a_chunk_that_was_not_transformed(self, chunk: Event) -> None:
        with pytest.raises(ApplyError, match=f"{chunk.type} must be transformed before being"):
            run([chunk])

    def test_encrypted_value_on_a_message_of_any_role_but_activity(self) -> None:
        store = Store(
            [
                {"id": "u", "role": "user", "content": "q"},
                {"id": "a", "role": "activity", "activityType": "p", "content": {}},
            ]
        )
        _, store, _ = run(
            [
                ev(
                    "REASONING_ENCRYPTED_VALUE", subtype="message", entityId="u", encryptedValue="1"
                ),
                ev(
                    "REASONING_ENCRYPTED_VALUE", subtype="message", entityId="a", encryptedValue="2"
                ),
                ev(
                    "REASONING_ENCRYPTED_VALUE",
                    subtype="tool-call",
                    entityId="u",
                    encryptedValue="3",
                ),
            ],
            store,
        )
        assert wire(store) == [
            {"id": "u", "role": "user", "content": "q", "encryptedValue": "1"},
            {"id": "a", "role": "activity", "activityType": "p", "content": {}},
        ]


# ---------------------------------------------------------------------------------------------
# A-ACT: default.activity.test.ts


def _activity(
    mid: str, content: dict[str, Any], atype: str = "plan", **extra: Any
) -> dict[str, Any]:
    return {"id": mid, "role": "activity", "activityType": atype, "content": content, **extra}


class TestActivity:
    def test_creates_and_updates_activity_messages_via_snapshot_and_delta(self) -> None:
        _, store, _ = run(
            [
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="a",
                    activityType="plan",
                    content={"steps": ["x"]},
                ),
                ev(
                    "ACTIVITY_DELTA",
                    messageId="a",
                    activityType="plan",
                    patch=[{"op": "add", "path": "/steps/-", "value": "y"}],
                ),
            ]
        )
        assert wire(store) == [_activity("a", {"steps": ["x", "y"]})]

    def test_appends_operations_via_delta_when_snapshot_starts_with_an_empty_array(self) -> None:
        _, store, _ = run(
            [
                ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="log", content={"ops": []}),
                ev(
                    "ACTIVITY_DELTA",
                    messageId="a",
                    activityType="log",
                    patch=[{"op": "add", "path": "/ops/-", "value": {"n": 1}}],
                ),
                ev(
                    "ACTIVITY_DELTA",
                    messageId="a",
                    activityType="log",
                    patch=[{"op": "add", "path": "/ops/-", "value": {"n": 2}}],
                ),
            ]
        )
        assert wire(store) == [_activity("a", {"ops": [{"n": 1}, {"n": 2}]}, "log")]

    def test_a_delta_sets_the_activity_type_from_the_event(self) -> None:
        _, store, _ = run(
            [
                ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={}),
                ev("ACTIVITY_DELTA", messageId="a", activityType="q", patch=[]),
            ]
        )
        assert wire(store) == [_activity("a", {}, "q")]

    def test_does_not_replace_existing_activity_message_when_replace_is_false(self) -> None:
        _, store, _ = run(
            [
                ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={"v": 1}),
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="a",
                    activityType="q",
                    content={"v": 2},
                    replace=False,
                    metadata={"m": 1},
                ),
            ]
        )
        assert wire(store) == [_activity("a", {"v": 1}, "p", metadata={"m": 1})]

    def test_adds_activity_message_when_replace_is_false_and_none_exists(self) -> None:
        _, store, _ = run(
            [ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={}, replace=False)]
        )
        assert wire(store) == [_activity("a", {}, "p")]

    def test_replaces_existing_activity_message_when_replace_is_true(self) -> None:
        _, store, _ = run(
            [
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="a",
                    activityType="p",
                    content={"v": 1},
                    subagentRunId="s",
                ),
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="a",
                    activityType="q",
                    content={"w": 2},
                    replace=True,
                ),
            ]
        )
        # Re-attributed to the replacing event's tag: here none.
        assert wire(store) == [_activity("a", {"w": 2}, "q")]

    def test_replaces_non_activity_message_when_replace_is_true(self) -> None:
        store = Store([{"id": "m", "role": "user", "content": "q", "metadata": {"old": 1}}])
        _, store, _ = run(
            [
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="m",
                    activityType="p",
                    content={"v": 1},
                    metadata={"new": 1},
                )
            ],
            store,
        )
        assert wire(store) == [_activity("m", {"v": 1}, "p", metadata={"new": 1})]

    def test_does_not_alter_non_activity_message_when_replace_is_false(self) -> None:
        store = Store([{"id": "m", "role": "user", "content": "q"}])
        updates, store, _ = run(
            [
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="m",
                    activityType="p",
                    content={},
                    replace=False,
                    metadata={"k": 1},
                )
            ],
            store,
        )
        assert wire(store) == [{"id": "m", "role": "user", "content": "q"}]
        assert updates[0].item is None

    def test_maintains_replace_semantics_across_runs(self) -> None:
        store = Store()
        run([ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={"v": 1})], store)
        run(
            [
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="a",
                    activityType="p",
                    content={"v": 2},
                    replace=False,
                )
            ],
            store,
        )
        assert wire(store) == [_activity("a", {"v": 1}, "p")]
        run([ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={"v": 3})], store)
        assert wire(store) == [_activity("a", {"v": 3}, "p")]

    def test_a_delta_for_an_unknown_id_is_ignored_as_the_reference_does_with_a_report(
        self,
    ) -> None:
        updates, store, reports = run(
            [ev("ACTIVITY_DELTA", messageId="x", activityType="p", patch=[], metadata={"k": 1})]
        )
        assert wire(store) == [] and updates[0].item is None
        # The reference drops it without a word; its patch and metadata are lost, so: a report.
        [report] = reports
        assert (report.code, report.path, report.index) == ("missing-target", "$.messageId", 0)
        assert "its patch and its metadata" in report.message

    def test_a_delta_aimed_at_a_non_activity_message_is_reported_and_ignored(self) -> None:
        store = Store([{"id": "m", "role": "user", "content": "q"}])
        updates, store, reports = run(
            [ev("ACTIVITY_DELTA", messageId="m", activityType="p", patch=[], metadata={"k": 1})],
            store,
        )
        assert wire(store) == [{"id": "m", "role": "user", "content": "q"}]
        assert updates[0].item is None
        assert [r.code for r in reports] == ["not-activity"]

    def test_the_snapshot_content_is_copied(self) -> None:
        snapshot = ev("ACTIVITY_SNAPSHOT", messageId="a", activityType="p", content={"v": [1]})
        _, store, _ = run([snapshot])
        assert isinstance(snapshot, msgspec.Struct)
        snapshot.content["v"].append(2)  # type: ignore[attr-defined]
        assert wire(store) == [_activity("a", {"v": [1]}, "p")]


def _snapshot(*messages: dict[str, Any], **fields: Any) -> Event:
    return ev("MESSAGES_SNAPSHOT", messages=list(messages), **fields)


def _user(mid: str, content: str = "q") -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": content}


class TestMessagesSnapshot:
    """MESSAGES_SNAPSHOT preserves client-only messages (A-ACT) and merges by id (§7)."""

    def ids(self, history: list[dict[str, Any]], *events: Event) -> list[str]:
        _, store, _ = run(list(events), Store(history))
        return [m["id"] for m in wire(store)]

    def test_preserves_activity_message_between_conversation_messages(self) -> None:
        history = [_user("u1"), _activity("act", {}), _user("u2")]
        assert self.ids(history, _snapshot(_user("u1"), _user("u2"))) == ["u1", "act", "u2"]

    def test_keeps_activity_message_ordering_after_its_anchor(self) -> None:
        history = [_user("u1"), _activity("act", {}), _user("u2")]
        snapshot = _snapshot(_user("u1"), _user("u2"), _user("u3"))
        assert self.ids(history, snapshot) == ["u1", "act", "u2", "u3"]

    def test_preserves_multiple_activities_with_different_anchors(self) -> None:
        history = [_user("u1"), _activity("a1", {}), _user("u2"), _activity("a2", {})]
        assert self.ids(history, _snapshot(_user("u1"), _user("u2"))) == ["u1", "a1", "u2", "a2"]

    def test_keeps_activities_in_position_when_new_messages_are_added_by_snapshot(self) -> None:
        history = [_user("u1"), _activity("act", {})]
        snapshot = _snapshot(_user("u1"), _user("u2"), _user("u3"))
        assert self.ids(history, snapshot) == ["u1", "act", "u2", "u3"]

    def test_preserves_both_activity_and_reasoning_messages(self) -> None:
        history = [
            _user("u1"),
            {"id": "r", "role": "reasoning", "content": "t"},
            _activity("act", {}),
        ]
        assert self.ids(history, _snapshot(_user("u1"))) == ["u1", "r", "act"]

    def test_updates_an_id_stable_reasoning_message_with_the_snapshot_version(self) -> None:
        """1.0: a matching id always takes the snapshot's version, whatever its role."""
        history = [_user("u"), {"id": "r1", "role": "reasoning", "content": "streamed"}]
        snapshot = _snapshot(_user("u"), {"id": "r1", "role": "assistant", "content": "canon"})
        _, store, _ = run([snapshot], Store(history))
        assert wire(store)[1] == {"id": "r1", "role": "assistant", "content": "canon"}

    def test_replaces_streamed_reasoning_when_the_snapshot_arrives_before_the_assistant(
        self,
    ) -> None:
        history = [_user("u"), {"id": "r-stream", "role": "reasoning", "content": "t"}]
        snapshot = _snapshot(
            _user("u"),
            {"id": "r-canon", "role": "reasoning", "content": "t"},
            {"id": "a", "role": "assistant", "content": "answer"},
        )
        assert self.ids(history, snapshot) == ["u", "r-canon", "a"]

    def test_converges_multi_turn_reasoning_to_one_message_per_turn(self) -> None:
        store = Store()
        for turn in (1, 2):
            run(
                [
                    ev("REASONING_MESSAGE_START", messageId=f"rs{turn}", role="reasoning"),
                    ev("REASONING_MESSAGE_CONTENT", messageId=f"rs{turn}", delta="t"),
                    ev("REASONING_MESSAGE_END", messageId=f"rs{turn}"),
                    *text(f"a{turn}", "answer"),
                ],
                store,
            )
            canon = []
            for n in range(1, turn + 1):
                canon += [
                    {"id": f"rc{n}", "role": "reasoning", "content": "t"},
                    {"id": f"a{n}", "role": "assistant", "content": "answer"},
                ]
            run([_snapshot(*canon)], store)
        # One reasoning message per turn; the canonical copy follows its answer (local order).
        assert [m["id"] for m in wire(store)] == ["a1", "rc1", "a2", "rc2"]

    def test_appends_an_activity_message_the_client_does_not_have_yet(self) -> None:
        assert self.ids([_user("u")], _snapshot(_user("u"), _activity("new", {}))) == ["u", "new"]

    def test_keeps_client_activity_when_the_snapshot_carries_none(self) -> None:
        history = [_activity("act", {}), _user("u")]
        assert self.ids(history, _snapshot(_user("u"))) == ["act", "u"]

    def test_preserves_activity_at_start_of_messages(self) -> None:
        history = [_activity("act", {}), _user("u1")]
        assert self.ids(history, _snapshot(_user("u1"), _user("u2"))) == ["act", "u1", "u2"]

    def test_preserves_activity_position_when_its_preceding_message_is_removed(self) -> None:
        history = [_user("u1"), _activity("act", {}), _user("u2")]
        assert self.ids(history, _snapshot(_user("u2"))) == ["act", "u2"]

    def test_preserves_activity_position_when_a_message_id_changes_in_snapshot(self) -> None:
        history = [
            _user("m1"),
            {"id": "asst-1", "role": "assistant", "content": "a"},
            _activity("act-1", {}),
            {"id": "asst-2", "role": "assistant", "content": "b"},
            {"id": "tool-stream", "role": "tool", "toolCallId": "c", "content": "r"},
        ]
        snapshot = _snapshot(
            _user("m1"),
            {"id": "asst-1", "role": "assistant", "content": "a"},
            {"id": "asst-2", "role": "assistant", "content": "b"},
            {"id": "tool-canon", "role": "tool", "toolCallId": "c", "content": "r"},
        )
        assert self.ids(history, snapshot) == ["m1", "asst-1", "act-1", "asst-2", "tool-canon"]

    def test_preserves_reasoning_messages_when_the_snapshot_carries_none(self) -> None:
        history = [_user("u"), {"id": "r", "role": "reasoning", "content": "t"}]
        assert self.ids(history, _snapshot(_user("u"))) == ["u", "r"]

    def test_replaces_streamed_reasoning_when_the_snapshot_carries_reasoning(self) -> None:
        history = [_user("u"), {"id": "r-stream", "role": "reasoning", "content": "t"}]
        snapshot = _snapshot(_user("u"), {"id": "r-canon", "role": "reasoning", "content": "t"})
        assert self.ids(history, snapshot) == ["u", "r-canon"]

    def test_still_preserves_activity_messages_when_the_snapshot_carries_reasoning(self) -> None:
        history = [_user("u"), _activity("act", {})]
        snapshot = _snapshot(_user("u"), {"id": "r", "role": "reasoning", "content": "t"})
        assert self.ids(history, snapshot) == ["u", "act", "r"]

    def test_drops_a_local_activity_the_snapshot_leaves_out_once_it_carries_activity(self) -> None:
        history = [_user("u"), _activity("old", {})]
        assert self.ids(history, _snapshot(_user("u"), _activity("new", {}))) == ["u", "new"]

    def test_replaces_an_existing_activity_message_with_the_snapshot_version(self) -> None:
        _, store, _ = run([_snapshot(_activity("a", {"v": 2}))], Store([_activity("a", {"v": 1})]))
        assert wire(store) == [_activity("a", {"v": 2})]

    def test_authoritative_activity_types_scope_the_deletion(self) -> None:
        history = [_user("u"), _activity("p1", {}, "p"), _activity("q1", {}, "q")]
        scoped = {"@ag-ui/client": {"authoritativeActivityTypes": ["p"]}}
        everything = {"@ag-ui/client": {"authoritativeActivityTypes": None}}
        invalid = {"@ag-ui/client": {"authoritativeActivityTypes": [1]}}
        assert self.ids(history, _snapshot(_user("u"), metadata=scoped)) == ["u", "q1"]
        assert self.ids(history, _snapshot(_user("u"), metadata=everything)) == ["u"]
        assert self.ids(history, _snapshot(_user("u"), metadata=invalid)) == ["u", "p1", "q1"]

    def test_other_roles_are_deleted_when_the_snapshot_omits_them(self) -> None:
        history = [_user("a"), _user("b"), _user("z")]
        assert self.ids(history, _snapshot(_user("b"), _user("a"), _user("c"))) == ["a", "b", "c"]

    def test_snapshot_messages_are_copied(self) -> None:
        snapshot = _snapshot({**_user("u"), "metadata": {"k": [1]}})
        _, store, _ = run([snapshot])
        assert isinstance(snapshot, msgspec.Struct)
        snapshot.messages[0].metadata["k"].append(2)  # type: ignore[attr-defined]
        assert wire(store)[0]["metadata"] == {"k": [1]}


# ---------------------------------------------------------------------------------------------
# A-STATE: default.state.test.ts


class TestState:
    def test_should_handle_state_snapshot_and_delta(self) -> None:
        _, store, _ = run(
            [
                ev("STATE_SNAPSHOT", snapshot={"count": 1, "items": []}),
                ev(
                    "STATE_DELTA",
                    delta=[
                        {"op": "replace", "path": "/count", "value": 2},
                        {"op": "add", "path": "/items/-", "value": "a"},
                    ],
                ),
            ]
        )
        assert store.state == {"count": 2, "items": ["a"]}

    def test_should_handle_invalid_patch_operations_gracefully(self) -> None:
        _, store, reports = run(
            [
                ev("STATE_SNAPSHOT", snapshot={"a": 1}),
                ev(
                    "STATE_DELTA",
                    delta=[
                        {"op": "replace", "path": "/a", "value": 2},
                        {"op": "remove", "path": "/missing"},
                    ],
                ),
            ]
        )
        assert store.state == {"a": 1}  # all or nothing
        assert [r.code for r in reports] == ["patch-failed"]

    def test_a_null_snapshot_makes_the_state_null(self) -> None:
        _, store, _ = run([ev("STATE_SNAPSHOT", snapshot=None)], Store(state={"a": 1}))
        assert store.state is None

    def test_the_initial_state_is_used_and_not_mutated(self) -> None:
        initial = {"a": {"b": 1}}
        _, store, _ = run(
            [ev("STATE_DELTA", delta=[{"op": "add", "path": "/a/c", "value": 2}])],
            Store(state=initial),
        )
        assert store.state == {"a": {"b": 1, "c": 2}}
        assert initial == {"a": {"b": 1}}

    def test_a_state_seen_in_an_earlier_update_is_never_modified(self) -> None:
        store = Store(state={"a": {"b": 1}, "big": list(range(10))})
        before = store.state
        run([ev("STATE_DELTA", delta=[{"op": "add", "path": "/a/c", "value": 2}])], store)
        assert before == {"a": {"b": 1}, "big": list(range(10))}
        assert store.state["big"] is before["big"]  # untouched containers are shared

    def test_state_events_have_no_item_and_keep_their_metadata(self) -> None:
        events = [
            ev("STATE_SNAPSHOT", snapshot={}, metadata={"k": 1}),
            ev("STATE_DELTA", delta=[], metadata={"k": 2}),
        ]
        updates, _, _ = run(events)
        assert [(u.event, u.item, u.done) for u in updates] == [(e, None, False) for e in events]


# ---------------------------------------------------------------------------------------------
# A-RSI: run-started-input.test.ts


def _started(*messages: dict[str, Any], **fields: Any) -> Event:
    return ev("RUN_STARTED", **RUN, input={**RUN, "messages": list(messages)}, **fields)


class TestRunStartedInput:
    def test_should_add_messages_from_the_input_that_are_not_already_present(self) -> None:
        _, store, _ = run([_started(_user("a"), _user("b"))], Store([_user("a")]))
        assert [m["id"] for m in wire(store)] == ["a", "b"]

    def test_should_not_duplicate_messages_that_already_exist_by_id(self) -> None:
        history = [{"id": "a", "role": "user", "content": "OLD", "metadata": {"o": 1}}]
        incoming = {"id": "a", "role": "user", "content": "NEW", "metadata": {"n": 1}}
        _, store, _ = run([_started(incoming)], Store(history))
        assert wire(store) == history

    def test_should_handle_run_started_without_input_field(self) -> None:
        _, store, _ = run([ev("RUN_STARTED", **RUN)], Store([_user("a")]))
        assert wire(store) == [_user("a")]

    def test_should_handle_run_started_with_input_but_no_messages(self) -> None:
        _, store, _ = run([_started()], Store([_user("a")]))
        assert wire(store) == [_user("a")]

    def test_should_add_messages_before_other_events_in_the_same_run(self) -> None:
        _, store, _ = run([_started(_user("u")), *text("m", "answer")])
        assert [m["id"] for m in wire(store)] == ["u", "m"]

    def test_should_handle_multiple_runs_with_input_messages(self) -> None:
        _, store, _ = run(
            [
                _started(_user("u1")),
                *text("m1", "a1"),
                ev("RUN_FINISHED", **RUN),
                _started(
                    _user("u1"), {"id": "m1", "role": "assistant", "content": "a1"}, _user("u2")
                ),
                *text("m2", "a2"),
            ]
        )
        assert [m["id"] for m in wire(store)] == ["u1", "m1", "u2", "m2"]


# ---------------------------------------------------------------------------------------------
# Pending tool calls and interrupts (per run)


class TestPending:
    def test_pending_tool_calls_are_derived_per_run(self) -> None:
        store = Store()
        run(
            [
                ev("RUN_STARTED", **RUN),
                ev("TOOL_CALL_START", toolCallId="a", toolCallName="f"),
                ev("TOOL_CALL_START", toolCallId="b", toolCallName="f"),
                ev("TOOL_CALL_START", toolCallId="a", toolCallName="f"),
                ev("TOOL_CALL_RESULT", messageId="r", toolCallId="b", content="x"),
                ev("TOOL_CALL_START", toolCallId="c", toolCallName="f"),
            ],
            store,
        )
        assert store.pending_tool_call_ids == ["a", "c"]
        run([ev("RUN_FINISHED", **RUN)], store)
        assert store.pending_tool_call_ids == ["a", "c"]
        run([ev("RUN_STARTED", **RUN)], store)
        assert store.pending_tool_call_ids == []

    def test_a_success_outcome_naming_pending_calls_is_trusted(self) -> None:
        store = Store()
        run(
            [
                ev("RUN_STARTED", **RUN),
                ev("TOOL_CALL_START", toolCallId="a", toolCallName="f"),
                ev(
                    "RUN_FINISHED",
                    **RUN,
                    outcome={"type": "success", "pendingToolCallIds": ["x", "y"]},
                ),
            ],
            store,
        )
        assert store.pending_tool_call_ids == ["x", "y"]

    def test_an_empty_named_list_falls_back_to_the_derivation(self) -> None:
        store = Store()
        run(
            [
                ev("RUN_STARTED", **RUN),
                ev("TOOL_CALL_START", toolCallId="a", toolCallName="f"),
                ev("RUN_FINISHED", **RUN, outcome={"type": "success", "pendingToolCallIds": []}),
            ],
            store,
        )
        assert store.pending_tool_call_ids == ["a"]

    def test_pending_interrupts_follow_the_last_run_finished(self) -> None:
        store = Store()
        interrupt = {"id": "i1", "reason": "approve", "metadata": {"k": 1}}
        run(
            [
                ev("RUN_STARTED", **RUN),
                ev("RUN_FINISHED", **RUN, outcome={"type": "interrupt", "interrupts": [interrupt]}),
            ],
            store,
        )
        assert [i.id for i in store.pending_interrupts] == ["i1"]
        run([ev("RUN_STARTED", **RUN)], store)
        assert [i.id for i in store.pending_interrupts] == ["i1"]
        run([ev("RUN_FINISHED", **RUN, outcome={"type": "cancelled"})], store)
        assert store.pending_interrupts == []


# ---------------------------------------------------------------------------------------------
# The updates themselves


def _all_events() -> list[Event]:
    return [
        ev("RUN_STARTED", **RUN, metadata={"run": 1}),
        ev("STEP_STARTED", stepName="s", metadata={"step": 1}),
        ev("TEXT_MESSAGE_START", messageId="m", metadata={"a": 1}),
        ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="x"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="y", metadata={"a": 2, "b": 1}),
        ev("TEXT_MESSAGE_END", messageId="m", metadata={"usage": {"t": 3}}),
        ev(
            "TOOL_CALL_START",
            toolCallId="c",
            toolCallName="f",
            parentMessageId="m",
            metadata={"c": 1},
        ),
        ev("TOOL_CALL_ARGS", toolCallId="c", delta="{}"),
        ev("TOOL_CALL_END", toolCallId="c", metadata={"c": 2}),
        ev("TOOL_CALL_RESULT", messageId="r", toolCallId="c", content="ok", metadata={"r": 1}),
        ev("REASONING_START", messageId="rs", metadata={"span": 1}),
        ev("REASONING_MESSAGE_START", messageId="rm", role="reasoning"),
        ev("REASONING_MESSAGE_CONTENT", messageId="rm", delta="t", metadata={"q": 1}),
        ev("REASONING_MESSAGE_END", messageId="rm"),
        ev(
            "REASONING_ENCRYPTED_VALUE",
            subtype="message",
            entityId="rm",
            encryptedValue="e",
            metadata={"enc": 1},
        ),
        ev("REASONING_END", messageId="rs", metadata={"span": 2}),
        ev(
            "ACTIVITY_SNAPSHOT",
            messageId="act",
            activityType="p",
            content={"n": 0},
            metadata={"x": 1},
        ),
        ev(
            "ACTIVITY_DELTA",
            messageId="act",
            activityType="p",
            patch=[{"op": "replace", "path": "/n", "value": 1}],
            metadata={"y": 1},
        ),
        ev("STATE_SNAPSHOT", snapshot={"s": 1}, metadata={"st": 1}),
        ev("STATE_DELTA", delta=[{"op": "add", "path": "/t", "value": 2}], metadata={"st": 2}),
        ev("CUSTOM", name="n", value=None, metadata={"cu": 1}),
        ev("RAW", event={"any": 1}, metadata={"raw": 1}),
        ev("SUBAGENT_STARTED", subagentRunId="sa", name="helper", metadata={"sub": 1}),
        ev("SUBAGENT_FINISHED", subagentRunId="sa", metadata={"sub": 2}),
        ev("SUBAGENT_ERROR", subagentRunId="sb", message="boom", metadata={"sub": 3}),
        ev("STEP_FINISHED", stepName="s"),
        ev("RUN_ERROR", message="x", metadata={"err": 1}),
        ev("MESSAGES_SNAPSHOT", messages=[], metadata={"snap": 1}),
    ]


#: (type, item id, merged metadata, done) for each of the first 20 events of _all_events().
_EXPECTED = [
    ("RUN_STARTED", None, UNSET, False),
    ("STEP_STARTED", None, UNSET, False),
    ("TEXT_MESSAGE_START", "m", {"a": 1}, False),
    ("TEXT_MESSAGE_CONTENT", "m", {"a": 1}, False),
    ("TEXT_MESSAGE_CONTENT", "m", {"a": 2, "b": 1}, False),
    ("TEXT_MESSAGE_END", "m", {"a": 2, "b": 1, "usage": {"t": 3}}, True),
    ("TOOL_CALL_START", "c", {"c": 1}, False),
    ("TOOL_CALL_ARGS", "c", {"c": 1}, False),
    ("TOOL_CALL_END", "c", {"c": 2}, True),
    ("TOOL_CALL_RESULT", "r", {"r": 1}, True),
    ("REASONING_START", None, UNSET, False),
    ("REASONING_MESSAGE_START", "rm", UNSET, False),
    ("REASONING_MESSAGE_CONTENT", "rm", {"q": 1}, False),
    ("REASONING_MESSAGE_END", "rm", {"q": 1}, True),
    ("REASONING_ENCRYPTED_VALUE", None, UNSET, False),
    ("REASONING_END", None, UNSET, False),
    ("ACTIVITY_SNAPSHOT", "act", {"x": 1}, True),
    ("ACTIVITY_DELTA", "act", {"x": 1, "y": 1}, True),
    ("STATE_SNAPSHOT", None, UNSET, False),
    ("STATE_DELTA", None, UNSET, False),
]


class TestUpdates:
    def test_one_update_per_event_with_the_event_itself(self) -> None:
        events = _all_events()
        updates, _, _ = run(events)
        assert len(updates) == len(events)
        assert all(u.event is e for u, e in zip(updates, events, strict=True))

    def test_each_item_carries_exactly_the_merged_metadata_at_that_point(self) -> None:
        seen: list[tuple[str, Any, Any, bool]] = []

        def record(update: Update) -> None:
            # Called by the stage as it emits: the state of the item at that point.
            item = update.item
            metadata = None if item is None else copy.deepcopy(item.metadata)
            key = None if item is None else item.id
            seen.append((update.event.type, key, metadata, update.done))

        head = Accumulate().connect(record, Context(on_report=lambda r: None))
        for event in _all_events()[:20]:
            head(event)
        # An item without metadata says None (the expected table writes it UNSET).
        assert seen == [
            (kind, key, None if m is UNSET else m, done) for kind, key, m, done in _EXPECTED
        ]

    def test_update_metadata_is_exact_even_when_read_after_the_stream(self) -> None:
        updates, _, _ = run(_all_events()[:20])
        assert [
            (u.event.type, None if u.item is None else u.item.id, u.metadata, u.done)
            for u in updates
        ] == [(kind, key, None if m is UNSET else m, done) for kind, key, m, done in _EXPECTED]

    def test_an_earlier_metadata_object_is_not_changed_by_later_merges(self) -> None:
        updates, _, _ = run(
            [
                ev("TEXT_MESSAGE_START", messageId="m", metadata={"a": 1}),
                ev("TEXT_MESSAGE_END", messageId="m", metadata={"a": 2}),
            ]
        )
        assert updates[0].item is updates[1].item
        # The live item has the final value; the dict seen at the first update was replaced.
        assert isinstance(updates[1].item, MessageItem)
        assert updates[1].item.metadata == {"a": 2}

    @pytest.mark.parametrize(
        "index",
        [0, 1, 10, 14, 15, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27],
        ids=lambda i: _all_events()[i].type,
    )
    def test_events_with_no_destination_come_out_untouched(self, index: int) -> None:
        events = _all_events()[:-1]  # not the final snapshot, which would empty the store
        events.append(_all_events()[-1]) if index == len(events) else None
        before = msgspec.json.encode(events[index])
        updates, store, _ = run(events)
        update = updates[index]
        assert update.event is events[index]
        assert update.item is None and update.done is False
        assert msgspec.json.encode(update.event) == before
        # Its metadata reached no item (each of these events uses keys of its own).
        keys = set(events[index].metadata or ())
        for message in store.messages():
            assert not keys & set(message.metadata or ())
            for call in message.tool_calls or ():
                assert not keys & set(call.metadata or ())

    def test_mutating_an_event_after_the_fact_does_not_change_the_store(self) -> None:
        events = _all_events()[:20]
        _, store, _ = run(events)
        before = (store.messages_wire(), msgspec.to_builtins(store.state))
        for event in events:
            if isinstance(event.metadata, dict):
                event.metadata.clear()
                event.metadata["poison"] = True
        for event in events:
            for name in ("content", "snapshot"):
                value = getattr(event, name, None)
                if isinstance(value, dict):
                    value["poison"] = True
        assert (store.messages_wire(), store.state) == before

    def test_items_are_the_live_store_items(self) -> None:
        updates, store, _ = run(text("m", "hi"))
        item = updates[0].item
        assert item is store.message("m")
        assert isinstance(item, MessageItem)
        assert item.content == "hi"  # the START's item kept changing
        frozen = item.to_wire()
        run([ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="!")], store)
        assert frozen["content"] == "hi" and item.content == "hi!"

    def test_the_update_item_of_a_tool_call_event_is_the_call(self) -> None:
        updates, store, _ = run(
            [ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="m")]
        )
        call = updates[0].item
        assert isinstance(call, ToolCallItem)
        assert call is store.tool_call("c")
        assert call.owner is store.message("m")

    def test_a_non_event_is_a_usage_error(self) -> None:
        with pytest.raises(UsageError, match="decode what is not an event yet first"):
            Accumulate().feed({"type": "RUN_STARTED"})  # type: ignore[arg-type]

    def test_reports_without_on_report_are_warnings(self) -> None:
        from agui_meta import AguiWarning

        with pytest.warns(AguiWarning, match="No message found"):
            run_sync([Accumulate()], [ev("TEXT_MESSAGE_END", messageId="x")])


# ---------------------------------------------------------------------------------------------
# Against the official client


def _events_case(name: str, events: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": name, "events": events, **extra}


def _tc(cid: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "f", **kw}


def _res(mid: str, cid: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": cid, "content": "ok", **kw}


def _seed_call(cid: str, **function: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "", **function}}


_ORACLE_CASES = [
    _events_case(
        "duplicate-result-ids-then-content",
        [
            _res("r", "x"),
            _res("r", "x"),
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r", "delta": "Z"},
        ],
        messages=[{"id": "a", "role": "assistant", "toolCalls": [_seed_call("x")]}],
    ),
    _events_case(
        "result-inserted-before-an-older-message-with-its-id",
        [_res("u", "x"), {"type": "TEXT_MESSAGE_CONTENT", "messageId": "u", "delta": "Z"}],
        messages=[{"id": "a", "role": "assistant", "toolCalls": [_seed_call("x")]}, _user("u")],
    ),
    _events_case(
        "snapshot-message-replacing-two-locals-is-shared",
        [
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [{"id": "d", "role": "assistant", "content": "S"}],
            },
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "d", "delta": "+"},
        ],
        messages=[
            {"id": "d", "role": "assistant", "content": "1"},
            _user("k"),
            {"id": "d", "role": "assistant", "content": "2"},
        ],
    ),
    _events_case(
        "shared-activity-splits-on-replace",
        [
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [_activity("d", {"a": 1}, "p")],
                "metadata": {"@ag-ui/client": {"authoritativeActivityTypes": None}},
            },
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": "d",
                "activityType": "p",
                "content": {"b": 2},
                "metadata": {"m": 1},
            },
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "d",
                "activityType": "p",
                "patch": [{"op": "add", "path": "/c", "value": 3}],
                "metadata": {"n": 2},
            },
        ],
        messages=[_user("d"), _user("d")],
    ),
    _events_case(
        "snapshot-duplicate-new-ids",
        [
            {"type": "MESSAGES_SNAPSHOT", "messages": [_user("n", "1"), _user("n", "2")]},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "n", "delta": "+"},
        ],
    ),
    _events_case(
        "history-with-unknown-members-and-odd-values",
        [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "u", "delta": "x"},
            _tc("t1", parentMessageId="u"),
            {"type": "TOOL_CALL_ARGS", "toolCallId": "t1", "delta": "{"},
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": "u",
                "encryptedValue": "e",
            },
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"a": 1}},
        ],
        messages=[
            {
                "id": "u",
                "role": "user",
                "content": [{"type": "text", "text": "a"}],
                "extra": {"k": 1},
            },
            {"id": "m", "role": "user", "content": "q", "metadata": [5, 6]},
        ],
    ),
    _events_case(
        "history-arguments-that-are-not-strings",
        [
            {"type": "TOOL_CALL_ARGS", "toolCallId": "t", "delta": "x"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "u", "delta": "y"},
        ],
        messages=[
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    _seed_call("t", arguments=5),
                    {"id": "u", "type": "function", "function": {"name": "g"}},
                ],
            }
        ],
    ),
    _events_case(
        "first-holder-of-a-call-is-not-an-assistant",
        [
            _res("r", "t"),
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "tool-call",
                "entityId": "t",
                "encryptedValue": "e",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "t", "delta": "Q"},
        ],
        messages=[
            {**_user("u"), "toolCalls": [_seed_call("t")]},
            {"id": "a", "role": "assistant", "toolCalls": [_seed_call("t")]},
            _user("z"),
        ],
    ),
    _events_case(
        "collision-fallback-id-already-taken",
        [_tc("t", parentMessageId="u", subagentRunId="s")],
        messages=[_user("u"), _user("t")],
    ),
    _events_case(
        "results-with-tool-messages-already-behind-the-owner",
        [_res("r", "t")],
        messages=[
            {"id": "a", "role": "assistant", "toolCalls": [_seed_call("t")]},
            {"id": "x", "role": "tool", "toolCallId": "q", "content": "c"},
            {"id": "y", "role": "tool", "toolCallId": "q", "content": "c"},
            _user("z"),
        ],
    ),
    _events_case(
        "activity-replacing-an-assistant-with-calls",
        [
            _tc("t", parentMessageId="m"),
            {"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "p", "content": {}},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "t", "delta": "x"},
            _res("r", "t"),
        ],
    ),
    _events_case(
        "activity-delta-on-null-and-missing-content",
        [
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "a",
                "activityType": "p",
                "patch": [{"op": "add", "path": "/x", "value": 1}],
            },
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "b",
                "activityType": "p",
                "patch": [{"op": "add", "path": "/x", "value": 1}],
            },
        ],
        messages=[
            {"id": "a", "role": "activity", "activityType": "p", "content": None},
            {"id": "b", "role": "activity", "activityType": "p"},
        ],
    ),
    _events_case(
        "snapshot-authority-declarations",
        [{"type": "MESSAGES_SNAPSHOT", "messages": [_user("a")], "metadata": {"@ag-ui/client": 5}}],
        messages=[_user("a"), _activity("x", {}, "p")],
    ),
    _events_case(
        "state-null-snapshot-then-delta",
        [
            {"type": "STATE_SNAPSHOT", "snapshot": None},
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/x", "value": 1}]},
            {"type": "STATE_SNAPSHOT", "snapshot": [1]},
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/-", "value": 2}]},
        ],
        state={"a": 1},
    ),
]


class TestAgainstTheOracle:
    @pytest.mark.parametrize("case", _ORACLE_CASES, ids=lambda c: c["name"])
    def test_the_result_equals_the_reference(
        self, oracle: OracleServer, case: dict[str, Any]
    ) -> None:
        assert_same_result(run_case(case, verify=False), oracle.run_one(case, False), case)

    def test_every_event_type(self, oracle: OracleServer) -> None:
        wire_events = [msgspec.to_builtins(e) for e in _all_events()[:-1]]
        case = _events_case("all-events", wire_events, messages=[_user("u")])
        assert_same_result(run_case(case, verify=False), oracle.run_one(case, False), case)


# ---------------------------------------------------------------------------------------------
# In an async pipeline


@pytest.mark.anyio
async def test_in_an_async_pipeline(anyio_backend: str) -> None:
    from agui_meta import ExpandChunks, Verify, wrap

    store = Store()
    source = [
        {"type": "RUN_STARTED", **RUN, "metadata": {"run": 1}},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "Hel", "metadata": {"a": 1}},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "lo"},
        {"type": "TEXT_MESSAGE_CHUNK", "metadata": {"usage": 3}},
        {"type": "RUN_FINISHED", **RUN, "metadata": {"total": 3}},
    ]
    seen = []
    async with wrap(source, ExpandChunks(), Verify(), Accumulate(store)) as updates:
        async for update in updates:
            assert isinstance(update, Update)
            key = None if update.item is None else update.item.id
            seen.append((update.event.type, key, update.metadata, update.done))
    # The chunk's START and CONTENT come from one source item, so by the time the consumer
    # sees the START's update the content was appended; the metadata is exact nevertheless.
    assert seen == [
        ("RUN_STARTED", None, None, False),
        ("TEXT_MESSAGE_START", "m", {"a": 1}, False),
        ("TEXT_MESSAGE_CONTENT", "m", {"a": 1}, False),
        ("TEXT_MESSAGE_CONTENT", "m", {"a": 1}, False),
        ("TEXT_MESSAGE_CONTENT", "m", {"a": 1, "usage": 3}, False),
        ("TEXT_MESSAGE_END", "m", {"a": 1, "usage": 3}, True),
        ("RUN_FINISHED", None, None, False),
    ]
    assert store.messages_wire() == [
        {"id": "m", "role": "assistant", "content": "Hello", "metadata": {"a": 1, "usage": 3}}
    ]


@pytest.mark.anyio
async def test_keep_going_reports_a_raw_chunk_and_carries_on(anyio_backend: str) -> None:
    from agui_meta import wrap

    reports: list[Report] = []
    source = [
        ev("TEXT_MESSAGE_CHUNK", messageId="m", delta="x"),
        ev("TEXT_MESSAGE_START", messageId="n"),
    ]
    async with wrap(source, Accumulate(), mode="keep_going", on_report=reports.append) as ups:
        types = [u.event.type async for u in ups]
    assert types == ["TEXT_MESSAGE_START"]
    assert [r.code for r in reports] == ["ApplyError"]
