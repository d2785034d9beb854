"""What ingest, the workers and the thread store share: scripts loaded once, the shard count."""

from __future__ import annotations

from typing import Any

import redis.asyncio

from .._exceptions import UsageError
from . import _scripts
from ._keys import Keys

__all__ = ["DEFAULT_SHARDS", "Scripts", "shard_count", "text"]

#: Virtual shards of a new namespace: many more than workers, so that load spreads evenly.
DEFAULT_SHARDS = 64


def text(value: Any) -> str:
    """A Redis reply (bytes, or str with ``decode_responses=True``) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Scripts:
    """The Lua scripts of :mod:`._scripts`, registered with redis-py (``register_script``).

    A call is an ``EVALSHA``; redis-py loads the script and calls again after ``NOSCRIPT`` (a
    restarted server has an empty script cache, and ``NOSCRIPT`` fails before the script runs,
    so the second call is not a repeat).
    """

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self._scripts = {
            name: client.register_script(getattr(_scripts, name)) for name in _scripts.__all__
        }

    async def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self._scripts[name](keys, args)


async def shard_count(
    client: redis.asyncio.Redis, keys: Keys, default: int = DEFAULT_SHARDS
) -> int:
    """The namespace's number of virtual shards, set to ``default`` by its first user."""
    if default < 1:
        raise UsageError(f"the number of shards must be at least 1, not {default}")
    await client.hsetnx(keys.config, "shards", default)
    return int(text(await client.hget(keys.config, "shards")))
