"""Consumers a Python user might write by hand instead of using agui-meta (issue 23's contenders).

Each takes the same SSE bytes in the same chunks as the agui-meta rows, splits them at blank
lines, decodes each ``data:`` payload and assembles the messages and tool calls in plain dicts:
no verification, no metadata, no reports, no limits on hostile input. What they do is a small
part of what agui-meta does; they are here to say what a per-event cost the full specification
is measured against.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

__all__ = ["consume", "decoder"]


def decoder(kind: str) -> Callable[[bytes], Any]:
    """The payload's decode: ``msgspec`` or ``json`` to dicts, ``ag_ui`` to ag_ui.core models."""
    if kind == "msgspec":
        return msgspec.json.Decoder().decode
    if kind == "json":
        return json.loads
    if kind == "ag_ui":
        import pydantic
        from ag_ui.core import Event

        adapter = pydantic.TypeAdapter(Event)

        def as_dict(payload: bytes) -> Any:
            model = adapter.validate_json(payload)
            return {"type": model.type, **model.__dict__}

        return as_dict
    raise ValueError(kind)


def consume(chunks: Iterable[bytes], decode: Callable[[bytes], Any]) -> dict[str, dict[str, Any]]:
    """The SSE chunks' messages and tool calls by id, as a hand-written consumer builds them."""
    messages: dict[str, dict[str, Any]] = {}
    calls: dict[str, dict[str, Any]] = {}
    held = b""
    for chunk in chunks:
        blocks = (held + chunk).split(b"\n\n")
        held = blocks.pop()
        for block in blocks:
            if not block.startswith(b"data: "):
                continue
            event = decode(block[6:])
            kind = event["type"]
            if kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
                key = event.get("messageId") or event.get("message_id")
                messages.setdefault(key, {"parts": []})["parts"].append(event.get("delta"))
            elif kind == "TOOL_CALL_ARGS":
                key = event.get("toolCallId") or event.get("tool_call_id")
                calls.setdefault(key, {"parts": []})["parts"].append(event.get("delta"))
            elif kind in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
                key = event.get("messageId") or event.get("message_id")
                messages[key] = {"role": event.get("role"), "parts": []}
            elif kind == "TOOL_CALL_START":
                key = event.get("toolCallId") or event.get("tool_call_id")
                calls[key] = {
                    "name": event.get("toolCallName") or event.get("tool_call_name"),
                    "parts": [],
                }
            elif kind in ("TEXT_MESSAGE_END", "REASONING_MESSAGE_END"):
                key = event.get("messageId") or event.get("message_id")
                item = messages.setdefault(key, {"parts": []})
                item["content"] = "".join(map(str, item["parts"]))
            elif kind == "TOOL_CALL_END":
                key = event.get("toolCallId") or event.get("tool_call_id")
                item = calls.setdefault(key, {"parts": []})
                item["arguments"] = "".join(map(str, item["parts"]))
    return {"messages": messages, "calls": calls}
