"""The gateway: AG-UI runs that outlive their connection, with connect, stop and owned threads.

``agui_meta.gateway`` holds :class:`Gateway` (an ASGI app, mountable in Starlette or FastAPI;
extra ``server``), the agents it fronts (:class:`AsgiAgent`, :class:`UpstreamAgent`, or any
async callable of the run input), the catalog of threads and runs in flight
(:class:`MemoryCatalog`, :class:`SQLiteCatalog`), and the contracts the routes use, for other
implementations (:class:`RunRegistry` and :class:`RunHandle`, :class:`RunLog`, :class:`Catalog`;
in this process :class:`MemoryRuns`, :class:`MemoryRunLog`). :func:`redis_gateway` makes a
replica of a gateway spread over processes sharing Redis, and :func:`executor` a process that
executes the runs front replicas dispatch (extra ``redis``). See ``docs/gateway.md``.
"""

from __future__ import annotations

import typing as _typing

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
    "executor",
    "redis_gateway",
)

if _typing.TYPE_CHECKING:
    from .redis._executor import executor
    from .redis._gateway import redis_gateway

_LAZY = ("executor", "redis_gateway")

_public_module(__name__, globals(), [name for name in __all__ if name not in _LAZY])


def __getattr__(name: str) -> object:
    # redis_gateway and executor need redis-py: imported on first use (pip install
    # 'agui-meta[redis]').
    if name in _LAZY:
        found: object
        if name == "redis_gateway":
            from .redis._gateway import redis_gateway as found
        else:
            from .redis._executor import executor as found
        _public_module(__name__, {name: found}, [name])
        globals()[name] = found
        return found
    raise AttributeError(f"module 'agui_meta.gateway' has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
