"""What a test needs from the machine, read one way.

Outside CI a missing part (Node.js for the reference, redis-server, an optional extra) skips
the tests that need it, and ``conftest.py`` says so loudly at the end of the run; in CI it fails
them. ``CI`` counts as set unless it is empty or one of ``0``, ``false``, ``no``, ``off`` (in any
case): ``CI=False`` and ``CI=0`` mean the same.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

_FALSE = frozenset({"", "0", "false", "no", "off"})


def flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to a true value."""
    return os.environ.get(name, "").strip().lower() not in _FALSE


def in_ci() -> bool:
    """Whether the tests run in CI, where nothing they need may be missing."""
    return flag("CI")


def missing(reason: str, *, required: bool | None = None) -> NoReturn:
    """A part the test needs is missing: fail in CI (or when ``required``), else skip."""
    if in_ci() if required is None else required:
        pytest.fail(f"required but unavailable: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def module(name: str, reason: str | None = None) -> ModuleType:
    """The module ``name`` (an optional extra the tests need), or :func:`missing` when it cannot
    be imported: ``pytest.importorskip`` that fails in CI. Usable at a test module's top."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(reason or f"{name} cannot be imported ({exc}): install the test extra")


def native_core() -> ModuleType:
    """The C core (``agui_meta._native``). Deliberately off (``AGUI_META_NO_EXTENSIONS``): the
    test is skipped, in CI too (the pure-Python path is then what runs); not built or not
    loadable: :func:`missing`. Usable at a test module's top."""
    from agui_meta import _speedups

    if _speedups.NATIVE is None:
        if _speedups.WHY_NOT == "AGUI_META_NO_EXTENSIONS is set":
            pytest.skip("the C core is off (AGUI_META_NO_EXTENSIONS)", allow_module_level=True)
        missing(f"the C core: {_speedups.WHY_NOT}")
    return _speedups.NATIVE
