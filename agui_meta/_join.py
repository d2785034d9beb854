"""The prelude of a ``connect`` stream: what brings a fresh client to where a thread is now.

A client that connects to a thread gets, before any live event, the thread as the gateway's
keyed store holds it, in events the official client's verifier accepts:

- no run active: ``RUN_STARTED``, ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT``, ``RUN_FINISHED``
  (a complete run of its own, which changes nothing but the client's messages and state; its
  outcome carries the interrupts the thread's last run left open, so that the client's next
  run answers them);
- a run active: that run's ``RUN_STARTED``, ``MESSAGES_SNAPSHOT`` of the messages as they are
  now, ``STATE_SNAPSHOT``, the run's subagents, then the open items re-opened: steps
  (``STEP_STARTED``), reasoning spans (``REASONING_START``), reasoning and text messages
  (their START), tool calls (``TOOL_CALL_START`` under their message and one
  ``TOOL_CALL_ARGS``). The live events that follow (their deltas, their ENDs,
  ``RUN_FINISHED``) then apply as they do for a client that saw the run from its start.

A message still streaming is in the snapshot where it stands, with its text so far: its START
opens it again for the verifier, and the reference (as the store) reuses a message it holds
as it is, so the deltas that follow append to it. A message's tool calls from its first open
one on are left out of the snapshot and sent again in their order, under their message, with
their arguments so far (the ended ones ended again), so that the open ones stay open.

Subagents: every subagent of the run the verifier remembers is started again, in the order
they started, with its own ``SUBAGENT_STARTED`` (same id, name, description, parents and
metadata); one that has ended is ended again at once with its own ``SUBAGENT_FINISHED`` /
``SUBAGENT_ERROR``, so that a later subagent naming it as ``parentSubagentRunId`` is accepted.
(Past the verifier's ``max_closed_ids`` the oldest ended ones are forgotten; a START whose
parent was forgotten is sent without ``parentSubagentRunId``.) The owners of the re-opened
items are those the verifier recorded: a step or a reasoning span is re-opened with its
owner's ``subagentRunId``; a message or a tool call of the snapshot has the owner the
snapshot gives it (the message's ``subagentRunId``), so its START carries no tag. The
subagent's later events, tagged, then continue its items.

Limit: an item the run continues under another owner than the one the thread stored it with
(a message of an earlier run continued by a subagent) has the stored owner in the joining
client, whose verifier then refuses the run's tagged events for it.

The prelude's events carry no SSE ``id``: a resumption names an event of the run itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from msgspec import UNSET

from ._decode import encode_event
from ._events import Event, Interrupt
from ._framing import encode_sse
from ._store import Store
from ._verify import Verify

__all__ = ["join_prelude", "thread_prelude"]

_encode = msgspec.json.encode


def _frames(events: list[dict[str, Any] | Event]) -> list[bytes]:
    return [
        encode_sse(encode_event(event) if isinstance(event, Event) else _encode(event))
        for event in events
    ]


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


def _owned(event: dict[str, Any], owner: str | None) -> dict[str, Any]:
    if owner is not None:
        event["subagentRunId"] = owner
    return event


def _subagents(verify: Verify) -> list[Event]:
    """The run's subagents started again (and those that ended, ended again), in order."""
    events: list[Event] = []
    started: set[str] = set()
    for start, end in verify.subagents():
        parent = start.parent_subagent_run_id
        if parent is not UNSET and parent not in started:  # forgotten by the verifier
            start = msgspec.structs.replace(start, parent_subagent_run_id=UNSET)
        started.add(start.subagent_run_id)
        events.append(start)
        if end is not None:
            events.append(end)
    return events


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
    encrypted = call.get("encryptedValue")
    if isinstance(encrypted, str):
        events.append(
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "tool-call",
                "entityId": call_id,
                "encryptedValue": encrypted,
            }
        )
    if ended:
        events.append({"type": "TOOL_CALL_END", "toolCallId": call_id})
    return events


def join_prelude(thread_id: str, run_id: str, store: Store, verify: Verify) -> list[bytes]:
    """The events that join the run ``run_id`` in progress, from ``store`` and what ``verify``
    holds open (call it with both exactly at a boundary between two events)."""
    open_items = verify.open_items()
    streaming_calls = set(open_items.tool_calls)
    snapshot: list[dict[str, Any]] = []
    reasoning_ids: set[str] = set()
    # Tool calls taken out of their message (from its first open one on), to be sent again.
    calls: list[tuple[dict[str, Any], str]] = []
    for item in store.messages():
        wire = item.to_wire()
        snapshot.append(wire)
        if wire.get("role") == "reasoning":
            reasoning_ids.add(item.id)
        tool_calls = wire.get("toolCalls")
        if not streaming_calls or not isinstance(tool_calls, list):
            continue
        for index, call in enumerate(tool_calls):
            if isinstance(call, dict) and call.get("id") in streaming_calls:
                calls += [(later, item.id) for later in tool_calls[index:]]
                wire["toolCalls"] = tool_calls[:index]
                break
    in_snapshot = {wire["id"] for wire in snapshot}
    events: list[dict[str, Any] | Event] = [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {"type": "MESSAGES_SNAPSHOT", "messages": snapshot},
        {"type": "STATE_SNAPSHOT", "snapshot": store.state},
    ]
    events += _subagents(verify)
    for name, owner in open_items.steps:
        events.append(_owned({"type": "STEP_STARTED", "stepName": name}, owner))
    for message_id in open_items.reasoning_spans:
        span = {"type": "REASONING_START", "messageId": message_id}
        # The owner of a reasoning message of the snapshot is the snapshot's.
        owner = None if message_id in reasoning_ids else verify.owner("reasoning", message_id)
        events.append(_owned(span, owner))
    # A message still streaming is in the snapshot with its content so far, where it stands;
    # its START opens it again (the reference reuses a message it holds, as it is), so its
    # later deltas append to it. One the store no longer holds starts anew, with its owner.
    for message_id in open_items.reasoning_messages:
        start = {"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"}
        if message_id not in in_snapshot:
            start = _owned(start, verify.owner("reasoning", message_id))
        events.append(start)
    for message_id in open_items.text_messages:
        start = {"type": "TEXT_MESSAGE_START", "messageId": message_id}
        if message_id not in in_snapshot:
            start = _owned(start, verify.owner("message", message_id))
        events.append(start)
    for call, message_id in calls:  # in their message's order; the open ones left open
        events += _tool_call(call, message_id, ended=call.get("id") not in streaming_calls)
    return _frames(events)
