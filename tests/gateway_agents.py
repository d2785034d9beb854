"""Agents and helpers for the gateway tests: a scripted agent that can be held mid-run.

The scripted agent's output depends only on its input. ``forwardedProps`` steer it:
``{"hold": NAME, "at": "text" | "tool"}`` makes it stop in the middle of its text message (or
of its tool call's arguments) until the test calls :func:`release` with NAME; :func:`reached`
waits until it got there. Gates are ``threading.Event`` objects, since the gateway runs in a
uvicorn thread with its own event loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio

from agui_meta.events import RunAgentInput
from agui_meta.framing import SSEDecoder

TIMEOUT = 30.0

_gates: dict[str, threading.Event] = {}
_reached: dict[str, threading.Event] = {}
_lock = threading.Lock()


def _gate(table: dict[str, threading.Event], name: str) -> threading.Event:
    with _lock:
        return table.setdefault(name, threading.Event())


def release(name: str) -> None:
    _gate(_gates, name).set()


def reached(name: str) -> None:
    """Wait (in a thread) until the agent holding ``name`` is at its hold point."""
    assert _gate(_reached, name).wait(TIMEOUT), f"the agent never reached hold {name!r}"


async def areached(name: str) -> None:
    await anyio.to_thread.run_sync(reached, name)


async def _hold(name: str) -> None:
    _gate(_reached, name).set()
    gate = _gate(_gates, name)
    pause = 0.001
    while not gate.is_set():  # set by another thread: polled, backing off
        await anyio.sleep(pause)
        pause = min(pause * 2, 0.05)


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    """Poll ``predicate`` (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.005)


async def await_until(predicate: Callable[[], bool], what: str) -> None:
    with anyio.fail_after(TIMEOUT):
        while not predicate():  # noqa: ASYNC110 - state of another thread
            await anyio.sleep(0.005)


async def scripted(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    """RUN_STARTED, a step, a text message, a tool call and its result, a state, RUN_FINISHED."""
    props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
    hold = props.get("hold")
    at = props.get("at", "text")
    tid, rid = input.thread_id, input.run_id
    state = input.state if isinstance(input.state, dict) else {}
    last = input.messages[-1] if input.messages else None
    said = getattr(last, "content", None) if last is not None else None
    m, tc = f"{rid}-m", f"{rid}-tc"
    yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
    yield {"type": "STEP_STARTED", "stepName": "think"}
    yield {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant",
           "metadata": {"acme.model": "m-1"}}  # fmt: skip
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": "Hel"}
    if hold and at == "text":
        await _hold(hold)
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m,
           "delta": f"lo: {len(input.messages)} messages, last {said!r}"}  # fmt: skip
    yield {"type": "TEXT_MESSAGE_END", "messageId": m}
    yield {"type": "TOOL_CALL_START", "toolCallId": tc, "toolCallName": "lookup",
           "parentMessageId": m}  # fmt: skip
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": tc, "delta": '{"q": '}
    if hold and at == "tool":
        await _hold(hold)
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": tc, "delta": '"x"}'}
    yield {"type": "TOOL_CALL_END", "toolCallId": tc}
    yield {"type": "TOOL_CALL_RESULT", "messageId": f"{rid}-r", "toolCallId": tc,
           "content": "found"}  # fmt: skip
    yield {"type": "STATE_SNAPSHOT", "snapshot": {**state, "turns": state.get("turns", 0) + 1}}
    yield {"type": "STEP_FINISHED", "stepName": "think"}
    yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid}


