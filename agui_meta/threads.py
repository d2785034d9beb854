"""Durable threads: snapshots of a conversation and the stores that keep them.

``agui_meta.threads`` holds :class:`ThreadSnapshot` (messages in wire JSON, state, open
interrupts, a ledger summary, a version), the :class:`ThreadStore` protocol (load; save with
compare-and-set on the version) and two implementations: :class:`MemoryThreadStore` and
:class:`SQLiteThreadStore`. ``agui_meta.redis.RedisThreadStore`` is the third (extra ``redis``).
"""

from __future__ import annotations

from ._threads import LedgerSummary as LedgerSummary
from ._threads import MemoryThreadStore as MemoryThreadStore
from ._threads import SQLiteThreadStore as SQLiteThreadStore
from ._threads import ThreadSnapshot as ThreadSnapshot
from ._threads import ThreadStore as ThreadStore
from ._threads import VersionConflict as VersionConflict

__all__ = (
    "LedgerSummary",
    "MemoryThreadStore",
    "SQLiteThreadStore",
    "ThreadSnapshot",
    "ThreadStore",
    "VersionConflict",
)
