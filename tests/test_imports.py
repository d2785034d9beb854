"""The package's modules import each other without a circle (function-level imports included).

Every ``import`` and ``from … import`` in every module of ``agui_meta``, wherever it stands (in
a function, under ``if TYPE_CHECKING``), is an edge from that module to the module it names;
the graph must have no cycle. A contract (``_stage``) must not import what implements it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agui_meta"


def _module_name(path: Path) -> str:
    parts = ["agui_meta", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """The package's modules ``path`` imports, anywhere in its code."""
    found: set[str] = set()
    # The package a relative import starts from: the module's own (its __init__'s, for one).
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, up level - 1
                package = ".".join(here[: len(here) - node.level + 1])
                base = package if not node.module else f"{package}.{node.module}"
            else:
                base = node.module or ""
            # ``from . import x`` / ``from agui_meta import _x`` name modules too.
            # ``from . import x`` needs only the package object, which a module inside it has.
            own = node.level and not node.module
            names = ([] if own else [base]) + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in known)
    return found


def _graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, known) - {_module_name(p)} for p in paths}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_is_read() -> None:
    graph = _graph()
    assert "agui_meta._driver" in graph["agui_meta._pipeline"]
    assert "agui_meta._stage" in graph["agui_meta._driver"]
    assert len(graph) > 20


def test_no_module_imports_itself_back() -> None:
    graph = _graph()
    # Only the package's __init__ may import (nearly) everything; nothing imports it back.
    importers = [m for m, deps in graph.items() if "agui_meta" in deps]
    assert not importers, f"{importers} import agui_meta"
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_the_stage_contract_imports_no_stage_and_no_driver() -> None:
    graph = _graph()
    sources = {_module_name(p): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}
    implementers = {"agui_meta._driver", "agui_meta._pipeline"} | {
        module for module, text in sources.items() if "(Transducer[" in text
    }
    assert "agui_meta._verify" in implementers
    assert not graph["agui_meta._stage"] & implementers


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": set(), "c": {"c"}}, ["c", "c"]),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, None),
    ],
)
def test_the_cycle_finder(graph: dict[str, set[str]], cycle: list[str] | None) -> None:
    assert _cycle(graph) == cycle


# The modules whose private names others still import: the framing engineer is splitting
# _framing.py and rewriting _driver.py, which will give them package-level names. Remove each
# from here once it has none.
PRIVATE_NAMES_PENDING: set[str] = set()


def _private_name_imports() -> list[str]:
    """``from <module> import _name`` of a private *name* (not a private module) from another
    module of the package: a name that another module needs is package-level, without ``_``."""
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {_module_name(p) for p in paths}
    found = []
    for path in paths:
        here = _module_name(path).split(".")
        if path.name != "__init__.py":
            here = here[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                package = ".".join(here[: len(here) - node.level + 1])
                base = package if not node.module else f"{package}.{node.module}"
            else:
                base = node.module or ""
            if base not in known or base in PRIVATE_NAMES_PENDING:
                continue
            for alias in node.names:
                name = alias.name
                private = name.startswith("_") and not name.startswith("__")
                # ``from . import _module`` imports a module, not a name.
                if private and f"{base}.{name}" not in known:
                    found.append(f"{_module_name(path)}:{node.lineno} imports {base}.{name}")
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    assert _private_name_imports() == []


def test_the_private_name_scan_finds_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scan itself, on a package of two modules where one imports the other's private name.
    package = tmp_path / "agui_meta"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_a.py").write_text("def _helper() -> None: ...\n")
    (package / "_b.py").write_text("from ._a import _helper\nfrom . import _a\n")
    monkeypatch.setitem(globals(), "PACKAGE", package)
    assert _private_name_imports() == ["agui_meta._b:1 imports agui_meta._a._helper"]
