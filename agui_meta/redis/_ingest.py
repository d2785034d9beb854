"""Ingest: a producer's frames, cut into envelopes and appended to their thread's shard stream.

Envelopes are sent ``pipeline`` at a time, each group in one script call that checks them all
before it writes anything. A source's envelope at a sequence number it already took is a retry
only if it holds what was taken there (a 16-byte digest of its thread, number, events and end,
kept per source and number): then it is skipped, and a producer may resend after any failure
without duplicating a thing. One that differs is refused with :class:`SourceConflict`, naming
the source and the envelope: a different stream under a reused source name is never mistaken
for a retry, so never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
import redis.asyncio
import redis.exceptions

from .._durable import Envelope
from .._exceptions import DataError, SequenceGap, SourceConflict, UsageError
from ._common import DEFAULT_SHARDS, Scripts, shard_count
from ._keys import GROUP, Keys

__all__ = ["IngestResult", "publish", "read_frames"]


class IngestResult(msgspec.Struct, kw_only=True):
    """How many envelopes were appended, and how many were retries already taken."""

    appended: int = 0
    duplicates: int = 0


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
    :param pipeline: envelopes per script call (one round trip each).
    :raises SequenceGap: a source's ``seq`` jumps past the next expected number.
    :raises SourceConflict: a source's envelope at a number it took differs from the one taken.
    :raises DataError: an envelope numbered below 1.
    """
    if pipeline < 1:
        raise UsageError(f"pipeline must be at least 1, not {pipeline}")
    keys = Keys(namespace)
    count = await shard_count(client, keys, shards)
    scripts = Scripts(client)
    result = IngestResult()
    batch: list[Envelope] = []

    async def flush() -> None:
        names = [keys.sources]
        where: dict[str, int] = {}

        def index(key: str) -> int:
            n = where.get(key)
            if n is None:
                names.append(key)
                n = where[key] = len(names)  # Lua's KEYS count from 1
            return n

        args: list[Any] = [GROUP]
        for env in batch:
            args += [
                index(keys.digests(env.source)),
                index(keys.shard(keys.shard_of(env.thread, count))),
                env.source,
                env.seq,
                env.digest(),
                env.encode(),
            ]
        try:
            appended, retries = await scripts.call("INGEST", names, args)
        except redis.exceptions.ResponseError as exc:
            raise _refusal(str(exc), batch) from None
        except redis.exceptions.ConnectionError as exc:
            big = max(batch, key=lambda e: len(e.encode()))
            size = len(big.encode())
            if size < 1 << 20:  # no server refuses less (the least proto-max-bulk-len)
                raise
            raise redis.exceptions.ConnectionError(
                f"{exc} (the call carried an envelope of {size} bytes, source {big.source!r}, "
                f"envelope {big.seq}: a server closes the connection on an argument past its "
                "proto-max-bulk-len; lower the events per envelope, --batch)"
            ) from exc
        result.appended += int(appended)
        result.duplicates += int(retries)
        batch.clear()

    for envelope in envelopes:
        if envelope.seq < 1:
            raise DataError(
                f"source {envelope.source!r}: sequence numbers start at 1, not {envelope.seq}"
            )
        batch.append(envelope)
        if len(batch) >= pipeline:
            await flush()
    if batch:
        await flush()
    return result


def _refusal(reply: str, batch: list[Envelope]) -> Exception:
    """The exception for an ``INGEST`` error reply (``SEQGAP …``, ``DIVERGED …``)."""
    kind, _, rest = reply.partition(" ")
    if kind == "SEQGAP":
        last, seq, source = rest.split(" ", 2)
        return SequenceGap(f"source {source} is at {last}, got {seq}")
    if kind == "DIVERGED":
        seq_text, kept, name = rest.split(" ", 2)
        number = int(seq_text)
        env = next(e for e in batch if e.source == name and e.seq == number)
        what = f"{len(env.frames)} events" + (", end of source" if env.end else "")
        if kept == "0":
            why = "was taken without a digest (by an older agui-meta): a retry cannot be told apart"
        else:
            why = "differs from the envelope this source sent there before"
        return SourceConflict(
            f"source {name!r}: envelope {number} (thread {env.thread!r}, {what}) {why}; a "
            f"different stream under a reused source name is refused (send it under another "
            f"source name)",
            source=name,
            seq=number,
            thread=env.thread,
        )
    if "invalid bulk length" in reply:
        big = max(batch, key=lambda e: len(e.encode()))
        return redis.exceptions.ResponseError(
            f"{reply}: the server refused an argument as too long; the largest envelope of "
            f"the call is {len(big.encode())} bytes (source {big.source!r}, envelope "
            f"{big.seq}): lower the events per envelope (--batch), or raise the server's "
            "proto-max-bulk-len"
        )
    return redis.exceptions.ResponseError(reply)


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
