"""The bundled streams exported to a real Phoenix (arize-phoenix, pinned in ``.ci/phoenix.txt``)
on 127.0.0.1: what it counts — tokens, model names, cost for the models it prices — and span
times that never go backwards.

Phoenix runs from a venv of its own: ``.phoenix/venv`` (``.ci/run`` installs it there), or the
``phoenix`` executable named by ``AGUI_PHOENIX``. Outside CI a missing Phoenix skips the test
(loudly, in the run's summary); in CI it fails. Expectations come from the streams' own usage
and content.
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
        projects = [p["node"] for p in _graphql(phoenix, PROJECT)["projects"]["edges"]]
        (project,) = [p for p in projects if p["name"] == "default"]
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


def _spans(phoenix: str, project: str, done: Any) -> list[dict[str, Any]]:
    """The spans of ``project`` once ``done(spans)`` (Phoenix stores what it receives a moment
    later), or when the wait is over."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        answer = httpx.get(
            f"{phoenix}/v1/projects/{project}/spans", params={"limit": 1000}, timeout=30
        )
        spans: list[dict[str, Any]] = answer.json()["data"] if answer.status_code == 200 else []
        if done(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def test_phoenix_shows_the_runs_content_and_agent_name_when_replay_captures_them(
    phoenix: str,
) -> None:
    # replay --otlp-capture-content --otlp-agent-name, into a project of its own (Phoenix reads
    # openinference.project.name from the resource, which OTEL_RESOURCE_ATTRIBUTES sets).
    name = "support.jsonl"
    env = {**os.environ, "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=content"}
    done = subprocess.run(
        [sys.executable, "-m", "agui_meta", "replay", "--otlp", f"{phoenix}/v1/traces",
         "--otlp-signals", "traces", "--otlp-agent-name", "support-desk",
         "--otlp-capture-content", str(STREAMS / name)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    wire = events(name)
    runs = [e for e in wire if e["type"] == "RUN_STARTED"]
    results = {e["toolCallId"]: e["content"] for e in wire if e["type"] == "TOOL_CALL_RESULT"}

    def tools_of(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [s for s in spans if s["name"].startswith("execute_tool ")]

    spans = _spans(
        phoenix,
        "content",
        lambda spans: (
            sum("agui.run.id" in s["attributes"] for s in spans) == len(runs)
            and len(tools_of(spans)) == len(results)
        ),
    )
    by_run = {
        s["attributes"].get("agui.run.id"): s for s in spans if "agui.run.id" in s["attributes"]
    }
    assert sorted(by_run) == sorted(e["runId"] for e in runs)
    for event in runs:  # Phoenix reads each run's input and output messages
        attributes = by_run[event["runId"]]["attributes"]
        assert by_run[event["runId"]]["name"] == "invoke_agent support-desk"
        assert attributes["gen_ai.agent.name"] == "support-desk"
        said = [m["content"] for m in event["input"]["messages"]]
        assert [
            attributes[f"llm.input_messages.{i}.message.content"] for i in range(len(said))
        ] == said
        assert attributes["llm.output_messages.0.message.role"] == "assistant"
    # Each tool span shows its arguments and its result as Phoenix's output.
    tools = tools_of(spans)
    assert {
        s["attributes"]["gen_ai.tool.call.id"]: s["attributes"]["output.value"] for s in tools
    } == results
    assert all(s["attributes"]["gen_ai.tool.call.arguments"] for s in tools)
