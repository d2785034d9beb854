"""Wrap an async generator of AG-UI events and print each item as it completes, with its metadata.

    python examples/print_items.py

The generator stands in for an agent. agui-meta decodes what it yields (wire dicts here;
``agui_meta`` events or ``ag_ui.core`` models work the same), expands chunks, checks the order
of events, and accumulates every item — a message, a tool call, a tool result — merging the
metadata of all the events that built it, as the AG-UI 1.0 specification says: key by key,
the last write winning. A tool call keeps its own metadata; it does not land on its message.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio

import agui_meta

RUN = {"threadId": "thread-1", "runId": "run-1"}


async def agent() -> AsyncIterator[dict[str, Any]]:
    """A stand-in for an agent: a short answer, a tool call and its result."""
    yield {"type": "RUN_STARTED", **RUN}
    # The provider's name and model are known when the message starts ...
    yield {
        "type": "TEXT_MESSAGE_START",
        "messageId": "msg-1",
        "role": "assistant",
        "metadata": {"acme.provider": "openai", "acme.model": "gpt-4.1"},
    }
    for word in ("Let me ", "check ", "the weather."):
        await anyio.sleep(0.001)  # a real agent would be waiting for its model here
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg-1", "delta": word}
    # ... the finish reason and token counts only when it ends: both end up on the message.
    yield {
        "type": "TEXT_MESSAGE_END",
        "messageId": "msg-1",
        "metadata": {"acme.finish_reason": "tool_calls", "acme.output_tokens": 7},
    }
    # Chunks are shorthand for START / ARGS / END; the chunk's metadata goes to the tool call.
    yield {
        "type": "TOOL_CALL_CHUNK",
        "toolCallId": "call-1",
        "toolCallName": "get_weather",
        "parentMessageId": "msg-1",
        "delta": '{"city": ',
        "metadata": {"acme.tool_use_id": "tu_1"},
    }
    yield {"type": "TOOL_CALL_CHUNK", "toolCallId": "call-1", "delta": '"Lisbon"}'}
    yield {
        "type": "TOOL_CALL_RESULT",  # a result closes the chunked call, then makes a tool message
        "messageId": "result-1",
        "toolCallId": "call-1",
        "content": '{"high_c": 24, "sky": "clear"}',
        "metadata": {"weather.source": "open-meteo", "weather.latency_ms": 84},
    }
    yield {
        "type": "RUN_FINISHED",
        **RUN,
        "usage": [{"provider": "openai", "model": "gpt-4.1", "inputTokens": 412}],
    }


def describe(item: agui_meta.MessageItem | agui_meta.ToolCallItem) -> str:
    """One line for a completed item."""
    if isinstance(item, agui_meta.ToolCallItem):
        return f"tool call {item.id}: {item.name}({item.arguments})"
    return f"{item.role} message {item.id}: {item.content}"


async def print_items(events: AsyncIterator[Any]) -> agui_meta.DefaultStages[agui_meta.Store]:
    """Print each item of ``events`` as it completes; return the stages (store, ledger)."""
    stages = agui_meta.DefaultStages()  # expand chunks, verify, accumulate, ledger
    async with agui_meta.wrap(events, *stages) as stream:
        async for update in stream:  # one Update(event, item, done, metadata) per event
            if update.done and update.item is not None:
                print(describe(update.item))
                # The item's metadata merged from every event that built it, as of this event.
                metadata = None if update.metadata is None else dict(update.metadata)
                print(f"  metadata: {json.dumps(metadata)}")
    return stages


def main(argv: list[str] | None = None) -> int:
    stages = anyio.run(print_items, agent())
    (run,) = stages.ledger.runs
    print(f"run {run.run_id}: {run.status}, {len(stages.store)} messages in the store")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
