"""The metadata rules of AG-UI 1.0, as code.

- ``metadata`` is absent or an object, open by key; any JSON value (``null`` included) may sit
  under a key, and no key is ever stripped.
- An item's metadata is the merge of the metadata of every event that built it: key by key, the
  last write wins, and never recursively (a value is replaced whole).
- The key ``"ag-ui"`` is reserved for the protocol; producers SHOULD prefix the keys they create
  with a vendor or application name. agui-meta's convention is ``"<vendor>.<key>"``
  (see :func:`vendor_keys`), and :func:`unprefixed_keys` finds keys that follow no convention.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from msgspec import UNSET, UnsetType

__all__ = [
    "AGUI_METADATA_KEY",
    "CLIENT_METADATA_KEY",
    "copy_json",
    "merge_metadata",
    "unprefixed_keys",
    "vendor_keys",
]

#: The metadata key reserved for the protocol's own use.
AGUI_METADATA_KEY = "ag-ui"
#: The key the reference client owns (activity history control on MESSAGES_SNAPSHOT).
CLIENT_METADATA_KEY = "@ag-ui/client"

_SEPARATORS = "./:"


def merge_metadata(
    existing: dict[str, Any] | UnsetType | None,
    incoming: Mapping[str, Any] | UnsetType | None,
) -> dict[str, Any] | UnsetType:
    """Merge ``incoming`` metadata over ``existing``, key by key, the last write winning.

    An absent ``incoming`` (``UNSET`` or ``None``) returns ``existing`` unchanged (``UNSET``
    when it too is absent). Otherwise the result is a new dict holding ``existing``'s keys
    overlaid with ``incoming``'s: a value is replaced whole, never blended, so an object or an
    array under a key (also under ``"ag-ui"``) replaces what was there. ``null`` values are
    kept. Neither argument is mutated, and the result is never one of them.

    >>> merge_metadata({"a": 1, "u": {"in": 3}}, {"u": {"out": 4}, "b": None})
    {'a': 1, 'u': {'out': 4}, 'b': None}
    >>> merge_metadata(UNSET, {})
    {}
    """
    if incoming is UNSET or incoming is None:
        return UNSET if existing is None else existing
    if existing is UNSET or existing is None:
        return dict(incoming)
    merged = dict(existing)
    merged.update(incoming)
    return merged


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value: new dicts and lists, shared immutable scalars.

    Much cheaper than :func:`copy.deepcopy` for decoded JSON; used so that a later mutation of
    an event's containers cannot reach an item that merged its metadata.
    """
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def vendor_keys(
    vendor: str, values: Mapping[str, Any] | None = None, /, **kw: Any
) -> dict[str, Any]:
    """Namespace an application's metadata keys as ``"<vendor>.<key>"``.

    This is the producer side of the specification's SHOULD rule on keys. Flat prefixed keys
    (rather than one object under the vendor's name) keep each value separately mergeable:
    merging is never recursive, so a nested vendor object would be replaced whole by the next
    event that carries it.

    >>> vendor_keys("acme", latency_ms=12, model="m-1")
    {'acme.latency_ms': 12, 'acme.model': 'm-1'}
    """
    if not vendor or any(c in vendor for c in _SEPARATORS) or vendor == AGUI_METADATA_KEY:
        raise ValueError(
            f"vendor must be a non-empty name without '.', '/' or ':' and not the reserved "
            f"{AGUI_METADATA_KEY!r} key, got {vendor!r}"
        )
    items = dict(values or {}, **kw)
    return {f"{vendor}.{key}": value for key, value in items.items()}


def is_prefixed(key: str) -> bool:
    """Whether a metadata key is the protocol's, or names a vendor before its own name.

    Accepted: ``"ag-ui"``; ``"vendor.key"``, ``"vendor/key"``, ``"vendor:key"`` and
    ``"@scope/package"`` forms, where the vendor part is not empty.
    """
    if key == AGUI_METADATA_KEY:
        return True
    start = 1 if key.startswith("@") else 0
    for i in range(start, len(key)):
        if key[i] in _SEPARATORS:
            return i > start and i < len(key) - 1
    return False


def unprefixed_keys(metadata: Mapping[str, Any] | UnsetType | None) -> list[str]:
    """The keys of ``metadata`` that carry no vendor prefix (for the SHOULD rule's lint).

    >>> unprefixed_keys({"acme.latency": 1, "latency": 2, "ag-ui": {}})
    ['latency']
    """
    if metadata is UNSET or metadata is None:
        return []
    return [key for key in metadata if not is_prefixed(key)]


def fold_metadata(
    items: Iterable[Mapping[str, Any] | UnsetType | None],
) -> dict[str, Any] | UnsetType:
    """Merge a sequence of metadata objects in order (the fold of :func:`merge_metadata`)."""
    result: dict[str, Any] | UnsetType = UNSET
    for item in items:
        result = merge_metadata(result, item)
    return result
