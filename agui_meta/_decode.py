"""Decoding AG-UI 1.0 events, with the reference client's decoding policy ("enforcement").

Two paths:

- **Fast path.** One shared typed msgspec decoder (``Decoder(AnyEvent)``, unknown fields
  forbidden). A valid event costs exactly that decode.
- **Slow path**, taken only when the fast path fails. The frame is decoded to plain JSON and
  handled in the reference client's order:

  1. the *compatibility boundary* (client ``middleware/compatibility-boundary.ts``): the
     legacy nulls released producers sent read as absent, legacy ``binary`` content parts
     become media parts, and the retired ``THINKING_*`` events become ``REASONING_*`` events
     (stateful: the ids live in the :class:`EventDecoder`, one per stream);
  2. *enforcement* (client ``enforce/enforce.ts``, ``strip.ts``): an event of unknown ``type`` is
     dropped; unknown properties and unrecognised union members (a role, a part type, a source
     type, a patch op, an outcome type nobody knows) are removed, each with a report naming its
     JSON path; opaque positions (metadata, state, ``rawEvent``, ``value`` …) pass through whole;
  3. the typed conversion: a malformed known field is a :class:`~agui_meta.DecodeError`
     (:class:`~agui_meta.MetadataError` for ``metadata``) naming the event index and the JSON
     path, chained to msgspec's error.

The schema the slow path walks is derived once, at import, from the Structs in ``_events``
(``msgspec.inspect``); there is no hand-kept list of fields.

Where this differs from the reference client, and why:

- A *frame* (bytes, text, :class:`~agui_meta.framing.Frame`) that is not a JSON object or has no
  non-empty string ``type`` is a DecodeError, as in the reference's HTTP transport; an
  in-memory event (a ``dict``) without one is dropped with a report, as its enforcement does.
- ``RUN_STARTED.input.tools``/``context`` are not filled in with ``[]`` (the reference's schema
  default): decoding then encoding gives back the same JSON.
- Metadata keys named ``__proto__`` and integers beyond 2**53 are kept exactly (the
  specification), where JavaScript loses them.
- Strings with lone UTF-16 surrogates and JSON text nested deeper than :data:`MAX_NESTING`
  are DecodeErrors; JavaScript accepts both.
- One error is raised, for the first problem msgspec meets, where zod lists every issue.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from typing import Any, Final, Union

import msgspec
import msgspec.inspect as mi
from msgspec import UNSET

from ._events import EVENT_TYPES, MESSAGE_TYPES, PATCH_OPS, AnyEvent, Event, Message
from ._exceptions import DataError, DecodeError, FramingError, MetadataError, Report
from ._framing import Frame
from ._metadata import key_path
from ._stage import Context, Mode, ReportHandler, Transducer

__all__ = [
    "MAX_NESTING",
    "Enforce",
    "EventDecoder",
    "decode_event",
    "decode_message",
    "encode_event",
    "json_path",
]

_TYPED: Final = msgspec.json.Decoder(AnyEvent)
_TYPED_DECODE: Final = _TYPED.decode
_GENERIC_DECODE: Final = msgspec.json.Decoder().decode
_ENCODER: Final = msgspec.json.Encoder()
_ENCODE: Final = _ENCODER.encode
#: What a msgspec decode raises on bad input (ValidationError is a DecodeError); msgspec raises
#: RecursionError for JSON nested deeper than it recurses.
_MsgspecError: Final = (msgspec.DecodeError, RecursionError)

_MISSING: Final[Any] = object()
_DROP: Final[Any] = object()


# ---------------------------------------------------------------------------------------------
# Nesting depth

#: The deepest nesting of objects and arrays JSON text may hold (the event object itself is
#: level 1); deeper text is a DecodeError. msgspec's own limit is Python's recursion limit less
#: the stack in use, so values just under it would decode and then break whatever recurses
#: over them next (copying metadata into the store, comparing in a patch, the caller's own
#: code). With this bound, everything that gets in can be copied, compared and encoded with
#: stack to spare. (serde_json's default limit is the same 128.)
MAX_NESTING: Final = 128
#: Text shorter than this cannot nest deeper than MAX_NESTING: such frames cost no check.
_DEEP_FROM: Final = 2 * MAX_NESTING
#: Events whose fields are all strings, apart from ``metadata`` and ``rawEvent``: without those
#: two, nothing in them nests, however long the frame (the bulk of a stream: content deltas).
_FLAT: Final = frozenset(
    EVENT_TYPES[name]
    for name in (
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_ARGS",
        "REASONING_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CHUNK",
        "TOOL_CALL_CHUNK",
        "REASONING_MESSAGE_CHUNK",
    )
)
_JSON_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_TOKEN: Final = re.compile(rb'("(?:[^"\\]|\\.)*")(\s*:)?|[\[\]{}]', re.DOTALL)
_NOT_BRACKETS: Final = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEP: Final = tuple(1 if c in b"[{" else -1 if c in b"]}" else 0 for c in range(256))


def _as_bytes(data: Any) -> bytes:
    if type(data) is bytes:
        return data
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)


def _too_deep(data: Any) -> bool:
    """Whether JSON text nests objects and arrays deeper than MAX_NESTING (strings skipped).

    Two byte counts for the common case (they cost about what decoding costs, hence
    :func:`_may_nest`); for text with more brackets than the limit, one regular-expression
    pass that drops strings and a running sum over the brackets left.
    """
    data = _as_bytes(data)
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_NESTING


def _nesting_error(data: Any) -> DecodeError:
    """The error for text :func:`_too_deep` refused, with the top-level member holding it."""
    depth = 0
    key: str | None = None
    data = _as_bytes(data)
    for m in _JSON_TOKEN.finditer(data):
        if m.group(1) is not None:
            if depth == 1 and m.group(2):
                try:
                    key = msgspec.json.decode(m.group(1))
                except msgspec.DecodeError:
                    key = None
            continue
        if data[m.start()] in b"[{":
            depth += 1
            if depth > MAX_NESTING:
                break
        else:
            depth -= 1
    return DecodeError(
        f"a value is nested more than {MAX_NESTING} levels deep (the event object is level 1)",
        path="$" if key is None else json_path(key),
    )


def _may_nest(event: Any) -> bool:
    """Whether a decoded event has a field that can nest (not a string-only content event)."""
    return type(event) not in _FLAT or event.metadata is not UNSET or event.raw_event is not UNSET


def _typed_decode(data: Any) -> Event:
    """The fast typed decode, refusing text nested too deeply (with a msgspec error: the slow
    path then says where)."""
    event: Event = _TYPED_DECODE(data)
    if len(data) > _DEEP_FROM and _may_nest(event) and _too_deep(data):
        raise msgspec.DecodeError("nested too deeply")
    return event


# ---------------------------------------------------------------------------------------------
# JSON paths

#: A path under construction: ``None`` for the root, else ``(parent, key_or_index)``.
_Path = Union[tuple[Any, Union[str, int]], None]


def _show(value: Any, limit: int = 60) -> str:
    """A value as short JSON text for a message (cut at ``limit`` characters)."""
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, ValueError, OverflowError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_path(*segments: str | int) -> str:
    """Render a JSON path the way msgspec does: ``$.messages[0].toolCalls[1]["my key"]``.

    Property names that are identifiers are written ``.name``, others as a JSON string in
    brackets; array indices as ``[i]``.
    """
    path = "$"
    for seg in segments:
        path = f"{path}[{seg}]" if isinstance(seg, int) else key_path(path, seg)
    return path


def _render(path: _Path) -> str:
    segments: list[str | int] = []
    while path is not None:
        path, seg = path
        segments.append(seg if isinstance(seg, (str, int)) else str(seg))
    segments.reverse()
    return json_path(*segments)


# ---------------------------------------------------------------------------------------------
# The schema the slow path walks, derived from the Structs


class _Obj:
    """A Struct: its wire fields (``None`` marks an opaque or scalar value), the required ones."""

    __slots__ = ("cls", "fields", "required")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.fields: dict[str, _Node | None] = {}
        self.required: frozenset[str] = frozenset()


class _Union:
    """A discriminated union of Structs (message roles, parts, sources, outcomes)."""

    __slots__ = ("field", "members")

    def __init__(self, field: str, members: dict[str, _Obj]) -> None:
        self.field = field
        self.members = members


class _Array:
    __slots__ = ("item",)

    def __init__(self, item: _Node) -> None:
        self.item = item


class _Alt:
    """A structural union, such as ``str | list[ContentPart]``: walk the option of the same kind."""

    __slots__ = ("array",)

    def __init__(self, array: _Node) -> None:
        self.array = array


class _Int:
    """An integer position (timestamp, token counts): JSON ``1.0`` reads as ``1``, as in JS."""

    __slots__ = ()


class _Patch:
    """A JSON Patch: spec-open operations (extra members kept); an unknown ``op`` is removed."""

    __slots__ = ()


_Node = Union[_Obj, _Union, _Array, _Alt, _Int, _Patch]
_INT: Final = _Int()
_PATCH: Final = _Patch()
_objects: dict[type, _Obj] = {}


def _obj_node(t: mi.StructType) -> _Obj:
    node = _objects.get(t.cls)
    if node is not None:
        return node
    node = _objects[t.cls] = _Obj(t.cls)
    node.fields = {f.encode_name: _build(f.type) for f in t.fields}
    node.required = frozenset(f.encode_name for f in t.fields if f.required)
    if t.tag_field is not None:
        node.fields[t.tag_field] = None  # the tag: a known property, checked by msgspec
    return node


def _build(t: mi.Type) -> _Node | None:
    if isinstance(t, mi.Metadata):
        if t.extra and t.extra.get("agui") == "json-patch":
            return _PATCH
        return _build(t.type)
    if isinstance(t, mi.StructType):
        return _obj_node(t)
    if isinstance(t, mi.ListType):
        item = _build(t.item_type)
        return None if item is None else _Array(item)
    if isinstance(t, mi.IntType):
        return _INT
    if isinstance(t, mi.UnionType):
        structs = [m for m in t.types if isinstance(m, mi.StructType)]
        if structs and len(structs) == len(t.types):
            fields = {m.tag_field for m in structs}
            if len(fields) != 1 or None in fields:
                raise TypeError(f"untagged union of Structs in the wire model: {t}")
            return _Union(
                structs[0].tag_field,  # type: ignore[arg-type]
                {str(m.tag): _obj_node(m) for m in structs},
            )
        if structs:
            raise TypeError(f"mixed union with Structs in the wire model: {t}")
        for m in t.types:
            if isinstance(m, mi.ListType):
                item = _build(m.item_type)
                if item is not None:
                    return _Alt(_Array(item))
        return None
    return None


_EVENT_NODES: Final[dict[str, _Obj]] = {
    name: _obj_node(mi.type_info(cls))  # type: ignore[arg-type]
    for name, cls in EVENT_TYPES.items()
}


# ---------------------------------------------------------------------------------------------
# The strip walk

#: Report codes of what enforcement strips (their messages get the event type appended).
_STRIP_CODES: Final = frozenset(("unknown-field", "unknown-variant"))


class _Findings:
    """What the slow path found in one event: reports as (code, path, message)."""

    __slots__ = ("drop_reason", "items")

    def __init__(self) -> None:
        self.items: list[tuple[str, _Path, str]] = []
        self.drop_reason = ""

    def add(self, code: str, path: _Path, message: str) -> None:
        self.items.append((code, path, message))


def _walk(value: Any, node: _Node, path: _Path, out: _Findings) -> Any:
    kind = type(node)
    if kind is _Obj:
        return _walk_obj(value, node, path, out)  # type: ignore[arg-type]
    if kind is _Union:
        if type(value) is not dict:
            return value  # wrong shape: the typed conversion rejects it
        field = node.field  # type: ignore[union-attr]
        tag = value.get(field, _MISSING)
        member = node.members.get(tag) if type(tag) is str else None  # type: ignore[union-attr]
        if member is None:
            out.drop_reason = (
                f"no `{field}`" if tag is _MISSING else f"unrecognised `{field}` {_show(tag)}"
            )
            return _DROP
        return _walk_obj(value, member, path, out)
    if kind is _Array:
        if type(value) is not list:
            return value
        item = node.item  # type: ignore[union-attr]
        result = []
        changed = False
        for i, entry in enumerate(value):
            mark = len(out.items)
            child = _walk(entry, item, (path, i), out)
            if child is _DROP:
                del out.items[mark:]
                out.add("unknown-variant", (path, i), f"removed an element ({out.drop_reason})")
                changed = True
                continue
            changed = changed or child is not entry
            result.append(child)
        return result if changed else value
    if kind is _Alt:
        return _walk(value, node.array, path, out) if type(value) is list else value  # type: ignore[union-attr]
    if kind is _Int:
        if type(value) is float and value.is_integer():
            return int(value)
        return value
    # _Patch
    if type(value) is not list:
        return value
    result = []
    changed = False
    for i, op in enumerate(value):
        if type(op) is dict:
            name = op.get("op", _MISSING)
            if not (type(name) is str and name in PATCH_OPS):
                reason = "no `op`" if name is _MISSING else f"unrecognised `op` {_show(name)}"
                out.add("unknown-variant", (path, i), f"removed a JSON Patch operation ({reason})")
                changed = True
                continue
        result.append(op)
    return result if changed else value


def _before(value: dict[Any, Any], stop: Any) -> dict[Any, Any]:
    """The items of ``value`` before the key ``stop`` (a copy, started at the first change)."""
    result = {}
    for key, child in value.items():
        if key is stop:
            break
        result[key] = child
    return result


def _walk_obj(value: Any, node: _Obj, path: _Path, out: _Findings) -> Any:
    if type(value) is not dict:
        return value
    fields = node.fields
    result: dict[Any, Any] | None = None  # copied on the first change only
    for key, child in value.items():
        spec = fields.get(key, _MISSING)
        if spec is None:  # a known scalar or opaque value
            if result is not None:
                result[key] = child
            continue
        if spec is _MISSING:
            out.add("unknown-field", (path, key), f"removed unknown property `{key}`")
            if result is None:
                result = _before(value, key)
            continue
        mark = len(out.items)
        new = _walk(child, spec, (path, key), out)
        if new is _DROP:
            del out.items[mark:]
            if key in node.required:
                out.drop_reason = f"its required `{key}` is unrecognised: {out.drop_reason}"
                return _DROP
            out.add("unknown-variant", (path, key), f"removed `{key}` ({out.drop_reason})")
            if result is None:
                result = _before(value, key)
            continue
        if new is not child and result is None:
            result = _before(value, key)
        if result is not None:
            result[key] = new
    return value if result is None else result


# ---------------------------------------------------------------------------------------------
# The compatibility boundary (legacy producers)

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


def _js_truthy(value: Any) -> bool:
    """JavaScript truthiness of a decoded JSON value (``[]`` and ``{}`` are truthy there)."""
    if value is None or value is False:
        return False
    if isinstance(value, str):
        return value != ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not math.isnan(value) and value != 0  # NaN and 0 are falsy
    return True


def _js_same(a: Any, b: Any) -> bool:
    """JavaScript ``===`` on decoded JSON values: by value for primitives, by identity otherwise."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _content_type_for(mime: str) -> str:
    for prefix in ("image", "audio", "video"):
        if mime.startswith(prefix + "/"):
            return prefix
    return "document"


