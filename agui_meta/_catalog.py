"""The gateway's catalog: which scope owns each thread, and which runs are in flight.

A :class:`~agui_meta.threads.ThreadStore` keeps a thread's snapshot; the gateway also needs to
know whose thread it is (a thread belongs to the scope that first ran it: another scope gets
``404``) and which runs had started and not ended, so that a run left open by a crash is
recorded as ended with an error when the gateway starts again. :class:`Catalog` is that
contract; :class:`MemoryCatalog` keeps it in memory, :class:`SQLiteCatalog` in an SQLite file
(the same file as an :class:`~agui_meta.threads.SQLiteThreadStore` may be used).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio.to_thread

__all__ = ["Catalog", "MemoryCatalog", "SQLiteCatalog"]


class Catalog(Protocol):
    """Thread ownership and the journal of runs in flight. Safe to call from many tasks."""

    async def claim(self, scope: str, thread_id: str) -> bool:
        """Record ``thread_id`` as ``scope``'s if it has no owner; whether ``scope`` owns it."""
        ...

    async def owner(self, thread_id: str) -> str | None:
        """The scope owning ``thread_id`` (``None``: unknown thread)."""
        ...

    async def threads(self, scope: str) -> list[str]:
        """The ids of ``scope``'s threads, in the order they were claimed."""
        ...

    async def forget(self, thread_id: str) -> None:
        """Drop ``thread_id`` (deleted)."""
        ...

    async def run_started(self, thread_id: str, run_id: str) -> None:
        """Note a run in flight (until :meth:`run_ended`)."""
        ...

    async def run_ended(self, thread_id: str, run_id: str) -> None: ...

    async def in_flight(self) -> list[tuple[str, str]]:
        """The ``(thread_id, run_id)`` of the runs started and not ended."""
        ...


class MemoryCatalog:
    """A :class:`Catalog` in memory (lost with the process, as the memory thread store is)."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}
        self._runs: dict[tuple[str, str], None] = {}

    async def claim(self, scope: str, thread_id: str) -> bool:
        return self._owners.setdefault(thread_id, scope) == scope

    async def owner(self, thread_id: str) -> str | None:
        return self._owners.get(thread_id)

    async def threads(self, scope: str) -> list[str]:
        return [t for t, s in self._owners.items() if s == scope]

    async def forget(self, thread_id: str) -> None:
        self._owners.pop(thread_id, None)

    async def run_started(self, thread_id: str, run_id: str) -> None:
        self._runs[thread_id, run_id] = None

    async def run_ended(self, thread_id: str, run_id: str) -> None:
        self._runs.pop((thread_id, run_id), None)

    async def in_flight(self) -> list[tuple[str, str]]:
        return list(self._runs)


class SQLiteCatalog:
    """A :class:`Catalog` in an SQLite file (two tables, ``agui_gateway_threads`` and
    ``agui_gateway_runs``). Calls run in a worker thread. Close it, or use it as a context
    manager."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS agui_gateway_threads ("
            "thread_id TEXT PRIMARY KEY, scope TEXT NOT NULL, claimed INTEGER NOT NULL)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS agui_gateway_runs ("
            "thread_id TEXT NOT NULL, run_id TEXT NOT NULL, PRIMARY KEY (thread_id, run_id))"
        )

    def __enter__(self) -> SQLiteCatalog:  # noqa: PYI034 - the class is not meant to be subclassed
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _execute(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    async def _run(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        return await anyio.to_thread.run_sync(lambda: self._execute(sql, *args))

    async def claim(self, scope: str, thread_id: str) -> bool:
        await self._run(
            "INSERT INTO agui_gateway_threads (thread_id, scope, claimed) "
            "VALUES (?, ?, (SELECT COUNT(*) FROM agui_gateway_threads)) "
            "ON CONFLICT (thread_id) DO NOTHING",
            thread_id,
            scope,
        )
        return await self.owner(thread_id) == scope

    async def owner(self, thread_id: str) -> str | None:
        rows = await self._run(
            "SELECT scope FROM agui_gateway_threads WHERE thread_id = ?", thread_id
        )
        return None if not rows else str(rows[0][0])

    async def threads(self, scope: str) -> list[str]:
        rows = await self._run(
            "SELECT thread_id FROM agui_gateway_threads WHERE scope = ? ORDER BY claimed, rowid",
            scope,
        )
        return [str(row[0]) for row in rows]

    async def forget(self, thread_id: str) -> None:
        await self._run("DELETE FROM agui_gateway_threads WHERE thread_id = ?", thread_id)

    async def run_started(self, thread_id: str, run_id: str) -> None:
        await self._run(
            "INSERT OR IGNORE INTO agui_gateway_runs (thread_id, run_id) VALUES (?, ?)",
            thread_id,
            run_id,
        )

    async def run_ended(self, thread_id: str, run_id: str) -> None:
        await self._run(
            "DELETE FROM agui_gateway_runs WHERE thread_id = ? AND run_id = ?", thread_id, run_id
        )

    async def in_flight(self) -> list[tuple[str, str]]:
        rows = await self._run("SELECT thread_id, run_id FROM agui_gateway_runs ORDER BY rowid")
        return [(str(t), str(r)) for t, r in rows]


if TYPE_CHECKING:  # mypy checks that both keep the contract

    def _memory(catalog: MemoryCatalog) -> Catalog:
        return catalog

    def _sqlite(catalog: SQLiteCatalog) -> Catalog:
        return catalog
