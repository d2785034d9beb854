"""The replay buffer: the last events of recent streams, for resuming them (agui-meta's extension).

:class:`ReplayBuffer` (the in-process :class:`~agui_meta._replay.Replay`) is shared by the
requests of an endpoint; each :class:`~agui_meta.EventStreamResponse` given it keeps its
stream's last events there, numbered, and serves a reconnection that names one of them in
``Last-Event-ID``. ``BufferedStream`` (a :class:`~agui_meta._replay.ReplayLog`) is also the bounded
hand-over between a response's producer and its sender when there is no replay, and the local
copy ``agui_meta.redis.RedisReplay`` serves the first connection from.
"""

from __future__ import annotations

import contextlib
import math
import uuid
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Literal

import anyio

from ._exceptions import ReplayFull, StreamLost, UsageError
from ._replay import Replay, ReplayLog, ReplayReader, parse_event_id

__all__ = ["ReplayBuffer"]


class BufferedStream:
    """The encoded events of one response, numbered, with waiting for more."""

    def __init__(self, key: str, capacity: int, ring: bool, linger: float = 0.0) -> None:
        self.key = key
        self.capacity = capacity
        self.ring = ring  # when no reader is attached, drop the oldest rather than wait
        self.linger_for = linger
        self.entries: deque[tuple[int, bytes]] = deque()
        self.next_seq = 0
        self.sent = 0  # the first seq the attached reader has not sent yet
        self.readers = 0
        self.unread_since: float | None = None  # when the last reader left
        self.done = False
        self.outcome: Literal["complete", "abandoned"] | None = None
        self.ended_at: float | None = None
        self._changed = anyio.Event()

    def notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def changed(self) -> None:
        await self._changed.wait()

    async def put(self, data: bytes) -> None:
        while len(self.entries) >= self.capacity:
            if self.readers == 0 and self.ring:
                self.entries.popleft()
                break
            if self.readers > 0 and self.entries[0][0] < self.sent:
                self.entries.popleft()  # already sent: kept only while there is room
                continue
            await self.changed()
        self.entries.append((self.next_seq, data))
        self.next_seq += 1
        self.notify()

    def finish(self) -> None:
        """The stream is over: complete when :meth:`end` was called, abandoned otherwise."""
        if self.done:
            return
        self.done = True
        if self.outcome is None:
            self.outcome = "abandoned"
        self.ended_at = anyio.current_time()
        self.notify()

    def first_kept(self) -> int:
        return self.entries[0][0] if self.entries else self.next_seq

    def after(self, seq: int) -> list[tuple[int, bytes]]:
        return [entry for entry in self.entries if entry[0] >= seq]

    # The ReplayLog protocol.

    async def append(self, events: Sequence[tuple[int, bytes]]) -> None:
        for seq, data in events:
            if seq != self.next_seq:
                raise UsageError(f"event {seq} appended where {self.next_seq} was due")
            await self.put(data)

    async def end(self, *, complete: bool = True) -> None:
        if not self.done:
            self.outcome = "complete" if complete else "abandoned"
            self.finish()

    def reader(self, start: int = 0) -> BufferedStreamReader:
        return BufferedStreamReader(self, start)

    async def linger(self) -> None:
        """Return once the stream is done or has had no reader for ``linger_for`` seconds.

        The time counts from when the last reader left, whatever the producer appends
        meanwhile: an agent that never pauses is cancelled as surely as a silent one.
        """
        if self.unread_since is None:  # no reader ever came: from now
            self.unread_since = anyio.current_time()
        while not self.done:
            if self.readers:
                await self.changed()
                continue
            left = self.unread_since + self.linger_for - anyio.current_time()
            if left <= 0:
                return
            with anyio.move_on_after(left):
                await self.changed()


class BufferedStreamReader:
    """A :class:`~agui_meta._replay.ReplayReader` of a :class:`BufferedStream` from ``start`` on."""

    def __init__(self, stream: BufferedStream, start: int) -> None:
        self.stream = stream
        self.position = start
        self._attached = True
        stream.readers += 1
        stream.sent = start
        stream.notify()

    async def read(self, wait: float) -> list[bytes] | None:
        stream = self.stream
        deadline = anyio.current_time() + wait
        while True:
            if self.position < stream.first_kept():
                raise StreamLost(
                    f"event {stream.key}:{self.position} and those after it up to "
                    f"{stream.key}:{stream.first_kept() - 1} are no longer held: this reader "
                    f"fell more than {stream.capacity} events behind"
                )
            entries = stream.after(self.position)
            if entries:
                self.position = entries[-1][0] + 1
                stream.sent = self.position
                stream.notify()
                return [data for _, data in entries]
            if stream.done:
                if stream.outcome == "abandoned":
                    raise StreamLost(
                        f"the stream {stream.key} was abandoned after {stream.next_seq} events "
                        f"(no client for {stream.linger_for:g} s, or its server stopped): "
                        "the run did not finish"
                    )
                return None
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                return []
            with anyio.move_on_after(remaining):
                await stream.changed()

    async def aclose(self) -> None:
        if self._attached:
            self._attached = False
            self.stream.readers -= 1
            if not self.stream.readers:
                self.stream.unread_since = anyio.current_time()
            self.stream.notify()


