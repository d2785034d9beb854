"""The ``replay`` and ``validate`` commands (and the command line around them).

Expectations come from the reference client (the conversation of a recorded stream), from the
streams' own events (usage, run metadata) and from the defects planted in ``broken.jsonl``
(``DEFECTS`` of the generator), never from a previous run of these commands.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

from agui_meta.cli import build_parser, commands, main
from tests import example_streams
from tests.example_streams import STREAMS
from tests.helpers import cli
from tests.oracle import REPO_ROOT, OracleServer, assert_same_result

TIMEOUT = 60
ESC = "\x1b["
ERROR_LINES: tuple[int, ...] = example_streams.generator().ERROR_LINES


def stream(name: str) -> str:
    return str(STREAMS / name)


# ---------------------------------------------------------------------------------------------
# Reading the transcript back


def section(text: str, title: str) -> list[str]:
    """The lines of the ``--- title ... ---`` section (up to the next section)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"--- {title}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("--- ")), len(lines))
    return lines[start + 1 : end]


def parse_transcript(lines: list[str]) -> list[dict[str, Any]]:
    """Messages as the transcript shows them: header, body, metadata, tool calls."""
    messages: list[dict[str, Any]] = []
    call: dict[str, Any] | None = None
    for n, line in enumerate(lines):
        if not line:  # inside a message when the next line is still indented
            if n + 1 < len(lines) and lines[n + 1].startswith(" ") and messages:
                (call or messages[-1])["body"].append("")
            continue
        if not line.startswith(" "):
            messages.append({"header": line, "body": [], "metadata": None, "calls": []})
            call = None
        elif line.startswith("  tool call "):
            call = {"header": line[2:], "body": [], "metadata": None}
            messages[-1]["calls"].append(call)
        elif call is not None and line.startswith("    metadata: "):
            call["metadata"] = json.loads(line.removeprefix("    metadata: "))
        elif call is not None:
            call["body"].append(line.removeprefix("    "))
        elif line.startswith("  metadata: "):
            messages[-1]["metadata"] = json.loads(line.removeprefix("  metadata: "))
        else:
            messages[-1]["body"].append(line.removeprefix("  "))
    return messages


def assert_shows(shown: dict[str, Any], expected: dict[str, Any]) -> None:
    """One message of the transcript against the reference's wire message."""
    header = shown["header"]
    assert header.startswith(f"{expected['role']} {expected['id']}"), header
    if "subagentRunId" in expected:
        assert f"[subagent {expected['subagentRunId']}]" in header
    assert shown["metadata"] == expected.get("metadata")
    content = expected.get("content")
    body = "\n".join(shown["body"])
    if expected["role"] == "tool":
        assert isinstance(content, str)
        assert json.loads(body) == json.loads(content)
        assert f"({expected['toolCallId']})" in header
    elif expected["role"] == "activity":
        assert json.loads(body) == content
        assert f"({expected['activityType']})" in header
    elif content is None:
        assert body == ""
    else:
        assert body == content
    calls = expected.get("toolCalls", [])
    assert len(shown["calls"]) == len(calls)
    for got, want in zip(shown["calls"], calls, strict=True):
        assert got["header"] == f"tool call {want['function']['name']} ({want['id']})"
        assert json.loads("\n".join(got["body"])) == json.loads(want["function"]["arguments"])
        assert got["metadata"] == want.get("metadata")


def run_finished(name: str) -> list[dict[str, Any]]:
    return [e for e in example_streams.events(name) if e["type"] == "RUN_FINISHED"]


# ---------------------------------------------------------------------------------------------
# replay


@pytest.mark.parametrize("name", sorted(example_streams.GOOD))
def test_replay_shows_the_conversation_the_reference_builds(
    name: str, oracle: OracleServer
) -> None:
    expected = oracle.run_one(example_streams.case(name))
    done = cli("replay", stream(name))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    shown = parse_transcript(section(done.stdout, "conversation"))
    assert len(shown) == len(expected["messages"])
    for got, want in zip(shown, expected["messages"], strict=True):
        assert_shows(got, want)
    if expected["state"]:
        assert json.loads("\n".join(section(done.stdout, "state"))) == expected["state"]


