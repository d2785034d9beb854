"""The fast typed decode: one msgspec decode per valid event, and the nesting guard.

Every path that turns JSON text into an :class:`~agui_meta.Event` tries :func:`fast_decode`
first: one shared typed decoder (``Decoder(AnyEvent)``, unknown fields forbidden) and, for the
rare text long enough to nest deeper than :data:`MAX_NESTING`, a bracket count. ``None`` means
"not this way": the slow path in ``_decode`` then decodes the text again, applies the
reference client's policy and says what is wrong, and where.

>>> fast_decode(b'{"type":"TEXT_MESSAGE_END","messageId":"m"}').message_id
'm'
>>> fast_decode(b'{"type":"TEXT_MESSAGE_END","messageId":"m","extra":1}') is None
True
"""

from __future__ import annotations

import json
import re
from collections import deque
from itertools import accumulate
from typing import Any, Final

import msgspec
from msgspec import UNSET

from ._events import EVENT_TYPES, AnyEvent, Event

__all__ = [
    "DEEP_FROM",
    "MAX_NESTING",
    "MSGSPEC_ERRORS",
    "TYPED_DECODE",
    "as_bytes",
    "duplicate_keys",
    "fast_decode",
    "may_nest",
    "may_repeat_keys",
    "too_deep",
]

_TYPED_DECODE: Final = msgspec.json.Decoder(AnyEvent).decode
#: The typed decode itself, without the checks (the C core calls it on text it proved clean).
TYPED_DECODE: Final = _TYPED_DECODE
_PLAIN_DECODE: Final = msgspec.json.Decoder().decode
_ENCODE: Final = msgspec.json.Encoder().encode
#: What a msgspec decode raises on bad input (ValidationError is a DecodeError); msgspec raises
#: RecursionError for JSON nested deeper than it recurses.
MSGSPEC_ERRORS: Final = (msgspec.DecodeError, RecursionError)

#: The deepest nesting of objects and arrays JSON text may hold (the event object itself is
#: level 1); deeper text is a DecodeError. msgspec's own limit is Python's recursion limit less
#: the stack in use, so values just under it would decode and then break whatever recurses
#: over them next (copying metadata into the store, comparing in a patch, the caller's own
#: code). With this bound, everything that gets in can be copied, compared and encoded with
#: stack to spare. (serde_json's default limit is the same 128.)
MAX_NESTING: Final = 128
#: Text shorter than this cannot nest deeper than MAX_NESTING: such frames cost no check.
DEEP_FROM: Final = 2 * MAX_NESTING
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
_NOT_BRACKETS: Final = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEP: Final = tuple(1 if c in b"[{" else -1 if c in b"]}" else 0 for c in range(256))


def as_bytes(data: Any) -> bytes:
    """JSON text as bytes (``str`` encoded as UTF-8, lone surrogates kept for the error)."""
    if type(data) is bytes:
        return data
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)


def too_deep(data: Any) -> bool:
    """Whether JSON text nests objects and arrays deeper than MAX_NESTING (strings skipped).

    Two byte counts for the common case (they cost about what decoding costs, hence
    :func:`may_nest`); for text with more brackets than the limit, one regular-expression
    pass that drops strings and a running sum over the brackets left.
    """
    data = as_bytes(data)
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_NESTING


def may_nest(event: Any) -> bool:
    """Whether a decoded event has a field that can nest (not a string-only content event)."""
    return type(event) not in _FLAT or event.metadata is not UNSET or event.raw_event is not UNSET


def fast_decode(data: Any) -> Event | None:
    """The event JSON text holds, if it is valid and nested within the limit; else ``None``.

    ``data`` is ``bytes``, ``str`` or another buffer; anything else raises ``TypeError``.
    """
    try:
        event: Event = _TYPED_DECODE(data)
    except MSGSPEC_ERRORS:
        return None
    except UnicodeEncodeError:  # a str with a lone surrogate: the slow path says so
        return None
    if len(data) > DEEP_FROM and may_nest(event) and too_deep(data):
        return None
    if type(data) is not bytes:
        data = as_bytes(data)
    colons = data.count(b":")
    if colons > _LEAST_COLONS[type(event)] and may_repeat_keys(data, colons, event):
        return None  # the slow path reports each duplicate key
    return event


# -- duplicate keys: JSON.parse keeps the last value; the earlier one is reported, not lost silently
#
# In JSON text every key is followed by one colon outside strings, and a colon inside a string
# is either itself or the escape \u003a. So, with no such escape, the text's colons are its keys
# plus the colons of its strings. The decoded value, encoded again, has no more: a repeated key
# leaves one entry (and its strings, one value's), and a field the text did not give is left out
# (every Struct of the wire model omits its defaults; tests/test_hostile.py checks that). Text
# whose count equals the value's therefore holds no key twice in one object; any other text
# gets the exact scan (duplicate_keys), which also clears text that merely gave a default
# explicitly. The counts are passes in C; the usual event pays one encode.

#: Per event class, the fewest colons its valid text has: one per key it must hold (``type``
#: and the required fields). Text with no more colons than that repeats no key.
_LEAST_COLONS: Final = {
    cls: 1
    + len(cls.__struct_fields__)
    - len(cls.__struct_defaults__)
    + cls.__struct_defaults__.count(msgspec.NODEFAULT)
    for cls in EVENT_TYPES.values()
}
_COLON_ESCAPES: Final = (b"\\u003a", b"\\u003A")


def may_repeat_keys(data: bytes, colons: int, value: Any) -> bool:
    """Whether JSON text that decoded to ``value`` (an event or a plain value) holds a key twice
    in one object, when it has ``colons`` colons: ``False`` is certain, ``True`` calls for
    :func:`duplicate_keys`.
    """
    if _COLON_ESCAPES[0] in data or _COLON_ESCAPES[1] in data:
        return True
    try:
        if colons == _ENCODE(value).count(b":"):
            return False
        if type(value) not in _LEAST_COLONS:
            return True
        # A typed event leaves out a default the text gave; the plain value keeps it.
        return colons != _ENCODE(_PLAIN_DECODE(data)).count(b":")
    except (*MSGSPEC_ERRORS, TypeError, ValueError, UnicodeError):
        return True


class _Pairs(list):  # type: ignore[type-arg]
    """A JSON object as the list of its (key, value) pairs, duplicates kept."""

    __slots__ = ()


def duplicate_keys(data: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """Every key that JSON text repeats within one object: ``(path to the object, key)``.

    ``[]`` for text that is not JSON (the decoders say what is wrong with it) or nests too
    deeply to scan. The path is a tuple of keys and indices from the root.

    >>> duplicate_keys(b'{"a": 1, "b": {"c": 1, "c": 2}, "a": 3}')
    [((), 'a'), (('b',), 'c')]
    """
    try:
        value = json.loads(as_bytes(data), object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return []
    found: list[tuple[tuple[str | int, ...], str]] = []
    todo: deque[tuple[tuple[str | int, ...], Any]] = deque([((), value)])
    while todo:  # breadth first: the outermost first, each level in the text's order
        path, node = todo.popleft()
        if type(node) is _Pairs:
            seen: set[str] = set()
            for key, child in node:
                if key in seen:
                    found.append((path, key))
                seen.add(key)
                todo.append(((*path, key), child))
        elif type(node) is list:
            todo.extend(((*path, i), child) for i, child in enumerate(node))
    return found
