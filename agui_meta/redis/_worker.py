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

import logging
import math
import os
import random
import re
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

from .._durable import MAX_LIVE_THREADS, Changes, Envelope, LiveThreads, Output, ThreadState
from .._exceptions import AguiMetaError, CommitTooLarge, UsageError
from .._threads import ThreadSnapshot
from ._common import DEFAULT_SHARDS, Scripts, shard_count, text
from ._keys import GROUP, Keys

__all__ = ["Worker", "WorkerStats"]

_pack = msgspec.msgpack.Encoder().encode
_json = msgspec.json.Encoder().encode
logger = logging.getLogger("agui_meta.redis.worker")


class WorkerStats(msgspec.Struct, kw_only=True):
    """Counters of one worker's life (for logs and benchmarks).

    ``cpu`` is the CPU time in seconds (``time.process_time()``: the whole process, user and
    system) that passed while :meth:`Worker.run` ran, its start-up and the process's imports
    left out.
    """

    entries: int = 0
    replayed: int = 0
    commits: int = 0
    outputs: int = 0
    acquired: int = 0
    lost: int = 0
    released: int = 0
    errors: int = 0
    cpu: float = 0.0


class _Shard:
    __slots__ = ("backlog", "deadline", "holder", "n", "quarantined", "seen", "threads")

    def __init__(self, n: int, holder: str, deadline: float) -> None:
        self.n = n
        self.holder = holder
        self.deadline = deadline
        self.threads: dict[str, ThreadState] = {}
        self.quarantined: set[str] = set()  # threads whose entries are parked
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
    :param max_commit: the most bytes one commit may carry (``None``: what the server takes
        in one argument and one request, ``proto-max-bulk-len`` and
        ``client-query-buffer-limit``, less a margin). A batch whose results weigh more is
        committed in several steps, each whole; a thread whose single entry's results or
        snapshot weigh more is quarantined.
    :param max_live_threads: how many threads between runs the worker keeps in memory, with
        their live store and the version it committed (the least recently used beyond are
        forgotten and loaded again from Redis when their next entry comes). A kept thread
        needs no load and no rebuild of its store from the snapshot; its commit still compares
        the version, and when another writer moved it the shard is given up and every thread
        of it loaded again.

    A thread whose hash the worker cannot use (a ``snap`` that is not its snapshot, a ``v``
    that is not its version, a ``wm`` that is not an entry id, a key that is not a hash) is
    **quarantined**: recorded in ``{ns}:quarantine`` with its key and the problem, reported
    (an output ``thread-quarantined``, and a warning on the ``agui_meta.redis.worker``
    logger), and its entries moved to the ``{ns}:parked`` stream and acknowledged. The other
    threads of the shard go on. Each commit is logged at level ``INFO`` on that logger.
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
        max_commit: int | None = None,
        max_live_threads: int = MAX_LIVE_THREADS,
    ) -> None:
        if not (_positive(lease) and _positive(poll)) or batch < 1:
            raise UsageError("lease and poll must be positive and finite, batch at least 1")
        if idle_timeout is not None and not _positive(idle_timeout):
            raise UsageError("idle_timeout must be positive and finite (or None)")
        if max_commit is not None and max_commit < 1:
            raise UsageError("max_commit must be at least 1 (or None)")
        if client.connection_pool.connection_kwargs.get("decode_responses"):
            raise UsageError(
                "a worker reads entries and snapshots as bytes: give it a client without "
                "decode_responses=True"
            )
        client.set_retry(Retry(NoBackoff(), 0))
        self.client = client
        self.keys = Keys(namespace)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{random.getrandbits(24):06x}"
        if " " in self.name:
            raise UsageError(f"a worker name has no spaces: {self.name!r}")
        self.lease = lease
        self.batch = batch
        self.idle_timeout = idle_timeout
        self.poll = poll
        self.stats = WorkerStats()
        self._default_shards = shards
        self._shard_count = 0
        self._scripts = Scripts(client)
        self._max_commit = max_commit
        self._oversized = 0  # commits in a row whose connection closed while the server answers
        self._held: dict[int, _Shard] = {}
        # The threads kept between runs, least recently used first, and the shard of each.
        self._kept_in: dict[str, _Shard] = {}
        self._kept = LiveThreads(max_live_threads, self._forget)
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

        :raises CommitTooLarge: a commit the server refused for its size twice in a row.
        """
        if exit_when_idle is not None and not (
            exit_when_idle >= 0 and math.isfinite(exit_when_idle)
        ):
            raise UsageError(
                f"exit_when_idle must be a finite number of seconds, not {exit_when_idle}"
            )
        clock = self._clock
        last_work = clock()
        next_leases = 0.0
        cpu = time.process_time()
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
                    held = sum(st.open for s in self._held.values() for st in s.threads.values())
                    logger.info(
                        "%s: idle for %gs, stopping: %d entries processed, %d commits; "
                        "%d threads hold an open run (their entries stay pending)",
                        self.name,
                        exit_when_idle,
                        self.stats.entries,
                        self.stats.commits,
                        held,
                    )
                    return
                else:
                    await anyio.sleep(self.poll)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await self._release_all()
            self.stats.cpu += time.process_time() - cpu

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
            self._unkeep(shard)
            await self._scripts.call("RELEASE", [self.keys.lease(n)], [shard.holder])

    async def _release_all(self) -> None:
        try:
            for n in list(self._held):
                await self._release(n)
            await self.client.zrem(self.keys.workers, self.name)
        except (redis.exceptions.RedisError, OSError):
            self._drop_all()

    def _drop(self, n: int) -> None:
        shard = self._held.pop(n, None)
        if shard is not None:
            self.stats.lost += 1
            self._unkeep(shard)

    def _unkeep(self, shard: _Shard) -> None:
        """Forget the threads kept of a shard given up (another owner may change them)."""
        for thread_id in shard.threads:
            if self._kept_in.get(thread_id) is shard:
                del self._kept_in[thread_id]
                self._kept.discard(thread_id)

    def _forget(self, thread_id: str) -> None:
        """The least recently used kept thread out (loaded from Redis when it comes again)."""
        shard = self._kept_in.pop(thread_id, None)
        if shard is not None:
            state = shard.threads.get(thread_id)
            if state is not None and not state.open:
                del shard.threads[thread_id]

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

    async def _load(self, shard: _Shard, thread_ids: list[str]) -> dict[str, _Problem]:
        """Load the threads' state; a thread whose hash is not what the workers write, or that
        is quarantined already, is set aside (returned: the newly found, with their problem)."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=False)
        for thread_id in thread_ids:
            pipe.hmget(keys.thread(thread_id), "v", "snap", "wm")
        pipe.hmget(keys.quarantine, thread_ids)
        replies = await pipe.execute(raise_on_error=False)
        marks = replies.pop()
        if isinstance(marks, Exception):
            raise redis.exceptions.ResponseError(f"{keys.quarantine}: {marks}")
        found: dict[str, _Problem] = {}
        for thread_id, fields, mark in zip(thread_ids, replies, marks, strict=True):
            if mark is not None:
                shard.quarantined.add(thread_id)
                continue
            checked = _check_thread(thread_id, keys.thread(thread_id), fields)
            if isinstance(checked, ThreadState):
                shard.threads[thread_id] = checked
            else:
                shard.quarantined.add(thread_id)
                found[thread_id] = checked
        return found

    async def _process(self, shard: _Shard, entries: list[tuple[str, dict[bytes, bytes]]]) -> None:
        decoded: list[tuple[str, Envelope | None]] = []
        for entry_id, fields in entries:
            try:
                decoded.append((entry_id, Envelope.decode(fields[b"e"])))
            except (KeyError, msgspec.DecodeError):
                decoded.append((entry_id, None))
        missing = sorted(
            {
                e.thread
                for _, e in decoded
                if e is not None and e.thread not in shard.threads
                if e.thread not in shard.quarantined
            }
        )
        found = await self._load(shard, missing) if missing else {}
        now = self._clock()
        touched: dict[str, ThreadState] = {}
        bad: list[str] = []
        parked: dict[str, list[str]] = {}
        for entry_id, envelope in decoded:
            if envelope is None:
                bad.append(entry_id)
                continue
            thread_id = envelope.thread
            if thread_id in shard.quarantined:
                parked.setdefault(thread_id, []).append(entry_id)
                continue
            state = shard.threads[thread_id]
            state.apply(entry_id, envelope)
            shard.seen[thread_id] = now
            touched[thread_id] = state
        self.stats.entries += len(entries)
        await self._commit(shard, touched, bad, parked, found)

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

    async def _budget(self) -> int:
        """The most a commit's payload may weigh: under the server's ``proto-max-bulk-len``
        (one argument) and ``client-query-buffer-limit`` (one request), with a margin."""
        if self._max_commit is None:
            limits = []
            for name in ("proto-max-bulk-len", "client-query-buffer-limit"):
                try:
                    reply = await self.client.config_get(name)
                except redis.exceptions.ResponseError:  # CONFIG renamed or refused
                    continue
                for key, value in reply.items():
                    if text(key) == name:
                        limits.append(int(text(value)))
            limit = min(limits, default=_DEFAULT_BULK_LIMIT)
            self._max_commit = max(limit - max(limit // 16, 64 << 10), 1)
        return self._max_commit

    async def _commit(
        self,
        shard: _Shard,
        touched: dict[str, ThreadState],
        bad: list[str],
        parked: dict[str, list[str]] | None = None,
        found: dict[str, _Problem] | None = None,
    ) -> None:
        budget = await self._budget()
        stream = self.keys.shard(shard.n)
        units: list[_Unit] = []
        quarantine = dict(found or {})
        park = {thread_id: list(ids) for thread_id, ids in (parked or {}).items()}
        for thread_id, state in touched.items():
            held = state.held
            expected = state.stored.version
            changes = state.take()
            mine = _units(thread_id, expected, changes)
            largest = max(unit.size for unit in mine)
            if largest <= budget:
                units += mine
                continue
            # One indivisible piece (one entry's results, or the snapshot) does not fit.
            quarantine[thread_id] = _Problem(
                "",
                f"one commit of its results would be {largest} bytes, more than the "
                f"{budget} this Redis server takes in one (proto-max-bulk-len)",
            )
            park.setdefault(thread_id, [])[:0] = [*changes.acks, *held]
            shard.quarantined.add(thread_id)
            shard.threads.pop(thread_id, None)
            shard.seen.pop(thread_id, None)
            self._kept_in.pop(thread_id, None)
            self._kept.discard(thread_id)
        for thread_id, problem in quarantine.items():
            first = (park.get(thread_id) or [""])[0]
            key = self.keys.thread(thread_id)
            logger.warning(
                "%s: thread %r quarantined (%s%s): %s; its entries are parked in %s",
                self.name,
                thread_id,
                key,
                f", field {problem.field!r}" if problem.field else "",
                problem.error,
                self.keys.parked,
            )
            units.append(_quarantine_unit(thread_id, key, problem, first, self.keys))
        for ids in park.values():
            units += [_Unit(park=[entry_id], acks=[entry_id], size=64) for entry_id in ids]
        for entry_id in bad:
            report = Output(
                key=f"/{stream}/{entry_id}",
                thread="",
                kind="report",
                data={
                    "code": "bad-envelope",
                    "message": f"entry {entry_id} of {stream} is not an envelope; it is "
                    f"parked in {self.keys.parked}",
                    "severity": "error",
                },
            )
            wire, size = _wire(report)
            units.append(_Unit(outputs=[wire], acks=[entry_id], park=[entry_id], size=size + 64))
        for payload in _pack_units(units, budget):
            if not await self._send(shard, payload):
                return
        kept, kept_in = self._kept, self._kept_in
        for thread_id, state in touched.items():
            if not state.open:
                shard.seen.pop(thread_id, None)
            if state.open or shard.threads.get(thread_id) is not state:
                kept_in.pop(thread_id, None)  # held for its open run, or quarantined
                kept.discard(thread_id)
            else:  # kept for its next run
                kept_in[thread_id] = shard
                kept.touch(thread_id)

    async def _send(self, shard: _Shard, payload: _Payload) -> bool:
        """One ``COMMIT``; ``False`` when the shard was given up (fenced, or a thread moved)."""
        if self._clock() > shard.deadline:
            self._drop(shard.n)  # too close to the lease's end: the next owner redoes it
            return False
        keys = self.keys
        data = _pack(payload.builtins())
        try:
            await self._scripts.call(
                "COMMIT",
                [
                    keys.lease(shard.n),
                    keys.shard(shard.n),
                    keys.out,
                    keys.usage,
                    keys.quarantine,
                    keys.parked,
                ],
                [shard.holder, GROUP, keys.thread_prefix, data],
            )
        except redis.exceptions.ResponseError as exc:
            message = str(exc)
            if message.startswith("FENCED"):
                self._drop(shard.n)
                return False
            if message.startswith(("VERSION", "WRONGTYPE")):
                # A thread's hash moved or broke under us: start again from what Redis holds
                # (a broken one is then quarantined when it is loaded).
                logger.info("%s: shard %d: %s; reloading", self.name, shard.n, message)
                await self._release(shard.n)
                return False
            if "invalid bulk length" in message or "Protocol error" in message:
                self._drop(shard.n)  # the server closes this connection
                raise CommitTooLarge(self._too_large(shard, len(data), message)) from None
            await self._release(shard.n)  # nothing was written: let it go at once
            raise
        except (redis.exceptions.ConnectionError, OSError):
            self._drop(shard.n)  # it may or may not have been applied: start again from Redis
            await self._suspect(shard, len(data))
            raise
        except BaseException:
            self._drop(shard.n)
            raise
        self._oversized = 0
        self.stats.commits += 1
        self.stats.outputs += len(payload.outputs)
        logger.info(
            "%s: shard %d: committed %d entries, %d outputs, %d snapshots (%d bytes)",
            self.name,
            shard.n,
            len(payload.acks),
            len(payload.outputs),
            payload.snapshots,
            len(data),
        )
        return True

    async def _suspect(self, shard: _Shard, size: int) -> None:
        """After a commit lost its connection: when the payload was large and the server still
        answers, it may have refused the request's size (the server closes the connection on
        an argument past ``proto-max-bulk-len``); twice in a row is an error, not a retry."""
        if size < _MIN_BULK_LIMIT:
            return
        try:
            await self.client.ping()
        except (redis.exceptions.RedisError, OSError):
            return  # the server is away: a connection error indeed
        self._oversized += 1
        if self._oversized >= 2:
            why = f"the connection closed {self._oversized} times while the server answers"
            raise CommitTooLarge(self._too_large(shard, size, why))

    def _too_large(self, shard: _Shard, size: int, why: str) -> str:
        return (
            f"a commit of {size} bytes to {self.keys.shard(shard.n)} was refused ({why}): "
            "larger than the server takes in one argument or request (raise its "
            "proto-max-bulk-len and client-query-buffer-limit, or allow CONFIG GET so that "
            "commits are cut to fit)"
        )


#: Redis' default proto-max-bulk-len (512 MiB), when CONFIG GET is refused; its least (1 MiB).
_DEFAULT_BULK_LIMIT = 512 << 20
_MIN_BULK_LIMIT = 1 << 20


class _Problem(msgspec.Struct, frozen=True):
    field: str  # "" for the hash as a whole
    error: str


class _Unit:
    """An indivisible part of a commit: one thread's results up to an entry (with that entry
    as the watermark), its snapshot with the acknowledgements, a quarantine, a parked entry."""

    __slots__ = ("acks", "outputs", "park", "quarantine", "size", "thread", "usage")

    def __init__(
        self,
        *,
        thread: list[Any] | None = None,
        outputs: list[list[Any]] | None = None,
        usage: dict[str, int] | None = None,
        acks: list[str] | None = None,
        park: list[str] | None = None,
        quarantine: list[Any] | None = None,
        size: int = 0,
    ) -> None:
        self.thread = thread
        self.outputs = outputs or []
        self.usage = usage or {}
        self.acks = acks or []
        self.park = park or []
        self.quarantine = quarantine
        self.size = size


def _wire(output: Output) -> tuple[list[Any], int]:
    """The output as the payload carries it (text, not bytes: the server's cmsgpack has no
    msgpack bin type), and how many bytes it weighs there at most."""
    data = output.encode()
    size = len(data) + (len(output.key) + len(output.thread)) * 4 + 32
    return [output.key, output.thread, output.kind, data.decode()], size


def _units(thread_id: str, expected: int, changes: Changes) -> list[_Unit]:
    """A thread's changes as units: one per entry counted for the first time (its outputs,
    watermark and counters), then one with the rest (snapshot, acknowledgements, run usage)."""
    wired = [_wire(o) for o in changes.outputs]
    outputs = [w for w, _ in wired]
    sizes = [n for _, n in wired]
    base = len(thread_id) * 4 + 64
    units = []
    done = 0
    for entry_id, end, events in changes.cuts:
        units.append(
            _Unit(
                thread=[thread_id, expected, "", expected, entry_id],
                outputs=outputs[done:end],
                usage={"entries": 1, "events": events},
                size=base + sum(sizes[done:end]),
            )
        )
        done = end
    usage = {k: v for k, v in changes.usage.items() if k not in ("entries", "events")}
    snap = changes.snapshot
    raw = b"" if snap is None else snap.to_json()
    data = raw.decode()
    units.append(
        _Unit(
            thread=[thread_id, expected, data, expected if snap is None else snap.version, ""],
            outputs=outputs[done:],
            usage=usage,
            acks=list(changes.acks),
            size=base
            + len(raw)
            + sum(sizes[done:])
            + 32 * len(changes.acks)
            + sum(len(k) * 4 + 16 for k in usage),
        )
    )
    return units


def _quarantine_unit(thread_id: str, key: str, problem: _Problem, first: str, keys: Keys) -> _Unit:
    reason = {"key": key, "field": problem.field or None, "error": problem.error}
    message = (
        f"thread {thread_id!r} is quarantined: {key}"
        + (f" field {problem.field!r}" if problem.field else "")
        + f": {problem.error}; its entries are parked in {keys.parked}"
    )
    report = Output(
        key=f"{thread_id}/quarantined/{first}",
        thread=thread_id,
        kind="report",
        data={"code": "thread-quarantined", "message": message, "severity": "error", **reason},
    )
    wire, size = _wire(report)
    quarantined = _json(reason).decode()
    return _Unit(
        quarantine=[thread_id, quarantined],
        outputs=[wire],
        size=size + len(quarantined) * 4 + 64,
    )


class _Payload:
    """What one ``COMMIT`` carries: units merged (a thread's records into one)."""

    def __init__(self) -> None:
        self.threads: dict[str, list[Any]] = {}
        self.outputs: list[list[Any]] = []
        self.usage: dict[str, int] = {}
        self.acks: list[str] = []
        self.park: list[str] = []
        self.quarantine: list[list[Any]] = []
        self.size = 0
        self.snapshots = 0

    def add(self, unit: _Unit) -> None:
        record = unit.thread
        if record is not None:
            held = self.threads.get(record[0])
            if held is None:
                self.threads[record[0]] = list(record)
            else:
                if record[2]:
                    held[2], held[3] = record[2], record[3]
                if record[4]:
                    held[4] = record[4]
            if record[2]:
                self.snapshots += 1
        self.outputs += unit.outputs
        for name, value in unit.usage.items():
            self.usage[name] = self.usage.get(name, 0) + value
        self.acks += unit.acks
        self.park += unit.park
        if unit.quarantine is not None:
            self.quarantine.append(unit.quarantine)
        self.size += unit.size

    def builtins(self) -> dict[str, Any]:
        return {
            "threads": list(self.threads.values()),
            "outputs": self.outputs,
            "usage": [[k, str(v)] for k, v in self.usage.items()],
            "acks": self.acks,
            "quarantine": self.quarantine,
            "park": self.park,
        }


def _pack_units(units: list[_Unit], budget: int) -> list[_Payload]:
    """The units, in order, in as few payloads of at most ``budget`` bytes as they fit."""
    payloads = [_Payload()]
    for unit in units:
        last = payloads[-1]
        if last.size and last.size + unit.size > budget:
            last = _Payload()
            payloads.append(last)
        last.add(unit)
    return payloads


def _check_thread(thread_id: str, key: str, fields: Any) -> ThreadState | _Problem:
    """A thread's state from its hash's ``v``, ``snap``, ``wm``, or what is wrong with them."""
    if isinstance(fields, Exception):
        return _Problem("", f"not a hash: {fields}")
    v, snap, wm = fields
    watermark = None
    if wm is not None:
        if not _ENTRY_ID.fullmatch(wm):
            return _Problem("wm", f"not a stream entry id: {_show(wm)}")
        watermark = wm.decode()
    if snap is None:
        if v is not None:
            return _Problem("snap", f"missing, while 'v' is {_show(v)}")
        return ThreadState(ThreadSnapshot(thread_id=thread_id), watermark)
    try:
        snapshot = ThreadSnapshot.from_json(snap)
    except msgspec.DecodeError as exc:
        return _Problem("snap", f"not a thread snapshot: {exc}")
    if snapshot.thread_id != thread_id:
        return _Problem("snap", f"the snapshot of thread {snapshot.thread_id!r}")
    if v is None or not _VERSION.fullmatch(v) or int(v) != snapshot.version:
        shown = "missing" if v is None else _show(v)
        return _Problem("v", f"{shown}, but its 'snap' is version {snapshot.version}")
    try:
        store = snapshot.to_store()
    except (AguiMetaError, ValueError, TypeError, RecursionError) as exc:
        return _Problem("snap", f"cannot be loaded: {exc}")
    return ThreadState(snapshot, watermark, store=store)


_ENTRY_ID = re.compile(rb"[0-9]{1,20}-[0-9]{1,20}")
_VERSION = re.compile(rb"0|[1-9][0-9]{0,17}")


def _show(value: bytes) -> str:
    """A field's bytes for a message: at most 60 of them, escaped."""
    return repr(value[:60]) + ("…" if len(value) > 60 else "")


def _positive(value: float) -> bool:
    return value > 0 and math.isfinite(value)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _fields(flat: list[Any]) -> dict[bytes, bytes]:
    it = iter(flat)
    return {
        (k if isinstance(k, bytes) else str(k).encode()): v for k, v in zip(it, it, strict=True)
    }
