"""The gateway: AG-UI runs that outlive their connection, with connect, stop and owned threads.

``agui_meta.gateway`` holds :class:`Gateway` (an ASGI app, mountable in Starlette or FastAPI;
extra ``server``), the agents it fronts (:class:`AsgiAgent`, :class:`UpstreamAgent`, or any
async callable of the run input), the catalog of threads and runs in flight
(:class:`MemoryCatalog`, :class:`SQLiteCatalog`), and the contracts the routes use, for other
implementations (:class:`RunRegistry` and :class:`RunHandle`, :class:`RunLog`, :class:`Catalog`;
in this process :class:`MemoryRuns`, :class:`MemoryRunLog`). :func:`redis_gateway` makes a
replica of a gateway spread over processes sharing Redis (extra ``redis``). See
``docs/gateway.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._agents import AsgiAgent, GatewayAgent, UpstreamAgent
from ._catalog import Catalog, MemoryCatalog, SQLiteCatalog
from ._exceptions import AgentError, AtCapacity, ThreadBusy
from ._gateway import Gateway, ScopeResolver
from ._public import public_module as _public_module
from ._registry import RunHandle, RunRegistry
from ._runlog import MemoryRunLog, RunLog
from ._runs import MemoryRuns

__all__ = (
    "AgentError",
    "AsgiAgent",
    "AtCapacity",
    "Catalog",
    "Gateway",
    "GatewayAgent",
    "MemoryCatalog",
    "MemoryRunLog",
    "MemoryRuns",
    "RunHandle",
    "RunLog",
    "RunRegistry",
    "SQLiteCatalog",
    "ScopeResolver",
    "ThreadBusy",
    "UpstreamAgent",
    "redis_gateway",
)

if TYPE_CHECKING:
    import redis.asyncio


def redis_gateway(
    client: redis.asyncio.Redis,
    agents: Mapping[str, Any],
    *,
    namespace: str = "agui",
    shards: int = 16,
    lease: float = 10.0,
    **options: Any,
) -> Gateway:
    """A replica of a gateway whose runs, run logs, catalog and threads are in Redis: every
    replica made with the same Redis, ``namespace`` and ``shards`` serves every route for
    every thread (docs/gateway.md, "Across replicas, on Redis").

    :param client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` client (closed
        by the caller; give it a ``retry`` so that a restarted Redis is reconnected to).
    :param agents: as :class:`Gateway`'s: each replica executes the runs it accepts, so each
        needs every agent.
    :param namespace: the key namespace; keys are ``{namespace:S}:…``, ``S`` the thread's
        shard, so that a Redis Cluster spreads the threads over its masters.
    :param shards: virtual shards (the same on every replica).
    :param lease: seconds a replica holds a run without renewing it (it renews every third);
        a run whose replica died is ended with ``RUN_ERROR`` code ``executor_lost`` about one
        lease and a third after its last renewal.
    :param options: :class:`Gateway`'s other options (``max_runs`` counts this replica's runs).
    """
    from .redis._gateway import redis_gateway as make

    return make(client, agents, namespace=namespace, shards=shards, lease=lease, **options)


_public_module(__name__, globals(), __all__)


def __dir__() -> list[str]:
    return list(__all__)
