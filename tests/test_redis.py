"""agui_meta.redis on a real redis-server: ingest, workers, fencing, takeover, trimming, the CLI.

The server is started by the tests (``tests/redis_server.py``: 127.0.0.1, a free port, AOF on
with ``appendfsync always``, in a temporary directory); each test uses its own namespace.
redis-py's asyncio client runs on asyncio only, so these tests do too.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import anyio
import msgspec
import pytest

from tests import needs

needs.module("redis", reason="the redis extra is not installed")
import redis.asyncio

import agui_meta
from agui_meta import _durable
from agui_meta.redis import (
    Keys,
    RedisThreadStore,
    SequenceGap,
    SourceConflict,
    Worker,
    envelopes,
    publish,
    read_frames,
    run_local,
)
from agui_meta.redis._common import Scripts
from agui_meta.threads import ThreadSnapshot, VersionConflict
from tests.helpers import cli_in_process, redis_server
from tests.redis_helpers import STREAMS, assert_same, committed, expected, in_order, workload
from tests.redis_server import RedisServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as srv:
        yield srv


_namespaces = iter(range(10**6))


@pytest.fixture
def namespace() -> str:
    return f"t{next(_namespaces)}"


@pytest.fixture
async def client(server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    c = redis.asyncio.Redis.from_url(server.url)
    yield c
    await c.aclose()


async def test_ingest_is_idempotent_per_source_sequence(client, namespace) -> None:
    frames = read_frames(str(STREAMS / "travel.sse"))
    cut = list(envelopes(frames, thread="t", source="s", batch=10))
    first = await publish(client, cut[:4], namespace=namespace, shards=4, pipeline=3)
    assert (first.appended, first.duplicates) == (4, 0)
    again = await publish(client, cut, namespace=namespace, pipeline=5)
    assert (again.appended, again.duplicates) == (len(cut) - 4, 4)
    keys = Keys(namespace)
    stream = keys.shard(keys.shard_of("t", 4))
    entries = await client.xrange(stream)
    assert [agui_meta.redis.Envelope.decode(f[b"e"]) for _, f in entries] == cut
    assert int(await client.hget(keys.sources, "s")) == cut[-1].seq
    assert await client.xinfo_groups(stream)  # the group exists from the first entry on


async def test_a_sequence_gap_is_refused_and_names_the_source(client, namespace) -> None:
    cut = list(
        envelopes(
            [b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}'] * 3,
            thread="t",
            source="src-a",
            batch=1,
        )
    )
    with pytest.raises(SequenceGap, match="src-a is at 0, got 2") as info:
        await publish(client, cut[1:], namespace=namespace)
    assert not isinstance(info.value, SourceConflict)
    for seq in (0, -1):
        with pytest.raises(agui_meta.DataError, match=f"start at 1, not {seq}"):
            await publish(client, [msgspec.structs.replace(cut[0], seq=seq)], namespace=namespace)
    assert (await publish(client, cut, namespace=namespace)).appended == len(cut)


def _run(thread: str, run: str, words: list[str]) -> list[bytes]:
    """One small run's frames: a message of ``words``."""
    frames = [
        json.dumps({"type": "RUN_STARTED", "threadId": thread, "runId": run}).encode(),
        json.dumps(
            {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-m", "role": "assistant"}
        ).encode(),
    ]
    frames += [
        json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-m", "delta": w}).encode()
        for w in words
    ]
    frames.append(json.dumps({"type": "TEXT_MESSAGE_END", "messageId": f"{run}-m"}).encode())
    frames.append(json.dumps({"type": "RUN_FINISHED", "threadId": thread, "runId": run}).encode())
    return frames


async def _shard_entries(client: redis.asyncio.Redis, namespace: str, thread: str) -> list:
    keys = Keys(namespace)
    shards = int(await client.hget(keys.config, "shards"))
    entries = await client.xrange(keys.shard(keys.shard_of(thread, shards)))
    decoded = [agui_meta.redis.Envelope.decode(f[b"e"]) for _, f in entries]
    return [e for e in decoded if e.thread == thread]


async def test_a_retry_is_the_same_stream_whatever_was_sent_between(client, namespace) -> None:
    cut = list(envelopes(_run("t", "r1", list("abcdefgh")), thread="t", source="s", batch=2))
    assert (await publish(client, cut, namespace=namespace, shards=2)).appended == len(cut)
    again = await publish(client, cut, namespace=namespace, pipeline=2)
    assert (again.appended, again.duplicates) == (0, len(cut))
    # A retry stamped at another time (``received``) is the same envelope.
    later = list(
        envelopes(
            _run("t", "r1", list("abcdefgh")), thread="t", source="s", batch=2, clock=lambda: 9
        )
    )
    assert (await publish(client, later + later, namespace=namespace)).duplicates == 2 * len(cut)
    assert await _shard_entries(client, namespace, "t") == cut


@pytest.mark.parametrize("pipeline", [1, 3, 64])
@pytest.mark.parametrize(
    "shape",
    [
        "other-run",  # another stream altogether, same length
        "differs-in-the-middle",  # the same stream but for one event of envelope 3
        "longer-and-different",  # differs in envelope 2, and goes on past the first's end
        "shorter",  # a stream cut short: its end marker is where the first had events
        "same-events-other-batch",  # the same events cut into other envelopes
        "other-thread",  # the same events for another thread under the same source name
    ],
)
async def test_a_different_stream_under_a_used_source_name_is_refused(
    client, namespace, shape: str, pipeline: int
) -> None:
    words = list("abcdefgh")
    first = list(envelopes(_run("t", "r1", words), thread="t", source="s", batch=2))
    await publish(client, first, namespace=namespace, shards=2)
    frames, thread, batch = _run("t", "r1", words), "t", 2
    if shape == "other-run":
        frames = _run("t", "r2", words)
    elif shape == "differs-in-the-middle":
        frames = _run("t", "r1", [*words[:3], "X", *words[4:]])
    elif shape == "longer-and-different":
        frames = _run("t", "r1", ["A", *words[1:], *words])
    elif shape == "shorter":
        frames = _run("t", "r1", words[:3])
    elif shape == "same-events-other-batch":
        batch = 3
    else:
        thread = "u"
    second = list(envelopes(frames, thread=thread, source="s", batch=batch))

    def sent(e: agui_meta.redis.Envelope) -> tuple:
        return e.thread, e.seq, e.frames, e.end

    differs = next(
        b.seq
        for a, b in zip(first + [None] * 99, second, strict=False)
        if a is None or sent(a) != sent(b)
    )
    before = await _shard_entries(client, namespace, "t")
    with pytest.raises(SourceConflict) as info:
        await publish(client, second, namespace=namespace, pipeline=pipeline)
    error = info.value
    assert (error.source, error.seq, error.thread) == ("s", differs, thread)
    assert f"source 's': envelope {differs} " in str(error)
    assert "reused source name" in str(error)
    # Nothing of it was appended (the envelopes before the first difference were retries).
    assert await _shard_entries(client, namespace, "t") == before == first
    assert await _shard_entries(client, namespace, "u") == []
    assert int(await client.hget(Keys(namespace).sources, "s")) == len(first)


async def test_a_longer_stream_with_the_same_start_appends_only_its_tail(client, namespace) -> None:
    frames = _run("t", "r1", list("abcdef")) + _run("t", "r2", list("ghij"))
    head = list(envelopes(frames[:6], thread="t", source="s", batch=3, end=False))
    whole = list(envelopes(frames, thread="t", source="s", batch=3, clock=lambda: 2))
    assert [e.frames for e in whole[: len(head)]] == [e.frames for e in head]
    await publish(client, head, namespace=namespace, shards=2)
    result = await publish(client, whole, namespace=namespace, pipeline=2)
    assert (result.appended, result.duplicates) == (len(whole) - len(head), len(head))
    assert await _shard_entries(client, namespace, "t") == head + whole[len(head) :]
    # A shorter retry of an open source (no end marker yet) is a retry too.
    assert (await publish(client, head[:2], namespace=namespace)).duplicates == 2
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.3)
    got = await committed(client, namespace)
    assert got["pending"] == 0
    assert_same(got, expected(run_local(head + whole[len(head) :])))
    assert got["usage"]["runs|finished"] == 2


