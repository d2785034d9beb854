"""The gateway's runs across replicas: a :class:`~agui_meta.gateway.RunRegistry` on Redis.

Every replica serves every route for every thread. A replica that executes runs (the default)
executes the runs it accepts; a front replica (``execute=False``) dispatches them to the
executors (replicas that execute, or ``agui-meta executor`` processes) through the shard's
dispatch stream and its consumer group. What the others need is in Redis, under the tag of the
thread's shard (:class:`~agui_meta.redis._shards.GatewayKeys`):

- starting a run is one script (``BEGIN``): it refuses when the thread has a run in flight,
  else takes a fencing token, records the run and puts it in the shard's in-flight set, whose
  score is the end of the run's lease; a front replica's ``BEGIN`` also adds the run's entry
  (agent, scope, the whole input) to the shard's dispatch stream, its lease being how long it
  may wait for an executor;
- an executor reads the dispatch streams (``XREADGROUP``, only as many entries as it has room
  for runs) and takes each run with ``TAKE``: a new fencing token, its own lease; an entry it
  cannot parse is parked (``{ns:S}:dispatch:parked``) and its run ended with ``RUN_ERROR``
  code ``dispatch_error``;
- the run's events go to a stream (as :class:`~agui_meta.redis.RedisReplay`'s, and read by the
  same reader), each batch written by a script that checks the run is still the caller's;
- the executor renews the lease and reads the run's control stream, where a stop from any
  replica lands; it counts readers on every replica (their marks in Redis) for ``linger``;
- the run's end is one script (``COMMIT``): the thread saved with compare-and-set, the log's
  end marker, the thread freed, the dispatch entry acknowledged — or nothing, when the run was
  taken from the caller;
- every replica sweeps the in-flight sets: a run whose lease ran out (its executor died, or
  lost Redis for longer than the lease) is taken over with a new fencing token and ended with
  ``RUN_ERROR`` code ``executor_lost`` (``no_executor`` for a dispatched run no executor
  took in time), its thread saved with what its log holds (:mod:`._takeover`: what a client
  that followed the run holds) and its ledger recording the run once;
- with a budget per period, a scope's totals are a hash in Redis that the executor adds a run's
  usage to at its end (``CHARGE``, idempotent by run key); a run starts refused when its
  scope's totals are over, and a crossing stops the scope's runs on every replica.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import redis.asyncio
import redis.exceptions
from msgspec import UNSET

from .._decode import encode_event
from .._events import Message, RunAgentInput
from .._exceptions import AtCapacity, DataError, ThreadBusy, ThreadStoreError, UsageError
from .._framing import encode_sse
from .._join import thread_prelude
from .._registry import StopReason
from .._runs import MemoryRuns, Run, thread_store
from .._store import Store
from .._threads import ThreadSnapshot, ThreadStore, encode_snapshot
from .._tracecontext import current_carrier
from . import _runscripts
from ._common import text
from ._replay import RedisReplay, RedisStreamReader, entry_fields, entry_index, stream_entries
from ._runscripts import GROUP
from ._shards import GatewayKeys
from ._takeover import assemble_lost_run

if TYPE_CHECKING:
    from .._agents import GatewayAgent
    from .._catalog import Catalog
    from .._registry import RunHandle, RunRegistry
    from .._replay import ReplayReader

__all__ = ["RedisRuns", "consumer_name"]

logger = logging.getLogger("agui_meta.gateway")

_REDIS_ERRORS = (redis.exceptions.RedisError, OSError)
#: Events a run may have queued for Redis before it waits for the writes.
_AHEAD = 1024
_STOPS: dict[str, StopReason] = {
    "stopped": "stopped",
    "superseded": "superseded",
    "budget_exceeded": "budget_exceeded",
}


def _read_entries(reply: Any) -> list[tuple[str, Any, Any]]:
    """The entries of an ``XREADGROUP`` reply on several streams: (stream, id, fields)."""
    if not reply:
        return []
    streams = list(reply.items()) if isinstance(reply, dict) else [(s[0], s[1]) for s in reply]
    found = []
    for name, entries in streams:
        if (
            entries
            and isinstance(entries[0], list)
            and entries[0]
            and isinstance(entries[0][0], list)
        ):
            entries = entries[0]  # RESP3 in some redis-py versions: one more level
        found += [(text(name), entry[0], entry[1]) for entry in entries]
    return found


def consumer_name() -> str:
    """A consumer name for an executor: host, process id and a random part."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class _Malformed(Exception):
    """A dispatch entry that cannot be read (why)."""


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _count(value: Any, key: str, thread_id: str) -> int:
    """A counter read from Redis, or :class:`ThreadStoreError` naming the key and thread."""
    try:
        return int(text(value))
    except (TypeError, ValueError):
        raise ThreadStoreError(
            f"holds {value!r} where the count of the thread's runs belongs",
            store=f"Redis gateway (key {key!r})",
            thread_id=thread_id,
        ) from None


