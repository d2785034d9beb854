"""The AG-UI 1.0 wire model: the 31 events and every protocol object they carry.

Every type here is a frozen :class:`msgspec.Struct` (or a union of them) with the protocol's
camelCase names on the wire; ``agui_meta.events.TextMessageContentEvent(message_id="m",
delta="Hi")`` builds one, :func:`decode_event` and :func:`encode_event` convert from and to
wire JSON, and :data:`EVENT_TYPES` maps each wire ``type`` to its class.

Absent optional fields. On these wire types only, an optional field that is absent on the wire
is :data:`UNSET` (msgspec's sentinel, re-exported here with its type :class:`UnsetType`), so
that "absent" and a ``null`` the producer sent stay distinct and re-encoding omits exactly
what was omitted. Test for it with ``value is UNSET`` (or ``isinstance(value, UnsetType)``);
``UNSET`` is falsy. Everything agui-meta builds for you from these (store items, updates,
ledger records, the command line's output) says ``None`` for absent instead.

>>> from agui_meta.events import UNSET, TextMessageStartEvent, decode_event
>>> event = decode_event({"type": "TEXT_MESSAGE_START", "messageId": "m"})
>>> isinstance(event, TextMessageStartEvent), event.metadata is UNSET
(True, True)
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from . import _events
from ._decode import decode_event, decode_message, encode_event
from ._events import *  # the wire model, listed once: in _events.__all__
from ._public import public_module as _public_module

__all__ = ["UNSET", "UnsetType", "decode_event", "decode_message", "encode_event"]
__all__ += _events.__all__
__all__.sort(key=lambda name: (not name.isupper(), name))  # constants, then the rest

_public_module(__name__, globals(), __all__, foreign=("UNSET", "UnsetType"))


def __dir__() -> list[str]:
    return list(__all__)
