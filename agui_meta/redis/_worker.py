"""A worker: owns virtual shards through leases, processes their entries, commits each batch once.

The loop, per iteration:

1. every quarter of the lease: heartbeat, renew the leases held (a shard whose renewal fails is
   dropped at once), release shards over the fair share (shards / live workers, rounded up),
   acquire free ones up to it; a newly acquired shard's pending entries (its previous owner's,
   left by a crash or a lost lease) are claimed with ``XAUTOCLAIM`` and replayed first;
2. read new entries of every shard held, in one fenced script (a shard whose lease moved yields
   nothing, so a stalled old owner cannot take entries from the new one);
3. per shard, apply the entries to their threads (:class:`~agui_meta._durable.ThreadState`),
   then commit everything they changed in one script (:data:`._scripts.COMMIT`): outputs,
   watermarks, snapshots, usage, acknowledgements and the trim, or nothing if the lease is not
   the worker's any more. A worker never commits past its own deadline (the time it renewed
   minus a margin), so it stops before its lease can run out;
4. threads whose open run got no entry for ``idle_timeout`` seconds are closed as if their
   source had ended.

Any Redis error drops every shard's in-memory state (it may be behind what the server
committed) and the worker starts again from what Redis holds.
"""

from __future__ import annotations

import math
import os
import random
import socket
import time
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .._durable import Envelope, Output, ThreadState
from .._threads import ThreadSnapshot
from ._common import DEFAULT_SHARDS, Scripts, shard_count, text
from ._keys import GROUP, Keys

__all__ = ["Worker", "WorkerStats"]

_pack = msgspec.msgpack.Encoder().encode


class WorkerStats(msgspec.Struct, kw_only=True):
    """Counters of one worker's life (for logs and benchmarks)."""

    entries: int = 0
    replayed: int = 0
    commits: int = 0
    outputs: int = 0
    acquired: int = 0
    lost: int = 0
    released: int = 0
    errors: int = 0


class _Shard:
    __slots__ = ("backlog", "deadline", "holder", "n", "seen", "threads")

    def __init__(self, n: int, holder: str, deadline: float) -> None:
        self.n = n
        self.holder = holder
        self.deadline = deadline
        self.threads: dict[str, ThreadState] = {}
        self.seen: dict[str, float] = {}  # thread -> when its last entry was applied
        self.backlog: list[tuple[str, dict[bytes, bytes]]] = []