@pytest.mark.parametrize("name", sorted(example_streams.GOOD))
def test_replay_shows_the_run_ledger(name: str) -> None:
    done = cli("replay", stream(name))
    runs = "\n".join(section(done.stdout, "runs"))
    for event in run_finished(name):
        block = runs.split(f"run {event['runId']} thread {event['threadId']} finished")[1]
        block = block.split("\nrun ")[0]
        outcome = event.get("outcome", {"type": "success"})["type"]
        assert block.startswith(f" ({outcome})")
        for usage in event["usage"]:  # one entry per model in these streams: sums are the entries
            line = next(
                x for x in block.splitlines() if f"usage {usage['provider']}/{usage['model']}:" in x
            )
            assert f"input {usage['inputTokens']}," in line
            assert f"output {usage['outputTokens']}," in line
            assert f"total {usage['totalTokens']}" in line
        finished = next(x for x in block.splitlines() if "finished metadata: " in x)
        assert json.loads(finished.split("finished metadata: ")[1]) == event["metadata"]
    assert done.stdout.rstrip().endswith("0 errors, 0 warnings")


def test_replay_interrupt_and_subagent_in_the_ledger() -> None:
    done = cli("replay", stream("support.jsonl"))
    runs = section(done.stdout, "runs")
    interrupt = next(e for e in run_finished("support.jsonl") if "outcome" in e)
    first = interrupt["outcome"]["interrupts"][0]
    line = runs.index(f"  interrupt {first['id']} ({first['reason']}): {first['message']}")
    assert json.loads(runs[line + 1].split("metadata: ")[1]) == first["metadata"]
    assert "  subagent returns-specialist (sa-returns): finished (success)" in runs


