"""Durable threads: a thread's snapshot, and stores that keep it with compare-and-set.

A :class:`ThreadSnapshot` is what a conversation needs to survive its process: the messages in
AG-UI wire JSON, the state, the interrupts the last run left open, a summary of the run ledger,
and a version. It is taken at run boundaries (never per event) and turns back into a live
:class:`~agui_meta.Store` (:meth:`ThreadSnapshot.to_store`), or into the
``MESSAGES_SNAPSHOT`` and ``STATE_SNAPSHOT`` events that hydrate a client
(:meth:`ThreadSnapshot.to_events`).

:class:`ThreadStore` is the protocol of the stores that keep snapshots: ``load`` the latest,
``save`` the next one with compare-and-set on the version (a save whose version is not the
stored one plus one raises :class:`VersionConflict`, so two writers never silently overwrite
each other). Implementations: :class:`MemoryThreadStore` (the default), :class:`SQLiteThreadStore`
(the standard library's ``sqlite3``: the durable default on one machine) and
``agui_meta.redis.RedisThreadStore``. What goes wrong in a store underneath (a file that is not a
database, a locked or read-only one, a stored snapshot that cannot be decoded, a state that
cannot be encoded) is raised as :class:`~agui_meta._exceptions.ThreadStoreError`, naming the
store and the thread, with the original error as its cause.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread
import msgspec

from ._decode import decode_event
from ._events import Event, Interrupt
from ._exceptions import ThreadStoreError, UsageError, VersionConflict
from ._ledger import RunRecord, RunStatus
from ._metadata import copy_json, enc_hook
from ._store import Store
from ._tokens import Usage, aggregate_token_usage

__all__ = [
    "LedgerSummary",
    "MemoryThreadStore",
    "SQLiteThreadStore",
    "ThreadSnapshot",
    "ThreadStore",
    "VersionConflict",
]


class LedgerSummary(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """What a thread keeps of its run ledger: how many runs ended, the last one, total usage.

    ``usage`` is summed per provider and model (:func:`~agui_meta.aggregate_token_usage`) over
    every run the thread has had; ``statuses`` counts the runs by status. ``last_run_id`` and
    ``last_status`` are ``None`` until a run has ended (the id also when the run had none).
    """

    runs: int = 0
    last_run_id: str | None = None
    last_status: RunStatus | None = None
    statuses: dict[str, int] = msgspec.field(default_factory=dict)
    usage: list[Usage] = msgspec.field(default_factory=list)

    def add(self, records: Iterable[RunRecord]) -> LedgerSummary:
        """A new summary with the ended runs ``records`` counted in (this one is unchanged)."""
        runs, last_run_id, last_status = self.runs, self.last_run_id, self.last_status
        statuses = dict(self.statuses)
        usage = list(self.usage)
        for record in records:
            runs += 1
            if record.run_id is not None:
                last_run_id = record.run_id
            last_status = record.status
            statuses[record.status] = statuses.get(record.status, 0) + 1
            usage.extend(record.usage)
        return LedgerSummary(
            runs=runs,
            last_run_id=last_run_id,
            last_status=last_status,
            statuses=statuses,
            usage=aggregate_token_usage(usage),
        )


class ThreadSnapshot(msgspec.Struct, kw_only=True, rename="camel"):
    """A thread at a run boundary: messages (wire JSON), state, open interrupts, ledger, version.

    ``version`` is ``0`` for a thread that was never saved; every save stores the next one.
    JSON with :meth:`to_json` / :meth:`from_json` (camelCase, the messages exactly as
    ``Store.messages_wire()`` gives them).

    >>> import agui_meta
    >>> store = agui_meta.Store([{"id": "u1", "role": "user", "content": "hi"}], {"n": 1})
    >>> snap = ThreadSnapshot.from_store("t1", store)
    >>> snap.to_store().messages_wire(), snap.to_store().state
    ([{'id': 'u1', 'role': 'user', 'content': 'hi'}], {'n': 1})
    >>> [event.type for event in snap.to_events()]
    ['MESSAGES_SNAPSHOT', 'STATE_SNAPSHOT']
    """

    thread_id: str
    version: int = 0
    messages: list[dict[str, Any]] = msgspec.field(default_factory=list)
    state: Any = msgspec.field(default_factory=dict)
    pending_interrupts: list[Interrupt] = msgspec.field(default_factory=list)
    ledger: LedgerSummary = msgspec.field(default_factory=LedgerSummary)

    @classmethod
    def from_store(
        cls,
        thread_id: str,
        store: Store,
        *,
        version: int = 0,
        ledger: LedgerSummary | None = None,
    ) -> ThreadSnapshot:
        """The snapshot of ``store`` as it is now (copied: the store may go on changing)."""
        return cls(
            thread_id=thread_id,
            version=version,
            messages=store.messages_wire(),
            state=copy_json(store.state),
            pending_interrupts=list(store.pending_interrupts),
            ledger=ledger if ledger is not None else LedgerSummary(),
        )

    def advance(self, store: Store, runs: Iterable[RunRecord] = ()) -> ThreadSnapshot:
        """The next version: ``store``'s content, with the ended ``runs`` added to the ledger."""
        return ThreadSnapshot.from_store(
            self.thread_id, store, version=self.version + 1, ledger=self.ledger.add(runs)
        )

    def to_store(self, *, evict_completed: bool = False) -> Store:
        """A new :class:`~agui_meta.Store` holding this snapshot's messages, state and interrupts."""
        store = Store(self.messages, self.state, evict_completed=evict_completed)
        store.pending_interrupts = list(self.pending_interrupts)
        return store

    def to_events(self) -> list[Event]:
        """``MESSAGES_SNAPSHOT`` then ``STATE_SNAPSHOT``: what hydrates a client with this thread.

        Raises :class:`~agui_meta.DecodeError` if a stored message is not a valid AG-UI message.
        """
        events = []
        for data in (
            {"type": "MESSAGES_SNAPSHOT", "messages": self.messages},
            {"type": "STATE_SNAPSHOT", "snapshot": self.state},
        ):
            event = decode_event(data)
            assert event is not None  # both types are known
            events.append(event)
        return events

    def to_json(self) -> bytes:
        """The snapshot as JSON, in ``bytes`` (UTF-8): what the stores keep."""
        return _encode(self)

    def to_builtins(self) -> dict[str, Any]:
        """The snapshot as a ``dict`` of JSON types (``json.dumps`` takes it), shaped like
        :meth:`to_json`."""
        result: dict[str, Any] = msgspec.to_builtins(self, enc_hook=enc_hook)
        return result

    @classmethod
    def from_json(cls, data: bytes | str) -> ThreadSnapshot:
        """The snapshot :meth:`to_json` wrote (``bytes`` or ``str``)."""
        return _decode(data)


