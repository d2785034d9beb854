"""Every command's exit statuses as its ``--help`` says, and hostile arguments as one line.

- Hostile arguments: a table of bad argument shapes for every command (URLs, ports, headers,
  JSON nested 50,000 deep, ``nan``/``inf``/``0`` seconds, counts, formats, files). Each gives
  exit status 2 and one line saying which argument and why (after argparse's usage), never a
  traceback. Run in this process (:func:`agui_meta.cli.main`), so a traceback fails the test.
- Standard output or input closed (``>&-``): one line, exit status 2.
- The statuses each command's help lists, produced for real: recorded streams, a real HTTP
  server on 127.0.0.1 (raw sockets, so it can answer what no framework would), a real
  ``redis-server``, and Ctrl-C to a running worker.
- Terminal injection: ``compact``'s reports and ``record``'s error body on a pseudo-terminal.
- ``record`` against hostile servers: a 64 MiB error body (peak RSS of the process bounded), a
  redirect whose body looks like a run (refused, nothing saved).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agui_meta.cli import build_parser, commands
from tests.example_streams import STREAMS
from tests.helpers import TIMEOUT, Terminal, cli, cli_in_process, jsonl, redis_server, sse
from tests.oracle import REPO_ROOT
from tests.redis_server import RedisServer
from tests.test_cli_hostile import EVENTS, assert_no_raw_controls, needs_a_terminal
from tests.test_cli_hostile import HOSTILE as ESCAPES

TRAVEL = str(STREAMS / "travel.sse")
BROKEN = str(STREAMS / "broken.jsonl")
DEEP = "[" * 50_000 + "]" * 50_000
HEADER = "argument -H/--header: not a header 'NAME: VALUE': "
#: A Redis URL where nothing listens.
NO_REDIS = "redis://127.0.0.1:1/0"

# ---------------------------------------------------------------------------------------------
# Hostile arguments: (arguments, what the one line says)

_AGENT_ARGUMENTS: list[tuple[list[str], str]] = [
    (["http://[::1"], "argument URL: not a URL"),
    (["http://127.0.0.1:99999/agent"], "Port out of range"),
    (["http://127.0.0.1:65536/agent"], "Port out of range"),
    (["http://127.0.0.1:-1/agent"], "argument URL: not a URL"),
    (["http://127.0.0.1:port/agent"], "argument URL: not a URL"),
    (["ftp://127.0.0.1/agent"], "not an http:// or https:// URL"),
    (["127.0.0.1:8000/agent"], "not an http:// or https:// URL"),
    (["notaurl"], "not an http:// or https:// URL"),
    ([""], "argument URL: not a URL"),
    (["http:///agent"], "no host in the URL"),
    (["http://a b/agent"], "a space or a control character"),
    (["http://h/\x1b[2J"], "a space or a control character"),
    # One message for a bad header, whatever the command (cli/_args.add_header_argument):
    (["http://h/", "-H", "no-colon"], f"{HEADER}'no-colon' has no ':'"),
    (["http://h/", "-H", ":value"], f"{HEADER}':value' has no NAME before a ':'"),
    (["http://h/", "-H", "X A: v"], f"{HEADER}'X A' is not a header name"),
    (["http://h/", "-H", "X-A: caf\u00e9"], f"{HEADER}the value of X-A must be printable ASCII"),
    (["http://h/", "-H", "X-A: a\r\nInjected: 1"], f"{HEADER}the value of X-A must be printable"),
    (["http://h/", "-H", "X-A: \x00"], f"{HEADER}the value of X-A must be printable ASCII"),
    (["http://h/", "--state", DEEP], "argument --state: not JSON: nested too deeply"),
    (["http://h/", "--state", "{nope"], "argument --state: not JSON"),
    (["http://h/", "--state", "NaN"], "NaN is not JSON"),
    (["http://h/", "--tool", DEEP], "argument --tool: not JSON: nested too deeply"),
    (["http://h/", "--tool", "{"], "argument --tool: not JSON"),
    (["http://h/", "--tool", "[1]"], "argument --tool: not a tool"),
    (["http://h/", "--tool", '{"name": 1}'], "argument --tool: not a tool"),
    (["http://h/", "--tool", '"x"'], "argument --tool: not a tool"),
    (["http://h/", "--timeout", "nan"], "not a positive, finite number of seconds: 'nan'"),
    (["http://h/", "--timeout", "inf"], "not a positive, finite number of seconds: 'inf'"),
    (["http://h/", "--timeout", "-1"], "not a positive, finite number of seconds"),
    (["http://h/", "--timeout", "0"], "not a positive, finite number of seconds"),
    (["http://h/", "--timeout", "1e400"], "not a positive, finite number of seconds"),
    (["http://h/", "--timeout", "soon"], "not a positive, finite number of seconds"),
    (["http://h/", "--accept", "protobuf"], "argument --accept: invalid choice"),
]

_REDIS_URLS: list[tuple[str, str]] = [
    ("redis://127.0.0.1:99999/0", "Port out of range"),
    ("redis://[::1", "Invalid IPv6 URL"),
    ("http://127.0.0.1:6379", "Redis URL must specify one of the following schemes"),
    ("redis://127.0.0.1:1/0", "cannot reach Redis"),
]

_WORKER_ARGUMENTS: list[tuple[list[str], str]] = [
    (["--lease", "inf"], "argument --lease: not a positive, finite number of seconds: 'inf'"),
    (["--lease", "nan"], "argument --lease: not a positive, finite number of seconds: 'nan'"),
    (["--lease", "0"], "argument --lease: not a positive, finite number of seconds"),
    (["--exit-when-idle", "nan"], "argument --exit-when-idle: not a positive, finite number"),
    (["--exit-when-idle", "inf"], "argument --exit-when-idle: not a positive, finite number"),
    (["--exit-when-idle", "-5"], "argument --exit-when-idle: not a positive, finite number"),
    (["--idle-timeout", "nan"], "argument --idle-timeout: not a positive, finite number"),
    (["--batch", "0"], "argument --batch: not a count"),
    (["--batch", "1e30"], "argument --batch: not a count"),
    (["--batch", "99999999999999999999999"], "argument --batch: not a count"),
    (["--shards", "-1"], "argument --shards: not a number of shards"),
    (["--shards", "99999999999999999999"], "argument --shards: not a number of shards"),
]

HOSTILE: list[tuple[list[str], str]] = [
    ([], "the following arguments are required: COMMAND"),
    (["teleport"], "argument COMMAND: invalid choice"),
    (["--nope"], "the following arguments are required: COMMAND"),
    *[(["run", *args], says) for args, says in _AGENT_ARGUMENTS],
    *[(["record", *args, "-o", os.devnull], says) for args, says in _AGENT_ARGUMENTS[::3]],
    (["run"], "the following arguments are required: URL"),
    (["record", "http://127.0.0.1:1/agent", "-o", "/nonexistent/dir/x"], "cannot write /nonexist"),
    *[(["thread", "--redis", url, "t"], says) for url, says in _REDIS_URLS],
    *[(["usage", "--redis", url], says) for url, says in _REDIS_URLS],
    (["thread", "t"], "the following arguments are required: --redis"),
    *[(["worker", "--redis", NO_REDIS, *args], says) for args, says in _WORKER_ARGUMENTS],
    (["ingest", "--redis", NO_REDIS, "--thread", "t", "/nonexistent/x.sse"], "No such file"),
    *[
        (["ingest", "--redis", NO_REDIS, "--thread", "t", option, value, TRAVEL], says)
        for option, value, says in [
            ("--batch", "0", "argument --batch: not a count"),
            ("--batch", "1e30", "argument --batch: not a count"),
            ("--pipeline", "-1", "argument --pipeline: not a count"),
            ("--shards", "1" + "0" * 20, "argument --shards: not a number of shards"),
        ]
    ],
    (["replay", "/nonexistent/x.sse"], "cannot read /nonexistent/x.sse"),
    (["replay", "/"], "cannot read /: Is a directory"),
    (["replay", "--format", "xml", TRAVEL], "argument --format: invalid choice"),
    (["replay", "--format", "jsonl", TRAVEL], "looks like SSE, not JSON lines"),
    (["replay", "--max-errors", "-1", TRAVEL], "argument --max-errors: not a count"),
    (["replay", "--max-errors", "many", TRAVEL], "argument --max-errors: not a count"),
    (["replay", "--otlp", "http://[::1", TRAVEL], "argument --otlp: not a URL"),
    (["replay", "--otlp-agent-name", "", TRAVEL], "argument --otlp-agent-name: not a name"),
    (["replay", "--otlp-agent-name", "a\x1b[2Jb", TRAVEL], "argument --otlp-agent-name: not a"),
    (["replay", "--keep-going", "--strict", TRAVEL], "not allowed with argument"),
    (["validate", "/nonexistent/x.sse"], "cannot read /nonexistent/x.sse"),
    (["validate", "--max-errors", "-3", TRAVEL], "argument --max-errors: not a count"),
    (["validate", "http://127.0.0.1:99999/agent"], "Port out of range"),
    (["validate", "http://[::1"], "Invalid IPv6 URL"),
    (["validate", "http://127.0.0.1:1/", "-H", "X-A: caf\u00e9"], f"{HEADER}the value of X-A"),
    (["validate", "http://127.0.0.1:1/", "-H", "nocolon"], f"{HEADER}'nocolon' has no ':'"),
    (["validate", "http://127.0.0.1:1/", "--timeout", "nan"], "argument --timeout: not a"),
    (["validate", "http://127.0.0.1:1/", "--input", "/nonexistent"], "cannot read /nonexist"),
    (["validate", "--rule", "x=loud", TRAVEL], "argument --rule: not CODE=SEVERITY"),
    (
        ["serve", TRAVEL, "--keepalive", "nan"],
        "argument --keepalive: not a positive, finite number",
    ),
    (
        ["serve", TRAVEL, "--max-pause", "inf"],
        "argument --max-pause: not a positive, finite number",
    ),
    (["compact", "/nonexistent/x.sse"], "cannot read /nonexistent/x.sse"),
    (["compact", TRAVEL, "-o", "/nonexistent/dir/out.jsonl"], "cannot write /nonexistent/dir"),
    (["compact", "--format", "sse", BROKEN], "looks like JSON lines, not SSE"),
    (["apply", "/nonexistent/cases.jsonl"], "No such file"),
    *[
        ([command, *args, "--thread", "t"], says)
        for command in ("attach", "stop")
        for args, says in [
            (["http://127.0.0.1:99999/agents/x"], "Port out of range"),
            (["notaurl"], "not an http:// or https:// URL"),
            (["http://127.0.0.1:1/agents/x", "-H", "X: caf\u00e9"], f"{HEADER}the value of X"),
            (["http://127.0.0.1:1/agents/x", "-H", "nocolon"], f"{HEADER}'nocolon' has no ':'"),
            (["http://127.0.0.1:1/agents/x"], "cannot reach http://127.0.0.1:1/agents/x"),
        ]
    ],
    *[
        (["gateway", "--agent", "x=http://127.0.0.1:1/", *args], says)
        for args, says in [
            (["--port", "70000"], "argument --port: not a port"),
            (["--max-runs", "0"], "argument --max-runs: not a count"),
            (["--linger", "nan"], "argument --linger: not a finite number of seconds"),
            (["--threads", "bogus"], "--threads is memory, sqlite:PATH or redis"),
            (["--threads", "sqlite:/nonexistent/dir/x.db"], "cannot be opened"),
            (["--agent", "bogus"], "--agent is NAME=SPEC"),
            (["--no-execute"], "--no-execute needs --threads redis"),
            (["--dispatch-timeout", "0"], "argument --dispatch-timeout: not a positive"),
            (["--max-dispatched", "0"], "argument --max-dispatched: not a count"),
            (["--max-dispatched", "1e9"], "argument --max-dispatched: not a count"),
        ]
    ],
    *[
        (["executor", "--redis", NO_REDIS, "--agent", "x=http://127.0.0.1:1/", *args], says)
        for args, says in [
            (["--max-runs", "0"], "argument --max-runs: not a count"),
            (["--lease", "nan"], "argument --lease: not a positive, finite number of seconds"),
            (["--linger", "inf"], "argument --linger: not a finite number of seconds"),
            (["--agent", "bogus"], "--agent is NAME=SPEC"),
            (["--agent", "x=http://h/"], "two agents are named 'x'"),
            (["--agent", "y=no_such_module_zz:a"], "cannot import 'no_such_module_zz'"),
            (["--agent", "y=\x1b[2J:a"], "cannot import"),
            (["--budget-tokens", "0"], "argument --budget-tokens: not a count"),
            ([], "cannot reach Redis at redis://127.0.0.1:1/0"),
        ]
    ],
    (["executor", "--redis", "http://x", "--agent", "x=http://h/"], "Redis URL must specify"),
    (["executor", "--agent", "x=http://h/"], "the following arguments are required: --redis"),
    (["executor", "--redis", NO_REDIS], "the following arguments are required: --agent"),
    (["serve", "/nonexistent/x.sse"], "cannot read /nonexistent/x.sse"),
    (["serve", TRAVEL, "--port", "70000"], "argument --port: not a port"),
    (["serve", TRAVEL, "--port", "-5"], "argument --port: not a port"),
    (["serve", TRAVEL, "--linger", "nan"], "argument --linger: not a finite number of seconds"),
    (["serve", TRAVEL, "--linger", "inf"], "argument --linger: not a finite number of seconds"),
    (["serve", TRAVEL, "--pace", "nan"], "argument --pace: not a positive, finite number"),
    (["serve", TRAVEL, "--host", "999.1.1.1", "--port", "0"], "cannot listen on 999.1.1.1"),
    (["apply", "/"], "Is a directory"),
]


def _id(case: tuple[list[str], str]) -> str:
    return " ".join(a[:24] for a in case[0])[:80] or "(nothing)"


@pytest.mark.parametrize("case", HOSTILE, ids=[_id(c) for c in HOSTILE])
def test_a_hostile_argument_is_one_line_and_exit_status_2(
    case: tuple[list[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, says = case
    status, out, err = cli_in_process(capsys, *argv)  # a traceback would fail the test here
    assert status == 2, err
    assert out == ""
    said = err.splitlines()
    assert len(said) == 1, err
    assert said[0].startswith("agui-meta"), err
    assert says in said[0], err
    assert "\x1b" not in err and "\r" not in said[0]


def test_a_run_input_nested_too_deeply_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = _write(tmp_path / "deep.json", DEEP.encode())
    status, _, err = cli_in_process(capsys, "validate", "http://127.0.0.1:1/", "--input", deep)
    assert (status, err) == (2, f"agui-meta: {deep} is not JSON: nested too deeply\n")


def test_the_table_covers_every_command() -> None:
    covered = {argv[0] for argv, _ in HOSTILE if argv and not argv[0].startswith("-")}
    missing = sorted(set(commands()) - covered)
    assert not missing, f"add hostile-argument rows to HOSTILE for: {', '.join(missing)}"


def test_every_header_option_is_the_shared_one() -> None:
    # One -H/--header (cli/_args.add_header_argument): checked when parsed, one message.
    from agui_meta.cli._args import header

    subparsers = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    found = {}
    for name, parser in subparsers.choices.items():
        for action in parser._actions:
            if "-H" in action.option_strings or "--header" in action.option_strings:
                found[name] = (
                    tuple(action.option_strings),
                    action.type,
                    action.metavar,
                    action.help,
                )
    assert set(found) >= {"run", "record", "attach", "stop", "validate"}
    assert set(found.values()) == {
        (("-H", "--header"), header, "'NAME: VALUE'", "a request header (repeat for several)")
    }


# ---------------------------------------------------------------------------------------------
# Standard output or input closed


def _closed(fd: int, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "agui_meta", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL if fd == 0 else None,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(fd),
        timeout=TIMEOUT,
        check=False,
    )
    return subprocess.CompletedProcess(done.args, done.returncode, "", done.stderr.decode())


@pytest.mark.parametrize(
    "args",
    [
        ["replay", TRAVEL],
        ["replay", "--json", TRAVEL],
        ["validate", TRAVEL],
        ["compact", TRAVEL],
        ["apply", str(REPO_ROOT / "tests" / "golden" / "cases.jsonl")],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_closed_standard_output_is_one_line_and_exit_status_2(args: list[str]) -> None:
    done = _closed(1, *args)
    assert (done.returncode, done.stderr) == (2, "agui-meta: [Errno 9] standard output is closed\n")


@pytest.mark.parametrize("command", ["replay", "validate", "compact"])
def test_closed_standard_input_is_one_line_and_exit_status_2(command: str) -> None:
    done = _closed(0, command, "-")
    assert done.returncode == 2
    assert done.stderr == "agui-meta: cannot read -: standard input is closed\n"


# ---------------------------------------------------------------------------------------------
# What each command's help says, done


def test_every_help_states_the_exit_statuses() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():  # type: ignore[union-attr]
        text = " ".join(command.format_help().split())
        assert re.search(r"Exit status: 0\b", text), name
        assert re.search(r"\b2 (when|on)\b", text), name
    assert "130" in " ".join(parser.format_help().split())


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


RUN: dict[str, Any] = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISH: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
WARNED: list[dict[str, Any]] = [
    RUN,
    {"type": "CUSTOM", "name": "n", "value": 1, "colour": "red"},
    FINISH,
]
CUT: list[dict[str, Any]] = [
    RUN,
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hel"},
]


@pytest.mark.parametrize(
    ("command", "input", "status"),
    [
        ("replay", "travel", 0),
        ("replay", "warned", 0),
        ("replay --strict", "warned", 1),
        ("replay", "broken", 1),
        ("replay --keep-going", "broken", 1),
        ("replay", "cut", 0),
        ("replay --strict", "cut", 1),
        ("validate", "travel", 0),
        ("validate", "warned", 0),
        ("validate --strict", "warned", 1),
        ("validate", "broken", 1),
        ("compact", "travel", 0),
        ("compact", "broken", 1),
        ("compact --keep-going", "broken", 1),
        ("compact --keep-going", "warned", 0),
    ],
)
def test_the_stream_commands_exit_as_their_help_says(
    command: str, input: str, status: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {
        "travel": TRAVEL,
        "broken": BROKEN,
        "warned": _write(tmp_path / "warned.sse", sse(WARNED)),
        "cut": _write(tmp_path / "cut.jsonl", jsonl(CUT)),
    }
    args = command.split()
    if args[0] == "compact":
        args += ["-o", str(tmp_path / "out.jsonl")]
    done, _, err = cli_in_process(capsys, *args, files[input])
    assert done == status, err
    assert "Traceback" not in err


def test_a_stream_cut_inside_an_open_message_is_not_summarised_as_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "cut.jsonl", jsonl(CUT))
    status, out, _ = cli_in_process(capsys, "replay", path)
    assert status == 0
    lines = out.splitlines()
    # Located at the end: the last event (2) and its line (3, a JSON line each).
    offset = len(jsonl(CUT[:2]))
    assert f"{path}:3:{offset}: event 2: warning: [stream-ended-open] " in "\n".join(lines)
    assert "still open: text messages: m" in out
    assert lines[-1] == (
        "1 message, 0 tool calls, 1 run from 3 events; 0 errors, 1 warning; "
        "cut short: 1 run never ended (r)"
    )
    status, out, _ = cli_in_process(capsys, "replay", _write(tmp_path / "whole.sse", sse(WARNED)))
    assert "cut short" not in out and "stream-ended" not in out


def test_replay_counts_identical_reports_and_caps_the_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same unknown field on 40 events: one warning, counted; and 30 different ones.
    same = [{"type": "CUSTOM", "name": f"s{n}", "value": n, "colour": "red"} for n in range(40)]
    different = [
        {"type": "CUSTOM", "name": "d", "value": n, f"colour{n}": "red"} for n in range(30)
    ]
    path = _write(tmp_path / "many.jsonl", jsonl([RUN, *same, *different, FINISH]))
    status, out, _ = cli_in_process(capsys, "replay", path)
    assert status == 0
    reports = out[out.index("--- reports ---") :].splitlines()[1:-2]
    first = len(jsonl([RUN]))
    assert reports[0] == (
        f"{path}:2:{first}: event 1: warning: [unknown-field] removed unknown property `colour` "
        "on CUSTOM (at $.colour)"
    )
    assert reports[1] == "  (40 times in all; the last at event 40, line 41)"
    assert len(reports) == 2 + 30
    assert out.splitlines()[-1].endswith("0 errors, 70 warnings")
    status, out, _ = cli_in_process(capsys, "replay", "--max-errors", "5", path)
    reports = out[out.index("--- reports ---") :].splitlines()[1:-2]
    assert len(reports) == 2 + 4 + 1
    assert reports[-1] == f"{path}: 26 more reports not shown (--max-errors 5; 0 shows all)"
    status, out, _ = cli_in_process(capsys, "replay", "--max-errors", "0", path)
    assert "more reports not shown" not in out


def test_apply_exits_as_its_help_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path / "good.jsonl", b'{"name": "ok", "events": []}\n')
    bad = _write(tmp_path / "bad.jsonl", b'{"name": "ok", "events": []}\nnot json\n')
    assert cli_in_process(capsys, "apply", good)[0] == 0
    assert cli_in_process(capsys, "apply", bad)[0] == 1
    assert cli_in_process(capsys, "apply", str(tmp_path / "missing.jsonl"))[0] == 2


# ---------------------------------------------------------------------------------------------
# The Redis commands, and Ctrl-C to a worker


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


def test_the_redis_commands_exit_as_their_help_says(
    redis: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = ["--redis", redis.url, "--namespace", "statuses"]
    assert cli_in_process(capsys, "ingest", *ns, "--thread", "t", TRAVEL)[0] == 0
    status, _, err = cli_in_process(capsys, "worker", *ns, "--exit-when-idle", "0.3")
    assert status == 0, err
    assert cli_in_process(capsys, "thread", *ns, "t")[0] == 0
    assert cli_in_process(capsys, "thread", *ns, "nobody")[0] == 1
    assert cli_in_process(capsys, "usage", *ns)[0] == 0
    import redis as redis_py

    from agui_meta.redis import Keys

    for name, value in (("tokens|not json", "1"), ("entries", "many")):
        with redis_py.Redis.from_url(redis.url) as client:  # what agui-meta never writes
            client.hset(Keys("statuses").usage, name, value)
        status, _, err = cli_in_process(capsys, "usage", *ns)
        assert status == 1 and err.startswith("agui-meta: {statuses}:usage: "), err
        assert name in err and err.count("\n") == 1, err
        with redis_py.Redis.from_url(redis.url) as client:
            client.hdel(Keys("statuses").usage, name)
    for command in (["thread", "t"], ["usage"], ["worker"]):
        status, _, err = cli_in_process(capsys, *command[:1], "--redis", NO_REDIS, *command[1:])
        assert status == 2 and err.startswith("agui-meta: cannot reach Redis"), err


def test_thread_and_usage_show_token_usage_as_replay_does(
    redis: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = ["--redis", redis.url, "--namespace", "usage-text"]
    cli_in_process(capsys, "ingest", *ns, "--thread", "trip", TRAVEL)
    cli_in_process(capsys, "worker", *ns, "--exit-when-idle", "0.3")
    replayed = [x for x in cli_in_process(capsys, "replay", TRAVEL)[1].splitlines()]
    usage = sorted({x.strip() for x in replayed if x.strip().startswith("usage ")})
    assert usage and all(": input " in x for x in usage)
    thread = cli_in_process(capsys, "thread", *ns, "trip")[1].splitlines()
    counters = cli_in_process(capsys, "usage", *ns)[1].splitlines()
    assert sorted({x.strip() for x in thread if x.startswith("usage ")}) == usage
    assert sorted({x.strip() for x in counters if x.startswith("usage ")}) == usage


def test_ctrl_c_stops_a_worker_with_status_130_and_one_line(redis: RedisServer) -> None:
    import redis as redis_py

    process = subprocess.Popen(
        [sys.executable, "-m", "agui_meta", "worker", "--redis", redis.url, "--namespace", "ctl"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        with redis_py.Redis.from_url(redis.url) as client:
            for _ in range(TIMEOUT * 100):  # until the worker holds leases: it is working
                if client.keys("{ctl}:fence:*"):
                    break
                assert process.poll() is None
                threading.Event().wait(0.01)  # a poll interval, not a measured time
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (process.returncode, out, err) == (130, b"", b"agui-meta: interrupted\n")


# ---------------------------------------------------------------------------------------------
# record against raw HTTP servers on 127.0.0.1


@contextlib.contextmanager
def raw_server(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A server on 127.0.0.1 that reads each request and lets ``answer`` write the response."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(TIMEOUT)
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                length = re.search(rb"(?i)content-length: *(\d+)", head)
                body = head.partition(b"\r\n\r\n")[2]
                while length and len(body) < int(length.group(1)):
                    body += connection.recv(65536)
                with contextlib.suppress(OSError):  # the client may leave before the end
                    answer(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/agent"
    finally:
        stop.set()
        thread.join(TIMEOUT)
        listener.close()
    assert not thread.is_alive()


A_RUN = sse([RUN, {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "moved"}, FINISH])


def redirect(connection: socket.socket) -> None:
    connection.sendall(
        b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(A_RUN), A_RUN)
    )


def error_with_escapes(connection: socket.socket) -> None:
    body = b"\x1b[2J\x1b[Hboom\x07 \xc2\x9b2J"
    connection.sendall(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n%s" % (len(body), body)
    )


def test_record_does_not_save_a_redirect_as_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "run.sse"
    with raw_server(redirect) as url:
        status, _, err = cli_in_process(capsys, "record", url, "-m", "hi", "-o", str(target))
    assert status == 1
    assert err.splitlines() == [
        (
            f"agui-meta: HTTP 302 from {url}, a redirect to /elsewhere: record does not follow "
            "redirects (record that URL instead)"
        ),
        f"agui-meta: kept what arrived: 0 events (0 bytes) to {target}",
    ]
    assert target.read_bytes() == b""


def test_run_does_not_read_a_redirect_as_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    with raw_server(redirect) as url:
        status, out, err = cli_in_process(capsys, "run", url, "-m", "hi")
    assert status == 1
    assert err == (
        f"agui-meta: HTTP 302 from {url}, a redirect: run does not follow redirects (give it "
        "the URL the endpoint points to)\n"
    )
    assert "moved" not in out  # the redirect's body, a run, is not shown as the run


def test_http_agent_follows_a_redirect_only_when_its_client_is_told_to() -> None:
    import anyio
    import httpx

    import agui_meta

    answers = iter([redirect, redirect, a_run])

    def answer(connection: socket.socket) -> None:
        next(answers)(connection)

    async def main(url: str) -> None:
        with pytest.raises(agui_meta.HttpStatusError) as refused:
            await agui_meta.HttpAgent(url).run_agent()
        assert refused.value.status == 302
        async with httpx.AsyncClient(follow_redirects=True) as client:
            agent = agui_meta.HttpAgent(url, http_client=client)
            await agent.run_agent()
        assert [m["content"] for m in agent.messages_wire()] == ["moved"]

    with raw_server(answer) as url:
        anyio.run(main, url)


def a_run(connection: socket.socket) -> None:
    connection.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
        % (len(A_RUN), A_RUN)
    )


def test_record_shows_an_error_body_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with raw_server(error_with_escapes) as url:
        status, _, err = cli_in_process(capsys, "record", url, "-o", str(tmp_path / "x.sse"))
    assert status == 1
    assert err.splitlines()[0].startswith(f"agui-meta: HTTP 500 from {url}: ")  # not a terminal


@needs_a_terminal
def test_record_escapes_the_servers_error_body_on_a_terminal(tmp_path: Path) -> None:
    with raw_server(error_with_escapes) as url:
        status, out = Terminal("record", url, "-o", str(tmp_path / "x.sse")).read_until_exit()
    assert status == 1
    text = out.replace(b"\r\n", b"\n")
    assert b"\x1b" not in text and b"\x07" not in text and "\u009b".encode() not in text
    assert b"\\x1b[2J\\x1b[Hboom\\x07 \\x9b2J" in text


#: What compact reports names from the stream: an unknown field's name.
HOSTILE_TO_COMPACT: list[dict[str, Any]] = [
    RUN,
    {"type": "CUSTOM", "name": "n", "value": 1, ESCAPES: 1},
    {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": f"/{HOSTILE}\u202e", "value": 1}]},
    FINISH,
]


@needs_a_terminal
def test_compact_escapes_the_streams_text_in_its_reports_on_a_terminal(tmp_path: Path) -> None:
    path = _write(tmp_path / "hostile.jsonl", jsonl(HOSTILE_TO_COMPACT))
    out_file = str(tmp_path / "out.jsonl")
    for args in (["compact"], ["compact", "--keep-going"], ["compact", "--color"]):
        status, out = Terminal(*args, path, "-o", out_file).read_until_exit()
        assert b"[unknown-field]" in out and b"Traceback" not in out, out
        assert status in (0, 1)
        assert_no_raw_controls(out)


def _peak_rss_kib(args: list[str]) -> tuple[int, int]:
    """Run the command in a fresh process: its exit status and peak resident set (KiB)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agui_meta", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, wait_status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(wait_status)
    return process.returncode, usage.ru_maxrss


