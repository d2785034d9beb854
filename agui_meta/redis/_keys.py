"""Where everything lives in Redis: the key names of one namespace, and the shard of a thread."""

from __future__ import annotations

import zlib

from .._exceptions import UsageError

__all__ = ["GROUP", "Keys"]

#: The consumer group every worker reads the shard streams through.
GROUP = "agui-meta"


class Keys:
    """The key names of one namespace (``{ns}`` is a hash tag: one cluster slot for all).

    - ``{ns}:config`` hash: ``shards``, the number of virtual shards, set once;
    - ``{ns}:shard:N`` stream: the entries of the threads of shard N (consumer group
      :data:`GROUP`); ``{ns}:lease:N`` its lease (``"token worker"``, with a TTL) and
      ``{ns}:fence:N`` the counter its fencing tokens come from;
    - ``{ns}:sources`` hash: per source, the last sequence number taken; ``{ns}:digests:SOURCE``
      string: the digest (16 bytes) of each envelope the source sent, at ``16 * (seq - 1)``,
      so that a retry is recognised by what it holds, not by its name alone;
    - ``{ns}:thread:ID`` hash: ``v`` (version), ``snap`` (the snapshot as JSON), ``wm`` (the
      id of the last entry whose outputs were emitted);
    - ``{ns}:out`` stream: the outputs (``key``, ``thread``, ``kind``, ``data``);
    - ``{ns}:quarantine`` hash: per thread the workers set aside, why (JSON: ``key``,
      ``field``, ``error``); ``{ns}:parked`` stream: the entries of those threads, moved there
      from their shard (``stream``, ``id`` and the entry's own fields) and acknowledged;
    - ``{ns}:usage`` hash: the usage counters; ``{ns}:workers`` sorted set: live workers;
    - ``{ns}:replay:KEY`` stream: the SSE events of one response (:class:`RedisReplay`), with
      ``{ns}:replay:KEY:alive`` (its producer's heartbeat) and ``{ns}:replay:KEY:reader`` (a
      client reads it on another replica).
    """

    def __init__(self, namespace: str = "agui") -> None:
        if not namespace or any(c in namespace for c in "{} "):
            raise UsageError(
                f"a namespace is a non-empty name without braces or spaces: {namespace!r}"
            )
        self.namespace = namespace
        ns = "{" + namespace + "}"
        self.config = f"{ns}:config"
        self.sources = f"{ns}:sources"
        self.thread_prefix = f"{ns}:thread:"
        self.out = f"{ns}:out"
        self.usage = f"{ns}:usage"
        self.workers = f"{ns}:workers"
        self.quarantine = f"{ns}:quarantine"
        self.parked = f"{ns}:parked"
        self._ns = ns

    def shard(self, n: int) -> str:
        return f"{self._ns}:shard:{n}"

    def lease(self, n: int) -> str:
        return f"{self._ns}:lease:{n}"

    def fence(self, n: int) -> str:
        return f"{self._ns}:fence:{n}"

    def replay(self, key: str) -> str:
        return f"{self._ns}:replay:{key}"

    def replay_alive(self, key: str) -> str:
        return f"{self._ns}:replay:{key}:alive"

    def replay_reader(self, key: str) -> str:
        return f"{self._ns}:replay:{key}:reader"

    def digests(self, source: str) -> str:
        return f"{self._ns}:digests:{source}"

    def thread(self, thread_id: str) -> str:
        return self.thread_prefix + thread_id

    @staticmethod
    def shard_of(thread_id: str, shards: int) -> int:
        """The virtual shard of a thread: CRC-32 of its UTF-8 id, modulo the shard count."""
        return zlib.crc32(thread_id.encode("utf-8", "surrogatepass")) % shards
