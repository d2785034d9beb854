"""The gateway: AG-UI runs that outlive their connection, with connect, stop and owned threads.

``agui_meta.gateway`` holds :class:`Gateway` (an ASGI app, mountable in Starlette or FastAPI;
extra ``server``), the agents it fronts (:class:`AsgiAgent`, :class:`UpstreamAgent`, or any
async callable of the run input) and the catalog of threads and runs in flight
(:class:`MemoryCatalog`, :class:`SQLiteCatalog`). See ``docs/gateway.md``.
"""

from __future__ import annotations

from ._agents import AgentError, AsgiAgent, GatewayAgent, UpstreamAgent
from ._catalog import Catalog, MemoryCatalog, SQLiteCatalog
from ._gateway import Gateway, ScopeResolver
from ._runlog import MemoryRunLog, RunLog

__all__ = (
    "AgentError",
    "AsgiAgent",
    "Catalog",
    "Gateway",
    "GatewayAgent",
    "MemoryCatalog",
    "MemoryRunLog",
    "RunLog",
    "SQLiteCatalog",
    "ScopeResolver",
    "UpstreamAgent",
)
