"""How a public module shows its names: ``__module__`` set to the public path.

Everything is defined in private modules (``agui_meta/_*.py``) and re-exported by a public one
(``agui_meta``, ``agui_meta.events``, ``agui_meta.framing``); :func:`public_module` makes each
re-exported class and function report the public module as its ``__module__``, so that reprs,
``help()``, pickling and documentation tools name the path users import from (the httpx way).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

__all__ = ["public_module"]


def public_module(
    name: str, namespace: Mapping[str, Any], exported: Iterable[str], *, foreign: Iterable[str] = ()
) -> None:
    """Set ``__module__`` of every exported object defined in ``agui_meta`` to ``name``.

    ``foreign`` names objects re-exported from elsewhere (msgspec's ``UNSET``), left as they are.
    """
    skip = set(foreign)
    structs = [
        value
        for export in exported
        if isinstance(value := namespace[export], type) and issubclass(value, msgspec.Struct)
    ]
    for struct in structs:
        # msgspec resolves a Struct's annotations in the module ``__module__`` names, once, and
        # caches the result on the class: resolve them while that is still the defining module.
        with contextlib.suppress(TypeError):  # not decodable (Update): nothing to resolve
            msgspec.json.Decoder(struct)
    for export in exported:
        if export in skip:
            continue
        value = namespace[export]
        module = getattr(value, "__module__", None)
        if isinstance(module, str) and module.startswith("agui_meta."):
            with contextlib.suppress(AttributeError, TypeError):  # aliases may refuse it
                value.__module__ = name
