"""Resumable streams across replicas: the events of each response kept in a Redis stream.

:class:`RedisReplay` is a :class:`~agui_meta.Replay` (the contract of
``EventStreamResponse(replay=...)``) that any number of replicas share through one Redis.
The replica serving a run appends every encoded SSE event to the stream ``{ns}:replay:KEY`` of
that response before sending it, so a reconnection carrying ``Last-Event-ID`` may arrive at
any replica: that one reads the entries after the id from Redis and streams them until the
end marker.

Layout (per response; ``KEY`` is a random UUID, the prefix of the response's SSE ids
``KEY:N``):

- ``{ns}:replay:KEY`` stream: event ``N`` is the entry ``0-(N+1)`` with the field ``d`` (the
  encoded SSE event, its ``id:`` line included); the run's end is one more entry with the field
  ``end`` (``complete``, or ``abandoned`` when the run was cancelled or could not be kept).
  Every append trims to ``MAXLEN ~ maxlen`` (exactly ``maxlen`` with ``approximate=False``) and
  sets the key's TTL to ``ttl``;
- ``{ns}:replay:KEY:alive``: set by the producing replica every ``lost_after / 3`` seconds with
  a TTL of ``lost_after``: a reader that finds neither new entries nor this key knows the
  producer died without ending the stream;
- ``{ns}:replay:KEY:reader``: set by a reader on another replica, with a TTL of ``linger``, so
  that the producer keeps the run going while the client reads it elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import redis.asyncio
import redis.exceptions

from .._exceptions import StreamLost, UsageError
from .._replay import Replay, ReplayLog, ReplayReader, parse_event_id
from .._resume import BufferedStream, BufferedStreamReader
from ._common import text
from ._keys import Keys

__all__ = ["RedisReplay"]

logger = logging.getLogger("agui_meta.redis.replay")

_REDIS_ERRORS = (redis.exceptions.RedisError, OSError)


def entry_index(entry_id: Any) -> int:
    """The sequence part of an entry id (``0-7`` → 7)."""
    return int(text(entry_id).partition("-")[2])


def entry_fields(raw: Any) -> dict[str, Any]:
    return {text(k): v for k, v in raw.items()}


def stream_entries(reply: Any) -> list[tuple[Any, Any]]:
    """The entries of an ``XREAD`` reply on one stream (RESP2 list or RESP3 map)."""
    if not reply:
        return []
    streams = list(reply.values()) if isinstance(reply, dict) else [s[1] for s in reply]
    found = streams[0] if streams else []
    if found and isinstance(found[0], list) and found[0] and isinstance(found[0][0], list):
        found = found[0]  # RESP3 in some redis-py versions: one more level
    return [(entry[0], entry[1]) for entry in found]


class RedisReplay:
    """A replay store in Redis, shared by the replicas of an endpoint.

    ``EventStreamResponse(source, replay=RedisReplay(client))`` on every replica: a stream
    started on one may be resumed (``Last-Event-ID``) on any other sharing the Redis server and
    the namespace.

    :param client: a ``redis.asyncio.Redis`` client (bytes or ``decode_responses=True``).
    :param namespace: the key namespace (``"agui"`` as the workers').
    :param maxlen: the events kept per stream (at least; ``MAXLEN ~`` trims in whole nodes).
    :param approximate: trim with ``MAXLEN ~`` (the default; cheap) or exactly.
    :param ttl: seconds a stream is kept after its last event (or its end).
    :param linger: seconds a run goes on with no client reading it (here or on another
        replica), waiting for a reconnection; then it is cancelled and the stream ends
        *abandoned*.
    :param lost_after: seconds without a heartbeat from the producing replica after which a
        reader that gets no more entries ends with :class:`~agui_meta.StreamLost` (the replica
        died); the producer beats every third of it.
    :param count: entries read per ``XREAD`` (bounds a reader's memory).
    :param buffer: events held in the producing replica for its own first connection.
    :param close_timeout: the longest the end marker may take to write when the response is
        cancelled.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        namespace: str = "agui",
        maxlen: int = 1000,
        approximate: bool = True,
        ttl: float = 600.0,
        linger: float = 30.0,
        lost_after: float = 10.0,
        count: int = 100,
        buffer: int = 64,
        close_timeout: float = 5.0,
    ) -> None:
        if maxlen < 1 or count < 1 or buffer < 1:
            raise UsageError(
                f"maxlen, count and buffer must be at least 1, got {maxlen}, {count}, {buffer}"
            )
        for name, value in (("ttl", ttl), ("lost_after", lost_after)):
            if not value > 0:
                raise UsageError(f"{name} must be > 0 seconds, got {value!r}")
        if linger < 0 or close_timeout < 0:
            raise UsageError(
                f"linger and close_timeout must be >= 0, got {linger}, {close_timeout}"
            )
        self.client = client
        self.keys = Keys(namespace)
        self.maxlen = maxlen
        self.approximate = approximate
        self.ttl = ttl
        self.linger = linger
        self.lost_after = lost_after
        self.count = count
        self.buffer = buffer
        self.close_timeout = close_timeout

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[ReplayLog]:
        """A new stream in Redis, with the producer's heartbeat while it is open."""
        log = _RedisLog(self, uuid.uuid4().hex)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(log.heartbeat)
                try:
                    yield log
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.close_timeout):
                await log.end(complete=False)  # nothing when the producer ended it
            log.local.finish()

    async def resume(self, last_event_id: str) -> ReplayReader | str:
        """A reader of the events after ``last_event_id``, or why they cannot be resumed."""
        parsed = parse_event_id(last_event_id)
        unknown = f"no stream with event id {last_event_id!r} is held (unknown or expired)"
        if parsed is None:
            return unknown
        key, seq = parsed
        stream = self.keys.replay(key)
        pipe = self.client.pipeline(transaction=True)
        pipe.xrange(stream, count=1)
        pipe.xrevrange(stream, count=1)
        first, last = await pipe.execute()
        if not first or not last:
            return unknown
        last_id, last_fields = last[0]
        sent = entry_index(last_id) - (
            1 if "end" in entry_fields(last_fields) else 0
        )  # events kept
        if seq >= sent:
            return f"event id {last_event_id!r} was never sent"
        if entry_index(first[0][0]) > seq + 2:
            return (
                f"the events after {last_event_id!r} are no longer held (the replay store "
                f"keeps the last {self.maxlen} events of a stream)"
            )
        return RedisStreamReader(self, key, seq)


