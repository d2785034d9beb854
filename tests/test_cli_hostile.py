"""The command line as a person meets it: a real terminal, Ctrl-C, wrong formats, bad files.

The terminal tests run the command on a pseudo-terminal that is its controlling terminal, as
a shell would: Ctrl-C is the byte ``\\x03`` typed on it, turned into SIGINT by the terminal.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import agui_meta
from tests.helpers import Terminal, cli, cli_process
from tests.oracle import REPO_ROOT

STREAMS = REPO_ROOT / "examples" / "streams"

needs_a_terminal = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="needs a Linux pseudo-terminal and /proc"
)


# ---------------------------------------------------------------------------------------------
# Control characters from the stream

HOSTILE = "\x1b[2J\x1b[H"  # clear the screen, cursor home
EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t\x1b[31m", "runId": "r\x07"},
    {"type": "TEXT_MESSAGE_START", "messageId": f"m{HOSTILE}", "role": "assistant"},
    {
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": f"m{HOSTILE}",
        "delta": f"{HOSTILE}gotcha\u009b2J\u202eevil\rover",
    },
    {"type": "TEXT_MESSAGE_END", "messageId": f"m{HOSTILE}", "metadata": {"acme.x": "\u009b"}},
    {"type": "TOOL_CALL_START", "toolCallId": f"c{HOSTILE}", "toolCallName": f"f{HOSTILE}"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": f"c{HOSTILE}", "delta": f"not json {HOSTILE}"},
    {"type": "TOOL_CALL_END", "toolCallId": f"c{HOSTILE}"},
    {"type": "TOOL_CALL_RESULT", "messageId": "t", "toolCallId": f"c{HOSTILE}", "content": HOSTILE},
    # Not open: the report's message names the id.
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"x{HOSTILE}", "delta": "x"},
    {"type": "RUN_FINISHED", "threadId": "t\x1b[31m", "runId": "r\x07"},
]
#: What must never reach a terminal: the stream's own control sequences.
RAW = [b"\x1b[2J", b"\x1b[H", b"\x1b[31m", b"\x07", "\u009b".encode(), "\u202e".encode(), b"\r"]
#: Our own colours: ESC [ digits/semicolons m, nothing else.
OWN_SGR = re.compile(rb"\x1b\[[0-9;]*m")


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return path


def assert_no_raw_controls(out: bytes) -> None:
    # The terminal turns each \n into \r\n: those are its own.
    text = OWN_SGR.sub(b"", out.replace(b"\r\n", b"\n"))
    for raw in RAW:
        assert raw not in text, (raw, out)
    assert b"\x1b" not in text
    assert b"\\x1b[2J\\x1b[H" in text  # shown, escaped


@needs_a_terminal
@pytest.mark.parametrize("command", ["replay", "validate"])
@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}])
def test_control_characters_are_escaped_on_a_terminal(
    command: str, env: dict[str, str], hostile: Path
) -> None:
    args = (
        [command, "--keep-going", str(hostile)] if command == "replay" else [command, str(hostile)]
    )
    status, out = Terminal(*args, env=env).read_until_exit()
    assert status == 1  # the content for a message not open
    assert_no_raw_controls(out)
    if command == "replay":
        assert b"gotcha\\x9b2J\\u202eevil\r\n  over" in out  # a CR breaks the line


@pytest.mark.parametrize("command", ["replay", "validate"])
def test_control_characters_are_escaped_with_color_on_a_pipe(command: str, hostile: Path) -> None:
    args = ["--keep-going"] if command == "replay" else []
    done = cli(command, *args, "--color", str(hostile))
    assert_no_raw_controls(done.stdout.encode())
    assert OWN_SGR.search(done.stdout.encode())


def test_text_is_left_as_it_is_on_a_pipe_without_color(hostile: Path) -> None:
    done = cli("replay", "--keep-going", str(hostile))
    assert f"  {HOSTILE}gotcha\u009b2J\u202eevil" in done.stdout  # the data, exactly


# ---------------------------------------------------------------------------------------------
# Ctrl-C


@needs_a_terminal
@pytest.mark.parametrize("command", ["replay", "validate"])
def test_ctrl_c_on_standard_input_from_a_terminal_exits_130_with_one_line(command: str) -> None:
    terminal = Terminal(command, "-")
    terminal.wait_reading_standard_input()
    os.write(terminal.master, b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n')
    terminal.wait_reading_standard_input()
    os.write(terminal.master, b"\x03")  # Ctrl-C
    status, out = terminal.read_until_exit()
    assert status == 130, out
    assert b"Traceback" not in out
    lines = out.replace(b"\r\n", b"\n").split(b"\n")
    assert lines[-2:] == [b"^Cagui-meta: interrupted", b""], out


# ---------------------------------------------------------------------------------------------
# Formats


def test_a_wrong_forced_format_says_which_format_the_input_looks_like() -> None:
    jsonl, sse = STREAMS / "broken.jsonl", STREAMS / "travel.sse"
    done = cli("replay", "--format", "sse", str(jsonl))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"agui-meta: {jsonl} looks like JSON lines, not SSE (it begins "
        '\'{"type":"RUN_STARTED","timestamp":177876\'): leave --format out to detect the '
        "format, or use --format jsonl\n"
    )
    # The reverse mix-up: one line, not an error per line.
    # validate names its input's format --input-format (its --format is the report's).
    for command, option in (("validate", "--input-format"), ("replay", "--format")):
        done = cli(command, option, "jsonl", str(sse))
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.count("\n") == 1
        assert "looks like SSE, not JSON lines" in done.stderr
        assert f"use {option} sse" in done.stderr


@pytest.mark.parametrize(
    ("data", "format", "says"),
    [
        (b": a comment\nevent: x\n\n", "auto", "read as SSE (SSE with no `data:` field"),
        (b"hello\n", "sse", "read as SSE (it begins 'hello', which is neither SSE nor JSON lines)"),
        (b"event: x\n\n", "sse", "read as SSE (SSE with no `data:` field"),
    ],
)
def test_input_holding_something_but_no_event_is_an_error(
    data: bytes, format: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    done = cli("replay", "--format", format, str(path))
    assert done.returncode == 1
    if data.startswith(b"hello"):  # the line the framer ignored is reported as well
        assert "[sse-unknown-field]" in done.stdout
        assert "(no messages)" in done.stdout
    else:
        assert done.stdout == ""
    assert done.stderr == (
        f"agui-meta: {path}: error: [no-event] no event in {len(data)} bytes {says}"
        + done.stderr.split(says, 1)[1]
    )
    done = cli("validate", "--input-format", format, str(path))
    assert done.returncode == 1
    assert f"[no-event] no event in {len(data)} bytes {says}" in done.stdout
    warnings = "2 warnings" if data.startswith(b"hello") else "1 warning"
    assert done.stdout.endswith(f": invalid: 0 events checked, 1 error, {warnings}\n")
    # Empty or blank input is no error: nothing was sent.
    for blank in (b"", b"\n \n"):
        path.write_bytes(blank)
        assert cli("replay", "--format", format, str(path)).returncode == 0


# ---------------------------------------------------------------------------------------------
# validate --max-errors, --version


def test_validate_caps_the_problems_it_prints(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    bad = '{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"x"}\n'
    path.write_text('{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n' + bad * 250)
    done = cli("validate", str(path))
    lines = done.stdout.splitlines()
    assert done.returncode == 1
    assert len(lines) == 102
    assert lines[-2] == f"{path}: 151 more problems not shown (--max-errors 100; 0 shows all)"
    assert lines[-1] == f"{path}: invalid: 251 events checked, 250 errors, 1 warning"
    done = cli("validate", "--max-errors", "3", str(path))
    assert len(done.stdout.splitlines()) == 5
    assert len(cli("validate", "--max-errors", "0", str(path)).stdout.splitlines()) == 252
    assert cli("validate", "--max-errors", "-1", str(path)).returncode == 2


def test_version() -> None:
    from agui_meta._speedups import describe

    done = cli_process("--version")  # the installed entry point, in a process of its own
    # The version, and whether the native core is in use (and why not).
    expected = f"agui-meta {agui_meta.__version__}\n{describe()}\n"
    assert (done.returncode, done.stdout) == (0, expected)


# ---------------------------------------------------------------------------------------------
# apply on what is not a cases file


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary data (a NUL byte at column 1)"),
        (b'{"name": "caf\xe9", "events": []}\n', "not UTF-8 text (byte 0xe9 at column 14)"),
        (b"[" * 100_000 + b"\n", "not JSON: nested too deeply"),
    ],
)
def test_apply_on_binary_or_non_utf8_input_is_a_clear_error(
    data: bytes, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'{"name": "ok", "events": []}\n' + data)
    done = cli("apply", str(path))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert says in done.stderr
    assert json.loads(done.stdout.splitlines()[0]) == {"name": "ok", "messages": [], "state": {}}
    from_stdin = cli("apply", "-", stdin=path.read_bytes())
    assert (from_stdin.returncode, from_stdin.stdout) == (1, done.stdout)
