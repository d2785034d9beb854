"""Whether the optional C core (``agui_meta._native``) is used: decided once, at import.

The pure-Python implementation is complete and is the specification; the C core only does
faster a part of what it does (see docs/performance.md). It is not used when
``AGUI_META_NO_EXTENSIONS`` is set to a true value, on an interpreter other than CPython, on a
free-threaded CPython, or when it was not built (a source install without a C compiler).
``agui-meta --version`` says which.
"""

from __future__ import annotations

import importlib
import os
import platform
import sysconfig
from collections import OrderedDict
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

__all__ = ["NATIVE", "WHY_NOT", "describe", "new_list", "new_ordered"]

_FALSE = frozenset({"", "0", "false", "no", "off"})


def _load() -> tuple[ModuleType | None, str | None]:
    if os.environ.get("AGUI_META_NO_EXTENSIONS", "").strip().lower() not in _FALSE:
        return None, "AGUI_META_NO_EXTENSIONS is set"
    if platform.python_implementation() != "CPython":
        return None, f"{platform.python_implementation()} runs the pure-Python implementation"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None, "a free-threaded CPython runs the pure-Python implementation"
    try:
        native = importlib.import_module(f"{__package__}._native")  # a C extension module
    except ImportError:
        return None, "the C extension is not built (installed without a C compiler?)"
    return native, None


#: The C core's module, or ``None`` when the pure-Python implementation runs alone.
NATIVE: ModuleType | None
#: Why the C core is not used (``None`` when it is).
WHY_NOT: str | None
NATIVE, WHY_NOT = _load()


def _new_list() -> list[Any]:
    return []


# What the cyclic collector need not walk. With the C core, the containers below start
# untracked: a process that keeps many ledgers, or runs many pipelines at once, has that many
# fewer objects for each full collection to walk (docs/performance.md). Without it, plain ones.

#: An empty list for what cannot be part of a reference cycle (a ledger record's list: a record
#: holds JSON values and other records, never itself, its ledger or one of its lists; the
#: framing's lists of bytes). A list is never tracked again, so only such things may go in it.
new_list: Final[Callable[[], list[Any]]] = _new_list if NATIVE is None else NATIVE.new_list
#: An empty ``OrderedDict`` for a table of ids, oldest first (the verifier's, the tallies'):
#: untracked while it holds only strings, ``None`` and ``UNSET``; CPython's dict tracks it
#: again as soon as it gets a value that may be in a cycle.
new_ordered: Final[Callable[[], OrderedDict[Any, Any]]] = (
    OrderedDict if NATIVE is None else NATIVE.new_ordered
)


def describe() -> str:
    """One line: whether the native core is in use, and if not, why."""
    if NATIVE is not None:
        return "native core: in use (C extension agui_meta._native)"
    return f"native core: not in use ({WHY_NOT}); the pure-Python implementation runs"