def test_replay_json_is_the_store_and_the_ledger(oracle: OracleServer) -> None:
    case = example_streams.case("support.jsonl")
    done = cli("replay", "--json", stream("support.jsonl"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"messages", "state", "ledger", "reports"}
    assert_same_result(
        {"name": case["name"], "messages": result["messages"], "state": result["state"]},
        oracle.run_one(case),
        case,
    )
    finished = run_finished("support.jsonl")
    runs = result["ledger"]["runs"]
    assert [r["runId"] for r in runs] == [e["runId"] for e in finished]
    assert [r["usage"] for r in runs] == [e["usage"] for e in finished]
    assert [r["finishedMetadata"] for r in runs] == [e["metadata"] for e in finished]
    assert result["reports"] == []


def test_replay_reads_a_json_array_file(tmp_path: Path) -> None:
    lines = (STREAMS / "support.jsonl").read_text().splitlines()
    path = tmp_path / "events.json"
    path.write_text(json.dumps([json.loads(line) for line in lines if line.strip()], indent=2))
    expected = cli("replay", stream("support.jsonl"))
    assert expected.returncode == 0, expected.stderr
    for args in ([], ["--format", "json-array"]):
        done = cli("replay", *args, str(path))
        assert (done.returncode, done.stdout, done.stderr) == (0, expected.stdout, "")
    done = cli("replay", "--format", "jsonl", str(path))
    assert done.returncode != 0 and "looks like JSON array" in done.stderr
    path.write_text(path.read_text()[:-40])
    done = cli("replay", str(path))
    assert done.returncode != 0 and "truncated" in done.stderr


def test_replay_reads_standard_input() -> None:
    data = (STREAMS / "travel.sse").read_bytes()
    from_stdin = cli("replay", "-", stdin=data)
    from_file = cli("replay", stream("travel.sse"))
    assert from_stdin.returncode == 0, from_stdin.stderr
    # Standard input is shown live (tests/test_cli_client.py), then what follows the
    # conversation exactly as for a file.
    after = from_file.stdout[from_file.stdout.index("\n--- state ---") :]
    assert from_stdin.stdout.endswith(after)
    assert "--- conversation" not in from_stdin.stdout
    assert (
        "  Let me look up flights and the forecast for your dates."
        in from_stdin.stdout.splitlines()
    )


def test_no_colour_when_piped_colour_when_asked() -> None:
    plain = cli("replay", stream("travel.sse"))
    assert ESC not in plain.stdout
    coloured = cli("replay", "--color", stream("travel.sse"))
    assert ESC not in coloured.stderr
    assert "\x1b[1;36muser\x1b[0m" in coloured.stdout  # the role label
    assert "\x1b[2mmetadata: \x1b[0m" in coloured.stdout
    # Without the escapes, the same text.
    assert _strip_ansi(coloured.stdout) == plain.stdout
    assert ESC not in cli("replay", "--no-color", stream("travel.sse")).stdout


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_reasoning_is_dimmed() -> None:
    done = cli("replay", "--color", stream("travel.sse"))
    reasoning = next(
        e for e in example_streams.events("travel.sse") if e["type"] == "REASONING_MESSAGE_CONTENT"
    )
    line = next(x for x in done.stdout.splitlines() if reasoning["delta"] in x)
    assert line.startswith("  \x1b[2m")


def _pty_run(args: list[str], env: dict[str, str], stream_name: str) -> tuple[int, bytes]:
    """Run the command with ``stream_name`` ("stdout" or "stderr") on a pseudo-terminal."""
    pty = pytest.importorskip("pty")
    import select

    master, slave = pty.openpty()
    targets = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream_name: slave}
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environment.update(env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_meta", *args],
        cwd=REPO_ROOT,
        stdout=targets["stdout"],
        stderr=targets["stderr"],
        env=environment,
    )
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], TIMEOUT)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed (Linux reports EIO)
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        status = proc.wait(timeout=TIMEOUT)
    return status, out


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_colour_on_a_terminal_unless_no_color() -> None:
    status, out = _pty_run(["replay", stream("support.jsonl")], {"TERM": "xterm"}, "stdout")
    assert status == 0
    assert ESC.encode() in out
    status, out = _pty_run(
        ["replay", stream("support.jsonl")], {"TERM": "xterm", "NO_COLOR": "1"}, "stdout"
    )
    assert status == 0
    assert ESC.encode() not in out and b"user u-1" in out


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_on_a_terminal_for_large_inputs(tmp_path: Path) -> None:
    # Valid over and over: each RUN_STARTED starts afresh; ~1.3 MB.
    big = tmp_path / "big.sse"
    big.write_bytes((STREAMS / "travel.sse").read_bytes() * 100)
    status, err = _pty_run(["replay", str(big)], {}, "stderr")
    assert status == 0
    text = err.decode()
    assert f"reading {big}: " in text and " MB (" in text and " events" in text
    assert text.endswith("\r\x1b[K")  # the indicator is erased at the end
    # Not on a pipe, and not for small inputs.
    assert cli("replay", str(big)).stderr == ""
    status, err = _pty_run(["replay", stream("travel.sse")], {}, "stderr")
    assert status == 0 and err == b""


def test_strict_stops_at_the_first_warning() -> None:
    done = cli("replay", "--strict", stream("broken.jsonl"))
    assert done.returncode == 1
    # What was assembled before the error is shown (the run the first event started), then it.
    assert "run run-x thread thread-broken running" in done.stdout
    assert done.stdout.endswith(
        " from 2 events; 0 errors, 0 warnings; stopped at event 1 by the error below\n"
    )
    line = _line_offset(2)
    assert done.stderr.startswith(f"agui-meta: {stream('broken.jsonl')}:2:{line}: event 1: error: ")
    assert "[unknown-field]" in done.stderr and "(at $.colour)" in done.stderr


def _line_offset(line: int) -> int:
    """The byte offset where ``line`` (1-based) of broken.jsonl begins."""
    data = (STREAMS / "broken.jsonl").read_bytes()
    return sum(len(x) + 1 for x in data.split(b"\n")[: line - 1])


