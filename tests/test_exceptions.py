"""One error tree: every public exception derives from AguiMetaError, and the tree drawn in
``agui_meta/_exceptions.py``'s docstring is the tree of the classes."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

import agui_meta
import agui_meta.events
import agui_meta.framing
import agui_meta.gateway
import agui_meta.redis
import agui_meta.threads
from agui_meta import _exceptions

PUBLIC_MODULES = (
    agui_meta,
    agui_meta.events,
    agui_meta.framing,
    agui_meta.threads,
    agui_meta.redis,
    agui_meta.gateway,
)


def _public_exceptions() -> dict[str, type[BaseException]]:
    return {
        name: value
        for module in PUBLIC_MODULES
        for name in module.__all__
        if isinstance(value := getattr(module, name), type) and issubclass(value, BaseException)
    }


def _subclasses(cls: type) -> set[type]:
    """The package's subclasses of ``cls`` (not those a test or a user defines)."""
    found = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("agui_meta"):
            found |= {sub, *_subclasses(sub)}
    return found


def _drawn() -> dict[str, tuple[str | None, set[str]]]:
    """The docstring's tree: each class name -> (its drawn parent, its drawn builtin bases)."""
    doc = _exceptions.__doc__ or ""
    lines = doc[doc.index("    AguiMetaError\n") :].split("\n\n", 1)[0].splitlines()
    tree: dict[str, tuple[str | None, set[str]]] = {}
    stack: list[tuple[int, str]] = []  # (column of the name, name) of the open ancestors
    for line in lines:
        match = re.search(r"([A-Z]\w+)(?: \(([\w, ]+)\))?", line)
        assert match, line
        column, name = match.start(1), match.group(1)
        while stack and stack[-1][0] >= column:
            stack.pop()
        builtins = set(match.group(2).split(", ")) if match.group(2) else set()
        tree[name] = (stack[-1][1] if stack else None, builtins)
        stack.append((column, name))
    return tree


def test_every_public_exception_is_an_agui_meta_error() -> None:
    exceptions = _public_exceptions()
    assert len(exceptions) >= 18
    for name, cls in exceptions.items():
        if issubclass(cls, Warning):
            assert cls is agui_meta.AguiWarning  # the warnings' category, not an error
            continue
        assert issubclass(cls, agui_meta.AguiMetaError), name
        assert cls.__module__ in {m.__name__ for m in PUBLIC_MODULES}, name


def test_every_error_of_the_tree_is_public() -> None:
    public = set(_public_exceptions().values())
    assert _subclasses(agui_meta.AguiMetaError) <= public


def test_the_drawn_tree_is_the_class_tree() -> None:
    drawn = _drawn()
    classes = {agui_meta.AguiMetaError, *_subclasses(agui_meta.AguiMetaError)}
    assert set(drawn) == {cls.__name__ for cls in classes}
    for cls in classes:
        parent, builtins = drawn[cls.__name__]
        ours = [b for b in cls.__bases__ if issubclass(b, agui_meta.AguiMetaError)]
        others = {b.__name__ for b in cls.__bases__ if b not in ours}
        assert [b.__name__ for b in ours] == ([parent] if parent else []), cls
        assert others == (builtins or ({"Exception"} if parent is None else set())), cls


def test_the_tree_reader_sees_depth() -> None:
    drawn = _drawn()
    assert drawn["AguiMetaError"] == (None, set())
    assert drawn["DataError"] == ("AguiMetaError", {"ValueError"})
    assert drawn["FramingError"] == ("DecodeError", set())
    assert drawn["IncompleteStream"] == ("ResponseError", set())
    assert drawn["SequenceGap"] == ("AguiMetaError", set())


def test_the_concepts_page_draws_the_same_tree() -> None:
    page = (Path(__file__).parent.parent / "docs" / "concepts.md").read_text(encoding="utf-8")
    block = page[page.index("```\nAguiMetaError\n") :].split("\n```", 1)[0]
    drawn = {m.group(1) for m in re.finditer(r"^[│├└─ ]*([A-Z]\w+)", block, re.MULTILINE)}
    assert drawn == set(_drawn())


def test_no_name_clashes_with_httpx() -> None:
    httpx = pytest.importorskip("httpx")
    # A user who imports both must not confuse agui-meta's errors with httpx's.
    assert not {n for n in _public_exceptions() if hasattr(httpx, n)}


def test_the_moved_errors_keep_their_messages_and_fields() -> None:
    failed = agui_meta.RunFailed("no", "refusal", [agui_meta.Usage(input_tokens=1)])
    assert str(failed) == "the run failed [refusal]: no"
    assert failed.usage == [agui_meta.Usage(input_tokens=1)]
    status = agui_meta.HttpStatusError(503, b"busy", "http://x/")
    assert (str(status), status.status) == ("HTTP 503 from http://x/: busy", 503)
    conflict = agui_meta.threads.VersionConflict("t", 1, 2)
    assert (conflict.expected, conflict.actual) == (1, 2)
    assert "version 1" in str(conflict)