_encode = msgspec.json.Encoder(enc_hook=enc_hook).encode
_decode = msgspec.json.Decoder(ThreadSnapshot).decode
_CODEC_ERRORS = (
    msgspec.MsgspecError,
    TypeError,
    ValueError,
    OverflowError,
    RecursionError,
    NotImplementedError,  # what enc_hook raises for a type it does not encode
)


def encode_snapshot(snapshot: ThreadSnapshot, store: str) -> bytes:
    """``snapshot`` as JSON, or a :class:`ThreadStoreError` naming the thread and ``store``."""
    try:
        return snapshot.to_json()
    except _CODEC_ERRORS as exc:
        raise ThreadStoreError(
            f"the snapshot cannot be saved: it is not JSON ({exc})",
            store=store,
            thread_id=snapshot.thread_id,
        ) from exc


def decode_snapshot(data: bytes | str, thread_id: str, store: str) -> ThreadSnapshot:
    """The stored snapshot, or a :class:`ThreadStoreError` naming the thread and ``store``."""
    try:
        return ThreadSnapshot.from_json(data)
    except _CODEC_ERRORS as exc:
        raise ThreadStoreError(
            f"the stored snapshot cannot be read ({len(data)} bytes): {exc}",
            store=store,
            thread_id=thread_id,
        ) from exc