def test_a_data_error_is_one_line_with_its_location() -> None:
    done = cli("replay", stream("broken.jsonl"))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    # The first error of the stream: line 4, a content event for a message never started.
    assert done.stderr.startswith(
        f"agui-meta: {stream('broken.jsonl')}:4:{_line_offset(4)}: event 3: error: [text.not-open] "
    )


def test_stopping_at_an_error_shows_what_was_assembled_and_the_earlier_warnings() -> None:
    """The stream stops at event 3 (line 4); what events 0-2 built is shown, and the warning
    event 1 got (an unknown property), then the error, on standard error."""
    done = cli("replay", stream("broken.jsonl"))
    assert done.returncode == 1
    shown = parse_transcript(section(done.stdout, "conversation"))
    assert [m["header"] for m in shown] == ["assistant m-1"]
    assert shown[0]["body"][0] == "Hello"
    reports = [line for line in section(done.stdout, "reports") if "warning: " in line]
    assert len(reports) == 1
    assert f"broken.jsonl:2:{_line_offset(2)}: event 1: warning: [unknown-field]" in reports[0]
    assert done.stdout.endswith("1 warning; stopped at event 3 by the error below\n"), done.stdout
    assert "event 3: error: [text.not-open]" in done.stderr

    as_json = cli("replay", "--json", stream("broken.jsonl"))
    assert as_json.returncode == 1
    data = json.loads(as_json.stdout)
    assert [m["id"] for m in data["messages"]] == ["m-1"]
    assert [r["code"] for r in data["reports"]] == ["unknown-field"]
    assert data["error"]["code"] == "text.not-open" and data["error"]["index"] == 3
    assert data["error"]["line"] == 4 and data["error"]["offset"] == _line_offset(4)
    assert as_json.stderr == done.stderr


def test_keep_going_shows_what_it_could_and_every_problem() -> None:
    done = cli("replay", "--keep-going", stream("broken.jsonl"))
    assert done.returncode == 1
    shown = parse_transcript(section(done.stdout, "conversation"))
    assert shown[0]["header"] == "assistant m-1"
    assert shown[0]["body"] == ["Hello"]
    # Line 2's metadata, unprefixed key included, merged with line 9's END.
    assert shown[0]["metadata"] == {
        "provider": "openai",
        "acme.model": "gpt-4.1",
        "acme.finish_reason": "stop",
    }
    reports = section(done.stdout, "reports")
    errors = [x for x in reports if ": error: " in x]
    assert tuple(int(x.split(":")[1]) for x in errors) == ERROR_LINES
    assert any(":8:" in x and "[unknown-event-type]" in x for x in reports)
    assert "run run-x thread thread-broken incomplete" in section(done.stdout, "runs")


def test_keep_going_json_lists_the_reports_with_locations() -> None:
    done = cli("replay", "--keep-going", "--json", stream("broken.jsonl"))
    assert done.returncode == 1
    reports = json.loads(done.stdout)["reports"]
    errors = [r for r in reports if r["severity"] == "error"]
    assert tuple(r["line"] for r in errors) == ERROR_LINES
    assert [r["offset"] for r in errors] == [_line_offset(n) for n in ERROR_LINES]
    assert errors[0]["code"] == "text.not-open" and errors[0]["index"] == 3
    assert errors[1]["path"] == "$.metadata"


def test_huge_metadata_is_cut_to_one_line(tmp_path: Path) -> None:
    run = {"threadId": "t", "runId": "r"}
    huge = {"acme.blob": "x" * 10_000, **{f"acme.k{i}": i for i in range(100)}}
    events = [
        {"type": "RUN_STARTED", **run},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": huge},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", **run},
    ]
    path = tmp_path / "huge.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    done = cli("replay", str(path))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("  metadata: "))
    assert len(line) < 400
    assert '"acme.blob": "xxx' in line and "…" in line and "more}" in line


