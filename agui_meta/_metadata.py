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

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, overload

import msgspec
from msgspec import UNSET, UnsetType

from . import _speedups
from ._events import (
    AssistantMessage,
    Event,
    Message,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    protocol_class,
)
from ._exceptions import UsageError

__all__ = [
    "AGUI_METADATA_KEY",
    "CLIENT_METADATA_KEY",
    "MergedMetadata",
    "copy_json",
    "copy_wire",
    "enc_hook",
    "fold_metadata",
    "is_prefixed",
    "iter_metadata",
    "key_path",
    "merge_metadata",
    "unprefixed_keys",
    "vendor_keys",
]

#: The metadata key reserved for the protocol's own use.
AGUI_METADATA_KEY = "ag-ui"
#: The key the reference client owns (activity history control on MESSAGES_SNAPSHOT).
CLIENT_METADATA_KEY = "@ag-ui/client"

_SEPARATORS = "./:"


class MetadataWrites(dict[str, Any]):
    """Every write of one lineage of merges: each key's values with the merge that wrote them.

    The dict itself holds the cells: ``self[key]`` is ``(version, value)`` for a key written
    once, else ``[versions, values]`` (two lists in step). Its keys are in the order of their
    first write, which is the order of a JavaScript spread (a key written again keeps its
    place), so the first ``n`` keys are those of the version that had ``n``; ``version``
    counts the merges (the newest one's number). One object per lineage, not a record and
    its dict: one object fewer for the cyclic collector to walk per item with metadata.
    """

    __slots__ = ("version",)

    def __init__(self) -> None:
        super().__init__()
        self.version = 0

    def write(self, incoming: Mapping[str, Any]) -> None:
        version = self.version = self.version + 1
        cells = self
        for key, value in incoming.items():
            cell = cells.get(key)
            if cell is None:
                cells[key] = (version, value)
            elif type(cell) is tuple:
                cells[key] = [[cell[0], version], [cell[1], value]]
            else:
                cell[0].append(version)
                cell[1].append(value)


class MergedMetadata(Mapping[str, Any]):
    """An item's merged metadata as of one merge: a read-only mapping, ``{}``-like.

    What :func:`merge_metadata` gives when merging into a ``MergedMetadata``: every version
    shares one record of the writes, so a merge costs O(1) amortised per key it writes, in time
    and in memory, however many keys the item already has and however many earlier versions
    are still held (each :class:`~agui_meta.Update` holds the version as of its event). A
    lookup costs O(1) on the newest version and O(log w) on an older one (``w``: the writes of
    that key). Keys iterate in the order of their first write, as JavaScript's spread orders
    them; ``dict(metadata)`` gives a plain dict, and ``==`` compares with any mapping.

    >>> first = merge_metadata(MergedMetadata(), {"a": 1})
    >>> second = merge_metadata(first, {"a": 2, "b": None})
    >>> first, second
    ({'a': 1}, {'a': 2, 'b': None})
    >>> second == {"a": 2, "b": None} and dict(first) == {"a": 1}
    True

    Merging into a version that is not the newest of its lineage starts a new record (O(size)
    once); merging into the newest, as an item does, never copies.
    """

    __slots__ = ("_size", "_version", "_writes")

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        writes = self._writes = MetadataWrites()
        if initial:
            writes.write(initial)
        self._version = writes.version
        self._size = len(writes)

    @classmethod
    def _at(cls, writes: MetadataWrites) -> MergedMetadata:
        view = cls.__new__(cls)
        view._writes = writes
        view._version = writes.version
        view._size = len(writes)
        return view

    def __getitem__(self, key: str) -> Any:
        cell = self._writes[key]
        version = self._version
        if type(cell) is tuple:
            if cell[0] > version:
                raise KeyError(key)
            return cell[1]
        versions, values = cell
        if version >= versions[-1]:
            return values[-1]
        if versions[0] > version:
            raise KeyError(key)
        return values[bisect_right(versions, version) - 1]

    def __contains__(self, key: object) -> bool:
        cell = self._writes.get(key)  # type: ignore[call-overload]
        if cell is None:
            return False
        first = cell[0] if type(cell) is tuple else cell[0][0]
        return first <= self._version  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        # A list of the keys, not a view of the record: a merge while the caller iterates
        # must not change what it iterates (nor raise for a dict resized during iteration).
        return iter(list(islice(self._writes, self._size)))

    def _plain_dict(self) -> dict[str, Any]:
        """``dict(self)``, built without the ``Mapping`` protocol's call per key."""
        writes = self._writes
        if self._version != writes.version:
            return {key: self[key] for key in islice(writes, self._size)}
        # The newest version: every key's latest write is its value, and the record holds
        # the keys in the order of their first write.
        return {
            key: cell[1] if type(cell) is tuple else cell[1][-1] for key, cell in writes.items()
        }

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return repr(dict(self))  # printed as the object it stands for

    def __reduce__(self) -> tuple[Any, ...]:
        return (MergedMetadata, (dict(self),))

    def merge(self, incoming: Mapping[str, Any]) -> MergedMetadata:
        """This version with ``incoming`` merged over it (see :func:`merge_metadata`)."""
        writes = self._writes
        if self._version != writes.version:
            # An older version: its own record from here on (the newer versions keep theirs).
            return MergedMetadata(dict(self)).merge(incoming)
        writes.write(incoming)
        return MergedMetadata._at(writes)


