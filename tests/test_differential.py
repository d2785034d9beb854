"""Differential tests: generated streams through the reference client and through agui_meta.

Hypothesis draws event streams (``tests/strategies.py``); the reference runs them in one
persistent Node.js process (the ``oracle`` fixture) and ours runs them in-process through
``agui_meta._runners.run_case``; the results must be equal under the comparison rules of
``tests/oracle.py`` (JSON values; errors only as "both errored"; the two specification
overrides normalised away, though the strategies never produce them). Skipped, with the reason,
only where Node.js is not available.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, note, settings

from tests.oracle import OracleServer, assert_same_result
from tests.strategies import cases, misordered_cases

DIFFERENTIAL = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _compare(oracle: OracleServer, case: dict[str, Any], verify: bool) -> None:
    from agui_meta._runners import run_case

    note(f"verify={verify}")
    reference = oracle.run_one(case, verify)
    ours = run_case(case, verify=verify)
    assert_same_result(ours, reference, case)


@DIFFERENTIAL
@given(case=cases())
def test_valid_streams_match_the_reference(oracle: OracleServer, case: dict[str, Any]) -> None:
    _compare(oracle, case, verify=True)


@DIFFERENTIAL
@given(case=cases())
def test_valid_streams_match_the_reference_unverified(
    oracle: OracleServer, case: dict[str, Any]
) -> None:
    _compare(oracle, case, verify=False)


@DIFFERENTIAL
@given(case=misordered_cases())
def test_misordered_streams_match_the_reference_unverified(
    oracle: OracleServer, case: dict[str, Any]
) -> None:
    _compare(oracle, case, verify=False)