PACKAGE = Path(agui_meta.__file__).parent
# Builtin errors that are not a user's to catch as agui-meta's, each with why.
BUILTIN_RAISES_ALLOWED = {
    "_events.py": "msgspec validation hooks must raise ValueError (it becomes a DecodeError)",
    "_patch.py": "JavaScript's TypeErrors, inside the patcher, caught and reported",
    "_schema.py": "a self-check of the wire model at import time",
}
# Files whose raises are still to be moved into the tree (none: keep it so).
BUILTIN_RAISES_PENDING: tuple[str, ...] = ()


def test_the_package_raises_no_bare_value_type_or_runtime_error() -> None:
    # What the package raises on purpose is in the tree: a bad argument is a UsageError, bad
    # data a DataError. (Python's protocols keep their own: KeyError from a mapping,
    # AttributeError from __getattr__, ImportError for a missing extra.)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name in BUILTIN_RAISES_ALLOWED or name.startswith(BUILTIN_RAISES_PENDING):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in {
                    "ValueError",
                    "TypeError",
                    "RuntimeError",
                }:
                    found.append(f"{name}:{node.lineno} raises {exc.id}")
    assert found == []


def _bad_arguments() -> list[tuple[str, Any]]:
    """Calls with a bad argument, each named by the option it gets wrong."""
    import redis.asyncio

    from agui_meta.gateway import (
        AsgiAgent,
        Gateway,
        MemoryCatalog,
        MemoryRunLog,
        MemoryRuns,
        UpstreamAgent,
    )
    from agui_meta.redis import Keys, RedisReplay
    from agui_meta.threads import MemoryThreadStore

    def runs(**options: Any) -> Any:
        return MemoryRuns(MemoryThreadStore(), MemoryCatalog(), **options)

    client = redis.asyncio.Redis()  # never connected: the arguments are checked first
    return [
        ("max_events", lambda: agui_meta.ReplayBuffer(max_events=0)),
        ("linger", lambda: agui_meta.ReplayBuffer(linger=-1)),
        ("format", lambda: agui_meta.EventStreamResponse([], format="xml")),  # type: ignore[arg-type]
        ("buffer", lambda: agui_meta.EventStreamResponse([], buffer=0)),
        ("send_messages", lambda: agui_meta.HttpAgent("http://x/", send_messages="x")),  # type: ignore[arg-type]
        ("capacity", lambda: MemoryRunLog("k", 0)),
        ("max_runs", lambda: runs(max_runs=0)),
        ("keep", lambda: runs(keep=-1.0)),
        ("max_kept", lambda: runs(max_kept=-1)),
        ("on_busy", lambda: Gateway({}, on_busy="x")),  # type: ignore[arg-type]
        ("delete method", lambda: Gateway({}, threads=object())),  # type: ignore[arg-type]
        ("an agent is", lambda: Gateway({"a": 3})),
        ("path", lambda: AsgiAgent(lambda scope, receive, send: None, path="run")),
        ("http://", lambda: UpstreamAgent("ftp://x/")),
        ("namespace", lambda: Keys("a b")),
        ("maxlen", lambda: RedisReplay(client, maxlen=0)),
        ("ttl", lambda: RedisReplay(client, ttl=0)),
        ("linger", lambda: RedisReplay(client, linger=-1)),
    ]


def test_a_bad_argument_is_a_usage_error_naming_it() -> None:
    for option, call in _bad_arguments():
        with pytest.raises(agui_meta.UsageError, match=option):
            call()


@pytest.mark.anyio
async def test_misuse_of_a_run_log_or_the_runs_is_a_usage_error() -> None:
    from agui_meta.gateway import Gateway, MemoryCatalog, MemoryRunLog, MemoryRuns
    from agui_meta.threads import MemoryThreadStore

    log = MemoryRunLog("k", 4)
    await log.append([b"a"])
    with pytest.raises(agui_meta.UsageError, match="no event 2"):
        log.reader(2)
    await log.end()
    with pytest.raises(agui_meta.UsageError, match="append after end"):
        await log.append([b"b"])
    runs = MemoryRuns(MemoryThreadStore(), MemoryCatalog())
    async with runs.running():
        with pytest.raises(agui_meta.UsageError, match="running already"):
            async with runs.running():
                pass
    gateway = Gateway({})
    async with gateway.running():
        with pytest.raises(agui_meta.UsageError, match="already running"):
            async with gateway.running():
                pass