def test_framing_errors_have_a_location(tmp_path: Path) -> None:
    good = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
    bad = b'data: {"type":"RAW","event":"\xff"}\n\n'
    end = b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'
    path = tmp_path / "bad.sse"
    path.write_bytes(good + bad + end)
    where = f"{path}:3:{len(good)}: event 1: error: [FramingError]"
    done = cli("replay", str(path))
    assert done.returncode == 1
    assert done.stderr.startswith(f"agui-meta: {where}") and "UTF-8" in done.stderr
    # Keep-going: a frame that is not UTF-8 costs only itself.
    checked = cli("validate", str(path))
    assert checked.returncode == 1
    assert checked.stdout.splitlines()[0].startswith(where)
    assert checked.stdout.splitlines()[1:] == [
        f"{path}: invalid: 3 events checked, 1 error, 0 warnings"
    ]


def test_a_stream_that_cannot_be_framed_stops_with_its_location(tmp_path: Path) -> None:
    path = tmp_path / "neither.txt"
    path.write_bytes(b"hello, world\n")
    done = cli("validate", str(path))
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].startswith(f"{path}:1:0: event 0: error: [FramingError]")
    assert "cannot tell the stream's format" in done.stdout
    replayed = cli("replay", str(path))
    assert replayed.returncode == 1
    assert replayed.stderr.startswith(f"agui-meta: {path}:1:0: event 0: error: [FramingError]")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["default", "keep_going"])
async def test_frames_decoded_by_the_caller_with_an_error(
    mode: Literal["default", "keep_going"],
) -> None:
    """wrap() treats a non-UTF-8 Frame it is given like one it decoded itself."""
    import agui_meta
    from agui_meta._framing import make_decoder

    data = (
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        b'{"type":"RAW","event":"\xff"}\n'
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n'
    )
    offset = data.index(b'{"type":"RAW"')
    decoder = make_decoder("jsonl", invalid_utf8="frame")
    frames = decoder.feed(data) + decoder.close()
    reports: list[agui_meta.Report] = []
    stream = agui_meta.wrap(frames, mode=mode, on_report=reports.append)
    if mode == "default":
        with pytest.raises(agui_meta.FramingError) as info:
            async with stream:
                await stream.drain()
        assert (info.value.index, info.value.line, info.value.offset) == (1, 2, offset)
        return
    async with stream:
        types = [event.type async for event in stream]
    assert types == ["RUN_STARTED", "RUN_FINISHED"]
    (report,) = reports
    assert (report.code, report.index, report.line, report.offset) == ("FramingError", 1, 2, offset)


# ---------------------------------------------------------------------------------------------
# validate


def test_validate_lists_every_planted_defect() -> None:
    done = cli("validate", stream("broken.jsonl"))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    path = stream("broken.jsonl")
    located = [x for x in lines[:-1] if x.startswith(f"{path}:")]
    by_line: dict[int, list[str]] = {}
    for x in located:
        rest = x[len(path) + 1 :]
        if rest[0].isdigit():
            number, offset = rest.split(":")[:2]
            assert int(offset) == _line_offset(int(number))
            by_line.setdefault(int(number), []).append(x)
    # The end of the stream (the run and the tool call left open) is located at its last
    # event, after that line's own defect.
    last = max(by_line)
    end = by_line[last].pop()
    assert f": event {last - 1}: warning: [stream-ended-open]" in end  # an event a line
    assert "call-2" in end and lines[-2] == end
    assert set(by_line) == set(example_streams.generator().DEFECTS)
    assert [": error: " in x for x in by_line[2]] == [False, False]
    assert "[unknown-field]" in by_line[2][0] and "(at $.colour)" in by_line[2][0]
    assert "[unprefixed-metadata-key]" in by_line[2][1]
    assert "(at $.metadata.provider)" in by_line[2][1]
    for line_number in ERROR_LINES:
        assert len(by_line[line_number]) == 1 and ": error: " in by_line[line_number][0]
    assert ": warning: [unknown-event-type]" in by_line[8][0]
    assert "(at $.delta)" in by_line[6][0]
    errors = len(ERROR_LINES)
    assert lines[-1] == f"{path}: invalid: 12 events checked, {errors} errors, 4 warnings"


