"""The README stays true: its Python examples run, its commands exist, CI runs its test command."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_the_ten_line_example_runs_and_prints_items_with_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    source = blocks("python")[0]
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(source, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102 - running the README is the point
    lines = out.getvalue().splitlines()
    assert lines[-1].endswith("messages; finished")
    assert any(line.startswith("TEXT_MESSAGE_END {") for line in lines)
    assert any(line.startswith("TOOL_CALL_END {") for line in lines)


def test_the_stage_example_redacts() -> None:
    namespace: dict[str, object] = {}
    exec(compile(blocks("python")[1], "README.md", "exec"), namespace)  # noqa: S102 - running the README is the point
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "my secret"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    store = anyio.run(namespace["run"], events)  # type: ignore[arg-type]
    assert store.messages_wire()[0]["content"] == "my ******"  # type: ignore[attr-defined]


def test_the_quickstart_commands_are_what_ci_runs() -> None:
    commands = [line for line in blocks("sh")[0].splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci.splitlines()
    replay = commands[0].split("agui-meta ", 1)[1].split()
    result = subprocess.run(
        [sys.executable, "-m", "agui_meta", *replay],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "conversation" in result.stdout
