"""The gateway's catalog on Redis: which scope owns each thread, spread over the shards.

Runs in flight are not journaled here: on Redis they are the shards' in-flight sets of
:class:`~agui_meta.redis.RedisRuns`, whose leases any replica takes over when an executor dies
(so :meth:`RedisCatalog.in_flight` is empty: a replica starting must not end the runs the
others are executing).
"""

from __future__ import annotations

from typing import Any

import redis.asyncio

from ._common import text
from ._runscripts import CLAIM
from ._shards import GatewayKeys

__all__ = ["RedisCatalog"]


class RedisCatalog:
    """A :class:`~agui_meta.gateway.Catalog` in Redis (owners hashed by thread shard).

    :param client: a ``redis.asyncio.Redis`` (or ``RedisCluster``) client.
    :param keys: the gateway's key names (namespace and shard count).
    """

    def __init__(self, client: redis.asyncio.Redis, keys: GatewayKeys) -> None:
        self.client = client
        self.keys = keys
        self._claim = client.register_script(CLAIM)

    def _shard(self, thread_id: str) -> int:
        return self.keys.shard_of(thread_id, self.keys.shards)

    async def claim(self, scope: str, thread_id: str) -> bool:
        shard = self._shard(thread_id)
        owner = await self._claim(
            [self.keys.owners(shard), self.keys.scope(shard, scope)], [thread_id, scope]
        )
        return text(owner) == scope

    async def owner(self, thread_id: str) -> str | None:
        found = await self.client.hget(self.keys.owners(self._shard(thread_id)), thread_id)
        return None if found is None else text(found)

    async def threads(self, scope: str) -> list[str]:
        scored: list[tuple[float, str]] = []
        for shard in range(self.keys.shards):
            pairs: Any = await self.client.zrange(
                self.keys.scope(shard, scope), 0, -1, withscores=True
            )
            scored += [(float(score), text(member)) for member, score in pairs]
        return [thread for _, thread in sorted(scored)]

    async def forget(self, thread_id: str) -> None:
        shard = self._shard(thread_id)
        owner = await self.owner(thread_id)
        if owner is not None:
            await self.client.zrem(self.keys.scope(shard, owner), thread_id)
        await self.client.hdel(self.keys.owners(shard), thread_id)

    async def run_started(self, thread_id: str, run_id: str) -> None:
        """Nothing: :class:`RedisRuns` keeps the runs in flight, with leases."""

    async def run_ended(self, thread_id: str, run_id: str) -> None:
        """Nothing: :class:`RedisRuns` keeps the runs in flight, with leases."""

    async def in_flight(self) -> list[tuple[str, str]]:
        """None: a dead executor's runs are ended by the other replicas (lease takeover)."""
        return []