def enc_hook(value: Any) -> Any:
    """A msgspec ``enc_hook`` that encodes a :class:`MergedMetadata` as the object it is.

    >>> msgspec.json.encode(MergedMetadata({"a": 1}), enc_hook=enc_hook)
    b'{"a":1}'
    """
    if type(value) is MergedMetadata:
        return value._plain_dict()  # dict(value), without the Mapping protocol's call per key
    raise NotImplementedError(f"Encoding objects of type {type(value).__name__} is unsupported")


@overload
def merge_metadata(
    existing: MergedMetadata, incoming: Mapping[str, Any] | UnsetType | None
) -> MergedMetadata: ...
@overload
def merge_metadata(
    existing: dict[str, Any] | UnsetType | None,
    incoming: Mapping[str, Any] | UnsetType | None,
) -> dict[str, Any] | None: ...
def merge_metadata(
    existing: Mapping[str, Any] | UnsetType | None,
    incoming: Mapping[str, Any] | UnsetType | None,
) -> Mapping[str, Any] | None:
    """Merge ``incoming`` metadata over ``existing``, key by key, the last write winning.

    An absent ``incoming`` (``None``, or the wire model's ``UNSET``) returns ``existing``
    unchanged (``None`` when it too is absent). Otherwise the result holds ``existing``'s keys overlaid with
    ``incoming``'s: a value is replaced whole, never blended, so an object or an array under a
    key (also under ``"ag-ui"``) replaces what was there. ``null`` values are kept. Neither
    argument is mutated, and the result is never one of them (except that merging nothing
    into a :class:`MergedMetadata`, which is immutable, gives it back).

    The result is a new dict, O(size) to build; when ``existing`` is a
    :class:`MergedMetadata` it is the next version of it, O(len(incoming)): this is how the
    accumulate stage merges, so an item's metadata as of every event costs O(1) per key
    written however large it grows.

    >>> merge_metadata({"a": 1, "u": {"in": 3}}, {"u": {"out": 4}, "b": None})
    {'a': 1, 'u': {'out': 4}, 'b': None}
    >>> merge_metadata(None, {})
    {}
    >>> merge_metadata(None, None) is None
    True
    """
    merged = merge_wire(existing, incoming)  # type: ignore[arg-type]
    return None if merged is UNSET else merged