class _RedisRunLog:
    """A :class:`~agui_meta.gateway.RunLog` in a Redis stream, written by the run's holder.

    ``append`` queues the events and returns (the run never waits for Redis, unless
    ``_AHEAD`` events are queued); :meth:`flush`, a task of the run, writes what is queued in
    one script call at a time, so a fast agent's events go to Redis in batches.
    """

    def __init__(self, run: _RedisRun) -> None:
        self.run = run
        self.key = run.key
        self._next = 0
        self.written = 0  # events in Redis
        self._pending: list[bytes] = []
        self._ended = False
        self._closed = False  # no more appends: the flush ends once the queue is empty
        self._changed = anyio.Event()

    @property
    def next_seq(self) -> int:
        return self._next

    @property
    def ended(self) -> bool:
        return self._ended

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def append(self, frames: Sequence[bytes]) -> None:
        if self._ended or self._closed:
            raise UsageError(f"run log {self.key}: append after end")
        if not frames or self.run.fenced:
            return
        # Counted at once: the run's store already holds these events, and a ``join`` taken
        # now starts its reader after them.
        self._next += len(frames)
        self._pending.extend(frames)
        self._notify()
        while len(self._pending) >= _AHEAD and not self.run.fenced:
            await self._changed.wait()

    def close(self) -> None:
        self._closed = True
        self._notify()

    async def flush(self) -> None:
        """Write the queued events until :meth:`close` and an empty queue."""
        run = self.run
        runs = run.runs
        keys = runs.keys
        names = [keys.active(run.thread_id), keys.replay(self.key), keys.replay_alive(self.key)]
        ttl, alive = _ms(runs.max_run_time + runs.keep), _ms(runs.alive)
        while True:
            while not self._pending:
                if self._closed or run.fenced:
                    return
                await self._changed.wait()
            batch, self._pending = self._pending, []
            held = await runs.script(
                "LOG", names, [run.holder, runs.max_events, ttl, alive, self.written + 1, *batch]
            )
            self.written += len(batch)
            self._notify()
            if not held:
                run.fence()
                return

    async def end(self) -> None:
        self._ended = True  # the end marker is written with the thread (COMMIT)

    def reader(self, start: int) -> ReplayReader:
        return self.run.runs.reader(self.key, start)


class _RedisRun(Run):
    """A run executed by this replica, its log and its end in Redis."""

    def __init__(self, runs: RedisRuns, *, key: str, holder: str, **options: Any) -> None:
        super().__init__(runs, **options)
        self.runs = runs
        self.key = key
        self.holder = holder
        self.fenced = False
        self.log: _RedisRunLog = _RedisRunLog(self)

    async def _stream(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.log.flush)
            try:
                await super()._stream()
            finally:
                self.log.close()

    def fence(self) -> None:
        """The run was taken from this replica: write nothing more, stop the agent."""
        if not self.fenced:
            logger.warning(
                "run %s of thread %s was taken over: stopping", self.run_id, self.thread_id
            )
        self.fenced = True
        self.agent_scope.cancel()

    async def _watch_readers(self) -> None:
        """Renew the lease, take stops from the control stream, stop after ``linger``."""
        runs = self.runs
        keys = runs.keys
        client = runs.client
        step = runs.lease / 3
        control = keys.ctl(self.key)
        marks = keys.replay_reader(self.key)
        seen = "0-0"
        quiet_since = anyio.current_time()
        while True:
            try:
                held = await runs.script(
                    "RENEW",
                    [
                        keys.active(self.thread_id),
                        keys.inflight(keys.of(self.thread_id)),
                        keys.replay_alive(self.key),
                    ],
                    [self.holder, self.key, _ms(runs.lease), _ms(runs.alive)],
                )
                if not held:
                    self.fence()
                    return
                reply = await client.xread({control: seen}, count=16, block=_ms(step))
                for entry_id, raw in stream_entries(reply):
                    seen = text(entry_id)
                    fields = entry_fields(raw)
                    reason = _STOPS.get(text(fields.get("stop", b"")))
                    if reason is not None and self._stop(reason) and reason == "budget_exceeded":
                        self.budget_message = text(fields.get("message", b""))[:1000] or (
                            f"budget exceeded: scope {self.scope!r}; run {self.run_id!r} is ended"
                        )
                now = anyio.current_time()
                if self.readers or await client.exists(marks):
                    quiet_since = now
                elif now - quiet_since >= runs.linger:
                    self._stop("abandoned")
            except _REDIS_ERRORS:
                logger.warning("run %s: Redis did not answer", self.run_id, exc_info=True)
                await anyio.sleep(step)

    async def _finish(self) -> None:
        runs = self.runs
        try:
            await self.log.end()
            ledger = self.stages.ledger
            ledger.close()
            # Charged once, fenced or not: it was spent.
            await runs.charge(self, [u for record in ledger.runs for u in record.usage])
            if not self.fenced:
                snapshot = self.base.advance(self.store, ledger.runs)
                await runs.commit(self.key, self.holder, self.thread_id, self.log.written, snapshot)
        except Exception:  # the lease runs out: another replica ends the run
            logger.exception("run %s of thread %s could not be ended", self.run_id, self.thread_id)
        finally:
            self.ended_at = anyio.current_time()
            runs._ended(self)
            self._release()
            self.ended.set()