BIG = 64 << 20


def huge_error(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n" % BIG)
    block = b"x" * (1 << 20)
    for _ in range(BIG // len(block)):
        connection.sendall(block)


def small_error(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\nsmall")


@pytest.mark.slow
def test_record_reads_a_bounded_part_of_a_huge_error_body(tmp_path: Path) -> None:
    target = str(tmp_path / "x.sse")
    with raw_server(small_error) as url:
        status, baseline = _peak_rss_kib(["record", url, "-o", target])
    assert status == 1
    with raw_server(huge_error) as url:
        status, peak = _peak_rss_kib(["record", url, "-o", target])
    assert status == 1
    # Reading the 64 MiB body whole took ~190 MB; a bounded read stays near the small one's.
    assert peak - baseline < 16 << 10, (baseline, peak)


def test_stdout_closed_while_recording_is_one_line(tmp_path: Path) -> None:
    with raw_server(a_run) as url:
        done = _closed(1, "record", url)
    assert done.returncode == 2
    assert done.stderr == "agui-meta: [Errno 9] standard output is closed\n"


@needs_a_terminal
@pytest.mark.parametrize("command", [["compact"], ["replay", "--json", "--keep-going"]])
def test_json_on_a_terminal_escapes_what_json_leaves_raw(
    command: list[str], tmp_path: Path
) -> None:
    # C1 controls and bidirectional overrides are raw in JSON strings: escaped (\\u009b) on a
    # terminal, the same JSON value; ESC and C0 are escaped by JSON itself.
    path = _write(tmp_path / "hostile.jsonl", jsonl(EVENTS))
    status, out = Terminal(*command, path).read_until_exit()
    text = out.replace(b"\r\n", b"\n")
    assert b"\x1b" not in text and "\u009b".encode() not in text and "\u202e".encode() not in text
    assert b"\\u009b2J\\u202eevil" in text
    piped = cli(*command, path)
    assert status == piped.returncode
    on_terminal = [json.loads(line) for line in text.decode().splitlines() if line.startswith("{")]
    on_a_pipe = [json.loads(line) for line in piped.stdout.splitlines()]
    for value in (*on_terminal, *on_a_pipe):
        value.pop("ledger", None)  # its receipt times differ from one run to the next
    assert on_terminal == on_a_pipe