async def test_workers_commit_what_one_process_computes(client, namespace) -> None:
    sources = workload(6, batch=3)
    ordered = in_order(sources)
    await publish(client, ordered, namespace=namespace, shards=8)
    async with anyio.create_task_group() as tg:
        for name in ("w1", "w2"):
            worker = Worker(client, namespace=namespace, name=name, lease=2, batch=5)
            tg.start_soon(lambda w=worker: w.run(exit_when_idle=0.6))
    got = await committed(client, namespace)
    assert got["pending"] == 0
    assert_same(got, expected(run_local(ordered)))
    keys = Keys(namespace)
    lengths = [await client.xlen(keys.shard(n)) for n in range(8)]
    assert sum(lengths) <= 8  # trimmed: at most the last delivered entry of each shard


async def test_an_open_runs_entries_stay_pending_and_are_never_trimmed(client, namespace) -> None:
    frames = read_frames(str(STREAMS / "travel.sse"))
    open_run = list(envelopes(frames[:40], thread="a", source="a", batch=8, end=False))
    others = [
        list(
            envelopes(
                read_frames(str(STREAMS / "support.jsonl")), thread=f"b{i}", source=f"b{i}", batch=8
            )
        )
        for i in range(4)
    ]
    done_first = [e for o in others[:2] for e in o]
    done_after = [e for o in others[2:] for e in o]
    await publish(client, done_first + open_run + done_after, namespace=namespace, shards=1)
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.3)
    keys = Keys(namespace)
    pending = await client.xpending_range(keys.shard(0), "agui-meta", "-", "+", 1000)
    assert len(pending) == len(open_run)
    ids = [p["message_id"] for p in pending]
    stream = [entry_id for entry_id, _ in await client.xrange(keys.shard(0))]
    # Every pending entry is still in the stream; what came before the first was trimmed
    # (what came after stays: a trim only cuts below the first pending entry).
    assert stream[: len(ids)] == ids
    assert len(stream) == len(open_run) + len(done_after)
    assert await RedisThreadStore(client, namespace=namespace).load("a") is None
    # The rest of the stream, then its end: the run completes from its pending entries.
    rest = list(
        envelopes(frames[40:], thread="a", source="a", batch=8, first_seq=len(open_run) + 1)
    )
    await publish(client, rest, namespace=namespace)
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.3)
    got = await committed(client, namespace)
    assert got["pending"] == 0
    assert_same(got, expected(run_local(done_first + open_run + done_after + rest)))
    assert await client.xlen(keys.shard(0)) == 1


