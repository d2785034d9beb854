"""``agui-meta compact``: the bundled recorded streams compacted as the reference compacts them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.compact_cases import run_reference_compact
from tests.example_streams import GOOD, STREAMS, events
from tests.helpers import cli
from tests.oracle import OracleUnavailable, _tagged, oracle_missing, prepare_oracle


@pytest.fixture(scope="module")
def reference() -> Any:
    try:
        prepare_oracle()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    return run_reference_compact


@pytest.mark.parametrize("name", sorted(GOOD))
def test_compact_writes_what_the_reference_returns(
    reference: Any, name: str, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    done = cli("compact", str(STREAMS / name), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
    ours = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    [expected] = reference([{"name": name, "events": events(name)}])
    assert _tagged(ours, True) == _tagged(expected["events"], True)
    assert len(ours) < len(events(name))


def test_compact_reads_standard_input_and_writes_standard_output() -> None:
    data = (STREAMS / "support.jsonl").read_bytes()
    from_stdin = cli("compact", "-", stdin=data)
    from_file = cli("compact", str(STREAMS / "support.jsonl"))
    assert from_stdin.returncode == 0 and from_stdin.stdout == from_file.stdout
    assert all(json.loads(line)["type"] for line in from_stdin.stdout.splitlines())


def test_a_bad_event_stops_with_its_location() -> None:
    done = cli("compact", str(STREAMS / "broken.jsonl"))
    assert done.returncode == 1
    assert done.stdout == ""
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"{STREAMS / 'broken.jsonl'}:5:440: event 4: error: [MetadataError]")


def test_keep_going_reports_every_bad_event_and_writes_the_rest() -> None:
    done = cli("compact", "--keep-going", str(STREAMS / "broken.jsonl"))
    assert done.returncode == 1  # what could be compacted is written, and the errors counted
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) >= 2
    assert done.stdout.count("\n") > 0


def test_an_unreadable_input_exits_2(tmp_path: Path) -> None:
    done = cli("compact", str(tmp_path / "missing.jsonl"))
    assert done.returncode == 2
    assert "cannot read" in done.stderr
