"""Budgets: runs of a scope past its token or cost budget are ended, with a report.

Expectations come from the usage the test streams carry and the limits set here.
"""

from __future__ import annotations

from typing import Any

import pytest

import agui_meta
from agui_meta import Budget, PriceTable
from tests.example_streams import EXAMPLES, events
from tests.test_prices import expected_cost

SCOPE = "agui_meta.scope"


def run(n: int, scope: str | None, tokens: int, *, extra: int = 1) -> list[dict[str, Any]]:
    ids = {"threadId": f"t-{scope}", "runId": f"r{n}"}
    started: dict[str, Any] = {"type": "RUN_STARTED", **ids}
    if scope is not None:
        started["metadata"] = {SCOPE: scope}
    body = [
        {"type": "TEXT_MESSAGE_START", "messageId": f"m{n}-{i}", "role": "assistant"}
        for i in range(extra)
    ] + [{"type": "TEXT_MESSAGE_END", "messageId": f"m{n}-{i}"} for i in range(extra)]
    usage = [{"provider": "openai", "model": "gpt-4.1", "inputTokens": tokens, "outputTokens": 0}]
    return [started, *body, {"type": "RUN_FINISHED", **ids, "usage": usage}]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def feed(budget: Budget, wire: list[dict[str, Any]]) -> tuple[list[Any], list[agui_meta.Report]]:
    reports: list[agui_meta.Report] = []
    out = agui_meta.run_sync([agui_meta.Enforce(), budget], wire, on_report=reports.append)
    return out, reports


def test_a_scope_over_its_period_budget_has_its_next_runs_ended() -> None:
    clock = Clock()
    seen: list[agui_meta.Report] = []
    budget = Budget(max_tokens=1000, period=3600, clock=clock, on_exceeded=seen.append)
    wire = [*run(1, "acme", 600), *run(2, "acme", 600), *run(3, "acme", 5, extra=3),
            *run(4, "other", 900), *run(5, None, 10)]  # fmt: skip
    out, reports = feed(budget, wire)
    kept = [(e.type, getattr(e, "run_id", None), getattr(e, "code", None)) for e in out]
    # r1 and r2 run whole (r2 crosses the budget at its end: the end passes unchanged); r3 is
    # ended at its start: RUN_STARTED, then a RUN_ERROR, and none of its 7 other events.
    assert [k for k in kept if k[1] == "r3" or k[2]] == [
        ("RUN_STARTED", "r3", None),
        ("RUN_ERROR", None, "budget_exceeded"),
    ]
    assert [k[1] for k in kept if k[0] == "RUN_FINISHED"] == ["r1", "r2", "r4", "r5"]
    assert len(out) == len(wire) - 7 + 1
    codes = [(r.code, r.severity) for r in reports]
    assert codes == [("budget-exceeded", "error")] * 2 + [("budget-dropped", "info")]
    assert "r2" in reports[0].message and "1200 tokens of 1000" in reports[0].message
    assert "'acme'" in reports[1].message and "r3" in reports[1].message
    assert "7 events" in reports[2].message
    assert [r.message for r in seen] == [r.message for r in reports[:2]]
    assert budget.spent("acme") == (1200, None)
    assert budget.spent("other") == (900, None)
    assert budget.spent("") == (10, None)
    assert budget.ended == [("t-acme", "r3", "acme")]
    # The next period: the scope starts afresh.
    clock.now += 3600
    out, reports = feed(budget, run(6, "acme", 10))
    assert [e.type for e in out][::3] == ["RUN_STARTED", "RUN_FINISHED"] and not reports
    assert budget.spent("acme") == (10, None)


def test_a_cost_budget_by_the_price_table() -> None:
    prices = PriceTable.load(EXAMPLES / "prices.toml")
    budget = Budget(max_cost=0.01, period=86400, prices=prices, clock=Clock())
    wire = [e for _ in range(3) for e in events("support.jsonl")]
    reruns = []
    for i, e in enumerate(wire):  # three passes over the stream, as distinct runs
        e = dict(e)
        if "runId" in e:
            e["runId"] = f"{e['runId']}-{i // len(events('support.jsonl'))}"
        reruns.append(e)
    out, reports = feed(budget, reruns)
    per_run = [sum(expected_cost(u) for u in e["usage"]) for e in events("support.jsonl")
               if e["type"] == "RUN_FINISHED"]  # fmt: skip
    # Spending runs until it reaches 0.01 USD; every run after that is ended at its start.
    spent, allowed = 0.0, 0
    for cost in per_run * 3:
        if spent >= 0.01:
            break
        spent += cost
        allowed += 1
    finished = [e for e in out if e.type == "RUN_FINISHED"]
    errors = [e for e in out if e.type == "RUN_ERROR"]
    assert len(finished) == allowed and len(errors) == len(per_run) * 3 - allowed
    assert all(e.code == "budget_exceeded" for e in errors)
    assert budget.spent("")[1] == pytest.approx(spent)
    assert "USD of 0.01 USD" in reports[0].message


def test_a_per_run_budget_reports_the_run_that_crossed_it() -> None:
    budget = Budget(max_tokens=500)
    out, reports = feed(budget, [*run(1, "a", 400), *run(2, "a", 600), *run(3, "a", 600)])
    assert [e.type for e in out].count("RUN_FINISHED") == 3  # nothing is ended: per run
    assert [r.code for r in reports] == ["budget-exceeded"] * 2
    assert "'r2'" in reports[0].message and "'r3'" in reports[1].message
    assert budget.spent("a") == (600, None)  # the last run's


def test_behind_it_the_ledger_sees_the_run_ended_with_the_budgets_code() -> None:
    stages = agui_meta.DefaultStages()
    budget = Budget(max_tokens=1, period=60, clock=Clock())
    agui_meta.run_sync([agui_meta.Enforce(), budget, *stages],
                       [*run(1, "a", 5), *run(2, "a", 5, extra=2)], on_report=lambda r: None)  # fmt: skip
    first, second = stages.ledger.runs
    assert (first.status, second.status, second.error_code) == (
        "finished",
        "error",
        "budget_exceeded",
    )
    assert len(stages.store) == 1  # the ended run's messages never reached the store


def test_strict_mode_raises_at_the_crossing() -> None:
    with pytest.raises(agui_meta.StrictError, match=r"budget exceeded: run .r1."):
        agui_meta.run_sync([agui_meta.Enforce(), Budget(max_tokens=1)], run(1, "a", 5),
                           mode="strict")  # fmt: skip


def test_scopes_are_bounded() -> None:
    clock = Clock()
    budget = Budget(max_tokens=10**9, period=60, clock=clock, max_scopes=2)
    for n, scope in enumerate(["a", "b", "c"]):
        feed(budget, run(n, scope, 1))
        clock.now += 60  # each in a later period: the oldest is forgotten first
    assert budget.forgotten == 1
    assert len(budget._spent) == 2


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({}, "max_tokens, max_cost"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_cost": 1.0}, "price table"),
        ({"max_tokens": 1, "period": 0}, "period"),
        ({"max_tokens": 1, "max_scopes": 0}, "max_scopes"),
    ],
)
def test_bad_limits_are_said(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(agui_meta.UsageError, match=needle):
        Budget(**kwargs)
