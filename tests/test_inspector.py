"""``agui-meta record URL --inspector OUT.json`` (and ``HttpAgent.record_inspector`` from
Python): an agui-inspector session file, format 0.

What agui-inspector's import refuses (its ``docs/recordings.md``: exactly the documented fields,
known enumerations, unique ids, references that resolve, frames listed in arrival order with
offsets that never go back, verdicts that agree with the data) is checked by :func:`check`;
what its schemas refuse (a run input, an event filed as valid, an interrupt) by the official
``@ag-ui/core`` schemas through the oracle (``tests/inspector_ref.cjs``). The agents are real:
the tests' scripted thread on uvicorn, and one that drops its connection.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_meta import HttpAgent, HttpStatusError, IncompleteStream
from tests.helpers import cli
from tests.oracle import OracleUnavailable, oracle_missing, prepare_oracle
from tests.servers import agent_app, serve, thread_script

SCRIPT = Path(__file__).with_name("inspector_ref.cjs")

EXCHANGE = (
    {"id", "kind", "method", "path", "startedAt", "transport", "frameIds"},
    {"runId", "requestBody", "requestBodyJson", "status", "responseBody", "elapsedMs"}
    | {"transportError"},
)
FRAME = (
    {"id", "exchangeId", "index", "classification", "envelope", "offsetMs", "summary"}
    | {"jsonVerdict", "schemaVerdict", "provenance"},
    {"data", "eventType", "parsed"},
)
RUN = (
    {"id", "threadId", "runId", "input", "exchangeId", "startedAt", "outcome"},
    {"parentRunId", "endedAt"},
)
OUTCOMES = {
    "success": ({"kind", "pendingToolCallIds"}, {"result"}),
    "interrupt": ({"kind", "interrupts"}, set()),
    "cancelled": ({"kind"}, set()),
    "unknown": ({"kind"}, set()),
    "error": ({"kind", "message"}, {"code"}),
}
FINDING_KINDS = {"json", "schema", "sequence", "terminal", "transport", "capture", "projection"}


def fields(record: dict[str, Any], shape: tuple[set[str], set[str]], at: str) -> None:
    required, optional = shape
    assert required <= set(record) <= required | optional, (at, set(record) ^ required)


def check(document: dict[str, Any]) -> dict[str, Any]:
    """agui-inspector's documented import checks; returns the session."""
    assert set(document) == {"version", "session"} and document["version"] == 0
    session: dict[str, Any] = document["session"]
    assert set(session) == {"id", "exchanges", "runs", "frames", "findings", "derived"}
    ids: dict[str, set[str]] = {}
    for name in ("exchanges", "runs", "frames", "findings", "derived"):
        listed = [r["id"] for r in session[name]]
        assert len(listed) == len(set(listed)) and all(listed), name
        ids[name] = set(listed)
    for exchange in session["exchanges"]:
        fields(exchange, EXCHANGE, "exchange")
        assert exchange["kind"] in ("preparation", "conversation", "raw")
        assert exchange["transport"] in ("completed", "transport-error", "user-stopped")
        if "requestBodyJson" in exchange:
            assert json.loads(exchange["requestBody"]) == exchange["requestBodyJson"]
        assert exchange["startedAt"] >= 0 and exchange.get("elapsedMs", 0) >= 0
        own = [f["id"] for f in session["frames"] if f["exchangeId"] == exchange["id"]]
        assert exchange["frameIds"] == own  # its frames, all of them, in arrival order
    last: dict[str, float] = {}
    count: dict[str, int] = {}
    for frame in session["frames"]:
        fields(frame, FRAME, "frame")
        exchange_id = frame["exchangeId"]
        assert exchange_id in ids["exchanges"] and frame["provenance"] == "raw"
        assert frame["index"] == count.get(exchange_id, 0)
        assert frame["offsetMs"] >= last.get(exchange_id, 0)
        count[exchange_id] = frame["index"] + 1
        last[exchange_id] = frame["offsetMs"]
        assert frame["classification"] in ("data", "control", "partial")
        if frame["classification"] == "data":
            try:
                parsed = json.loads(frame["data"])
            except ValueError:
                assert frame["jsonVerdict"] == "invalid" and "parsed" not in frame
                assert frame["schemaVerdict"] == "not-applicable"
            else:
                assert frame["jsonVerdict"] == "valid" and frame["parsed"] == parsed
                assert frame["schemaVerdict"] in ("valid", "invalid", "unknown-type")
        else:
            assert "data" not in frame and "parsed" not in frame
            assert frame["jsonVerdict"] == frame["schemaVerdict"] == "not-applicable"
    for run in session["runs"]:
        fields(run, RUN, "run")
        assert run["exchangeId"] in ids["exchanges"]
        assert run.get("endedAt", run["startedAt"]) >= run["startedAt"] >= 0
        fields(run["outcome"], OUTCOMES[run["outcome"]["kind"]], "outcome")
    for finding in session["findings"]:
        assert set(finding) == {"id", "kind", "message", "subject"}
        assert finding["kind"] in FINDING_KINDS
        subject = finding["subject"]
        assert (
            subject["id"]
            in ids[{"frame": "frames", "run": "runs", "exchange": "exchanges"}[subject["type"]]]
        )
    assert session["derived"] == []
    return session