def _is_legacy_binary(part: Any) -> bool:
    return type(part) is dict and part.get("type") == "binary" and type(part.get("mimeType")) is str


def _matches_modern(part: Any, converted: dict[str, Any], filename: Any) -> bool:
    """Whether ``part`` (an original modern part) already carries what ``converted`` holds."""
    if (
        type(part) is not dict
        or "type" not in part
        or not _js_same(part["type"], converted["type"])
    ):
        return False
    source = part.get("source", _MISSING)
    if type(source) is not dict:
        return False
    want = converted["source"]
    for key in ("type", "value", "mimeType"):
        if key not in source or not _js_same(source[key], want[key]):
            return False
    if not _js_truthy(filename):
        return True
    meta = part.get("metadata")
    return type(meta) is dict and "filename" in meta and _js_same(meta["filename"], filename)


class _Compat:
    """The reference's always-on compatibility boundary, on plain JSON, with its per-stream state."""

    __slots__ = ("message_id", "reasoning_id")

    def __init__(self) -> None:
        self.reasoning_id: str | None = None
        self.message_id: str | None = None

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _omit_null(obj: Any, field: str, path: _Path, out: _Findings, what: str) -> Any:
        if type(obj) is not dict or field not in obj or obj[field] is not None:
            return obj
        out.add("legacy-null", (path, field), f"read `{what}.{field}: null` as absent")
        return {k: v for k, v in obj.items() if k != field}

    @staticmethod
    def _map_array(obj: Any, field: str, fn: Callable[[Any, _Path], Any], path: _Path) -> Any:
        if type(obj) is not dict or type(obj.get(field)) is not list:
            return obj
        original = obj[field]
        entries = [fn(entry, ((path, field), i)) for i, entry in enumerate(original)]
        if all(a is b for a, b in zip(entries, original, strict=True)):
            return obj
        return {**obj, field: entries}

    def _media_nulls(self, message: Any, path: _Path, out: _Findings) -> Any:
        def part_fn(part: Any, where: _Path) -> Any:
            if type(part) is dict and part.get("type") in _MEDIA_PARTS:
                return self._omit_null(part, "metadata", where, out, f"{part['type']} content part")
            return part

        return self._map_array(message, "content", part_fn, path)

    def _binary_parts(self, message: Any, path: _Path, out: _Findings) -> Any:
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
            if _js_truthy(part.get("data")):
                source = {"type": "data", "value": part.get("data"), "mimeType": mime}
            elif _js_truthy(part.get("url")):
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
            if _js_truthy(filename):
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

    def _inbound_message(self, message: Any, path: _Path, out: _Findings) -> Any:
        return self._binary_parts(self._media_nulls(message, path, out), path, out)

    def _mint(self, established: str | None, what: str, out: _Findings) -> str:
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

    def apply(self, event: dict[str, Any], etype: str, out: _Findings) -> dict[str, Any]:
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
                    lambda m, where: self._inbound_message(m, where, out),
                    None,
                )
            )
        elif etype == "RUN_STARTED" and "input" in event:
            event["input"] = self._run_input(event["input"], (None, "input"), out)
        return event

    def _run_input(self, value: Any, path: _Path, out: _Findings) -> Any:
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

    def _thinking(self, event: dict[str, Any], etype: str, out: _Findings) -> dict[str, Any]:
        if etype == "THINKING_START":
            self.reasoning_id = str(uuid.uuid4())
            out.add("legacy-shape", (None, "type"), "translated THINKING_START to REASONING_START")
            if "title" in event:
                title = event.pop("title")
                out.add(
                    "legacy-shape",
                    (None, "title"),
                    f"dropped THINKING_START.title {_show(title)}: REASONING_START has no title",
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


# ---------------------------------------------------------------------------------------------
# Errors

_AT = re.compile(r"^(?P<reason>.*?) - at `(?P<path>\$[^`]*)`$", re.DOTALL)
_MISSING_FIELD = re.compile(r"^Object missing required field `(?P<field>[^`]*)`$")
_GOT = re.compile(r"got `(?P<what>[^`]*)`")


def _conversion_error(exc: msgspec.ValidationError, etype: str) -> DecodeError:
    """A DecodeError (MetadataError for ``metadata``) from msgspec's message, path and all."""
    text = str(exc)
    m = _AT.match(text)
    reason, path = (m["reason"], m["path"]) if m else (text, "$")
    missing = _MISSING_FIELD.match(reason)
    if missing:
        path = path + json_path(missing["field"])[1:]
    if path.endswith(".metadata"):
        got = _GOT.search(reason)
        what = got["what"] if got else "a value that is not an object"
        return MetadataError(
            f"`metadata` must be absent or a JSON object, not {what}, on {etype}",
            path=path,
        )
    return DecodeError(f"{reason} on {etype}", path=path)


def _not_an_object(value: Any) -> DecodeError:
    if value is None:
        what = "null"
    elif isinstance(value, bool):
        what = "a boolean"
    elif isinstance(value, (int, float)):
        what = "a number"
    elif isinstance(value, str):
        what = "a string"
    elif isinstance(value, (list, tuple)):
        what = "an array"
    else:
        what = f"a {type(value).__name__}"
    return DecodeError(f"the frame is not a JSON object (it is {what})", path="$")


# ---------------------------------------------------------------------------------------------
# The decoder


def _is_frame(data: Any) -> bool:
    return hasattr(data, "data") and hasattr(data, "offset") and hasattr(data, "line")


class EventDecoder:
    """Decodes the events of one stream: the fast typed path, and the reference's policy.

    :meth:`decode` accepts JSON ``bytes``/``str`` (one event), a ``dict`` (decoded JSON), an
    :class:`~agui_meta.events.Event` (re-validated: msgspec does not validate on construction), an
    ``ag_ui.core`` pydantic model, or a :class:`~agui_meta.framing.Frame` (whose ``offset``/``line``
    then appear in errors and reports). It returns the event, or ``None`` when the event is
    dropped (an unknown ``type``, reported). A ``dict`` is taken to be decoded JSON: the values
    in opaque positions (metadata values, state, ``value`` …) are used as given, neither copied
    nor checked to be JSON; the dict itself is never modified.

    Problems the reference client only warns about are reported through the context given to
    :meth:`decode` (a pipeline's), or else through the decoder's own context built from ``mode``
    and ``on_report`` (reports become :class:`~agui_meta.AguiWarning` warnings when no callback
    is given). Malformed events raise :class:`~agui_meta.DecodeError` (or a subclass); with the
    decoder's own context in ``"keep_going"`` mode they are reported and ``decode`` returns
    ``None`` instead.

    The event index in errors and reports is the context's ``index`` (a pipeline sets it for
    every event; :meth:`decode_iter` sets it on the decoder's own context). :meth:`decode` alone
    does not count: counting would cost as much as the rest of its work on a valid frame.

    One decoder per stream: it holds the ids of the retired ``THINKING_*`` events it translates.
    """

    __slots__ = ("_compat", "_ctx")

    def __init__(self, *, mode: Mode = "default", on_report: ReportHandler | None = None) -> None:
        self._ctx = Context(mode, on_report)
        self._compat = _Compat()

    @property
    def context(self) -> Context:
        """The decoder's own context, used when :meth:`decode` is given none."""
        return self._ctx

    def reset(self) -> None:
        """Start a new stream: forget the ``THINKING_*`` translation state."""
        self._compat = _Compat()

    def decode(self, data: Any, ctx: Context | None = None) -> Event | None:
        """Decode one event; ``None`` when it is dropped. See the class docstring."""
        if type(data) is bytes:
            try:
                return _typed_decode(data)
            except _MsgspecError:
                return self._slow(data, ctx, None)
        return self._other(data, ctx)

    def decode_iter(self, items: Iterable[Any]) -> Iterator[Event]:
        """Decode a stream of items, yielding its events (dropped ones skipped).

        Errors and reports name each item's 0-based index in ``items``; in ``"keep_going"``
        mode a malformed item is reported and skipped.
        """
        ctx = self._ctx
        decode = self.decode
        try:
            for index, item in enumerate(items):
                ctx.index = index
                event = decode(item)
                if event is not None:
                    yield event
        finally:
            ctx.index = -1

    # -- everything but the fast path ----------------------------------------------------------

    def _other(self, data: Any, ctx: Context | None) -> Event | None:
        """Decode what is not plain ``bytes`` (Frames, dicts, Events, text, models)."""
        if type(data) is Frame or (not isinstance(data, (bytes, str, dict)) and _is_frame(data)):
            buf = data.data
            try:
                return _typed_decode(buf)
            except _MsgspecError:
                return self._slow(buf, ctx, data)
            except TypeError:  # not a buffer
                return self._slow(_BadInput(buf, "frame data"), ctx, data)
        if type(data) is dict:
            etype = data.get("type")
            cls = EVENT_TYPES.get(etype) if type(etype) is str else None
            if cls is not None:
                try:
                    return msgspec.convert(data, cls)
                except _MsgspecError:
                    pass
            return self._slow(data, ctx, None)
        if isinstance(data, Event):
            # msgspec does not validate on construction: re-validate through the wire form.
            try:
                encoded = _ENCODE(data)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                return self._slow(_BadInput(exc, "event"), ctx, None)
            try:
                _typed_decode(encoded)
            except _MsgspecError:
                return self._slow(encoded, ctx, None)
            return data
        if isinstance(data, (str, bytes, bytearray, memoryview)):
            try:
                return _typed_decode(data)
            except _MsgspecError:
                return self._slow(data, ctx, None)
        dump = getattr(data, "model_dump_json", None)
        if callable(dump):  # an ag_ui.core (pydantic) model: through its wire JSON
            try:
                text = dump(by_alias=True)
            except (ValueError, TypeError, RecursionError) as exc:  # pydantic's are ValueErrors
                return self._slow(_BadInput(exc, "model"), ctx, None)
            try:
                return _typed_decode(text)
            except _MsgspecError:
                return self._slow(text, ctx, None)
        return self._slow(data, ctx, None)

    def _slow(self, data: Any, ctx: Context | None, frame: Any) -> Event | None:
        """The slow path, with the location attached to errors; keeps going when asked to."""
        own = ctx is None
        if own:
            ctx = self._ctx
        assert ctx is not None
        index = ctx.index if ctx.index >= 0 else None
        try:
            return self._enforce(data, ctx, index, frame)
        except DataError as exc:
            exc.locate(
                index=index,
                offset=getattr(frame, "offset", None),
                line=getattr(frame, "line", None),
            )
            if own and ctx.mode == "keep_going":
                ctx.skip(exc)
                return None
            raise

    def _enforce(self, data: Any, ctx: Context, index: int | None, frame: Any) -> Event | None:
        if type(data) is _BadInput:
            data.fail()
        framed = isinstance(data, (bytes, str, bytearray, memoryview))
        if framed:
            if len(data) > _DEEP_FROM and _too_deep(data):
                raise _nesting_error(data)
            try:
                value = _GENERIC_DECODE(data)
            except _MsgspecError as exc:
                if getattr(frame, "final_unterminated", False):
                    raise FramingError(
                        f"the stream was truncated inside its last frame (invalid JSON: {exc})"
                    ) from exc
                raise DecodeError(f"invalid JSON: {exc}") from exc
        else:
            value = data
        if type(value) is not dict:
            raise _not_an_object(value)
        etype = value.get("type")
        typed = type(etype) is str and etype != ""
        if not typed and framed:
            # The reference's transport rejects such a frame; in-memory events (dicts) reach
            # enforcement, which drops what it does not recognise.
            raise DecodeError("the frame carries no event type", path="$.type")
        out = _Findings()
        event = self._compat.apply(dict(value), etype if isinstance(etype, str) else "", out)
        node = _EVENT_NODES.get(event["type"]) if typed else None
        if node is None:
            etype = event.get("type")
            out.add(
                "unknown-event-type",
                (None, "type"),
                f"dropped an event of unknown type {_show(etype)}"
                if typed
                else f"dropped an event without a string type (`type` is {_show(etype)})",
            )
            self._deliver(ctx, out, etype if isinstance(etype, str) else _show(etype), index, frame)
            return None
        etype = event["type"]
        stripped = _walk_obj(event, node, None, out)
        self._deliver(ctx, out, etype, index, frame)
        try:
            result: Event = msgspec.convert(stripped, EVENT_TYPES[etype])
        except msgspec.ValidationError as exc:
            raise _conversion_error(exc, etype) from exc
        return result

    @staticmethod
    def _deliver(ctx: Context, out: _Findings, etype: str, index: int | None, frame: Any) -> None:
        offset = getattr(frame, "offset", None)
        line = getattr(frame, "line", None)
        for code, path, message in out.items:
            ctx.deliver(
                Report(
                    code=code,
                    message=f"{message} on {etype}" if code in _STRIP_CODES else message,
                    severity="warning",
                    index=index,
                    offset=offset,
                    line=line,
                    path=_render(path),
                    event_type=etype,
                )
            )


class _BadInput:
    """Input the slow path can only reject (an Event holding a non-JSON value, frame data …)."""

    __slots__ = ("value", "what")

    def __init__(self, value: Any, what: str) -> None:
        self.value = value
        self.what = what

    def fail(self) -> None:
        if isinstance(self.value, BaseException):
            raise DecodeError(
                f"the {self.what} cannot be serialised as JSON: {self.value}", path="$"
            ) from self.value
        raise DecodeError(
            f"the {self.what} is not bytes or text (got {type(self.value).__name__})", path="$"
        )


def decode_event(data: Any) -> Event | None:
    """Decode one event from JSON ``bytes``/``str``, a ``dict``, an Event or an ``ag_ui`` model.

    A malformed field raises a :class:`~agui_meta.DecodeError` (a
    :class:`~agui_meta.MetadataError` for ``metadata``) naming the JSON path. What the reference
    client strips (unknown properties, unrecognised union members) is removed, and the legacy
    shapes it translates are translated, each issued as an :class:`~agui_meta.AguiWarning`.
    Returns ``None`` for an event of unknown ``type`` (dropped, with a warning). A one-shot
    decode has no stream, so errors and reports carry no event index.

    >>> decode_event(b'{"type":"TEXT_MESSAGE_END","messageId":"m"}')
    TextMessageEndEvent(timestamp=UNSET, raw_event=UNSET, metadata=UNSET, subagent_run_id=UNSET, message_id='m')
    """
    if type(data) is bytes:
        try:
            return _typed_decode(data)
        except _MsgspecError:
            pass
    return EventDecoder()._other(data, None)


_MESSAGE_DECODE: Final = msgspec.json.Decoder(Message).decode
_MESSAGE_NODE: Final = _build(mi.type_info(Message))
_MESSAGE_TYPES: Final[dict[str, type[Any]]] = {
    str(t.tag): t.cls
    for t in mi.type_info(Message).types  # type: ignore[attr-defined]
}


def decode_message(data: Any) -> Message:
    """Decode one message (any of the 7 roles) from JSON ``bytes``/``str`` or a ``dict``.

    The policy is the one messages get inside MESSAGES_SNAPSHOT: legacy media-part
    ``metadata: null`` reads as absent and legacy ``binary`` parts are upgraded; unknown
    properties and unrecognised parts are removed; each is issued as an
    :class:`~agui_meta.AguiWarning`. A malformed field, and an unknown ``role``, raise
    :class:`~agui_meta.DecodeError` (a :class:`~agui_meta.MetadataError` for ``metadata``).

    >>> decode_message(b'{"id":"m","role":"user","content":"hi"}')
    UserMessage(id='m', subagent_run_id=UNSET, metadata=UNSET, content='hi', name=UNSET, encrypted_value=UNSET)
    """
    if isinstance(data, (bytes, str)):
        if len(data) > _DEEP_FROM and _too_deep(data):
            raise _nesting_error(data)
        try:
            return _MESSAGE_DECODE(data)
        except _MsgspecError:
            pass
        try:
            value = _GENERIC_DECODE(data)
        except _MsgspecError as exc:
            raise DecodeError(f"invalid JSON: {exc}") from exc
    else:
        value = data
    if type(value) is not dict:
        raise DecodeError("a message must be a JSON object", path="$")
    out = _Findings()
    value = _Compat()._inbound_message(value, None, out)
    assert _MESSAGE_NODE is not None
    stripped = _walk(value, _MESSAGE_NODE, None, out)
    if stripped is _DROP:
        raise DecodeError(f"not a message: {out.drop_reason}", path="$.role")
    EventDecoder._deliver(Context(), out, "a message", None, None)
    try:
        message: Message = msgspec.convert(stripped, MESSAGE_TYPES[stripped["role"]])
    except msgspec.ValidationError as exc:
        raise _conversion_error(exc, "a message") from exc
    return message


def encode_event(event: Event) -> bytes:
    """Encode an event as compact JSON (camelCase, absent optionals omitted).

    >>> from agui_meta import TextMessageEndEvent
    >>> encode_event(TextMessageEndEvent(message_id="m"))
    b'{"type":"TEXT_MESSAGE_END","messageId":"m"}'
    """
    return _ENCODE(event)


class Enforce(Transducer[Any, Event]):
    """The decoding stage: frames, JSON, dicts, Events or ``ag_ui`` models in; valid Events out.

    Applies the reference client's decoding policy (see :class:`EventDecoder`) and reports
    through the pipeline's context; events it drops (unknown types) are not emitted. A valid
    frame costs one msgspec decode.
    """

    def __init__(self) -> None:
        self.decoder = EventDecoder()
        self._other = self.decoder._other
        self._slow = self.decoder._slow

    def feed(self, item: Any) -> None:
        event: Event | None
        if type(item) is Frame:
            data = item.data
            try:
                event = _TYPED_DECODE(data)
            except _MsgspecError:
                event = self._slow(data, self.ctx, item)
                if event is None:
                    return
            else:
                if len(data) > _DEEP_FROM and _may_nest(event) and _too_deep(data):
                    self._slow(data, self.ctx, item)  # raises the error, with where
                    return
        elif type(item) is bytes:
            try:
                event = _typed_decode(item)
            except _MsgspecError:
                event = self._slow(item, self.ctx, None)
                if event is None:
                    return
        else:
            event = self._other(item, self.ctx)
            if event is None:
                return
        self.emit(event)
