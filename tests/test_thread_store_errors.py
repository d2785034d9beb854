"""What goes wrong in a thread store is a ThreadStoreError naming the store and the thread.

Files that are not databases, snapshots that are not JSON (or not snapshots), a closed store,
a state that cannot be encoded, a Redis key of another type: never a raw ``sqlite3`` or
``msgspec`` error. A read-only SQLite file loads (tried as an unprivileged user: root writes
any file, so the check runs without its override).
"""

from __future__ import annotations

import ctypes
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import agui_meta
from agui_meta.threads import (
    MemoryThreadStore,
    SQLiteThreadStore,
    ThreadSnapshot,
    ThreadStoreError,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def first(thread_id: str = "t", state: Any = None) -> ThreadSnapshot:
    return ThreadSnapshot(thread_id=thread_id).advance(agui_meta.Store(state=state or {"n": 1}))


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    path.write_bytes(b"this is not an SQLite database, whatever its name says\n" * 100)
    with pytest.raises(ThreadStoreError) as caught:
        SQLiteThreadStore(path)
    assert str(path) in str(caught.value) and "not a database" in str(caught.value)
    assert caught.value.thread_id is None
    assert isinstance(caught.value.__cause__, sqlite3.Error)


def test_a_path_that_cannot_be_created_is_named(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "dir" / "threads.db"
    with pytest.raises(ThreadStoreError, match="cannot be opened") as caught:
        SQLiteThreadStore(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("stored", "says"),
    [
        (b"not json at all", "cannot be read (15 bytes)"),
        (b'{"threadId": 5}', "cannot be read"),
        (b'{"threadId": "t", "version": "one"}', "cannot be read"),
        (b"[" * 10_000, "cannot be read"),
        (42, "not JSON text but int"),
        (4.5, "not JSON text but float"),
    ],
)
async def test_a_stored_snapshot_that_cannot_be_read_names_the_thread_and_the_file(
    tmp_path: Path, stored: Any, says: str
) -> None:
    path = tmp_path / "threads.db"
    with SQLiteThreadStore(path) as store:
        await store.save(first())
        with sqlite3.connect(path) as db:
            db.execute("UPDATE agui_threads SET snapshot = ? WHERE thread_id = 't'", (stored,))
        with pytest.raises(ThreadStoreError) as caught:
            await store.load("t")
    message = str(caught.value)
    assert message.startswith(f"thread 't' in the SQLite thread store {str(path)!r}: ")
    assert says in message
    assert caught.value.thread_id == "t"
    assert not isinstance(caught.value, msgspec.MsgspecError)


async def test_a_closed_store_is_named(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "threads.db")
    store.close()
    for call in (store.load("t"), store.save(first())):
        with pytest.raises(ThreadStoreError, match="closed database") as caught:
            await call
        assert caught.value.thread_id == "t"


class NotJson:
    pass


def deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "state", [{"x": NotJson()}, {"x": 1j}, {("tuple", "key"): 1}, {"deep": deep(100_000)}]
)
async def test_a_state_that_cannot_be_encoded_names_the_thread_in_every_store(
    tmp_path: Path, state: Any
) -> None:
    snapshot = ThreadSnapshot(thread_id="t", version=1, state=state)
    with SQLiteThreadStore(tmp_path / "threads.db") as sqlite_store:
        for store in (MemoryThreadStore(), sqlite_store):
            with pytest.raises(ThreadStoreError, match="it is not JSON") as caught:
                await store.save(snapshot)
            assert caught.value.thread_id == "t"
            assert await store.load("t") is None  # nothing was saved


READ_ONLY_CHECK = """
import anyio, sys
from agui_meta.threads import SQLiteThreadStore, ThreadSnapshot, ThreadStoreError

async def main(path):
    with SQLiteThreadStore(path) as store:
        print("read_only", store.read_only)
        snapshot = await store.load("t")
        print("loaded", None if snapshot is None else (snapshot.version, snapshot.state))
        print("other", await store.load("other"))
        try:
            await store.save(ThreadSnapshot(thread_id="t", version=2))
        except ThreadStoreError as exc:
            print("save", exc)

anyio.run(main, sys.argv[1])
"""


@pytest.fixture
def read_only_dir() -> Iterator[Path]:
    """A directory of its own, made read-only by the tests."""
    directory = Path(tempfile.mkdtemp(prefix="agui-ro-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        directory.chmod(0o755)
        for child in directory.iterdir():
            child.chmod(0o644)
            child.unlink()
        directory.rmdir()


def _without_file_override() -> None:
    """In the child, before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the
    bounding set, so that root obeys file permissions like any user."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def run_unprivileged(path: Path) -> list[str]:
    """The read-only check in a fresh interpreter that file permissions bind (root included)."""
    done = subprocess.run(
        [sys.executable, "-c", READ_ONLY_CHECK, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=_without_file_override if os.geteuid() == 0 else None,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_read_only_file_loads_and_a_save_says_why_not(read_only_dir: Path, journal: str) -> None:
    path = read_only_dir / "threads.db"
    with SQLiteThreadStore(path) as store:
        anyio.run(store.save, first(state={"kept": True}))
    if journal == "delete":
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA journal_mode=DELETE")
    path.chmod(0o444)
    read_only_dir.chmod(0o555)
    lines = run_unprivileged(path)
    assert lines[:3] == ["read_only True", "loaded (1, {'kept': True})", "other None"]
    assert lines[3].startswith(f"save thread 't' in the SQLite thread store {str(path)!r}: ")
    assert "opened read-only" in lines[3] and "readonly" in lines[3]


def test_a_read_only_database_without_the_table_holds_no_thread(
    read_only_dir: Path,
) -> None:
    path = read_only_dir / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE unrelated (x)")
    path.chmod(0o444)
    read_only_dir.chmod(0o555)
    lines = run_unprivileged(path)
    assert lines[:3] == ["read_only True", "loaded None", "other None"]


# ---------------------------------------------------------------------------------------------
# Redis


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path_factory.mktemp("redis"))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
async def client(server: RedisServer) -> AsyncIterator[Any]:
    import redis.asyncio

    c = redis.asyncio.Redis.from_url(server.url)
    yield c
    await c.aclose()


@pytest.mark.parametrize(
    "corrupt",
    [
        ("hset", "snap", b"\xff\xfe not json"),
        ("hset", "snap", b'{"threadId": []}'),
        ("hset", "snap", b"{" * 5000),
        ("wrong-type", None, None),
    ],
)
async def test_redis_snapshots_that_cannot_be_read_name_the_key_and_the_thread(
    client: Any, corrupt: tuple[str, Any, Any]
) -> None:
    from agui_meta.redis import RedisThreadStore

    store = RedisThreadStore(client, namespace="errors")
    await store.save(first())
    key = store.keys.thread("t")
    kind, field, value = corrupt
    if kind == "hset":
        await client.hset(key, field, value)
    else:
        await client.delete(key)
        await client.set(key, b"a string where a hash belongs")
    try:
        with pytest.raises(ThreadStoreError) as caught:
            await store.load("t")
        assert f"thread 't' in the Redis thread store (key {key!r})" in str(caught.value)
        if kind == "wrong-type":
            with pytest.raises(ThreadStoreError, match="WRONGTYPE"):
                await store.save(first())
    finally:
        await client.delete(key)


async def test_a_redis_version_that_is_not_a_number_names_the_thread(client: Any) -> None:
    from agui_meta.redis import RedisThreadStore

    store = RedisThreadStore(client, namespace="errors")
    key = store.keys.thread("v")
    await client.hset(key, mapping={"v": "seven", "snap": first("v").to_json()})
    try:
        with pytest.raises(ThreadStoreError, match="stored version is not a number"):
            await store.save(first("v"))
        with pytest.raises(ThreadStoreError, match="it is not JSON"):
            await store.save(ThreadSnapshot(thread_id="v", version=1, state={"x": NotJson()}))
    finally:
        await client.delete(key)
