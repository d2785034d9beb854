"""Argument types the commands share: each checks its value when the command line is parsed.

A value that cannot be used is an argparse error (the command's usage, then
``agui-meta COMMAND: error: argument --X: why``, exit status 2), never a traceback later:
a number of seconds that is not a positive finite number, JSON nested too deeply, a header
httpx cannot send, a URL with a port above 65535.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "add_header_argument",
    "count",
    "duration",
    "header",
    "http_url",
    "json_value",
    "limit",
    "name",
    "port",
    "seconds",
    "shards",
    "tool",
]

#: Counts above this are refused (a batch or a shard count of 10^20 is a typo).
MAX_COUNT = 1 << 31

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
_URL_CHARACTERS = re.compile(r"[^\s\x00-\x1f\x7f-\x9f]+")


def _positive(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"not a positive, finite {what}: {text!r}")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds (``nan``, ``inf``, ``0`` and ``-1`` are not)."""
    return _positive(text, "number of seconds")


def positive(text: str) -> float:
    """A positive, finite number (a factor, say)."""
    return _positive(text, "number")


def count(text: str) -> int:
    """A whole number from 1 to :data:`MAX_COUNT`."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"not a count from 1 to {MAX_COUNT}: {text!r}")
    return value


def _no_constant(name: str) -> Any:
    raise argparse.ArgumentTypeError(f"{name} is not JSON")


def json_value(text: str) -> Any:
    """A JSON text (``NaN`` and ``Infinity`` are not JSON; nesting is bounded by Python's)."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise argparse.ArgumentTypeError("not JSON: nested too deeply") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def tool(text: str) -> dict[str, Any]:
    """A tool, as JSON: an object with a string ``name``."""
    value = json_value(text)
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise argparse.ArgumentTypeError(
            'not a tool: a JSON object {"name", "description", "parameters"} is expected'
        )
    return value


def header(text: str) -> tuple[str, str]:
    """``NAME: VALUE`` (spaces around either optional): a header name (an HTTP token) and a
    value of printable ASCII. Every refusal says ``not a header 'NAME: VALUE'``, then why."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        why = f"{text!r} has no NAME before a ':'" if sep else f"{text!r} has no ':'"
    elif not _TOKEN.fullmatch(name):
        why = f"{name!r} is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)"
    elif not _HEADER_VALUE.fullmatch(value):
        why = f"the value of {name} must be printable ASCII (HTTP headers are), got {value!r}"
    else:
        return name, value
    raise argparse.ArgumentTypeError(f"not a header 'NAME: VALUE': {why}")


def add_header_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``-H/--header 'NAME: VALUE'``, repeatable, checked when parsed (:func:`header`):
    ``args.header`` is the list of ``(name, value)`` pairs given."""
    parser.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        type=header,
        help="a request header (repeat for several)",
    )


def name(text: str) -> str:
    """A name shown to people (an agent's, say): not empty, no control character, at most
    256 characters."""
    if not text.strip() or len(text) > 256 or not text.isprintable():
        raise argparse.ArgumentTypeError(
            f"not a name (1 to 256 printable characters, not only spaces): {text!r}"
        )
    return text


def http_url(text: str) -> str:
    """An ``http://`` or ``https://`` URL with a host, and a port from 0 to 65535 if any."""
    if not _URL_CHARACTERS.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a URL (empty, or a space or a control character in it): {text!r}"
        )
    try:
        parts = urlsplit(text)
        port = parts.port  # raises for a port out of range or not a number
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a URL: {text!r} ({exc})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"not an http:// or https:// URL: {text!r}")
    if not parts.hostname:
        raise argparse.ArgumentTypeError(f"no host in the URL {text!r}")
    del port
    return text


def limit(text: str) -> int:
    """A whole number from 0 (``0``: no limit)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a count: {text!r}")
    return value


def duration(text: str) -> float:
    """A finite number of seconds, ``0`` or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"not a finite number of seconds, 0 or more: {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port (0 to 65535): {text!r}")
    return value


#: Virtual shards of a namespace at most: each is a stream a worker scans for leases.
MAX_SHARDS = 1 << 16


def shards(text: str) -> int:
    """A number of virtual shards, 1 to :data:`MAX_SHARDS`."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"not a number of shards from 1 to {MAX_SHARDS}: {text!r}")
    return value
