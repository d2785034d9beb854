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
    execute: bool = True,
    dispatch_timeout: float = 30.0,
    max_dispatched: int = 100,
    **options: Any,
) -> Gateway:
    """A replica of a gateway whose runs, run logs, catalog and threads are in Redis: every
    replica made with the same Redis, ``namespace`` and ``shards`` serves every route for
    every thread (docs/gateway.md, "Across replicas, on Redis").

    :param client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` client (closed
        by the caller; give it a ``retry`` so that a restarted Redis is reconnected to).
    :param agents: as :class:`Gateway`'s: each replica that executes runs needs every agent
        (a front, ``execute=False``, only their names: its routes are ``/agents/NAME/...``).
    :param namespace: the key namespace; keys are ``{namespace:S}:…``, ``S`` the thread's
        shard, so that a Redis Cluster spreads the threads over its masters.
    :param shards: virtual shards (the same on every replica).
    :param lease: seconds a replica holds a run without renewing it (it renews every third);
        a run whose replica died is ended with ``RUN_ERROR`` code ``executor_lost`` about one
        lease and a third after its last renewal.
    :param execute: whether this replica executes runs (the default): the runs it accepts,
        and runs that front replicas dispatched, as many as ``max_runs`` leaves room for.
        ``False``: a front, which dispatches the runs it accepts to the executors (replicas
        that execute, or :func:`~agui_meta.gateway.executor` processes) through Redis.
    :param dispatch_timeout: seconds a run this replica dispatches may wait for an executor;
        then it ends with ``RUN_ERROR`` code ``no_executor``.
    :param max_dispatched: on a front, the most dispatched runs not ended (waiting for an
        executor or executing) per shard, counted over every front (the entries of the shard's
        dispatch stream); past it, ``503`` with ``Retry-After``. At most ``max_dispatched *
        shards`` runs wait in Redis.
    :param options: :class:`Gateway`'s other options (``max_runs`` counts this replica's runs:
        on a front, the runs it dispatched that have not ended).
    """
    keys = GatewayKeys(namespace, shards)
    runs = functools.partial(
        RedisRuns,
        client=client,
        keys=keys,
        lease=lease,
        execute=execute,
        dispatch_timeout=dispatch_timeout,
        max_dispatched=max_dispatched,
    )
    gateway = Gateway(
        agents,
        threads=RedisThreadStore(client, namespace=namespace, shards=shards),
        catalog=RedisCatalog(client, keys),
        runs=runs,
        **options,
    )
    registry = gateway.registry
    assert isinstance(registry, RedisRuns)
    registry.agents = gateway.agents  # dispatched runs are executed with the same agents
    return gateway
