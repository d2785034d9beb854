"""The gateway: AG-UI runs that outlive their connection, with connect, stop and owned threads.

``agui_meta.gateway`` holds :class:`Gateway` (an ASGI app, mountable in Starlette or FastAPI;
extra ``server``), the agents it fronts (:class:`AsgiAgent`, :class:`UpstreamAgent`, or any
async callable of the run input), the catalog of threads and runs in flight
(:class:`MemoryCatalog`, :class:`SQLiteCatalog`), and the contracts the routes use, for other
implementations (:class:`RunRegistry` and :class:`RunHandle`, :class:`RunLog`, :class:`Catalog`;
in this process :class:`MemoryRuns`, :class:`MemoryRunLog`). See ``docs/gateway.md``.
"""

from __future__ import annotations

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
)

_public_module(__name__, globals(), __all__)


def __dir__() -> list[str]:
    return list(__all__)
