"""Decoding AG-UI 1.0 events, with the reference client's decoding policy ("enforcement").

Two paths:

- **Fast path** (``_fastdecode``). One shared typed msgspec decoder (``Decoder(AnyEvent)``,
  unknown fields forbidden) and the nesting guard. A valid event costs exactly that decode.
- **Slow path**, taken only when the fast path fails. The frame is decoded to plain JSON and
  handled in the reference client's order:

  1. the *compatibility boundary* (``_compat``; client ``middleware/compatibility-boundary.ts``): the
     legacy nulls released producers sent read as absent, legacy ``binary`` content parts
     become media parts, and the retired ``THINKING_*`` events become ``REASONING_*`` events
     (stateful: the ids live in the :class:`EventDecoder`, one per stream);
  2. *enforcement* (``_schema``; client ``enforce/enforce.ts``, ``strip.ts``): an event of unknown ``type`` is
     dropped; unknown properties and unrecognised union members (a role, a part type, a source
     type, a patch op, an outcome type nobody knows) are removed, each with a report naming its
     JSON path; opaque positions (metadata, state, ``rawEvent``, ``value`` …) pass through whole;
  3. the typed conversion: a malformed known field is a :class:`~agui_meta.DecodeError`
     (:class:`~agui_meta.MetadataError` for ``metadata``) naming the event index and the JSON
     path, chained to msgspec's error.

The schema the slow path walks is derived once, at import, from the Structs in ``_events``
(``msgspec.inspect``); there is no hand-kept list of fields. This module holds the decoder
itself, the errors it raises and the :class:`Enforce` stage.

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

import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

import msgspec

from ._compat import Compat
from ._events import EVENT_TYPES, MESSAGE_TYPES, Event, Message
from ._exceptions import DataError, DecodeError, FramingError, MetadataError, Report
from ._fastdecode import (
    DEEP_FROM,
    MAX_NESTING,
    MSGSPEC_ERRORS,
    as_bytes,
    duplicate_keys,
    fast_decode,
    may_repeat_keys,
    too_deep,
)
from ._framing import Frame
from ._schema import (
    DROP,
    EVENT_NODES,
    MESSAGE_NODE,
    STRIP_CODES,
    Findings,
    Path,
    json_path,
    render,
    show,
    walk,
    walk_obj,
)
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

_GENERIC_DECODE: Final = msgspec.json.Decoder().decode
_ENCODE: Final = msgspec.json.Encoder().encode
_JSON_TOKEN: Final = re.compile(rb'("(?:[^"\\]|\\.)*")(\s*:)?|[\[\]{}]', re.DOTALL)


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


def _nesting_error(data: Any) -> DecodeError:
    """The error for text :func:`~agui_meta._fastdecode.too_deep` refused, with the top-level member holding it."""
    depth = 0
    key: str | None = None
    data = as_bytes(data)
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
        # The default context is made when first used: a pipeline's decoder (Enforce's) gives
        # every call the pipeline's, and would hold one more context for nothing.
        self._ctx = None if mode == "default" and on_report is None else Context(mode, on_report)
        self._compat = Compat()

    @property
    def context(self) -> Context:
        """The decoder's own context, used when :meth:`decode` is given none."""
        if self._ctx is None:
            self._ctx = Context()
        return self._ctx

    def reset(self) -> None:
        """Start a new stream: forget the ``THINKING_*`` translation state."""
        self._compat = Compat()

    def decode(self, data: Any, ctx: Context | None = None) -> Event | None:
        """Decode one event; ``None`` when it is dropped. See the class docstring."""
        if type(data) is bytes:
            event = fast_decode(data)
            return self._slow(data, ctx, None) if event is None else event
        return self._other(data, ctx)

    def decode_iter(self, items: Iterable[Any]) -> Iterator[Event]:
        """Decode a stream of items, yielding its events (dropped ones skipped).

        Errors and reports name each item's 0-based index in ``items``; in ``"keep_going"``
        mode a malformed item is reported and skipped.
        """
        ctx = self.context
        decode = self.decode
        try:
            for index, item in enumerate(items):
                ctx.index = index
                event = decode(item)
                if event is not None:
                    yield event
        finally:
            ctx.index = -1
            ctx.finish()

    # -- everything but the fast path ----------------------------------------------------------

    def _other(self, data: Any, ctx: Context | None) -> Event | None:
        """Decode what is not plain ``bytes`` (Frames, dicts, Events, text, models)."""
        if type(data) is Frame or (not isinstance(data, (bytes, str, dict)) and _is_frame(data)):
            buf = data.data
            try:
                event = fast_decode(buf)
            except TypeError:  # not a buffer
                return self._slow(_BadInput(buf, "frame data"), ctx, data)
            return self._slow(buf, ctx, data) if event is None else event
        if type(data) is dict:
            # Through its JSON text, so that a dict meets every limit bytes meet (nesting,
            # lone surrogates, integer size, duplicate keys aside: a dict has none).
            try:
                encoded = _ENCODE(data)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                return self._slow(_BadInput(exc, "dict"), ctx, None)
            event = fast_decode(encoded)
            if event is not None:
                return event
            if len(encoded) > DEEP_FROM and too_deep(encoded):
                return self._slow(_BadInput(_TooDeep(), "dict"), ctx, None)
            return self._slow(data, ctx, None)
        if isinstance(data, Event):
            # msgspec does not validate on construction: re-validate through the wire form.
            try:
                encoded = _ENCODE(data)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                return self._slow(_BadInput(exc, "event"), ctx, None)
            if fast_decode(encoded) is None:
                return self._slow(encoded, ctx, None)
            return data
        if isinstance(data, (str, bytes, bytearray, memoryview)):
            event = fast_decode(data)
            return self._slow(data, ctx, None) if event is None else event
        dump = getattr(data, "model_dump_json", None)
        if callable(dump):  # an ag_ui.core (pydantic) model: through its wire JSON
            try:
                text = dump(by_alias=True)
            except (ValueError, TypeError, RecursionError) as exc:  # pydantic's are ValueErrors
                return self._slow(_BadInput(exc, "model"), ctx, None)
            event = fast_decode(text)
            return self._slow(text, ctx, None) if event is None else event
        return self._slow(data, ctx, None)

    def _slow(self, data: Any, ctx: Context | None, frame: Any) -> Event | None:
        """The slow path, with the location attached to errors; keeps going when asked to."""
        own = ctx is None
        if own:
            ctx = self.context
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
            if len(data) > DEEP_FROM and too_deep(data):
                raise _nesting_error(data)
            if type(data) is str and not data.isascii():
                data = as_bytes(data)  # lone surrogates kept, as the bytes they would be
            try:
                value = _GENERIC_DECODE(data)
            except MSGSPEC_ERRORS as exc:
                raise _invalid_json(exc, data, frame) from exc
            repeated = _repeated_keys(data, value)
        else:
            value = data
            repeated = []
        if type(value) is not dict:
            raise _not_an_object(value)
        etype = value.get("type")
        typed = type(etype) is str and etype != ""
        if not typed and framed:
            # The reference's transport rejects such a frame; in-memory events (dicts) reach
            # enforcement, which drops what it does not recognise.
            raise DecodeError("the frame carries no event type", path="$.type")
        out = Findings()
        for at, key in repeated:
            path: Path = None
            for segment in at:
                path = (path, segment)
            out.add(
                "duplicate-key",
                (path, key),
                f"the key {show(key)} appears more than once in one object: the last value is "
                "kept (as JSON.parse keeps it) and the earlier ones are dropped",
            )
        event = self._compat.apply(dict(value), etype if isinstance(etype, str) else "", out)
        node = EVENT_NODES.get(event["type"]) if typed else None
        if node is None:
            etype = event.get("type")
            out.add(
                "unknown-event-type",
                (None, "type"),
                f"dropped an event of unknown type {show(etype)}"
                if typed
                else f"dropped an event without a string type (`type` is {show(etype)})",
            )
            self._deliver(ctx, out, etype if isinstance(etype, str) else show(etype), index, frame)
            return None
        etype = event["type"]
        stripped = walk_obj(event, node, None, out)
        self._deliver(ctx, out, etype, index, frame)
        try:
            result: Event = msgspec.convert(stripped, EVENT_TYPES[etype])
        except msgspec.ValidationError as exc:
            raise _conversion_error(exc, etype) from exc
        return result

    @staticmethod
    def _deliver(ctx: Context, out: Findings, etype: str, index: int | None, frame: Any) -> None:
        offset = getattr(frame, "offset", None)
        line = getattr(frame, "line", None)
        for code, path, message in out.items:
            ctx.deliver(
                Report(
                    code=code,
                    message=f"{message} on {etype}" if code in STRIP_CODES else message,
                    severity="warning",
                    index=index,
                    offset=offset,
                    line=line,
                    path=render(path),
                    event_type=etype,
                )
            )


