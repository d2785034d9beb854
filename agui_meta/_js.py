"""JavaScript semantics the reference client's results depend on, on decoded JSON values.

The official client is JavaScript: where it tests a value for truth, compares with ``===`` or
concatenates strings, the outcome follows JavaScript's rules, and so must ours. The decoder's
compatibility boundary, the store, the accumulator and the conformance runner share these.

>>> js_truthy([]), js_truthy(0.0), js_same(1, 1.0), js_string([1, None, "a"])
(True, False, True, '1,,a')
"""

from __future__ import annotations

import math
from typing import Any

from msgspec import UNSET

__all__ = ["js_same", "js_string", "js_truthy"]


def js_truthy(value: Any) -> bool:
    """JavaScript truthiness of a decoded JSON value (``[]`` and ``{}`` are truthy there)."""
    if value is None or value is False:
        return False
    if isinstance(value, str):
        return value != ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not math.isnan(value) and value != 0  # NaN and 0 are falsy
    return True


def js_same(a: Any, b: Any) -> bool:
    """JavaScript ``===`` on decoded JSON values: by value for primitives, by identity otherwise."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for the values string concatenation meets in practice."""
    if isinstance(value, str):
        return value
    if value is UNSET:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    return "[object Object]"
