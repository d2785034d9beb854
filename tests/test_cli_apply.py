"""``python -m agui_meta apply``: the conformance command (the oracle's case format)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agui_meta.cli import build_parser, main
from tests.oracle import REPO_ROOT

RUN = {"threadId": "t", "runId": "r"}
CASES = [
    {
        "name": "text",
        "events": [
            {"type": "RUN_STARTED", **RUN},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"a": 1}},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", **RUN},
        ],
        "messages": [{"id": "u", "role": "user", "content": "q"}],
        "state": {"n": 12345678901234567890123},
    },
    {
        "name": "unverified-order",
        "events": [{"type": "TEXT_MESSAGE_START", "messageId": "m"}],
    },
    {
        "name": "raw-chunk-without-id",
        "events": [{"type": "RUN_STARTED", **RUN}, {"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}],
    },
]


def _apply(tmp_path: Path, lines: list[str], *flags: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "agui_meta", "apply", str(path), *flags],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def _results(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_one_result_line_per_case(tmp_path: Path) -> None:
    done = _apply(tmp_path, [json.dumps(c) for c in CASES])
    assert done.returncode == 0, done.stderr
    text, unverified, chunk = _results(done)
    assert text == {
        "name": "text",
        "messages": [
            {"id": "u", "role": "user", "content": "q"},
            {"id": "m", "role": "assistant", "content": "hi", "metadata": {"a": 1}},
        ],
        "state": {"n": 12345678901234567890123},
    }
    assert unverified["name"] == "unverified-order" and "RUN_STARTED" in unverified["error"]
    assert set(chunk) == {"name", "error"}


def test_no_verify_skips_the_order_checks(tmp_path: Path) -> None:
    done = _apply(tmp_path, [json.dumps(CASES[1])], "--no-verify")
    assert _results(done) == [
        {
            "name": "unverified-order",
            "messages": [{"id": "m", "role": "assistant", "content": ""}],
            "state": {},
        }
    ]


def test_lines_that_are_not_cases_are_reported_and_skipped(tmp_path: Path) -> None:
    done = _apply(tmp_path, ["{nope", "[1]", "", json.dumps(CASES[0])])
    assert done.returncode == 1
    assert [r["name"] for r in _results(done)] == ["text"]
    assert ":1:" in done.stderr and ":2:" in done.stderr


def test_verbose_prints_the_reports(tmp_path: Path) -> None:
    case = {"name": "warns", "events": [{"type": "TEXT_MESSAGE_END", "messageId": "x"}]}
    done = _apply(tmp_path, [json.dumps(case)], "--no-verify", "--verbose")
    assert "warns: [missing-target]" in done.stderr


def test_a_missing_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


def test_the_parser_has_the_apply_command() -> None:
    args = build_parser().parse_args(["apply", "x.jsonl", "--no-verify"])
    assert (args.command, args.cases, args.no_verify) == ("apply", "x.jsonl", True)


def test_a_malformed_case_gives_an_error_line(tmp_path: Path) -> None:
    lines = [
        json.dumps({"name": "no-events"}),
        json.dumps({"name": "bad-history", "events": [], "messages": ["x"]}),
    ]
    done = _apply(tmp_path, lines)
    assert [set(r) for r in _results(done)] == [{"name", "error"}, {"name", "error"}]
    assert "`events`" in _results(done)[0]["error"]
