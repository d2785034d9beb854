"""The gateway: AG-UI runs that outlive their connection, with connect, stop and owned threads.

``agui_meta.gateway`` holds :class:`Gateway` (an ASGI app, mountable in Starlette or FastAPI;
extra ``server``), the agents it fronts (:class:`AsgiAgent`, :class:`UpstreamAgent`, or any
async callable of the run input), the catalog of threads and runs in flight
(:class:`MemoryCatalog`, :class:`SQLiteCatalog`), and the contracts the routes use, for other
implementations (:class:`RunRegistry` and :class:`RunHandle`, :class:`RunLog`, :class:`Catalog`;
in this process :class:`MemoryRuns`, :class:`MemoryRunLog`). See ``docs/gateway.md``.
"""

from __future__ import annotations

from ._agents import AgentError, AsgiAgent, GatewayAgent, UpstreamAgent
from ._catalog import Catalog, MemoryCatalog, SQLiteCatalog
from ._gateway import Gateway, ScopeResolver
from ._registry import RunHandle, RunRegistry
from ._runlog import MemoryRunLog, RunLog
from ._runs import MemoryRuns

__all__ = (
    "AgentError",
    "AsgiAgent",
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
    "UpstreamAgent",
)