class ReplayBuffer:
    """The last events of recent streams, for resuming them after ``Last-Event-ID``.

    Share one between the requests of an endpoint (``EventStreamResponse(..., replay=buffer)``).
    Per stream, at most ``max_events`` events are kept; after its client disconnects, a stream
    keeps running for ``linger`` seconds waiting for a reconnection (counted from the moment
    the last client left, however much the agent sends meanwhile), then its agent is cancelled;
    a finished stream is kept ``linger`` seconds for a late one. At most ``max_streams``
    streams are kept (the oldest finished ones are forgotten first); when all of them are
    running, :meth:`open` raises :class:`~agui_meta._exceptions.ReplayFull`, which
    :class:`~agui_meta.EventStreamResponse` answers ``503`` with ``Retry-After`` (the linger,
    rounded up). Memory is bounded by ``max_streams * max_events`` events.

    This is agui-meta's extension of AG-UI (which has no resumption): a stream's event ids are
    ``<stream key>:<sequence number>``; a reconnection that names an id this buffer no longer
    holds is answered ``410 Gone`` with the reason, and one whose run was abandoned (no client
    for ``linger``) gets the events kept, then a ``RUN_ERROR`` with the code ``"stream_lost"``
    (:class:`~agui_meta.StreamLost`). It is the one-process :class:`~agui_meta.Replay`;
    ``agui_meta.redis.RedisReplay`` is the one replicas share.
    """

    def __init__(
        self, *, max_events: int = 1000, linger: float = 30.0, max_streams: int = 1000
    ) -> None:
        if max_events < 1 or max_streams < 1:
            raise UsageError("max_events and max_streams must be at least 1")
        if linger < 0:
            raise UsageError(f"linger must be >= 0, got {linger}")
        self.max_events = max_events
        self.linger = linger
        self.max_streams = max_streams
        self._streams: dict[str, BufferedStream] = {}

    def __len__(self) -> int:
        return len(self._streams)

    def _purge(self) -> None:
        now = anyio.current_time()
        for key, stream in list(self._streams.items()):
            if (
                stream.ended_at is not None
                and stream.readers == 0
                and now - stream.ended_at >= self.linger
            ):
                del self._streams[key]
        while len(self._streams) >= self.max_streams:
            ended = [k for k, s in self._streams.items() if s.ended_at is not None]
            if not ended:
                raise ReplayFull(
                    f"the replay buffer holds {self.max_streams} running streams "
                    "(max_streams): no room for another",
                    retry_after=max(1, math.ceil(self.linger)),
                )
            del self._streams[min(ended, key=lambda k: self._streams[k].ended_at or 0.0)]

    def _open(self) -> BufferedStream:
        self._purge()
        stream = BufferedStream(uuid.uuid4().hex, self.max_events, ring=True, linger=self.linger)
        self._streams[stream.key] = stream
        return stream

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[ReplayLog]:
        """A new stream (the :class:`~agui_meta._replay.Replay` protocol).

        :raises ~agui_meta.ReplayFull: ``max_streams`` streams are running.
        """
        stream = self._open()
        try:
            yield stream
        finally:
            stream.finish()

    async def resume(self, last_event_id: str) -> ReplayReader | str:
        """A reader of the events after ``last_event_id``, or why they cannot be resumed."""
        found = self._find(last_event_id)
        if isinstance(found, str):
            return found
        stream, start = found
        return stream.reader(start)

    def _find(self, last_event_id: str) -> tuple[BufferedStream, int] | str:
        """The stream and the next seq to send, or why the id cannot be resumed."""
        self._purge()
        parsed = parse_event_id(last_event_id)
        stream = self._streams.get(parsed[0]) if parsed is not None else None
        if stream is None or parsed is None:
            return f"no stream with event id {last_event_id!r} is held (unknown or expired)"
        seq = parsed[1]
        if seq >= stream.next_seq:
            return f"event id {last_event_id!r} was never sent"
        if seq + 1 < stream.first_kept():
            return (
                f"the events after {last_event_id!r} are no longer held "
                f"(the replay buffer keeps the last {self.max_events} events of a stream)"
            )
        return stream, seq + 1


if TYPE_CHECKING:  # mypy checks that the buffer keeps the contract

    def _conforms(buffer: ReplayBuffer) -> Replay:
        return buffer