class _RedisLog:
    """The stream of one response: appended to Redis first, then to the local copy."""

    def __init__(self, replay: RedisReplay, key: str) -> None:
        self.replay = replay
        self.key = key
        self.stream = replay.keys.replay(key)
        self.alive = replay.keys.replay_alive(key)
        self.readers = replay.keys.replay_reader(key)
        self.local = BufferedStream(key, replay.buffer, ring=True, linger=replay.linger)
        self.ended = False

    def _add(self, pipe: Any, fields: dict[str, Any], index: int) -> None:
        replay = self.replay
        pipe.xadd(
            self.stream,
            fields,
            id=f"0-{index}",
            maxlen=replay.maxlen,
            approximate=replay.approximate,
        )
        pipe.pexpire(self.stream, max(1, int(replay.ttl * 1000)))

    async def append(self, events: Sequence[tuple[int, bytes]]) -> None:
        if not events:
            return
        if self.ended:
            raise UsageError(f"the stream {self.key} has ended: nothing may be appended")
        pipe = self.replay.client.pipeline(transaction=True)
        for seq, data in events:
            self._add(pipe, {"d": data}, seq + 1)
        pipe.set(self.alive, b"1", px=max(1, int(self.replay.lost_after * 1000)))
        await pipe.execute()  # kept in Redis before any client may see them
        await self.local.append(events)

    async def end(self, *, complete: bool = True) -> None:
        if self.ended:
            return
        self.ended = True
        try:
            pipe = self.replay.client.pipeline(transaction=True)
            outcome = b"complete" if complete else b"abandoned"
            self._add(pipe, {"end": outcome}, self.local.next_seq + 1)
            pipe.delete(self.alive)
            await pipe.execute()
        except _REDIS_ERRORS:
            # Readers elsewhere see the heartbeat stop and end with StreamLost.
            logger.exception("the end of the replay stream %s could not be written", self.key)
        finally:
            await self.local.end(complete=complete)

    def reader(self) -> BufferedStreamReader:
        return self.local.reader(0)

    async def heartbeat(self) -> None:
        client = self.replay.client
        ttl = max(1, int(self.replay.lost_after * 1000))
        while True:
            try:
                await client.set(self.alive, b"1", px=ttl)
            except _REDIS_ERRORS:
                logger.warning("the replay stream %s could not beat", self.key, exc_info=True)
            await anyio.sleep(self.replay.lost_after / 3)

    async def linger(self) -> None:
        """Return once the run has ended or had no reader, here or elsewhere, for ``linger``."""
        linger = self.replay.linger
        poll = min(1.0, max(linger / 4, 0.01))
        quiet_since = anyio.current_time()
        while not self.local.done:
            attached = bool(self.local.readers)
            if not attached:
                try:
                    attached = bool(await self.replay.client.exists(self.readers))
                except _REDIS_ERRORS:
                    logger.warning("could not look for readers of %s", self.key, exc_info=True)
            now = anyio.current_time()
            if attached:
                quiet_since = now
            elif now - quiet_since >= linger:
                return
            with anyio.move_on_after(poll):
                await self.local.changed()


