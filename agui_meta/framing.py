"""Framing: the byte layer under the events, sans-IO, for those who work with frames themselves.

:func:`agui_meta.wrap` frames its input by itself (SSE or JSON lines, told apart by the first
bytes); this module is for code that needs the frames: :class:`SSEDecoder`,
:class:`JsonLinesDecoder` and :class:`JsonArrayDecoder` (``feed(bytes) -> list[Frame]``,
``close()``), each :class:`Frame`
with its byte offset and line; :func:`detect_format`; async iterators over a byte stream, a
file or an ``httpx`` response; and the encoders back to SSE and JSON lines.

>>> from agui_meta.framing import SSEDecoder
>>> [frame.data for frame in SSEDecoder().feed(b'data: {"type": "RAW"}\\n\\n')]
[b'{"type": "RAW"}']
"""

from __future__ import annotations

from ._framing import (
    DEFAULT_MAX_FRAME_SIZE,
    Format,
    Frame,
    Ignored,
    JsonArrayDecoder,
    JsonLinesDecoder,
    PayloadRun,
    SSEDecoder,
    aiter_file_frames,
    aiter_frames,
    aiter_httpx_frames,
    detect_format,
    encode_jsonl,
    encode_sse,
)
from ._public import public_module as _public_module

__all__ = (
    "DEFAULT_MAX_FRAME_SIZE",
    "Format",
    "Frame",
    "Ignored",
    "JsonArrayDecoder",
    "JsonLinesDecoder",
    "PayloadRun",
    "SSEDecoder",
    "aiter_file_frames",
    "aiter_frames",
    "aiter_httpx_frames",
    "detect_format",
    "encode_jsonl",
    "encode_sse",
)

_public_module(__name__, globals(), __all__)


def __dir__() -> list[str]:
    return list(__all__)
