"""The schema the decoder's slow path walks, derived from the Structs, and the strip walk.

The reference client's enforcement (``enforce/enforce.ts``, ``strip.ts``) removes unknown
properties and unrecognised union members (a role, a part type, a source type, a patch op, an
outcome type nobody knows), each with a report naming its JSON path; opaque positions
(metadata, state, ``rawEvent``, ``value`` …) pass through whole. :func:`walk_obj` does that on
plain JSON, over a tree of nodes built once, at import, from the Structs in ``_events``
(``msgspec.inspect``): there is no hand-kept list of fields.

>>> out = Findings()
>>> walk_obj({"type": "TEXT_MESSAGE_END", "messageId": "m", "x": 1},
...          EVENT_NODES["TEXT_MESSAGE_END"], None, out)
{'type': 'TEXT_MESSAGE_END', 'messageId': 'm'}
>>> [(code, render(path)) for code, path, _ in out.items]
[('unknown-field', '$.x')]
"""

from __future__ import annotations

from typing import Any, Final, Union

import msgspec
import msgspec.inspect as mi

from ._events import EVENT_TYPES, PATCH_OPS, AgentCapabilities, Message
from ._metadata import key_path

__all__ = [
    "CAPABILITIES_NODE",
    "DROP",
    "EVENT_NODES",
    "MESSAGE_NODE",
    "MISSING",
    "STRIP_CODES",
    "Findings",
    "Path",
    "json_path",
    "render",
    "show",
    "walk",
    "walk_obj",
]

#: A value that is not there (a missing property), distinct from every JSON value.
MISSING: Final[Any] = object()
#: What :func:`walk` returns for a union member nobody knows: its container drops it.
DROP: Final[Any] = object()


#: A path under construction: ``None`` for the root, else ``(parent, key_or_index)``.
Path = Union[tuple[Any, Union[str, int]], None]


def show(value: Any, limit: int = 60) -> str:
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


def render(path: Path) -> str:
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
    node.fields = {f.encode_name: build(f.type) for f in t.fields}
    node.required = frozenset(f.encode_name for f in t.fields if f.required)
    if t.tag_field is not None:
        node.fields[t.tag_field] = None  # the tag: a known property, checked by msgspec
    return node


def build(t: mi.Type) -> _Node | None:
    if isinstance(t, mi.Metadata):
        if t.extra and t.extra.get("agui") == "json-patch":
            return _PATCH
        return build(t.type)
    if isinstance(t, mi.StructType):
        return _obj_node(t)
    if isinstance(t, mi.ListType):
        item = build(t.item_type)
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
                item = build(m.item_type)
                if item is not None:
                    return _Alt(_Array(item))
        return None
    return None


EVENT_NODES: Final[dict[str, _Obj]] = {
    name: _obj_node(mi.type_info(cls))  # type: ignore[arg-type]
    for name, cls in EVENT_TYPES.items()
}
#: The walk's schema of :class:`~agui_meta.events.AgentCapabilities` (``HttpAgent.capabilities()``).
CAPABILITIES_NODE: Final[_Obj] = _obj_node(mi.type_info(AgentCapabilities))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# The strip walk

#: Report codes of what enforcement strips (their messages get the event type appended).
STRIP_CODES: Final = frozenset(("unknown-field", "unknown-variant"))


class Findings:
    """What the slow path found in one event: reports as (code, path, message)."""

    __slots__ = ("drop_reason", "items")

    def __init__(self) -> None:
        self.items: list[tuple[str, Path, str]] = []
        self.drop_reason = ""

    def add(self, code: str, path: Path, message: str) -> None:
        self.items.append((code, path, message))


def walk(value: Any, node: _Node, path: Path, out: Findings) -> Any:
    kind = type(node)
    if kind is _Obj:
        return walk_obj(value, node, path, out)  # type: ignore[arg-type]
    if kind is _Union:
        if type(value) is not dict:
            return value  # wrong shape: the typed conversion rejects it
        field = node.field  # type: ignore[union-attr]
        tag = value.get(field, MISSING)
        member = node.members.get(tag) if type(tag) is str else None  # type: ignore[union-attr]
        if member is None:
            out.drop_reason = (
                f"no `{field}`" if tag is MISSING else f"unrecognised `{field}` {show(tag)}"
            )
            return DROP
        return walk_obj(value, member, path, out)
    if kind is _Array:
        if type(value) is not list:
            return value
        item = node.item  # type: ignore[union-attr]
        result = []
        changed = False
        for i, entry in enumerate(value):
            mark = len(out.items)
            child = walk(entry, item, (path, i), out)
            if child is DROP:
                del out.items[mark:]
                out.add("unknown-variant", (path, i), f"removed an element ({out.drop_reason})")
                changed = True
                continue
            changed = changed or child is not entry
            result.append(child)
        return result if changed else value
    if kind is _Alt:
        return walk(value, node.array, path, out) if type(value) is list else value  # type: ignore[union-attr]
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
            name = op.get("op", MISSING)
            if not (type(name) is str and name in PATCH_OPS):
                reason = "no `op`" if name is MISSING else f"unrecognised `op` {show(name)}"
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


def walk_obj(value: Any, node: _Obj, path: Path, out: Findings) -> Any:
    if type(value) is not dict:
        return value
    fields = node.fields
    result: dict[Any, Any] | None = None  # copied on the first change only
    for key, child in value.items():
        spec = fields.get(key, MISSING)
        if spec is None:  # a known scalar or opaque value
            if result is not None:
                result[key] = child
            continue
        if spec is MISSING:
            out.add("unknown-field", (path, key), f"removed unknown property `{key}`")
            if result is None:
                result = _before(value, key)
            continue
        mark = len(out.items)
        new = walk(child, spec, (path, key), out)
        if new is DROP:
            del out.items[mark:]
            if key in node.required:
                out.drop_reason = f"its required `{key}` is unrecognised: {out.drop_reason}"
                return DROP
            out.add("unknown-variant", (path, key), f"removed `{key}` ({out.drop_reason})")
            if result is None:
                result = _before(value, key)
            continue
        if new is not child and result is None:
            result = _before(value, key)
        if result is not None:
            result[key] = new
    return value if result is None else result


#: The node of a message (any role), for :func:`~agui_meta.decode_message`.
MESSAGE_NODE: Final = build(mi.type_info(Message))
