"""``agui-meta validate URL``: the agent is run once, its stream linted and its transport checked.

Real agents on 127.0.0.1 (uvicorn): the tests' scripted thread, one that drops its connection,
one that answers 500, one with a protobuf body, one that goes quiet for a second without a
keepalive, one that holds its whole body back and sends it at once. The silences are a second
long and the thresholds a fraction of that, so no finding depends on how fast the machine is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import agui_meta
from tests.helpers import cli
from tests.servers import agent_app, serve, thread_script

PAUSE = 1.0


def transport_app() -> Any:
    app = agent_app()
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def events(run: dict[str, Any], pause_at: int | None) -> AsyncIterator[Any]:
        for n, event in enumerate(thread_script(run)):
            if n == pause_at:
                await anyio.sleep(PAUSE)
            yield event

    async def quiet(request: Request) -> Response:
        run = json.loads(await request.body())
        return agui_meta.EventStreamResponse(events(run, 3), keepalive=None)

    async def kept_alive(request: Request) -> Response:
        run = json.loads(await request.body())
        return agui_meta.EventStreamResponse(events(run, 3), keepalive=0.05)

    async def buffered(request: Request) -> Response:
        run = json.loads(await request.body())
        await anyio.sleep(PAUSE)
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in thread_script(run))
        return Response(body, media_type="text/event-stream")

    app.router.routes += [
        Route("/quiet", quiet, methods=["POST"]),
        Route("/kept-alive", kept_alive, methods=["POST"]),
        Route("/buffered", buffered, methods=["POST"]),
    ]
    return app


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Any]]:
    app = transport_app()
    with serve(app) as url:
        yield url, app


def validate(url: str, *args: str) -> tuple[int, dict[str, Any]]:
    done = cli("validate", "--format", "json", *args, url)
    assert done.stderr == "", done.stderr
    report = json.loads(done.stdout)
    (entry,) = report["files"]
    return done.returncode, entry


def codes(entry: dict[str, Any]) -> list[str]:
    return [f["code"] for f in entry["findings"]]


def test_a_good_agent(server: tuple[str, Any], tmp_path: Path) -> None:
    url, app = server
    run_input = {
        "threadId": "th",
        "runId": "ru",
        "messages": [{"id": "u", "role": "user", "content": "hi"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    path = tmp_path / "input.json"
    path.write_text(json.dumps(run_input))
    before = len(app.state.agents["bodies"])
    status, entry = validate(url + "/thread", "--input", str(path), "-H", "X-Trace: 7")
    assert (status, entry["errors"], entry["warnings"]) == (0, 0, 0), entry
    assert entry["events"] == len(thread_script(run_input))
    assert [json.loads(b) for b in app.state.agents["bodies"][before:]] == [run_input]
    assert app.state.agents["headers"][before]["x-trace"] == "7"


def test_an_agent_that_drops_its_connection(server: tuple[str, Any]) -> None:
    status, entry = validate(server[0] + "/dropping")
    assert status == 1
    assert "http.dropped" in codes(entry) and "stream-ended-open" in codes(entry)


def test_an_error_status_and_a_wrong_content_type(server: tuple[str, Any]) -> None:
    status, entry = validate(server[0] + "/500")
    assert (status, codes(entry)) == (1, ["http.status"])
    assert "the agent is down for maintenance" in entry["findings"][0]["message"]
    status, entry = validate(server[0] + "/protobuf")
    assert status == 1 and codes(entry)[0] == "http.content-type"


def test_a_silence_without_keepalive(server: tuple[str, Any]) -> None:
    window = str(PAUSE / 4)
    status, entry = validate(server[0] + "/quiet", "--keepalive-window", window)
    assert (status, codes(entry)) == (0, ["http.no-keepalive"])
    status, entry = validate(server[0] + "/kept-alive", "--keepalive-window", str(PAUSE / 2))
    assert (status, codes(entry)) == (0, [])
    # As an error, with --rule.
    status, _ = validate(
        server[0] + "/quiet", "--keepalive-window", window, "--rule", "http.no-keepalive=error"
    )
    assert status == 1


def test_a_buffered_response(server: tuple[str, Any]) -> None:
    status, entry = validate(server[0] + "/buffered", "--buffered-after", str(PAUSE / 4))
    assert (status, codes(entry)) == (0, ["http.buffered"])
    # Streamed events, with a pause among them, are not buffered.
    status, entry = validate(server[0] + "/quiet", "--buffered-after", str(PAUSE / 4))
    assert (status, codes(entry)) == (0, [])


def test_what_cannot_be_run(tmp_path: Path) -> None:
    bad = tmp_path / "input.json"
    bad.write_text("[1]")
    done = cli("validate", "--input", str(bad), "http://127.0.0.1:9/")
    assert done.returncode == 2 and "must hold a JSON object" in done.stderr
    done = cli("validate", "-H", "no colon", "http://127.0.0.1:9/")
    assert done.returncode == 2
    assert "argument -H/--header: not a header 'NAME: VALUE': 'no colon' has no ':'" in done.stderr
    done = cli("validate", "http://127.0.0.1:9/agent")  # nothing listens on port 9
    assert done.returncode == 2 and "cannot reach http://127.0.0.1:9/agent" in done.stderr
