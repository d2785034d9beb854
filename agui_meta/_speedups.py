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
from types import ModuleType

__all__ = ["NATIVE", "WHY_NOT", "describe"]

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


def describe() -> str:
    """One line: whether the native core is in use, and if not, why."""
    if NATIVE is not None:
        return "native core: in use (C extension agui_meta._native)"
    return f"native core: not in use ({WHY_NOT}); the pure-Python implementation runs"