@pytest.mark.parametrize("name", sorted(example_streams.GOOD))
def test_validate_a_good_stream(name: str) -> None:
    done = cli("validate", stream(name))
    assert done.returncode == 0, done.stdout
    count = len(example_streams.events(name))
    assert done.stdout == f"{stream(name)}: valid: {count} events checked, 0 errors, 0 warnings\n"


def test_validate_warnings_pass_unless_strict(tmp_path: Path) -> None:
    run = {"threadId": "t", "runId": "r"}
    events = [
        {"type": "RUN_STARTED", **run, "metadata": {"latency": 3}},
        {"type": "RUN_FINISHED", **run},
    ]
    path = tmp_path / "warn.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    done = cli("validate", str(path))
    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        (
            f"{path}:1:0: event 0: warning: [unprefixed-metadata-key] metadata key 'latency' has "
            "no vendor prefix: producers SHOULD prefix the keys they create (for example "
            "'vendor.latency'); 'ag-ui' is reserved for the protocol (at $.metadata.latency)"
        ),
        f"{path}: valid: 2 events checked, 0 errors, 1 warning",
    ]
    assert cli("validate", "--strict", str(path)).returncode == 1


def test_validate_an_empty_stream(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    done = cli("validate", str(path))
    assert done.returncode == 0
    assert "[stream-ended-empty]" in done.stdout
    assert done.stdout.splitlines()[-1].endswith("0 events checked, 0 errors, 1 warning")


def test_validate_reads_standard_input() -> None:
    data = (STREAMS / "broken.jsonl").read_bytes()
    done = cli("validate", "-", stdin=data)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == "-: invalid: 12 events checked, 5 errors, 4 warnings"


# ---------------------------------------------------------------------------------------------
# The command line


@pytest.mark.parametrize("command", ["replay", "validate"])
def test_unreadable_input_is_a_usage_error(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing.sse"
    done = cli(command, str(missing))
    assert done.returncode == 2
    assert done.stderr == f"agui-meta: cannot read {missing}: No such file or directory\n"
    assert cli(command, str(tmp_path)).returncode == 2


def test_bad_arguments_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["replay"], ["replay", "x", "--keep-going", "--strict"], ["nope"], []):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("agui-meta"), err
        assert err.endswith(" --help')\n"), err


@pytest.mark.parametrize("command", sorted(commands()))
def test_help_shows_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "example" in text and f"\n  agui-meta {command} " in text
    overview = build_parser().format_help()
    assert "examples:" in overview and f"\n    {command} " in overview


def test_every_public_module_of_the_cli_package_is_the_command_of_its_name() -> None:
    import agui_meta.cli

    found = commands()
    assert {"apply", "replay", "validate"} <= set(found)
    parser = build_parser()
    for name, module in found.items():
        assert module is sys.modules[f"agui_meta.cli.{name.replace('-', '_')}"]
        assert callable(module.add_parser) and callable(module.run)
        args = parser.parse_args([name, *_minimal_args(name)])
        assert args.command == name and args.run is module.run
    assert not any(name.startswith("_") for name in found)
    assert agui_meta.cli.main is main


def _minimal_args(name: str) -> list[str]:
    """Arguments that parse for a command (its positionals and required options given '-')."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = sub.choices[name]
    options = [
        [a.option_strings[0], "-"] for a in command._actions if a.option_strings and a.required
    ]
    return [x for option in options for x in option] + [
        "http://127.0.0.1/" if a.dest == "url" else "-"
        for a in command._actions
        if not a.option_strings and a.required
    ]


def test_apply_still_works(tmp_path: Path, oracle: OracleServer) -> None:
    case = example_streams.case("travel.sse")
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(case) + "\n")
    done = cli("apply", str(path))
    assert done.returncode == 0, done.stderr
    (result,) = [json.loads(x) for x in done.stdout.splitlines()]
    assert_same_result(result, oracle.run_one(case), case)


def test_in_process_main(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", stream("travel.sse")]) == 0
    assert capsys.readouterr().out.endswith("0 errors, 0 warnings\n")
