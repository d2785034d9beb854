"""agui_meta.redis on a real redis-server: ingest, workers, fencing, takeover, trimming, the CLI.

The server is started by the tests (``tests/redis_server.py``: 127.0.0.1, a free port, AOF on
with ``appendfsync always``, in a temporary directory); each test uses its own namespace.
redis-py's asyncio client runs on asyncio only, so these tests do too.
"""

from __future__ import annotations

import json
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
from agui_meta.redis import (
    Keys,
    RedisThreadStore,
    SequenceGap,
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
    with pytest.raises(SequenceGap, match="src-a is at 0, got 2"):
        await publish(client, cut[1:], namespace=namespace)
    assert (await publish(client, cut, namespace=namespace)).appended == len(cut)


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
    assert json.loads(out)["commits"] >= 1
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
    _, err = _cli(capsys, "thread", *ns, "nobody", status=1)
    assert "no thread 'nobody'" in err
    _, err = _cli(capsys, "usage", "--redis", "redis://127.0.0.1:1/0", status=2)
    assert "cannot reach Redis" in err
    assert err.count("\n") == 1  # one line, no traceback
