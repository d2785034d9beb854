"""The bundled streams exported to a real Phoenix (arize-phoenix, pinned in ``.ci/phoenix.txt``)
on 127.0.0.1: what it counts — tokens, model names, cost for the models it prices — and span
times that never go backwards.

Phoenix runs from a venv of its own: ``.phoenix/venv`` (``.ci/run`` installs it there), or the
``phoenix`` executable named by ``AGUI_PHOENIX``. Outside CI a missing Phoenix skips the test
(loudly, in the run's summary); in CI it fails. Expectations come from the streams' own usage.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import needs
from tests.example_streams import STREAMS, events
from tests.oracle import REPO_ROOT

TIMEOUT = 180.0
NAMES = ("travel.sse", "support.jsonl")


def _phoenix() -> Path:
    named = os.environ.get("AGUI_PHOENIX")
    path = Path(named) if named else REPO_ROOT / ".phoenix" / "venv" / "bin" / "phoenix"
    if not path.is_file():
        needs.missing(
            f"Phoenix is not installed at {path} (python3 -m venv .phoenix/venv && "
            ".phoenix/venv/bin/pip install -r .ci/phoenix.txt, or set AGUI_PHOENIX)"
        )
    return path


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    executable = _phoenix()
    port = _port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_port()),
        "PHOENIX_WORKING_DIR": str(tmp_path_factory.mktemp("phoenix")),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = tmp_path_factory.mktemp("phoenix-log") / "phoenix.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(executable), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert process.poll() is None, f"Phoenix stopped: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "Phoenix did not start"
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a Phoenix that will not stop
            process.kill()
            process.wait(timeout=30)


def _graphql(url: str, query: str) -> Any:
    answer = httpx.post(f"{url}/graphql", json={"query": query}, timeout=30)
    answer.raise_for_status()
    body = answer.json()
    assert "errors" not in body, body
    return body["data"]


PROJECT = """{ projects { edges { node { name traceCount tokenCountPrompt tokenCountCompletion
  costSummary { total { cost } } } } } }"""


def test_phoenix_counts_the_tokens_models_and_cost_of_the_bundled_streams(phoenix: str) -> None:
    for name in NAMES:
        done = subprocess.run(
            [sys.executable, "-m", "agui_meta", "replay", "--otlp", f"{phoenix}/v1/traces",
             "--otlp-signals", "traces", str(STREAMS / name)],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    wire = [e for name in NAMES for e in events(name)]
    runs = [e for e in wire if e["type"] == "RUN_STARTED"]
    usage = [u for e in wire if e["type"] == "RUN_FINISHED" for u in e.get("usage", [])]
    deadline = time.monotonic() + TIMEOUT
    while True:  # Phoenix stores what it receives a moment later
        (project,) = [p["node"] for p in _graphql(phoenix, PROJECT)["projects"]["edges"]]
        if project["traceCount"] == len(runs) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert project["traceCount"] == len(runs)
    # Tokens: from the model-call spans, each counted once.
    assert project["tokenCountPrompt"] == sum(u.get("inputTokens", 0) for u in usage) > 0
    assert project["tokenCountCompletion"] == sum(u.get("outputTokens", 0) for u in usage) > 0
    # A cost, for the models Phoenix prices (it prices the travel stream's OpenAI models).
    assert project["costSummary"]["total"]["cost"] > 0
    spans = httpx.get(
        f"{phoenix}/v1/projects/{project['name']}/spans", params={"limit": 1000}, timeout=30
    ).json()["data"]
    models = {s["attributes"]["llm.model_name"] for s in spans if s["name"].startswith("chat ")}
    assert models == {u["model"] for u in usage}
    # The run that used two models names both (a chat span each, under its run).
    by_id = {s["context"]["span_id"]: s for s in spans}
    two = [s for s in spans if s["name"].startswith("chat ") and
           by_id[s["parent_id"]]["attributes"].get("agui.run.id") == "run-a"]  # fmt: skip
    assert {s["attributes"]["llm.model_name"] for s in two} == {"claude-sonnet-4", "claude-haiku-4"}
    # No span ends before it starts (lookup_order, sent as chunks, included).
    assert spans
    for span in spans:
        start, end = (datetime.fromisoformat(span[k]) for k in ("start_time", "end_time"))
        assert end >= start, json.dumps(span)[:300]
    (lookup,) = [s for s in spans if s["name"] == "execute_tool lookup_order"]
    assert datetime.fromisoformat(lookup["start_time"]) < datetime.fromisoformat(lookup["end_time"])
