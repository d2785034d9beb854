"""README.md and docs/*.md stay true: every Python block runs as written, every command exists.

The conventions a block follows (whole programs, ``AGUI_AGENT_URL`` and ``REDIS_URL`` from the
environment, ``examples/`` in the working directory) are in docs/index.md, "Conventions for the
examples in these pages". Tests that check what a block prints against a server of their own
find it with :func:`tests.doc_blocks.doc_block` (test_readme.py, test_client.py, …).
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib
import io
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import anyio
import pytest

from agui_meta.cli import build_parser
from tests.doc_blocks import DOC_FILES, ROOT, Block, doc_block, python_blocks, shell_lines
from tests.redis_server import RedisServer
from tests.servers import agent_app, serve

BLOCKS = python_blocks()


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    """A scripted agent on 127.0.0.1: a frontend tool call, then the answer (tests/servers.py)."""
    with serve(agent_app()) as url:
        yield url + "/thread"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    srv = RedisServer(tmp_path_factory.mktemp("redis"), fsync="everysec")
    srv.start()
    yield srv.url
    srv.stop()


def test_the_docs_have_python_blocks_in_every_page_that_shows_code() -> None:
    paths = {block.path for block in BLOCKS}
    assert {"README.md", "docs/concepts.md", "docs/http.md", "docs/serving.md"} <= paths
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_every_python_block_runs_as_written(
    block: Block,
    agent_url: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGUI_AGENT_URL", agent_url)
    if "REDIS_URL" in block.code:
        pytest.importorskip("redis.asyncio")
        monkeypatch.setenv("REDIS_URL", request.getfixturevalue("redis_url"))
    # Blank lines first, so that a traceback gives the line in the Markdown file.
    code = compile("\n" * (block.line - 1) + block.code, block.path, "exec")
    with redirect_stdout(io.StringIO()):
        exec(code, {"__name__": "__main__"})  # noqa: S102 - running the docs is the point


# ---------------------------------------------------------------------------------------------
# Commands


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _commands_shown() -> list[tuple[str, str]]:
    """(where, one command) for every command line and inline `agui-meta …` of the docs."""
    lines = shell_lines()
    for path in DOC_FILES:
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            spans = re.findall(r"`(agui-meta [^`]+|(?:\S*/)?python3? [^`]+)`", line)
            lines += [(f"{rel}:{n}", span) for span in spans]
    found = []
    for where, line in lines:
        line = line.replace("\\|", "|")  # a pipe escaped in a table cell
        for part in re.split(r" \| | && | ; |; | & ", line):
            found.append((where, part.strip()))
    return found


COMMANDS = _commands_shown()


def test_every_agui_meta_command_and_option_shown_exists() -> None:
    parsers = subcommands()
    checked = 0
    for where, command in COMMANDS:
        words = command.split()
        if not words or not words[0].endswith("agui-meta"):
            continue
        name = words[1]
        if name.startswith("-"):
            assert name in ("--version", "--help", "-h"), f"{where}: {command}"
            continue
        if name.isupper():  # a placeholder: agui-meta COMMAND --help
            continue
        assert name in parsers, f"{where}: no command {name!r} in {command!r}"
        options = set(parsers[name]._option_string_actions)
        for word in words[2:]:
            if word.startswith("#"):
                break
            option = word.strip("[]").split("=", 1)[0]
            if option.startswith("-") and option != "-":
                assert option in options, f"{where}: {name} has no option {option!r}"
        checked += 1
    assert checked >= 20


def test_every_python_command_shown_names_a_file_or_module_that_exists() -> None:
    checked = 0
    options: dict[tuple[str, ...], set[str]] = {}
    for where, command in COMMANDS:
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            continue  # prose, not a command
        if len(words) < 2 or not re.fullmatch(r"(\S*/)?python3?", words[0]):
            continue
        if words[1] == "-m":
            assert find_spec(words[2]) is not None, f"{where}: no module {words[2]}"
            target: tuple[str, ...] = ("-m", words[2])
        elif words[1].endswith(".py"):
            if Path(words[1]).stem.isupper():  # a placeholder: examples/NAME.py
                continue
            assert (ROOT / words[1]).is_file(), f"{where}: no file {words[1]}"
            target = (words[1],)
        else:
            continue
        shown = {w.strip("[]").split("=", 1)[0] for w in words if w.startswith(("--", "[--"))}
        if shown and target[-1] not in ("pytest", "venv", "agui_meta"):
            if target not in options:
                done = subprocess.run(
                    [sys.executable, *target, "--help"],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=True,
                )
                options[target] = set(re.findall(r"--[\w-]+", done.stdout))
            assert shown <= options[target], f"{where}: {command}: no {shown - options[target]}"
        checked += 1
    assert checked >= 10
    assert len(options) >= 3  # the benchmarks' and examples' options were checked


def test_the_example_server_one_liner_waits_for_the_server_and_ends(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed: the one-liner waits for the server with it")
    [line] = [c for _, c in shell_lines() if c.startswith("python examples/server.py")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    bindir = Path(sys.executable).parent  # `python` is this interpreter, as in a venv
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    shell = subprocess.Popen(
        ["bash", "-c", line.replace("8000", port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: nothing outlives the test
    )
    try:
        out, err = shell.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
    assert shell.returncode == 0, err
    assert "[assistant] Sunny and 24 °C in Lisbon." in out


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_relative_link_of_the_docs_reaches_a_file_and_heading() -> None:
    checked = 0
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # https://…
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            assert linked.exists(), f"{path.name}: {target} does not exist"
            if anchor:
                headings = re.findall(
                    r"^#+ (.*)$", linked.read_text(encoding="utf-8"), re.MULTILINE
                )
                assert anchor in {slug(h) for h in headings}, f"{path.name}: no heading {target}"
            checked += 1
    assert checked >= 30


def test_the_readme_chat_answers_a_frontend_tool_of_pydantic_ai(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The README's HttpAgent example against a real producer: pydantic-ai's AG-UI app, whose
    # model calls a backend tool, then the frontend tool the example declares.
    from tests.test_producers import pydantic_ai_app

    namespace: dict[str, Any] = {}
    exec(compile(doc_block("async def chat(").code, "README.md", "exec"), namespace)  # noqa: S102 - running the README is the point
    with serve(pydantic_ai_app()) as url:
        anyio.run(namespace["chat"], url + "/agent")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "['assistant', 'tool', 'assistant'] ['fc-1']"
    assert lines[-1] == "Shown on screen: shown {}"


def _resolves(name: str) -> bool:
    parts = name.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=2):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            return False
    return True


def test_every_agui_meta_name_the_docs_mention_exists() -> None:
    # A dotted name is a public module, class, function or attribute; or else a name the
    # package writes as a string (a logger, a metric), e.g. agui_meta.server.
    sources = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "agui_meta").rglob("*.py"))
    checked = 0
    for path in DOC_FILES:
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for name in re.findall(r"\bagui_meta(?:\.[A-Za-z_]\w*)+", line):
                assert _resolves(name) or f'"{name}"' in sources, f"{rel}:{n}: no {name}"
                checked += 1
    assert checked >= 50


def test_every_error_class_the_docs_name_is_one_of_the_package_or_python() -> None:
    import agui_meta.gateway
    import agui_meta.redis
    import agui_meta.threads

    public = (agui_meta, agui_meta.threads, agui_meta.redis, agui_meta.gateway)
    known = {name for module in public for name in module.__all__} | set(dir(builtins))
    named = r"`([A-Z]\w*(?:Error|Conflict|Gap|Lost|Full|Failed|Stream|Consumed|Closed|Large))`"
    checked = 0
    for path in DOC_FILES:
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for name in re.findall(named, line):
                # httpx's TransportError is named once, to say agui-meta's error is not it.
                if name == "TransportError" and "httpx's `TransportError`" in line:
                    continue
                assert name in known, f"{rel}:{n}: no error class {name}"
                checked += 1
    assert checked >= 30


def test_every_file_of_the_repository_the_docs_name_exists() -> None:
    # A path under agui_meta/, tests/, examples/ or benchmarks/, and a module file named alone
    # (`_driver.py`, `cli/replay.py`), exists; NAME.py-like placeholders are left alone.
    modules = {
        p.relative_to(ROOT / "agui_meta").as_posix() for p in (ROOT / "agui_meta").rglob("*")
    }
    checked = 0
    for path in DOC_FILES:
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for span in re.findall(r"`([^`]+)`", line):
                for name in re.findall(
                    r"(?<![\w./-])[\w./-]*\w\.(?:py|cjs|jsonl|sse)\b|\w+/", span
                ):
                    if re.search(r"\b[A-Z_]+\.\w+$", name) or name.startswith(("../", "./")):
                        continue  # a placeholder (CASES.jsonl), or outside the repository
                    top = name.split("/", 1)[0]
                    if top in ("agui_meta", "tests", "examples", "benchmarks"):
                        assert (ROOT / name).exists(), f"{rel}:{n}: no {name}"
                    elif name.endswith(".py") and (name.startswith("_") or "/" in name):
                        found = any(m == name or m.endswith("/" + name) for m in modules)
                        assert found, f"{rel}:{n}: no {name} in agui_meta/"
                    else:
                        continue
                    checked += 1
    assert checked >= 50
