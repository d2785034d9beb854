"""The package stays typed (mypy strict) and lint-clean (ruff), as the project promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(("mypy",), id="mypy-strict"),
        pytest.param(("ruff", "check", "."), id="ruff-check"),
        pytest.param(("ruff", "format", "--check", "."), id="ruff-format"),
    ],
)
def test_tool_passes(command: tuple[str, ...]) -> None:
    result = run(*command)
    assert result.returncode == 0, result.stdout + result.stderr
