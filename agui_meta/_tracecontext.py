"""W3C trace context for the server and the client, when OpenTelemetry is installed.

The run-metadata keys are :data:`TRACEPARENT_KEY` (``"w3c.traceparent"``) and
:data:`TRACESTATE_KEY` (``"w3c.tracestate"``): :class:`~agui_meta.EventStreamResponse` stamps the
current span's context under them in RUN_STARTED's metadata, and :func:`agui_meta.otel` parents
a run's span to what they hold. :class:`~agui_meta.HttpAgent` sends the current span's context
as the ``traceparent`` (and ``tracestate``) header of each request. Without
``opentelemetry-api``, or without a valid current span, nothing is stamped or sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UnsetType

from ._events import RunStartedEvent

__all__ = [
    "TRACEPARENT_KEY",
    "TRACESTATE_KEY",
    "current_carrier",
    "current_context",
    "stamped",
    "trace_id",
]

#: The run-metadata key of a W3C ``traceparent``.
TRACEPARENT_KEY = "w3c.traceparent"
#: The run-metadata key of the W3C ``tracestate`` that goes with it.
TRACESTATE_KEY = "w3c.tracestate"

_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


def current_context() -> Any:
    """The current OpenTelemetry context when its span is valid, else ``None`` (also without
    ``opentelemetry-api``)."""
    try:
        from opentelemetry import context, trace
    except ImportError:
        return None
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    return context.get_current()


def current_carrier() -> dict[str, str]:
    """The current span's ``traceparent`` (and ``tracestate``), as HTTP headers; ``{}`` when
    there is no valid current span or no OpenTelemetry."""
    if current_context() is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


def stamped(event: RunStartedEvent, carrier: Mapping[str, str]) -> RunStartedEvent:
    """``event`` with ``carrier`` (from :func:`current_carrier`) in its metadata under the
    ``w3c.*`` keys; ``event`` itself when the carrier is empty or the metadata has a
    traceparent already (the agent's own trace context wins)."""
    traceparent = carrier.get("traceparent")
    if traceparent is None:
        return event
    metadata = {} if isinstance(event.metadata, UnsetType) else event.metadata
    if TRACEPARENT_KEY in metadata:
        return event
    stamp = {TRACEPARENT_KEY: traceparent}
    if "tracestate" in carrier:
        stamp[TRACESTATE_KEY] = carrier["tracestate"]
    return msgspec.structs.replace(event, metadata={**metadata, **stamp})


def trace_id(traceparent: object) -> str | None:
    """The trace id (32 hex digits) of a W3C ``traceparent``, or ``None`` if it is not one."""
    if not isinstance(traceparent, str):
        return None
    found = _TRACEPARENT.fullmatch(traceparent.strip())
    if found is None or found.group(1) == "0" * 32:
        return None
    return found.group(1)
