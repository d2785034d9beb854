"""Ingest: a producer's frames, cut into envelopes and appended to their thread's shard stream.

Each envelope is appended by one script that also records the source's sequence number, so a
retried envelope (same source, same ``seq``) is recognised and skipped: a producer may resend
after any failure without duplicating a thing. Envelopes are sent in pipelines of ``pipeline``
calls (one round trip for many envelopes).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import redis.asyncio
import redis.exceptions

from .._durable import Envelope
from ._common import DEFAULT_SHARDS, Scripts, shard_count
from ._keys import GROUP, Keys

__all__ = ["IngestResult", "SequenceGap", "publish", "read_frames"]


class IngestResult(msgspec.Struct, kw_only=True):
    """How many envelopes were appended, and how many were retries already taken."""

    appended: int = 0
    duplicates: int = 0


class SequenceGap(Exception):
    """An envelope's ``seq`` skips numbers its source never sent (an earlier one was lost)."""


async def publish(
    client: redis.asyncio.Redis,
    envelopes: Iterable[Envelope],
    *,
    namespace: str = "agui",
    shards: int = DEFAULT_SHARDS,
    pipeline: int = 64,
) -> IngestResult:
    """Append envelopes (in order) to their threads' shard streams; retries are skipped.

    :param shards: the shard count of a namespace not used before (an existing namespace
        keeps its own).
    :param pipeline: envelopes per round trip.
    :raises SequenceGap: a source's ``seq`` jumps past the next expected number.
    """
    keys = Keys(namespace)
    count = await shard_count(client, keys, shards)
    scripts = Scripts(client)
    result = IngestResult()
    batch: list[Envelope] = []

    async def flush() -> None:
        sha = await scripts.sha("INGEST")
        for attempt in (0, 1):
            pipe = client.pipeline(transaction=False)
            for env in batch:
                pipe.evalsha(
                    sha,
                    2,
                    keys.sources,
                    keys.shard(keys.shard_of(env.thread, count)),
                    env.source,
                    env.seq,
                    env.encode(),
                    GROUP,
                )
            replies = await pipe.execute(raise_on_error=False)
            if attempt == 0 and any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
                scripts.forget()
                sha = await scripts.sha("INGEST")
                continue  # the calls before the first NOSCRIPT ran: resent, they are retries
            break
        for reply in replies:
            if isinstance(reply, Exception):
                if "SEQGAP" in str(reply):
                    raise SequenceGap(str(reply).partition("SEQGAP ")[2] or str(reply))
                raise reply
            if reply == 1:
                result.appended += 1
            else:
                result.duplicates += 1
        batch.clear()

    for envelope in envelopes:
        batch.append(envelope)
        if len(batch) >= pipeline:
            await flush()
    if batch:
        await flush()
    return result


def read_frames(path: str) -> list[bytes]:
    """The frames of a recorded stream (SSE or JSON lines, detected), as their JSON text.

    A frame that is not UTF-8 is kept as it is (the worker reports it); a framing error that
    ends the stream (an oversized frame, bytes that are neither format) raises
    :class:`~agui_meta.FramingError`.
    """
    from .._framing import Framer

    framer = Framer("auto", invalid_utf8="frame")
    frames: list[bytes] = []
    with open(path, "rb") as file:
        while chunk := file.read(1 << 16):
            for piece in framer.slices(chunk):
                frames += [frame.data for frame in framer.feed(piece)]
    frames += [frame.data for frame in framer.close()]
    return frames
