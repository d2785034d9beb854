"""A scripted AG-UI agent for demonstrations and tests: no model, no network, no key.

:func:`agent` answers the last user message word by word (a pause of ``delay`` seconds between
two words, ``forwardedProps.delay``, 0.05 by default), calls a ``count_words`` tool and gives
its result, and keeps a turn counter in the state. Serve it with the gateway::

    agui-meta gateway --agent demo=agui_meta.demo:agent --port 8000
    agui-meta run http://127.0.0.1:8000/agents/demo/run -m "hello there" --thread-id t1
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio

from ._events import RunAgentInput

__all__ = ["agent"]

#: The longest pause between two words, and the most words answered.
MAX_DELAY = 5.0
MAX_WORDS = 200


def _last_user_text(input: RunAgentInput) -> str:
    for message in reversed(input.messages):
        content = getattr(message, "content", None)
        if message.role == "user" and isinstance(content, str):
            return content
    return ""


async def agent(input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    """Echo the last user message word by word, with a tool call and a turn counter."""
    props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
    delay = props.get("delay", 0.05)
    if not isinstance(delay, (int, float)) or not 0 <= delay <= MAX_DELAY:
        delay = 0.05
    state = input.state if isinstance(input.state, dict) else {}
    turns = state.get("turns", 0)
    turn = (turns if isinstance(turns, int) else 0) + 1
    text = _last_user_text(input)
    words = text.split()[:MAX_WORDS]
    tid, rid = input.thread_id, input.run_id
    message_id, call_id = f"demo-{uuid.uuid4().hex[:12]}", f"call-{uuid.uuid4().hex[:12]}"
    yield {"type": "RUN_STARTED", "threadId": tid, "runId": rid}
    yield {
        "type": "TEXT_MESSAGE_START",
        "messageId": message_id,
        "role": "assistant",
        "metadata": {"demo.model": "scripted"},
    }
    for n, word in enumerate(["You", "said:", *words] if words else ["Say", "something!"]):
        await anyio.sleep(delay)
        yield {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": message_id,
            "delta": word if n == 0 else f" {word}",
        }
    yield {"type": "TEXT_MESSAGE_END", "messageId": message_id}
    arguments = json.dumps({"text": text[:1000]})
    yield {
        "type": "TOOL_CALL_START",
        "toolCallId": call_id,
        "toolCallName": "count_words",
        "parentMessageId": message_id,
    }
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments}
    yield {"type": "TOOL_CALL_END", "toolCallId": call_id}
    yield {
        "type": "TOOL_CALL_RESULT",
        "messageId": f"{call_id}-result",
        "toolCallId": call_id,
        "content": str(len(text.split())),
    }
    yield {"type": "STATE_SNAPSHOT", "snapshot": {**state, "turns": turn}}
    yield {"type": "RUN_FINISHED", "threadId": tid, "runId": rid}
