"""Hostile but well-formed input: numbers and indices of any length, documents built deep by
patches, metadata written key by key, items opened and never closed, per-run tables.

Each test states the class of input it covers; each failed on the main branch before the fix
it goes with (issue 11): a bare ``ValueError`` from deep inside, a ``RecursionError`` on the
way out, quadratic memory, unbounded tables, or a loss nobody reported.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import pickle
import re
import subprocess
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agui_meta
from agui_meta import MergedMetadata, Report
from agui_meta._fastdecode import duplicate_keys, fast_decode, may_repeat_keys
from agui_meta._framing import RETRY_MAX, SSEDecoder
from agui_meta._metadata import copy_json
from agui_meta._patch import DOCUMENT_DEPTH, PatchError, apply_patch
from agui_meta.cli import main as cli_main
from tests.helpers import cli, sse
from tests.oracle import OracleServer, assert_same_result

Event = dict[str, Any]
RUN: Event = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISH: Event = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
MODES = ("default", "keep_going")


class Outcome:
    def __init__(self) -> None:
        self.stages = agui_meta.DefaultStages()
        self.reports: list[Report] = []
        self.updates: list[Any] = []
        self.error: BaseException | None = None

    @property
    def store(self) -> agui_meta.Store:
        return self.stages.store  # type: ignore[no-any-return]


def run(source: list[Any], mode: str = "default", **options: Any) -> Outcome:
    """The default pipeline over ``source``: the outcome, never an exception."""
    outcome = Outcome()

    async def main() -> None:
        async with agui_meta.wrap(
            source, *outcome.stages, mode=mode, on_report=outcome.reports.append, **options
        ) as stream:
            outcome.updates.extend([u async for u in stream])

    try:
        anyio.run(main)
    except Exception as exc:  # noqa: BLE001 - the tests look at what it is
        outcome.error = exc
    return outcome


def assert_no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), (done.returncode, done.stderr)


# ---------------------------------------------------------------------------------------------
# 1. Python's int-string limit: every int() of producer text


HUGE = "1" * 5000  # past the interpreter's 4,300-digit int-string limit
HUGE_INDEX_PATCHES: list[list[dict[str, Any]]] = [
    [{"op": "replace", "path": f"/a/{HUGE}", "value": 1}],
    [{"op": "add", "path": f"/a/{HUGE}", "value": 9}],
    [{"op": "test", "path": f"/a/{HUGE}", "value": 9}],
    [{"op": "remove", "path": f"/a/{HUGE}"}],
    [{"op": "copy", "from": f"/a/{HUGE}", "path": "/b"}],
    [{"op": "move", "from": f"/a/{HUGE}", "path": "/c"}],
    [{"op": "add", "path": f"/a/0{HUGE}", "value": 8}],
    [{"op": "replace", "path": f"/s/{HUGE}", "value": 1}],
]


def huge_index_stream(kind: str) -> list[Event]:
    events: list[Event] = [
        RUN,
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": [1, 2, 3], "s": "text"}},
        *({"type": "STATE_DELTA", "delta": ops} for ops in HUGE_INDEX_PATCHES),
        {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": "act",
            "activityType": "p",
            "content": {"a": [1, 2]},
        },
        *(
            {"type": "ACTIVITY_DELTA", "messageId": "act", "activityType": "p", "patch": ops}
            for ops in HUGE_INDEX_PATCHES
        ),
        FINISH,
    ]
    return events


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["bytes", "dicts"])
def test_array_indices_of_any_length_are_patched_as_the_reference_does(
    mode: str, kind: str, oracle: OracleServer
) -> None:
    events = huge_index_stream(kind)
    source: list[Any] = [sse(events)] if kind == "bytes" else events
    outcome = run(source, mode)
    assert outcome.error is None, repr(outcome.error)
    expected = oracle.run_one({"name": "huge-index", "events": events})
    ours = {"messages": outcome.store.messages_wire(), "state": outcome.store.state}
    assert_same_result(ours, expected, {"name": "huge-index", "events": events})
    # What the reference only warns about is a report here, with where.
    assert {r.code for r in outcome.reports} == {"patch-failed"}
    assert all(r.index is not None and r.path for r in outcome.reports)


def test_apply_patch_takes_indices_of_any_length() -> None:
    for ops in HUGE_INDEX_PATCHES:
        # A PatchError is the reference's own verdict; anything else escaping is the defect.
        with contextlib.suppress(PatchError):
            apply_patch({"a": [1, 2, 3], "s": "text"}, ops)


def test_sse_retry_of_any_length_saturates() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"retry: " + b"7" * 5000 + b"\n\n")
    assert decoder.retry == RETRY_MAX
    decoder.feed(b"retry: " + b"0" * 5000 + b"1500\n\n")
    assert decoder.retry == 1500
    outcome = run([b"retry: " + b"9" * 5000 + b"\n" + sse([RUN, FINISH])])
    assert outcome.error is None and len(outcome.updates) == 2


def test_the_command_line_shows_no_traceback_on_huge_indices() -> None:
    data = sse(huge_index_stream("bytes"))
    for args in (["replay", "-"], ["replay", "--json", "-"], ["validate", "-"]):
        done = cli(*args, stdin=data)
        assert_no_traceback(done)
        assert "patch-failed" in done.stdout + done.stderr


# ---------------------------------------------------------------------------------------------
# 5. Documents patched deeper than a snapshot may carry


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def chain(n: int) -> Any:
    """``n`` nested arrays: ``[[...[]...]]`` (depth ``n``)."""
    value: Any = []
    for _ in range(n - 1):
        value = [value]
    return value


def deepening(kind: str, steps: int = 12) -> list[Event]:
    """Each delta nests the document 20 levels deeper, through ``add``, ``copy`` or ``move``."""
    if kind == "state":
        events: list[Event] = [RUN, {"type": "STATE_SNAPSHOT", "snapshot": {"a": chain(20)}}]
    else:
        events = [
            RUN,
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": "act",
                "activityType": "p",
                "content": {"a": chain(20)},
            },
        ]
    path = "/a" + "/0" * 19
    for step in range(steps):
        if step % 3 == 0:
            ops: list[dict[str, Any]] = [{"op": "add", "path": path + "/-", "value": chain(20)}]
        elif step % 3 == 1:
            ops = [
                {"op": "add", "path": "/tmp", "value": chain(20)},
                {"op": "move", "from": "/tmp", "path": path + "/-"},
            ]
        else:
            ops = [
                {"op": "add", "path": "/tmp", "value": chain(20)},
                {"op": "copy", "from": "/tmp", "path": path + "/-"},
                {"op": "remove", "path": "/tmp"},
            ]
        path += "/0" * 20
        if kind == "state":
            events.append({"type": "STATE_DELTA", "delta": ops})
        else:
            events.append(
                {"type": "ACTIVITY_DELTA", "messageId": "act", "activityType": "p", "patch": ops}
            )
    events.append(FINISH)
    return events


@pytest.mark.parametrize("kind", ["state", "activity"])
def test_patches_never_build_a_document_deeper_than_a_snapshot_carries(kind: str) -> None:
    events = deepening(kind)
    outcome = run([sse(events)])
    assert outcome.error is None, repr(outcome.error)
    document = (
        outcome.store.state if kind == "state" else outcome.store.messages_wire()[0]["content"]
    )
    assert depth(document) == 1 + 20 + 5 * 20  # {"a": …}, then five deltas of 20 levels each
    # The first delta that would pass the limit fails, with its operation named; later ones
    # cannot find their path any more.
    failed = [r for r in outcome.reports if r.code == "patch-failed"]
    assert failed and "more than 127 levels deep" in failed[0].message
    assert failed[0].index == 2 + 5 and failed[0].path is not None
    # Whatever got in can be encoded, re-sent as a snapshot and decoded again.
    wire = json.dumps({"messages": outcome.store.messages_wire(), "state": outcome.store.state})
    snapshot = {"type": "STATE_SNAPSHOT", "snapshot": document}
    assert agui_meta.events.decode_event(json.dumps(snapshot).encode()) is not None
    assert json.loads(wire)
    for args in (["replay", "-"], ["replay", "--json", "-"], ["validate", "-"]):
        assert_no_traceback(cli(*args, stdin=sse(events)))


def test_a_document_may_reach_the_limit_exactly() -> None:
    # The root object is level 1: a value of depth 126 under "/a" makes 127 levels.
    assert DOCUMENT_DEPTH == agui_meta.MAX_NESTING - 1
    doc = apply_patch({}, [{"op": "add", "path": "/a", "value": chain(DOCUMENT_DEPTH - 1)}])
    assert depth(doc) == DOCUMENT_DEPTH
    with pytest.raises(PatchError) as info:
        apply_patch({}, [{"op": "add", "path": "/a", "value": chain(DOCUMENT_DEPTH)}])
    assert info.value.name == "TOO_DEEP"
    # Moving a subtree up, or sideways, never needs a check; moving it down does.
    top = apply_patch({}, [{"op": "add", "path": "/a", "value": {"b": chain(DOCUMENT_DEPTH - 2)}}])
    assert depth(apply_patch(top, [{"op": "move", "from": "/a/b", "path": "/c"}])) < DOCUMENT_DEPTH
    with pytest.raises(PatchError):
        apply_patch(top, [{"op": "move", "from": "/a/b", "path": "/a/b/0/x"}])
    with pytest.raises(PatchError):
        apply_patch(
            {"a": {}, "b": chain(DOCUMENT_DEPTH - 1)},
            [{"op": "copy", "from": "/b", "path": "/a/c"}],
        )
    # The root itself.
    with pytest.raises(PatchError):
        apply_patch({}, [{"op": "replace", "path": "", "value": chain(DOCUMENT_DEPTH + 1)}])


# ---------------------------------------------------------------------------------------------
# 2. Metadata written key by key: O(1) per key written, for every version an Update holds


def one_key_per_event(n: int) -> bytes:
    events: list[Event] = [RUN, {"type": "TEXT_MESSAGE_START", "messageId": "m"}]
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x", "metadata": {f"k{i}": i}}
        for i in range(n)
    ]
    events += [{"type": "TEXT_MESSAGE_END", "messageId": "m"}, FINISH]
    return sse(events)


def peak_bytes(n: int) -> int:
    data = one_key_per_event(n)
    run([one_key_per_event(2)])  # imports and caches warmed up, outside the measurement
    tracemalloc.start()
    try:
        outcome = run([data])  # one chunk: every Update of the stream is held at once
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcome.error is None
    contents = outcome.updates[2:-2]
    # Every update holds exactly the item's metadata as of its event, read long after.
    assert [len(u.metadata) for u in contents] == list(range(1, n + 1))
    assert contents[n // 2].metadata == {f"k{i}": i for i in range(n // 2 + 1)}
    return peak - len(data)


@pytest.mark.slow
def test_metadata_written_key_by_key_costs_memory_linear_in_the_keys() -> None:
    # Quadratic memory (a full copy per Update) would make the ratio 4; linear makes it 2.
    small, large = peak_bytes(1500), peak_bytes(3000)
    assert large / small < 2.6, (small, large)
    assert large < 3000 * 2000, large  # and a small constant per key (a copy each: ~100 MB)


MERGES = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=50),  # which earlier version to merge into
        st.dictionaries(st.sampled_from("abcdefg"), st.integers() | st.none(), max_size=4),
    ),
    max_size=25,
)


@given(MERGES, st.booleans())
def test_every_version_of_merged_metadata_is_the_fold_up_to_it(
    merges: list[tuple[int, dict[str, Any]]], linear: bool
) -> None:
    """Versions are values: each equals ``dict.update`` folded up to it, in spread order, read
    in any order, also after merges into older versions (which start their own record)."""
    versions: list[MergedMetadata] = [MergedMetadata()]
    expected: list[dict[str, Any]] = [{}]
    for pick, incoming in merges:
        base = len(versions) - 1 if linear else pick % len(versions)
        versions.append(agui_meta.merge_metadata(versions[base], incoming))
        expected.append({**expected[base], **incoming})
    for version, want in zip(versions, expected, strict=True):
        assert version == want and dict(version) == want
        assert list(version) == list(want) and len(version) == len(want)
        for key in "abcdefgh":
            assert (key in version) == (key in want)
            assert version.get(key, "absent") == want.get(key, "absent")
        assert pickle.loads(pickle.dumps(version)) == want
        assert copy.deepcopy(version) == want
        assert repr(version) == repr(want)
        assert agui_meta.merge_metadata(version, None) is version
        assert json.loads(json.dumps(copy_json(version))) == want


def test_the_hostile_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import hostile

    assert hostile.main(["--quick"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 4 and table[-1].startswith("| 800 |")


# ---------------------------------------------------------------------------------------------
# 10. What the reference drops without a word is reported here: never silent loss

START: Event = {"type": "TEXT_MESSAGE_START", "messageId": "m"}
END: Event = {"type": "TEXT_MESSAGE_END", "messageId": "m"}
SILENT_LOSSES: list[Any] = [
    pytest.param(
        [
            RUN,
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "nope",
                "activityType": "p",
                "patch": [],
                "metadata": {"acme.k": 1},
            },
            FINISH,
        ],
        "missing-target",
        1,
        "$.messageId",
        id="activity-delta-unknown",
    ),
    pytest.param(
        [
            RUN,
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": "nope",
                "encryptedValue": "x",
            },
            FINISH,
        ],
        "missing-target",
        1,
        "$.entityId",
        id="encrypted-value-unknown-message",
    ),
    pytest.param(
        [
            RUN,
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "tool-call",
                "entityId": "nope",
                "encryptedValue": "x",
            },
            FINISH,
        ],
        "missing-target",
        1,
        "$.entityId",
        id="encrypted-value-unknown-call",
    ),
    pytest.param(
        [RUN, {**START, "role": "user"}, END, {**START, "role": "developer"}, END, FINISH],
        "reopened-message",
        3,
        "$.role",
        id="reopened-with-another-role",
    ),
    pytest.param(
        [RUN, {**START, "name": "a"}, END, {**START, "name": "b"}, END, FINISH],
        "reopened-message",
        3,
        "$.name",
        id="reopened-with-another-name",
    ),
    pytest.param(
        [
            RUN,
            START,
            END,
            {"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_END", "messageId": "m"},
            FINISH,
        ],
        "reopened-message",
        3,
        "$.messageId",
        id="reopened-as-reasoning",
    ),
]


@pytest.mark.parametrize(("events", "code", "index", "path"), SILENT_LOSSES)
@pytest.mark.parametrize("mode", MODES)
def test_what_the_reference_drops_silently_is_reported(
    events: list[Event], code: str, index: int, path: str, mode: str, oracle: OracleServer
) -> None:
    outcome = run([sse(events)], mode)
    assert outcome.error is None, repr(outcome.error)
    [report] = [r for r in outcome.reports if r.code == code]
    assert (report.severity, report.index, report.path) == ("warning", index, path)
    # ... and the result is still the reference's.
    case = {"name": code, "events": events}
    ours = {"messages": outcome.store.messages_wire(), "state": outcome.store.state}
    assert_same_result(ours, oracle.run_one(case), case)
    assert isinstance(run([sse(events)], "strict").error, agui_meta.StrictError)


def test_a_reopened_message_with_its_own_role_and_name_is_not_reported() -> None:
    events = [RUN, {**START, "name": "a"}, END, {**START, "name": "a"}, END, START, END, FINISH]
    assert run([sse(events)], "strict").error is None


@pytest.mark.parametrize(
    ("frame", "path"),
    [
        (
            b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"a","delta":"x","messageId":"b"}',
            "$.messageId",
        ),
        (b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"a","delta":"x","delta":"y"}', "$.delta"),
        (
            b'{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","toolCallId":"d"}',
            "$.toolCallId",
        ),
        (
            b'{"type":"TEXT_MESSAGE_END","messageId":"a","metadata":{"acme.traceId":1,"acme.traceId":2}}',
            '$.metadata["acme.traceId"]',
        ),
        (
            b'{"type":"TEXT_MESSAGE_END","messageId":"a","metadata":{"acme.model":"x","acme.model":"y"}}',
            '$.metadata["acme.model"]',
        ),
        (
            b'{"type":"TEXT_MESSAGE_END","messageId":"a","metadata":{"p":1},"metadata":{"q":2}}',
            "$.metadata",
        ),
        (b'{"type":"TEXT_MESSAGE_CONTENT","type":"TEXT_MESSAGE_END","messageId":"a"}', "$.type"),
        (b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"a","delta" : "x","delta" :"y"}', "$.delta"),
        # the escaped colon in the first delta would balance the repeated key in a colon count
        (
            b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"a","delta":"x\\u003a","delta":"y"}',
            "$.delta",
        ),
        (
            b'{"type":"CUSTOM","name":"n","value":{"rows":[{"k":1,"k":2}]}}',
            "$.value.rows[0].k",
        ),
    ],
    ids=[
        "message-id",
        "delta",
        "tool-call-id",
        "metadata-key",
        "metadata-key-not-an-id",
        "metadata-object",
        "type",
        "spaced-colons",
        "escaped-colon",
        "nested-value",
    ],
)
def test_a_key_repeated_in_one_object_is_reported(frame: bytes, path: str) -> None:
    """JSON.parse keeps the last value (a second messageId retargets the event): kept so, and
    reported, with where."""
    prefix = sse([RUN, {**START, "messageId": "a"}, {**START, "messageId": "b"}])
    data = prefix + b"data: " + frame + b"\n\n"
    for source in ([data], [data.decode()]):
        outcome = run(source, "keep_going")
        [report] = [r for r in outcome.reports if r.code == "duplicate-key"]
        assert (report.index, report.path, report.offset) == (3, path, len(prefix))
        assert run(source, "strict").error is not None


def test_a_misspelt_sse_field_is_reported_and_validate_strict_fails() -> None:
    data = sse([RUN]) + b'DATA: {"type":"TEXT_MESSAGE_START","messageId":"m"}\n\n' + sse([FINISH])
    outcome = run([data])
    [report] = outcome.reports
    assert (report.code, report.offset, report.line) == ("sse-unknown-field", len(sse([RUN])), 3)
    assert "'DATA'" in report.message
    done = cli("validate", "--strict", "-", stdin=data)
    assert done.returncode == 1 and "sse-unknown-field" in done.stdout + done.stderr


# ---------------------------------------------------------------------------------------------
# 3, 4, 11. One set of limits for every source; messages that say what is wrong

CUSTOM = {"type": "CUSTOM", "name": "n"}


def value_text(value: Any) -> str:
    """JSON text of ``value`` for the values json.dumps cannot write (deep chains, huge ints)."""
    if isinstance(value, int):
        return str(value) if value < 10**4000 else "1" * 5001
    if isinstance(value, list):  # a chain(n): written without recursion
        n = 0
        while isinstance(value, list):
            n += 1
            value = value[0] if value else None
        return "[" * n + "]" * n
    return json.dumps(value)


def every_source(value: Any) -> dict[str, list[Any]]:
    """A CUSTOM event with ``value`` as bytes, str, a dict, an agui-meta event, a model."""
    from agui_meta.events import CustomEvent

    ascii_text = '{"type":"CUSTOM","name":"n","value":' + value_text(value) + "}"
    text = (
        '{"type":"CUSTOM","name":"n","value":' + json.dumps(value, ensure_ascii=False) + "}"
        if isinstance(value, str)
        else ascii_text
    )
    sources: dict[str, list[Any]] = {
        "bytes": [sse([RUN]) + b"data: " + ascii_text.encode() + b"\n\n" + sse([FINISH])],
        "str": [sse([RUN]).decode() + "data: " + text + "\n\n" + sse([FINISH]).decode()],
        "dict": [RUN, {**CUSTOM, "value": value}, FINISH],
        "event": [RUN, CustomEvent(name="n", value=value), FINISH],
    }
    from ag_ui.core import CustomEvent as CoreCustom

    sources["model"] = [RUN, CoreCustom(name="n", value=value), FINISH]
    return sources


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (chain(agui_meta.MAX_NESTING), "nested more than 128 levels deep"),
        (chain(2000), "nested more than 128 levels deep"),
        ("\ud800", "lone UTF-16 surrogate"),
        ("a\udfffb", "lone UTF-16 surrogate"),
        (10**5000, "Integer value out of range|digits"),
    ],
    ids=["depth-129", "depth-2000", "high-surrogate", "low-surrogate", "int-5001-digits"],
)
@pytest.mark.parametrize("mode", MODES)
def test_every_source_meets_the_same_limits_with_a_clear_error(
    value: Any, what: str, mode: str
) -> None:
    for kind, source in every_source(value).items():
        outcome = run(source, mode)
        if mode == "default":
            problem: Any = outcome.error
        else:
            assert outcome.error is None, (kind, repr(outcome.error))
            [problem] = [r for r in outcome.reports if r.severity == "error"]
            assert len(outcome.updates) == 2  # the run around it is kept
        assert isinstance(problem, (agui_meta.DecodeError, agui_meta.FramingError, Report)), (
            kind,
            repr(problem),
        )
        assert problem.index == 1, (kind, problem)
        assert re.search(what, str(problem)), (kind, str(problem))


def test_the_limit_itself_is_accepted_from_every_source() -> None:
    for kind, source in every_source(chain(agui_meta.MAX_NESTING - 2)).items():
        outcome = run(source, "strict")
        assert outcome.error is None, (kind, repr(outcome.error))


def test_an_escaped_lone_surrogate_is_not_called_truncation() -> None:
    data = sse([RUN]) + b'data: {"type":"CUSTOM","name":"\\ud800","value":1}'  # also unterminated
    for source in ([data], [data + b"\n\n" + sse([FINISH])]):
        error = run(source).error
        assert isinstance(error, agui_meta.DecodeError) and "truncated" not in str(error)
        assert "lone UTF-16 surrogate \\ud800" in str(error)


def test_lines_without_line_endings_are_not_called_truncation() -> None:
    for source in (
        [json.dumps(RUN), json.dumps(FINISH)],
        [json.dumps(RUN).encode(), json.dumps(FINISH).encode()],
    ):
        outcome = run(source)
        if outcome.error is None:  # a source of such lines may be read as lines one day
            continue
        assert "truncated" not in str(outcome.error)
        assert "more than one JSON value" in str(outcome.error)


# ---------------------------------------------------------------------------------------------
# Fuzz: generated streams, made hostile, through the whole default pipeline from every source

from hypothesis import HealthCheck, settings

from tests import strategies

HOSTILE_VALUES = st.one_of(
    st.integers(min_value=2**70, max_value=2**80) | st.integers(max_value=-(2**70)),
    st.sampled_from(["\ud800", "x\udfff", "\ud83d\ude00", "\x00", "\u2028"]),
    st.just(chain(130)),
    st.just("1" * 5000),
)


@st.composite
def hostile_streams(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = [dict(e) for e in draw(strategies.runs())]
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        if not events:
            break
        event = events[draw(st.integers(min_value=0, max_value=len(events) - 1))]
        key = draw(st.sampled_from(["metadata", "delta", "value", "snapshot"]))
        value = draw(HOSTILE_VALUES)
        event[key] = {"acme.v": value} if key == "metadata" else value
    return events


def encode_sse(events: list[Event]) -> bytes | None:
    try:
        return b"".join(b"data: " + msgspec.json.encode(e) + b"\n\n" for e in events)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None


def as_models(events: list[Event]) -> list[Any] | None:
    """The events as ``ag_ui.core`` models (pydantic), or ``None`` when the SDK refuses one."""
    import pydantic
    from ag_ui.core import Event as CoreEvent

    adapter = pydantic.TypeAdapter(CoreEvent)
    try:
        return [adapter.validate_python(e) for e in events]
    except (pydantic.ValidationError, RecursionError, ValueError):
        return None


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    hostile_streams(),
    st.sampled_from(["bytes", "str", "dicts", "models"]),
    st.sampled_from(MODES),
)
def test_generated_hostile_streams_give_only_the_package_errors(
    events: list[Event], kind: str, mode: str
) -> None:
    if kind == "dicts":
        source: list[Any] = events
    elif kind == "models":
        models = as_models(events)
        if models is None:  # a stream the SDK's own models cannot hold
            return
        source = models
    else:
        data = encode_sse(events)
        if data is None:  # a value JSON cannot carry (a lone surrogate in msgspec's encoder)
            return
        source = [data] if kind == "bytes" else [data.decode("utf-8", "surrogatepass")]
    outcome = run(source, mode)
    if mode == "keep_going":
        assert outcome.error is None or isinstance(outcome.error, agui_meta.FramingError), repr(
            outcome.error
        )
    else:
        assert outcome.error is None or isinstance(outcome.error, agui_meta.AguiMetaError), repr(
            outcome.error
        )
    # Whatever got in can be read back out, encoded and printed.
    json.dumps(outcome.store.messages_wire())
    json.dumps(outcome.store.state)
    outcome.stages.ledger.to_json()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    hostile_streams(),
    st.sampled_from(["validate", "replay --json", "replay", "compact"]),
    st.booleans(),
)
def test_generated_hostile_streams_through_the_command_line(
    events: list[Event], command: str, keep_going: bool
) -> None:
    """Every command on a hostile file: exit 0 or 1 with its own words, never a traceback."""
    data = encode_sse(events)
    if data is None:
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "stream.sse"
        path.write_bytes(data)
        argv = [*command.split(), str(path)]
        if keep_going and command != "validate":  # validate reports every error anyway
            argv.insert(1, "--keep-going")
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding="utf-8")  # the commands write bytes too
        err = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli_main(argv)
            except SystemExit as exit:  # argparse
                status = exit.code  # type: ignore[assignment]
        out.flush()
        written = raw.getvalue().decode("utf-8")
    assert status in (0, 1), (status, err.getvalue()[-2000:])
    assert "Traceback" not in err.getvalue()
    if status == 1:
        assert err.getvalue().strip() or written.strip()  # an error says something
    if command == "replay --json" and status == 0:
        json.loads(written)


# Objects as lists of pairs, so that a key can come twice; written with random spacing, and
# with each colon inside a string sometimes escaped (\u003a), the escape a count could miss.
_TEXT = st.text(alphabet=':ab"\\ é', max_size=4)
_PAIRS_TREE = st.recursive(
    st.one_of(st.none(), st.integers(-5, 5), _TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(st.tuples(st.sampled_from(["a", "b", "a:b", ":", "é"]), children), max_size=4).map(
            lambda pairs: ("pairs", pairs)
        ),
    ),
    max_leaves=12,
)


def _write(node: Any, draw: st.DrawFn) -> str:
    space = draw(st.sampled_from(["", " ", "\n"]))
    if isinstance(node, tuple):
        return (
            "{"
            + ",".join(
                f"{_write_string(key, draw)}{space}:{space}{_write(child, draw)}"
                for key, child in node[1]
            )
            + "}"
        )
    if isinstance(node, list):
        return "[" + f",{space}".join(_write(child, draw) for child in node) + "]"
    if isinstance(node, str):
        return _write_string(node, draw)
    return json.dumps(node)


def _write_string(text: str, draw: st.DrawFn) -> str:
    written = json.dumps(text)
    if ":" in text and draw(st.booleans()):
        written = written.replace(":", "\\u003a")
    return written


@st.composite
def _event_texts(draw: st.DrawFn) -> bytes:
    metadata = draw(_PAIRS_TREE.filter(lambda n: isinstance(n, tuple)))
    head = draw(
        st.sampled_from(
            [
                '"type":"TEXT_MESSAGE_END","messageId":"m"',
                '"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a:b"',
                '"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\\"k\\": 1}"',
                '"type":"CUSTOM","name":"n"',
            ]
        )
    )
    field = "value" if "CUSTOM" in head else "metadata"
    extra = draw(st.sampled_from(["", ',"messageId":"m"', ',"name":"x:y"', ',"delta":"q:"']))
    return ("{" + head + extra + f',"{field}":' + _write(metadata, draw) + "}").encode()


@given(_event_texts())
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_the_colon_count_never_clears_text_that_repeats_a_key(text: bytes) -> None:
    """The fast decode's precheck is exact in one direction: text it lets through repeats no
    key; and the slow path's count agrees on plain values."""
    repeated = duplicate_keys(text)
    if fast_decode(text) is not None:
        assert repeated == []
    value = msgspec.json.decode(text)
    if not may_repeat_keys(text, text.count(b":"), value):
        assert repeated == []


def test_every_wire_struct_omits_its_defaults() -> None:
    """The premise of the colon count: an event encoded again writes no field the text left
    out, so it never has more colons than the text it was decoded from."""
    import inspect

    from agui_meta import _events

    structs = [
        c for c in vars(_events).values() if inspect.isclass(c) and issubclass(c, msgspec.Struct)
    ]
    assert len(structs) > 30
    assert [c.__name__ for c in structs if not c.__struct_config__.omit_defaults] == []


@pytest.mark.parametrize(
    "text",
    [
        b'{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}',  # a default, given
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r","metadata":{"a:b":{"c":":"}}}',
        b'{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"n","parentMessageId":"m"}',
    ],
)
def test_text_without_a_repeated_key_takes_the_fast_decode(text: bytes) -> None:
    assert duplicate_keys(text) == []
    assert fast_decode(text) is not None
