"""The metadata rules: absent or an object at every carrier; merge laws; the key lint."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

import agui_meta
from agui_meta import (
    AGUI_METADATA_KEY,
    EventDecoder,
    LintMetadataKeys,
    MetadataError,
    Report,
    StrictError,
    UsageError,
    merge_metadata,
    run_sync,
    unprefixed_keys,
    vendor_keys,
)
from agui_meta._metadata import fold_metadata, is_prefixed, key_path
from agui_meta.events import TextMessageStartEvent, decode_event
from tests.test_events import MINIMAL

# ---------------------------------------------------------------------------------------------
# `metadata` is absent or an object: null, arrays, strings, numbers are errors at every carrier

NOT_OBJECTS: list[Any] = [None, [], [{"a": 1}], "x", "", 0, -1.5, True, False]
ROLES: dict[str, dict[str, Any]] = {
    "developer": {"id": "m", "role": "developer", "content": "c"},
    "system": {"id": "m", "role": "system", "content": "c"},
    "assistant": {"id": "m", "role": "assistant"},
    "user": {"id": "m", "role": "user", "content": "c"},
    "tool": {"id": "m", "role": "tool", "content": "c", "toolCallId": "tc"},
    "activity": {"id": "m", "role": "activity", "activityType": "a", "content": {}},
    "reasoning": {"id": "m", "role": "reasoning", "content": "c"},
}


def _with(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**obj, **fields}


def _carriers(bad: Any) -> list[tuple[str, dict[str, Any], str]]:
    """(name, event, JSON path of the bad metadata) for every kind of carrier."""
    out: list[tuple[str, dict[str, Any], str]] = []
    for case in MINIMAL:
        out.append((f"event {case['type']}", _with(case, metadata=bad), "$.metadata"))
    for thinking in (
        "THINKING_START",
        "THINKING_END",
        "THINKING_TEXT_MESSAGE_START",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END",
    ):
        event = {"type": thinking, "metadata": bad, "delta": "d"}
        if thinking != "THINKING_TEXT_MESSAGE_CONTENT":
            del event["delta"]
        out.append((f"legacy {thinking}", event, "$.metadata"))
    call = {"id": "tc", "type": "function", "function": {"name": "f", "arguments": ""}}
    for role, message in ROLES.items():
        bad_message = _with(message, metadata=bad)
        out.append(
            (
                f"{role} message in MESSAGES_SNAPSHOT",
                {"type": "MESSAGES_SNAPSHOT", "messages": [ROLES["user"], bad_message]},
                "$.messages[1].metadata",
            )
        )
        out.append(
            (
                f"{role} message in RUN_STARTED.input",
                {
                    "type": "RUN_STARTED",
                    "threadId": "t",
                    "runId": "r",
                    "input": {"threadId": "t", "runId": "r", "messages": [bad_message]},
                },
                "$.input.messages[0].metadata",
            )
        )
    assistant = _with(ROLES["assistant"], toolCalls=[call, _with(call, id="tc2", metadata=bad)])
    out.append(
        (
            "tool call in MESSAGES_SNAPSHOT",
            {"type": "MESSAGES_SNAPSHOT", "messages": [assistant]},
            "$.messages[0].toolCalls[1].metadata",
        )
    )
    run_input = {"threadId": "t", "runId": "r", "messages": [assistant]}
    out.append(
        (
            "tool call in RUN_STARTED.input",
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": run_input},
            "$.input.messages[0].toolCalls[1].metadata",
        )
    )
    out.append(
        (
            "tool in RUN_STARTED.input",
            {
                "type": "RUN_STARTED",
                "threadId": "t",
                "runId": "r",
                "input": {
                    "threadId": "t",
                    "runId": "r",
                    "messages": [],
                    "tools": [{"name": "f", "description": "d", "metadata": bad}],
                },
            },
            "$.input.tools[0].metadata",
        )
    )
    out.append(
        (
            "resume entry in RUN_STARTED.input",
            {
                "type": "RUN_STARTED",
                "threadId": "t",
                "runId": "r",
                "input": {
                    "threadId": "t",
                    "runId": "r",
                    "messages": [],
                    "resume": [
                        {"interruptId": "i", "status": "resolved"},
                        {"interruptId": "j", "status": "cancelled", "metadata": bad},
                    ],
                },
            },
            "$.input.resume[1].metadata",
        )
    )
    out.append(
        (
            "interrupt in RUN_FINISHED.outcome",
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "r",
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [{"id": "i", "reason": "r", "metadata": bad}],
                },
            },
            "$.outcome.interrupts[0].metadata",
        )
    )
    return out


CARRIER_CASES = [
    pytest.param(event, path, id=f"{name}: {json.dumps(bad)}")
    for bad in NOT_OBJECTS
    for name, event, path in _carriers(bad)
]


def test_every_carrier_is_covered() -> None:
    names = {name for name, _, _ in _carriers(None)}
    assert len([n for n in names if n.startswith("event ")]) == 31
    assert {n.split(" message")[0] for n in names if " message in " in n} == set(ROLES)


@pytest.mark.parametrize(("event", "path"), CARRIER_CASES)
def test_metadata_that_is_not_an_object_is_a_metadata_error(
    event: dict[str, Any], path: str
) -> None:
    for data in (json.dumps(event).encode(), event):
        decoder = EventDecoder(on_report=lambda report: None)
        stream = [b'{"type":"TEXT_MESSAGE_END","messageId":"x"}', data]
        with pytest.raises(MetadataError) as info:
            list(decoder.decode_iter(stream))
        error = info.value
        assert error.path == path
        assert error.index == 1
        assert "metadata" in str(error)
        assert path in str(error)
        assert isinstance(error.__cause__, msgspec.ValidationError)


@pytest.mark.parametrize("bad", NOT_OBJECTS, ids=json.dumps)
def test_python_built_events_are_checked_too(bad: Any) -> None:
    # msgspec does not validate on construction; decoding (and the enforce stage) does.
    event = TextMessageStartEvent(message_id="m", metadata=bad)
    with pytest.raises(MetadataError) as info:
        decode_event(event)
    assert info.value.path == "$.metadata"
    with pytest.raises(MetadataError):
        run_sync([agui_meta.Enforce()], [event])


def test_a_null_metadata_is_never_read_as_absent_even_in_keep_going_mode() -> None:
    reports: list[Report] = []
    decoder = EventDecoder(mode="keep_going", on_report=reports.append)
    stream = [b'{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":null}']
    assert list(decoder.decode_iter(stream)) == []
    assert [(r.code, r.severity, r.path, r.index) for r in reports] == [
        ("MetadataError", "error", "$.metadata", 0)
    ]


# ---------------------------------------------------------------------------------------------
# merge_metadata


def test_merge_basics() -> None:
    existing = {"a": 1, "u": {"in": 3}, "keep": [1]}
    incoming = {"u": {"out": 4}, "b": None}
    merged = merge_metadata(existing, incoming)
    assert merged == {"a": 1, "u": {"out": 4}, "keep": [1], "b": None}
    assert merged is not existing and merged is not incoming
    assert existing == {"a": 1, "u": {"in": 3}, "keep": [1]}
    assert incoming == {"u": {"out": 4}, "b": None}


def test_a_merge_while_a_version_is_iterated_changes_nothing_it_yields() -> None:
    # Keys iterate in the order of their first write. A merge while a version's keys are
    # being iterated (a new key, a key written again) neither changes what the iteration
    # yields nor raises, for the version merged into as for an older one.
    first = merge_metadata(agui_meta.MergedMetadata(), {"a": 1, "b": 2})
    keys = iter(first)
    assert next(keys) == "a"
    second = merge_metadata(first, {"c": 3, "a": 4})
    newest = iter(second)
    assert next(newest) == "a"
    third = merge_metadata(second, {"d": 5})
    assert list(keys) == ["b"] and list(newest) == ["b", "c"]
    assert list(first) == ["a", "b"] and dict(first) == {"a": 1, "b": 2}
    assert dict(second) == {"a": 4, "b": 2, "c": 3}
    assert list(third) == ["a", "b", "c", "d"] and len(third) == 4


def test_absent_incoming_returns_existing_itself() -> None:
    existing = {"a": 1}
    assert merge_metadata(existing, UNSET) is existing
    assert merge_metadata(existing, None) is existing
    assert merge_metadata(UNSET, UNSET) is None  # absent is None for users
    assert merge_metadata(None, None) is None


def test_empty_incoming_materialises_an_empty_object() -> None:
    # mergeMetadata(undefined, {}) returns a copy of {}: an item that had none gets {}.
    incoming: dict[str, Any] = {}
    merged = merge_metadata(UNSET, incoming)
    assert merged == {}
    assert merged is not incoming


def test_the_reserved_key_is_replaced_whole() -> None:
    merged = merge_metadata(
        {AGUI_METADATA_KEY: {"a": 1, "b": [1, 2]}}, {AGUI_METADATA_KEY: {"b": [3]}}
    )
    assert merged == {AGUI_METADATA_KEY: {"b": [3]}}


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(["a", "b", "c", AGUI_METADATA_KEY, "", "__proto__", "é"])
METADATA = st.dictionaries(KEYS, JSON, max_size=4)
MAYBE = st.one_of(st.just(UNSET), st.none(), METADATA)


@given(st.lists(MAYBE, max_size=6))
def test_folding_equals_dict_update_in_order(items: list[Any]) -> None:
    expected: dict[str, Any] | None = None
    for item in items:
        if item is UNSET or item is None:
            continue
        if expected is None:
            expected = {}
        expected.update(item)
    result = fold_metadata(items)
    assert result is None if expected is None else result == expected  # absent: None


@given(st.lists(MAYBE, max_size=6), st.data())
def test_folding_is_associative_over_any_split(items: list[Any], data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=len(items)))
    left, right = fold_metadata(items[:k]), fold_metadata(items[k:])
    assert merge_metadata(left, right) == fold_metadata(items)


@given(MAYBE, MAYBE, MAYBE)
def test_merge_is_associative(a: Any, b: Any, c: Any) -> None:
    assert merge_metadata(merge_metadata(a, b), c) == merge_metadata(a, merge_metadata(b, c))


@given(MAYBE, METADATA)
def test_values_are_replaced_whole_and_nulls_survive(existing: Any, incoming: Any) -> None:
    before = (copy.deepcopy(existing), copy.deepcopy(incoming))
    merged = merge_metadata(existing, incoming)
    assert isinstance(merged, dict)
    for key, value in incoming.items():
        assert key in merged
        assert merged[key] is value  # replaced whole: the very object, never blended
    if isinstance(existing, dict):
        for key, value in existing.items():
            if key not in incoming:
                assert merged[key] is value
        assert set(merged) == set(existing) | set(incoming)
    else:
        assert set(merged) == set(incoming)
    # never mutates, never returns an argument
    assert (existing, incoming) == before
    assert merged is not existing and merged is not incoming


# ---------------------------------------------------------------------------------------------
# Keys: the producer helper and the lint


def test_vendor_keys_namespaces_an_applications_keys() -> None:
    assert vendor_keys("acme", latency_ms=12, model="m") == {
        "acme.latency_ms": 12,
        "acme.model": "m",
    }
    assert vendor_keys("acme", {"x": None}, y=[1]) == {"acme.x": None, "acme.y": [1]}
    for bad in ("", "a.b", "a/b", "a:b", AGUI_METADATA_KEY):
        with pytest.raises(UsageError, match="vendor must be"):
            vendor_keys(bad, x=1)
    assert unprefixed_keys(vendor_keys("acme", a=1, b=2)) == []


@pytest.mark.parametrize(
    ("key", "prefixed"),
    [
        ("ag-ui", True),
        ("acme.latency", True),
        ("acme/latency", True),
        ("acme:latency", True),
        ("@ag-ui/client", True),
        ("latency", False),
        ("", False),
        (".latency", False),
        ("acme.", False),
        ("@scope", False),
        ("@/x", False),
        ("__proto__", False),
    ],
)
def test_is_prefixed(key: str, prefixed: bool) -> None:
    assert is_prefixed(key) is prefixed
    assert unprefixed_keys({key: 1}) == ([] if prefixed else [key])


def test_key_paths() -> None:
    assert key_path("$.metadata", "latency") == "$.metadata.latency"
    assert key_path("$.metadata", "acme.latency") == '$.metadata["acme.latency"]'
    assert key_path("$.metadata", "") == '$.metadata[""]'
    assert key_path("$.metadata", 'q"') == '$.metadata["q\\""]'


def test_the_lint_reports_unprefixed_keys_at_every_carrier_and_changes_nothing() -> None:
    meta = {"acme.ok": 1, "bad": 2, AGUI_METADATA_KEY: {}, "also bad": None}
    call = {
        "id": "tc",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
        "metadata": meta,
    }
    events = [
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": meta},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [
                _with(ROLES["user"], metadata=meta),
                _with(ROLES["assistant"], toolCalls=[call]),
            ],
        },
        {
            "type": "RUN_STARTED",
            "threadId": "t",
            "runId": "r",
            "input": {
                "threadId": "t",
                "runId": "r",
                "messages": [_with(ROLES["tool"], metadata=meta)],
                "tools": [{"name": "f", "description": "d", "metadata": meta}],
                "resume": [{"interruptId": "i", "status": "resolved", "metadata": meta}],
            },
        },
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r",
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": "i", "reason": "r", "metadata": meta}],
            },
        },
    ]
    decoded = [decode_event(e) for e in events]
    reports: list[Report] = []
    out = run_sync([LintMetadataKeys()], decoded, mode="strict", on_report=reports.append)
    assert len(out) == len(decoded)
    assert all(a is b for a, b in zip(out, decoded, strict=True))
    assert [json.loads(agui_meta.events.encode_event(e)) for e in out] == events
    found = [(r.index, r.path) for r in reports]
    carriers = [
        (0, "$.metadata"),
        (2, "$.messages[0].metadata"),
        (2, "$.messages[1].toolCalls[0].metadata"),
        (3, "$.input.messages[0].metadata"),
        (3, "$.input.tools[0].metadata"),
        (3, "$.input.resume[0].metadata"),
        (4, "$.outcome.interrupts[0].metadata"),
    ]
    assert found == [
        (i, path)
        for i, carrier in carriers
        for path in (f"{carrier}.bad", f'{carrier}["also bad"]')
    ]
    assert {(r.code, r.severity) for r in reports} == {("unprefixed-metadata-key", "info")}
    assert reports[0].event_type == "TEXT_MESSAGE_END"
    assert "'bad'" in reports[0].message


def test_the_lint_is_not_an_error_even_in_strict_mode() -> None:
    event = decode_event(b'{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":{"x":1}}')
    reports: list[Report] = []
    out = run_sync([LintMetadataKeys()], [event], mode="strict", on_report=reports.append)
    assert out == [event]
    assert len(reports) == 1


def test_strict_mode_still_raises_for_warnings() -> None:
    with pytest.raises(StrictError):
        run_sync(
            [agui_meta.Enforce()],
            [b'{"type":"TEXT_MESSAGE_END","messageId":"m","extra":1}'],
            mode="strict",
        )