class ThreadStore(Protocol):
    """Where thread snapshots are kept. Both methods may be called from many tasks at once."""

    async def load(self, thread_id: str) -> ThreadSnapshot | None:
        """The latest snapshot of ``thread_id``, or ``None`` if it was never saved."""
        ...

    async def save(self, snapshot: ThreadSnapshot) -> None:
        """Store ``snapshot`` if the stored version is ``snapshot.version - 1`` (absent: 0).

        Otherwise raise :class:`VersionConflict` and change nothing.
        """
        ...


def check_version(snapshot: ThreadSnapshot) -> None:
    if snapshot.version < 1:
        raise UsageError(
            f"thread {snapshot.thread_id!r}: a saved snapshot has version 1 or more, "
            f"not {snapshot.version} (use snapshot.advance(store) to get the next version)"
        )


class MemoryThreadStore:
    """Snapshots in this process's memory (as JSON, so a saved snapshot never changes).

    >>> import anyio, agui_meta
    >>> async def main():
    ...     threads = MemoryThreadStore()
    ...     first = ThreadSnapshot(thread_id="t1").advance(agui_meta.Store(state={"a": 1}))
    ...     await threads.save(first)
    ...     try:
    ...         await threads.save(first)  # version 1 again: someone else saved in between?
    ...     except VersionConflict as exc:
    ...         print(exc)
    ...     return (await threads.load("t1")).state
    >>> anyio.run(main)
    thread 't1': version conflict: the save builds on version 0, the stored version is 1
    {'a': 1}
    """

    _name = "memory thread store"

    def __init__(self) -> None:
        self._data: dict[str, tuple[int, bytes]] = {}

    async def load(self, thread_id: str) -> ThreadSnapshot | None:
        found = self._data.get(thread_id)
        return None if found is None else decode_snapshot(found[1], thread_id, self._name)

    async def save(self, snapshot: ThreadSnapshot) -> None:
        check_version(snapshot)
        found = self._data.get(snapshot.thread_id)
        actual = 0 if found is None else found[0]
        if actual != snapshot.version - 1:
            raise VersionConflict(snapshot.thread_id, snapshot.version - 1, actual)
        self._data[snapshot.thread_id] = (snapshot.version, encode_snapshot(snapshot, self._name))

    async def delete(self, thread_id: str) -> None:
        """Forget ``thread_id`` (nothing happens if it was never saved)."""
        self._data.pop(thread_id, None)

    def thread_ids(self) -> list[str]:
        """The ids of the threads saved so far, in order of their first save."""
        return list(self._data)


