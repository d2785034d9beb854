"""What the Redis tests share: streams to ingest, and reading back what the workers committed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis.asyncio

from agui_meta.redis import Envelope, Keys, LocalResult, envelopes, read_frames

STREAMS = Path(__file__).parent.parent / "examples" / "streams"


def workload(threads: int = 6, *, batch: int = 3) -> list[list[Envelope]]:
    """Per source, its envelopes: the three recorded streams over ``threads`` threads.

    Some threads get two sources (two recorded streams, one after the other: their second
    run continues the first's conversation).
    """
    names = ["travel.sse", "support.jsonl", "broken.jsonl"]
    frames = {name: read_frames(str(STREAMS / name)) for name in names}
    out = []
    for t in range(threads):
        thread = f"thread-{t}"
        picks = [names[t % 3]] + ([names[(t + 1) % 3]] if t % 2 else [])
        for s, name in enumerate(picks):
            out.append(
                list(envelopes(frames[name], thread=thread, source=f"{thread}:{s}", batch=batch))
            )
    return out


def in_order(sources: list[list[Envelope]]) -> list[Envelope]:
    """The envelopes in the order one producer per thread sends them (sources of a thread in turn)."""
    by_thread: dict[str, list[Envelope]] = {}
    for source in sources:
        by_thread.setdefault(source[0].thread, []).extend(source)
    return [e for thread in sorted(by_thread) for e in by_thread[thread]]


async def committed(client: redis.asyncio.Redis, namespace: str = "agui") -> dict[str, Any]:
    """What Redis holds: outputs (in stream order), thread snapshots, usage, pending counts."""
    keys = Keys(namespace)
    outputs = [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in await client.xrange(keys.out)
    ]
    threads = {}
    async for key in client.scan_iter(
        match=keys.thread_prefix.replace("{", "\\{").replace("}", "\\}") + "*"
    ):
        if await client.type(key) != b"hash":
            continue  # a broken one, as a test made it
        snap = await client.hget(key, "snap")
        if snap is not None:
            try:
                threads[key.decode()[len(keys.thread_prefix) :]] = json.loads(snap)
            except ValueError:
                continue  # a broken one, as a test made it
    usage = {k.decode(): int(v) for k, v in (await client.hgetall(keys.usage)).items()}
    shards = int(await client.hget(keys.config, "shards") or 0)
    pending = 0
    for n in range(shards):
        if await client.exists(keys.shard(n)):
            pending += int((await client.xpending(keys.shard(n), "agui-meta"))["pending"])
    return {"outputs": outputs, "threads": threads, "usage": usage, "pending": pending}


def expected(result: LocalResult) -> dict[str, Any]:
    """:func:`run_local`'s result in the shape :func:`committed` gives."""
    return {
        "outputs": [
            {"key": o.key, "thread": o.thread, "kind": o.kind, "data": o.encode().decode()}
            for o in result.outputs
        ],
        "threads": {t: json.loads(s.to_json()) for t, s in result.threads.items()},
        "usage": result.usage,
    }


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal threads and usage; outputs: no key twice, none missing, each with the same value
    (and in the same order within each thread)."""
    keys = [o["key"] for o in got["outputs"]]
    duplicated = sorted({k for k in keys if keys.count(k) > 1})
    assert duplicated == [], f"{len(duplicated)} output keys emitted twice: {duplicated[:5]}"
    want_keys = {o["key"] for o in want["outputs"]}
    missing = sorted(want_keys - set(keys))
    assert missing == [], f"{len(missing)} output keys missing: {missing[:5]}"
    extra = sorted(set(keys) - want_keys)
    assert extra == [], f"unexpected output keys: {extra[:5]}"

    def per_thread(outputs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for o in outputs:
            out.setdefault(o["thread"], []).append(o)
        return out

    assert per_thread(got["outputs"]) == per_thread(want["outputs"])
    assert got["threads"] == want["threads"]
    assert got["usage"] == want["usage"]
