"""The README's own promises: its first examples print what it says, CI runs its test command.

Every Python block of README.md and docs/*.md also runs in tests/test_docs.py, and every
command shown there is checked to exist.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from contextlib import redirect_stdout
from typing import Any

import anyio
import pytest

from tests.doc_blocks import ROOT, blocks, doc_block

README = ROOT / "README.md"


def test_the_first_example_runs_and_prints_items_with_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    block = doc_block("async def main() -> None:\n    stages = agui_meta.DefaultStages()  #")
    assert block.path == "README.md"
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(block.code, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102 - running the README is the point
    lines = out.getvalue().splitlines()
    assert lines[-1].endswith("messages; finished")
    assert any(line.startswith("TEXT_MESSAGE_END {") for line in lines)
    assert any(line.startswith("TOOL_CALL_END {") for line in lines)


def test_the_stage_example_redacts() -> None:
    namespace: dict[str, Any] = {}
    block = doc_block("async def redact(events):")
    assert block.path == "README.md"
    exec(compile(block.code, "README.md", "exec"), namespace)  # noqa: S102 - running the README is the point
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "my secret"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    store = anyio.run(namespace["run"], events)
    assert store.messages_wire()[0]["content"] == "my ******"


def test_the_quickstart_commands_are_what_ci_runs() -> None:
    quickstart = next(b for b in blocks(README) if b.language == "sh")
    commands = [line for line in quickstart.code.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[1] == "bash .ci/run"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert any(line.endswith("&& .venv/bin/python -m pytest") for line in ci)  # the whole suite
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


def test_the_readme_stays_short_and_every_docs_page_is_listed() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert "](docs/index.md)" in text
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"]({page.name})" in index, f"docs/index.md does not list {page.name}"


def test_the_command_table_lists_every_command() -> None:
    from agui_meta.cli import commands

    text = README.read_text(encoding="utf-8")
    table = {m.group(1) for m in re.finditer(r"^\| `agui-meta (\w+)", text, flags=re.MULTILINE)}
    assert table == set(commands())