class SQLiteThreadStore:
    """Snapshots in an SQLite database file (standard library), one row per thread.

    The compare-and-set is one ``UPDATE … WHERE version = ?`` (or an ``INSERT`` for version 1),
    so several processes may share the file. Calls run in a worker thread, so the event loop
    never waits on the disk. Use it as a context manager, or call :meth:`close`.

    A file that cannot be written (read-only, on a read-only disk) is opened read-only: loads
    work (in a directory that cannot be written either, a WAL database is opened immutable:
    it does not see what other processes write meanwhile), a save raises :class:`~agui_meta._exceptions.ThreadStoreError`, as does every
    ``sqlite3`` error (a file that is not a database, one locked too long), naming the file
    and the thread. ``read_only`` is true when the store was opened so.

    >>> import anyio, tempfile, os, agui_meta
    >>> async def main(path):
    ...     with SQLiteThreadStore(path) as threads:
    ...         await threads.save(ThreadSnapshot(thread_id="t1").advance(agui_meta.Store()))
    ...     with SQLiteThreadStore(path) as threads:  # reopened: the snapshot is still there
    ...         return (await threads.load("t1")).version
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     anyio.run(main, os.path.join(tmp, "threads.db"))
    1
    """

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._name = f"SQLite thread store {str(path)!r}"
        self.read_only = False
        self._writable_error: sqlite3.Error | None = None
        self._table = True  # a read-only file may not hold the table: it holds no thread
        try:
            self._db = self._open_writable(str(path))
        except sqlite3.Error as exc:
            self.read_only = True
            self._writable_error = exc
            self._db = self._open_read_only(Path(path), exc)

    @staticmethod
    def _open_writable(path: str) -> sqlite3.Connection:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS agui_threads ("
                "thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL, snapshot BLOB NOT NULL)"
            )
        except BaseException:
            db.close()
            raise
        return db

    def _open_read_only(self, path: Path, writable: sqlite3.Error) -> sqlite3.Connection:
        """The file read-only; where even that needs to write (a WAL database in a directory
        that cannot be written: its shared-memory file cannot be made), opened immutable."""
        uri = path.resolve().as_uri()
        failure: sqlite3.Error | None = None
        for options in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                db = sqlite3.connect(
                    uri + options, uri=True, check_same_thread=False, isolation_level=None
                )
            except sqlite3.Error as exc:
                failure = exc
                continue
            try:
                found = db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agui_threads'"
                ).fetchone()
            except sqlite3.Error as exc:
                db.close()
                failure = exc
                continue
            self._table = found is not None
            return db
        raise ThreadStoreError(
            f"cannot be opened: {writable} (nor read-only: {failure})", store=self._name
        ) from failure

    def __enter__(self) -> SQLiteThreadStore:  # noqa: PYI034 - the class is not meant to be subclassed
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _load(self, thread_id: str) -> bytes | None:
        if not self._table:
            return None
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT snapshot FROM agui_threads WHERE thread_id = ?", (thread_id,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise ThreadStoreError(
                f"cannot be loaded: {exc}", store=self._name, thread_id=thread_id
            ) from exc
        if row is None:
            return None
        if not isinstance(row[0], (bytes, str)):
            raise ThreadStoreError(
                f"the stored snapshot is not JSON text but {type(row[0]).__name__}",
                store=self._name,
                thread_id=thread_id,
            )
        return row[0] if isinstance(row[0], bytes) else row[0].encode()

    def _save(self, thread_id: str, version: int, data: bytes) -> None:
        if self.read_only:
            raise ThreadStoreError(
                f"cannot be saved: the file was opened read-only ({self._writable_error})",
                store=self._name,
                thread_id=thread_id,
            )
        try:
            self._compare_and_set(thread_id, version, data)
        except sqlite3.Error as exc:
            raise ThreadStoreError(
                f"cannot be saved: {exc}", store=self._name, thread_id=thread_id
            ) from exc

    def _compare_and_set(self, thread_id: str, version: int, data: bytes) -> None:
        with self._lock:
            if version == 1:
                cursor = self._db.execute(
                    "INSERT INTO agui_threads (thread_id, version, snapshot) VALUES (?, 1, ?) "
                    "ON CONFLICT (thread_id) DO NOTHING",
                    (thread_id, data),
                )
            else:
                cursor = self._db.execute(
                    "UPDATE agui_threads SET version = ?, snapshot = ? "
                    "WHERE thread_id = ? AND version = ?",
                    (version, data, thread_id, version - 1),
                )
            if cursor.rowcount == 1:
                return
            row = self._db.execute(
                "SELECT version FROM agui_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        raise VersionConflict(thread_id, version - 1, 0 if row is None else int(row[0]))

    def _delete(self, thread_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM agui_threads WHERE thread_id = ?", (thread_id,))

    async def delete(self, thread_id: str) -> None:
        """Forget ``thread_id`` (nothing happens if it was never saved)."""
        await anyio.to_thread.run_sync(self._delete, thread_id)

    async def load(self, thread_id: str) -> ThreadSnapshot | None:
        data = await anyio.to_thread.run_sync(self._load, thread_id)
        return None if data is None else decode_snapshot(data, thread_id, self._name)

    async def save(self, snapshot: ThreadSnapshot) -> None:
        check_version(snapshot)
        data = encode_snapshot(snapshot, self._name)
        await anyio.to_thread.run_sync(self._save, snapshot.thread_id, snapshot.version, data)
