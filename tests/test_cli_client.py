"""``agui-meta run`` and ``agui-meta record`` against real servers on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import agui_meta
from tests.helpers import cli_in_process
from tests.servers import agent_app, serve

FIXED = (
    b": a comment first\r\n"
    b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\r\n\r\n'
    b'data: {"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"Hi \\u00e9"}\n\n'
    b'id: 7\ndata: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'
)


def extra_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    async def fixed(request: Request) -> Response:
        await request.body()

        async def body() -> AsyncIterator[bytes]:
            for n in range(0, len(FIXED), 37):  # split anywhere
                yield FIXED[n : n + 37]

        return StreamingResponse(body(), media_type="text/event-stream")

    async def hostile(request: Request) -> Response:
        run = json.loads(await request.body())
        ids = {"threadId": run["threadId"], "runId": run["runId"]}

        async def events() -> AsyncIterator[dict[str, Any]]:
            yield {"type": "RUN_STARTED", **ids}
            yield {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m\x1b[31m", "delta": "\x1b[2J\x1b[H"}
            yield {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m\x1b[31m", "delta": "gone"}
            yield {
                "type": "TOOL_CALL_CHUNK",
                "toolCallId": "c\x07",
                "toolCallName": "t\x1b[1m",
                "delta": '{"x": "\\u001b[2J"}',
            }
            yield {
                "type": "TOOL_CALL_RESULT",
                "messageId": "r",
                "toolCallId": "c\x07",
                "content": "\x1b]0;title\x07",
            }
            yield {
                "type": "ACTIVITY_DELTA",
                "messageId": "a\x1b[8m",
                "activityType": "x",
                "patch": [],
            }
            yield {"type": "RUN_FINISHED", **ids, "metadata": {"note\x1b[7m": "\x1b[5mblink"}}

        return agui_meta.EventStreamResponse(events())

    return Starlette(
        routes=[
            Route("/fixed", fixed, methods=["POST"]),
            Route("/hostile", hostile, methods=["POST"]),
        ]
    )


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    with serve(agent_app()) as agents, serve(extra_app()) as extra:
        yield agents, extra


def test_run_shows_the_conversation_then_the_ledger(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = cli_in_process(
        capsys, "run", urls[0] + "/thread", "-m", "Hi", "--run-id", "r1"
    )
    assert status == 0, err
    lines = out.splitlines()
    order = [
        lines.index("user user-1"),
        lines.index("run r1 started"),
        lines.index("assistant r1-t"),
        lines.index("  Let me check the weather."),
        lines.index("tool call weather (r1-call)"),
        lines.index("run r1 finished"),
        lines.index("--- runs (1) ---"),
    ]
    assert order == sorted(order)
    assert '  metadata: {"srv.model": "m-1"}' in lines
    assert "  pending tool calls: r1-call" in lines
    assert "\x1b" not in out  # not a terminal: no colour


def test_run_json_is_what_replay_json_prints(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = urls[0] + "/thread"
    common = ["--thread-id", "t", "--run-id", "r", "--accept", "jsonl"]
    status, out, err = cli_in_process(capsys, "run", url, "--json", *common)
    assert status == 0, err
    ran = json.loads(out)
    recording = tmp_path / "run.jsonl"
    assert cli_in_process(capsys, "record", url, "-o", str(recording), *common)[0] == 0
    status, out, err = cli_in_process(capsys, "replay", "--json", str(recording))
    assert status == 0, err
    replayed = json.loads(out)
    assert set(ran) == set(replayed) == {"messages", "state", "ledger", "reports"}
    assert ran["messages"] == replayed["messages"]
    assert ran["state"] == replayed["state"]
    assert ran["reports"] == replayed["reports"] == []
    keys = ("threadId", "runId", "status", "outcome", "eventCounts")
    assert [{k: r.get(k) for k in keys} for r in ran["ledger"]["runs"]] == [
        {k: r.get(k) for k in keys} for r in replayed["ledger"]["runs"]
    ]


def test_run_error_exits_1_after_showing_what_came(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = cli_in_process(capsys, "run", urls[0] + "/run-error")
    assert status == 1
    assert "  Partial" in out.splitlines()
    assert "run error: the model refused" in out
    assert err.strip() == "agui-meta: the run failed [refusal]: the model refused"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/500", "agui-meta: HTTP 500 from {url}/500: the agent is down for maintenance"),
        ("/dropping?ids=1", "agui-meta: the connection dropped after 4 events"),
        ("/no-terminal", "agui-meta: the stream ended without RUN_FINISHED or RUN_ERROR"),
    ],
)
def test_stream_errors_exit_1(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str], path: str, message: str
) -> None:
    status, _, err = cli_in_process(capsys, "run", urls[0] + path, "--json")
    assert status == 1
    assert err.startswith(message.format(url=urls[0])), err


def test_an_unreachable_endpoint_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(agent_app()) as url:
        pass  # the port is free again
    status, _, err = cli_in_process(capsys, "run", url + "/thread", "-m", "hi")
    assert status == 2
    assert err.startswith(f"agui-meta: cannot reach {url}/thread")
    status, _, err = cli_in_process(capsys, "record", url + "/thread", "-o", "-")
    assert status == 2


def test_bad_arguments_exit_2(urls: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = cli_in_process(capsys, "run", urls[0] + "/thread", "--state", "{nope")
    assert status == 2
    assert err.splitlines()[-1].startswith("agui-meta run: error: argument --state: not JSON: ")
    status, _, err = cli_in_process(capsys, "run", urls[0] + "/thread", "-H", "no-colon")
    assert status == 2 and "not a header 'NAME: VALUE'" in err


def test_escape_sequences_from_the_stream_are_not_written(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = cli_in_process(capsys, "run", urls[1] + "/hostile", "--color")
    assert status == 0
    assert "\x1b[2J" not in out and "\x1b[H" not in out and "\x1b[31m" not in out
    assert "\\x1b[2J\\x1b[Hgone" in out
    assert "(c\\x07)" in out and "result of t\\x1b[1m (c\\x07)" in out
    assert "\\x1b]0;title\\x07" in out and "\x07" not in out
    # The ledger (run metadata) and the reports (naming the stream's ids) are escaped too.
    ledger = out[out.index("--- runs (1) ---") :]
    assert "finished metadata" in ledger and "blink" in ledger
    assert "'a\\x1b[8m': its patch is not applied" in ledger[ledger.index("--- reports ---") :]
    assert "\x1b[7m" not in out and "\x1b[5m" not in out and "\x1b[8m" not in out


def test_record_saves_the_body_byte_for_byte(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "fixed.sse"
    status, _, err = cli_in_process(
        capsys, "record", urls[1] + "/fixed", "-m", "x", "-o", str(target)
    )
    assert status == 0, err
    assert target.read_bytes() == FIXED
    assert err.strip() == f"agui-meta: recorded 3 events ({len(FIXED)} bytes) to {target}"
    status, out, _ = cli_in_process(capsys, "replay", str(target))
    assert status == 0 and "  Hi é" in out.splitlines()


def test_record_keeps_what_arrived_when_the_connection_drops(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "cut.sse"
    status, _, err = cli_in_process(
        capsys, "record", urls[0] + "/dropping?ids=1", "-o", str(target)
    )
    assert status == 1
    assert "kept what arrived: 4 events" in err
    assert target.read_bytes().count(b"\n\n") == 4


def test_replay_stdin_shows_the_conversation_as_the_bytes_arrive() -> None:
    first = (
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        b'data: {"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"Hello there"}\n\n'
        b'data: {"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"look","delta":"{}"}\n\n'
    )
    rest = b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'
    process = subprocess.Popen(
        [sys.executable, "-m", "agui_meta", "replay", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(first)
        process.stdin.flush()
        # The input is still open: what arrived is on the screen already.
        seen = []
        while "  Hello there" not in seen:  # ended by the tool call chunk after it
            line = process.stdout.readline().decode()
            assert line, "replay - ended before its input did"
            seen.append(line.rstrip("\n"))
        assert seen[:4] == ["run r started", "", "assistant m", "  Hello there"]
        process.stdin.write(rest)
        process.stdin.close()
        tail = process.stdout.read().decode().splitlines()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        assert process.stderr is not None
        process.stderr.close()
    assert "tool call look (c)" in tail  # complete when the chunk stream closed
    assert "run r finished" in tail and "--- runs (1) ---" in tail
    assert "--- conversation" not in "\n".join(seen + tail)  # shown live, not again
