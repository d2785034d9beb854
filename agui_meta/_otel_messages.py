"""A run's input and output messages in the GenAI semantic conventions' JSON shapes.

``otel(capture_content=True)`` puts them on the run's span as ``gen_ai.input.messages`` and
``gen_ai.output.messages`` (the schemas ``gen-ai-input-messages.json`` and
``gen-ai-output-messages.json`` of ``open-telemetry/semantic-conventions-genai``): a list of
``{"role", "parts", ...}`` objects whose parts are ``text``, ``reasoning``, ``tool_call``
(``id``, ``name``, ``arguments``) and ``tool_call_response`` (``id``, ``response``); an output
message also has a ``finish_reason``. The input is RUN_STARTED's ``input.messages``; the output
is what the run's own agent (not its subagents) streamed: its assistant text messages and its
tool calls, in the order they started.

Bounded: the text collected for the output stops growing at ``limit`` characters per run (the
attribute is cut to the same length anyway), so a run's captured content costs O(limit).
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import UnsetType

from ._events import (
    AssistantMessage,
    DeveloperMessage,
    Message,
    ReasoningMessage,
    TextPart,
    ToolMessage,
)

__all__ = ["OutputMessages", "input_messages"]

_ROLES = {"developer": "system", "reasoning": "assistant"}


def _content(content: Any) -> list[dict[str, Any]]:
    """Text parts of a message's content (a string or a list of content parts); the other
    parts by their modality, without their data."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, TextPart):
                parts.append({"type": "text", "content": part.text})
            else:
                modality = type(part).__struct_config__.tag
                parts.append({"type": "blob", "modality": modality or "unknown"})
    return parts


def _message(message: Message) -> dict[str, Any] | None:
    role = _ROLES.get(message.role, message.role)
    parts: list[dict[str, Any]]
    if isinstance(message, ToolMessage):
        text = message.content if isinstance(message.content, str) else None
        response: Any = text if text is not None else _content(message.content)
        parts = [{"type": "tool_call_response", "id": message.tool_call_id, "response": response}]
    elif isinstance(message, ReasoningMessage):
        parts = [{"type": "reasoning", "content": message.content}]
    elif isinstance(message, AssistantMessage):
        parts = [] if isinstance(message.content, UnsetType) else _content(message.content)
        if not isinstance(message.tool_calls, UnsetType):
            for call in message.tool_calls:
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call.id,
                        "name": call.function.name,
                        "arguments": _arguments(call.function.arguments),
                    }
                )
    elif isinstance(message, DeveloperMessage) or hasattr(message, "content"):
        parts = _content(getattr(message, "content", None))
    else:  # pragma: no cover - every message class has content
        return None
    if not parts:  # an activity message carries no conversation content
        return None
    return {"role": role, "parts": parts}


def _arguments(arguments: str) -> Any:
    """Tool-call arguments as the object they encode (the conventions' ``arguments`` is an
    object), else as the string sent."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def input_messages(messages: list[Message]) -> str:
    """``gen_ai.input.messages``: RUN_STARTED's input messages as the conventions' JSON."""
    out = [m for m in (_message(message) for message in messages) if m is not None]
    return _dump(out)


class OutputMessages:
    """What the run's own agent streamed: assistant text by message, and tool calls."""

    __slots__ = ("budget", "last_chunk", "order")

    def __init__(self, limit: int) -> None:
        self.budget = limit
        self.last_chunk: str | None = None  # the text chunk stream being continued
        # Message id -> its parts: text deltas (a list to join) and tool calls (dicts).
        self.order: dict[str, list[Any]] = {}

    def open(self, message_id: str) -> None:
        self.order.setdefault(message_id, [])

    def text(self, message_id: str, delta: str) -> None:
        parts = self.order.get(message_id)
        if parts is None or self.budget <= 0:
            return
        delta = delta[: self.budget]
        self.budget -= len(delta)
        if parts and isinstance(parts[-1], list):
            parts[-1].append(delta)
        else:
            parts.append([delta])

    def tool_call(self, message_id: str | None, call_id: str, name: str, arguments: Any) -> None:
        key = message_id if message_id is not None else f"\0{call_id}"
        part: dict[str, Any] = {"type": "tool_call", "id": call_id, "name": name}
        if isinstance(arguments, str):
            cut = arguments[: max(self.budget, 0)]
            self.budget -= len(cut)
            part["arguments"] = _arguments(cut) if cut == arguments else cut
        self.order.setdefault(key, []).append(part)

    def to_json(self, finish_reason: str) -> str:
        """``gen_ai.output.messages``."""
        out: list[dict[str, Any]] = []
        for parts in self.order.values():
            rendered = [
                {"type": "text", "content": "".join(p)} if isinstance(p, list) else p for p in parts
            ]
            if rendered:
                out.append({"role": "assistant", "parts": rendered, "finish_reason": finish_reason})
        return _dump(out)
