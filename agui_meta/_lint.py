"""A lint for the specification's SHOULD rule on metadata keys: prefix your own keys.

Reported, never rejected, never rewritten: :class:`LintMetadataKeys` passes every event through
untouched and reports (severity ``"info"``, code ``"unprefixed-metadata-key"``) each key that
carries no vendor prefix, wherever a metadata object sits in the event.
"""

from __future__ import annotations

from msgspec import UNSET

from ._events import Event, MessagesSnapshotEvent, RunFinishedEvent, RunStartedEvent
from ._metadata import AGUI_METADATA_KEY, is_prefixed, iter_metadata, key_path
from ._stage import Transducer

__all__ = ["LintMetadataKeys"]

# Events whose nested objects may carry metadata of their own.
_NESTED_CARRIERS = (MessagesSnapshotEvent, RunStartedEvent, RunFinishedEvent)


class LintMetadataKeys(Transducer[Event, Event]):
    """Report application metadata keys without a vendor prefix; pass every event through.

    A key counts as prefixed when it is the protocol's ``"ag-ui"`` or names a vendor first:
    ``"acme.latency"``, ``"acme/latency"``, ``"acme:latency"`` or ``"@scope/pkg"`` (see
    :func:`agui_meta.vendor_keys` for the producer side). Every carrier is checked: the event's
    own metadata, messages and tool calls inside MESSAGES_SNAPSHOT and RUN_STARTED.input, tools
    and resume entries, and interrupts. Each finding is a report of severity ``"info"`` (which
    strict mode does not turn into an error) with the JSON path of the key.
    """

    takes_events = True

    def feed(self, item: Event) -> None:
        if item.metadata is not UNSET or isinstance(item, _NESTED_CARRIERS):
            self._lint(item)
        self.emit(item)

    def _lint(self, event: Event) -> None:
        report = self.ctx.report
        for path, metadata in iter_metadata(event):
            for key in metadata:
                if not is_prefixed(key):
                    report(
                        "unprefixed-metadata-key",
                        f"metadata key {key!r} has no vendor prefix: producers SHOULD prefix "
                        f"the keys they create (for example 'vendor.{key}'); "
                        f"{AGUI_METADATA_KEY!r} is reserved for the protocol",
                        path=key_path(path, key),
                        severity="info",
                        event_type=event.type,
                    )
