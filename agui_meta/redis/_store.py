"""Thread snapshots in Redis: the store the workers commit to, readable by anyone."""

from __future__ import annotations

import redis.asyncio

from .._exceptions import VersionConflict
from .._threads import ThreadSnapshot, check_version
from ._common import Scripts
from ._keys import Keys

__all__ = ["RedisThreadStore"]


class RedisThreadStore:
    """A :class:`~agui_meta.threads.ThreadStore` on Redis: one hash per thread.

    The hash (``{ns}:thread:ID``) holds the version and the snapshot as JSON; the workers of
    :mod:`agui_meta.redis` commit to the same hashes, so this store reads what they wrote. The
    compare-and-set is one Lua script.

    :param client: a ``redis.asyncio.Redis`` client.
    :param namespace: the key namespace (``"agui"``, as the workers' default).
    """

    def __init__(self, client: redis.asyncio.Redis, *, namespace: str = "agui") -> None:
        self.client = client
        self.keys = Keys(namespace)
        self._scripts = Scripts(client)

    async def load(self, thread_id: str) -> ThreadSnapshot | None:
        data = await self.client.hget(self.keys.thread(thread_id), "snap")
        return None if data is None else ThreadSnapshot.from_json(data)

    async def save(self, snapshot: ThreadSnapshot) -> None:
        check_version(snapshot)
        result = await self._scripts.call(
            "SAVE_THREAD",
            [self.keys.thread(snapshot.thread_id)],
            [snapshot.version - 1, snapshot.to_json(), snapshot.version],
        )
        if isinstance(result, list):
            raise VersionConflict(snapshot.thread_id, snapshot.version - 1, int(result[0]))

    async def thread_ids(self, *, count: int = 1000) -> list[str]:
        """The ids of the stored threads (a ``SCAN`` of the namespace, in no particular order)."""
        prefix = self.keys.thread_prefix
        out = []
        async for key in self.client.scan_iter(
            match=prefix.replace("{", "\\{").replace("}", "\\}") + "*", count=count
        ):
            name = key.decode() if isinstance(key, bytes) else key
            out.append(name[len(prefix) :])
        return sorted(out)
