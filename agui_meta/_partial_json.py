"""Partial JSON: the arguments of a tool call that is still streaming, completed and parsed.

The reference client hands its subscribers ``partialToolCallArgs``, the arguments streamed so
far completed into JSON text by the ``untruncate-json`` package: an unfinished string is
closed, an unfinished number gets a digit, ``tr`` becomes ``true``, open arrays and objects are
closed, and an unfinished member (a key without its value, an escape cut in two, a dangling
comma) is dropped. :func:`complete_json` does the same, character for character, so that its
text is the reference's on every prefix; :func:`parse_partial_json` decodes it. Neither
raises: text that is not the beginning of JSON comes back as it is (and parses to ``None``).
The reference's quirk is kept: after a ``\\uXXXX`` escape the next character is read as
escaped too, so a string whose last character is such an escape is not seen to end (its
completion does not parse, and ``None`` is what an item shows until the call ends).

Costs O(n) in the length of the text, so callers compute it when asked (a store item on
access), never on every delta.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

import msgspec

__all__ = ["complete_json", "parse_partial_json"]

_decode = msgspec.json.Decoder().decode

# The parser's states (one a nesting level, innermost last).
_TOP: Final = 0
_STRING: Final = 1
_ESCAPE: Final = 2  # after a backslash in a string
_UNICODE: Final = 3  # inside \uXXXX
_NUMBER: Final = 4
_NUMBER_DIGIT: Final = 5  # after '-' or '.': a digit must follow
_NUMBER_EXPONENT: Final = 6  # after 'e': a sign or a digit must follow
_TRUE: Final = 7
_FALSE: Final = 8
_NULL: Final = 9
_ARRAY_VALUE: Final = 10  # '[' or ',' seen: a value (or ']') comes next
_ARRAY_COMMA: Final = 11
_OBJECT_KEY: Final = 12
_OBJECT_COLON: Final = 13
_OBJECT_VALUE: Final = 14
_OBJECT_COMMA: Final = 15

# What an unfinished level adds at the end.
_CLOSERS: Final = {
    _STRING: '"',
    _NUMBER_DIGIT: "0",
    _NUMBER_EXPONENT: "0",
    _ARRAY_VALUE: "]",
    _ARRAY_COMMA: "]",
    _OBJECT_KEY: "}",
    _OBJECT_COLON: "}",
    _OBJECT_VALUE: "}",
    _OBJECT_COMMA: "}",
}
_WORDS: Final = {_TRUE: "true", _FALSE: "false", _NULL: "null"}
_STARTS: Final = {
    '"': _STRING,
    "-": _NUMBER_DIGIT,
    "t": _TRUE,
    "f": _FALSE,
    "n": _NULL,
    "[": _ARRAY_VALUE,
    "{": _OBJECT_KEY,
}
_WHITESPACE: Final = " \r\n\t"

# Why the text is cut back (to where a member or an escape began).
_CUT_ITEM: Final = 1
_CUT_ESCAPE: Final = 2


def complete_json(text: str) -> str:
    """``text`` (the beginning of a JSON document) completed into JSON text.

    >>> complete_json('{"city": "Lis')
    '{"city": "Lis"}'
    >>> complete_json('{"days": [1, 2, tr')
    '{"days": [1, 2, true]}'
    >>> complete_json('{"a": 1, "b')
    '{"a": 1}'
    """
    stack = [_TOP]
    cut: int | None = None  # where to cut the text back to, the depth then, and why
    cut_depth = 0
    cut_reason = 0
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        state = stack[-1]
        if state == _STRING:
            if char == '"':
                stack.pop()
            elif char == "\\":
                if cut is None:
                    cut, cut_depth, cut_reason = i, len(stack), _CUT_ESCAPE
                stack.append(_ESCAPE)
        elif state == _ESCAPE:
            if char == "u":
                stack.append(_UNICODE)
            else:
                if cut_reason == _CUT_ESCAPE:
                    cut = None
                    cut_reason = 0
                stack.pop()
        elif state == _UNICODE:
            if i - text.rfind("u", 0, i + 1) == 4:  # the fourth hex digit
                if cut_reason == _CUT_ESCAPE:
                    cut = None
                    cut_reason = 0
                stack.pop()
        elif state == _NUMBER:
            if char == ".":
                stack[-1] = _NUMBER_DIGIT
            elif char in "eE":
                stack[-1] = _NUMBER_EXPONENT
            elif not "0" <= char <= "9":
                stack.pop()
                continue  # the character belongs to the level below
        elif state == _NUMBER_DIGIT:
            stack[-1] = _NUMBER
        elif state == _NUMBER_EXPONENT:
            stack[-1] = _NUMBER_DIGIT if char in "+-" else _NUMBER
        elif state in _WORDS:
            if not "a" <= char <= "z":
                stack.pop()
                continue
        elif state == _TOP:
            _start(stack, char)
        elif state == _ARRAY_VALUE:
            if char == "]":
                stack.pop()
            elif char not in _WHITESPACE:
                if cut_reason == _CUT_ITEM:
                    cut = None
                    cut_reason = 0
                stack[-1] = _ARRAY_COMMA
                _start(stack, char)
        elif state == _ARRAY_COMMA:
            if char == "]":
                stack.pop()
            elif char == ",":
                if cut is None:
                    cut, cut_depth, cut_reason = i, len(stack), _CUT_ITEM
                stack[-1] = _ARRAY_VALUE
        elif state == _OBJECT_KEY:
            if char == "}":
                stack.pop()
            elif char == '"':
                if cut is None:
                    cut, cut_depth, cut_reason = i, len(stack), _CUT_ITEM
                stack[-1] = _OBJECT_COLON
                stack.append(_STRING)
        elif state == _OBJECT_COLON:
            if char == ":":
                stack[-1] = _OBJECT_VALUE
        elif state == _OBJECT_VALUE:
            if char not in _WHITESPACE:
                if cut_reason == _CUT_ITEM:
                    cut = None
                    cut_reason = 0
                stack[-1] = _OBJECT_COMMA
                _start(stack, char)
        elif state == _OBJECT_COMMA:
            if char == "}":
                stack.pop()
            elif char == ",":
                if cut is None:
                    cut, cut_depth, cut_reason = i, len(stack), _CUT_ITEM
                stack[-1] = _OBJECT_KEY
        i += 1
    if cut is not None:
        del stack[cut_depth:]
        out = [text[:cut]]
    else:
        out = [text]
    for state in reversed(stack):
        closer = _CLOSERS.get(state)
        if closer is not None:
            out.append(closer)
        else:
            word = _WORDS.get(state)
            if word is not None:  # the rest of the word, after what the text has of it
                out.append(word[len(text) - text.rfind(word[0]) :])
    return "".join(out)


def _start(stack: list[int], char: str) -> None:
    """A value begins with ``char`` (anything else starts nothing)."""
    if "0" <= char <= "9":
        stack.append(_NUMBER)
    else:
        state = _STARTS.get(char)
        if state is not None:
            stack.append(state)


def parse_partial_json(text: str) -> Any:
    """The value of :func:`complete_json` of ``text``; ``None`` when that does not parse.

    As ``JSON.parse`` reads it: a ``\\uXXXX`` escape of half a surrogate pair (an emoji cut
    in two) is a one-character string, not an error; a number is a double (an integer past
    2**53 is the double nearest to it). A value nested deeper than the decoders go (about a
    thousand levels) is ``None`` too, where ``JSON.parse`` would read it.
    """
    completed = complete_json(text)
    try:
        value = _decode(completed)
    except RecursionError:
        return None
    except msgspec.DecodeError:
        try:  # the standard library's decoder takes lone surrogate escapes
            value = json.loads(completed)
        except (ValueError, RecursionError):
            return None
    # Every number is a double to JSON.parse: an integer past 2**53 (16 digits at least) is
    # read as the double nearest to it, one past the doubles as an infinity.
    return _as_doubles(value) if _LONG_DIGITS.search(completed) else value


_SAFE: Final = 2**53
_LONG_DIGITS: Final = re.compile(r"[0-9]{16}")


def _double(n: int) -> int | float:
    try:
        return int(float(n))
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _as_doubles(value: Any) -> Any:
    """``value`` (freshly decoded, changed in place) with each integer beyond ±2**53 as the
    double JSON.parse reads. A walk with a stack: a value nested deeper than Python's recursion
    limit is still a value."""
    if type(value) is int:
        return value if -_SAFE <= value <= _SAFE else _double(value)
    stack = [value]
    while stack:
        node = stack.pop()
        pairs = (
            enumerate(node) if type(node) is list else node.items() if type(node) is dict else ()
        )
        for key, item in pairs:
            kind = type(item)
            if kind is int:
                if not -_SAFE <= item <= _SAFE:
                    node[key] = _double(item)
            elif kind is list or kind is dict:
                stack.append(item)
    return value
