"""The prelude of a ``connect`` stream: what brings a fresh client to where a thread is now.

A client that connects to a thread gets, before any live event, the thread as the gateway's
keyed store holds it, in events the official client's verifier accepts:

- no run active: ``RUN_STARTED``, ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT``, ``RUN_FINISHED``
  (a complete run of its own, which changes nothing but the client's messages and state; its
  outcome carries the interrupts the thread's last run left open, so that the client's next
  run answers them);
- a run active: that run's ``RUN_STARTED``, then ``MESSAGES_SNAPSHOT`` of the messages as they
  are now *without* the items still streaming, ``STATE_SNAPSHOT``, and the open items
  re-opened in the order the verifier wants them closed later: steps (``STEP_STARTED``),
  reasoning spans (``REASONING_START``), reasoning messages (``REASONING_MESSAGE_START`` and
  one ``REASONING_MESSAGE_CONTENT`` with the text so far), text messages
  (``TEXT_MESSAGE_START`` and one ``TEXT_MESSAGE_CONTENT``), tool calls (``TOOL_CALL_START``
  under their message and one ``TOOL_CALL_ARGS``). The live events that follow (their
  deltas, their ENDs, ``RUN_FINISHED``) then apply as they do for a client that saw the run
  from its start. A text message re-opened gets its tool calls that had ended again (START,
  ARGS, END). Limits: open subagents are not re-opened (their later events are not
  attributed), and a message still streaming that is not the last of the thread is re-opened
  at the end of the client's list.

The prelude's events carry no SSE ``id``: a resumption names an event of the run itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ._events import Interrupt
from ._framing import encode_sse
from ._store import Store
from ._verify import OpenItems

__all__ = ["join_prelude", "thread_prelude"]

_encode = msgspec.json.encode


def _frames(events: list[dict[str, Any]]) -> list[bytes]:
    return [encode_sse(_encode(event)) for event in events]


def thread_prelude(
    thread_id: str,
    run_id: str,
    messages: list[dict[str, Any]],
    state: Any,
    interrupts: Sequence[Interrupt] = (),
) -> list[bytes]:
    """A complete run that leaves a client with ``messages``, ``state`` and the ``interrupts``
    the thread's last run left open (its ``RUN_FINISHED`` outcome), as SSE frames."""
    finished: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}
    if interrupts:
        finished["outcome"] = {
            "type": "interrupt",
            "interrupts": [msgspec.to_builtins(i) for i in interrupts],
        }
    return _frames(
        [
            {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
            {"type": "MESSAGES_SNAPSHOT", "messages": messages},
            {"type": "STATE_SNAPSHOT", "snapshot": state},
            finished,
        ]
    )


def _with_metadata(event: dict[str, Any], wire: dict[str, Any]) -> dict[str, Any]:
    metadata = wire.get("metadata")
    if metadata is not None:
        event["metadata"] = metadata
    return event


def _tool_call(call: dict[str, Any], owner_id: str, *, ended: bool) -> list[dict[str, Any]]:
    """A tool call of the store as START (under ``owner_id``), ARGS so far and, if ``ended``,
    END."""
    found = call.get("function")
    function: dict[str, Any] = found if isinstance(found, dict) else {}
    call_id = call.get("id")
    events = [
        _with_metadata(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call_id,
                "toolCallName": function.get("name") or "",
                "parentMessageId": owner_id,
            },
            call,
        )
    ]
    arguments = function.get("arguments")
    if isinstance(arguments, str) and arguments:
        events.append({"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments})
    if ended:
        events.append({"type": "TOOL_CALL_END", "toolCallId": call_id})
    return events


def join_prelude(thread_id: str, run_id: str, store: Store, open_items: OpenItems) -> list[bytes]:
    """The events that join the run ``run_id`` in progress, from ``store`` and what is open
    (call it with the store and the verifier exactly at a boundary between two events)."""
    streaming_messages = {*open_items.text_messages, *open_items.reasoning_messages}
    streaming_calls = set(open_items.tool_calls)
    snapshot: list[dict[str, Any]] = []
    held: dict[str, dict[str, Any]] = {}
    calls: dict[str, tuple[dict[str, Any], str]] = {}
    for item in store.messages():
        wire = item.to_wire()
        tool_calls = wire.get("toolCalls")
        if streaming_calls and isinstance(tool_calls, list):
            kept = []
            for call in tool_calls:
                call_id = call.get("id") if isinstance(call, dict) else None
                if call_id in streaming_calls and call_id not in calls:
                    calls[call_id] = (call, wire["id"])
                else:
                    kept.append(call)
            wire["toolCalls"] = kept
        if item.id in streaming_messages and item.id not in held:
            held[item.id] = wire  # re-opened below, with its text so far
        else:
            snapshot.append(wire)
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {"type": "MESSAGES_SNAPSHOT", "messages": snapshot},
        {"type": "STATE_SNAPSHOT", "snapshot": store.state},
    ]
    for name, owner in open_items.steps:
        step: dict[str, Any] = {"type": "STEP_STARTED", "stepName": name}
        if owner is not None:
            step["subagentRunId"] = owner
        events.append(step)
    for message_id in open_items.reasoning_spans:
        events.append({"type": "REASONING_START", "messageId": message_id})
    for message_id in open_items.reasoning_messages:
        wire = held.get(message_id, {})
        events.append(
            _with_metadata(
                {"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"},
                wire,
            )
        )
        content = wire.get("content")
        if isinstance(content, str) and content:
            events.append(
                {"type": "REASONING_MESSAGE_CONTENT", "messageId": message_id, "delta": content}
            )
    for message_id in open_items.text_messages:
        wire = held.get(message_id, {})
        start: dict[str, Any] = {"type": "TEXT_MESSAGE_START", "messageId": message_id}
        if wire.get("role") in ("developer", "system", "assistant", "user"):
            start["role"] = wire["role"]
        if isinstance(wire.get("name"), str):
            start["name"] = wire["name"]
        events.append(_with_metadata(start, wire))
        content = wire.get("content")
        if isinstance(content, str) and content:
            events.append(
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": content}
            )
        for call in wire.get("toolCalls") or ():  # its calls that had ended: again, ended
            events += _tool_call(call, message_id, ended=True)
    for call_id in open_items.tool_calls:
        found = calls.get(call_id)
        if found is not None:  # else not in the store (evicted): nothing to re-open
            events += _tool_call(found[0], found[1], ended=False)
    return _frames(events)
