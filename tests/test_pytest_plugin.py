"""The pytest plugin: the ``agui_validate`` fixture, loaded through its ``pytest11`` entry point.

The tests run pytest on a generated test module (pytester), in a subprocess whose only way to
the plugin is the entry point pyproject declares: no ``-p``, no import, no conftest. The agents
are real: a Starlette app called in-process, and the same app served by uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

import agui_meta
from tests import needs
from tests.oracle import REPO_ROOT
from tests.servers import serve

pytest_plugins = ["pytester"]

ENTRY_POINT = "agui_meta._pytest_plugin"

RUN = {"threadId": "t", "runId": "r"}
GOOD = [
    {"type": "RUN_STARTED", **RUN},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "RUN_FINISHED", **RUN},
]
BAD = [*GOOD[:3], {"type": "TEXT_MESSAGE_END", "messageId": "nope"}, *GOOD[3:]]
UNTIDY = [
    *GOOD[:4],
    {"type": "CUSTOM", "name": "update", "value": 1},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    *GOOD[4:],
]


def untidy_app() -> Any:
    """An agent at ``/agent`` whose stream is valid but untidy (a warning, an information)."""
    needs.module("starlette")
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def agent(request: Request) -> Response:
        run = json.loads(await request.body())
        assert run["messages"][0]["content"] == "Hello"  # the default run input
        return agui_meta.EventStreamResponse(iter(UNTIDY), keepalive=None)

    return Starlette(routes=[Route("/agent", agent, methods=["POST"])])


#: The generated test module, and what each of its tests expects.
TESTS = """
import json, os
import pytest
import agui_meta
from tests.test_pytest_plugin import BAD, GOOD, untidy_app

APP = untidy_app()

def sse(events):
    return b"".join(b"data: " + json.dumps(e).encode() + b"\\n\\n" for e in events)

@pytest.fixture
def anyio_backend():
    return "asyncio"

def test_good_bytes_pass(agui_validate):
    assert agui_validate(sse(GOOD)).codes == []

def test_bad_bytes_fail(agui_validate):
    agui_validate(sse(BAD))

def test_a_rule_turned_off(agui_validate):
    found = agui_validate(sse(BAD), rules={"text.not-open": "off"})
    assert found.codes == [] and found.events == 6

def test_an_asgi_app_with_warnings_passes_unless_strict(agui_validate):
    found = agui_validate(APP, path="/agent")
    assert found.codes == ["custom.name-not-namespaced", "message.id-reused"]
    agui_validate(APP, path="/agent", strict=True)

def test_a_url(agui_validate):
    agui_validate(os.environ["AGENT_URL"] + "/agent", strict=True)

@pytest.mark.anyio
async def test_in_an_async_test(agui_validate):
    found = await agui_validate.check(GOOD)
    assert found.events == 5
    with pytest.raises(agui_meta.UsageError, match="await agui_validate.check"):
        agui_validate(GOOD)
    await agui_validate.check(BAD)
"""


def test_the_entry_point_is_declared() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    declared = f'[project.entry-points.pytest11]\nagui_meta = "{ENTRY_POINT}"\n'
    assert declared in pyproject


def _entry_point_dir(tmp_path: Path) -> Path | None:
    """A distribution declaring the plugin's entry point, unless agui-meta's install has it.

    The shared development install was made before the entry point existed; this stands in
    for a fresh install, with pyproject's own declaration."""
    installed = importlib.metadata.entry_points(group="pytest11")
    if any(ep.value == ENTRY_POINT for ep in installed):
        return None
    site = tmp_path / "site"
    info = site / "agui_meta_plugin_under_test-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: agui-meta-plugin-under-test\nVersion: 0\n"
    )
    (info / "entry_points.txt").write_text(f"[pytest11]\nagui_meta = {ENTRY_POINT}\n")
    return site


def test_the_fixture_through_the_entry_point(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _entry_point_dir(tmp_path)
    path = [str(REPO_ROOT), *([str(site)] if site else [])]
    monkeypatch.setenv("PYTHONPATH", ":".join(path))
    pytester.makepyfile(test_agents=TESTS)
    with serve(untidy_app()) as url:
        monkeypatch.setenv("AGENT_URL", url)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("failed")) == (2, 4), result.stdout.str()
    text = result.stdout.str()
    # The failures name the test, the findings (code, event, line, byte) and the verdict.
    result.stdout.fnmatch_lines(
        [
            "*test_bad_bytes_fail*",
            "*recorded bytes: 6 events, 1 errors, 0 warnings, 0 information: the stream has errors",
            "*error: [[]text.not-open[]] *'nope'*(event 3, line 7, byte *)",
        ]
    )
    assert (
        "ASGI app at /agent: 8 events, 0 errors, 1 warnings, 1 information: the stream has "
        "errors or warnings (strict)"
    ) in text
    assert f"{url}/agent: 8 events, 0 errors, 1 warnings" in text
    assert "warning: [message.id-reused]" in text
    assert "FAILED test_agents.py::test_in_an_async_test" in text
    assert "events: 6 events, 1 errors" in text


def test_what_validate_stream_refuses_and_what_an_agent_answers_badly() -> None:
    import anyio

    from agui_meta._validate import validate_stream
    from tests.servers import agent_app

    for source, says in (
        ("recording.sse", "must be an http"),
        (42, "not int"),
        ({"type": "RUN_STARTED"}, "not dict"),
    ):
        with pytest.raises(agui_meta.UsageError, match=says):
            anyio.run(validate_stream, source)
    with pytest.raises(agui_meta.UsageError, match="rules"):
        anyio.run(lambda: validate_stream(b"", rules={"x": "fatal"}))

    async def bad() -> tuple[list[str], list[str]]:
        app = agent_app()
        down = await validate_stream(app, path="/500")
        proto = await validate_stream(app, path="/protobuf")
        return down.codes, proto.codes

    down, proto = anyio.run(bad)
    assert down == ["http.status"]
    assert proto[0] == "http.content-type"