class RedisStreamReader:
    """The events of a stream in Redis after a given one, for a connection on any replica."""

    def __init__(self, replay: RedisReplay, key: str, seq: int) -> None:
        self.replay = replay
        self.key = key
        self.stream = replay.keys.replay(key)
        self.alive = replay.keys.replay_alive(key)
        self.readers = replay.keys.replay_reader(key)
        self.position = seq + 1  # the index of the last entry read
        self.outcome: str | None = None

    def _take(self, reply: Any) -> list[bytes]:
        frames = []
        for entry_id, raw in stream_entries(reply):
            index = entry_index(entry_id)
            if index != self.position + 1:
                raise StreamLost(
                    f"events {self.key}:{self.position} to {self.key}:{index - 2} were trimmed "
                    f"before this reader got them: it fell more than {self.replay.maxlen} "
                    "events behind"
                )
            self.position = index
            fields = entry_fields(raw)
            if "end" in fields:
                self.outcome = text(fields["end"])
                break
            data = fields["d"]
            frames.append(data if isinstance(data, bytes) else str(data).encode())
        return frames

    def _ended(self) -> None:
        if self.outcome != "complete":
            raise StreamLost(
                f"the stream {self.key} ended after {self.position - 1} events without "
                "finishing the run (abandoned: no client for its linger, its server stopped, "
                "or its events could not be kept)"
            )

    async def read(self, wait: float) -> list[bytes] | None:
        if self.outcome is not None:
            self._ended()
            return None
        replay = self.replay
        client = replay.client
        deadline = anyio.current_time() + wait
        step = min(1.0, max(replay.linger / 2, 0.05))
        while True:
            # Tell the producer a client reads this stream, then wait for entries.
            await client.set(self.readers, b"1", px=max(1, int(max(replay.linger, step) * 1000)))
            block = min(step, max(deadline - anyio.current_time(), 0.001))
            reply = await client.xread(
                {self.stream: f"0-{self.position}"},
                count=replay.count,
                block=max(1, int(block * 1000)),
            )
            frames = self._take(reply)
            if not frames and self.outcome is None and not await client.exists(self.alive):
                # No heartbeat: the producer is gone, unless it ended just now.
                again = await client.xread({self.stream: f"0-{self.position}"}, count=replay.count)
                frames = self._take(again)
                if not frames and self.outcome is None:
                    gone = not await client.exists(self.stream)
                    raise StreamLost(
                        f"the stream {self.key} "
                        + ("expired" if gone else "stopped")
                        + f" after {self.position} events without finishing the run: its "
                        f"producing server sent nothing for {replay.lost_after:g} s (it died "
                        "or lost Redis)"
                    )
            if frames:
                return frames
            if self.outcome is not None:
                self._ended()
                return None
            if anyio.current_time() >= deadline:
                return []

    async def aclose(self) -> None:
        """Nothing to release: the reader mark expires after ``linger`` (as a disconnect's)."""


if TYPE_CHECKING:  # mypy checks that the store keeps the contract

    def _conforms(store: RedisReplay) -> Replay:
        return store
