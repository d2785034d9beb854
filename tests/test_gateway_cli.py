"""``agui-meta gateway``, ``attach`` and ``stop``, as processes, with the bundled demo agent.

The gateway runs as ``python -m agui_meta gateway`` on a free port of 127.0.0.1; the clients
are the command line itself. One test kills the gateway with SIGKILL in the middle of a run:
started again on the same SQLite file, it records that run as ended with an error.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.doc_blocks import shell_lines
from tests.helpers import free_port
from tests.oracle import REPO_ROOT

TIMEOUT = 30.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agui_meta", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )


@contextlib.contextmanager
def gateway(*options: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agui_meta", "gateway", "--port", str(port), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert process.poll() is None, process.communicate()[1]
            try:
                httpx.get(url + "/threads", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the gateway did not start"
                time.sleep(0.05)
        yield url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(TIMEOUT)
            except subprocess.TimeoutExpired:  # pragma: no cover - a bug: do not hang
                process.kill()
                process.wait()
        process.communicate()


DEMO = ("--agent", "demo=agui_meta.demo:agent")


def _documented(start: str) -> list[str]:
    """The arguments of the first command of docs/gateway.md that starts with ``start``."""
    [line, *_] = [
        c for w, c in shell_lines() if w.startswith("docs/gateway.md") and c.startswith(start)
    ]
    return shlex.split(line)[1:]


def test_the_documented_two_command_demo_then_attach_and_stop(tmp_path: Path) -> None:
    serve_args = _documented("agui-meta gateway")
    port = serve_args.index("--port")
    del serve_args[port : port + 2]  # a free port instead of 8000
    run_args = _documented("agui-meta run")
    with gateway(*serve_args[1:], "--threads", f"sqlite:{tmp_path / 'threads.db'}") as (url, _):
        run_args[1] = run_args[1].replace("http://127.0.0.1:8000", url)
        done = cli(*run_args)
        assert done.returncode == 0, done.stderr
        assert "You said: hello there" in done.stdout
        shown = cli("attach", f"{url}/agents/demo", "--thread", "t1", "--no-color")
        assert shown.returncode == 0, shown.stderr
        assert "hello there" in shown.stdout and "You said: hello there" in shown.stdout
        assert '"turns": 1' in shown.stdout
        idle = cli("stop", f"{url}/agents/demo", "--thread", "t1")
        assert idle.returncode == 1 and "no run is active on thread 't1'" in idle.stderr
        unknown = cli("attach", f"{url}/agents/demo", "--thread", "nope")
        assert unknown.returncode == 1 and "404" in unknown.stderr


def _slow_run(url: str, thread_id: str) -> None:
    """Start a long demo run and leave (the run goes on: it is detached)."""
    body = {
        "threadId": thread_id,
        "runId": "slow",
        "messages": [{"id": "u", "role": "user", "content": " ".join(["word"] * 100)}],
        "forwardedProps": {"delay": 0.2},
    }
    with httpx.stream("POST", f"{url}/agents/demo/run", json=body, timeout=TIMEOUT) as answer:
        assert answer.status_code == 200
        for _ in answer.iter_bytes():
            break


def _thread(url: str, thread_id: str) -> Any:
    return httpx.get(f"{url}/threads/{thread_id}", timeout=TIMEOUT).json()


def test_stop_from_the_command_line_ends_the_run_cancelled() -> None:
    with gateway(*DEMO) as (url, _):
        _slow_run(url, "t")
        assert _thread(url, "t")["activeRunId"] == "slow"
        stopped = cli("stop", f"{url}/agents/demo/run", "--thread", "t", "--run", "slow")
        assert stopped.returncode == 0, stopped.stderr
        assert '"ended": true' in stopped.stdout
        saved = _thread(url, "t")
        assert saved["activeRunId"] is None
        assert saved["ledger"]["statuses"] == {"finished": 1}
        joined = httpx.post(
            f"{url}/agents/demo/run", json={"threadId": "t", "runId": "slow", "messages": []}
        )
        assert '"outcome":{"type":"cancelled"}' in joined.text


def test_a_run_in_flight_when_the_gateway_is_killed_ends_with_an_error(tmp_path: Path) -> None:
    threads = ("--threads", f"sqlite:{tmp_path / 'threads.db'}")
    with gateway(*DEMO, *threads) as (url, process):
        done = cli("run", f"{url}/agents/demo/run", "-m", "first", "--thread-id", "t")
        assert done.returncode == 0, done.stderr
        _slow_run(url, "t")
        assert _thread(url, "t")["activeRunId"] == "slow"
        process.kill()  # SIGKILL: no shutdown, no save
        process.wait()
    with gateway(*DEMO, *threads) as (url, _):
        saved = _thread(url, "t")
        assert saved["activeRunId"] is None and saved["version"] == 2
        assert saved["ledger"]["lastRunId"] == "slow"
        assert saved["ledger"]["statuses"] == {"finished": 1, "error": 1}
        assert [m["role"] for m in saved["messages"]] == ["user", "assistant", "tool"]
        body = {"threadId": "t", "runId": "r3", "messages": [
            {"id": "u3", "role": "user", "content": "second"}]}  # fmt: skip
        again = httpx.post(f"{url}/agents/demo/run", json=body, timeout=TIMEOUT)
        assert "You said: second" not in again.text  # streamed word by word
        assert _thread(url, "t")["messages"][-2]["content"] == "You said: second"


def test_a_scope_header_is_required_and_separates_threads() -> None:
    with gateway(*DEMO, "--scope-header", "X-User") as (url, _):
        refused = httpx.get(url + "/threads")
        assert refused.status_code == 401 and "X-User" in refused.text
        done = cli(
            "run", f"{url}/agents/demo/run", "-m", "hi", "--thread-id", "t", "-H", "X-User: a"
        )
        assert done.returncode == 0, done.stderr
        assert httpx.get(url + "/threads/t", headers={"X-User": "b"}).status_code == 404
        assert httpx.get(url + "/threads/t", headers={"X-User": "a"}).json()["version"] == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--agent", "demo"), "NAME=SPEC"),
        (("--agent", "demo=no_such_module_x:agent"), "cannot import 'no_such_module_x'"),
        (("--agent", "demo=agui_meta.demo:nothing"), "has no attribute 'nothing'"),
        (("--agent", "demo=agui_meta.demo:MAX_DELAY"), "an agent is"),
        (("--agent", "demo=agui_meta.demo:agent", "--threads", "disk"), "--threads is memory"),
        (("--agent", "demo=agui_meta.demo:agent", "--budget-cost", "5"), "needs a price table"),
        (
            ("--agent", "demo=agui_meta.demo:agent", "--budget-cost", "5", "--prices", "/nx.json"),
            "/nx.json",
        ),
    ],
)
def test_bad_gateway_arguments_exit_2_with_the_reason(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_meta.cli import main

    assert main(["gateway", "--port", "1", *argv]) == 2  # before anything is served
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", ["attach", "stop"])
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("ftp://127.0.0.1:1/agents/demo",), "argument URL: not an http:// or https:// URL"),
        (
            ("http://127.0.0.1:1/agents/demo", "--header", "no-colon"),
            "argument -H/--header: not a header 'NAME: VALUE': 'no-colon' has no ':'",
        ),
    ],
)
def test_bad_attach_and_stop_arguments_exit_2_with_the_reason(
    command: str, argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_meta.cli import main

    assert main([command, *argv, "--thread", "t"]) == 2  # before any request
    assert message in capsys.readouterr().err


def test_a_budget_from_the_command_line_ends_the_runs_of_a_scope_over_it() -> None:
    from tests.gateway_agents import frames, run_body

    spending = ("--agent", "spending=tests.test_gateway_budget:spending")
    with gateway(*spending, "--scope-header", "X-User", "--budget-tokens", "1000") as (url, _):
        ended = []
        for n, user in enumerate(("a", "a", "b")):
            answer = httpx.post(
                f"{url}/agents/spending/run",
                json=run_body(f"t{n}", "r1", tokens=1200),
                headers={"X-User": user},
                timeout=30,
            )
            ended.append(frames(answer.content)[-1][1])
    assert [e["type"] for e in ended] == ["RUN_FINISHED", "RUN_ERROR", "RUN_FINISHED"]
    assert ended[1]["code"] == "budget_exceeded"
    assert "scope 'a' has spent 1200 tokens of 1000 (per 86400 s)" in ended[1]["message"]
