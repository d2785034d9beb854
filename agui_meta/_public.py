"""How a public module shows its names: ``__module__`` set to the public path.

Everything is defined in private modules (``agui_meta/_*.py``) and re-exported by a public one
(``agui_meta``, ``agui_meta.events``, ``agui_meta.framing``, ``agui_meta.threads``,
``agui_meta.redis``); :func:`public_module` makes each re-exported class and function report
the public module as its ``__module__``, so that reprs, ``help()``, pickling and documentation
tools name the path users import from (the httpx way).

A class's string annotations (``from __future__ import annotations``) are looked up in the
module its ``__module__`` names, by :func:`typing.get_type_hints` and by msgspec's
introspection (``msgspec.structs.fields``, ``msgspec.inspect.type_info``,
``msgspec.json.schema``); the public module does not hold the names they use (``ClassVar``,
``Any``, private aliases). So each class's own annotations are resolved, in its defining
module, before its ``__module__`` changes: introspection then needs no module at all.
"""

from __future__ import annotations

import contextlib
import inspect
import typing
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["public_module"]


def public_module(
    name: str, namespace: Mapping[str, Any], exported: Iterable[str], *, foreign: Iterable[str] = ()
) -> None:
    """Set ``__module__`` of every exported object defined in ``agui_meta`` to ``name``.

    ``foreign`` names objects re-exported from elsewhere (msgspec's ``UNSET``), left as they are.
    """
    skip = set(foreign)
    ours = []
    for export in exported:
        value = namespace[export]
        module = getattr(value, "__module__", None)
        if export not in skip and isinstance(module, str) and module.startswith("agui_meta."):
            ours.append(value)
    # Resolve every class first: a class's bases may be exported by the same module.
    for value in ours:
        if isinstance(value, type):
            _resolve_annotations(value)
    for value in ours:
        with contextlib.suppress(AttributeError, TypeError):  # aliases may refuse it
            value.__module__ = name


def _resolve_annotations(cls: type) -> None:
    """Replace the string annotations of ``cls`` (its own, and its bases') by what they name."""
    for klass in cls.__mro__:
        own = inspect.get_annotations(klass)
        if not any(isinstance(value, str) for value in own.values()):
            continue
        # Evaluated where the class is defined (its __module__ is still that module's), with
        # Annotated kept: msgspec reads its constraints from it.
        try:
            hints = typing.get_type_hints(klass, include_extras=True)
        except NameError:  # a name for type checkers only: the public-API test says which
            continue
        klass.__annotations__ = {field: hints[field] for field in own}
