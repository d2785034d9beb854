"""The run log: the encoded events of one gateway run, for every reader, live and afterwards.

A run of the gateway (:mod:`agui_meta._gateway`) writes its events, encoded as SSE frames with
the ids ``<key>:<n>``, into a :class:`RunLog`; each connection reads them through a reader of
its own, from the first event, from the one after a ``Last-Event-ID``, or from where a
``connect`` prelude left off. The run never waits for its readers: a log keeps the last
``capacity`` events, and a reader that falls further behind gets
:class:`~agui_meta.StreamLost` (its response then ends with a ``RUN_ERROR``).

:class:`RunLog` is the contract (a reader is a :class:`~agui_meta._replay.ReplayReader`, so
:class:`~agui_meta.EventStreamResponse` can serve it); :class:`MemoryRunLog` the one-process
implementation. A log shared by replicas (Redis Streams) implements the same contract.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import anyio

from ._exceptions import StreamLost, UsageError

if TYPE_CHECKING:
    from ._replay import ReplayReader

__all__ = ["MemoryRunLog", "RunLog"]


class RunLog(Protocol):
    """The encoded events of one run, numbered from 0 (the SSE ids are ``f"{key}:{n}"``)."""

    key: str

    @property
    def next_seq(self) -> int:
        """The number the next appended event gets (how many were appended)."""
        ...

    @property
    def ended(self) -> bool: ...

    async def append(self, frames: Sequence[bytes]) -> None:
        """Keep encoded events (numbered ``next_seq`` on); never waits for readers."""
        ...

    async def end(self) -> None:
        """No more events (idempotent): readers get ``None`` once they have read everything."""
        ...

    def reader(self, start: int) -> ReplayReader:
        """A reader of the events numbered ``start`` and after."""
        ...


class MemoryRunLog:
    """A :class:`RunLog` in this process's memory: the last ``capacity`` events of the run."""

    def __init__(self, key: str, capacity: int) -> None:
        if capacity < 1:
            raise UsageError(f"a run log's capacity must be at least 1, got {capacity}")
        self.key = key
        self.capacity = capacity
        self._entries: deque[bytes] = deque(maxlen=capacity)
        self._next = 0
        self._ended = False
        self._changed = anyio.Event()

    @property
    def next_seq(self) -> int:
        return self._next

    @property
    def ended(self) -> bool:
        return self._ended

    @property
    def first_kept(self) -> int:
        return self._next - len(self._entries)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def append(self, frames: Sequence[bytes]) -> None:
        if self._ended:
            raise UsageError(f"run log {self.key}: append after end")
        if frames:
            self._entries.extend(frames)
            self._next += len(frames)
            self._notify()

    async def end(self) -> None:
        if not self._ended:
            self._ended = True
            self._notify()

    def reader(self, start: int) -> ReplayReader:
        if not 0 <= start <= self._next:
            raise UsageError(f"run log {self.key}: no event {start} (it holds {self._next})")
        return _MemoryReader(self, start)

    def frames_from(self, start: int) -> list[bytes]:
        """The events numbered ``start`` on (``StreamLost`` when some are no longer kept)."""
        first = self.first_kept
        if start < first:
            raise StreamLost(
                f"events {self.key}:{start} to {self.key}:{first - 1} are no longer held: "
                f"the run log keeps the last {self.capacity} events of a run"
            )
        entries = self._entries
        if start == first:
            return list(entries)
        return [entries[i] for i in range(start - first, len(entries))]

    async def changed(self) -> None:
        await self._changed.wait()


class _MemoryReader:
    """A :class:`~agui_meta._replay.ReplayReader` of a :class:`MemoryRunLog`."""

    def __init__(self, log: MemoryRunLog, start: int) -> None:
        self.log = log
        self.position = start

    async def read(self, wait: float) -> list[bytes] | None:
        log = self.log
        if self.position >= log.next_seq and not log.ended:
            with anyio.move_on_after(wait):
                while self.position >= log.next_seq and not log.ended:
                    await log.changed()
        if self.position < log.next_seq:
            frames = log.frames_from(self.position)
            self.position = log.next_seq
            return frames
        return None if log.ended else []

    async def aclose(self) -> None:
        pass


if TYPE_CHECKING:  # mypy checks that the log keeps the contract

    def _conforms(log: MemoryRunLog) -> RunLog:
        return log

    def _reads(reader: _MemoryReader) -> ReplayReader:
        return reader
