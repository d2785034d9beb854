"""Shared fixtures: async tests run on both anyio backends; the reference oracle."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oracle import (
    OracleServer,
    OracleUnavailable,
    close_oracle_server,
    oracle_required,
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
        if oracle_required():
            pytest.fail(f"the reference oracle is required but unavailable: {exc}")
        pytest.skip(f"the reference oracle is unavailable: {exc}")
    yield server
    close_oracle_server()