class Worker:
    """One worker process's share of the shards of a namespace.

    :param client: a ``redis.asyncio.Redis`` client (responses as bytes, the default). The
        worker turns its automatic retries off: a read or a commit whose reply was lost with
        the connection must not run a second time (the worker starts again from what Redis
        holds instead).
    :param namespace: the key namespace shared with ingest.
    :param name: the consumer name (unique per worker; host and process id by default).
    :param lease: the lease duration in seconds. A worker that cannot renew within it stops
        committing before it runs out, and another worker takes the shard over.
    :param batch: entries read per shard per iteration (one commit each).
    :param idle_timeout: seconds after which a thread's open run with no new entry is closed
        as ``validate`` closes a stream that ends there (``None``: never).
    :param shards: the shard count of a namespace not used before.
    :param poll: seconds to wait when nothing was read.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        namespace: str = "agui",
        name: str | None = None,
        lease: float = 10.0,
        batch: int = 256,
        idle_timeout: float | None = None,
        shards: int = DEFAULT_SHARDS,
        poll: float = 0.02,
    ) -> None:
        if lease <= 0 or batch < 1 or poll <= 0:
            raise ValueError("lease and poll must be positive, batch at least 1")
        if idle_timeout is not None and idle_timeout <= 0:
            raise ValueError("idle_timeout must be positive (or None)")
        client.set_retry(Retry(NoBackoff(), 0))
        self.client = client
        self.keys = Keys(namespace)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{random.getrandbits(24):06x}"
        if " " in self.name:
            raise ValueError(f"a worker name has no spaces: {self.name!r}")
        self.lease = lease
        self.batch = batch
        self.idle_timeout = idle_timeout
        self.poll = poll
        self.stats = WorkerStats()
        self._default_shards = shards
        self._shard_count = 0
        self._scripts = Scripts(client)
        self._held: dict[int, _Shard] = {}
        self._clock: Callable[[], float] = time.monotonic

    @property
    def shards(self) -> list[int]:
        """The shards held now."""
        return sorted(self._held)

    # -- the loop

    async def run(self, *, exit_when_idle: float | None = None) -> None:
        """Work until cancelled, or until nothing happened for ``exit_when_idle`` seconds.

        "Nothing happened": no entry read or claimed, no shard acquired, no run closed. Choose
        it longer than the lease when other workers may die, so that their shards (free once
        their leases run out) are picked up first. Leases are released on the way out.
        """
        clock = self._clock
        last_work = clock()
        next_leases = 0.0
        try:
            while True:
                try:
                    worked = False
                    if clock() >= next_leases:
                        worked = await self._leases()
                        next_leases = clock() + self.lease / 4
                    worked = await self._step() or worked
                    worked = await self._close_idle() or worked
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
                    self.stats.errors += 1
                    self._drop_all()
                    next_leases = 0.0
                    await anyio.sleep(min(0.5, self.lease / 10))
                    continue
                if worked:
                    last_work = clock()
                elif exit_when_idle is not None and clock() - last_work >= exit_when_idle:
                    return
                else:
                    await anyio.sleep(self.poll)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await self._release_all()

    # -- leases

    async def _leases(self) -> bool:
        keys, client = self.keys, self.client
        if not self._shard_count:
            self._shard_count = await shard_count(client, keys, self._default_shards)
        count = self._shard_count
        now = time.time()
        pipe = client.pipeline(transaction=False)
        pipe.zadd(keys.workers, {self.name: now + self.lease})
        pipe.zremrangebyscore(keys.workers, "-inf", now)
        pipe.zcard(keys.workers)
        live = max(1, int((await pipe.execute())[2]))
        target = math.ceil(count / live)
        worked = False
        for n in list(self._held):
            shard = self._held[n]
            started = self._clock()
            ok = await self._scripts.call(
                "RENEW", [keys.lease(n)], [shard.holder, int(self.lease * 1000)]
            )
            if ok == 1:
                shard.deadline = started + self.lease * 0.8
            else:
                self._drop(n)
        if len(self._held) > target:
            # Give away the shards with the least in memory first.
            extra = sorted(self._held.values(), key=lambda s: len(s.threads))
            for shard in extra[: len(self._held) - target]:
                await self._release(shard.n)
        if len(self._held) < target:
            pipe = client.pipeline(transaction=False)
            free = [n for n in range(count) if n not in self._held]
            for n in free:
                pipe.exists(keys.lease(n))
            held = await pipe.execute()
            candidates = [n for n, h in zip(free, held, strict=True) if not h]
            random.shuffle(candidates)
            for n in candidates:
                if len(self._held) >= target:
                    break
                started = self._clock()
                token = await self._scripts.call(
                    "ACQUIRE",
                    [keys.lease(n), keys.fence(n), keys.shard(n)],
                    [self.name, int(self.lease * 1000), GROUP],
                )
                if not token:
                    continue
                shard = _Shard(n, f"{int(token)} {self.name}", started + self.lease * 0.8)
                self._held[n] = shard
                self.stats.acquired += 1
                await self._claim(shard)
                worked = True
        return worked

    async def _claim(self, shard: _Shard) -> None:
        """Take over every entry still pending on the shard (of any consumer), in id order."""
        start: Any = "0-0"
        stream = self.keys.shard(shard.n)
        while True:
            reply = await self.client.xautoclaim(
                stream, GROUP, self.name, min_idle_time=0, start_id=start, count=500
            )
            start, entries = reply[0], reply[1]
            shard.backlog.extend(
                (text(entry_id), fields) for entry_id, fields in entries if fields is not None
            )
            if text(start) == "0-0":
                break
        shard.backlog.sort(key=lambda e: _id_key(e[0]))
        self.stats.replayed += len(shard.backlog)

    async def _release(self, n: int) -> None:
        shard = self._held.pop(n, None)
        if shard is not None:
            self.stats.released += 1
            await self._scripts.call("RELEASE", [self.keys.lease(n)], [shard.holder])

    async def _release_all(self) -> None:
        try:
            for n in list(self._held):
                await self._release(n)
            await self.client.zrem(self.keys.workers, self.name)
        except (redis.exceptions.RedisError, OSError):
            self._drop_all()

    def _drop(self, n: int) -> None:
        if self._held.pop(n, None) is not None:
            self.stats.lost += 1

    def _drop_all(self) -> None:
        for n in list(self._held):
            self._drop(n)

    # -- reading, processing, committing

    async def _step(self) -> bool:
        if not self._held:
            return False
        worked = False
        for shard in list(self._held.values()):
            if shard.backlog:
                entries, shard.backlog = shard.backlog, []
                await self._process(shard, entries)
                worked = True
        shards = [s for s in self._held.values() if not s.backlog]
        if not shards:
            return worked
        keys: list[str] = []
        for s in shards:
            keys += [self.keys.lease(s.n), self.keys.shard(s.n)]
        replies = await self._scripts.call(
            "READ", keys, [GROUP, self.name, self.batch, *(s.holder for s in shards)]
        )
        for shard, reply in zip(shards, replies, strict=True):
            if reply == -1:
                self._drop(shard.n)
            elif reply:
                entries = [(text(e[0]), _fields(e[1])) for e in reply]
                await self._process(shard, entries)
                worked = True
        return worked

    async def _load(self, shard: _Shard, thread_ids: list[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for thread_id in thread_ids:
            pipe.hmget(self.keys.thread(thread_id), "snap", "wm")
        for thread_id, (snap, wm) in zip(thread_ids, await pipe.execute(), strict=True):
            snapshot = (
                ThreadSnapshot(thread_id=thread_id)
                if snap is None
                else ThreadSnapshot.from_json(snap)
            )
            shard.threads[thread_id] = ThreadState(snapshot, None if wm is None else text(wm))

    async def _process(self, shard: _Shard, entries: list[tuple[str, dict[bytes, bytes]]]) -> None:
        decoded: list[tuple[str, Envelope | None]] = []
        for entry_id, fields in entries:
            try:
                decoded.append((entry_id, Envelope.decode(fields[b"e"])))
            except (KeyError, msgspec.DecodeError):
                decoded.append((entry_id, None))
        missing = sorted(
            {e.thread for _, e in decoded if e is not None and e.thread not in shard.threads}
        )
        if missing:
            await self._load(shard, missing)
        now = self._clock()
        touched: dict[str, ThreadState] = {}
        bad: list[str] = []
        for entry_id, envelope in decoded:
            if envelope is None:
                bad.append(entry_id)
                continue
            state = shard.threads[envelope.thread]
            state.apply(entry_id, envelope)
            shard.seen[envelope.thread] = now
            touched[envelope.thread] = state
        self.stats.entries += len(entries)
        await self._commit(shard, touched, bad)

    async def _close_idle(self) -> bool:
        timeout = self.idle_timeout
        if timeout is None:
            return False
        now = self._clock()
        worked = False
        for shard in list(self._held.values()):
            touched = {}
            for thread_id, state in shard.threads.items():
                if state.open and now - shard.seen.get(thread_id, now) >= timeout:
                    state.close_idle()
                    touched[thread_id] = state
            if touched:
                await self._commit(shard, touched, [])
                worked = True
        return worked

    async def _commit(self, shard: _Shard, touched: dict[str, ThreadState], bad: list[str]) -> None:
        threads, outputs, acks = [], [], list(bad)
        usage: dict[str, int] = {}
        for thread_id, state in touched.items():
            expected = state.stored.version
            changes = state.take()
            snap = changes.snapshot
            threads.append(
                [
                    thread_id,
                    expected,
                    "" if snap is None else snap.to_json().decode(),
                    expected if snap is None else snap.version,
                    changes.watermark or "",
                ]
            )
            outputs += [[o.key, o.thread, o.kind, o.encode().decode()] for o in changes.outputs]
            acks += changes.acks
            for name, value in changes.usage.items():
                usage[name] = usage.get(name, 0) + value
        for entry_id in bad:
            report = Output(
                key=f"/{self.keys.shard(shard.n)}/{entry_id}",
                thread="",
                kind="report",
                data={
                    "code": "bad-envelope",
                    "message": f"entry {entry_id} of {self.keys.shard(shard.n)} is not an envelope",
                    "severity": "error",
                },
            )
            outputs.append([report.key, "", "report", report.encode().decode()])
        if self._clock() > shard.deadline:
            self._drop(shard.n)  # too close to the lease's end: the next owner redoes it
            return
        payload = {
            "threads": threads,
            "outputs": outputs,
            "usage": [[k, str(v)] for k, v in usage.items()],
            "acks": acks,
        }
        try:
            await self._scripts.call(
                "COMMIT",
                [
                    self.keys.lease(shard.n),
                    self.keys.shard(shard.n),
                    self.keys.out,
                    self.keys.usage,
                ],
                [shard.holder, GROUP, self.keys.thread_prefix, _pack(payload)],
            )
        except redis.exceptions.ResponseError as exc:
            if "FENCED" in str(exc) or "VERSION" in str(exc):
                self._drop(shard.n)
                return
            raise
        except BaseException:
            self._drop(shard.n)  # it may or may not have been applied: start again from Redis
            raise
        self.stats.commits += 1
        self.stats.outputs += len(outputs)
        for thread_id, state in touched.items():
            if not state.open:
                del shard.threads[thread_id]
                shard.seen.pop(thread_id, None)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _fields(flat: list[Any]) -> dict[bytes, bytes]:
    it = iter(flat)
    return {
        (k if isinstance(k, bytes) else str(k).encode()): v for k, v in zip(it, it, strict=True)
    }
