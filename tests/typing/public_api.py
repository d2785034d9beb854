# ruff: noqa: F821  (reveal_type is known to type checkers only; this file is never run)
"""What a type checker sees of the public API: checked by ``tests/test_typing.py`` under mypy.

Each ``reveal_type`` is followed by a comment giving the type mypy must reveal; the test reads
both. This file is never imported or run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import Event as CoreEvent
from ag_ui.core import Message as CoreMessage
from ag_ui.core import ToolCall as CoreToolCall

import agui_meta
from agui_meta.events import Event, TextMessageContentEvent


async def redact(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    async for event in events:
        yield event


async def count(updates: AsyncIterator[agui_meta.Update]) -> AsyncIterator[int]:
    async for _ in updates:
        yield 1


async def main(source: list[dict[str, Any]]) -> None:
    stages = agui_meta.DefaultStages()
    reveal_type(stages.store)  # agui_meta._store.Store
    async with agui_meta.wrap(source, *stages) as stream:
        reveal_type(stream)  # agui_meta._pipeline.Pipeline[agui_meta._accumulate.Update]
        async for update in stream:
            reveal_type(update)  # agui_meta._accumulate.Update
            reveal_type(update.event)  # agui_meta._events.Event
    async with agui_meta.wrap(source, agui_meta.ExpandChunks(), redact, *stages) as stream:
        async for update in stream:
            reveal_type(update)  # agui_meta._accumulate.Update
        async for batch in stream.batches():
            reveal_type(batch)  # list[agui_meta._accumulate.Update]
    async with agui_meta.wrap(source) as events:
        async for event in events:
            reveal_type(event)  # agui_meta._events.Event
    async with agui_meta.wrap(source, agui_meta.ExpandChunks(), agui_meta.Verify()) as events:
        async for event in events:
            reveal_type(event)  # agui_meta._events.Event
    async with agui_meta.wrap(source, agui_meta.Accumulate()) as updates:
        async for update in updates:
            reveal_type(update)  # agui_meta._accumulate.Update
    async with agui_meta.wrap(source, *stages, count) as numbers:
        async for number in numbers:
            reveal_type(number)  # Any
    async with agui_meta.wrap(source, agui_meta.Accumulate(), count) as numbers:
        async for number in numbers:
            reveal_type(number)  # int
    content = TextMessageContentEvent(message_id="m", delta="Hi")
    reveal_type(content.delta)  # str
    meter = agui_meta.UsageMeter()
    async with agui_meta.wrap(source, *stages, agui_meta.otel(usage=meter)) as traced:
        reveal_type(traced)  # agui_meta._pipeline.Pipeline[agui_meta._accumulate.Update]
    async with agui_meta.wrap(source, agui_meta.otel(), *stages) as traced:
        reveal_type(traced)  # agui_meta._pipeline.Pipeline[agui_meta._accumulate.Update]
    async with agui_meta.wrap(source, agui_meta.otel()) as observed:
        async for event in observed:
            reveal_type(event)  # Any
    reveal_type(stages.store.messages())  # typing.Iterator[agui_meta._store.MessageItem]
    # ag_ui.core's own types (its unions are long: read through their common members).
    conversation: list[CoreMessage] = agui_meta.to_agui_core(stages.store)
    reveal_type(agui_meta.to_agui_core(stages.store)[0].id)  # str
    core_event: CoreEvent = agui_meta.to_agui_core(content)
    reveal_type(agui_meta.to_agui_core(content).timestamp)  # int | None
    call: CoreToolCall = agui_meta.to_agui_core(stages.store.tool_calls["c"])
    reveal_type(agui_meta.to_agui_core(stages.store.tool_calls["c"]).function.name)  # str
    assert conversation and core_event and call
    result = await agui_meta.HttpAgent("http://127.0.0.1:1/").run_agent()
    reveal_type(result.usage)  # list[agui_meta._tokens.Usage]
    reveal_type(result.to_json())  # bytes
    reveal_type(result.to_builtins())  # dict[str, Any]
    reveal_type(meter.snapshot().total.input_tokens)  # int | None
