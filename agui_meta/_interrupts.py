"""Interrupts and resume, as the reference client 1.0 handles them.

:func:`is_interrupt_expired` and :func:`build_resume_array` are the reference's
``isInterruptExpired`` and ``buildResumeArray``; :func:`check_resume` is the check its agent
makes before a run starts (every pending interrupt answered, none answered after its expiry
unless it is cancelled). :class:`~agui_meta.HttpAgent` uses all three.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from typing import Any

from msgspec import UNSET

from ._events import Interrupt, ResumeEntry
from ._exceptions import UsageError

__all__ = ["build_resume_array", "check_resume", "is_interrupt_expired"]


def _parse_time(text: str) -> _dt.datetime | None:
    """An ISO 8601 time as an aware datetime (no offset: UTC); ``None`` when it is not one."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = _dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment


def is_interrupt_expired(interrupt: Interrupt, now: _dt.datetime | None = None) -> bool:
    """Whether ``interrupt`` has an ``expiresAt`` that is ``now`` or in the past.

    As the reference's ``isInterruptExpired``: no ``expiresAt`` never expires, and a value
    that is not a date never expires either (JavaScript compares an invalid date as false).
    A time without an offset is read as UTC; ``now`` defaults to the current time (a naive
    ``now`` is read as UTC too).

    >>> from agui_meta import is_interrupt_expired
    >>> from agui_meta.events import Interrupt
    >>> past = Interrupt(id="i", reason="r", expires_at="2020-01-01T00:00:00Z")
    >>> is_interrupt_expired(past), is_interrupt_expired(Interrupt(id="i", reason="r"))
    (True, False)
    """
    if interrupt.expires_at is UNSET:
        return False
    moment = _parse_time(interrupt.expires_at)
    if moment is None:
        return False
    if now is None:
        now = _dt.datetime.now(_dt.timezone.utc)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=_dt.timezone.utc)
    return moment <= now


def build_resume_array(
    interrupts: Iterable[Interrupt], responses: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The ``resume`` array answering every interrupt, in the interrupts' order, as wire JSON.

    ``responses`` maps each interrupt id to ``{"status": "resolved" | "cancelled",
    "payload"?: ..., "metadata"?: {...}}``. As the reference's ``buildResumeArray``: a payload
    is kept only with ``"resolved"``, metadata with either status, and nothing is validated
    here (a ``None`` payload is kept; sending the input drops it, as the official client's
    outgoing check does, and a wrong status is refused then).

    :raises ~agui_meta.UsageError: an open interrupt has no response, or a response names an interrupt
        that is not open (the message lists the ids).

    >>> from agui_meta import build_resume_array
    >>> from agui_meta.events import Interrupt
    >>> pending = [Interrupt(id="i-1", reason="confirm")]
    >>> build_resume_array(pending, {"i-1": {"status": "resolved", "payload": {"ok": True}}})
    [{'interruptId': 'i-1', 'status': 'resolved', 'payload': {'ok': True}}]
    """
    pending = list(interrupts)
    open_ids = list(dict.fromkeys(i.id for i in pending))
    missing = [i for i in open_ids if i not in responses]
    if missing:
        raise UsageError(
            f"build_resume_array: missing responses for open interrupts: {', '.join(missing)}"
        )
    known = set(open_ids)
    unknown = [i for i in responses if i not in known]
    if unknown:
        raise UsageError(
            "build_resume_array: responses reference unknown interrupt ids: " + ", ".join(unknown)
        )
    out = []
    for interrupt in pending:
        response = responses[interrupt.id]
        entry: dict[str, Any] = {"interruptId": interrupt.id, "status": response.get("status")}
        if entry["status"] == "resolved" and "payload" in response:
            entry["payload"] = response["payload"]
        if "metadata" in response:
            entry["metadata"] = response["metadata"]
        out.append(entry)
    return out


def check_resume(
    pending: Iterable[Interrupt],
    resume: Iterable[ResumeEntry] | None,
    now: _dt.datetime | None = None,
) -> None:
    """What the reference agent checks before a run: the pending interrupts are answered.

    :raises UsageError: a pending interrupt has no entry in ``resume``, or one has expired and
        its entry is not ``"cancelled"`` (the reference's messages).
    """
    pending = list(pending)
    if not pending:
        return
    entries: dict[str, ResumeEntry] = {}
    for entry in resume or ():
        entries.setdefault(entry.interrupt_id, entry)
    missing = [i.id for i in pending if i.id not in entries]
    if missing:
        raise UsageError(
            f"Thread has {len(missing)} pending interrupt(s) not addressed by resume: "
            + ", ".join(missing)
        )
    for interrupt in pending:
        if is_interrupt_expired(interrupt, now) and entries[interrupt.id].status != "cancelled":
            raise UsageError(
                f"Interrupt {interrupt.id} expired at {interrupt.expires_at} and can no longer "
                "be answered. Cancel it to continue the thread."
            )
