"""build_resume_array and is_interrupt_expired against the official buildResumeArray and
isInterruptExpired (@ag-ui/client 1.0.0), case by case."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from typing import Any

import msgspec
import pytest

import agui_meta
from agui_meta.events import Interrupt
from tests.oracle import OracleUnavailable, oracle_missing, prepare_oracle

NOW = "2026-06-01T12:00:00.000Z"

EXPIRY_CASES = [
    {"id": "a", "reason": "r"},
    {"id": "a", "reason": "r", "expiresAt": "2026-06-01T12:00:00.000Z"},  # now: expired
    {"id": "a", "reason": "r", "expiresAt": "2026-06-01T11:59:59Z"},
    {"id": "a", "reason": "r", "expiresAt": "2026-06-01T12:00:01Z"},
    {"id": "a", "reason": "r", "expiresAt": "2026-06-01T14:00:00+02:00"},  # the same instant
    {"id": "a", "reason": "r", "expiresAt": "2026-06-01T14:00:01+02:00"},
    {"id": "a", "reason": "r", "expiresAt": "not a date"},
    {"id": "a", "reason": "r", "expiresAt": "2030-01-01T00:00:00Z"},
]

RESUME_CASES: list[tuple[list[dict[str, Any]], dict[str, Any]]] = [
    ([{"id": "a", "reason": "r"}], {"a": {"status": "resolved", "payload": {"ok": True}}}),
    ([{"id": "a", "reason": "r"}], {"a": {"status": "cancelled", "payload": {"dropped": 1}}}),
    (
        [{"id": "b", "reason": "r"}, {"id": "a", "reason": "r"}],
        {"a": {"status": "resolved", "metadata": {"x.k": 1}}, "b": {"status": "cancelled"}},
    ),
    ([{"id": "a", "reason": "r"}], {"a": {"status": "resolved", "payload": None}}),
    ([{"id": "a", "reason": "r"}, {"id": "b", "reason": "r"}], {"a": {"status": "resolved"}}),
    ([{"id": "a", "reason": "r"}], {"a": {"status": "resolved"}, "z": {"status": "resolved"}}),
    ([], {}),
]

SCRIPT = """
const c = require("@ag-ui/client");
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const now = new Date(cases.now);
const out = {
  expired: cases.expiry.map((i) => c.isInterruptExpired(i, now)),
  resume: cases.resume.map(([interrupts, responses]) => {
    try { return { ok: c.buildResumeArray(interrupts, responses) }; }
    catch (e) { return { error: e.message }; }
  }),
};
process.stdout.write(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def official() -> dict[str, Any]:
    try:
        directory = prepare_oracle()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    cases = {"now": NOW, "expiry": EXPIRY_CASES, "resume": RESUME_CASES}
    done = subprocess.run(
        ["node", "-e", SCRIPT],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        cwd=directory,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_is_interrupt_expired_agrees(official: dict[str, Any]) -> None:
    now = dt.datetime(2026, 6, 1, 12, tzinfo=dt.timezone.utc)
    ours = [
        agui_meta.is_interrupt_expired(msgspec.convert(case, Interrupt), now)
        for case in EXPIRY_CASES
    ]
    assert ours == official["expired"]
    assert ours[1] and not ours[0] and not ours[6]  # a known value of each kind


def test_build_resume_array_agrees(official: dict[str, Any]) -> None:
    for (interrupts, responses), theirs in zip(RESUME_CASES, official["resume"], strict=True):
        pending = [msgspec.convert(i, Interrupt) for i in interrupts]
        try:
            built = agui_meta.build_resume_array(pending, responses)
        except agui_meta.UsageError as exc:
            # The same message, naming the Python function.
            assert {"error": str(exc)} == {
                "error": theirs["error"].replace("buildResumeArray", "build_resume_array")
            }
        else:
            assert {"ok": built} == theirs
    assert "error" in official["resume"][4] and "error" in official["resume"][5]
