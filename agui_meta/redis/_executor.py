"""Executors of a gateway on Redis: processes that run the dispatched runs, serving no HTTP.

A front replica (``redis_gateway(..., execute=False)``, ``agui-meta gateway --threads redis
--no-execute``) dispatches the runs it accepts through the shards' dispatch streams; an
:func:`executor` (``agui-meta executor``) is one consumer of their group: it takes as many
runs as ``max_runs`` leaves room for, executes them with the gateway's run machinery (run log,
lease, fencing, stop, thread saved and usage charged at the end) and acknowledges each entry
with the run's end (docs/gateway.md, "Dispatch to executors").
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import redis.asyncio

from .._agents import as_agent
from ._catalog import RedisCatalog
from ._runs import RedisRuns
from ._shards import GatewayKeys
from ._store import RedisThreadStore

if TYPE_CHECKING:
    from .._registry import RunRegistry

__all__ = ["executor"]


@contextlib.asynccontextmanager
async def executor(
    client: redis.asyncio.Redis,
    agents: Mapping[str, Any],
    *,
    namespace: str = "agui",
    shards: int = 16,
    lease: float = 10.0,
    name: str | None = None,
    **options: Any,
) -> AsyncIterator[RunRegistry]:
    """Execute the runs dispatched to the executors of ``namespace`` until the block exits;
    then stop the runs in flight (``RUN_ERROR`` code ``gateway_shutdown``, their threads
    saved) and leave the consumer group.

    :param client: a ``redis.asyncio.Redis`` or ``RedisCluster`` client (closed by the caller).
    :param agents: name -> agent, as :class:`~agui_meta.gateway.Gateway`'s: every agent the
        fronts serve (a run of an agent this executor lacks ends with ``RUN_ERROR`` code
        ``dispatch_error``).
    :param namespace: the gateway's key namespace; ``shards``: its shard count (the same as the
        replicas').
    :param lease: seconds this executor holds a run without renewing it (renewed every third).
    :param name: its consumer name in the group (default: host, process id, a random part).
    :param options: the runs' options (:class:`~agui_meta.gateway.MemoryRuns`'): ``max_runs``
        (runs at once: the entries it reads), ``linger``, ``max_run_time``, ``max_events``,
        ``keep``, ``budget``, ``stop_timeout``.

    Yields the registry of its runs (:class:`~agui_meta.gateway.RunRegistry`: ``await
    runs.active_runs()``)."""
    keys = GatewayKeys(namespace, shards)
    runs = RedisRuns(
        RedisThreadStore(client, namespace=namespace, shards=shards),
        RedisCatalog(client, keys),
        client=client,
        keys=keys,
        lease=lease,
        name=name,
        **options,
    )
    runs.agents = {agent_name: as_agent(agent) for agent_name, agent in agents.items()}
    async with runs.running():
        yield runs
