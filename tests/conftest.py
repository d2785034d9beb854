"""Shared fixtures: async tests run on both anyio backends; the reference oracle."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.oracle import (
    OracleServer,
    OracleUnavailable,
    close_oracle_server,
    oracle_missing,
    oracle_server,
)


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def oracle() -> Iterator[OracleServer]:
    """The reference client, one persistent Node.js process for the session (tests/oracle.py).

    Skips when Node.js/npm are missing or the install fails, unless ``AGUI_META_REQUIRE_ORACLE``
    is set, in which case that is a failure.
    """
    try:
        server = oracle_server()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    yield server
    close_oracle_server()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say loudly, last, how many tests were skipped and why: a green run may have checked less."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: Counter[str] = Counter()
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    writer = terminalreporter
    writer.write_sep("!", f"{len(skipped)} tests SKIPPED: they did not check anything", red=True)
    for reason, count in reasons.most_common():
        writer.write_line(f"{count:>5} x {reason}", red=True)
    writer.write_line("With CI=1 a missing Node.js, redis-server or test extra fails instead.")