async def endless(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    """Starts a text message and never ends (until cancelled)."""
    yield {"type": "RUN_STARTED", "threadId": input.thread_id, "runId": input.run_id}
    yield {"type": "TEXT_MESSAGE_START", "messageId": f"{input.run_id}-m", "role": "assistant"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{input.run_id}-m", "delta": "..."}
    await anyio.sleep_forever()
    yield {}  # pragma: no cover


async def everything_open(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    """Opens a step, reasoning, a text message with an ended tool call and an open one (and,
    with ``forwardedProps`` ``{"subagent": true}``, a subagent), then waits until cancelled
    (or, with ``hold``, until released, and ends every item)."""
    props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
    tid, rid = input.thread_id, input.run_id
    yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
    yield {"type": "STEP_STARTED", "stepName": "plan"}
    yield {"type": "REASONING_START", "messageId": "rs"}
    yield {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"}
    yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "hmm"}
    yield {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant",
           "metadata": {"acme.model": "m-2"}}  # fmt: skip
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Partly"}
    yield {"type": "TOOL_CALL_START", "toolCallId": "tc0", "toolCallName": "g",
           "parentMessageId": "m", "metadata": {"acme.cost": 1}}  # fmt: skip
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": "tc0", "delta": "{}"}
    yield {"type": "TOOL_CALL_END", "toolCallId": "tc0"}
    yield {"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f",
           "parentMessageId": "m"}  # fmt: skip
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": '{"a": '}
    if props.get("subagent"):
        yield {"type": "SUBAGENT_STARTED", "subagentRunId": "sub", "name": "helper"}
    hold = props.get("hold")
    if not hold:
        await anyio.sleep_forever()
    await _hold(hold)
    yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": " ok"}
    yield {"type": "REASONING_MESSAGE_END", "messageId": "rm"}
    yield {"type": "REASONING_END", "messageId": "rs"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": " done"}
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "1}"}
    yield {"type": "TOOL_CALL_END", "toolCallId": "tc"}
    yield {"type": "TEXT_MESSAGE_END", "messageId": "m"}
    yield {"type": "STATE_SNAPSHOT", "snapshot": {"done": True}}
    yield {"type": "STEP_FINISHED", "stepName": "plan"}
    yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid}


async def nested(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    """Subagents inside subagents, held with their items open (``forwardedProps`` ``hold``):
    "a" starts "b" and ends before it; "b" starts "c"; "b" holds a step, a text message and a
    tool call open, "c" a reasoning message; the parent's own message stays open too. After
    the hold every item continues with tagged events, and all end."""
    props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
    tid, rid = input.thread_id, input.run_id
    yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
    yield {"type": "TEXT_MESSAGE_START", "messageId": "p", "role": "assistant"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "p", "delta": "Asking"}
    yield {"type": "SUBAGENT_STARTED", "subagentRunId": "a", "name": "planner",
           "description": "plans", "parentMessageId": "p", "metadata": {"acme.depth": 1}}  # fmt: skip
    yield {"type": "SUBAGENT_STARTED", "subagentRunId": "b", "name": "searcher",
           "parentSubagentRunId": "a"}  # fmt: skip
    yield {"type": "SUBAGENT_FINISHED", "subagentRunId": "a", "result": {"plan": 1}}
    yield {"type": "STEP_STARTED", "stepName": "search", "subagentRunId": "b"}
    yield {"type": "TEXT_MESSAGE_START", "messageId": "bm", "role": "assistant",
           "subagentRunId": "b", "metadata": {"acme.model": "m-3"}}  # fmt: skip
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "bm", "delta": "Looking",
           "subagentRunId": "b"}  # fmt: skip
    yield {"type": "TOOL_CALL_START", "toolCallId": "bt", "toolCallName": "search",
           "parentMessageId": "bm", "subagentRunId": "b"}  # fmt: skip
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": "bt", "delta": '{"q": ', "subagentRunId": "b"}
    yield {"type": "SUBAGENT_STARTED", "subagentRunId": "c", "name": "reader",
           "parentSubagentRunId": "b", "parentToolCallId": "bt"}  # fmt: skip
    yield {"type": "REASONING_MESSAGE_START", "messageId": "cr", "role": "reasoning",
           "subagentRunId": "c"}  # fmt: skip
    yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": "cr", "delta": "Reading",
           "subagentRunId": "c"}  # fmt: skip
    await _hold(props.get("hold", "nested"))
    yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": "cr", "delta": " on",
           "subagentRunId": "c"}  # fmt: skip
    yield {"type": "REASONING_MESSAGE_END", "messageId": "cr", "subagentRunId": "c"}
    yield {"type": "SUBAGENT_FINISHED", "subagentRunId": "c"}
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": "bt", "delta": '"x"}', "subagentRunId": "b"}
    yield {"type": "TOOL_CALL_END", "toolCallId": "bt", "subagentRunId": "b"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "bm", "delta": " done",
           "subagentRunId": "b"}  # fmt: skip
    yield {"type": "TEXT_MESSAGE_END", "messageId": "bm", "subagentRunId": "b"}
    yield {"type": "STEP_FINISHED", "stepName": "search", "subagentRunId": "b"}
    yield {"type": "SUBAGENT_STARTED", "subagentRunId": "d", "name": "late",
           "parentSubagentRunId": "a"}  # fmt: skip
    yield {"type": "SUBAGENT_ERROR", "subagentRunId": "d", "message": "no time"}
    yield {"type": "SUBAGENT_FINISHED", "subagentRunId": "b"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "p", "delta": ", answered"}
    yield {"type": "TEXT_MESSAGE_END", "messageId": "p"}
    yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid}


async def asking(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    """Asks for a confirmation (an interrupt); answered in the next run's ``resume``."""
    tid, rid = input.thread_id, input.run_id
    yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
    answers = input.resume if isinstance(input.resume, list) else []
    m = f"{rid}-m"
    yield {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"}
    if not answers:
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": "Shall I?"}
        yield {"type": "TEXT_MESSAGE_END", "messageId": m}
        interrupt = {"id": "i1", "reason": "confirmation", "message": "Go ahead?"}
        yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid,
               "outcome": {"type": "interrupt", "interrupts": [interrupt]}}  # fmt: skip
        return
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": f"Done: {answers[0].status}"}
    yield {"type": "TEXT_MESSAGE_END", "messageId": m}
    yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid}


async def failing(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    yield {"type": "RUN_STARTED", "threadId": input.thread_id, "runId": input.run_id}
    raise RuntimeError("the model is down")


def run_body(
    thread_id: str, run_id: str, messages: list[dict[str, Any]] | None = None, **props: Any
) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": messages or [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": props,
    }


def frames(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """``(id, event)`` of every SSE event of ``body``."""
    import json

    decoder = SSEDecoder()
    found = [*decoder.feed(body), *decoder.close()]
    return [(f.id, json.loads(f.data)) for f in found]


def types(events: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