class _NoMore:
    """A reader with nothing to read."""

    async def read(self, wait: float) -> list[bytes] | None:
        return None

    async def aclose(self) -> None:
        pass


class _RemoteRun:
    """A run another replica executes (or executed): a :class:`~agui_meta.gateway.RunHandle`."""

    def __init__(self, runs: RedisRuns, key: str, meta: Mapping[str, str], events: int) -> None:
        self.runs = runs
        self.key = key
        self.thread_id = meta.get("thread", "")
        self.run_id = meta.get("run", "")
        self.scope = meta.get("scope", "")
        self.agent_name = meta.get("agent", "")
        self._events = events

    @property
    def events(self) -> int:
        return self._events

    def reader(self, start: int) -> ReplayReader:
        return self.runs.reader(self.key, start)

    async def join(self) -> tuple[list[bytes], ReplayReader]:
        """The thread as stored, then this run from its first event (its executor's store is
        in another process: the run is replayed rather than summarised)."""
        stored = await self.runs.threads.load(self.thread_id)
        stored = stored or ThreadSnapshot(thread_id=self.thread_id)
        messages, state = stored.messages, stored.state
        if stored.ledger.last_run_id == self.run_id:  # ended and saved: the thread is all
            prelude = thread_prelude(
                self.thread_id, self.run_id, messages, state, stored.pending_interrupts
            )
            return prelude, _NoMore()
        connect = f"connect-{uuid.uuid4().hex}"
        prelude = thread_prelude(
            self.thread_id, connect, messages, state, stored.pending_interrupts
        )
        return prelude, self.reader(0)

    async def stop(self, reason: StopReason, message: str = "") -> bool:
        """Ask the run's executor to stop it (``message``: its RUN_ERROR's, for a budget)."""
        runs = self.runs
        keys = runs.keys
        held = await runs.client.get(keys.active(self.thread_id))
        if held is None or not text(held).endswith(" " + self.key):
            return False
        control = keys.ctl(self.key)
        entry: dict[Any, Any] = {"stop": reason}
        if message:
            entry["message"] = message
        await runs.client.xadd(control, entry, maxlen=16, approximate=False)
        await runs.client.pexpire(control, _ms(max(runs.keep, runs.lease * 3)))
        return True

    async def wait_ended(self, within: float) -> bool:
        """Wait for the end marker of the run's log (written with the thread)."""
        runs = self.runs
        client = runs.client
        name, log = runs.keys.run(self.key), runs.keys.replay(self.key)
        deadline = anyio.current_time() + within
        with anyio.move_on_after(within):
            last = await client.xrevrange(log, count=1)
            position = text(last[0][0]) if last else "0-0"
            while True:
                ended = await client.hget(name, "ended")
                if ended is None or text(ended) == "1":
                    return True
                block = min(1.0, max(deadline - anyio.current_time(), 0.001))
                reply = await client.xread({log: position}, count=100, block=_ms(block))
                for entry_id, raw in stream_entries(reply):
                    position = text(entry_id)
                    if "end" in entry_fields(raw):
                        return True
        return False


