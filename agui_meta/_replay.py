"""The replay contract: where a response's events are kept for resuming them (no implementation).

:class:`~agui_meta.EventStreamResponse` serves ``Last-Event-ID`` reconnections through any
object of the :class:`Replay` protocol: the in-process :class:`~agui_meta.ReplayBuffer`, or
``agui_meta.redis.RedisReplay``, which lets a stream served by one replica be resumed on
another. This module is the contract only; it imports no implementation.

A response that starts a run opens a :class:`ReplayLog` (``async with replay.open() as log``)
and, for each batch of encoded events, numbers them from 0 (the SSE ids are
``f"{log.key}:{n}"``) and ``await log.append(...)`` them, before any is sent: an event a client
received is in the log. The first connection reads through ``log.reader()``. When its client
goes away the response awaits :meth:`ReplayLog.linger`, which returns once the stream has had
no reader for the store's ``linger`` seconds (or has ended); the run is then cancelled. The
producer calls :meth:`ReplayLog.end` when the run's events are all appended; leaving the
``async with`` without it (the run cancelled) marks the stream *abandoned*.

A reconnection calls :meth:`Replay.resume` with its ``Last-Event-ID``: a :class:`ReplayReader`
of the events after it, or the reason it cannot be resumed (answered ``410 Gone``).
:meth:`ReplayReader.read` raises :class:`~agui_meta.StreamLost` when the rest of the stream
cannot be delivered (abandoned, its producer gone, the reader too far behind); the response
then ends with a ``RUN_ERROR`` (code ``"stream_lost"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ._exceptions import StreamLost

__all__ = ["Replay", "ReplayLog", "ReplayReader", "StreamLost", "parse_event_id"]


class ReplayReader(Protocol):
    """The encoded events of one stream from a position on, for one connection."""

    async def read(self, wait: float) -> list[bytes] | None:
        """The next encoded events; ``[]`` when none came within ``wait`` seconds (a keepalive
        is due); ``None`` when the stream has ended and everything was read.

        Raises :class:`~agui_meta.StreamLost` when the rest cannot be delivered.
        """
        ...

    async def aclose(self) -> None:
        """Detach (idempotent)."""
        ...


class ReplayLog(Protocol):
    """The stream of one response, written by its producer."""

    #: The stream's key, unique among all the streams of the store (the SSE ids' prefix).
    key: str

    async def append(self, events: Sequence[tuple[int, bytes]]) -> None:
        """Keep encoded events, each with its number (consecutive, from 0); they may be sent
        once this returns. May wait (backpressure)."""
        ...

    async def end(self, *, complete: bool = True) -> None:
        """No more events: every event of the run was appended (``complete``), or the producer
        gave up (``complete=False``: readers get :class:`~agui_meta.StreamLost` after the last
        one). Idempotent."""
        ...

    def reader(self) -> ReplayReader:
        """A reader from the first event (the connection that started the run)."""
        ...

    async def linger(self) -> None:
        """Return once the stream has ended, or has had no reader for the store's linger."""
        ...


class Replay(Protocol):
    """A store of recent streams that serves ``Last-Event-ID`` reconnections.

    Implemented by :class:`~agui_meta.ReplayBuffer` (one process) and
    ``agui_meta.redis.RedisReplay`` (shared by replicas through Redis).
    """

    def open(self) -> AbstractAsyncContextManager[ReplayLog]:
        """A new stream, for a run that starts.

        Entering it may raise :class:`~agui_meta._exceptions.ReplayFull` when the store has no
        room for another stream: the response answers ``503`` with its ``Retry-After``.
        """
        ...

    async def resume(self, last_event_id: str) -> ReplayReader | str:
        """A reader of the events after ``last_event_id``, or why they cannot be resumed."""
        ...


def parse_event_id(last_event_id: str) -> tuple[str, int] | None:
    """``"<key>:<n>"`` as ``(key, n)``; ``None`` when it is not an id of this shape.

    A key is 1 to 64 ASCII letters, digits, ``-`` or ``_``; ``n`` at most 18 digits.
    """
    key, sep, seq = last_event_id.partition(":")
    if (
        not sep
        or not 0 < len(key) <= 64
        or not all(c.isascii() and (c.isalnum() or c in "-_") for c in key)
        or not (seq.isascii() and seq.isdigit())
        or len(seq) > 18
    ):
        return None
    return key, int(seq)
