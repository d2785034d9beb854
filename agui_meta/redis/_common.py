"""What ingest, the workers and the thread store share: scripts loaded once, the shard count."""

from __future__ import annotations

from typing import Any

import redis.asyncio
import redis.exceptions

from . import _scripts
from ._keys import Keys

__all__ = ["DEFAULT_SHARDS", "Scripts", "shard_count", "text"]

#: Virtual shards of a new namespace: many more than workers, so that load spreads evenly.
DEFAULT_SHARDS = 64


def text(value: Any) -> str:
    """A Redis reply (bytes, or str with ``decode_responses=True``) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Scripts:
    """The Lua scripts of :mod:`._scripts`, called by SHA and reloaded after ``NOSCRIPT``.

    (A restarted server has an empty script cache; an ``EVALSHA`` then fails with ``NOSCRIPT``
    before running, so loading and calling again is safe.)
    """

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self._sha: dict[str, str] = {}

    async def sha(self, name: str) -> str:
        sha = self._sha.get(name)
        if sha is None:
            sha = self._sha[name] = text(await self.client.script_load(getattr(_scripts, name)))
        return sha

    async def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        for attempt in (0, 1):
            sha = await self.sha(name)
            try:
                return await self.client.evalsha(sha, len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                self._sha.pop(name, None)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def forget(self) -> None:
        """Reload every script at its next call (after a reconnection)."""
        self._sha.clear()


async def shard_count(
    client: redis.asyncio.Redis, keys: Keys, default: int = DEFAULT_SHARDS
) -> int:
    """The namespace's number of virtual shards, set to ``default`` by its first user."""
    if default < 1:
        raise ValueError(f"the number of shards must be at least 1, not {default}")
    await client.hsetnx(keys.config, "shards", default)
    return int(text(await client.hget(keys.config, "shards")))