def official(path: Path) -> dict[str, Any]:
    try:
        directory = prepare_oracle()
    except OracleUnavailable as exc:
        oracle_missing(exc)
    done = subprocess.run(
        ["node", str(SCRIPT), str(directory), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve(agent_app()) as url:
        yield url


def record(url: str, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], Path]:
    out, session = tmp_path / "run.sse", tmp_path / "session.json"
    done = cli("record", url, "-m", "hi", "-o", str(out), "--inspector", str(session), *args)
    return done.returncode, json.loads(session.read_text()), session


def test_a_recorded_run_as_an_inspector_session(server: str, tmp_path: Path) -> None:
    status, document, path = record(server + "/thread", tmp_path)
    assert status == 0
    session = check(document)
    (exchange,) = session["exchanges"]
    assert (exchange["path"], exchange["status"], exchange["transport"]) == (
        "/thread",
        200,
        "completed",
    )
    body = exchange["requestBodyJson"]
    script = thread_script(body)
    data = [f for f in session["frames"] if f["classification"] == "data"]
    assert [f["parsed"]["type"] for f in data] == [e["type"] for e in script]
    assert all(f["schemaVerdict"] == "valid" and f["eventType"] for f in data)
    # The envelopes are the body as it arrived, byte for byte.
    recorded = (tmp_path / "run.sse").read_bytes().decode()
    assert "".join(f["envelope"] for f in session["frames"]) == recorded
    (run,) = session["runs"]
    assert (run["threadId"], run["runId"], run["input"]) == (
        body["threadId"],
        body["runId"],
        body,
    )
    # The run ended with its frontend tool call pending, as the reference client counts it.
    assert run["outcome"] == {"kind": "success", "pendingToolCallIds": [f"{body['runId']}-call"]}
    assert session["findings"] == []  # the scripted thread is clean
    theirs = official(path)
    assert theirs["inputs"] == [True]
    assert theirs["frames"] == {f["id"]: True for f in data}


def test_a_dropped_connection_and_its_findings(server: str, tmp_path: Path) -> None:
    status, document, path = record(server + "/dropping", tmp_path)
    assert status == 1  # record's own verdict: the connection dropped
    session = check(document)
    (exchange,) = session["exchanges"]
    assert exchange["transport"] == "transport-error" and exchange["transportError"]
    assert session["frames"][-1]["classification"] == "partial"  # the event cut in the middle
    kinds = {(f["kind"], f["subject"]["type"]) for f in session["findings"]}
    # The stream's end is located at its last event: the terminal finding is on its frame.
    assert ("transport", "exchange") in kinds and ("terminal", "frame") in kinds
    (run,) = session["runs"]
    assert run["outcome"] == {"kind": "unknown"} and "endedAt" not in run
    assert official(path)["inputs"] == [True]


def test_an_error_status(server: str, tmp_path: Path) -> None:
    status, document, _ = record(server + "/500", tmp_path)
    assert status == 1
    session = check(document)
    (exchange,) = session["exchanges"]
    assert exchange["status"] == 500
    assert exchange["responseBody"] == "the agent is down for maintenance"
    assert session["frames"] == session["runs"] == []


# ---------------------------------------------------------------------------------------------
# The same from Python: HttpAgent.record_inspector


@pytest.mark.anyio
async def test_record_inspector_from_python(server: str, tmp_path: Path) -> None:
    path, saved = tmp_path / "session.json", bytearray()
    agent = HttpAgent(
        server + "/thread",
        thread_id="t-py",
        messages=[{"id": "u", "role": "user", "content": "hi"}],
    )
    await agent.record_inspector(path, run_id="r-py", on_chunk=saved.extend)
    session = check(json.loads(path.read_text()))
    (exchange,) = session["exchanges"]
    assert (exchange["path"], exchange["status"], exchange["transport"]) == (
        "/thread",
        200,
        "completed",
    )
    body = exchange["requestBodyJson"]
    assert (body["threadId"], body["runId"], body["messages"]) == (
        "t-py",
        "r-py",
        [{"id": "u", "role": "user", "content": "hi"}],
    )
    data = [f for f in session["frames"] if f["classification"] == "data"]
    assert [f["parsed"]["type"] for f in data] == [e["type"] for e in thread_script(body)]
    # on_chunk saw the body as it arrived: the frames' envelopes, byte for byte.
    assert "".join(f["envelope"] for f in session["frames"]) == saved.decode()
    (run,) = session["runs"]
    assert (run["runId"], run["input"]) == ("r-py", body)
    assert run["outcome"] == {"kind": "success", "pendingToolCallIds": ["r-py-call"]}
    assert session["findings"] == []
    # Recorded, not applied: the thread is as it was.
    assert agent.messages_wire() == [{"id": "u", "role": "user", "content": "hi"}]
    theirs = official(path)
    assert theirs["inputs"] == [True]
    assert theirs["frames"] == {f["id"]: True for f in data}


@pytest.mark.anyio
async def test_record_inspector_from_python_when_the_connection_drops(
    server: str, tmp_path: Path
) -> None:
    path = tmp_path / "session.json"
    with pytest.raises(IncompleteStream, match="dropped after") as caught:
        await HttpAgent(server + "/dropping").record_inspector(path)
    session = check(json.loads(path.read_text()))  # written all the same
    (exchange,) = session["exchanges"]
    assert exchange["transport"] == "transport-error" and exchange["transportError"]
    assert caught.value.events == len(
        [f for f in session["frames"] if f["classification"] == "data"]
    )
    assert caught.value.events > 0
    kinds = {(f["kind"], f["subject"]["type"]) for f in session["findings"]}
    assert ("transport", "exchange") in kinds and ("terminal", "frame") in kinds


@pytest.mark.anyio
async def test_record_inspector_from_python_on_an_error_status(server: str, tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    with pytest.raises(HttpStatusError) as caught:
        await HttpAgent(server + "/500").record_inspector(path)
    assert caught.value.status == 500
    session = check(json.loads(path.read_text()))
    (exchange,) = session["exchanges"]
    assert (exchange["status"], exchange["responseBody"]) == (
        500,
        "the agent is down for maintenance",
    )
    assert session["frames"] == session["runs"] == []


@pytest.mark.anyio
async def test_record_inspector_from_python_when_unreachable(tmp_path: Path) -> None:
    with serve(agent_app()) as url:
        pass  # the port is free again once the server stopped
    path = tmp_path / "session.json"
    with pytest.raises(httpx.ConnectError):
        await HttpAgent(url + "/thread").record_inspector(path)
    assert not path.exists()  # nothing was exchanged