@overload
def merge_wire(
    existing: MergedMetadata, incoming: Mapping[str, Any] | UnsetType | None
) -> MergedMetadata: ...
@overload
def merge_wire(
    existing: dict[str, Any] | UnsetType | None,
    incoming: Mapping[str, Any] | UnsetType | None,
) -> dict[str, Any] | UnsetType: ...
def merge_wire(
    existing: Mapping[str, Any] | UnsetType | None,
    incoming: Mapping[str, Any] | UnsetType | None,
) -> Mapping[str, Any] | UnsetType:
    """:func:`merge_metadata` for the wire model: absent is ``UNSET`` (what an event's
    ``metadata`` field takes), so the result can go straight into a new event."""
    if incoming is UNSET or incoming is None:
        return UNSET if existing is None else existing
    if type(existing) is MergedMetadata:
        return existing.merge(incoming) if incoming else existing
    if existing is UNSET or existing is None:
        return dict(incoming)
    merged = dict(existing)
    merged.update(incoming)
    return merged


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value: new dicts and lists, shared immutable scalars.

    Much cheaper than :func:`copy.deepcopy` for decoded JSON; used so that a later mutation of
    an event's containers cannot reach an item that merged its metadata. The specification of
    :data:`copy_json`, which is the C core's when in use (``_loop.h``'s ``json_copy``: exact
    dicts and lists copied there, anything else given to this function).
    """
    if isinstance(value, dict):
        return {k: _copy_json(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) if isinstance(v, (dict, list)) else v for v in value]
    if type(value) is MergedMetadata:  # its plain dict (no Mapping protocol call per key)
        return {
            k: _copy_json(v) if isinstance(v, (dict, list)) else v
            for k, v in value._plain_dict().items()
        }
    return value


#: :func:`_copy_json`, the C core's way when it is in use.
copy_json: Callable[[Any], Any] = _copy_json
if _speedups.NATIVE is not None:
    _speedups.NATIVE.configure_copy(_copy_json)
    copy_json = _speedups.NATIVE.copy_json


def copy_wire(value: Any) -> Any:
    """:func:`copy_json`, with a :class:`MergedMetadata` at any depth copied as the plain dict
    it stands for: a store item's wire form built of its own containers
    (``MessageItem._wire_view``) copied in one go, as :meth:`~agui_meta.MessageItem.to_wire`
    copies it member by member. The C core, when in use, does the same (``_native.c``'s
    ``wire_copy``, which calls this for what it does not take).
    """
    if isinstance(value, dict):
        return {k: copy_wire(v) if isinstance(v, _COPIED) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_wire(v) if isinstance(v, _COPIED) else v for v in value]
    if type(value) is MergedMetadata:
        return {
            k: copy_wire(v) if isinstance(v, _COPIED) else v for k, v in value._plain_dict().items()
        }
    return value


_COPIED = (dict, list, MergedMetadata)


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
        raise UsageError(
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
) -> dict[str, Any] | None:
    """Merge a sequence of metadata objects in order (the fold of :func:`merge_metadata`)."""
    result: dict[str, Any] | None = None
    for item in items:
        result = merge_metadata(result, item)
    return result


_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def key_path(base: str, key: str) -> str:
    """The JSON path of ``key`` under the object at ``base``, spelled as msgspec spells paths.

    >>> key_path("$.metadata", "latency")
    '$.metadata.latency'
    >>> key_path("$.metadata", "acme.latency")
    '$.metadata["acme.latency"]'
    """
    if _IDENT.fullmatch(key):
        return f"{base}.{key}"
    return f"{base}[{msgspec.json.encode(key).decode()}]"


def _message_metadata(
    messages: Sequence[Message], base: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, message in enumerate(messages):
        if message.metadata is not UNSET:
            yield f"{base}[{i}].metadata", message.metadata
        if type(message) is AssistantMessage and message.tool_calls is not UNSET:
            for j, call in enumerate(message.tool_calls):
                if call.metadata is not UNSET:
                    yield f"{base}[{i}].toolCalls[{j}].metadata", call.metadata


def iter_metadata(event: Event) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every metadata object an event carries, with its JSON path, in document order.

    The carriers: the event itself; the messages (all roles) and their tool calls inside
    MESSAGES_SNAPSHOT and RUN_STARTED.input; the tools and resume entries of
    RUN_STARTED.input; the interrupts of a RUN_FINISHED interrupt outcome. (A content part's
    ``metadata`` is any JSON value, not a metadata object, and is not listed.)

    >>> from agui_meta.events import TextMessageEndEvent
    >>> list(iter_metadata(TextMessageEndEvent(message_id="m", metadata={"a": 1})))
    [('$.metadata', {'a': 1})]
    """
    if event.metadata is not UNSET:
        yield "$.metadata", event.metadata
    kind = protocol_class(type(event))
    if kind is MessagesSnapshotEvent:
        yield from _message_metadata(event.messages, "$.messages")  # type: ignore[attr-defined]
    elif kind is RunStartedEvent:
        run_input = event.input  # type: ignore[attr-defined]
        if run_input is UNSET:
            return
        yield from _message_metadata(run_input.messages, "$.input.messages")
        if run_input.tools is not UNSET:
            for i, tool in enumerate(run_input.tools):
                if tool.metadata is not UNSET:
                    yield f"$.input.tools[{i}].metadata", tool.metadata
        if run_input.resume is not UNSET:
            for i, entry in enumerate(run_input.resume):
                if entry.metadata is not UNSET:
                    yield f"$.input.resume[{i}].metadata", entry.metadata
    elif kind is RunFinishedEvent:
        outcome = event.outcome  # type: ignore[attr-defined]
        if type(outcome) is RunFinishedInterruptOutcome:
            for i, interrupt in enumerate(outcome.interrupts):
                if interrupt.metadata is not UNSET:
                    yield f"$.outcome.interrupts[{i}].metadata", interrupt.metadata
