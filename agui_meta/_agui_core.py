"""Conversion to and from the models of ``ag_ui.core``, the official Python SDK (optional).

Both directions go through the wire JSON, the one representation the two libraries agree on
exactly: ``ag_ui.core`` models serialise with ``model_dump_json(by_alias=True)``, which omits
unset optional fields and keeps every ``null`` *inside* a value (metadata keys set to ``null``
survive), and agui-meta's Structs encode the same way. Converting a model therefore applies
agui-meta's decoding policy to it: a field the model carries that the protocol does not describe
(``ag_ui.core`` models keep unknown fields) is removed with a report, as from the wire.

``ag-ui-protocol`` is imported on first use only (``pip install agui-meta[agui]``).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, overload

import msgspec

from ._decode import decode_event, decode_message, encode_event
from ._events import MESSAGE_TYPES, Event, Message
from ._exceptions import UsageError
from ._metadata import enc_hook
from ._store import ItemStore, MessageItem, ToolCallItem

if TYPE_CHECKING:
    from ag_ui.core import Event as CoreEvent
    from ag_ui.core import Message as CoreMessage
    from ag_ui.core import ToolCall as CoreToolCall
    from pydantic import BaseModel, TypeAdapter

__all__ = ["from_agui_core", "to_agui_core"]

_MESSAGE_CLASSES = frozenset(MESSAGE_TYPES.values())


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    try:
        from ag_ui.core import Event as CoreEvent
        from ag_ui.core import Message as CoreMessage
        from pydantic import TypeAdapter
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "converting to ag_ui.core models needs the ag-ui-protocol package: "
            "pip install 'agui-meta[agui]'"
        ) from exc
    if kind == "tool_call":
        from ag_ui.core import ToolCall

        return TypeAdapter(ToolCall)
    return TypeAdapter(CoreEvent if kind == "event" else CoreMessage)


def from_agui_core(model: Any) -> Any:
    """An agui-meta Event (or Message) from an ``ag_ui.core`` event (or message) model.

    Raises :class:`~agui_meta.DecodeError` where the model holds what the protocol rejects
    (for example an unknown role), exactly as decoding its JSON would. Events of a type the
    protocol does not describe cannot come from ``ag_ui.core`` models.
    """
    dump = getattr(model, "model_dump_json", None)
    if not callable(dump):
        raise UsageError(f"expected an ag_ui.core model, got {type(model).__name__}")
    if _is_message_model(model):
        return decode_message(dump(by_alias=True))
    event = decode_event(model)
    if event is None:  # pragma: no cover - every ag_ui.core event type is a 1.0 event type
        raise UsageError(f"{type(model).__name__} is not an AG-UI 1.0 event")
    return event


def _is_message_model(model: Any) -> bool:
    # Messages have a role and no type; events have a type (TOOL_CALL_RESULT has both).
    return hasattr(model, "role") and not hasattr(model, "type")


@overload
def to_agui_core(obj: ItemStore) -> list[CoreMessage]: ...
@overload
def to_agui_core(obj: Event) -> CoreEvent: ...
@overload
def to_agui_core(obj: Message | MessageItem) -> CoreMessage: ...
@overload
def to_agui_core(obj: ToolCallItem) -> CoreToolCall: ...
def to_agui_core(
    obj: Event | Message | MessageItem | ToolCallItem | ItemStore,
) -> Any:
    """The ``ag_ui.core`` model of an agui-meta event, message or store item; for a store,
    the conversation: its messages as ``ag_ui.core`` messages, in order.

    Typed as what it gives: ``list[ag_ui.core.Message]`` for a store, ``ag_ui.core.Event``
    for an event, ``ag_ui.core.Message`` for a message or message item, ``ag_ui.core.ToolCall``
    for a tool-call item.

    A store item (a :class:`~agui_meta.MessageItem` or :class:`~agui_meta.ToolCallItem`)
    converts as it is now (:meth:`~agui_meta.MessageItem.to_wire`), merged metadata included.

    >>> from agui_meta.events import TextMessageEndEvent
    >>> to_agui_core(TextMessageEndEvent(message_id="m")).message_id
    'm'
    >>> import agui_meta
    >>> stages = agui_meta.DefaultStages()
    >>> _ = agui_meta.run_sync(stages, [
    ...     {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    ...     {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"acme.model": "x"}},
    ...     {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi"},
    ... ])
    >>> [(m.role, m.content, m.metadata) for m in to_agui_core(stages.store)]
    [('assistant', 'Hi', {'acme.model': 'x'})]
    """
    if isinstance(obj, Event):
        model: BaseModel = _adapter("event").validate_json(encode_event(obj))
        return model
    if type(obj) in _MESSAGE_CLASSES:
        message: BaseModel = _adapter("message").validate_json(msgspec.json.encode(obj))
        return message
    if isinstance(obj, MessageItem):
        item: BaseModel = _adapter("message").validate_json(_encode(obj.to_wire()))
        return item
    if isinstance(obj, ToolCallItem):
        call: BaseModel = _adapter("tool_call").validate_json(_encode(obj.to_wire()))
        return call
    messages = getattr(obj, "messages", None)
    if callable(messages):
        adapter = _adapter("message")
        return [adapter.validate_json(_encode(m.to_wire())) for m in messages()]
    raise UsageError(
        "expected an agui-meta event, message, store item or store, got "
        f"{type(obj).__module__}.{type(obj).__qualname__}"
    )


def _encode(wire: Any) -> bytes:
    return msgspec.json.encode(wire, enc_hook=enc_hook)