def _repeated_keys(data: Any, value: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """The keys JSON text that decoded to ``value`` repeats (see :func:`duplicate_keys`),
    scanned for only when a count says it may (see :func:`may_repeat_keys`)."""
    text = as_bytes(data)
    if may_repeat_keys(text, text.count(b":"), value):
        return duplicate_keys(text)
    return []


class _TooDeep:
    """Marks input nested deeper than MAX_NESTING (for :class:`_BadInput`)."""


#: An escaped UTF-16 surrogate that is not part of a pair (JSON text allows the escape; Unicode
#: has no such character, and msgspec's message for it speaks of truncation).
_LONE_SURROGATE: Final = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


#: A surrogate code point encoded as UTF-8 would encode it (what a str holding one becomes).
_ENCODED_SURROGATE: Final = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")


def _invalid_json(exc: BaseException, data: Any, frame: Any) -> DataError:
    """The error for text that is not JSON, saying why in the producer's terms."""
    text = as_bytes(data)
    raw = _ENCODED_SURROGATE.search(text)
    if raw is not None:
        return DecodeError(
            f"a string holds a lone UTF-16 surrogate (at byte {raw.start()} of the event, "
            f"{raw.group()!r} in UTF-8 terms): not valid Unicode, refused from every source"
        )
    lone = _LONE_SURROGATE.search(text)
    if lone is not None:
        return DecodeError(
            f"a string holds the escaped lone UTF-16 surrogate {lone.group().decode()} (at byte "
            f"{lone.start()} of the event): not valid Unicode, refused from every source"
        )
    reason = str(exc)
    if "trailing characters" in reason:
        return DecodeError(
            f"invalid JSON: {reason}: the frame holds more than one JSON value (a source of "
            "lines without line endings gives one such frame: end each item with a newline, "
            "or pass format='json' for whole events)"
        )
    if getattr(frame, "final_unterminated", False):
        return FramingError(f"the stream was truncated inside its last frame (invalid JSON: {exc})")
    return DecodeError(f"invalid JSON: {exc}")


class _BadInput:
    """Input the slow path can only reject (an Event holding a non-JSON value, frame data …)."""

    __slots__ = ("value", "what")

    def __init__(self, value: Any, what: str) -> None:
        self.value = value
        self.what = what

    def fail(self) -> None:
        value = self.value
        if isinstance(value, _TooDeep):
            raise DecodeError(
                f"the {self.what} holds a value nested more than {MAX_NESTING} levels deep (the "
                "event object is level 1), the limit JSON text is held to",
                path="$",
            )
        if isinstance(value, UnicodeEncodeError) or "surrogates not allowed" in str(value):
            which = (
                f" ({value.object[value.start : value.end]!a})"
                if isinstance(value, UnicodeEncodeError)
                else ""
            )
            raise DecodeError(
                f"the {self.what} holds a string with a lone UTF-16 surrogate{which}: not valid "
                "Unicode, refused from every source as in JSON text",
                path="$",
            ) from value
        if isinstance(value, RecursionError) or "serialization depth exceeded" in str(value):
            raise DecodeError(
                f"the {self.what} holds a value nested more than {MAX_NESTING} levels deep",
                path="$",
            ) from value
        if isinstance(value, ValueError) and "integer string conversion" in str(value):
            raise DecodeError(
                f"the {self.what} holds an integer of more digits than JSON text may carry "
                f"(Python's int-string limit, {sys.get_int_max_str_digits()} digits)",
                path="$",
            ) from value
        if isinstance(value, BaseException):
            raise DecodeError(
                f"the {self.what} cannot be serialised as JSON: {value}", path="$"
            ) from value
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
        event = fast_decode(data)
        if event is not None:
            return event
    decoder = EventDecoder()
    try:
        return decoder._other(data, None)
    finally:
        decoder.context.finish()


_MESSAGE_DECODE: Final = msgspec.json.Decoder(Message).decode


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
        if len(data) > DEEP_FROM and too_deep(data):
            raise _nesting_error(data)
        try:
            return _MESSAGE_DECODE(data)
        except MSGSPEC_ERRORS:
            pass
        try:
            value = _GENERIC_DECODE(data)
        except MSGSPEC_ERRORS as exc:
            raise DecodeError(f"invalid JSON: {exc}") from exc
    else:
        value = data
    if type(value) is not dict:
        raise DecodeError("a message must be a JSON object", path="$")
    out = Findings()
    value = Compat().inbound_message(value, None, out)
    assert MESSAGE_NODE is not None
    stripped = walk(value, MESSAGE_NODE, None, out)
    if stripped is DROP:
        raise DecodeError(f"not a message: {out.drop_reason}", path="$.role")
    ctx = Context()
    EventDecoder._deliver(ctx, out, "a message", None, None)
    ctx.finish()
    try:
        message: Message = msgspec.convert(stripped, MESSAGE_TYPES[stripped["role"]])
    except msgspec.ValidationError as exc:
        raise _conversion_error(exc, "a message") from exc
    return message


def encode_event(event: Event) -> bytes:
    """Encode an event as compact JSON (camelCase, absent optionals omitted).

    >>> from agui_meta.events import TextMessageEndEvent
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
        #: The fast path's decode (see ``_stage``): a frame whose bytes it decodes is emitted
        #: as that event; anything else goes the decoder's own way.
        self.fast_decode: Callable[[Any], Event | None] = fast_decode

    def feed(self, item: Any) -> None:
        event: Event | None
        if type(item) is Frame:
            event = self.fast_decode(item.data)
            if event is None:
                event = self.decoder._slow(item.data, self.ctx, item)
        elif type(item) is bytes:
            event = self.fast_decode(item)
            if event is None:
                event = self.decoder._slow(item, self.ctx, None)
        else:
            event = self.decoder._other(item, self.ctx)
        if event is not None:
            self.emit(event)


Enforce.fast_feed = Enforce.feed
