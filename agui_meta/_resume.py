"""The replay buffer: the last events of recent streams, for resuming them (agui-meta's extension).

:class:`ReplayBuffer` is shared by the requests of an endpoint; each
:class:`~agui_meta.EventStreamResponse` given it keeps its stream's last events there, numbered,
and serves a reconnection that names one of them in ``Last-Event-ID``. ``_Stream`` is also the
bounded hand-over between a response's producer and its sender when there is no replay.
"""

from __future__ import annotations

import uuid
from collections import deque

import anyio

__all__ = ["ReplayBuffer"]


class _Stream:
    """The encoded events of one response, numbered, with waiting for more."""

    def __init__(self, key: str, capacity: int, ring: bool) -> None:
        self.key = key
        self.capacity = capacity
        self.ring = ring  # when no reader is attached, drop the oldest rather than wait
        self.entries: deque[tuple[int, bytes]] = deque()
        self.next_seq = 0
        self.sent = 0  # the first seq the attached reader has not sent yet
        self.readers = 0
        self.done = False
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
        self.done = True
        self.ended_at = anyio.current_time()
        self.notify()

    def first_kept(self) -> int:
        return self.entries[0][0] if self.entries else self.next_seq

    def after(self, seq: int) -> list[tuple[int, bytes]]:
        return [entry for entry in self.entries if entry[0] >= seq]


class ReplayBuffer:
    """The last events of recent streams, for resuming them after ``Last-Event-ID``.

    Share one between the requests of an endpoint (``EventStreamResponse(..., replay=buffer)``).
    Per stream, at most ``max_events`` events are kept; after its client disconnects, a stream
    keeps running for ``linger`` seconds waiting for a reconnection, and a finished stream is
    kept ``linger`` seconds for a late one. At most ``max_streams`` streams are kept (the
    oldest finished ones are forgotten first). Memory is bounded by
    ``max_streams * max_events`` events.

    This is agui-meta's extension of AG-UI (which has no resumption): a stream's event ids are
    ``<stream key>:<sequence number>``; a reconnection that names an id this buffer no longer
    holds is answered ``410 Gone`` with the reason.
    """

    def __init__(
        self, *, max_events: int = 1000, linger: float = 30.0, max_streams: int = 1000
    ) -> None:
        if max_events < 1 or max_streams < 1:
            raise ValueError("max_events and max_streams must be at least 1")
        if linger < 0:
            raise ValueError(f"linger must be >= 0, got {linger}")
        self.max_events = max_events
        self.linger = linger
        self.max_streams = max_streams
        self._streams: dict[str, _Stream] = {}

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
                raise RuntimeError(
                    f"the replay buffer holds {self.max_streams} running streams "
                    "(max_streams): no room for another"
                )
            del self._streams[min(ended, key=lambda k: self._streams[k].ended_at or 0.0)]

    def _open(self) -> _Stream:
        self._purge()
        stream = _Stream(uuid.uuid4().hex, self.max_events, ring=True)
        self._streams[stream.key] = stream
        return stream

    def _find(self, last_event_id: str) -> tuple[_Stream, int] | str:
        """The stream and the next seq to send, or why the id cannot be resumed."""
        self._purge()
        key, _, seq_text = last_event_id.partition(":")
        stream = self._streams.get(key)
        if stream is None or not seq_text.isdigit() or len(seq_text) > 18:
            return f"no stream with event id {last_event_id!r} is held (unknown or expired)"
        seq = int(seq_text)
        if seq >= stream.next_seq:
            return f"event id {last_event_id!r} was never sent"
        if seq + 1 < stream.first_kept():
            return (
                f"the events after {last_event_id!r} are no longer held "
                f"(the replay buffer keeps the last {self.max_events} events of a stream)"
            )
        return stream, seq + 1
