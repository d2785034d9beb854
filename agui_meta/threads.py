"""Durable threads: snapshots of a conversation and the stores that keep them.

``agui_meta.threads`` holds :class:`ThreadSnapshot` (messages in wire JSON, state, open
interrupts, a ledger summary, a version), the :class:`ThreadStore` protocol (load; save with
compare-and-set on the version) and two implementations: :class:`MemoryThreadStore` and
:class:`SQLiteThreadStore`. ``agui_meta.redis.RedisThreadStore`` is the third (extra ``redis``). A store's own failures
(a file that is not a database, a snapshot that cannot be decoded) are :class:`ThreadStoreError`.
"""

from __future__ import annotations

from ._exceptions import ThreadStoreError, VersionConflict
from ._public import public_module as _public_module
from ._threads import (
    LedgerSummary,
    MemoryThreadStore,
    SQLiteThreadStore,
    ThreadSnapshot,
    ThreadStore,
)

__all__ = (
    "LedgerSummary",
    "MemoryThreadStore",
    "SQLiteThreadStore",
    "ThreadSnapshot",
    "ThreadStore",
    "ThreadStoreError",
    "VersionConflict",
)

_public_module(__name__, globals(), __all__)


def __dir__() -> list[str]:
    return list(__all__)
