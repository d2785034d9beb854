"""``agui-meta validate`` as a linter: the hygiene rules, their report formats and options.

The rule classes that ``ag-ui-validate`` 0.4.0 checks beyond the reference client are checked
against that tool itself, run on the same bytes: each of its findings of those classes has one
of agui-meta's at the same event.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from agui_meta import Report, UsageError, run_sync
from agui_meta._lint import RULES, Lint
from tests.example_streams import STREAMS
from tests.helpers import cli

RUN = {"threadId": "t1", "runId": "r1"}

#: One defect of each class a line (index: what it shows), as in issue 24's 17-event stream.
HYGIENE: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", **RUN},
    {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a", "value": 1}]},  # 1
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},  # 5: reused
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f", "parentMessageId": "x"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"a": '},
    {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "early"},  # 9
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},  # 10: arguments not JSON
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f", "parentMessageId": "m1"},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {"type": "TOOL_CALL_RESULT", "messageId": "t2", "toolCallId": "nobody", "content": "?"},
    {"type": "RAW", "event": {"type": "TEXT_MESSAGE_START", "messageId": "x", "role": "user"}},
    {"type": "CUSTOM", "name": "update", "value": 1},  # 15
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r2"},  # 16
]

#: ag-ui-validate's rule -> agui-meta's code, for the classes issue 24 lists.
COVERED = {
    "AGUI104": "message.id-reused",
    "AGUI205": "tool-call.id-reused",
    "AGUI204": "tool-call.arguments-not-json",
    "AGUI206": "tool-call.result-before-end",
    "AGUI207": "tool-call.result-unknown-call",
    "AGUI208": "tool-call.unknown-parent-message",
    "AGUI008": "run.finished-ids-mismatch",
    "AGUI301": "state.delta-without-snapshot",
    "AGUI901": "raw.wraps-typed-event",
    "AGUI903": "custom.name-not-namespaced",
}


def jsonl(events: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def lint(events: list[Any], **options: Any) -> list[Report]:
    reports: list[Report] = []
    run_sync([Lint(**options)], events, mode="keep_going", on_report=reports.append)
    return reports


def findings(*args: str, stdin: bytes | None = None) -> tuple[int, dict[str, Any]]:
    done = cli("validate", "--format", "json", *args, stdin=stdin)
    return done.returncode, json.loads(done.stdout)


def ag_ui_validate(path: Path) -> list[dict[str, Any]]:
    tool = shutil.which("ag-ui-validate", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.fail("ag-ui-validate is not installed (the test extra has ag-ui-validate==0.4.0)")
    done = subprocess.run([tool, "--json", str(path)], capture_output=True, timeout=60, check=False)
    report = json.loads(done.stdout)
    assert report["tool"] == {"name": "ag-ui-validate", "version": "0.4.0"}
    diagnostics: list[dict[str, Any]] = report["diagnostics"]
    return diagnostics


# ---------------------------------------------------------------------------------------------
# Against ag-ui-validate 0.4.0


@pytest.mark.parametrize("encode", [jsonl, sse])
def test_each_rule_class_of_ag_ui_validate_is_found_at_the_same_event(
    tmp_path: Path, encode: Any
) -> None:
    path = tmp_path / "hygiene.txt"
    path.write_bytes(encode(HYGIENE))
    theirs = [d for d in ag_ui_validate(path) if d["rule"] in COVERED]
    assert {d["rule"] for d in theirs} == set(COVERED)  # the stream shows every class
    status, ours = findings(str(path))
    assert status == 0  # hygiene only: warnings and information, no error
    found = {(f["code"], f["index"]) for f in ours["files"][0]["findings"]}
    for diagnostic in theirs:
        assert (COVERED[diagnostic["rule"]], diagnostic["eventIndex"]) in found, diagnostic
    # And nothing more than those ten, once each (the stream ends closed, its keys prefixed).
    assert len(found) == len(theirs) == len(COVERED)
    # Each finding has a place in the bytes: the line and offset of its event.
    raw = path.read_bytes()
    for finding in ours["files"][0]["findings"]:
        event = HYGIENE[finding["index"]]
        assert raw[finding["offset"] :].split(b"\n", 1)[0].endswith(json.dumps(event).encode())


def test_the_example_streams_are_clean_for_both_linters() -> None:
    for name in ("travel.sse", "support.jsonl"):
        theirs = [d for d in ag_ui_validate(STREAMS / name) if d["rule"] in COVERED]
        status, ours = findings(str(STREAMS / name))
        codes = {f["code"] for f in ours["files"][0]["findings"]} & set(COVERED.values())
        assert (theirs, codes, status) == ([], set(), 0), name


# ---------------------------------------------------------------------------------------------
# The rules one by one (beyond the ten above)


def test_reserved_key_and_unprefixed_keys_once_per_key() -> None:
    events = [
        {"type": "RUN_STARTED", **RUN, "metadata": {"latency": 1, "acme.x": 2}},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant",
         "metadata": {"latency": 2, "ag-ui": {"x": 1}}},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a",
         "metadata": {"latency": 3, "model": "m"}},
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"model": "m"}},
        {"type": "RUN_FINISHED", **RUN},
    ]  # fmt: skip
    reports = lint(events)
    assert [(r.code, r.index, r.path, r.severity) for r in reports] == [
        ("unprefixed-metadata-key", 0, "$.metadata.latency", "warning"),
        ("metadata.reserved-key", 1, '$.metadata["ag-ui"]', "warning"),
        ("unprefixed-metadata-key", 2, "$.metadata.model", "warning"),
    ]


def test_the_reserved_key_in_the_clients_input_echoed_is_not_the_producers() -> None:
    message = {"id": "u", "role": "user", "content": "hi", "metadata": {"ag-ui": 1}}
    run_input = {**RUN, "messages": [message]}
    reports = lint([{"type": "RUN_STARTED", **RUN, "input": run_input}])
    assert reports == []
    snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": [message]}
    assert [r.code for r in lint([{"type": "RUN_STARTED", **RUN}, snapshot])] == [
        "metadata.reserved-key"
    ]


@pytest.mark.parametrize(
    ("version", "code"),
    [
        ("1.0", None),
        ("1.0.0", None),
        ("0.0.57", None),
        ("1", None),
        ("1.0.1", "protocol-version.newer"),
        ("1.1", "protocol-version.newer"),
        ("2.0", "protocol-version.newer"),
        ("one", "protocol-version.unknown"),
        ("1.x", "protocol-version.unknown"),
        ("", "protocol-version.unknown"),
    ],
)
def test_a_declared_protocol_version(version: str, code: str | None) -> None:
    reports = lint([{"type": "RUN_STARTED", **RUN, "protocolVersion": version}])
    assert [r.code for r in reports] == ([code] if code else [])
    assert all(r.path == "$.protocolVersion" and r.index == 0 for r in reports)


def test_ids_from_history_snapshots_and_results_are_known() -> None:
    call = {"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [{"id": "a0", "role": "assistant", "toolCalls": [call]}]
    events = [
        {"type": "RUN_STARTED", **RUN, "input": {**RUN, "messages": history, "state": {}}},
        {"type": "STATE_DELTA", "delta": []},  # the input's state is the base
        {"type": "TOOL_CALL_RESULT", "messageId": "t0", "toolCallId": "c0", "content": "ok"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f",
         "parentMessageId": "t0"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": ""},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},  # no arguments: a tool without any
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "s", "role": "user", "content": "x"}]},
        {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "f",
         "parentMessageId": "s"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": '{"a":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": " [1]}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c2"},
        {"type": "CUSTOM", "name": "acme.update", "value": 1},
        {"type": "CUSTOM", "name": "@acme/ui:update", "value": 1},
        {"type": "RAW", "event": {"type": "SOMETHING_ELSE"}},
        {"type": "RAW", "event": "TEXT_MESSAGE_START"},
        {"type": "RUN_FINISHED", **RUN},
    ]  # fmt: skip
    assert lint(events) == []


def test_findings_per_run_ids_and_a_delta_reported_once() -> None:
    events = [
        {"type": "RUN_STARTED", **RUN},
        {"type": "STATE_DELTA", "delta": []},
        {"type": "STATE_DELTA", "delta": []},
        {"type": "RUN_FINISHED", "threadId": "other", "runId": "r9"},
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r2"},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r2"},
    ]
    reports = lint(events)
    assert [(r.code, r.index, r.path) for r in reports] == [
        ("state.delta-without-snapshot", 1, None),
        ("run.finished-ids-mismatch", 3, "$.threadId"),
        ("run.finished-ids-mismatch", 3, "$.runId"),
    ]


def test_bounded_records_stand_down_instead_of_guessing() -> None:
    def call(n: int) -> list[dict[str, Any]]:
        return [
            {"type": "TOOL_CALL_START", "toolCallId": f"c{n}", "toolCallName": "f"},
            {"type": "TOOL_CALL_END", "toolCallId": f"c{n}"},
        ]

    events = [{"type": "RUN_STARTED", **RUN}, *call(0), *call(1), *call(2)]
    result = {"type": "TOOL_CALL_RESULT", "messageId": "t", "content": "x"}
    late = [{**result, "toolCallId": "nobody"}, *call(0)]
    # With room for every id: the unknown call and the reused id are found.
    assert [r.code for r in lint(events + late)] == [
        "tool-call.result-unknown-call",
        "tool-call.id-reused",
    ]
    # Keeping two ids of each kind: c0 is forgotten, so neither is claimed.
    lint_stage = Lint(max_closed_ids=2)
    reports: list[Report] = []
    run_sync([lint_stage], events + late, on_report=reports.append)
    assert reports == []
    assert all(len(t.ids) <= 2 for t in (lint_stage._ended_calls, lint_stage._known_calls))
    with pytest.raises(UsageError, match="max_closed_ids"):
        Lint(max_closed_ids=-1)


def test_every_rule_has_a_code_a_severity_and_one_line() -> None:
    for code, rule in RULES.items():
        assert rule.code == code and rule.severity in ("warning", "info")
        assert rule.summary and "\n" not in rule.summary and len(rule.summary) < 90


# ---------------------------------------------------------------------------------------------
# The command: formats, files, --rule, exit statuses


BROKEN = [*HYGIENE[:3], {"type": "TEXT_MESSAGE_END", "messageId": "zz"}]  # an error at 3


def test_json_report_of_several_files(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.sse"
    good.write_bytes(jsonl([{"type": "RUN_STARTED", **RUN}, {"type": "RUN_FINISHED", **RUN}]))
    bad.write_bytes(sse(BROKEN))
    status, report = findings(str(good), str(bad))
    assert status == 1
    assert [f["file"] for f in report["files"]] == [str(good), str(bad)]
    assert report["files"][0] == {
        "file": str(good), "valid": True, "events": 2, "errors": 0, "warnings": 0, "infos": 0,
        "findings": [], "notShown": 0,
    }  # fmt: skip
    codes = [(f["code"], f["severity"], f.get("index")) for f in report["files"][1]["findings"]]
    assert codes == [
        ("state.delta-without-snapshot", "info", 1),
        ("text.not-open", "error", 3),
        ("stream-ended-open", "warning", 3),  # at the end: the last event
    ]
    first = report["files"][1]["findings"][1]
    assert (first["line"], first["offset"]) == (7, len(sse(BROKEN[:3])))
    end = report["files"][1]["findings"][2]
    assert (end["line"], end["offset"]) == (7, len(sse(BROKEN[:3])))
    assert (report["errors"], report["warnings"], report["infos"], report["valid"]) == (
        1,
        1,
        1,
        False,
    )


def test_rule_overrides_and_strict(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(jsonl(HYGIENE))
    assert cli("validate", str(path)).returncode == 0
    assert cli("validate", "--strict", str(path)).returncode == 1
    status, report = findings(
        "--rule", "custom.name-not-namespaced=error", "--rule", "message.id-reused=off",
        "--rule", "tool-call.id-reused=info", str(path),
    )  # fmt: skip
    assert status == 1
    got = {f["code"]: f["severity"] for f in report["files"][0]["findings"]}
    assert got["custom.name-not-namespaced"] == "error"
    assert "message.id-reused" not in got
    assert got["tool-call.id-reused"] == "info"
    # The reference client's own rules can be changed too (they are errors by default).
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(jsonl(BROKEN))
    assert cli("validate", str(bad)).returncode == 1
    assert cli("validate", "--rule", "text.not-open=warning", str(bad)).returncode == 0
    for wrong in ("nope", "x=fatal", "=error", "a b=off"):
        done = cli("validate", "--rule", wrong, str(path))
        assert done.returncode == 2 and "not CODE=SEVERITY" in done.stderr


def test_text_output_of_several_files_and_an_unreadable_one(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(jsonl(HYGIENE))
    done = cli("validate", str(path), str(tmp_path / "missing.jsonl"), str(path))
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    assert lines[-1] == "3 files: 0 errors, 12 warnings"
    assert lines.count(f"{path}: valid: 17 events checked, 0 errors, 6 warnings") == 2
    assert f"cannot read {tmp_path / 'missing.jsonl'}" in done.stderr
    assert cli("validate", "-", "-").returncode == 2


def test_max_errors_applies_to_machine_formats(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(jsonl(HYGIENE))
    status, report = findings("--max-errors", "3", str(path))
    assert status == 0
    entry = report["files"][0]
    assert (len(entry["findings"]), entry["notShown"], entry["warnings"]) == (3, 7, 6)


def test_sarif_report(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(jsonl(BROKEN))
    done = cli("validate", "--format", "sarif", str(path))
    assert done.returncode == 1
    log = json.loads(done.stdout)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["state.delta-without-snapshot"]["shortDescription"]["text"] == (
        RULES["state.delta-without-snapshot"].summary
    )
    assert rules["text.not-open"]["defaultConfiguration"]["level"] == "error"
    results = [(r["ruleId"], r["level"]) for r in run["results"]]
    assert results == [
        ("state.delta-without-snapshot", "note"),
        ("text.not-open", "error"),
        ("stream-ended-open", "warning"),
    ]
    region = run["results"][1]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 4, "byteOffset": len(jsonl(BROKEN[:3]))}
    assert run["results"][1]["properties"] == {"eventIndex": 3}
    # The end of the stream: its last event's place (event 3 is the last).
    assert run["results"][2]["locations"][0]["physicalLocation"]["region"] == region
    assert run["results"][2]["properties"] == {"eventIndex": 3}


def test_junit_report(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_bytes(jsonl(HYGIENE))
    # A control character in a finding's message stays valid XML.
    bad.write_bytes(jsonl([*BROKEN[:3], {"type": "TEXT_MESSAGE_END", "messageId": "z\x1b\x00"}]))
    done = cli("validate", "--format", "junit", str(good), str(bad), str(tmp_path / "none"))
    assert done.returncode == 2
    root = ET.fromstring(done.stdout)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(good), str(bad), str(tmp_path / "none")]
    assert suites[0].find("testcase/failure") is None
    assert "[custom.name-not-namespaced]" in (suites[0].findtext("testcase/system-out") or "")
    failure = suites[1].find("testcase/failure")
    assert failure is not None and failure.get("message") == "1 errors, 1 warnings"
    assert "[text.not-open]" in (failure.text or "") and "\\x1b\\x00" in (failure.text or "")
    assert suites[2].find("testcase/error") is not None
    # With --strict, warnings fail the case as well.
    strict = ET.fromstring(cli("validate", "--format", "junit", "--strict", str(good)).stdout)
    assert strict.get("failures") == "1"


def test_help_lists_every_rule() -> None:
    done = cli("validate", "--help")
    for code, rule in RULES.items():
        assert code in done.stdout and rule.summary in " ".join(done.stdout.split())


def test_the_reserved_key_once_per_event_type_and_keys_judged_once() -> None:
    content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a"}
    events = [
        {"type": "RUN_STARTED", **RUN},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        *[{**content, "metadata": {"ag-ui": n, "k": n, "acme.n": n}} for n in range(5)],
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"ag-ui": 1, "k": 2}},
    ]
    reports = lint(events)
    assert [(r.code, r.index, r.event_type) for r in reports] == [
        ("metadata.reserved-key", 2, "TEXT_MESSAGE_CONTENT"),
        ("unprefixed-metadata-key", 2, "TEXT_MESSAGE_CONTENT"),
        ("metadata.reserved-key", 7, "TEXT_MESSAGE_END"),
    ]
    # The record of judged keys is bounded: past it, it starts again.
    many = [{**content, "metadata": {f"k{n}": n}} for n in range(6)]
    stage = Lint(max_closed_ids=4)
    found: list[Report] = []
    run_sync([stage], [*events[:2], *many, many[0]], on_report=found.append)
    assert [r.path for r in found] == [f"$.metadata.k{n}" for n in range(6)] + ["$.metadata.k0"]
    assert len(stage._done_keys) <= 4


@pytest.mark.parametrize("encode", [jsonl, sse], ids=["jsonl", "sse"])
def test_end_of_stream_findings_are_located_at_the_last_event_in_every_format(
    tmp_path: Path, encode: Any
) -> None:
    # A run left open after a message started: the stream's end is its last event (index 2),
    # on that event's line and byte offset, as a stream cut inside its last frame is located.
    events = [
        {"type": "RUN_STARTED", **RUN},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi"},
    ]
    path = tmp_path / "open.txt"
    path.write_bytes(encode(events))
    offset = len(encode(events[:2]))
    line = encode(events[:2]).count(b"\n") + 1

    _, report = findings(str(path))
    (end,) = report["files"][0]["findings"]
    assert (end["code"], end["index"], end["line"], end["offset"]) == (
        "stream-ended-open", 2, line, offset,
    )  # fmt: skip

    text = cli("validate", str(path)).stdout.splitlines()
    assert text[0].startswith(f"{path}:{line}:{offset}: event 2: warning: [stream-ended-open]")

    sarif = json.loads(cli("validate", "--format", "sarif", str(path)).stdout)
    (result,) = sarif["runs"][0]["results"]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert result["ruleId"] == "stream-ended-open"
    assert (region["startLine"], region["byteOffset"]) == (line, offset)
    assert result["properties"]["eventIndex"] == 2

    junit = ET.fromstring(cli("validate", "--format", "junit", str(path)).stdout)
    out = junit.find("testsuite/testcase/system-out")
    assert out is not None and out.text is not None
    assert f"event 2, line {line}, byte {offset}: warning: [stream-ended-open]" in out.text


@pytest.mark.parametrize("data", [b"", b"\n\n"], ids=["empty", "blank-lines"])
def test_an_empty_stream_is_located_at_its_start_in_every_format(
    tmp_path: Path, data: bytes
) -> None:
    # No event to point at: stream-ended-empty sits where the first event was expected,
    # line 1, byte 0, with no event index, in every format (SARIF gets its region).
    path = tmp_path / "empty.sse"
    path.write_bytes(data)
    _, report = findings(str(path))
    (end,) = report["files"][0]["findings"]
    assert (end["code"], end.get("index"), end["line"], end["offset"]) == (
        "stream-ended-empty", None, 1, 0,
    )  # fmt: skip

    text = cli("validate", str(path)).stdout.splitlines()
    assert text[0].startswith(f"{path}:1:0: warning: [stream-ended-empty]")

    sarif = json.loads(cli("validate", "--format", "sarif", str(path)).stdout)
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "stream-ended-empty" and "properties" not in result
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["byteOffset"]) == (1, 0)
    (rule,) = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert rule["shortDescription"]["text"] == RULES["stream-ended-empty"].summary

    junit = ET.fromstring(cli("validate", "--format", "junit", str(path)).stdout)
    out = junit.find("testsuite/testcase/system-out")
    assert out is not None and out.text is not None
    assert "end of stream, line 1, byte 0: warning: [stream-ended-empty]" in out.text


def test_an_empty_stream_of_bytes_is_located_and_one_of_events_is_not() -> None:
    import anyio

    from agui_meta._validate import validate_stream

    async def both() -> tuple[Any, Any]:
        return await validate_stream(b""), await validate_stream([])

    of_bytes, of_events = anyio.run(both)
    [(report, _)] = of_bytes.findings
    assert (report.code, report.index, report.line, report.offset) == (
        "stream-ended-empty", None, 1, 0,
    )  # fmt: skip
    [(report, _)] = of_events.findings  # dicts have no lines: nothing to name
    assert (report.code, report.index, report.line, report.offset) == (
        "stream-ended-empty", None, None, None,
    )  # fmt: skip


def test_a_stream_cut_inside_its_last_frame_is_located_there_twice(tmp_path: Path) -> None:
    # The framing error and the end-of-stream finding name the same place: the cut frame.
    whole = sse([{"type": "RUN_STARTED", **RUN}])
    path = tmp_path / "cut.sse"
    path.write_bytes(whole + b'data: {"type": "TEXT_MESS')
    _, report = findings(str(path))
    places = [
        (f["code"], f["index"], f["line"], f["offset"]) for f in report["files"][0]["findings"]
    ]
    assert places == [
        ("FramingError", 1, 3, len(whole)),
        ("stream-ended-open", 1, 3, len(whole)),
    ]
