"""agui-meta on Redis Streams: durable threads, many workers, exactly-once results.

Needs the ``redis`` extra (redis-py's asyncio client) and a Redis server (7.0 or later).

- :func:`publish` appends a producer's envelopes (:func:`envelopes` cuts frames into them) to
  the shard streams, idempotently per source sequence number (a retry is recognised by its
  content; a different envelope at a taken number is refused);
- :class:`Worker` owns shards through fenced leases and commits each batch atomically:
  outputs with stable keys, watermark, snapshots at run ends, usage, acknowledgements;
- :class:`RedisThreadStore` reads (and writes, with compare-and-set) the threads' snapshots;
- :class:`RedisReplay` keeps the events an ``EventStreamResponse`` sends, so that a stream
  started on one replica is resumed (``Last-Event-ID``) on any other;
- :class:`RedisCatalog` and :class:`GatewayKeys` are the gateway's catalog and key layout
  across replicas (:func:`agui_meta.gateway.redis_gateway`; keys hashed per thread shard);
- :func:`run_local` is the same processing in one process, without Redis: the reference the
  workers' results equal.

The guarantees, and what they rest on, are in docs/durable.md ("Guarantees").
"""

from __future__ import annotations

from .._durable import Envelope as Envelope
from .._durable import LocalResult as LocalResult
from .._durable import Output as Output
from .._durable import envelopes as envelopes
from .._durable import run_local as run_local
from .._exceptions import CommitTooLarge as CommitTooLarge
from .._exceptions import SequenceGap as SequenceGap
from .._exceptions import SourceConflict as SourceConflict
from .._public import public_module as _public_module
from ._catalog import RedisCatalog as RedisCatalog
from ._common import DEFAULT_SHARDS as DEFAULT_SHARDS
from ._ingest import IngestResult as IngestResult
from ._ingest import publish as publish
from ._ingest import read_frames as read_frames
from ._keys import Keys as Keys
from ._replay import RedisReplay as RedisReplay
from ._shards import GatewayKeys as GatewayKeys
from ._store import RedisThreadStore as RedisThreadStore
from ._worker import Worker as Worker
from ._worker import WorkerStats as WorkerStats

__all__ = (
    "DEFAULT_SHARDS",
    "CommitTooLarge",
    "Envelope",
    "GatewayKeys",
    "IngestResult",
    "Keys",
    "LocalResult",
    "Output",
    "RedisCatalog",
    "RedisReplay",
    "RedisThreadStore",
    "SequenceGap",
    "SourceConflict",
    "Worker",
    "WorkerStats",
    "envelopes",
    "publish",
    "read_frames",
    "run_local",
)

_public_module(__name__, globals(), __all__)


def __dir__() -> list[str]:
    return list(__all__)
