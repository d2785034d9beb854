"""The test suite reads ``CI`` one way and says loudly what it skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import flag

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
from tests.needs import missing

def test_needs_something():
    missing("the probe's part is not installed")

def test_checks_something():
    assert 1 + 1 == 2
"""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        ("", False),
        ("0", False),
        ("false", False),
        ("False", False),
        ("NO", False),
        (" off ", False),
        ("1", True),
        ("true", True),
        ("True", True),
        ("yes", True),
    ],
)
def test_ci_is_read_one_way(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool
) -> None:
    if value is None:
        monkeypatch.delenv("AGUI_META_PROBE_FLAG", raising=False)
    else:
        monkeypatch.setenv("AGUI_META_PROBE_FLAG", value)
    assert flag("AGUI_META_PROBE_FLAG") is expected


def _probe(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("ci", ["", "0", "False"])
def test_outside_ci_a_missing_part_skips_and_the_end_of_the_run_says_so(
    tmp_path: Path, ci: str
) -> None:
    done = _probe(tmp_path, ci)
    assert done.returncode == 0, done.stdout + done.stderr
    tail = done.stdout.splitlines()[-4:]
    assert "1 tests SKIPPED" in tail[0]
    assert "1 x the probe's part is not installed" in tail[1]
    assert "1 passed, 1 skipped" in tail[-1]


@pytest.mark.parametrize("ci", ["1", "true"])
def test_in_ci_a_missing_part_fails(tmp_path: Path, ci: str) -> None:
    done = _probe(tmp_path, ci)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "required but unavailable: the probe's part is not installed" in done.stdout
    assert "SKIPPED" not in done.stdout


@pytest.mark.parametrize(
    ("ci", "outcome"), [("1", pytest.fail.Exception), ("", pytest.skip.Exception)]
)
def test_a_missing_extra_skips_outside_ci_and_fails_in_it(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    from tests import needs

    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="agui_meta_no_such_extra"):
        needs.module("agui_meta_no_such_extra")
    assert needs.module("json").dumps([]) == "[]"  # what is there is simply imported