async def test_a_new_owner_replays_pending_entries_and_suppresses_what_was_emitted(
    client, namespace
) -> None:
    frames = read_frames(str(STREAMS / "support.jsonl"))
    cut = list(envelopes(frames, thread="t", source="s", batch=4))
    await publish(client, cut[:5], namespace=namespace, shards=2)
    first = Worker(client, namespace=namespace, name="first", lease=2)
    await first.run(exit_when_idle=0.3)
    before = await committed(client, namespace)
    assert before["pending"] > 0 and before["outputs"]
    await publish(client, cut[5:], namespace=namespace)
    second = Worker(client, namespace=namespace, name="second", lease=2)
    await second.run(exit_when_idle=0.3)
    assert second.stats.replayed == before["pending"]
    got = await committed(client, namespace)
    assert got["pending"] == 0
    assert_same(got, expected(run_local(cut)))


async def test_a_stale_owners_commit_and_read_are_refused(client, namespace) -> None:
    keys = Keys(namespace)
    cut = list(envelopes(read_frames(str(STREAMS / "travel.sse")), thread="t", source="s"))
    await publish(client, cut, namespace=namespace, shards=1)
    scripts = Scripts(client)
    token = await scripts.call(
        "ACQUIRE", [keys.lease(0), keys.fence(0), keys.shard(0)], ["old", 60_000, "agui-meta"]
    )
    assert token == 1
    # The lease runs out (here: is deleted) and another worker takes the shard.
    await client.delete(keys.lease(0))
    newer = await scripts.call(
        "ACQUIRE", [keys.lease(0), keys.fence(0), keys.shard(0)], ["new", 60_000, "agui-meta"]
    )
    assert newer == 2
    read = await scripts.call(
        "READ", [keys.lease(0), keys.shard(0)], ["agui-meta", "old", 10, "1 old"]
    )
    assert read == [-1]
    payload = msgspec.msgpack.encode(
        {
            "threads": [["t", 0, "{}", 1, "9-9"]],
            "outputs": [["k", "t", "item", "{}"]],
            "usage": [["entries", "1"]],
            "acks": [],
        }
    )
    with pytest.raises(redis.exceptions.ResponseError, match="FENCED"):
        await scripts.call(
            "COMMIT",
            [keys.lease(0), keys.shard(0), keys.out, keys.usage],
            ["1 old", "agui-meta", keys.thread_prefix, payload],
        )
    assert await client.xlen(keys.out) == 0
    assert await client.exists(keys.thread("t")) == 0
    assert await client.hgetall(keys.usage) == {}
    # The new owner does all the work.
    await client.delete(keys.lease(0))
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.3)
    assert_same(await committed(client, namespace), expected(run_local(cut)))


async def test_a_worker_that_loses_its_lease_stops_and_the_next_redoes_its_batch(
    client, namespace
) -> None:
    cut = list(envelopes(read_frames(str(STREAMS / "travel.sse")), thread="t", source="s", batch=5))
    await publish(client, cut, namespace=namespace, shards=1)
    worker = Worker(client, namespace=namespace, name="slow", lease=5, batch=3)
    await worker._leases()
    assert worker.shards == [0]
    await client.set(Keys(namespace).lease(0), "99 thief", px=60_000)
    await worker._step()  # its read is fenced: it drops the shard
    assert worker.shards == []
    assert worker.stats.lost == 1
    await client.delete(Keys(namespace).lease(0))
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.3)
    assert_same(await committed(client, namespace), expected(run_local(cut)))


async def test_a_commit_past_the_workers_own_deadline_is_not_sent(client, namespace) -> None:
    cut = list(envelopes(read_frames(str(STREAMS / "travel.sse")), thread="t", source="s"))
    await publish(client, cut, namespace=namespace, shards=1)
    worker = Worker(client, namespace=namespace, name="late", lease=5)
    await worker._leases()
    worker._held[0].deadline = 0.0  # as if it had been paused past its renewal
    await worker._step()
    assert worker.shards == []
    assert await client.xlen(Keys(namespace).out) == 0
    assert (await committed(client, namespace))["pending"] == len(cut)


