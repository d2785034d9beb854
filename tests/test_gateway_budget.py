"""Budgets in the embedded gateway: per scope (the scope resolver's), charged once per run.

A real :class:`~agui_meta.gateway.Gateway` with uvicorn on 127.0.0.1, its scope from a request
header, a :class:`~agui_meta.Budget` as its option; real agents that report usage at their end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

import agui_meta
from agui_meta.events import RunAgentInput
from agui_meta.gateway import Gateway
from tests.gateway_agents import endless, frames, run_body, types
from tests.servers import serve

CALLED: list[str] = []  # the runs whose agent was called (the gateway runs in uvicorn's thread)


async def spending(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    """A short answer, then RUN_FINISHED with the usage ``forwardedProps.tokens`` says."""
    CALLED.append(f"{input.thread_id}/{input.run_id}")
    props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
    ids = {"threadId": input.thread_id, "runId": input.run_id}
    m = f"{input.run_id}-m"
    yield {"type": "RUN_STARTED", **ids}
    yield {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": "ok"}
    yield {"type": "TEXT_MESSAGE_END", "messageId": m}
    usage = [{"model": "m-1", "inputTokens": props.get("tokens", 0), "outputTokens": 0}]
    yield {"type": "RUN_FINISHED", **ids, "usage": usage}


def _tenant(request: Any) -> str:
    return str(request.headers.get("x-tenant", ""))


def _events(answer: httpx.Response | bytes) -> list[dict[str, Any]]:
    body = answer if isinstance(answer, bytes) else answer.content
    return [e for _, e in frames(body)]


def test_a_scope_over_budget_has_its_runs_ended_and_each_run_is_charged_once() -> None:
    reports: list[agui_meta.Report] = []
    budget: agui_meta.Budget[Any] = agui_meta.Budget(
        max_tokens=1000, period=86400, on_exceeded=reports.append
    )
    gateway = Gateway(
        {"spending": spending, "endless": endless}, scope=_tenant, budget=budget, linger=60
    )
    CALLED.clear()
    acme, globex = {"x-tenant": "acme"}, {"x-tenant": "globex"}

    async def main(url: str) -> tuple[bytes, list[httpx.Response]]:
        async with httpx.AsyncClient(timeout=30, base_url=url) as client:

            async def run(thread: str, tokens: int, **headers: str) -> httpx.Response:
                body = run_body(thread, "r1", tokens=tokens)
                return await client.post("/agents/spending/run", json=body, headers=headers)

            first = await run("t1", 600, **acme)
            again = await run("t1", 600, **acme)  # the same run posted again: joined
            assert budget.spent("acme") == (600, None)
            async with client.stream(
                "POST", "/agents/endless/run", json=run_body("t2", "r1"), headers=acme
            ) as live:
                lines = live.aiter_bytes()
                streamed = await lines.__anext__()
                while b"TEXT_MESSAGE_CONTENT" not in streamed:
                    streamed += await lines.__anext__()
                # Another run of acme takes it to 1200 tokens: the live one is stopped.
                crossing = await run("t3", 600, **acme)
                async for chunk in lines:
                    streamed += chunk
            later = await run("t4", 10, **acme)
            other = await run("t5", 900, **globex)
            return streamed, [first, again, crossing, later, other]

    with serve(gateway, lifespan="on") as url:
        stopped, (first, again, crossing, later, other) = anyio.run(main, url)
        thread4 = httpx.get(f"{url}/threads/t4", headers=acme, timeout=30).json()

    assert types(_events(first))[-1] == types(_events(again))[-1] == "RUN_FINISHED"
    assert types(_events(crossing))[-1] == "RUN_FINISHED"  # the run that crossed ends as sent
    assert types(_events(other))[-1] == "RUN_FINISHED"
    # Charged once each (t1 joined twice, t2 stopped before it reported usage).
    assert budget.spent("acme") == (1200, None)
    assert budget.spent("globex") == (900, None)
    # The scope's live run was stopped through the gateway's stop path.
    ended = _events(stopped)
    assert types(ended) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "RUN_ERROR",
    ]
    assert ended[-1]["code"] == "budget_exceeded"
    assert "scope 'acme' has spent 1200 tokens of 1000" in ended[-1]["message"]
    # The next run of the scope: RUN_STARTED, RUN_ERROR budget_exceeded; its agent not called.
    refused = _events(later)
    assert types(refused) == ["RUN_STARTED", "RUN_ERROR"]
    assert refused[1]["code"] == "budget_exceeded"
    assert "run 'r1' is ended" in refused[1]["message"]
    assert "t4/r1" not in CALLED and "t5/r1" in CALLED and CALLED.count("t1/r1") == 1
    assert thread4["ledger"]["lastStatus"] == "error"
    assert (("t4", "r1", "acme")) in budget.ended
    assert [(r.code, r.severity) for r in reports] == [("budget-exceeded", "error")] * 3
    assert "run 'r1' took scope 'acme' to 1200 tokens of 1000" in reports[0].message
    assert all("has spent 1200 tokens of 1000" in r.message for r in reports[1:])


def test_a_per_run_budget_reports_the_run_that_crosses_and_ends_no_other() -> None:
    reports: list[agui_meta.Report] = []
    budget: agui_meta.Budget[Any] = agui_meta.Budget(max_tokens=500, on_exceeded=reports.append)
    gateway = Gateway({"spending": spending}, budget=budget, linger=60)
    with serve(gateway, lifespan="on") as url:
        answers = [
            httpx.post(f"{url}/agents/spending/run", json=run_body(t, "r1", tokens=n), timeout=30)
            for t, n in (("a", 800), ("b", 100))
        ]
    assert [types(_events(a))[-1] for a in answers] == ["RUN_FINISHED"] * 2
    assert [r.message for r in reports] == [
        "budget exceeded: run 'r1' took scope '' to 800 tokens of 500 (per run)"
    ]


@pytest.mark.parametrize("bad", [object(), "budget"])
def test_the_budget_option_is_a_budget(bad: Any) -> None:
    with pytest.raises(agui_meta.UsageError, match="budget"):
        Gateway({}, budget=bad)
