"""Thread snapshots in Redis: the store the workers commit to, readable by anyone."""

from __future__ import annotations

import redis.asyncio
import redis.exceptions

from .._exceptions import ThreadStoreError, VersionConflict
from .._threads import ThreadSnapshot, check_version, decode_snapshot, encode_snapshot
from ._common import Scripts
from ._keys import Keys
from ._shards import GatewayKeys

__all__ = ["RedisThreadStore"]


class RedisThreadStore:
    """A :class:`~agui_meta.threads.ThreadStore` on Redis: one hash per thread.

    The hash (``{ns}:thread:ID``) holds the version and the snapshot as JSON; the workers of
    :mod:`agui_meta.redis` commit to the same hashes, so this store reads what they wrote. The
    compare-and-set is one Lua script.

    A stored snapshot that cannot be decoded, and an error Redis answers (a key of another
    type), are raised as :class:`~agui_meta._exceptions.ThreadStoreError` naming the key and
    the thread; connection errors and timeouts are redis-py's own, raised as they are.

    :param client: a ``redis.asyncio.Redis`` client.
    :param namespace: the key namespace (``"agui"``, as the workers' default).
    :param shards: the gateway's layout: ``{ns:S}:thread:ID``, hashed by thread shard (the
        gateway on Redis, :func:`~agui_meta.redis.redis_gateway`, sets it). ``None``: the
        workers' layout, ``{ns}:thread:ID`` (one cluster slot).
    """

    def __init__(
        self, client: redis.asyncio.Redis, *, namespace: str = "agui", shards: int | None = None
    ) -> None:
        self.client = client
        self.keys: Keys = Keys(namespace) if shards is None else GatewayKeys(namespace, shards)
        self._scripts = Scripts(client)

    def _name(self, key: str) -> str:
        return f"Redis thread store (key {key!r})"

    async def load(self, thread_id: str) -> ThreadSnapshot | None:
        key = self.keys.thread(thread_id)
        try:
            data = await self.client.hget(key, "snap")
        except redis.exceptions.ResponseError as exc:
            raise ThreadStoreError(
                f"cannot be loaded: {exc}", store=self._name(key), thread_id=thread_id
            ) from exc
        return None if data is None else decode_snapshot(data, thread_id, self._name(key))

    async def save(self, snapshot: ThreadSnapshot) -> None:
        check_version(snapshot)
        key = self.keys.thread(snapshot.thread_id)
        data = encode_snapshot(snapshot, self._name(key))
        try:
            result = await self._scripts.call(
                "SAVE_THREAD", [key], [snapshot.version - 1, data, snapshot.version]
            )
        except redis.exceptions.ResponseError as exc:
            raise ThreadStoreError(
                f"cannot be saved: {exc}", store=self._name(key), thread_id=snapshot.thread_id
            ) from exc
        if isinstance(result, list):
            try:
                actual = int(result[0])
            except (TypeError, ValueError, IndexError) as exc:
                raise ThreadStoreError(
                    f"cannot be saved: the stored version is not a number ({result!r})",
                    store=self._name(key),
                    thread_id=snapshot.thread_id,
                ) from exc
            raise VersionConflict(snapshot.thread_id, snapshot.version - 1, actual)

    async def delete(self, thread_id: str) -> None:
        """Forget the thread (the gateway's ``DELETE /threads/ID``)."""
        await self.client.delete(self.keys.thread(thread_id))

    async def thread_ids(self, *, count: int = 1000) -> list[str]:
        """The ids of the stored threads (a ``SCAN`` of the namespace, in no particular order)."""
        keys = self.keys
        prefix = keys.thread_prefix
        if isinstance(keys, GatewayKeys):
            pattern = keys.thread_pattern
        else:
            pattern = prefix.replace("{", "\\{").replace("}", "\\}") + "*"
        out = []
        async for key in self.client.scan_iter(match=pattern, count=count):
            name = key.decode() if isinstance(key, bytes) else key
            if isinstance(keys, GatewayKeys):
                out.append(keys.thread_id_of(name))
            else:
                out.append(name[len(prefix) :])
        return sorted(out)