class RedisRuns(MemoryRuns):
    """The gateway's runs across replicas sharing one Redis (or Redis Cluster).

    Takes :class:`~agui_meta.gateway.MemoryRuns`' options (``max_runs`` counts this replica's
    runs: those it executes or, on a front, those it dispatched that have not ended), and:

    :param client: a ``redis.asyncio.Redis`` or ``RedisCluster`` client.
    :param keys: the key names (namespace, shard count: the same on every replica).
    :param lease: seconds a run's executor holds it without renewing (renewed every third);
        past it, any replica ends the run with ``RUN_ERROR`` code ``executor_lost``.
    :param poll: seconds between looks at Redis where nothing can be waited on (a remote run's
        end, a later run on a followed thread).
    :param execute: whether this replica executes runs: those it accepts, and those front
        replicas dispatched (read from the consumer group, as many as ``max_runs`` leaves room
        for; with :attr:`agents` set). ``False``: a front, whose runs are dispatched.
    :param dispatch_timeout: seconds a dispatched run may wait for an executor; then it ends
        with ``RUN_ERROR`` code ``no_executor``.
    :param max_dispatched: on a front, the most dispatched runs not ended (waiting for an
        executor or executing) per shard, from every front: the entries of the shard's dispatch
        stream. Past it, a run is refused with :class:`~agui_meta.gateway.AtCapacity`.
    :param name: this executor's consumer name (default: host, process id and a random part).
    """

    def __init__(
        self,
        threads: ThreadStore,
        catalog: Catalog,
        *,
        client: redis.asyncio.Redis,
        keys: GatewayKeys,
        lease: float = 10.0,
        poll: float = 0.05,
        execute: bool = True,
        dispatch_timeout: float = 30.0,
        max_dispatched: int = 100,
        name: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(threads, catalog, **options)
        if isinstance(max_dispatched, bool) or not isinstance(max_dispatched, int):
            raise UsageError(f"max_dispatched must be an int, got {max_dispatched!r}")
        if max_dispatched < 1:
            raise UsageError(f"max_dispatched must be at least 1, got {max_dispatched}")
        if not lease > 0 or not poll > 0 or not dispatch_timeout > 0:
            raise UsageError(
                f"lease, poll and dispatch_timeout must be > 0 seconds, got {lease!r}, "
                f"{poll!r}, {dispatch_timeout!r}"
            )
        self.client = client
        self.keys = keys
        self.lease = lease
        self.poll = poll
        self.execute = execute
        self.dispatch_timeout = dispatch_timeout
        self.max_dispatched = max_dispatched
        #: A front's dispatched runs that may not have ended (their keys), for ``max_runs``.
        self._dispatched: dict[str, None] = {}
        self._dispatching = 0  # and those being dispatched
        self.name = name or consumer_name()
        #: The agents this replica executes dispatched runs with (by name); ``None``: it takes
        #: no dispatched run.
        self.agents: Mapping[str, GatewayAgent] | None = None
        self._room = anyio.Event()
        #: How long readers wait for a silent executor before they give up (a takeover ends
        #: the run well before: one lease and one sweep).
        self.alive = 3 * lease + 1
        self._space = RedisReplay(
            client,
            namespace=keys.namespace,
            maxlen=self.max_events,
            approximate=True,
            ttl=self.max_run_time + self.keep + 1,
            linger=max(min(self.linger / 2, 1.0), 0.05),
            lost_after=self.alive,
        )
        self._space.keys = keys
        self._scripts = {
            name: client.register_script(getattr(_runscripts, name)) for name in _runscripts.__all__
        }

    async def script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self._scripts[name](keys, args)

    def reader(self, key: str, start: int) -> ReplayReader:
        """A reader of run ``key``'s log in Redis from event ``start`` on."""
        return RedisStreamReader(self._space, key, start - 1)

    # -- lifetime ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with super().running(), anyio.create_task_group() as tg:
            tg.start_soon(self._sweep)
            consuming = self.execute and self.agents is not None
            if consuming:
                tg.start_soon(self._consume)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
        if consuming:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._leave_groups()

    async def _sweep(self) -> None:
        """End the runs whose lease ran out, on every shard (each replica sweeps)."""
        while True:
            try:
                seconds, micros = await self.client.time()
                now = int(seconds) * 1000 + int(micros) // 1000
                for shard in range(self.keys.shards):
                    found = await self.client.zrangebyscore(
                        self.keys.inflight(self.keys.tag(shard)), "-inf", now
                    )
                    for key in found:
                        await self._take_over(text(key))
            except _REDIS_ERRORS:
                logger.warning("the gateway could not sweep Redis", exc_info=True)
            except Exception:
                logger.exception("the gateway's sweep failed")
            await anyio.sleep(self.lease / 3)

    async def _take_over(self, key: str) -> None:
        keys = self.keys
        meta = await self._meta(key)
        tag = keys.of_key(key)
        if not meta:
            await self.client.zrem(keys.inflight(tag), key)
            return
        thread_id, run_id = meta.get("thread", ""), meta.get("run", "")
        got = await self.script(
            "STEAL",
            [
                keys.active(thread_id),
                keys.run_fence(tag),
                keys.inflight(tag),
                keys.replay(key),
                keys.run(key),
            ],
            [key, _ms(self.lease)],
        )
        if not got:
            return
        holder, index, taken = text(got[0]), int(got[1]), int(got[2])
        if taken:
            code = "executor_lost"
            message = (
                f"the run was lost: its executor stopped renewing its lease ({self.lease:g} s)"
            )
        else:
            code = "no_executor"
            message = (
                f"no executor took the run within its dispatch timeout (agent "
                f"{meta.get('agent', '')!r}): start an `agui-meta executor`, or a replica that "
                "executes runs"
            )
        scope = meta.get("scope", "")
        await self._end_now(key, holder, thread_id, run_id, index, code, message, scope)
        logger.warning("run %s of thread %s: %s", run_id, thread_id, message)

    async def _end_now(
        self,
        key: str,
        holder: str,
        thread_id: str,
        run_id: str,
        index: int,
        code: str,
        message: str,
        scope: str = "",
    ) -> None:
        """End run ``key``, held as ``holder`` after ``index`` events, with ``RUN_ERROR``
        ``code``: its log's events assembled into its thread (what a client that followed it
        holds), the error appended to its log and recorded in its thread's ledger, its usage
        charged once, and all of it committed at once."""
        snapshot: ThreadSnapshot | None = None
        try:
            stored = await self.threads.load(thread_id) or ThreadSnapshot(thread_id=thread_id)
        except ThreadStoreError:  # the run still ends and frees the thread; the hash stays
            logger.exception("run %s: its thread cannot be loaded to record its end", run_id)
            stored = ThreadSnapshot(thread_id=thread_id)
        else:
            snapshot = stored
        lost = await assemble_lost_run(
            self.client,
            self.keys.replay(key),
            index,
            stored,
            thread_id=thread_id,
            run_id=run_id,
            code=code,
            message=message,
        )
        if snapshot is not None:
            snapshot = lost.snapshot
        if lost.usage:
            meta = {"thread": thread_id, "run": run_id, "scope": scope}
            await self.charge(_RemoteRun(self, key, meta, index), lost.usage)
        frames = [
            encode_sse(encode_event(event), id=f"{key}:{index + n}")
            for n, event in enumerate(lost.closing)
        ]
        await self.commit(key, holder, thread_id, index, snapshot, frames)

    async def commit(
        self,
        key: str,
        holder: str,
        thread_id: str,
        events: int,
        snapshot: ThreadSnapshot | None,
        closing: list[bytes] | None = None,
    ) -> None:
        """End run ``key`` (``events`` events so far, then ``closing``) and save its thread
        (``snapshot``; ``None``: leave it as it is)."""
        keys = self.keys
        thread_key = keys.thread(thread_id)
        closing = closing or []
        version = 0 if snapshot is None else snapshot.version
        data = (
            b""
            if snapshot is None
            else encode_snapshot(snapshot, f"Redis thread store (key {thread_key!r})")
        )
        saved, stored = await self.script(
            "COMMIT",
            [
                keys.active(thread_id),
                keys.inflight(keys.of(thread_id)),
                keys.run(key),
                keys.replay(key),
                keys.replay_alive(key),
                thread_key,
                keys.runids(thread_id),
                keys.ctl(key),
                keys.dispatch(keys.of(thread_id)),
            ],
            [
                holder,
                key,
                _ms(max(self.keep, 1.0)),
                events + len(closing) + 1,
                version - 1,
                data,
                version,
                events + 1,
                *closing,
            ],
        )
        if not int(saved):
            logger.error(
                "run %s: thread %r could not be saved: it is at version %s, not %s",
                key,
                thread_id,
                text(stored),
                version - 1,
            )

    # -- handles -------------------------------------------------------------------------------

    async def _meta(self, key: str) -> dict[str, str]:
        raw = await self.client.hgetall(self.keys.run(key))
        return {text(k): text(v) for k, v in raw.items()}

    async def _handle(self, key: str) -> RunHandle | None:
        local = self._by_key.get(key)
        if local is not None:
            return local
        meta = await self._meta(key)
        if not meta:
            return None
        last = await self.client.xrevrange(self.keys.replay(key), count=1)
        events = 0
        if last:
            events = entry_index(last[0][0]) - (1 if "end" in entry_fields(last[0][1]) else 0)
        return _RemoteRun(self, key, meta, events)

    async def _held(self, thread_id: str) -> str | None:
        """The key of the thread's run in flight."""
        held = await self.client.get(self.keys.active(thread_id))
        return None if held is None else text(held).partition(" ")[2]

    async def active(self, thread_id: str) -> RunHandle | None:
        key = await self._held(thread_id)
        if key is None:
            return None
        local = self._active.get(thread_id)
        if local is not None and local.key == key:
            return local
        return await self._handle(key)

    async def active_runs(self) -> list[RunHandle]:
        """This replica's active runs."""
        return list(self._active.values())

    async def by_key(self, key: str) -> RunHandle | None:
        if self.keys.key_shard(key) is None:
            return None
        self._purge()
        return await self._handle(key)

    async def find(self, thread_id: str, run_id: str) -> RunHandle | None:
        self._purge()
        local = self._by_ids.get((thread_id, run_id))
        if local is not None:
            return local
        key = await self.client.hget(self.keys.runids(thread_id), run_id)
        return None if key is None else await self._handle(text(key))

    async def _busy(self, thread_id: str, key: str, agent_name: str) -> ThreadBusy:
        meta = await self._meta(key)
        return ThreadBusy(thread_id, meta.get("run", key), meta.get("agent", agent_name))

    async def check_room(self, thread_id: str) -> None:
        key = await self._held(thread_id)
        if key is not None:
            raise await self._busy(thread_id, key, "")
        if self.execute:
            if len(self._active) >= self.max_runs:
                raise AtCapacity(self.max_runs)
            return
        await self._front_room()
        queued = await self.client.xlen(self.keys.dispatch(self.keys.of(thread_id)))
        if queued >= self.max_dispatched:
            raise self._full(thread_id)

    def _full(self, thread_id: str) -> AtCapacity:
        return AtCapacity(
            self.max_dispatched,
            f"{self.max_dispatched} runs dispatched on the shard of thread {thread_id!r} "
            "have not ended (max_dispatched): retry later",
        )

    async def _front_room(self) -> None:
        """:class:`AtCapacity` when this front's dispatched runs not ended are ``max_runs``
        (those that ended, or whose record expired, are forgotten first)."""
        if len(self._dispatched) + self._dispatching < self.max_runs:
            return
        keys = list(self._dispatched)
        async with self.client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(self.keys.run(key), "ended")
            ended = await pipe.execute()
        for key, flag in zip(keys, ended, strict=True):
            if flag is None or text(flag) == "1":
                self._dispatched.pop(key, None)
        if len(self._dispatched) + self._dispatching >= self.max_runs:
            raise AtCapacity(
                self.max_runs,
                f"this front's {self.max_runs} dispatched runs have not ended (max_runs): "
                "retry later",
            )

    async def start(
        self,
        *,
        scope: str,
        agent_name: str,
        agent: GatewayAgent,
        input: RunAgentInput,
        store: Store,
        base: ThreadSnapshot,
        new_messages: list[Message],
    ) -> RunHandle:
        if self._tg is None:
            raise UsageError("the runs are not running (enter `running()` first)")
        if not self.execute:
            return await self._dispatch(scope, agent_name, input, base, new_messages)
        if len(self._active) >= self.max_runs:
            raise AtCapacity(self.max_runs)
        keys = self.keys
        thread_id = input.thread_id
        key = keys.run_key(thread_id, uuid.uuid4().hex)
        tag = keys.of(thread_id)
        began, holder = await self.script(
            "BEGIN",
            [
                keys.active(thread_id),
                keys.run_fence(tag),
                keys.inflight(tag),
                keys.run(key),
                keys.runids(thread_id),
                keys.latest(tag),
                keys.replay_alive(key),
            ],
            [key, thread_id, input.run_id, scope, agent_name, _ms(self.lease), _ms(self.alive)],
        )
        if not int(began):
            raise await self._busy(thread_id, text(holder).partition(" ")[2], agent_name)
        run = _RedisRun(
            self,
            key=key,
            holder=text(holder),
            scope=scope,
            agent_name=agent_name,
            agent=agent,
            input=input,
            store=store,
            base=base,
            new_messages=new_messages,
        )
        self._refuse_over(run, await self._over(scope))
        self._launch(run)
        return run

    # -- dispatch ----------------------------------------------------------------------------------

    async def _dispatch(
        self,
        scope: str,
        agent_name: str,
        input: RunAgentInput,
        base: ThreadSnapshot,
        new_messages: list[Message],
    ) -> RunHandle:
        """Reserve the thread and dispatch the run to the executors, in one script."""
        thread_id = input.thread_id
        key = self.keys.run_key(thread_id, uuid.uuid4().hex)
        fields = [
            "agent", agent_name,
            "scope", scope,
            "version", base.version,
            "input", msgspec.json.encode(input),
            "new", msgspec.json.encode(new_messages),
            "carrier", msgspec.json.encode(current_carrier()),
        ]  # fmt: skip
        await self._front_room()  # then counted, with no await between
        self._dispatching += 1
        try:
            began, holder = await self._begin_dispatch(key, input, scope, agent_name, fields)
        finally:
            self._dispatching -= 1
        if int(began) < 0:
            raise self._full(thread_id)
        if not int(began):
            raise await self._busy(thread_id, text(holder).partition(" ")[2], agent_name)
        self._dispatched[key] = None
        meta = {"thread": thread_id, "run": input.run_id, "scope": scope, "agent": agent_name}
        return _RemoteRun(self, key, meta, 0)

    async def _begin_dispatch(
        self, key: str, input: RunAgentInput, scope: str, agent_name: str, fields: list[Any]
    ) -> Any:
        keys = self.keys
        thread_id = input.thread_id
        tag = keys.of(thread_id)
        wait = self.dispatch_timeout
        return await self.script(
            "BEGIN",
            [
                keys.active(thread_id),
                keys.run_fence(tag),
                keys.inflight(tag),
                keys.run(key),
                keys.runids(thread_id),
                keys.latest(tag),
                keys.replay_alive(key),
                keys.dispatch(tag),
            ],
            [
                key,
                thread_id,
                input.run_id,
                scope,
                agent_name,
                _ms(wait),
                _ms(wait + self.alive),
                self.max_dispatched,
                *fields,
            ],
        )

    def _ended(self, run: Run) -> None:
        super()._ended(run)
        self._room.set()  # room for a dispatched run
        self._room = anyio.Event()

    async def _groups(self) -> None:
        """The executors' consumer group on every dispatch stream (from its first entry: runs
        dispatched before any executor started are read too), without the consumers of dead
        executors: nothing pending and idle for long (a live one reads every second, and
        would be made again by its next read)."""
        idle = _ms(max(600.0, 10 * self.lease))
        for shard in range(self.keys.shards):
            stream = self.keys.dispatch(self.keys.tag(shard))
            try:
                await self.client.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except redis.exceptions.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            for consumer in await self.client.xinfo_consumers(stream, GROUP):
                found = {text(k): v for k, v in consumer.items()}
                if int(found.get("pending", 1)) == 0 and int(found.get("idle", 0)) > idle:
                    await self.client.xgroup_delconsumer(stream, GROUP, found["name"])

    async def _leave_groups(self) -> None:
        """Remove this executor from the groups (its runs have ended: nothing is pending)."""
        try:
            for shard in range(self.keys.shards):
                await self.client.xgroup_delconsumer(
                    self.keys.dispatch(self.keys.tag(shard)), GROUP, self.name
                )
        except _REDIS_ERRORS:
            logger.warning("executor %s could not leave the dispatch groups", self.name)

    async def _consume(self) -> None:
        """Take dispatched runs while there is room: ``XREADGROUP`` of at most the free slots;
        an entry read beyond them (several streams answered at once) is handed back."""
        keys = self.keys
        streams = [keys.dispatch(keys.tag(shard)) for shard in range(keys.shards)]
        cluster = isinstance(self.client, redis.asyncio.RedisCluster)
        # One call over every stream, blocking; on a cluster (one slot per call), each in turn.
        batches = [[stream] for stream in streams] if cluster else [streams]
        block = None if cluster else _ms(min(1.0, self.lease / 3))
        grouped = False
        idle = self.poll
        while True:
            try:
                if not grouped:
                    await self._groups()
                    grouped = True
                room = self._room
                if len(self._active) >= self.max_runs:
                    await room.wait()
                    continue
                found = 0
                for batch in batches:
                    free = self.max_runs - len(self._active)
                    if free <= 0:
                        break
                    reply = await self.client.xreadgroup(
                        GROUP, self.name, dict.fromkeys(batch, ">"), count=free, block=block
                    )
                    # Entries read are ours: taken (or handed back) even while shutting down.
                    with anyio.CancelScope(shield=True), anyio.move_on_after(self.lease):
                        for stream, entry_id, raw in _read_entries(reply):
                            found += 1
                            await self._entry(stream, text(entry_id), raw)
                if cluster and not found:
                    await anyio.sleep(idle)
                    idle = min(idle * 2, 0.5)
                elif found:
                    idle = self.poll
            except redis.exceptions.ResponseError as exc:
                if "NOGROUP" in str(exc):  # a stream deleted (or Redis emptied): again
                    grouped = False
                    continue
                logger.exception("executor %s: Redis refused a dispatch read", self.name)
                await anyio.sleep(self.lease / 3)
            except _REDIS_ERRORS:
                logger.warning("executor %s: Redis did not answer", self.name, exc_info=True)
                await anyio.sleep(self.lease / 3)
            except Exception:
                logger.exception("executor %s: taking a dispatched run failed", self.name)
                await anyio.sleep(self.lease / 3)

    async def _entry(self, stream: str, entry_id: str, raw: Any) -> None:
        """Take the entry's run, or hand the entry back when there is no room; a failure is
        logged and the next entry read (the run's lease, or its dispatch timeout, ends it)."""
        try:
            if len(self._active) < self.max_runs:
                await self._take(stream, entry_id, raw)
            else:
                await self._hand_back(stream, entry_id, raw)
        except Exception:
            logger.exception(
                "executor %s: dispatch entry %s of stream %s failed", self.name, entry_id, stream
            )

    async def _hand_back(self, stream: str, entry_id: str, raw: Any) -> None:
        fields = entry_fields(raw)
        flat: list[Any] = [item for pair in fields.items() for item in pair]
        key = text(fields.get("key", b""))
        run = self.keys.run(key) if self.keys.key_shard(key) is not None else stream
        await self.script("REQUEUE", [stream, run], [entry_id, *flat])

    async def _park(self, stream: str, entry_id: str, fields: Mapping[str, Any], why: str) -> None:
        logger.error(
            "executor %s: dispatch entry %s of stream %s is not a run: %s (parked in %s)",
            self.name,
            entry_id,
            stream,
            why,
            f"{stream}:parked",
        )
        flat: list[Any] = [item for pair in fields.items() for item in pair]
        await self.script("PARK", [stream, f"{stream}:parked"], [entry_id, why[:500], *flat])

    async def _take(self, stream: str, entry_id: str, raw: Any) -> None:
        """Take the dispatched run of entry ``entry_id`` and start it here."""
        keys = self.keys
        fields = entry_fields(raw) if isinstance(raw, Mapping) else {}
        try:
            key, holder = text(fields["key"]), text(fields["holder"])
            tag = keys.of_key(key)
            if stream != keys.dispatch(tag):
                raise _Malformed(f"run key {key!r} is not of this stream's shard")
        except (KeyError, DataError, _Malformed) as exc:
            await self._park(stream, entry_id, fields, f"no run key and holder: {exc}")
            return
        meta = await self._meta(key)
        if not meta:
            await self._park(stream, entry_id, fields, f"it names run {key!r}, which is not held")
            return
        thread_id, run_id = meta.get("thread", ""), meta.get("run", "")
        got = await self.script(
            "TAKE",
            [
                keys.active(thread_id),
                keys.run_fence(tag),
                keys.inflight(tag),
                keys.run(key),
                keys.replay_alive(key),
                stream,
            ],
            [holder, key, _ms(self.lease), _ms(self.alive), self.name, entry_id],
        )
        if not got:
            return  # ended meanwhile (stopped, or waited past its dispatch timeout)
        held = text(got)
        try:
            agent_name, scope = text(fields["agent"]), text(fields["scope"])
            version = int(text(fields["version"]))
            input = msgspec.json.decode(fields["input"], type=RunAgentInput)
            new = msgspec.json.decode(fields["new"], type=list[Message])
            carrier = msgspec.json.decode(fields.get("carrier", b"{}"), type=dict[str, str])
            if input.thread_id != thread_id or input.run_id != run_id:
                raise _Malformed(f"its input is for run {input.run_id!r} of {input.thread_id!r}")
        except (KeyError, ValueError, msgspec.DecodeError, _Malformed) as exc:
            why = f"{type(exc).__name__}: {exc}"
            await self._park(stream, entry_id, fields, why)
            message = f"the run's dispatch entry {entry_id} of {stream} is malformed: {why}"
            await self._end_now(key, held, thread_id, run_id, 0, "dispatch_error", message)
            return
        problem = None
        agent = (self.agents or {}).get(agent_name)
        base = ThreadSnapshot(thread_id=thread_id)
        if agent is None:
            problem = f"executor {self.name} has no agent named {agent_name!r}"
        else:
            try:
                base = await self.threads.load(thread_id) or base
            except ThreadStoreError as exc:
                problem = f"its thread cannot be loaded: {exc}"
            else:
                if base.version != version:
                    problem = (
                        f"its thread is at version {base.version}, not {version} as dispatched"
                    )
        if problem is not None or agent is None:
            logger.error("run %s of thread %s: %s", run_id, thread_id, problem)
            await self._end_now(key, held, thread_id, run_id, 0, "dispatch_error", str(problem))
            return
        store = thread_store(base, [msgspec.to_builtins(m) for m in new])
        if input.state is not UNSET:
            store.state = input.state
        run = _RedisRun(
            self,
            key=key,
            holder=held,
            scope=scope,
            agent_name=agent_name,
            agent=agent,
            input=input,
            store=store,
            base=base,
            new_messages=new,
        )
        run.carrier = carrier
        self._refuse_over(run, await self._over(scope))
        self._launch(run)

    # -- budgets ---------------------------------------------------------------------------------

    def _budget_key(self, scope: str) -> str | None:
        budget = self.budget
        if budget is None or budget.period is None:
            return None
        return self.keys.budget(scope, budget.period, budget.window())

    def _totals(self, key: str, tokens: Any, cost: Any) -> tuple[int, float]:
        try:
            return int(text(tokens or b"0")), float(text(cost or b"0"))
        except (TypeError, ValueError):
            raise DataError(
                f"Redis key {key!r} holds {tokens!r} tokens and {cost!r} cost, not numbers"
            ) from None

    async def _over(self, scope: str) -> str | None:
        """The limit ``scope`` has reached in this period, by its totals in Redis."""
        key = self._budget_key(scope)
        if key is None or self.budget is None:
            return None
        tokens, cost = await self.client.hmget(key, ["tokens", "cost"])
        return self.budget.reached(*self._totals(key, tokens, cost))

    async def charge(self, run: RunHandle, usage: list[Any]) -> None:
        """Add ``run``'s usage to its scope's totals in Redis, once (the run's key is the
        idempotency key); past a limit, report it and stop the scope's other active runs on
        every replica. Per run (``period=None``), nothing is shared: as in one process."""
        budget = self.budget
        key = self._budget_key(run.scope)
        if budget is None or not usage:
            return
        if key is None or budget.period is None:
            self._charge(run, usage)
            return
        tokens, cost = budget.measure(usage)
        ttl = _ms(2 * budget.period + self.max_run_time)  # kept past the period's end
        try:
            added, now_tokens, now_cost = await self.script(
                "CHARGE", [key], [run.key, tokens, repr(cost), ttl]
            )
            total = self._totals(key, now_tokens, now_cost)
        except (*_REDIS_ERRORS, DataError):
            logger.exception("run %s: its usage could not be charged to its scope", run.run_id)
            return
        if not int(added):
            return  # charged already
        before = budget.reached(total[0] - tokens, total[1] - cost)
        over = budget.reached(*total)
        if before is not None or over is None:
            return
        stopped = {other.key for other in self._crossed(run, over)} | {run.key}
        try:
            for shard in range(self.keys.shards):
                for found in await self.client.zrange(
                    self.keys.inflight(self.keys.tag(shard)), 0, -1
                ):
                    other_key = text(found)
                    if other_key in stopped or other_key in self._by_key:
                        continue
                    other = await self._handle(other_key)
                    if isinstance(other, _RemoteRun) and other.scope == run.scope:
                        await other.stop(
                            "budget_exceeded", budget.refusal(run.scope, other.run_id, over)
                        )
        except _REDIS_ERRORS:
            logger.exception("the runs of scope %r could not all be stopped", run.scope)

    async def latest(self, thread_id: str) -> tuple[int, RunHandle | None]:
        name = self.keys.latest(self.keys.of(thread_id))
        n, key = await self.client.hmget(name, [f"n:{thread_id}", thread_id])
        if n is None:
            return 0, None
        count = _count(n, name, thread_id)
        return count, None if key is None else await self._handle(text(key))

    async def wait_started(self, thread_id: str, after: int, within: float) -> None:
        name = self.keys.latest(self.keys.of(thread_id))
        with anyio.move_on_after(within):
            while True:
                n = await self.client.hget(name, f"n:{thread_id}")
                if (n is None and after > 0) or (
                    n is not None and _count(n, name, thread_id) > after
                ):
                    return
                await anyio.sleep(self.poll)

    async def forget_thread(self, thread_id: str) -> None:
        await super().forget_thread(thread_id)
        keys = self.keys
        await self.client.hdel(keys.latest(keys.of(thread_id)), f"n:{thread_id}", thread_id)
        await self.client.delete(keys.runids(thread_id))


if TYPE_CHECKING:  # mypy checks that the runs keep the contract

    def _registry(runs: RedisRuns) -> RunRegistry:
        return runs

    def _remote(run: _RemoteRun) -> RunHandle:
        return run