async def test_an_inactive_open_run_is_closed_after_the_timeout(client, namespace) -> None:
    frames = read_frames(str(STREAMS / "travel.sse"))[:30]
    cut = list(envelopes(frames, thread="t", source="s", batch=10, end=False))
    await publish(client, cut, namespace=namespace, shards=1)
    worker = Worker(client, namespace=namespace, lease=2, idle_timeout=0.2)
    await worker.run(exit_when_idle=0.5)
    got = await committed(client, namespace)
    assert got["pending"] == 0
    closing = [o for o in got["outputs"] if "/idle/" in o["key"]]
    assert closing and all(o["key"].startswith(f"t/s/{cut[-1].seq}/idle/") for o in closing)
    assert any(json.loads(o["data"]).get("code") == "stream-ended-open" for o in closing)
    snap = await RedisThreadStore(client, namespace=namespace).load("t")
    assert snap is not None and snap.ledger.statuses == {"incomplete": 1}


async def test_a_bad_entry_is_reported_and_acknowledged(client, namespace) -> None:
    keys = Keys(namespace)
    await publish(client, [], namespace=namespace, shards=1)
    await client.xgroup_create(keys.shard(0), "agui-meta", id="0", mkstream=True)
    entry_id = (await client.xadd(keys.shard(0), {"e": b"not msgpack"})).decode()
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.3)
    got = await committed(client, namespace)
    assert got["pending"] == 0
    [report] = got["outputs"]
    assert report["key"].endswith(entry_id)
    assert json.loads(report["data"])["code"] == "bad-envelope"
    [(_, parked)] = await client.xrange(keys.parked)  # kept, not dropped
    assert parked == {
        b"stream": keys.shard(0).encode(),
        b"id": entry_id.encode(),
        b"e": b"not msgpack",
    }


async def test_redis_thread_store_compare_and_set(client, namespace) -> None:
    store = RedisThreadStore(client, namespace=namespace)
    assert await store.load("t") is None
    one = ThreadSnapshot(thread_id="t").advance(agui_meta.Store(state={"v": 1}))
    await store.save(one)
    assert await store.load("t") == one
    with pytest.raises(VersionConflict) as info:
        await store.save(one)
    assert (info.value.expected, info.value.actual) == (0, 1)
    await store.save(one.advance(agui_meta.Store(state={"v": 2})))
    assert (await store.load("t")).version == 2
    assert await store.thread_ids() == ["t"]


def _cli(capsys: pytest.CaptureFixture[str], *args: str, status: int = 0) -> tuple[str, str]:
    """Run the command line in this process; returns (stdout, stderr)."""
    done, out, err = cli_in_process(capsys, *args)
    assert done == status, err
    return out, err


