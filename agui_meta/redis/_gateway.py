"""The gateway across replicas: a :class:`~agui_meta.gateway.Gateway` whose runs, run logs,
threads and catalog are in Redis (see docs/gateway.md, "Across replicas, on Redis")."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import redis.asyncio

from .._gateway import Gateway
from ._catalog import RedisCatalog
from ._runs import RedisRuns
from ._shards import GatewayKeys
from ._store import RedisThreadStore

__all__ = ["redis_gateway"]


def redis_gateway(
    client: redis.asyncio.Redis,
    agents: Mapping[str, Any],
    *,
    namespace: str = "agui",
    shards: int = 16,
    lease: float = 10.0,
    **options: Any,
) -> Gateway:
    """:func:`agui_meta.gateway.redis_gateway` (documented there)."""
    keys = GatewayKeys(namespace, shards)
    return Gateway(
        agents,
        threads=RedisThreadStore(client, namespace=namespace, shards=shards),
        catalog=RedisCatalog(client, keys),
        runs=functools.partial(RedisRuns, client=client, keys=keys, lease=lease),
        **options,
    )
