"""The public surface: one curated ``__all__``, complete, sorted, and every name importable."""

from __future__ import annotations

import types

import agui_meta


def test_all_lists_every_public_name_once_and_sorted() -> None:
    public = {
        name
        for name, value in vars(agui_meta).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    } | set(agui_meta._LAZY)  # imported on first use (an optional dependency)
    assert set(agui_meta.__all__) == public
    assert len(agui_meta.__all__) == len(set(agui_meta.__all__))
    constants = [n for n in agui_meta.__all__ if n.isupper()]
    rest = [n for n in agui_meta.__all__ if not n.isupper()]
    assert constants == sorted(constants)
    assert rest == sorted(rest)  # ruff's isort-style order: constants, classes, functions


def test_every_name_resolves() -> None:
    for name in agui_meta.__all__:
        assert getattr(agui_meta, name) is not None, name


def test_the_package_is_typed() -> None:
    from importlib.resources import files

    assert files("agui_meta").joinpath("py.typed").is_file()
