"""``agui-meta serve FILE``: a recording served as an agent, to the project's and the official
client, resumable with ``Last-Event-ID``.

The server is the real command (a subprocess listening on 127.0.0.1); what the clients build
from it is compared with what the recording gives read directly, and the official client's
result comes from the oracle (``http_agent.cjs``).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import agui_meta
from agui_meta.cli.serve import pause
from tests import needs
from tests.example_streams import STREAMS
from tests.oracle import REPO_ROOT
from tests.servers import official_http_agent

TIMEOUT = 30


def start(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    """``agui-meta serve ARGS --port 0``: the process and the URL it printed."""
    needs.module("uvicorn")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_meta", "serve", "--port", "0", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        ready = selector.select(TIMEOUT)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("http://"):
        stop(proc)
        pytest.fail(f"serve did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
    return proc, line.strip()


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(TIMEOUT)
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[str]:
    proc, url = start(*request.param)
    try:
        yield url
    finally:
        assert stop(proc) in (0, 130)


async def recorded(path: Path) -> list[dict[str, Any]]:
    """The conversation the recording gives, read directly."""
    stages = agui_meta.DefaultStages()
    async with agui_meta.wrap(path, *stages) as stream:
        await stream.drain()
    return stages.store.messages_wire()


def events_of(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """``(id, event)`` of each SSE event of a body."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        fields = dict(line.split(": ", 1) for line in block.decode().splitlines() if ": " in line)
        if "data" in fields:
            out.append((fields.get("id"), json.loads(fields["data"])))
    return out


@pytest.mark.parametrize(
    ("served", "name"),
    [
        (["examples/streams/travel.sse"], "travel.sse"),
        (["examples/streams/support.jsonl"], "support.jsonl"),
    ],
    indirect=["served"],
)
def test_both_clients_get_the_recorded_conversation(served: str, name: str, tmp_path: Path) -> None:
    expected = anyio.run(recorded, STREAMS / name)
    assert expected  # the recording has a conversation

    async def ours() -> list[dict[str, Any]]:
        agent = agui_meta.HttpAgent(served + "agent")
        async with agent.run() as run:
            async for _ in run:
                pass
        return agent.messages_wire()

    assert anyio.run(ours) == expected
    official = official_http_agent(served + "agent", {"runs": [{}]}, tmp_path)
    assert len(official) == 1 and "error" not in official[0], official
    assert official[0]["messages"] == expected


@pytest.mark.parametrize(
    "served", [["examples/streams/travel.sse", "--linger", "20"]], indirect=True
)
def test_a_dropped_stream_resumes_after_its_last_event_id(served: str) -> None:
    httpx = needs.module("httpx")
    full = events_of(httpx.post(served, json={}, timeout=TIMEOUT).content)
    assert len(full) == 94 and all(i is not None for i, _ in full)
    with httpx.Client(timeout=TIMEOUT) as client:
        head: list[tuple[str | None, dict[str, Any]]] = []
        with client.stream("POST", served, json={}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            buffer = b""
            for chunk in response.iter_bytes():
                buffer += chunk
                head = events_of(buffer[: buffer.rfind(b"\n\n") + 2])
                if len(head) >= 10:
                    break
        head = head[:10]
        last = head[-1][0]
        assert last is not None
        rest = client.post(served, json={}, headers={"Last-Event-ID": last})
        assert rest.headers["agui-meta-resumed"] == last
        tail = events_of(rest.content)
    assert [e for _, e in head + tail] == [e for _, e in full]
    # An id the buffer never held: 410 Gone, with the reason.
    gone = httpx.post(served, json={}, headers={"Last-Event-ID": "nope:3"}, timeout=TIMEOUT)
    assert gone.status_code == 410


@pytest.mark.parametrize(
    "served", [["examples/streams/support.jsonl", "--pace", "1000000"]], indirect=True
)
def test_paced_and_json_lines(served: str) -> None:
    httpx = needs.module("httpx")
    done = httpx.post(served, json={}, headers={"Accept": "application/jsonl"}, timeout=TIMEOUT)
    assert done.headers["content-type"] == "application/jsonl"
    lines = [json.loads(line) for line in done.content.splitlines() if line.strip()]
    source = [json.loads(line) for line in (STREAMS / "support.jsonl").read_bytes().splitlines()]
    assert [e["type"] for e in lines] == [e["type"] for e in source]
    assert [e.get("timestamp") for e in lines] == [e.get("timestamp") for e in source]


def test_pause_follows_the_timestamps() -> None:
    assert pause(1000, 1500, 1.0, 5.0) == 0.5
    assert pause(1000, 1500, 2.0, 5.0) == 0.25
    assert pause(1000, 900, 1.0, 5.0) == 0.0  # a clock that went back: no pause
    assert pause(0, 60_000, 1.0, 5.0) == 5.0  # at most --max-pause


def test_what_cannot_be_served(tmp_path: Path) -> None:
    needs.module("uvicorn")
    empty = tmp_path / "empty.sse"
    empty.write_bytes(b": nothing\n\n")
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"type":"NOPE"\n')
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for args, says in (
        ([str(tmp_path / "missing.sse")], "cannot read"),
        ([str(empty)], "holds no event"),
        ([str(broken)], "holds no event"),
        (["--pace", "0", str(empty)], "not a positive, finite number"),
        (["--host", "192.0.2.1", str(STREAMS / "support.jsonl")], "cannot listen on"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "agui_meta", "serve", "--port", "0", *args],
            cwd=REPO_ROOT,
            capture_output=True,
            timeout=TIMEOUT,
            env=env,
            check=False,
        )
        assert done.returncode == 2 and says in done.stderr.decode(), (args, done.stderr)
        assert done.stdout == b""
