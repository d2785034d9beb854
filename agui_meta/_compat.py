"""The reference client's compatibility boundary: what released legacy producers send.

Its client (``middleware/compatibility-boundary.ts``) runs this on every event before
enforcement, and so does the decoder's slow path, on plain JSON: the legacy nulls read as
absent (``rawEvent: null``, ``parentMessageId: null`` …), legacy ``binary`` content parts
become media parts, and the retired ``THINKING_*`` events become ``REASONING_*`` events. That
last is stateful (the ids it mints), so a :class:`Compat` lives as long as one stream. Each
change is a report (``legacy-null``, ``legacy-shape``) naming its JSON path.

>>> out = Findings()
>>> Compat().apply({"type": "TEXT_MESSAGE_END", "messageId": "m", "rawEvent": None},
...                "TEXT_MESSAGE_END", out)
{'type': 'TEXT_MESSAGE_END', 'messageId': 'm'}
>>> [code for code, _, _ in out.items]
['legacy-null']
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

from ._js import js_same, js_truthy
from ._schema import MISSING, Findings, Path, show

__all__ = ["Compat"]

_MEDIA_PARTS: Final = frozenset(("image", "audio", "video", "document"))
_THINKING: Final = frozenset(
    (
        "THINKING_START",
        "THINKING_END",
        "THINKING_TEXT_MESSAGE_START",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END",
    )
)


def _content_type_for(mime: str) -> str:
    for prefix in ("image", "audio", "video"):
        if mime.startswith(prefix + "/"):
            return prefix
    return "document"


def _is_legacy_binary(part: Any) -> bool:
    return type(part) is dict and part.get("type") == "binary" and type(part.get("mimeType")) is str


def _matches_modern(part: Any, converted: dict[str, Any], filename: Any) -> bool:
    """Whether ``part`` (an original modern part) already carries what ``converted`` holds."""
    if type(part) is not dict or "type" not in part or not js_same(part["type"], converted["type"]):
        return False
    source = part.get("source", MISSING)
    if type(source) is not dict:
        return False
    want = converted["source"]
    for key in ("type", "value", "mimeType"):
        if key not in source or not js_same(source[key], want[key]):
            return False
    if not js_truthy(filename):
        return True
    meta = part.get("metadata")
    return type(meta) is dict and "filename" in meta and js_same(meta["filename"], filename)


class Compat:
    """The reference's always-on compatibility boundary, on plain JSON, with its per-stream state."""

    __slots__ = ("message_id", "reasoning_id")

    def __init__(self) -> None:
        self.reasoning_id: str | None = None
        self.message_id: str | None = None

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _omit_null(obj: Any, field: str, path: Path, out: Findings, what: str) -> Any:
        if type(obj) is not dict or field not in obj or obj[field] is not None:
            return obj
        out.add("legacy-null", (path, field), f"read `{what}.{field}: null` as absent")
        return {k: v for k, v in obj.items() if k != field}

    @staticmethod
    def _map_array(obj: Any, field: str, fn: Callable[[Any, Path], Any], path: Path) -> Any:
        if type(obj) is not dict or type(obj.get(field)) is not list:
            return obj
        original = obj[field]
        entries = [fn(entry, ((path, field), i)) for i, entry in enumerate(original)]
        if all(a is b for a, b in zip(entries, original, strict=True)):
            return obj
        return {**obj, field: entries}

    def _media_nulls(self, message: Any, path: Path, out: Findings) -> Any:
        def part_fn(part: Any, where: Path) -> Any:
            if type(part) is dict and part.get("type") in _MEDIA_PARTS:
                return self._omit_null(part, "metadata", where, out, f"{part['type']} content part")
            return part

        return self._map_array(message, "content", part_fn, path)

    def _binary_parts(self, message: Any, path: Path, out: Findings) -> Any:
        if type(message) is not dict or type(message.get("content")) is not list:
            return message
        content = message["content"]
        if not any(type(p) is dict and p.get("type") == "binary" for p in content):
            return message
        upgraded: list[Any] = []
        for i, part in enumerate(content):
            if not _is_legacy_binary(part):
                upgraded.append(part)
                continue
            where = (((path, "content")), i)
            mime = part["mimeType"]
            if js_truthy(part.get("data")):
                source = {"type": "data", "value": part.get("data"), "mimeType": mime}
            elif js_truthy(part.get("url")):
                source = {"type": "url", "value": part.get("url"), "mimeType": mime}
            else:
                out.add(
                    "legacy-shape",
                    where,
                    "a legacy `binary` content part with neither `data` nor `url` cannot be "
                    "converted to a media part",
                )
                upgraded.append(part)
                continue
            converted: dict[str, Any] = {"type": _content_type_for(mime), "source": source}
            filename = part.get("filename")
            if js_truthy(filename):
                converted["metadata"] = {"filename": filename}
            if any(_matches_modern(other, converted, filename) for other in content):
                out.add(
                    "legacy-shape",
                    where,
                    "removed a legacy `binary` content part that duplicates a media part",
                )
                continue
            out.add(
                "legacy-shape",
                where,
                f"converted a legacy `binary` content part to an `{converted['type']}` media part"
                if converted["type"] in ("image", "audio")
                else f"converted a legacy `binary` content part to a `{converted['type']}` media part",
            )
            upgraded.append(converted)
        return {**message, "content": upgraded}

    def inbound_message(self, message: Any, path: Path, out: Findings) -> Any:
        return self._binary_parts(self._media_nulls(message, path, out), path, out)

    def _mint(self, established: str | None, what: str, out: Findings) -> str:
        if established is not None:
            return established
        minted = str(uuid.uuid4())
        out.add(
            "legacy-shape",
            (None, "messageId"),
            f"minted messageId {minted!r} for {what}: no THINKING opener preceded it "
            "(the id is the decoder's invention; verification will reject it)",
        )
        return minted

    # -- the boundary ------------------------------------------------------------------------

    def apply(self, event: dict[str, Any], etype: str, out: Findings) -> dict[str, Any]:
        """Translate legacy shapes; ``event`` is the caller's own shallow copy (edited in place)."""
        if "rawEvent" in event and event["rawEvent"] is None:
            out.add("legacy-null", (None, "rawEvent"), f"read `{etype}.rawEvent: null` as absent")
            del event["rawEvent"]
        if (
            etype in ("RUN_FINISHED", "SUBAGENT_FINISHED")
            and "result" in event
            and event["result"] is None
        ):
            out.add("legacy-null", (None, "result"), f"read `{etype}.result: null` as absent")
            del event["result"]
        if etype in _THINKING:
            return self._thinking(event, etype, out)
        if etype in ("TOOL_CALL_START", "TOOL_CALL_CHUNK"):
            if "parentMessageId" in event and event["parentMessageId"] is None:
                out.add(
                    "legacy-null",
                    (None, "parentMessageId"),
                    f"read `{etype}.parentMessageId: null` as absent",
                )
                del event["parentMessageId"]
        elif etype == "RUN_FINISHED":
            if "outcome" in event and event["outcome"] is None:
                out.add(
                    "legacy-null", (None, "outcome"), "read `RUN_FINISHED.outcome: null` as absent"
                )
                del event["outcome"]
        elif etype == "MESSAGES_SNAPSHOT":
            event.update(
                self._map_array(
                    event,
                    "messages",
                    lambda m, where: self.inbound_message(m, where, out),
                    None,
                )
            )
        elif etype == "RUN_STARTED" and "input" in event:
            event["input"] = self._run_input(event["input"], (None, "input"), out)
        return event

    def _run_input(self, value: Any, path: Path, out: Findings) -> Any:
        value = self._omit_null(value, "forwardedProps", path, out, "RunAgentInput")
        value = self._map_array(
            value,
            "tools",
            lambda tool, where: self._omit_null(tool, "parameters", where, out, "Tool"),
            path,
        )
        value = self._map_array(
            value,
            "resume",
            lambda entry, where: self._omit_null(entry, "payload", where, out, "ResumeEntry"),
            path,
        )
        value = self._map_array(
            value, "messages", lambda m, where: self._media_nulls(m, where, out), path
        )
        return self._map_array(
            value, "messages", lambda m, where: self._binary_parts(m, where, out), path
        )

    def _thinking(self, event: dict[str, Any], etype: str, out: Findings) -> dict[str, Any]:
        if etype == "THINKING_START":
            self.reasoning_id = str(uuid.uuid4())
            out.add("legacy-shape", (None, "type"), "translated THINKING_START to REASONING_START")
            if "title" in event:
                title = event.pop("title")
                out.add(
                    "legacy-shape",
                    (None, "title"),
                    f"dropped THINKING_START.title {show(title)}: REASONING_START has no title",
                )
            event["type"] = "REASONING_START"
            event["messageId"] = self.reasoning_id
        elif etype == "THINKING_TEXT_MESSAGE_START":
            self.message_id = str(uuid.uuid4())
            out.add(
                "legacy-shape",
                (None, "type"),
                "translated THINKING_TEXT_MESSAGE_START to REASONING_MESSAGE_START",
            )
            event["type"] = "REASONING_MESSAGE_START"
            event["messageId"] = self.message_id
            event["role"] = "reasoning"
        elif etype == "THINKING_TEXT_MESSAGE_CONTENT":
            out.add(
                "legacy-shape",
                (None, "type"),
                "translated THINKING_TEXT_MESSAGE_CONTENT to REASONING_MESSAGE_CONTENT",
            )
            event["type"] = "REASONING_MESSAGE_CONTENT"
            event["messageId"] = self._mint(self.message_id, etype, out)
        elif etype == "THINKING_TEXT_MESSAGE_END":
            event["messageId"] = self._mint(self.message_id, etype, out)
            self.message_id = None
            out.add(
                "legacy-shape",
                (None, "type"),
                "translated THINKING_TEXT_MESSAGE_END to REASONING_MESSAGE_END",
            )
            event["type"] = "REASONING_MESSAGE_END"
        else:  # THINKING_END
            event["messageId"] = self._mint(self.reasoning_id, etype, out)
            self.reasoning_id = None
            out.add("legacy-shape", (None, "type"), "translated THINKING_END to REASONING_END")
            event["type"] = "REASONING_END"
        return event
