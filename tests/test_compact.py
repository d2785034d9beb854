"""``compact_events`` and the ``Compact`` stage against the official client's ``compactEvents``.

Three sources of truth: the golden files (hand-written cases, one per rule, with what the
reference returned: ``tests/compact_cases.py``), a differential run of seeded generated streams
through the reference itself (one Node.js process for all of them; skipped where Node.js is
missing, failing on CI), and properties that hold whatever the reference does (no input event
mutated, a compacted history assembles into the same conversation).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

import agui_meta
from agui_meta import compact_events
from agui_meta._compact import Compact
from tests.compact_cases import CASES_FILE, EXPECTED_FILE, NAMED, generated, run_reference_compact
from tests.example_streams import GOOD
from tests.example_streams import events as example_events
from tests.oracle import OracleUnavailable, _tagged, oracle_missing, prepare_oracle


def ours(case: dict[str, Any]) -> dict[str, Any]:
    reports: list[agui_meta.Report] = []
    try:
        events = compact_events(case["events"], on_report=reports.append)
    except agui_meta.DataError as exc:
        return {"name": case["name"], "error": str(exc)}
    return {"name": case["name"], "events": [msgspec.to_builtins(e) for e in events]}


def assert_same(mine: dict[str, Any], reference: dict[str, Any]) -> None:
    assert ("error" in mine) == ("error" in reference), (mine, reference)
    if "events" in reference:
        assert _tagged(mine["events"], True) == _tagged(reference["events"], True), (
            f"{mine['name']}:\n ours:      {json.dumps(mine['events'])}\n"
            f" reference: {json.dumps(reference['events'])}"
        )


@pytest.fixture(scope="module")
def reference() -> Any:
    try:
        prepare_oracle()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    return run_reference_compact


def _golden() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    cases = [json.loads(line) for line in CASES_FILE.read_text("utf-8").splitlines() if line]
    expected = [json.loads(line) for line in EXPECTED_FILE.read_text("utf-8").splitlines() if line]
    return list(zip(cases, expected, strict=True))


def test_the_golden_cases_are_the_named_cases() -> None:
    assert [case for case, _ in _golden()] == json.loads(json.dumps(NAMED))


@pytest.mark.parametrize(("case", "expected"), _golden(), ids=[c["name"] for c in NAMED])
def test_golden(case: dict[str, Any], expected: dict[str, Any]) -> None:
    assert_same(ours(case), expected)


def test_golden_expectations_are_what_the_reference_returns(reference: Any) -> None:
    expected = [e for _, e in _golden()]
    assert reference(NAMED) == expected


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_streams_match_the_reference(reference: Any, seed: int) -> None:
    cases = generated(150, seed)
    for case, result in zip(cases, reference(cases), strict=True):
        assert_same(ours(case), result)


def test_input_events_are_not_modified_and_pass_through_as_themselves() -> None:
    events = [agui_meta.events.decode_event(json.dumps(e)) for e in NAMED[8]["events"]]
    before = [msgspec.json.encode(e) for e in events]
    out = compact_events(events)
    assert [msgspec.json.encode(e) for e in events] == before
    end = events[-1]
    assert any(e is end for e in out)


def test_a_failing_patch_is_reported_with_the_index_of_its_event() -> None:
    reports: list[agui_meta.Report] = []
    case = next(c for c in NAMED if c["name"] == "state: a failing patch is skipped whole")
    out = compact_events(case["events"], on_report=reports.append)
    assert [r.code for r in reports] == ["patch-failed", "patch-failed"]
    assert [r.index for r in reports] == [1, 2]
    assert [r.path for r in reports] == ["$.delta[1]", "$.delta[0]"]
    assert [msgspec.to_builtins(e) for e in out] == [
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1, "d": 4}}
    ]


def test_a_whole_recorded_stream_as_bytes_and_as_text() -> None:
    events = NAMED[0]["events"]
    jsonl = "".join(json.dumps(e) + "\n" for e in events)
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    expected = compact_events(events)
    assert compact_events(jsonl.encode()) == expected
    assert compact_events(sse) == expected
    assert len(expected) == 5


def test_bad_input_names_the_event() -> None:
    with pytest.raises(agui_meta.DecodeError) as info:
        compact_events([NAMED[0]["events"][0], {"type": "TEXT_MESSAGE_CONTENT", "messageId": 3}])
    assert info.value.index == 1
    reports: list[agui_meta.Report] = []
    out = compact_events(
        [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": 3},
            {"type": "CUSTOM", "name": "n", "value": 0},
        ],
        mode="keep_going",
        on_report=reports.append,
    )
    assert [r.index for r in reports] == [0]
    assert [e.type for e in out] == ["CUSTOM"]


@pytest.mark.anyio
async def test_the_stage_in_a_pipeline_gives_the_same_events() -> None:
    case = NAMED[4]
    async with agui_meta.wrap(case["events"], Compact()) as stream:
        streamed = [e async for e in stream]
    assert streamed == compact_events(case["events"])


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_compacted_history_assembles_the_same_conversation(name: str) -> None:
    # The bundled recorded streams: compaction keeps every item and its merged metadata.
    events = example_events(name)
    stores = []
    for history in (events, compact_events(events)):
        stages = agui_meta.DefaultStages(verify=False)
        agui_meta.run_sync([agui_meta.Enforce(), *stages], history)
        stores.append(stages.store)
    assert stores[1].messages_wire() == stores[0].messages_wire()
    assert stores[1].state == stores[0].state
    assert len(compact_events(events)) < len(events)


def test_the_docstring_examples_run() -> None:
    import doctest

    import agui_meta._compact

    assert doctest.testmod(agui_meta._compact, raise_on_error=True).attempted >= 2


@pytest.mark.anyio
async def test_an_async_source_collected_first() -> None:
    events = NAMED[0]["events"]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()

    async def chunks() -> Any:
        for i in range(0, len(sse), 7):
            yield sse[i : i + 7]

    async with agui_meta.wrap(chunks()) as stream:
        collected = [e async for e in stream]
    assert compact_events(collected) == compact_events(events)
