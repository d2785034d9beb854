"""Byte-level framing: SSE, JSON-lines and JSON-array byte streams to frames (the JSON text of one event).

Sans-IO: :class:`SSEDecoder`, :class:`JsonLinesDecoder` and :class:`AutoDecoder` are fed
``bytes`` chunks of any size, split anywhere, and return the frames completed so far; thin
async wrappers (:func:`aiter_frames`, :func:`aiter_file_frames`, :func:`aiter_httpx_frames`)
drive them from an async byte source. :func:`encode_sse` and :func:`encode_jsonl` go the other
way. Decoding a frame's JSON into an event is the next layer's job.

Policies shared by the decoders (``max_frame_size`` and ``unterminated`` are keywords of each):

- **Invalid UTF-8 is an error.** The standards decode with replacement characters; we report
  instead, because a replaced character is silently changed input. Payload bytes are kept as
  ``bytes`` (so the JSON decoder reads them without a copy) and validated where they are
  framed: ``bytes.isascii()`` (a fast C scan) accepts the common case, and only a non-ASCII
  line is decoded strictly to prove it is UTF-8. A failure raises :class:`FramingError` with
  the ``offset`` and ``line`` of the offending line. With ``invalid_utf8="frame"`` (what a
  keep-going pipeline uses) the decoder raises nothing for it: the frame is returned as
  received, with ``Frame.error`` set to that error, and decoding carries on with the next one.
- **Bounded memory.** The bytes held for the frame being read (the SSE data collected so far
  plus the line not finished yet; for JSON lines, the line) never exceed ``max_frame_size``
  (default 10 MiB, the limit of the reference client's SSE buffer). Input that would need more
  raises :class:`FramingError` at once, even before the line's end has arrived. The limit is
  applied to whole lines, so the outcome never depends on how the input was chunked.
- **Nothing is silently dropped at the end.** A final frame that is not terminated (SSE data
  with no blank line after it, a JSON line with no newline) is returned by ``close()`` with
  ``Frame.final_unterminated`` set, so that a JSON error in it can say "truncated". This is what
  the reference client does for SSE (``parseSSEStream`` parses the remaining buffer when the
  response completes), although the WHATWG rules would discard such an event. Pass
  ``unterminated="error"`` to get a :class:`FramingError` instead.
- **Errors come after the frames before them.** When a chunk completes some frames and then
  hits a :class:`FramingError`, ``feed()`` returns those frames and the next call raises the
  error, so the frames delivered never depend on how the input was chunked. A decoder that
  raised is unusable: every later call raises the same error. After ``close()``, feeding
  raises :class:`UsageError`.

A file per piece: ``_common`` (the frame, the options and limits the decoders share), ``_sse``,
``_jsonl``, ``_array`` (a decoder and an encoder per format), ``_detect`` (the format of a stream
from its first bytes or its media type), ``_framer`` (chunks to frames, for every source),
``_body`` (an HTTP body's content encoding undone in bounded steps), ``_aio`` (async sources).
"""

from __future__ import annotations

from ._aio import aiter_file_frames, aiter_frames, aiter_httpx_frames
from ._array import JsonArrayDecoder
from ._body import ACCEPT_ENCODING, aiter_body
from ._common import (
    DEFAULT_MAX_FRAME_SIZE,
    Format,
    Frame,
    FrameDecoder,
    Ignored,
    InvalidUtf8,
    PayloadRun,
    Unterminated,
)
from ._detect import (
    ACCEPT,
    JSONL_MEDIA_TYPE,
    JSONL_MEDIA_TYPES,
    PROTOBUF_MEDIA_TYPE,
    SSE_MEDIA_TYPE,
    AutoDecoder,
    detect_format,
    make_decoder,
    media_format,
    media_type,
)
from ._framer import SLICE, Framer
from ._jsonl import JsonLinesDecoder, encode_jsonl
from ._sse import RETRY_MAX, SSEDecoder, encode_sse, ignored_report

__all__ = [
    "ACCEPT",
    "ACCEPT_ENCODING",
    "DEFAULT_MAX_FRAME_SIZE",
    "JSONL_MEDIA_TYPE",
    "JSONL_MEDIA_TYPES",
    "PROTOBUF_MEDIA_TYPE",
    "RETRY_MAX",
    "SLICE",
    "SSE_MEDIA_TYPE",
    "AutoDecoder",
    "Format",
    "Frame",
    "FrameDecoder",
    "Framer",
    "Ignored",
    "InvalidUtf8",
    "JsonArrayDecoder",
    "JsonLinesDecoder",
    "PayloadRun",
    "SSEDecoder",
    "Unterminated",
    "aiter_body",
    "aiter_file_frames",
    "aiter_frames",
    "aiter_httpx_frames",
    "detect_format",
    "encode_jsonl",
    "encode_sse",
    "ignored_report",
    "make_decoder",
    "media_format",
    "media_type",
]
