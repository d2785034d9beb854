"""The gateway's keys in Redis: everything of a thread under the hash tag of its shard.

The workers' :class:`~agui_meta.redis.Keys` put a whole namespace in one cluster slot
(``{ns}``). The gateway's keys carry the tag ``{ns:S}``, ``S`` being the thread's virtual
shard (:meth:`Keys.shard_of`), so that a Redis Cluster spreads the threads over its masters,
while every key one script touches (a thread, its active run, that run's log) shares a slot.
"""

from __future__ import annotations

from .._exceptions import DataError, UsageError
from ._keys import Keys

__all__ = ["GatewayKeys"]


class GatewayKeys(Keys):
    """The gateway's key names of one namespace over ``shards`` virtual shards.

    Per shard ``S`` (tag ``{ns:S}``):

    - ``{ns:S}:thread:ID`` hash: the thread's ``v`` and ``snap`` (:class:`RedisThreadStore`);
    - ``{ns:S}:owners`` hash: thread -> scope; ``{ns:S}:scope:SCOPE`` sorted set: the scope's
      threads, scored by when they were claimed;
    - ``{ns:S}:active:ID`` string: the holder (``"token key"``) of the thread's active run;
      ``{ns:S}:fence`` the counter fencing tokens come from; ``{ns:S}:inflight`` sorted set:
      the runs in flight, scored by the end of their lease (milliseconds, server clock);
    - ``{ns:S}:run:KEY`` hash: a run's ``thread``, ``run``, ``scope``, ``agent``, ``ended``;
      ``{ns:S}:runids:ID`` hash: run id -> run key; ``{ns:S}:latest`` hash: per thread the
      ordinal of its latest run (``n:ID``) and that run's key (``ID``);
    - ``{ns:S}:log:KEY`` stream: the run's events (entry ``0-(N+1)`` is event ``N``, field
      ``d``; then ``end``), with ``:alive`` (the executor's heartbeat) and ``:reader`` (a
      client reads it); ``{ns:S}:ctl:KEY`` stream: stop requests for the executor;
    - ``{ns:S}:dispatch`` stream: the runs dispatched to executors (consumer group
      ``executors``), one entry per run until it ends; ``{ns:S}:dispatch:parked`` stream: the
      entries an executor could not read (malformed), with why.

    A run key is ``sS-HEX``: the shard is part of the SSE ids, so any replica finds the run.
    """

    def __init__(self, namespace: str = "agui", shards: int = 16) -> None:
        super().__init__(namespace)
        if shards < 1:
            raise UsageError(f"the number of shards must be at least 1, not {shards}")
        self.shards = shards
        self.thread_pattern = "\\{" + namespace + ":*\\}:thread:*"

    def tag(self, shard: int) -> str:
        return "{" + f"{self.namespace}:{shard}" + "}"

    def of(self, thread_id: str) -> str:
        """The tag of ``thread_id``'s shard."""
        return self.tag(self.shard_of(thread_id, self.shards))

    def key_shard(self, key: str) -> int | None:
        """The shard a run key (``sS-HEX``) names; ``None`` when it is not one of ours."""
        head, sep, rest = key.partition("-")
        if not sep or not rest or not head.startswith("s") or not head[1:].isdigit():
            return None
        shard = int(head[1:])
        return shard if shard < self.shards else None

    def of_key(self, key: str) -> str:
        """The tag of the shard a run key names (:meth:`key_shard` first: :class:`DataError`)."""
        shard = self.key_shard(key)
        if shard is None:
            raise DataError(f"{key!r} is not a run key of this namespace (sS-HEX)")
        return self.tag(shard)

    def run_key(self, thread_id: str, unique: str) -> str:
        return f"s{self.shard_of(thread_id, self.shards)}-{unique}"

    def thread(self, thread_id: str) -> str:
        return f"{self.of(thread_id)}:thread:{thread_id}"

    def thread_id_of(self, name: str) -> str:
        """The thread id in a thread key's name."""
        return name.partition("}:thread:")[2]

    def owners(self, shard: int) -> str:
        return f"{self.tag(shard)}:owners"

    def scope(self, shard: int, scope: str) -> str:
        return f"{self.tag(shard)}:scope:{scope}"

    def budget(self, scope: str, period: float, window: int) -> str:
        """The spending of ``scope`` in period number ``window`` of ``period`` seconds."""
        return f"{self.tag(self.shard_of(scope, self.shards))}:budget:{period:g}:{window}:{scope}"

    def active(self, thread_id: str) -> str:
        return f"{self.of(thread_id)}:active:{thread_id}"

    def run_fence(self, tag: str) -> str:
        return f"{tag}:fence"

    def inflight(self, tag: str) -> str:
        return f"{tag}:inflight"

    def latest(self, tag: str) -> str:
        return f"{tag}:latest"

    def runids(self, thread_id: str) -> str:
        return f"{self.of(thread_id)}:runids:{thread_id}"

    def run(self, key: str) -> str:
        return f"{self.of_key(key)}:run:{key}"

    def dispatch(self, tag: str) -> str:
        return f"{tag}:dispatch"

    def ctl(self, key: str) -> str:
        return f"{self.of_key(key)}:ctl:{key}"

    def replay(self, key: str) -> str:
        return f"{self.of_key(key)}:log:{key}"

    def replay_alive(self, key: str) -> str:
        return f"{self.of_key(key)}:log:{key}:alive"

    def replay_reader(self, key: str) -> str:
        return f"{self.of_key(key)}:log:{key}:reader"