def test_the_command_line(
    server: RedisServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = ["--redis", server.url, "--namespace", namespace]
    travel = str(STREAMS / "travel.sse")
    support = str(STREAMS / "support.jsonl")
    # The installed entry point, once, in its own process.
    first = subprocess.run(
        [
            sys.executable,
            "-m",
            "agui_meta",
            "ingest",
            *ns,
            "--thread",
            "trip",
            "--batch",
            "8",
            "--shards",
            "4",
            travel,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "appended" in first.stderr
    _, err = _cli(capsys, "ingest", *ns, "--thread", "trip", "--batch", "8", travel)
    assert " 0 envelopes appended" in err  # a retry appends nothing
    _cli(capsys, "ingest", *ns, "--thread", "help", support)
    out, _ = _cli(capsys, "worker", *ns, "--exit-when-idle", "0.3", "--lease", "2", "--stats")
    stats = json.loads(out)
    assert stats["commits"] >= 1
    assert stats["cpu"] > 0  # the CPU time of its run, for benchmarks
    shown = json.loads(_cli(capsys, "thread", *ns, "trip", "--json")[0])
    replayed = json.loads(_cli(capsys, "replay", "--json", travel)[0])
    assert shown["messages"] == replayed["messages"]
    assert shown["state"] == replayed["state"]
    assert shown["version"] == 1
    text = _cli(capsys, "thread", *ns, "trip", "--no-color")[0]
    assert "thread trip (version 1)" in text and "runs (1)" in text
    usage = json.loads(_cli(capsys, "usage", *ns, "--json")[0])
    assert usage["runs"] == {"finished": 3}
    assert usage["events"] == len(read_frames(travel)) + len(read_frames(support))
    travel_usage = [u for run in replayed["ledger"]["runs"] for u in run.get("usage", [])]
    gpt = next(t for t in usage["tokens"] if t.get("model") == "gpt-4.1")
    assert gpt["inputTokens"] == sum(
        u.get("inputTokens", 0) for u in travel_usage if u.get("model") == "gpt-4.1"
    )
    assert "runs: 3 finished" in _cli(capsys, "usage", *ns)[0]
    # With a price table: what each provider/model cost, and the whole.
    from tests.example_streams import events
    from tests.test_prices import TABLE, expected_cost

    priced = json.loads(_cli(capsys, "usage", *ns, "--json", "--prices", str(TABLE))[0])
    entries = [
        u
        for name in ("travel.sse", "support.jsonl")
        for e in events(name)
        if e["type"] == "RUN_FINISHED"
        for u in e.get("usage", [])
    ]
    assert priced["cost"]["total"] == pytest.approx(sum(expected_cost(u) for u in entries))
    assert priced["cost"]["currency"] == "USD"
    text = _cli(capsys, "usage", *ns, "--prices", str(TABLE))[0]
    assert f"cost {priced['cost']['total']:.6f} USD" in text
    _, err = _cli(capsys, "thread", *ns, "nobody", status=1)
    assert "no thread 'nobody'" in err
    _, err = _cli(capsys, "usage", "--redis", "redis://127.0.0.1:1/0", status=2)
    assert "cannot reach Redis" in err
    assert err.count("\n") == 1  # one line, no traceback


def test_ingest_from_standard_input_keeps_different_streams_apart(
    server: RedisServer, namespace: str, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    ns = ["--redis", server.url, "--namespace", namespace]

    def ingest(data: bytes, *more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agui_meta", "ingest", *ns, "--thread", "t", *more, "-"],
            input=data.decode(),
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )

    one = b"\n".join(_run("t", "r1", ["a", "b", "c"])) + b"\n"
    two = b"\n".join(_run("t", "r2", ["d", "e"])) + b"\n"
    first = ingest(one)
    assert first.returncode == 0, first.stderr
    assert "2 envelopes appended, 0 already there" in first.stderr
    second = ingest(two)  # another stream, same thread, standard input again: a new source
    assert second.returncode == 0, second.stderr
    assert "2 envelopes appended, 0 already there" in second.stderr
    retry = ingest(two)  # the same stream again: a retry
    assert "0 envelopes appended, 2 already there" in retry.stderr
    # Under an explicit source name, another stream is refused: one line, exit 1.
    named = tmp_path / "three.jsonl"
    named.write_bytes(b"\n".join(_run("t", "r3", ["f"])) + b"\n")
    _cli(capsys, "ingest", *ns, "--thread", "t", "--source", "mine", str(named))
    other = tmp_path / "two.jsonl"
    other.write_bytes(two)
    _, err = _cli(capsys, "ingest", *ns, "--thread", "t", "--source", "mine", str(other), status=1)
    assert err.count("\n") == 1
    assert "source 'mine': envelope 1 (thread 't', 6 events)" in err
    _cli(capsys, "worker", *ns, "--exit-when-idle", "0.3", "--lease", "2")
    shown = json.loads(_cli(capsys, "thread", *ns, "t", "--json")[0])
    assert [m["content"] for m in shown["messages"]] == ["abc", "de", "f"]
    assert shown["version"] == 3


_CORRUPT = {
    "snap-not-json": ("snap", b"{not json"),
    "snap-not-utf8": ("snap", b"\xff\xfe"),
    "snap-wrong-shape": ("snap", b"[1, 2]"),
    "snap-of-another-thread": ("snap", b'{"threadId":"other","version":1}'),
    "snap-missing": ("snap", None),
    "snap-bad-interrupts": ("snap", b'{"threadId":"bad","version":1,"pendingInterrupts":[1]}'),
    "v-not-a-number": ("v", b"abc"),
    "v-not-the-snapshots": ("v", b"7"),
    "v-missing": ("v", None),
    "wm-not-an-id": ("wm", b"garbage"),
    "wm-not-utf8": ("wm", b"\xff-1"),
    "not-a-hash": ("", b"a string"),
}


@pytest.mark.parametrize("shape", sorted(_CORRUPT))
async def test_a_corrupt_thread_is_quarantined_and_the_shard_goes_on(
    client, namespace, shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    keys = Keys(namespace)
    before = list(envelopes(_run("bad", "r1", ["a", "b"]), thread="bad", source="bad-1"))
    await publish(client, before, namespace=namespace, shards=1)
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.2)
    assert await client.hget(keys.thread("bad"), "v") == b"1"
    field, value = _CORRUPT[shape]
    if field == "":
        await client.delete(keys.thread("bad"))
        await client.set(keys.thread("bad"), value)
    elif value is None:
        await client.hdel(keys.thread("bad"), field)
    else:
        await client.hset(keys.thread("bad"), field, value)
    await client.delete(keys.out)
    after = list(envelopes(_run("bad", "r2", ["c"]), thread="bad", source="bad-2", batch=2))
    good = [
        list(envelopes(_run(f"good-{i}", "r", list("xyz")), thread=f"good-{i}", source=f"g{i}"))
        for i in range(3)
    ]
    ordered = good[0] + after[:2] + good[1] + after[2:] + good[2]
    await publish(client, ordered, namespace=namespace)
    with caplog.at_level("WARNING", logger="agui_meta.redis.worker"):
        async with anyio.create_task_group() as tg:
            for name in ("w1", "w2"):
                worker = Worker(client, namespace=namespace, name=name, lease=2, batch=3)
                tg.start_soon(lambda w=worker: w.run(exit_when_idle=0.4))
    got = await committed(client, namespace)
    assert got["pending"] == 0
    # The other threads are done, exactly as one process does them.
    want = expected(run_local([e for g in good for e in g]))
    assert [o for o in got["outputs"] if o["thread"] != "bad"] == want["outputs"]
    assert {t: s for t, s in got["threads"].items() if t != "bad"} == want["threads"]
    # The bad thread: recorded with its key and field, reported, its entries parked in order.
    reason = json.loads(await client.hget(keys.quarantine, "bad"))
    assert reason["key"] == keys.thread("bad")
    assert reason["field"] == (field or None)
    [report] = [o for o in got["outputs"] if o["thread"] == "bad"]
    data = json.loads(report["data"])
    assert data["code"] == "thread-quarantined" and keys.thread("bad") in data["message"]
    parked = await client.xrange(keys.parked)
    assert [agui_meta.redis.Envelope.decode(f[b"e"]) for _, f in parked] == after
    assert {f[b"stream"] for _, f in parked} == {keys.shard(0).encode()}
    assert any(keys.thread("bad") in r.getMessage() for r in caplog.records)
    if field != "" and value is not None:  # the hash is left as it was found, to look at
        assert await client.hget(keys.thread("bad"), field) == value


async def test_a_thread_broken_while_a_worker_holds_it_is_quarantined_on_reload(
    client, namespace
) -> None:
    keys = Keys(namespace)
    cut = list(envelopes(_run("t", "r1", list("abcdef")), thread="t", source="s", batch=3))
    await publish(
        client,
        list(envelopes(_run("t", "r0", ["z"]), thread="t", source="s0")),
        namespace=namespace,
        shards=1,
    )
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.2)
    await publish(client, cut[:2], namespace=namespace)
    worker = Worker(client, namespace=namespace, name="holder", lease=2)
    await worker._leases()
    await worker._step()  # the run is open, its entries pending, the thread in memory
    assert worker._held[0].threads["t"].open
    await client.hset(keys.thread("t"), "v", "nine")
    await publish(client, cut[2:], namespace=namespace)
    await worker._step()  # its commit meets the broken version: it lets the shard go
    assert worker.shards == []
    await worker.run(exit_when_idle=0.3)
    assert (await committed(client, namespace))["pending"] == 0
    assert json.loads(await client.hget(keys.quarantine, "t"))["field"] == "v"
    parked = [agui_meta.redis.Envelope.decode(f[b"e"]) for _, f in await client.xrange(keys.parked)]
    assert parked == cut


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A server that takes at most 1 MiB in one argument (its least proto-max-bulk-len)."""
    srv = RedisServer(
        tmp_path_factory.mktemp("redis-small"), options=("--proto-max-bulk-len", "1mb")
    )
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
async def small(small_server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    c = redis.asyncio.Redis.from_url(small_server.url)
    yield c
    await c.aclose()


def _big_run(thread: str, run: str, parts: int, size: int = 300_000) -> list[bytes]:
    """A run whose one message is ``parts`` deltas of ``size`` characters."""
    return _run(thread, run, [chr(ord("a") + n % 26) * size for n in range(parts)])


async def test_a_batch_too_big_for_one_commit_is_committed_in_steps(small, namespace) -> None:
    # Six threads, each a 600 kB message: every entry fits, the batch (3.6 MB) does not.
    sources = [
        list(envelopes(_big_run(f"t{i}", "r", 2), thread=f"t{i}", source=f"s{i}", batch=1))
        for i in range(6)
    ]
    ordered = [e for s in sources for e in s]
    await publish(small, ordered, namespace=namespace, shards=1, pipeline=2)
    worker = Worker(small, namespace=namespace, lease=5, batch=500)
    await worker.run(exit_when_idle=0.3)
    assert worker.stats.errors == 0
    assert worker.stats.commits > 3
    got = await committed(small, namespace)
    assert got["pending"] == 0
    assert_same(got, expected(run_local(ordered)))


async def test_an_envelope_too_big_for_the_server_is_named(
    small, small_server: RedisServer, namespace
) -> None:
    cut = list(envelopes(_big_run("t", "r", 4), thread="t", source="s", batch=8))
    # The server answers "invalid bulk length", or closes the connection while it reads.
    with pytest.raises(redis.exceptions.RedisError, match="source 's', envelope 1") as info:
        await publish(small, cut, namespace=namespace, shards=1)
    assert "--batch" in str(info.value)
    again = redis.asyncio.Redis.from_url(small_server.url)  # the refused connection is gone
    assert await again.exists(Keys(namespace).shard(0)) == 0
    await again.aclose()


async def test_a_thread_whose_one_result_is_too_big_is_quarantined(small, namespace) -> None:
    huge = list(envelopes(_big_run("huge", "r", 4), thread="huge", source="h", batch=1))
    fine = list(envelopes(_run("fine", "r", ["ok"]), thread="fine", source="f"))
    await publish(small, huge[:3] + fine + huge[3:], namespace=namespace, shards=1, pipeline=1)
    worker = Worker(small, namespace=namespace, lease=5, batch=4)
    await worker.run(exit_when_idle=0.3)
    assert worker.stats.errors == 0
    got = await committed(small, namespace)
    assert got["pending"] == 0
    assert [o for o in got["outputs"] if o["thread"] == "fine"] == expected(run_local(fine))[
        "outputs"
    ]
    keys = Keys(namespace)
    reason = json.loads(await small.hget(keys.quarantine, "huge"))
    assert reason["key"] == keys.thread("huge") and "bytes, more than" in reason["error"]
    parked = [agui_meta.redis.Envelope.decode(f[b"e"]) for _, f in await small.xrange(keys.parked)]
    assert parked == huge


@pytest.mark.parametrize(
    "limit",
    [
        "proto-max-bulk-len",  # the server answers "invalid bulk length"
        "client-query-buffer-limit",  # the server closes the connection
    ],
)
def test_a_commit_the_server_refuses_for_its_size_is_an_error(
    tmp_path, capsys: pytest.CaptureFixture[str], limit: str
) -> None:
    # CONFIG is renamed away: the worker cannot learn the limit, and meets it.
    srv = RedisServer(tmp_path, options=(f"--{limit}", "1mb", "--rename-command", "CONFIG", ""))
    srv.start()
    try:
        ns = ["--redis", srv.url, "--namespace", "big"]
        stream = tmp_path / "big.jsonl"
        stream.write_bytes(b"\n".join(_big_run("t", "r", 4)) + b"\n")
        _cli(capsys, "ingest", *ns, "--thread", "t", "--batch", "1", "--pipeline", "1", str(stream))
        _, err = _cli(capsys, "worker", *ns, "--exit-when-idle", "5", "--lease", "2", status=1)
        assert err.count("\n") == 1, err
        assert "bytes to {big}:shard:" in err and "was refused" in err
        assert "proto-max-bulk-len" in err
    finally:
        srv.stop()


def test_the_worker_says_what_it_does_and_refuses_bad_numbers(
    server: RedisServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = ["--redis", server.url, "--namespace", namespace]
    for option, value in [
        ("--exit-when-idle", "nan"),
        ("--exit-when-idle", "inf"),
        ("--lease", "inf"),
        ("--lease", "nan"),
        ("--idle-timeout", "-1"),
    ]:
        _, err = _cli(capsys, "worker", *ns, option, value, status=2)
        assert err.count("\n") == 1 and option in err and "finite" in err
    travel = str(STREAMS / "travel.sse")
    _cli(capsys, "ingest", *ns, "--thread", "a", "--batch", "8", "--shards", "2", travel)
    _cli(capsys, "ingest", *ns, "--thread", "b", str(STREAMS / "support.jsonl"))
    keys = Keys(namespace)

    async def corrupt() -> None:
        c = redis.asyncio.Redis.from_url(server.url)
        await c.hset(keys.thread("b"), mapping={"v": "1", "snap": "{"})
        await c.aclose()

    anyio.run(corrupt)
    out, err = _cli(
        capsys, "worker", *ns, "--exit-when-idle", "0.3", "--lease", "2", "--verbose", "--stats"
    )
    stats = json.loads(out)
    lines = err.splitlines()
    commits = [line for line in lines if ": committed " in line]
    assert len(commits) == stats["commits"] >= 1
    assert all(line.startswith("agui-meta: ") and " shard " in line for line in commits)
    [quarantined] = [line for line in lines if "quarantined" in line]
    assert keys.thread("b") in quarantined and "'snap'" in quarantined
    [stopping] = [line for line in lines if "stopping" in line]
    assert f"{stats['commits']} commits" in stopping and "0 threads hold an open run" in stopping
    assert len(lines) == len(commits) + 2
    # Reading the broken thread is one line and exit 1; a malformed URL one line and exit 2.
    _, err = _cli(capsys, "thread", *ns, "b", status=1)
    assert err.count("\n") == 1
    _, err = _cli(capsys, "thread", "--redis", "redis://127.0.0.1:99999/0", "b", status=2)
    assert err.count("\n") == 1 and "--redis" in err
    # Without --verbose: only the warnings (none now).
    _cli(capsys, "ingest", *ns, "--thread", "a", "--source", "more", travel)
    _, err = _cli(capsys, "worker", *ns, "--exit-when-idle", "0.3", "--lease", "2")
    assert err == ""


async def test_a_worker_refuses_numbers_it_could_never_reach(client, namespace) -> None:
    for bad in (
        {"lease": float("nan")},
        {"lease": float("inf")},
        {"poll": 0.0},
        {"idle_timeout": float("nan")},
        {"max_commit": 0},
    ):
        with pytest.raises(agui_meta.UsageError):
            Worker(client, namespace=namespace, **bad)
    text_client = redis.asyncio.Redis.from_url("redis://127.0.0.1:1/0", decode_responses=True)
    with pytest.raises(agui_meta.UsageError, match="decode_responses"):
        Worker(text_client, namespace=namespace)
    await text_client.aclose()
    worker = Worker(client, namespace=namespace)
    for idle in (float("nan"), float("inf"), -1.0):
        with pytest.raises(agui_meta.UsageError, match="exit_when_idle"):
            await worker.run(exit_when_idle=idle)


@pytest.mark.parametrize("broken", ["usage-counter", "usage-key", "outputs-key", "quarantine-key"])
async def test_a_broken_namespace_key_stops_the_worker_before_it_writes(
    client, namespace, broken: str
) -> None:
    keys = Keys(namespace)
    cut = list(envelopes(_run("t", "r", ["a"]), thread="t", source="s"))
    await publish(client, cut, namespace=namespace, shards=1)
    key = {
        "usage-counter": keys.usage,
        "usage-key": keys.usage,
        "outputs-key": keys.out,
        "quarantine-key": keys.quarantine,
    }[broken]
    if broken == "usage-counter":
        await client.hset(keys.usage, "entries", "many")
    else:
        await client.set(key, "not what it should be")
    with pytest.raises(redis.exceptions.ResponseError, match=re.escape(key)):
        await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.3)
    # Nothing was written, nothing acknowledged: the entries wait for the key to be repaired.
    assert await client.exists(keys.thread("t")) == 0
    assert (await client.xpending(keys.shard(0), "agui-meta"))["pending"] == len(cut)
    await client.delete(key)
    await Worker(client, namespace=namespace, lease=2).run(exit_when_idle=0.3)
    got = await committed(client, namespace)
    assert got["pending"] == 0
    assert_same(got, expected(run_local(cut)))


async def test_a_kept_thread_moved_by_another_writer_is_loaded_again(client, namespace) -> None:
    # The worker keeps a thread between runs (its live store and the version it committed).
    # Another writer saves a new version meanwhile: the worker's next commit fails its
    # compare-and-set, the kept copy is dropped, and the run is redone on the writer's snapshot.
    first = list(envelopes(_run("t", "r1", ["a", "b"]), thread="t", source="s1"))
    await publish(client, first, namespace=namespace, shards=1)
    worker = Worker(client, namespace=namespace, name="keeper", lease=2)
    await worker._leases()
    await worker._step()
    kept = worker._held[0].threads["t"]
    assert kept.live and not kept.open and kept.stored.version == 1
    threads = RedisThreadStore(client, namespace=namespace)
    stored = await threads.load("t")
    assert stored is not None and stored.version == 1
    elsewhere = agui_meta.Store(
        [{"id": "x", "role": "user", "content": "from elsewhere"}], {"by": 2}
    )
    moved = stored.advance(elsewhere)
    await threads.save(moved)
    second = list(envelopes(_run("t", "r2", ["c"]), thread="t", source="s2"))
    await publish(client, second, namespace=namespace)
    await worker._step()  # the commit expects version 1, the thread is at 2: the shard goes
    assert worker.shards == [] and "t" not in worker._kept_in
    await worker.run(exit_when_idle=0.3)
    got = await committed(client, namespace)
    assert got["pending"] == 0
    rebuilt = _durable.ThreadState(moved)
    for n, envelope in enumerate(second, 1):
        rebuilt.apply(f"9-{n}", envelope)
    expected_snapshot = rebuilt.take().snapshot
    assert expected_snapshot is not None and expected_snapshot.version == 3
    assert got["threads"]["t"] == expected_snapshot.to_builtins()
    assert [m["id"] for m in got["threads"]["t"]["messages"]] == ["x", "r2-m"]


async def test_a_worker_keeps_at_most_its_bound_of_threads(client, namespace) -> None:
    sources = [
        list(envelopes(_run(f"t{i}", f"r{i}", ["w"]), thread=f"t{i}", source=f"s{i}"))
        for i in range(5)
    ]
    ordered = [e for source in sources for e in source]
    await publish(client, ordered, namespace=namespace, shards=2)
    worker = Worker(client, namespace=namespace, lease=2, batch=3, max_live_threads=2)
    await worker._leases()
    for _ in range(4):
        await worker._step()
    between = [s for n in worker.shards for s in worker._held[n].threads.values() if not s.open]
    assert len(between) <= 2 and len(worker._kept) <= 2
    await worker.run(exit_when_idle=0.3)
    assert_same(await committed(client, namespace), expected(run_local(ordered)))
