"""Chain a middleware of your own (redaction) with the built-in stages.

    python examples/redaction.py

A stage is any async generator function taking the upstream events: no base class, no
registration. Here ``redact`` removes e-mail addresses and phone numbers from text deltas and
tool results before anything downstream — the store, the ledger, a browser — sees them, and
tells how many it removed in the message's metadata (``redactor.redactions`` on the END event,
merged into the message like any other key).

Stages run in the order they are listed, the first nearest the source: ``redact`` comes after
``ExpandChunks()`` so that it only has to handle TEXT_MESSAGE_CONTENT, not the chunk shorthand.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec

import agui_meta

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
PHONE = re.compile(r"\+?\(?\d[\d ()-]{7,}\d")


def scrub(text: str) -> tuple[str, int]:
    """``text`` without e-mail addresses and phone numbers, and how many were removed."""
    text, emails = EMAIL.subn("[email]", text)
    text, phones = PHONE.subn("[phone]", text)
    return text, emails + phones


async def redact(
    events: AsyncIterator[agui_meta.events.Event],
) -> AsyncIterator[agui_meta.events.Event]:
    """The middleware: rewrite deltas and tool results, count per message, report at the end.

    A delta is scrubbed on its own, so an address split across two deltas would get through;
    a production redactor holds back the tail of each delta until the next one arrives.
    """
    found: dict[str, int] = {}
    async for event in events:
        if isinstance(event, agui_meta.events.TextMessageContentEvent):
            text, n = scrub(event.delta)
            if n:
                found[event.message_id] = found.get(event.message_id, 0) + n
                event = msgspec.structs.replace(event, delta=text)
        elif isinstance(event, agui_meta.events.ToolCallResultEvent) and isinstance(
            event.content, str
        ):
            text, n = scrub(event.content)
            if n:
                extra = agui_meta.vendor_keys("redactor", redactions=n)
                event = msgspec.structs.replace(
                    event, content=text, metadata=agui_meta.merge_metadata(event.metadata, extra)
                )
        elif isinstance(event, agui_meta.events.TextMessageEndEvent) and event.message_id in found:
            extra = agui_meta.vendor_keys("redactor", redactions=found.pop(event.message_id))
            event = msgspec.structs.replace(
                event, metadata=agui_meta.merge_metadata(event.metadata, extra)
            )
        yield event


RUN = {"threadId": "thread-9", "runId": "run-9"}
EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", **RUN},
    {
        "type": "TEXT_MESSAGE_CHUNK",
        "messageId": "msg-1",
        "role": "assistant",
        "delta": "I found your account: ",
        "metadata": {"acme.model": "gpt-4.1"},
    },
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "msg-1", "delta": "ana.silva@example.com, "},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "msg-1", "delta": "phone +351 912 345 678."},
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "call-1",
        "toolCallName": "lookup_customer",
        "parentMessageId": "msg-1",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": '{"customer": 4821}'},
    {"type": "TOOL_CALL_END", "toolCallId": "call-1"},
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "result-1",
        "toolCallId": "call-1",
        "content": '{"email": "ana.silva@example.com", "tier": "gold"}',
        "metadata": {"crm.latency_ms": 35},
    },
    {"type": "RUN_FINISHED", **RUN},
]


async def run(events: Any) -> agui_meta.Store:
    """Run ``events`` through chunk expansion, redaction and the rest of the default stages."""
    store = agui_meta.Store()
    async with agui_meta.wrap(
        events,
        agui_meta.ExpandChunks(),
        redact,  # an async generator function is a stage as it is
        agui_meta.Verify(),
        agui_meta.Accumulate(store),
        agui_meta.Ledger(),
    ) as stream:
        await stream.drain()
    return store


def main(argv: list[str] | None = None) -> int:
    store = anyio.run(run, EVENTS)
    for message in store.messages_wire():
        print(json.dumps(message, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
