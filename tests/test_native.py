"""The C core (``agui_meta._native``) against the pure-Python implementation, its specification.

Every run here goes twice through the same chain: with the C core (``_speedups.NATIVE``, what
the driver reads when a ``Runner`` is made) and with ``NATIVE`` set to ``None``, the pure-Python
path. Every output (the update's event, the item exactly as of that update, ``done``, the
merged metadata, the event index), every report with its index, byte offset and line, the
error that ends a stream, ``messages_wire()``, the state and the ledger must be equal, on the
golden cases, generated and misordered streams, the bad-input catalogue, generated hostile
streams and every recorded stream in ``examples/streams``, each in one piece, split at every
byte position (the small ones) and in random chunks. The C core must also have run.

Skipped when the extension is deliberately off (``AGUI_META_NO_EXTENSIONS``); when it is
merely not built, skipped loudly outside CI and failed in CI (``tests/needs.py``).
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import random
import subprocess
import sys
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import MethodType
from typing import Any
from unittest import mock

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_meta
from agui_meta import _driver as driver_module
from agui_meta import _speedups, _store
from agui_meta._driver import Runner
from agui_meta._fastdecode import TYPED_DECODE, fast_decode
from agui_meta._framing import _common, _jsonl, _sse
from agui_meta._stage import CONTENT_DELTAS, Context, Transducer
from agui_meta._tally import ToolCallTally
from agui_meta._warn import ReportWarnings
from benchmarks import workload
from tests import test_fuse
from tests.helpers import random_chunks, sse
from tests.needs import native_core
from tests.strategies import cases, misordered_cases
from tests.test_durable import _typed

NATIVE = native_core()
ROOT = Path(__file__).resolve().parent.parent
STREAMS = sorted(
    p for p in (ROOT / "examples" / "streams").iterdir() if p.suffix in (".sse", ".jsonl")
)
MODES = test_fuse.MODES


class _Counting:
    """The C module, counting the driver's calls of its batch loop (in all)."""

    calls = 0

    def run_batch(self, *args: Any) -> Any:
        _Counting.calls += 1
        return NATIVE.run_batch(*args)

    def merge(self, *args: Any) -> Any:
        return NATIVE.merge(*args)


@contextmanager
def _must_run() -> Iterator[None]:
    """The C core's loop must run inside (a test that compares nothing otherwise)."""
    before = _Counting.calls
    yield
    assert _Counting.calls > before, "the C core never ran"


@contextmanager
def _core(native: bool) -> Iterator[_Counting | None]:
    """Runners made inside use the C core (``native``) or the pure-Python path (the framing of
    the common shapes and the store's wire copies included)."""
    counting = _Counting() if native else None
    sse_run = NATIVE.sse_run if native else _common.py_sse_run
    jsonl_run = NATIVE.jsonl_run if native else _common.py_jsonl_run
    with (
        mock.patch.object(_speedups, "NATIVE", counting),
        mock.patch.object(_sse, "sse_run", sse_run),
        mock.patch.object(_jsonl, "jsonl_run", jsonl_run),
        mock.patch.object(_store, "_WIRE_ITEM", NATIVE.wire_item if native else None),
    ):
        yield counting


def _both(run: Any, *args: Any, **kw: Any) -> dict[str, Any]:
    """``run`` with the C core and without: equal results, and the C core ran."""
    with _core(True):
        native: dict[str, Any] = run(*args, **kw)
    with _core(False):
        python = run(*args, **kw)
    _same(native, python)
    return native


def _same(native: dict[str, Any], python: dict[str, Any]) -> None:
    """Equal results; the stages' feeds called no more often with the core (it takes the
    default chain's events off the fast path through their handlers: _steps.h, _direct.h)."""
    if "calls" in native:
        assert native["calls"] <= python.pop("calls")
        python["calls"] = native["calls"]
    assert native == python


# -- frames (the fast-path harness of test_fuse: every chain, SSE and batches) ------------------


@pytest.mark.parametrize("mode", MODES)
def test_golden_cases(mode: str) -> None:
    with _must_run():
        for case in test_fuse._golden():
            frames = test_fuse._frames(case["events"])
            for chain in (test_fuse.DEFAULT, ("expand", "accumulate")):
                _both(
                    test_fuse._run, frames, fuse=True, mode=mode, chain=chain, case=case, sse=True
                )
            _both(test_fuse._run, frames, fuse=True, mode=mode, case=case, batch=True)


@pytest.mark.parametrize("chain", test_fuse.CHAINS[1:], ids="-".join)
def test_every_chain_on_a_generated_workload(chain: tuple[str, ...]) -> None:
    with _must_run():
        frames = workload.frames(600, seed=11, chunked=True, history=5)
        _both(test_fuse._run, frames, fuse=True, chain=chain, sse=True)


@pytest.mark.parametrize("chunked", [False, True])
def test_generated_workloads(chunked: bool) -> None:
    with _must_run():
        frames = workload.frames(3000, seed=7, chunked=chunked, history=20)
        result = _both(test_fuse._run, frames, fuse=True, sse=True)
        assert result["error"] is None and result["messages"]


SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(
    case=cases() | misordered_cases(),
    mode=st.sampled_from(MODES),
    chain=st.sampled_from(test_fuse.CHAINS[1:]),
    batch=st.booleans(),
)
def test_generated_streams(
    case: dict[str, Any], mode: str, chain: tuple[str, ...], batch: bool
) -> None:
    frames = test_fuse._frames(case["events"])
    kw: dict[str, Any] = {"batch": True} if batch else {"sse": True}
    with _core(True):
        native = test_fuse._run(frames, fuse=True, mode=mode, case=case, chain=chain, **kw)
    with _core(False):
        python = test_fuse._run(frames, fuse=True, mode=mode, case=case, chain=chain, **kw)
    _same(native, python)


# -- byte streams: the framer's runs, offsets and lines, any chunking ---------------------------


def _run_bytes(chunks: list[bytes], framing: str, mode: str) -> dict[str, Any]:
    """The chunks through the default chain from bytes: everything observable about it."""
    minted = (uuid.UUID(int=n) for n in itertools.count())
    reports: list[str] = []
    store = agui_meta.Store()
    ledger: Any = agui_meta.Ledger(clock=lambda: 0.0)
    record = test_fuse._Record()
    ctx = Context(mode, lambda r: reports.append(repr(r)))  # type: ignore[arg-type]
    stages: list[Transducer[Any, Any]] = [
        agui_meta.Enforce(),
        agui_meta.ExpandChunks(),
        agui_meta.Verify(),
        agui_meta.Accumulate(store),
        ledger,
        record,
    ]
    error = None
    with mock.patch.object(uuid, "uuid4", minted.__next__):
        runner = Runner(stages, ctx, framing=framing)
        try:
            for chunk in chunks:
                runner.feed(chunk)
            runner.close()
        except agui_meta.AguiMetaError as exc:
            where = tuple(getattr(exc, name, None) for name in ("index", "offset", "line"))
            error = (type(exc).__name__, str(exc), where, ctx.index)
    return {
        "outputs": record.seen,
        "reports": reports,
        "error": error,
        "messages": store.messages_wire(),
        "state": store.state,
        "ledger": ledger.to_builtins(),
    }


def _splits(data: bytes, every: int = 1) -> Iterator[list[bytes]]:
    """The stream in two pieces, cut at every ``every``-th byte position."""
    for cut in range(0, len(data) + 1, every):
        yield [data[:cut], data[cut:]]


def _compare(chunks: list[bytes], framing: str, mode: str) -> None:
    with _core(True):
        native = _run_bytes(chunks, framing, mode)
    with _core(False):
        python = _run_bytes(chunks, framing, mode)
    assert native == python, (framing, mode, [len(c) for c in chunks])


def test_deltas_to_an_activity_message_id_are_refused_alike() -> None:
    # Text deltas for an activity message's id (one that never streamed, one that streamed
    # before a snapshot replaced it), with verify in the chain and without: the same
    # refusals, with the core and without.
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "card", "content": {}},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "y"},
        {"type": "TEXT_MESSAGE_START", "messageId": "b", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "b", "delta": "x"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "b", "activityType": "card", "content": {}},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "b", "delta": "y"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "z", "metadata": {"k": 1}},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    data = sse(events)

    def accumulate_only(mode: str) -> dict[str, Any]:  # no verify to stop the delta first
        store = agui_meta.Store()
        record = test_fuse._Record()
        reports: list[str] = []
        ctx = Context(mode, lambda r: reports.append(repr(r)))  # type: ignore[arg-type]
        runner = Runner([agui_meta.Accumulate(store), record], ctx, framing="sse")
        try:
            runner.feed(data)
            runner.close()
        except agui_meta.AguiMetaError as exc:
            reports.append(f"raised {exc!r}")
        return {"outputs": record.seen, "reports": reports, "messages": store.messages_wire()}

    with _must_run():
        for mode in MODES:
            result = _both(_run_bytes, [data], "sse", mode)
            assert result["reports"] or result["error"]
            result = _both(accumulate_only, mode)
            assert result["reports"], mode


# -- steps: the default chain's stages in the core (_steps.h) --------------------------------


class _Refuse(Transducer[Any, Any]):
    """After the ledger: refuses the Update of one step by name (a downstream stage's error)."""

    def __init__(self, name: str | None) -> None:
        self.name = name

    def feed(self, item: Any) -> None:
        if self.name is not None and getattr(item.event, "step_name", None) == self.name:
            raise agui_meta.VerifyError(f"refused {self.name}", rule="test.refused")
        self.emit(item)


def _steps_run(
    data: bytes,
    mode: str,
    expand: bool,
    max_open: int | None,
    max_entries: int | None,
    refuse: str | None,
    evict: bool = False,
) -> dict[str, Any]:
    reports: list[str] = []
    store = agui_meta.Store(evict_completed=evict)
    ledger: Any = agui_meta.Ledger(clock=lambda: 0.5, max_entries=max_entries)
    calls = [0]
    stages: list[Transducer[Any, Any]] = [
        *([agui_meta.ExpandChunks()] if expand else []),
        agui_meta.Verify(max_open_items=max_open),
        agui_meta.Accumulate(store),
        ledger,
    ]
    for stage in stages:
        stage.feed = test_fuse._counting(stage.feed, calls)  # type: ignore[method-assign,assignment]
    record = test_fuse._Record()
    ctx = Context(mode, lambda r: reports.append(repr(r)))  # type: ignore[arg-type]
    runner = Runner([agui_meta.Enforce(), *stages, _Refuse(refuse), record], ctx, framing="sse")
    error = None
    try:
        for i in range(0, len(data), 700):
            runner.feed(data[i : i + 700])
        runner.close()
    except agui_meta.AguiMetaError as exc:
        error = (type(exc).__name__, str(exc), ctx.index)
    return {
        "outputs": record.seen,
        "reports": reports,
        "error": error,
        "messages": store.messages_wire(),
        "ledger": ledger.to_builtins(),
        "latest": ledger._latest,
        "open": (sorted(map(str, stages[-3]._steps.items())), stages[-3]._open_steps),  # type: ignore[attr-defined]
        "verify": repr(stages[-3].open_items()),  # type: ignore[attr-defined]
        # which messages still stream (what Store.evict_idle() leaves)
        "streaming": [(m.id, m._streaming) for m in store.messages()],
        "calls": calls[0],
    }


_step = st.fixed_dictionaries(
    {"type": st.sampled_from(["STEP_STARTED", "STEP_FINISHED"]), "stepName": st.sampled_from("ab")},
    optional={
        "subagentRunId": st.just("s"),
        "timestamp": st.integers(0, 9),
        "metadata": st.dictionaries(st.sampled_from("kl"), st.integers(0, 3), max_size=2),
    },
)
_other = st.sampled_from(
    [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "x"},
        {"type": "TEXT_MESSAGE_START", "messageId": "n"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "n", "delta": "x"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "n", "delta": "y", "metadata": {"k": 1}},
        {"type": "TEXT_MESSAGE_END", "messageId": "n"},
        {"type": "TEXT_MESSAGE_END", "messageId": "n", "metadata": {"k": 2, "u": {"t": [1]}}},
        {"type": "TEXT_MESSAGE_END", "messageId": "n", "subagentRunId": "s"},
        {"type": "REASONING_MESSAGE_START", "messageId": "r"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "z"},
        {"type": "REASONING_MESSAGE_END", "messageId": "r", "metadata": {}},
        {"type": "REASONING_MESSAGE_END", "messageId": "n"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "n", "activityType": "a", "content": {}},
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "n", "role": "assistant"}]},
        {"type": "RUN_ERROR", "message": "e"},
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.one_of(_step, _step, _other), max_size=30),
    st.sampled_from(MODES),
    st.booleans(),
    st.sampled_from([None, 1, 2, 10]),
    st.sampled_from([None, 0, 1, 3]),
    st.sampled_from([None, "a"]),
    st.booleans(),
)
def test_steps_and_message_ends_in_the_core_equal_the_stages(
    events: list[dict[str, Any]],
    mode: str,
    expand: bool,
    max_open: int | None,
    max_entries: int | None,
    refuse: str | None,
    evict: bool,
) -> None:
    head = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in head + events)
    with _must_run():
        _both(_steps_run, data, mode, expand, max_open, max_entries, refuse, evict)


def test_a_run_error_evicts_idle_messages_with_the_core_too() -> None:
    # A store that evicts: RUN_ERROR makes accumulate evict the idle messages, which its
    # handler alone does not do, so the core routes none of an evicting chain's events there.
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "h", "role": "user", "content": "q"}]},
        {"type": "TEXT_MESSAGE_START", "messageId": "n"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "n", "delta": "x"},
        {"type": "STEP_STARTED", "stepName": "a"},
        {"type": "RUN_ERROR", "message": "e"},
    ]
    data = sse(events)
    with _must_run():
        for mode in MODES:
            _both(_steps_run, data, mode, True, None, None, None, True)


def test_events_off_the_fast_path_skip_the_stages_feeds() -> None:
    # The generated workload's events off the fast path take the core's routes: the stages'
    # feeds are called for those the routes leave (the first event, before the ledger has
    # seen an update), and everything else is the same.
    frames = workload.frames(600, seed=3)
    data = b"".join(b"data: " + f + b"\n\n" for f in frames)
    runs = sum(b'"RUN_STARTED"' in f for f in frames)
    steps = sum(b'"STEP_' in f for f in frames)
    assert steps >= 20 and runs >= 4
    with _core(True):
        native = _steps_run(data, "default", True, 10_000, 10_000, None)
    with _core(False):
        python = _steps_run(data, "default", True, 10_000, 10_000, None)
    native_calls, python_calls = native.pop("calls"), python.pop("calls")
    assert native == python
    assert native_calls <= 4 * 2 < python_calls // 4, (native_calls, python_calls)


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.name)
def test_every_recorded_stream(path: Path) -> None:
    with _must_run():
        data = path.read_bytes()
        framing = path.suffix.lstrip(".")
        for mode in MODES:
            result = _both(_run_bytes, [data], framing, mode)
            assert result["outputs"] or result["error"]
        # Split at every byte position (every 7th for the larger ones), and in random chunks.
        for chunks in _splits(data, 1 if len(data) <= 2048 else 29):
            _compare(chunks, framing, "keep_going")
        for seed in range(20):
            _compare(random_chunks(data, seed), framing, MODES[seed % 3])


def _catalogue() -> list[Any]:
    from tests import test_bad_input

    return [row.values[0] for row in test_bad_input.CATALOGUE]


@pytest.mark.parametrize("framing", ["sse", "jsonl"])
def test_the_bad_input_catalogue(framing: str) -> None:
    with _must_run():
        from tests.test_bad_input import render

        for case in _catalogue():
            data, _ = render(case.entries, framing)  # type: ignore[arg-type]
            for mode in MODES:
                _both(_run_bytes, [data], framing, mode)
            # Cut at 60 places spread over the stream (every byte of the small ones).
            for chunks in _splits(data, max(1, len(data) // 60)):
                _compare(chunks, framing, "keep_going")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), st.sampled_from(MODES), st.integers(0, 2**16))
def test_generated_hostile_streams(data: st.DataObject, mode: str, seed: int) -> None:
    from tests.test_hostile import encode_sse, hostile_streams

    stream = encode_sse(data.draw(hostile_streams()))
    if stream is None:
        return
    _compare([stream], "sse", mode)
    _compare(random_chunks(stream, seed), "sse", mode)


# -- the metadata merge of content deltas, in the core ------------------------------------------


def _delta_stream(seed: int) -> bytes:
    """A run of text, reasoning and tool-call deltas, one in two with metadata: new keys,
    rewritten keys, nulls, containers, ``{}``; a history message with dict metadata."""
    rng = random.Random(seed)
    values = [1, None, "s", {"in": [1, {"x": 2}]}, [1, [2]], True, 2.5, {}]
    keys = ["acme.a", "acme.b", "ag-ui", "k", "acme.c"]
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "REASONING_MESSAGE_START", "messageId": "z", "role": "reasoning"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "metadata": {"s": 1}},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "h", "delta": "on the history's"},
    ]
    for n in range(120):
        kind = rng.choice(["TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "TOOL_CALL_ARGS"])
        event: dict[str, Any] = {"type": kind, "delta": f"d{n}"}
        if kind == "TOOL_CALL_ARGS":
            event["toolCallId"] = "c"
        else:
            event["messageId"] = "m" if kind == "TEXT_MESSAGE_CONTENT" else "z"
        if rng.random() < 0.1:
            event["messageId" if "messageId" in event else "toolCallId"] = "h"
        if rng.random() < 0.5:
            size = rng.choice([0, 1, 1, 2, 3])
            event["metadata"] = {rng.choice(keys): rng.choice(values) for _ in range(size)}
        events.append(event)
    events += [
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"end": 1}},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    return sse(events)


def _writes_of(metadata: Any) -> Any:
    """A MergedMetadata's whole record (every key's writes, their order, the versions)."""
    if type(metadata) is not agui_meta.MergedMetadata:
        return metadata
    writes = metadata._writes
    return (len(metadata), metadata._version, writes.version, list(writes), dict(writes))


def _held_updates(data: bytes, chunk: int) -> dict[str, Any]:
    """The default chain from bytes; every update held to the end, then its metadata read."""
    store = agui_meta.Store([{"id": "h", "role": "assistant", "content": "", "metadata": {"h": 1}}])
    ledger: Any = agui_meta.Ledger(clock=lambda: 0.0)
    stages = [agui_meta.Enforce(), *agui_meta.DefaultStages(store), ledger]
    runner = Runner(stages, Context("keep_going", lambda r: None), framing="sse")
    for at in range(0, len(data), chunk):
        runner.feed(data[at : at + chunk])
    runner.close()
    updates = runner.take()
    # The events' metadata mutated after the fact must not reach what was merged.
    for update in updates:
        if isinstance(update.event.metadata, dict):
            for value in update.event.metadata.values():
                if isinstance(value, dict):
                    value["mutated"] = True
                elif isinstance(value, list):
                    value.append("mutated")
    items = [store.message("m"), store.message("z"), store.message("h"), store.tool_call("c")]
    return {
        "updates": [
            (type(u.metadata).__name__, None if u.metadata is None else dict(u.metadata))
            for u in updates
        ],
        "items": [_writes_of(item.metadata) for item in items if item is not None],
        "messages": store.messages_wire(),
        "ledger": ledger.to_builtins(),
    }


@pytest.mark.parametrize("seed", range(6))
def test_metadata_merges_of_deltas_equal_the_python_merge(seed: int) -> None:
    data = _delta_stream(seed)
    with _must_run():
        for chunk in (len(data), 1000, 97):
            result = _both(_held_updates, data, chunk)
            assert any(name == "MergedMetadata" for name, _ in result["updates"])


def test_a_delta_merges_into_an_older_version_the_python_way() -> None:
    # An item whose metadata is not the newest version of its record (set by hand, as a
    # store's own code may): the merge starts a new record, in Python, on both paths.
    def run() -> dict[str, Any]:
        store = agui_meta.Store()
        accumulate = agui_meta.Accumulate(store)
        runner = Runner([agui_meta.Enforce(), accumulate], Context(), framing="jsonl")
        runner.feed(b'{"type":"TEXT_MESSAGE_START","messageId":"m","metadata":{"a":1}}\n')
        item = store.message("m")
        assert item is not None
        old = item.metadata
        runner.feed(
            b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","metadata":{"a":2}}\n'
        )
        item.metadata = old
        runner.feed(
            b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"y","metadata":{"b":3}}\n'
        )
        runner.close()
        return {
            "updates": [dict(u.metadata) for u in runner.take()],
            "old": dict(old),
            "item": _writes_of(item.metadata),
        }

    with _must_run():
        result = _both(run)
    assert result["updates"] == [{"a": 1}, {"a": 2}, {"a": 1, "b": 3}]


def _default_chain(
    data: bytes, chunk: int, defaults: Any, also: Callable[[Any], None] | None = None
) -> tuple[list[Any], list[str]]:
    """``defaults`` (a DefaultStages: the core's routes) behind Enforce, from SSE bytes in
    reads of ``chunk``, keep-going: each update's event type, item as of the read that made
    it, and done; every report (each also given to ``also``)."""
    reports: list[str] = []

    def report(r: Any) -> None:
        reports.append(repr(r))
        if also is not None:
            also(r)

    runner = Runner([agui_meta.Enforce(), *defaults], Context("keep_going", report), framing="sse")
    items = []
    for at in range(0, len(data), chunk):
        runner.feed(data[at : at + chunk])
        items += [
            (u.event.type, None if u.item is None else u.item.to_wire(), u.done)
            for u in runner.take()
        ]
    runner.close()
    return items, reports


# -- TOOL_CALL_END in the core (_ends.h) ---------------------------------------------------------


def _tool_stream(seed: int) -> bytes:
    """Tool calls started, streamed and ended in any order, several under one parent: ends
    with and without metadata (containers too), of calls never started, ended twice, tagged
    with a subagent, and of a history's call; a restarted call."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    open_ids: list[str] = []
    for n in range(60):
        roll = rng.random()
        if roll < 0.3 or not open_ids:
            call = f"c{n}"
            start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call}
            start["toolCallName"] = "f"
            if rng.random() < 0.6:
                start["parentMessageId"] = rng.choice(["p1", "p2"])
            if rng.random() < 0.3:
                start["metadata"] = {"s": n}
            events.append(start)
            open_ids.append(call)
        elif roll < 0.6:
            events.append(
                {"type": "TOOL_CALL_ARGS", "toolCallId": rng.choice(open_ids), "delta": f"{n},"}
            )
        else:
            call = rng.choice([*open_ids, "nope", "h"])
            end: dict[str, Any] = {"type": "TOOL_CALL_END", "toolCallId": call}
            if rng.random() < 0.5:
                end["metadata"] = rng.choice([{"e": n}, {"u": {"in": [n]}}, {}, {"s": None}])
            if rng.random() < 0.05:
                end["subagentRunId"] = "sub"
            events.append(end)
            if call in open_ids and rng.random() < 0.9:
                open_ids.remove(call)
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return sse(events)


def _tool_ends(data: bytes, chunk: int) -> dict[str, Any]:
    """The default chain from bytes, a history with a call; every update held to the end."""
    history = [
        {
            "id": "p1",
            "role": "assistant",
            "toolCalls": [
                {"id": "h", "type": "function", "function": {"name": "g", "arguments": {"a": 1}}}
            ],
        }
    ]
    store = agui_meta.Store(history)
    defaults: Any = agui_meta.DefaultStages(store)  # the default chain: the core's routes
    ledger = defaults.ledger
    ledger._clock = lambda: 0.0
    reports: list[str] = []
    runner = Runner(
        [agui_meta.Enforce(), *defaults],
        Context("keep_going", lambda r: reports.append(repr(r))),
        framing="sse",
    )
    for at in range(0, len(data), chunk):
        runner.feed(data[at : at + chunk])
    runner.close()
    updates = runner.take()
    calls = [store.tool_call(f"c{n}") for n in range(60)] + [store.tool_call("h")]
    return {
        "updates": [
            (u.event.type, u.done, None if u.metadata is None else dict(u.metadata))
            for u in updates
        ],
        "calls": [
            (c.arguments, c.streaming, _writes_of(c.metadata), c.owner.id, c.owner._open_calls)
            for c in calls
            if c is not None
        ],
        "messages": store.messages_wire(),
        "ledger": ledger.to_builtins(),
        "reports": reports,
    }


@pytest.mark.parametrize("seed", range(8))
def test_tool_call_ends_in_the_core_equal_the_python_path(seed: int) -> None:
    data = _tool_stream(seed)
    with _must_run():
        for chunk in (len(data), 997, 61):
            result = _both(_tool_ends, data, chunk)
            assert any(kind == "TOOL_CALL_END" for kind, _, _ in result["updates"])


def test_a_tool_call_end_is_done_in_the_core() -> None:
    # The verifier's check of a call's END and the ledger's reading of the store's call are
    # not called: the core did what they do.
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TOOL_CALL_START", "toolCallId": "c0", "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c0", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c0", "metadata": {"k": 1}},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    data = sse(events)
    seen: list[str] = []
    check = agui_meta.Verify._tool_call_continue

    def counted(self: Any, event: Any) -> None:
        seen.append(event.type)
        check(self, event)

    synced: list[str] = []
    sync = agui_meta.Ledger._sync

    def counted_sync(tool: Any, live: Any) -> None:
        synced.append(tool.tool_call_id)
        sync(tool, live)

    with (
        mock.patch.object(agui_meta.Verify, "_tool_call_continue", counted),
        mock.patch.object(agui_meta.Ledger, "_sync", staticmethod(counted_sync)),
    ):
        with _core(True):
            native = _tool_ends(data, len(data))
        assert seen == [] and synced == []  # the verifier's and the ledger's, in the core
        with _core(False):
            python = _tool_ends(data, len(data))
        assert seen == ["TOOL_CALL_END"] and synced == ["c0"]
    assert native == python
    # The call ended: its arguments joined, closed, its owner (a message made for it: no
    # parent named) with no call open.
    assert native["calls"][0][:2] + native["calls"][0][3:] == ("{}", False, "c0", 0)


# -- TEXT_MESSAGE_START and REASONING_MESSAGE_START in the core (_starts.h) ----------------------


def _start_stream(seed: int) -> bytes:
    """Text and reasoning messages started (named or not, with a role or without, metadata
    with containers, tagged with a subagent), streamed and ended; starts of an id open
    already, of a message the store holds (reopened), of an activity message's id and of a
    history's message."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "act", "activityType": "x", "content": {}},
    ]
    open_ids: list[tuple[str, str]] = []
    for n in range(70):
        roll = rng.random()
        if roll < 0.35 or not open_ids:
            reasoning = rng.random() < 0.3
            mid = rng.choice([f"m{n}", f"m{n}", f"m{n}", "hist", "act", f"m{max(n - 3, 0)}"])
            start: dict[str, Any] = {
                "type": "REASONING_MESSAGE_START" if reasoning else "TEXT_MESSAGE_START",
                "messageId": mid,
            }
            if reasoning:
                start["role"] = "reasoning"
            elif rng.random() < 0.7:
                start["role"] = rng.choice(["assistant", "user", "system"])
            if not reasoning and rng.random() < 0.3:
                start["name"] = rng.choice(["bot", "helper"])
            if rng.random() < 0.5:
                start["metadata"] = rng.choice([{"k": n}, {"u": {"in": [n]}}, {}])
            if rng.random() < 0.05:
                start["subagentRunId"] = "sub"
            events.append(start)
            open_ids.append((mid, "REASONING" if reasoning else "TEXT"))
        elif roll < 0.75:
            mid, kind = rng.choice(open_ids)
            events.append({"type": f"{kind}_MESSAGE_CONTENT", "messageId": mid, "delta": "d"})
        else:
            mid, kind = rng.choice(open_ids)
            events.append({"type": f"{kind}_MESSAGE_END", "messageId": mid})
            open_ids.remove((mid, kind))
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return sse(events)


def _starts(data: bytes, chunk: int, max_open: int | None, max_closed: int | None) -> Any:
    """The default chain from bytes over a history; every update's item as of its event."""
    store = agui_meta.Store([{"id": "hist", "role": "assistant", "content": "h"}])
    defaults: Any = agui_meta.DefaultStages(
        store, verify=agui_meta.Verify(max_open_items=max_open, max_closed_ids=max_closed)
    )
    defaults.ledger._clock = lambda: 0.0
    items, reports = _default_chain(data, chunk, defaults)
    verify = defaults.verify
    return {
        "items": items,
        "messages": store.messages_wire(),
        "ledger": defaults.ledger.to_builtins(),
        "reports": reports,
        "owners": (list(verify._message_owners.items()), list(verify._reasoning_owners.items())),
        "open": repr(verify.open_items()),
    }


@pytest.mark.parametrize("seed", range(8))
def test_message_starts_in_the_core_equal_the_python_path(seed: int) -> None:
    data = _start_stream(seed)
    with _must_run():
        for chunk, max_open, max_closed in (
            (len(data), None, 10_000),
            (613, 3, 10_000),  # no room: the verifier's error
            (131, None, 4),  # owners forgotten: the Python way
        ):
            result = _both(_starts, data, chunk, max_open, max_closed)
            assert any(kind.endswith("_MESSAGE_START") for kind, _, _ in result["items"])


def test_a_message_start_is_done_in_the_core() -> None:
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "name": "bot", "metadata": {"k": 1}},
        {"type": "REASONING_MESSAGE_START", "messageId": "z", "role": "reasoning"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    data = sse(events)
    seen: list[str] = []
    room = agui_meta.Verify._room

    def counted(self: Any, kind: str, entity: str, entity_id: str) -> None:
        seen.append(kind)
        room(self, kind, entity, entity_id)

    with mock.patch.object(agui_meta.Verify, "_room", counted):
        with _core(True):
            native = _starts(data, len(data), None, 10_000)
        assert seen == []  # the verifier's handlers were not called
        with _core(False):
            python = _starts(data, len(data), None, 10_000)
        assert seen == ["TEXT_MESSAGE_START", "REASONING_MESSAGE_START"]
    assert native == python
    assert native["messages"][1:] == [
        {"id": "m", "role": "assistant", "content": "", "name": "bot", "metadata": {"k": 1}},
        {"id": "z", "role": "reasoning", "content": ""},
    ]


# -- TOOL_CALL_RESULT in the core (_results.h) ---------------------------------------------------


def _result_stream(seed: int) -> bytes:
    """Tool calls and their results: results of calls started, of unknown calls, twice for
    one call, with content parts, with a role or without, with metadata, tagged with a
    subagent, reusing a message id."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    calls: list[str] = []
    for n in range(50):
        if rng.random() < 0.4 or not calls:
            call = f"c{n}"
            events += [
                {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "f"},
                {"type": "TOOL_CALL_END", "toolCallId": call},
            ]
            calls.append(call)
            continue
        result: dict[str, Any] = {
            "type": "TOOL_CALL_RESULT",
            "messageId": rng.choice([f"r{n}", f"r{n}", f"r{n}", "r0"]),
            "toolCallId": rng.choice([*calls, "nope"]),
            "content": rng.choice(["ok", "", [{"type": "text", "text": "part"}]]),
        }
        if rng.random() < 0.5:
            result["role"] = "tool"
        if rng.random() < 0.4:
            result["metadata"] = rng.choice([{"k": n}, {"u": {"in": [n]}}, {}])
        if rng.random() < 0.05:
            result["subagentRunId"] = "sub"
        events.append(result)
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return sse(events)


def _results(data: bytes, chunk: int, max_closed: int | None, max_ids: int | None) -> Any:
    """The default chain from bytes; every update's item as of its event."""
    store = agui_meta.Store(max_tool_call_ids=max_ids)
    defaults: Any = agui_meta.DefaultStages(
        store, verify=agui_meta.Verify(max_closed_ids=max_closed)
    )
    defaults.ledger._clock = lambda: 0.0
    items, reports = _default_chain(data, chunk, defaults)
    return {
        "items": items,
        "messages": store.messages_wire(),
        "ledger": defaults.ledger.to_builtins(),
        "reports": reports,
        "owners": list(defaults.verify._message_owners.items()),
    }


@pytest.mark.parametrize("seed", range(8))
def test_tool_call_results_in_the_core_equal_the_python_path(seed: int) -> None:
    data = _result_stream(seed)
    with _must_run():
        for chunk, max_closed, max_ids in (
            (len(data), 10_000, 10_000),
            (577, 5, 10_000),  # owners forgotten: the Python way
            (89, 10_000, 3),  # the store's tally forgets answered calls: reported
        ):
            result = _both(_results, data, chunk, max_closed, max_ids)
            assert any(kind == "TOOL_CALL_RESULT" for kind, _, _ in result["items"])


def test_a_tool_call_result_is_done_in_the_core() -> None:
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "c", "content": "ok"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    data = sse(events)
    seen: list[str] = []
    record = agui_meta.Verify._record

    def counted(self: Any, table: Any, key: str, owner: Any) -> None:
        seen.append(key)
        record(self, table, key, owner)

    timed: list[str] = []
    time = agui_meta.Ledger._time

    def counted_time(self: Any, event: Any) -> Any:
        timed.append(event.type)
        return time(self, event)

    with (
        mock.patch.object(agui_meta.Verify, "_record", counted),
        mock.patch.object(agui_meta.Ledger, "_time", counted_time),
    ):
        with _core(True):
            native = _results(data, len(data), 10_000, 10_000)
        # The verifier's and the ledger's handlers were not called (the ledger's records of a
        # call's start, end and result are the core's).
        assert "r" not in seen and timed == ["RUN_STARTED", "RUN_FINISHED"]
        with _core(False):
            python = _results(data, len(data), 10_000, 10_000)
        assert "r" in seen and "TOOL_CALL_RESULT" in timed
    assert native == python
    assert native["messages"][-1] == {"id": "r", "role": "tool", "content": "ok", "toolCallId": "c"}


# -- TOOL_CALL_START in the core (_starts.h) -----------------------------------------------------


def _tool_start_stream(seed: int) -> bytes:
    """Tool calls started under an assistant message, a user message, a message not there, no
    parent, a history's message and call; replayed starts, starts of calls open already,
    renamed, with metadata, tagged with a subagent; ends and results between."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "u1", "role": "user"},
        {"type": "TEXT_MESSAGE_END", "messageId": "u1"},
    ]
    open_ids: list[str] = []
    for n in range(60):
        if rng.random() < 0.55 or not open_ids:
            call = rng.choice([f"c{n}", f"c{n}", f"c{n}", f"c{max(n - 4, 0)}", "h"])
            start: dict[str, Any] = {
                "type": "TOOL_CALL_START",
                "toolCallId": call,
                "toolCallName": rng.choice(["f", "f", "g"]),
            }
            parent = rng.choice([None, "a1", "u1", f"p{n}", "hist", "p0", ""])
            if parent is not None:
                start["parentMessageId"] = parent
            if rng.random() < 0.3:
                start["metadata"] = rng.choice([{"k": n}, {"u": {"in": [n]}}, {}])
            if rng.random() < 0.05:
                start["subagentRunId"] = "sub"
            events.append(start)
            open_ids.append(call)
        else:
            call = rng.choice(open_ids)
            events.append({"type": "TOOL_CALL_END", "toolCallId": call})
            open_ids.remove(call)
            if rng.random() < 0.5:
                events.append(
                    {"type": "TOOL_CALL_RESULT", "messageId": f"r{n}", "toolCallId": call,
                     "content": "ok"}
                )  # fmt: skip
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return sse(events)


def _tool_starts(
    data: bytes,
    chunk: int,
    max_closed: int | None,
    max_ids: int | None,
    meddle: bool = False,
    max_entries: int | None = None,
) -> Any:
    """The default chain from bytes over a history with a call; every update's item as of its
    event. ``meddle``: a report of a full tally adds the call to the store behind the stages'
    backs (what the core checked before the tally's part no longer holds)."""
    history = [
        {"id": "hist", "role": "assistant", "content": "",
         "toolCalls": [{"id": "h", "type": "function", "function": {"name": "f", "arguments": ""}}]},
    ]  # fmt: skip
    store = agui_meta.Store(history, max_tool_call_ids=max_ids)
    defaults: Any = agui_meta.DefaultStages(
        store,
        verify=agui_meta.Verify(max_closed_ids=max_closed),
        ledger=agui_meta.Ledger(max_entries=max_entries, clock=lambda: 0.0),
    )

    def meddling(r: Any) -> None:
        if meddle and r.code == "tool-call-tally-full":
            call_id = r.message.split("'")[1]
            if store.tool_call(call_id) is None:
                owner = agui_meta.MessageItem(f"meddled-{call_id}", "assistant")
                owner.tool_calls = []
                store.append(owner)
                store.add_tool_call(owner, agui_meta.ToolCallItem(call_id, "meddled", owner))

    items, reports = _default_chain(data, chunk, defaults, meddling)
    verify = defaults.verify
    return {
        "items": items,
        "messages": store.messages_wire(),
        "open": [(m.id, m._open_calls) for m in store.messages()],
        "ledger": defaults.ledger.to_builtins(),
        "reports": reports,
        "owners": (list(verify._tool_call_owners.items()), list(verify._message_owners.items())),
    }


@pytest.mark.parametrize("seed", range(8))
def test_tool_call_starts_in_the_core_equal_the_python_path(seed: int) -> None:
    data = _tool_start_stream(seed)
    with _must_run():
        for chunk, max_closed, max_ids, meddle, entries in (
            (len(data), 10_000, 10_000, False, None),
            (541, 3, 10_000, False, None),  # owners forgotten: the Python way, parents' lost
            (97, 10_000, 2, False, 5),  # full tallies (reported; dropped entries), full lists
            (len(data), 10_000, 2, True, None),  # a store changed by a report: _start_call's
        ):
            result = _both(_tool_starts, data, chunk, max_closed, max_ids, meddle, entries)
            assert any(kind == "TOOL_CALL_START" for kind, _, _ in result["items"])


def test_a_tool_call_start_is_done_in_the_core() -> None:
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "metadata": {"k": 1}},
        {"type": "TOOL_CALL_START", "toolCallId": "d", "toolCallName": "g",
         "parentMessageId": "c"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]  # fmt: skip
    data = sse(events)
    seen: list[str] = []
    record = agui_meta.Verify._record

    def counted(self: Any, table: Any, key: str, owner: Any) -> None:
        seen.append(key)
        record(self, table, key, owner)

    started: list[str] = []
    tool_started = agui_meta.Ledger._tool_started

    def counted_start(self: Any, record: Any, call_id: str, event: Any) -> Any:
        started.append(call_id)
        return tool_started(self, record, call_id, event)

    with (
        mock.patch.object(agui_meta.Verify, "_record", counted),
        mock.patch.object(agui_meta.Ledger, "_tool_started", counted_start),
    ):
        with _core(True):
            native = _tool_starts(data, len(data), 10_000, 10_000)
        assert seen == [] and started == []  # the verifier's and the ledger's, in the core
        with _core(False):
            python = _tool_starts(data, len(data), 10_000, 10_000)
        assert seen == ["c", "d"] and started == ["c", "d"]
    assert native == python
    # Both calls in one assistant message made for the first (named by its call's id).
    assert native["messages"][-1]["id"] == "c"
    assert [call["id"] for call in native["messages"][-1]["toolCalls"]] == ["c", "d"]
    assert native["open"][-1] == ("c", 2)


# -- ACTIVITY_DELTA in the core (_activity.h) ----------------------------------------------------


def _activity_stream(seed: int) -> bytes:
    """Activity messages snapshotted, then patched: replaces and adds of scalars (the core's),
    and removes, moves, tests, array inserts, containers, escaped keys, failing paths (the
    Python patcher's); deltas of missing and non-activity messages, with metadata, tagged; a
    message snapshot holding an activity twice."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "text", "role": "assistant"},
        {"type": "TEXT_MESSAGE_END", "messageId": "text"},
    ]
    ops = [
        {"op": "replace", "path": "/steps/0/status", "value": "done"},
        {"op": "replace", "path": "/steps/1/status", "value": 2},
        {"op": "add", "path": "/note", "value": None},
        {"op": "add", "path": "/steps/0/at", "value": True},
        {"op": "replace", "path": "/title", "value": "t"},
        {"op": "remove", "path": "/note"},
        {"op": "add", "path": "/steps/-", "value": {"status": "new"}},
        {"op": "replace", "path": "/steps/0", "value": {"status": "x"}},
        {"op": "test", "path": "/title", "value": "t"},
        {"op": "move", "from": "/title", "path": "/moved"},
        {"op": "replace", "path": "/missing/x", "value": 1},
        {"op": "add", "path": "/a~1b", "value": 1},
        {"op": "replace", "path": "/steps/9/status", "value": 1},
    ]
    for n in range(60):
        roll = rng.random()
        if roll < 0.15 or n == 0:
            mid = rng.choice(["act1", "act2"])
            events.append(
                {"type": "ACTIVITY_SNAPSHOT", "messageId": mid, "activityType": "plan",
                 "content": {"title": "p", "steps": [{"status": "a"}, {"status": "b"}]}}
            )  # fmt: skip
        elif roll < 0.18:
            events.append(
                {"type": "MESSAGES_SNAPSHOT", "messages": [
                    {"id": "act1", "role": "activity", "activityType": "plan", "content": {}},
                    {"id": "act1", "role": "activity", "activityType": "plan", "content": {}},
                ]}
            )  # fmt: skip
        else:
            delta: dict[str, Any] = {
                "type": "ACTIVITY_DELTA",
                "messageId": rng.choice(["act1", "act1", "act2", "act2", "text", "nope"]),
                "activityType": rng.choice(["plan", "progress"]),
                "patch": [rng.choice(ops[:5] if rng.random() < 0.7 else ops)
                          for _ in range(rng.randint(0, 3))],
            }  # fmt: skip
            if rng.random() < 0.3:
                delta["metadata"] = rng.choice([{"k": n}, {"u": {"in": [n]}}, {}])
            if rng.random() < 0.05:
                delta["subagentRunId"] = "sub"
            events.append(delta)
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return sse(events)


def _activities(data: bytes, chunk: int) -> Any:
    """The default chain from bytes; every update's item as of its event."""
    store = agui_meta.Store()
    defaults: Any = agui_meta.DefaultStages(store)
    defaults.ledger._clock = lambda: 0.0
    items, reports = _default_chain(data, chunk, defaults)
    return {
        "items": items,
        "messages": store.messages_wire(),
        "ledger": defaults.ledger.to_builtins(),
        "reports": reports,
    }


@pytest.mark.parametrize("seed", range(8))
def test_activity_deltas_in_the_core_equal_the_python_path(seed: int) -> None:
    data = _activity_stream(seed)
    with _must_run():
        for chunk in (len(data), 509, 83):
            result = _both(_activities, data, chunk)
            assert any(kind == "ACTIVITY_DELTA" for kind, _, _ in result["items"])


def test_an_activity_delta_is_done_in_the_core() -> None:
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "plan",
         "content": {"steps": [{"status": "todo"}], "n": {"x": 1}}},
        {"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "plan",
         "patch": [{"op": "replace", "path": "/steps/0/status", "value": "done"}],
         "metadata": {"k": 1}},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]  # fmt: skip
    data = sse(events)
    import agui_meta._accumulate as accumulate_module

    patched: list[Any] = []
    apply = accumulate_module.apply_patch  # type: ignore[attr-defined]

    def counted(document: Any, operations: Any) -> Any:
        patched.append(operations)
        return apply(document, operations)

    with mock.patch.object(accumulate_module, "apply_patch", counted):
        with _core(True):
            native = _activities(data, len(data))
        assert patched == []  # the accumulator's handler was not called
        with _core(False):
            python = _activities(data, len(data))
        assert len(patched) == 1
    assert native == python
    assert native["messages"] == [
        {"id": "a", "role": "activity", "activityType": "plan", "metadata": {"k": 1},
         "content": {"steps": [{"status": "done"}], "n": {"x": 1}}}
    ]  # fmt: skip


# -- copy_json: exact dicts and lists in C, anything else the specification's -------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


def _reachable(value: Any, into_merged: bool) -> set[int]:
    """The ids of the containers reachable from value through dicts and lists (a
    MergedMetadata counted itself, and walked into when into_merged)."""
    from agui_meta._metadata import MergedMetadata

    if type(value) is MergedMetadata:
        inner = value._plain_dict().values() if into_merged else ()
        return {id(value)}.union(*(_reachable(v, into_merged) for v in inner))
    if isinstance(value, dict):
        return {id(value)}.union(*(_reachable(v, into_merged) for v in value.values()))
    if isinstance(value, list):
        return {id(value)}.union(*(_reachable(v, into_merged) for v in value))
    return set()


class _SubDict(dict):  # type: ignore[type-arg]
    pass


class _OddItems(dict):  # type: ignore[type-arg]
    """A dict whose items() is not its contents: the specification reads items()."""

    def items(self) -> Any:
        return [("odd", [1])]


class _SubList(list):  # type: ignore[type-arg]
    pass


@given(
    value=_JSON,
    merges=st.lists(st.dictionaries(st.text(max_size=2), _JSON, max_size=3), max_size=3),
)
def test_the_c_copy_json_is_the_python_one(value: Any, merges: list[Any]) -> None:
    from agui_meta._metadata import MergedMetadata, _copy_json, copy_json, merge_metadata

    assert copy_json is NATIVE.copy_json
    merged = MergedMetadata()
    for incoming in merges:
        merged = merge_metadata(merged, incoming)
    cases = [
        value,
        {"v": value, "w": [value, {"x": value}]},
        merged,
        {"merged": merged, "v": value},
        _SubDict(a=[value]),
        {"s": _SubDict(b=value), "o": _OddItems(c=1), "l": _SubList([value])},
        [_SubList([value]), _OddItems(), (value,), b"bytes"],
    ]
    for case in cases:
        got, want = copy_json(case), _copy_json(case)
        assert _typed(got) == _typed(want)
        # The same containers shared with the original (none but what the specification
        # shares: a MergedMetadata held as a value), all others new.
        reachable = _reachable(case, into_merged=True)
        assert _reachable(got, False) & reachable == _reachable(want, False) & reachable


def test_the_c_copy_json_fails_as_the_python_one() -> None:
    from agui_meta._metadata import _copy_json, copy_json

    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    for copy in (copy_json, _copy_json):
        with pytest.raises(RecursionError):
            copy({"deep": deep})

    class Mutating(dict):  # type: ignore[type-arg]
        """Its copy (the specification's, read through items()) grows the dict holding it."""

        def items(self) -> Any:
            parent["more"] = 1
            return []

    for copy in (copy_json, _copy_json):
        parent: dict[str, Any] = {"a": Mutating(), "b": 2}
        with pytest.raises(RuntimeError, match="changed size during iteration"):
            copy(parent)


# -- what the C loop must leave to Python: foreign tallies, a context of its own -----------------


class _CountingTally(dict[str, int]):
    """A tally of a class of its own: the C loop hands the events off the fast path back."""


class _Counts(Transducer[Any, Any]):
    """A stage that lets every untagged delta pass and counts them in its own kind of dict."""

    takes_events = True

    def __init__(self) -> None:
        self.fast_passes: dict[type, None] = dict.fromkeys(CONTENT_DELTAS)
        self.fast_tally: dict[str, int] = _CountingTally()
        self.seen: list[str] = []

    def feed(self, item: Any) -> None:
        self.seen.append(item.type)
        self.emit(item)


_Counts.fast_feed = _Counts.feed


class _IndexContext(Context):
    """A context whose ``index`` is a property: the C loop must set it by name."""

    __slots__ = ("indexes",)

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.indexes: list[int] = []
        super().__init__(*args, **kw)

    @property
    def index(self) -> int:
        return self.indexes[-1] if self.indexes else -1

    @index.setter
    def index(self, value: int) -> None:
        self.indexes.append(value)


def _foreign(data: bytes, mode: str) -> dict[str, Any]:
    counts = _Counts()
    store = agui_meta.Store()
    record = test_fuse._Record()
    ctx = _IndexContext(mode, lambda r: None)
    stages = [agui_meta.Enforce(), agui_meta.Verify(), counts, agui_meta.Accumulate(store)]
    runner = Runner([*stages, record], ctx, framing="sse")
    error = None
    try:
        for at in range(0, len(data), 700):
            runner.feed(data[at : at + 700])
        runner.close()
    except agui_meta.AguiMetaError as exc:
        where = tuple(getattr(exc, name, None) for name in ("index", "offset", "line"))
        error = (type(exc).__name__, str(exc), where)
    return {
        "counts": dict(counts.fast_tally),
        "seen": counts.seen,
        "indexes": ctx.indexes,
        "outputs": record.seen,
        "messages": store.messages_wire(),
        "error": error,
        "fused": runner.fused,
    }


@pytest.mark.parametrize("mode", MODES)
def test_a_foreign_tally_and_a_context_of_its_own(mode: str) -> None:
    data = b"".join(b"data: " + f + b"\n\n" for f in workload.frames(800, seed=3))
    with _must_run():
        result = _both(_foreign, data, mode)
    assert result["fused"] == 4 and result["counts"] and result["indexes"]


class _Switching(Transducer[Any, Any]):
    """A stage whose fast-path members change at each run's start and end: in a run a plain
    dict tally, outside one a tally of its own class (the C loop makes the first replan in
    place and hands the second back to the driver)."""

    takes_events = True

    def __init__(self) -> None:
        self.fast_passes: dict[type, None] = dict.fromkeys(CONTENT_DELTAS)
        self.fast_tally: dict[str, int] = _CountingTally()
        self.tallies: list[dict[str, int]] = [self.fast_tally]
        self.seen: list[str] = []

    def feed(self, item: Any) -> None:
        self.seen.append(item.type)
        if item.type in ("RUN_STARTED", "RUN_FINISHED"):
            self.fast_passes = dict.fromkeys(CONTENT_DELTAS)
            self.fast_tally = {} if item.type == "RUN_STARTED" else _CountingTally()
            self.tallies.append(self.fast_tally)
        self.emit(item)


_Switching.fast_feed = _Switching.feed


def _switching(data: bytes, mode: str, chunk: int) -> dict[str, Any]:
    switching = _Switching()
    store = agui_meta.Store()
    ledger: Any = agui_meta.Ledger(clock=lambda: 0.0)
    record = test_fuse._Record()
    ctx = Context(mode, lambda r: None)  # type: ignore[arg-type]
    stages = [agui_meta.Enforce(), agui_meta.Verify(), switching, agui_meta.Accumulate(store)]
    runner = Runner([*stages, ledger, record], ctx, framing="sse")
    error = None
    try:
        for at in range(0, len(data), chunk):
            runner.feed(data[at : at + chunk])
        runner.close()
    except agui_meta.AguiMetaError as exc:
        error = (type(exc).__name__, str(exc), getattr(exc, "index", None))
    return {
        "tallies": [dict(t) for t in switching.tallies],
        "seen": switching.seen,
        "outputs": record.seen,
        "messages": store.messages_wire(),
        "runs": [r.to_json() for r in ledger.runs],
        "error": error,
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunk", [700, 1 << 16])
def test_members_changed_in_the_loop_replanned_there_or_by_the_driver(
    mode: str, chunk: int
) -> None:
    data = b"".join(b"data: " + f + b"\n\n" for f in workload.frames(1500, seed=5))
    replans = 0
    original = driver_module._FastPath.replanned

    def counted(self: Any) -> Any:
        nonlocal replans
        replans += 1
        return original(self)

    with _must_run(), mock.patch.object(driver_module._FastPath, "replanned", counted):
        result = _both(_switching, data, mode, chunk)
    assert replans > 0, "the C loop never replanned in place"
    assert sum(1 for t in result["tallies"] if t) > 2 and len(result["runs"]) > 2


def test_plans_kept_are_taken_in_the_loop_as_the_fast_path_takes_them() -> None:
    # The verifier and the ledger change what they let pass at each run's start and end: the
    # loop takes the plans kept for their members itself, and leaves the fast path as its own
    # _plan would (the same members held, the same tallies, the same plans).
    data = b"".join(b"data: " + f + b"\n\n" for f in workload.frames(3000, seed=7))
    made = 0
    make = driver_module._FastPath._make

    def counted(self: Any, passes: Any) -> Any:
        nonlocal made
        made += 1
        return make(self, passes)

    with _core(True), mock.patch.object(driver_module._FastPath, "_make", counted):
        defaults: Any = agui_meta.DefaultStages(agui_meta.Store())
        runner = Runner([agui_meta.Enforce(), *defaults], Context(), framing="sse")
        runner.feed(data)
        runs = len(defaults.ledger.runs)
        fast = runner._fast
        assert fast is not None
        taken = (list(fast._held), list(fast.tallies), fast.plans, fast.native_plans)
        fast._plan()
        again = (list(fast._held), list(fast.tallies), fast.plans, fast.native_plans)
        runner.close()
    assert runs > 10 and made <= 3  # two sets of plans, made once each (not twice a run)
    assert all(a is b for a, b in zip(taken[0], again[0], strict=True))
    assert all(a is b for a, b in zip(taken[1], again[1], strict=True))
    assert taken[2] is again[2] and taken[3] is again[3]


# -- drain(): the updates nobody reads are not built ------------------------------------------


def _drained(data: bytes, chunk: int, mode: Any, prefetch: int, iterate: bool) -> dict[str, Any]:
    """The default stages from bytes through ``wrap()``, drained (or iterated): the count,
    the store, the ledger and the reports."""
    import anyio

    stages: Any = agui_meta.DefaultStages(agui_meta.Store())
    stages.ledger._clock = lambda: 0.0
    reports: list[str] = []
    out: dict[str, Any] = {}
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]

    async def main() -> None:
        minted = (uuid.UUID(int=n) for n in itertools.count())
        with mock.patch.object(uuid, "uuid4", minted.__next__):
            async with agui_meta.wrap(
                chunks,
                *stages,
                mode=mode,
                on_report=lambda r: reports.append(repr(r)),
                prefetch=prefetch,
            ) as stream:
                if iterate:
                    out["count"] = len([u async for u in stream])
                else:
                    out["count"] = await stream.drain()
                runner = stream._runner
                out["built"] = runner is not None and runner.discarded == 0

    error = None
    try:
        anyio.run(main)
    except agui_meta.AguiMetaError as exc:
        error = (type(exc).__name__, str(exc))
    return {
        "count": out.get("count"),
        "error": error,
        "reports": reports,
        "messages": stages.store.messages_wire(),
        "state": stages.store.state,
        "ledger": stages.ledger.to_builtins(),
        "built": out.get("built"),
    }


@pytest.mark.parametrize("prefetch", [0, 4])
@pytest.mark.parametrize("mode", MODES)
def test_drain_counts_the_updates_it_does_not_build(mode: str, prefetch: int) -> None:
    streams = [p.read_bytes() for p in STREAMS if p.suffix == ".sse"]
    streams.append(b"".join(b"data: " + f + b"\n\n" for f in workload.frames(2000, seed=5)))
    streams.append(_delta_stream(3))
    with _must_run():
        for data in streams:
            for chunk in (len(data), 4096, 333):
                with _core(True):
                    native = _drained(data, chunk, mode, prefetch, iterate=False)
                with _core(False):
                    python = _drained(data, chunk, mode, prefetch, iterate=False)
                    iterated = _drained(data, chunk, mode, prefetch, iterate=True)
                # The C core counted updates instead of building them, the Python path none.
                built = native.pop("built"), python.pop("built"), iterated.pop("built")
                assert native == python == iterated
                if native["error"] is None:
                    assert built == (False, True, True)


_TAGS = ["TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "TEXT_MESSAGE_END"]
_odd_text = st.text(
    st.sampled_from(["a", "é", "😀", '"', "\\", "\n", "\x00", "\x1f", "\x7f", " ", "\u2028"]),
    max_size=12,
)

_plain_text = st.text(st.sampled_from(["a", "é", "😀", " ", "\x7f", "\u2028", "-"]), max_size=12)


@st.composite
def _delta_texts(draw: st.DrawFn) -> bytes:
    """Content deltas as producers write them, and near misses: escapes, control characters,
    other members, another order, spacing, repeated or missing members, junk after."""
    tag = draw(st.sampled_from(_TAGS))
    near = draw(st.booleans())  # else one change at most from the shape
    right_key = "toolCallId" if tag == "TOOL_CALL_ARGS" else "messageId"
    id_key = draw(st.sampled_from(["messageId", "toolCallId", "messageID"])) if near else right_key
    texts = _odd_text if near else _plain_text
    members = [("type", tag), (id_key, draw(texts)), ("delta", draw(texts))]
    if near:
        members += draw(
            st.lists(
                st.sampled_from(
                    [("delta", "x"), ("metadata", {}), ("timestamp", 1), ("type", tag)]
                ),
                max_size=1,
            )
        )
    if draw(st.booleans()):
        members = draw(st.permutations(members))
    if near and draw(st.booleans()):
        members = members[: draw(st.integers(0, len(members)))]
    space = draw(st.sampled_from(["", " ", "\n\t", "\r"]))
    ascii = draw(st.booleans())
    body = ("," + space).join(
        json.dumps(k) + space + ":" + space + json.dumps(v, ensure_ascii=ascii) for k, v in members
    )
    text = space + "{" + space + body + space + "}" + space
    if near and draw(st.booleans()):  # a raw control character anywhere (inside a string too)
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["\t", "\x00", "\x1f", "\n"])) + text[at:]
    return text.encode() + (draw(st.sampled_from([b"", b"}", b" x", b"\xff"])) if near else b"")


@st.composite
def _written_deltas(draw: st.DrawFn) -> bytes:
    """Content deltas in the written form (no spacing, type, id, delta, then maybe metadata),
    their deltas with escapes of every kind and their metadata any JSON object, and near
    misses of that form: a member after the metadata, junk, a cut."""
    tag = draw(st.sampled_from(_TAGS[:3]))
    key = "toolCallId" if tag == "TOOL_CALL_ARGS" else "messageId"
    delta = json.dumps(draw(_odd_text), ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):  # escapes JSON has but json.dumps does not write
        delta = delta.replace("/", "\\/").replace("a", "\\u0061")
    text = f'{{"type":"{tag}","{key}":"m","delta":{delta}'
    if draw(st.booleans()):
        text += ',"metadata":' + draw(_json_text(2).filter(lambda t: t.startswith("{")))
    text += "}"
    if draw(st.booleans()):
        text = draw(
            st.sampled_from(
                [text[:-1] + ',"x":{}}', text + "}", text[:-2] + "}", text.replace("{", "[", 2)]
            )
        )
    return text.encode()


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_delta_texts(), _written_deltas()))
def test_the_shape_of_a_delta_is_its_typed_decode(text: bytes) -> None:
    # What the loop reads of a frame without decoding it, when nobody reads the events: the
    # class, id, delta and metadata are exactly the typed decode's, every other field absent.
    shape = NATIVE.shape(text)
    if shape is None:
        return
    assert NATIVE.scan(text)
    cls, id_, delta, metadata = shape
    field = "tool_call_id" if cls is agui_meta.events.ToolCallArgsEvent else "message_id"
    fields: dict[str, Any] = {field: id_, "delta": delta}
    if metadata is not None:
        fields["metadata"] = metadata
    assert TYPED_DECODE(text) == cls(**fields)
    assert fast_decode(text) == TYPED_DECODE(text)


def test_the_shape_of_deltas_as_producers_write_them() -> None:
    classes: list[tuple[type[Any], str]] = [
        (agui_meta.events.TextMessageContentEvent, "messageId"),
        (agui_meta.events.ReasoningMessageContentEvent, "messageId"),
        (agui_meta.events.ToolCallArgsEvent, "toolCallId"),
    ]
    for cls, key in classes:
        for delta in ["", " a", "é😀", "x" * 40, 'a\nb "c"\t/é\u2028', "{" * 300 + "\\"]:
            event = {"type": cls.type, key: "m-1", "delta": delta}
            written = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
            assert NATIVE.shape(written.encode()) == (cls, "m-1", delta, None), written
            # With spacing, the general form, which takes no escape.
            spaced = json.dumps(event, ensure_ascii=False)
            plain = "\\" not in spaced
            assert NATIVE.shape(spaced.encode()) == ((cls, "m-1", delta, None) if plain else None)
            metadata: dict[str, Any] = {"usage": {"inputTokens": 3}, "k": [None, 1.5, "é", {}]}
            with_metadata = json.dumps(
                {**event, "metadata": metadata}, ensure_ascii=False, separators=(",", ":")
            )
            assert NATIVE.shape(with_metadata.encode()) == (cls, "m-1", delta, metadata)
        spaced = json.dumps({"delta": "d", key: "m", "type": cls.type}, indent=1)
        assert NATIVE.shape(spaced.encode()) == (cls, "m", "d", None)
    for miss in [
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\tb"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\\ud800"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\\x"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\\u00g1"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","delta":"b"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"',
        b'{"type":"TEXT_MESSAGE_CONTENT","toolCallId":"m","delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":null}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{"k":1,"k":2}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{"k":1},"x":{}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{"k":1}} ',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{"k":}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","timestamp":1}',
        b'{"type":"TEXT_MESSAGE_CONTENT" "messageId":"m","delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m""delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"b"}',
    ]:
        assert NATIVE.shape(miss) is None, miss


@pytest.mark.parametrize("mode", MODES)
def test_drain_of_deltas_near_the_common_shape(mode: str) -> None:
    # Deltas the loop takes without decoding them, and near misses it decodes, interleaved:
    # drained with the core, the same count, store, ledger and reports as the Python path.
    deltas = [
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}',
        b'{ "delta" : "\xc3\xa9", "type":"TEXT_MESSAGE_CONTENT", "messageId":"m"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\\n\\"b"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\tb"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"x","delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","timestamp":5}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{"k":1}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b\\u00e9","metadata":{"k":[2]}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":null}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{"k":}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{"k":1,"k":2}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","metadata":{"k":1},"x":{}}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\\x"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\\ud800"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"x","delta":"a","metadata":{"k":1}}',
        b'{"type":"REASONING_MESSAGE_CONTENT","messageId":"m","delta":"r"}',
        b'{"type":"REASONING_MESSAGE_CONTENT","messageId":"m","delta":"\\"r\\"","metadata":{"k":3}}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\\"q\\":1"}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"}"}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":",\\"r\\":2","metadata":{"t":"x"}}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"m","delta":"x"}',
        b'{"type":"TOOL_CALL_ARGS","messageId":"c","delta":"x"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"c","delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"} x',
    ]
    head = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m"}',
        b'{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m"}',
    ]
    tail = [
        b'{"type":"TOOL_CALL_END","toolCallId":"c"}',
        b'{"type":"TEXT_MESSAGE_END","messageId":"m"}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
    ]
    for order in range(3):
        body = deltas[order:] + deltas[:order]
        data = b"".join(b"data: " + f + b"\n\n" for f in head + body * 3 + tail)
        with _must_run():
            for chunk in (len(data), 97):
                with _core(True):
                    native = _drained(data, chunk, mode, 0, iterate=False)
                with _core(False):
                    python = _drained(data, chunk, mode, 0, iterate=False)
                native.pop("built"), python.pop("built")
                _same(native, python)


def _metadata_stream(n: int) -> bytes:
    """A message and a tool call whose deltas each write metadata: keys written again and
    again, new keys now and then, containers among the values, and their ends merging more."""
    frames = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m","metadata":{"k":0}}',
        b'{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m"}',
    ]
    for i in range(n):
        metadata = {"k": i, f"n{i % 5}": [i], "t": {"i": i}} if i % 3 else {"k": i}
        for kind, key, ident in (
            ("TEXT_MESSAGE_CONTENT", "messageId", "m"),
            ("TOOL_CALL_ARGS", "toolCallId", "c"),
        ):
            event = {"type": kind, key: ident, "delta": "x", "metadata": metadata}
            frames.append(json.dumps(event, separators=(",", ":")).encode())
    frames += [
        b'{"type":"TOOL_CALL_END","toolCallId":"c","metadata":{"k":"end"}}',
        b'{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":{"k":"end","u":1}}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
    ]
    return b"".join(b"data: " + f + b"\n\n" for f in frames)


def test_metadata_held_by_updates_keeps_its_version_and_drained_items_their_last_writes() -> None:
    import anyio

    data = _metadata_stream(40)

    def run(iterate: bool) -> dict[str, Any]:
        stages = agui_meta.DefaultStages(agui_meta.Store())
        seen: list[Any] = []

        async def main() -> None:
            async with agui_meta.wrap([data], *stages) as stream:
                if iterate:
                    updates = [u async for u in stream]
                    # Every update still holds the metadata as of its event, as built.
                    seen.extend((u.event.type, dict(u.metadata or {})) for u in updates)
                else:
                    await stream.drain()

        anyio.run(main)
        item = stages.store.message("m")
        call = stages.store.tool_call("c")
        assert item is not None and call is not None
        return {
            "seen": seen,
            "item": dict(item.metadata),
            "call": dict(call.metadata),
            "wire": stages.store.messages_wire(),
            "_writes": (item.metadata, call.metadata),
        }

    with _must_run():
        with _core(True):
            drained, iterated = run(False), run(True)
        with _core(False):
            python = run(True)
    held = [r.pop("_writes") for r in (drained, iterated, python)]
    assert iterated == python
    assert drained["item"] == python["item"] and drained["call"] == python["call"]
    assert drained["wire"] == python["wire"]
    # Drained, nobody held an earlier version: the core merged in place, so the record keeps
    # one write per key; held versions need every write (the Python path always keeps them).
    # (The tool call's end merges in Python, as a new version: its own key "k" has two.)
    item, call = held[0]
    assert all(type(cell) is tuple for cell in item._writes.values())
    assert all(type(cell) is tuple for key, cell in call._writes.items() if key != "k")
    assert any(type(cell) is list for cell in held[2][0]._writes.values())


def test_drain_builds_what_a_stage_after_the_fast_path_reads() -> None:
    # A stage of the caller's after the default ones reads every update: none is skipped.
    import anyio

    data = b"".join(b"data: " + f + b"\n\n" for f in workload.frames(600, seed=9))

    def run() -> dict[str, Any]:
        record = test_fuse._Record()

        async def main() -> int:
            async with agui_meta.wrap([data], *agui_meta.DefaultStages(), record) as stream:
                return await stream.drain()

        count = anyio.run(main)
        return {"count": count, "seen": [seen[:3] for seen in record.seen]}

    with _must_run():
        result = _both(run)
    assert result["count"] == len(result["seen"]) > 500


# -- the proof the C scan gives --------------------------------------------------------------


_KEYS = st.sampled_from(["a", "b", "acme.k", "a\\u0062", "x:y", "\\u003a", "é", "ab"])
_SCALARS = st.one_of(
    st.sampled_from(["1", "-0.5e3", "true", "null", '"s"', '"\\ud800"', '"\\ud83d\\ude00"']),
    st.sampled_from(['"\\\\u003a"', '"a:b"', '"\\n"', "1" * 19, "1" * 18, '"\\u00e9"']),
)


def _json_text(depth: int) -> st.SearchStrategy[str]:
    """JSON text written by hand: keys may repeat, strings may hold escapes of every kind."""
    if depth == 0:
        return _SCALARS
    inner = _json_text(depth - 1)
    objects = st.lists(st.tuples(_KEYS, inner), max_size=4).map(
        lambda pairs: "{" + ",".join(f'"{k}":{v}' for k, v in pairs) + "}"
    )
    arrays = st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]")
    return st.one_of(_SCALARS, objects, arrays)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        [
            '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"',
            '{"type":"CUSTOM","name":"n"',
            '{"type":"STATE_SNAPSHOT"',
        ]
    ),
    st.lists(st.tuples(st.sampled_from(["metadata", "value", "snapshot", "delta"]), _json_text(3))),
    st.sampled_from([b"", b"\xff", b"\xed\xa0\x80", b"  "]),
)
def test_a_clean_scan_means_fast_decode_gives_the_typed_decode(
    head: str, fields: list[tuple[str, str]], junk: bytes
) -> None:
    text = (head + "".join(f',"{k}":{v}' for k, v in fields) + "}").encode() + junk
    if not NATIVE.scan(text):
        return
    try:
        typed = TYPED_DECODE(text)
    except (msgspec.DecodeError, RecursionError):
        assert fast_decode(text) is None
        return
    assert fast_decode(text) == typed


def test_the_scan_refuses_what_the_python_checks_catch() -> None:
    deep = b'{"type":"CUSTOM","name":"n","value":' + b"[" * 128 + b"]" * 128 + b"}"
    assert not NATIVE.scan(deep)  # 129 levels, with the event object
    assert NATIVE.scan(deep.replace(b"[", b"", 1).replace(b"]", b"", 1))
    for bad in (
        b'{"a":1,"a":2}',
        b'{"a":{"b":1,"b":2}}',
        b'{"a\\u0062":1,"ab":2}',
        b'{"a":"\\ud800"}',
        b'{"a":"\\u003a"}',
        b'{"a":"\\\\u003a"}',
        b'{"a":1234567890123456789}',
        b'{"a":"\xff"}',
        b'{"a":"\xed\xa0\x80"}',
        b'{"a":"unterminated',
    ):
        assert not NATIVE.scan(bad), bad
    many = "{" + ",".join(f'"k{i}":1' for i in range(40)) + "}"
    assert not NATIVE.scan(many.encode())  # too many keys to compare: Python decides
    assert NATIVE.scan(b'{"a":{"b":1},"b":{"a":1},"c":[{"a":1},{"a":2}]}')


def test_the_scan_sees_a_string_s_every_byte() -> None:
    # Inside strings the scan reads eight plain bytes at a time: a quote, an escape or a
    # non-ASCII byte at any place of a word, or across two, is still seen.
    for before in range(20):
        for after in range(12):
            pad, tail = "x" * before, "y" * after
            # the string's end found: a key repeated after it is caught
            for inner in ("", '\\"', "\\\\", "\\n", "é", "€", "😀"):
                text = f'{{"k":"{pad}{inner}{tail}","k":1}}'.encode()
                assert not NATIVE.scan(text), text
                assert NATIVE.scan(text.replace(b',"k"', b',"j"')), text
            for bad in (b"\\ud800", b"\\u003a", b"\\\\u003a", b"\xff", b"\xc3", b"\xed\xa0\x80"):
                text = b'{"k":"' + pad.encode() + bad + tail.encode() + b'"}'
                assert not NATIVE.scan(text), text


# -- the switch ----------------------------------------------------------------------------------


_PROGRAM = """
import json, sys
import agui_meta
from agui_meta import _speedups
from agui_meta._driver import Runner
from agui_meta._framing import _common, _jsonl, _sse
from agui_meta._stage import CONTENT_DELTAS, Context, Transducer
from agui_meta._tally import ToolCallTally
from agui_meta._warn import ReportWarnings
reports = []
store = agui_meta.Store()
ctx = Context("keep_going", reports.append)
runner = Runner([agui_meta.Enforce(), *agui_meta.DefaultStages(store)], ctx, framing="jsonl")
updates = runner.feed_all([open(sys.argv[1], "rb").read()])
print(json.dumps([_speedups.NATIVE is not None, store.messages_wire(),
                  [repr(r) for r in reports], len(updates)], default=str))
"""


def test_agui_meta_no_extensions_turns_the_core_off_at_run_time() -> None:
    path = next(p for p in STREAMS if p.suffix == ".jsonl")
    runs = []
    for off in ("", "1"):
        env = {**os.environ, "AGUI_META_NO_EXTENSIONS": off, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _PROGRAM, str(path)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=120,
        )
        runs.append(json.loads(done.stdout))
        version = subprocess.run(
            [sys.executable, "-m", "agui_meta", "--version"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        ).stdout
        assert ("native core: in use" in version) is (not off), version
    (native, *got), (python, *want) = runs
    assert native and not python
    assert got == want


class _WatchedStore(agui_meta.Store):
    """A store whose lookups are Python code that notes the event index the context holds
    (the C loop must set it before it calls them, even for a delta it takes undecoded)."""

    def __init__(self) -> None:
        super().__init__()
        self.ctx: Any = None
        self.seen: list[tuple[str, str, int]] = []
        by_message, by_call = self.message, self.tool_call

        def message(key: str) -> Any:
            self.seen.append(("message", key, self.ctx.index))
            return by_message(key)

        def tool_call(key: str) -> Any:
            self.seen.append(("call", key, self.ctx.index))
            return by_call(key)

        self.message, self.tool_call = message, tool_call


def _watched(data: bytes, chunk: int, mode: Any) -> dict[str, Any]:
    import anyio

    store = _WatchedStore()
    stages: Any = agui_meta.DefaultStages(store)
    stages.ledger._clock = lambda: 0.0
    reports: list[tuple[str, int | None]] = []
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]

    async def main() -> int:
        async with agui_meta.wrap(
            chunks, *stages, mode=mode, on_report=lambda r: reports.append((repr(r), r.index))
        ) as stream:
            store.ctx = stream.context
            return await stream.drain()

    count: Any = None
    try:
        count = anyio.run(main)
    except agui_meta.AguiMetaError as exc:
        count = (str(exc), getattr(exc, "index", None))
    return {
        "count": count,
        "seen": store.seen,
        "reports": reports,
        "messages": store.messages_wire(),
    }


@pytest.mark.parametrize("mode", MODES)
def test_drained_deltas_a_python_store_lookup_sees_its_event_index(mode: str) -> None:
    # The loop sets the context's index lazily for the deltas it takes undecoded; Python code
    # it calls (here the store's lookups) and the reports after them see every event's own.
    frames = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m"}',
        b'{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m"}',
    ]
    for i in range(30):
        frames.append(b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}')
        if i % 4 == 0:
            frames.append(b'{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x"}')
        if i % 7 == 3:
            frames.append(
                b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b","metadata":{"i":1}}'
            )
        if i == 20:
            frames.append(b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"gone","delta":"z"}')
    # ending on deltas too: what reads the index after the loop (the end of the stream's
    # reports) sees the last event's
    ends = [frames, [*frames, b'{"type":"TOOL_CALL_END","toolCallId":"c"}']]
    for data, chunk in itertools.product(
        (b"".join(b"data: " + f + b"\n\n" for f in e) for e in ends), (10**6, 113)
    ):
        with _must_run(), _core(True):
            native = _watched(data, chunk, mode)
        with _core(False):
            python = _watched(data, chunk, mode)
        assert native == python
    lookups = [index for kind, key, index in native["seen"] if key in ("m", "c")]
    assert len(lookups) >= 30 and lookups == sorted(lookups)


def _unjoined(data: bytes, drain: bool) -> dict[str, Any]:
    """The store's items after the default chain over ``data``: each item's unjoined deltas
    (its ``_parts`` or ``_arg_parts``, None or a list), text and metadata."""
    import anyio

    store = agui_meta.Store()
    stages: Any = agui_meta.DefaultStages(store)
    stages.ledger._clock = lambda: 0.0

    async def main() -> None:
        async with agui_meta.wrap([data], *stages) as stream:
            if drain:
                await stream.drain()
            else:
                async for _ in stream:
                    pass

    anyio.run(main)
    seen: dict[str, Any] = {}
    for key in ("m", "r", "a"):
        item = store.message(key)
        assert item is not None
        seen[key] = (item._parts, item._content, dict(item.metadata or {}))
    call = store.tool_call("c")
    assert call is not None
    seen["c"] = (call._arg_parts, call._args, dict(call.metadata or {}))
    seen["wire"] = store.messages_wire()
    return seen


def test_an_ended_item_holds_its_text_joined_and_no_list_of_deltas() -> None:
    # A message or call that has ended holds its deltas joined into one string and no list
    # (None: the cyclic collector has one object fewer to walk per item kept); one still
    # streaming holds a list of the deltas since the last join. The same with the core.
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "he"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "llo", "metadata": {"k": 1}},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "parentMessageId": "m"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c", "metadata": {"e": 2}},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "x"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "y"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "p", "content": {"s": 1}},
        {"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "p",
         "patch": [{"op": "replace", "path": "/s", "value": 2}]},
    ]  # fmt: skip
    data = sse(events)
    for drain in (True, False):
        with _must_run(), _core(True):
            native = _unjoined(data, drain)
        with _core(False):
            python = _unjoined(data, drain)
        assert native == python
        assert native["m"] == (None, "hello", {"k": 1})
        assert native["c"] == (None, "{}", {"e": 2})
        assert native["r"] == (["x", "y"], "", {})  # still streaming
        assert native["a"] == (None, {"s": 2}, {})


# -- what the collector need not walk ------------------------------------------------------------


def _tracked_case() -> bytes:
    """A run whose store and ledger hold merged metadata (of atomic values and of a list),
    tool calls (a message and its calls refer to each other: one by its parent's id, one in a
    message made for it), a tool result, a message of text, and usage."""
    return sse(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant",
             "metadata": {"provider": "p", "usage": {"in": 1}}},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"latencyMs": 3}},
            {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f",
             "parentMessageId": "m", "metadata": {"tags": ["a"]}},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c"},
            {"type": "TOOL_CALL_RESULT", "messageId": "t", "toolCallId": "c", "content": "r"},
            {"type": "TOOL_CALL_START", "toolCallId": "d", "toolCallName": "g"},
            {"type": "TOOL_CALL_END", "toolCallId": "d"},
            {"type": "TEXT_MESSAGE_START", "messageId": "n", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "n", "delta": "ok"},
            {"type": "TEXT_MESSAGE_END", "messageId": "n"},
            {"type": "STEP_STARTED", "stepName": "s"},
            {"type": "STEP_FINISHED", "stepName": "s"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
             "usage": [{"inputTokens": 1, "outputTokens": 2}]},
        ]
    )  # fmt: skip


def _run_case(data: bytes) -> agui_meta.DefaultStages[Any]:
    stages = agui_meta.DefaultStages(agui_meta.Store())

    async def main() -> None:
        async with agui_meta.wrap([data], *stages) as stream:
            await stream.drain()

    anyio.run(main)
    return stages


def test_what_cannot_be_in_a_cycle_is_left_out_of_the_collectors_walks() -> None:
    # With the core, a merged metadata's view, its record of writes while it holds cells of
    # untracked values only, such a cell, and a ledger record's lists are not tracked: none
    # can be part of a reference cycle (a record whose cell holds a list is tracked again, by
    # the dict's own rule, so a cycle through the list is still the collector's to find).
    gc.collect()  # what the collector untracks on its own (tuples) must not decide this
    stages = _run_case(_tracked_case())
    item, call = stages.store.message("m"), stages.store.tool_call("c")
    assert item is not None and call is not None
    text, calls = item.metadata, call.metadata
    assert isinstance(text, agui_meta.MergedMetadata) and dict(text) == {
        "provider": "p", "usage": {"in": 1}, "latencyMs": 3
    }  # fmt: skip
    assert not gc.is_tracked(text) and not gc.is_tracked(text._writes)
    assert not any(gc.is_tracked(cell) for cell in text._writes.values())
    assert isinstance(calls, agui_meta.MergedMetadata) and not gc.is_tracked(calls)
    assert gc.is_tracked(calls._writes) and gc.is_tracked(calls._writes["tags"])
    run = stages.ledger.runs[0]
    lists = [run.usage, run.aggregated_usage, run.steps, run.tool_calls, run.raw_events]
    assert run.usage and run.steps and not any(map(gc.is_tracked, lists))
    assert not gc.is_tracked(NATIVE.new_list()) and gc.is_tracked([])
    # A message and its calls refer to each other: tracked. The others are not.
    assert gc.is_tracked(item) and gc.is_tracked(call) and call.owner is item
    made_for_calls = stages.store.tool_call("d")
    assert made_for_calls is not None and gc.is_tracked(made_for_calls.owner)
    result, text_only = stages.store.message("t"), stages.store.message("n")
    assert result is not None and text_only is not None and text_only.content == "ok"
    assert not gc.is_tracked(result) and not gc.is_tracked(text_only)
    assert stages.store.messages_wire()[-1] == {"id": "n", "role": "assistant", "content": "ok"}


def test_a_running_pipeline_shares_what_depends_on_its_classes_alone() -> None:
    # Two default chains: their stages share their classes' handler tables, the core's routes
    # are one table for both, each pipeline takes them with one tuple of its own; the
    # verifier's and the tally's tables of ids are untracked while they hold strings only, and
    # tracked again by the dict's own rule when they hold an event.
    made = [agui_meta.DefaultStages(agui_meta.Store()) for _ in range(2)]
    fast = [Runner([agui_meta.Enforce(), *stages], Context())._fast for stages in made]
    assert fast[0] is not None and fast[1] is not None
    first, second = fast[0].routes, fast[1].routes
    assert first is not None and second is not None
    assert first[0] is second[0] and len(first[0]) > 20
    one, two = made
    verify, accumulate, ledger = one.verify, one.accumulate, one.ledger
    assert verify is not None and two.verify is not None
    assert first[1] == (one.expand_chunks, verify, accumulate, ledger, one.store,
                        accumulate._message, accumulate._tool_call)  # fmt: skip
    assert first[1][1] is not second[1][1]
    assert verify._handlers is two.verify._handlers and ledger._handlers is two.ledger._handlers
    assert accumulate._handlers is two.accumulate._handlers
    assert not any(isinstance(m, MethodType) for route in first[0].values() for m in route)

    class Mine(agui_meta.Verify):
        def _text_start(self, event: Any) -> None:
            super()._text_start(event)

    mine = Mine()
    assert mine._handlers is not verify._handlers
    assert mine._handlers["TEXT_MESSAGE_START"] is Mine._text_start
    assert verify._handlers["TEXT_MESSAGE_START"] is agui_meta.Verify._text_start
    # A verifier given a table of its own: routes made for it, not the shared ones.
    other = agui_meta.Verify()
    other._handlers = {**other._handlers, "TEXT_MESSAGE_START": Mine._text_start}
    ran = Runner([agui_meta.Enforce(), agui_meta.ExpandChunks(), other,
                  agui_meta.Accumulate(agui_meta.Store()), agui_meta.Ledger()], Context())  # fmt: skip
    assert ran._fast is not None and ran._fast.routes is not None
    assert ran._fast.routes[0] is not first[0]
    start = agui_meta.events.TextMessageStartEvent
    assert first[0][start][0] == driver_module._START  # done in C
    assert ran._fast.routes[0][start][:3] == (driver_module._DIRECT, True, Mine._text_start)

    stages = _run_case(
        sse(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m"},
                {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"},
                {"type": "SUBAGENT_FINISHED", "subagentRunId": "s"},
            ]
        )
    )
    checked = stages.verify
    assert checked is not None and list(checked._message_owners) == ["m"]
    assert not gc.is_tracked(checked._message_owners)
    assert not gc.is_tracked(checked._tool_call_owners)
    assert list(checked._closed_subagents) == ["s"] and gc.is_tracked(checked._closed_subagents)
    tally = ToolCallTally()
    tally.answer("c")
    assert not gc.is_tracked(tally._answered) and list(tally._answered) == ["c"]


@pytest.mark.parametrize("native", [True, False])
def test_a_pipeline_between_chunks_and_runs_keeps_nothing_new_for_the_collector(
    native: bool,
) -> None:
    # What a pipeline keeps while it waits for its next chunk is walked by every full
    # collection of a process running many: the chunk's frames (kept for a report at the end)
    # hold no tracked object; a replan refills the fast path's lists in place; a run without
    # interrupts replaces no list of the store's or the ledger's; the ledger lets go of the
    # last update it observed; the tables of repeated ids are dicts of strings; a pipeline's
    # decoder makes no context of its own.
    def run(n: int, outcome: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        finished: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{n}"}
        if outcome is not None:
            finished["outcome"] = outcome
        return [
            {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{n}"},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m{n}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{n}", "delta": "hi"},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m{n}"},
            finished,
        ]

    interrupt = {"type": "interrupt", "interrupts": [{"id": "i", "reason": "confirm"}]}
    with _core(native):
        stages = agui_meta.DefaultStages(agui_meta.Store())
        ctx = Context()
        enforce = agui_meta.Enforce()
        runner = Runner([enforce, *stages], ctx, framing="sse")
        fast, store, ledger = runner._fast, stages.store, stages.ledger
        assert fast is not None and ledger is not None
        held, tallies, empty = fast._held, fast.tallies, store.pending_interrupts
        assert ledger._pending_interrupts == ()
        chunk = sse(run(1) + run(2))
        runner.feed(chunk)
        frames: Any = ctx.frames
        assert type(frames) is driver_module._RunFrames and not gc.is_tracked(frames)
        assert gc.is_tracked(frames.payloads) is not native  # the core's list is untracked
        decoder = agui_meta.framing.SSEDecoder()
        assert [frames[i] for i in range(len(frames))] == decoder.feed(chunk)
        assert ledger._item is None  # the last event's update let go once handled
        assert fast._held is held and fast.tallies is tallies
        assert held == [m for f in fast.filters for m in (f.fast_passes, f.fast_tally)]
        assert tallies == [t for t in held[1::2] if t is not None]
        # An id passes when every stage holds it: the Python plan's sets are the core's tuple.
        both = [(ids.sets, native_plans[cls][0]) for _, plans, native_plans in
                fast._made.values() for cls, (ids, _) in plans.items()
                if type(ids) is driver_module._AllOf]  # fmt: skip
        assert both and all(type(a) is tuple and a is b for a, b in both)
        assert store.pending_interrupts is empty == [] and ledger._pending_interrupts == ()
        runner.feed(sse(run(3, interrupt)))
        assert (
            [i.id for i in store.pending_interrupts]
            == ["i"]
            == [i.id for i in ledger.pending_interrupts]
        )
        runner.feed(sse(run(4)))
        assert store.pending_interrupts == [] and ledger.pending_interrupts == []
        call = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r5"},
                {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
                {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"},
                {"type": "TOOL_CALL_END", "toolCallId": "c"}]  # fmt: skip
        for part in (call, [{"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c",
                             "content": "ok"}]):  # fmt: skip
            runner.feed(sse(part))  # the ledger's records of these made in C, with the core
            assert ledger._item is None
        runner.feed(sse([{"type": "RUN_FINISHED", "threadId": "t", "runId": "r5"}]))
        assert fast._held is held and fast.tallies is tallies
        runner.close()
    twice = agui_meta.Store([{"id": "h", "role": "user", "content": c} for c in "ab"])
    assert list(twice._dup_ids) == ["h"] and not gc.is_tracked(twice._dup_ids)
    assert enforce.decoder._ctx is None  # the pipeline's context is given instead
    assert agui_meta.EventDecoder().context.mode == "default"
    origin = ReportWarnings()._origin
    assert origin[0] == __file__ and all(type(v) in (str, int) for v in origin)


def test_a_message_is_tracked_as_soon_as_it_holds_calls() -> None:
    # However it was made (the core's configuration is done at import): by hand, from a
    # history, by copy; calls assigned later track it again; a subclass stays tracked.
    made = agui_meta.MessageItem("m", "assistant", "hi")
    history = agui_meta.MessageItem.from_wire({"id": "h", "role": "user", "content": "q"})
    calls = agui_meta.MessageItem.from_wire(
        {"id": "a", "role": "assistant", "toolCalls": [{"id": "c", "type": "function",
         "function": {"name": "f", "arguments": "{}"}}]}
    )  # fmt: skip
    assert not gc.is_tracked(made) and not gc.is_tracked(history)
    assert gc.is_tracked(calls) and not gc.is_tracked(history.copy())
    assert gc.is_tracked(calls.copy()) and calls.tool_calls is not None
    made.tool_calls = [agui_meta.ToolCallItem("c", "f", made)]
    assert gc.is_tracked(made) and made.tool_calls[0].owner is made

    class Mine(agui_meta.MessageItem):
        pass

    assert gc.is_tracked(Mine("x", "user", "q"))
    with pytest.raises(TypeError, match="takes a MessageItem"):
        NATIVE.untrack_message(Mine("x", "user"))
    with pytest.raises(TypeError, match="takes a MessageItem"):
        NATIVE.track_message([])


def test_a_store_let_go_is_freed_whole() -> None:
    # What is not tracked is freed by reference counts: many stores made and let go, their
    # tool-call cycles collected, leave no more memory held than one store kept holds.
    data = _tracked_case()
    for _ in range(20):
        _run_case(data)
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        kept = _run_case(data)
        gc.collect()
        one = tracemalloc.get_traced_memory()[0] - start
        del kept
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            _run_case(data)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert one > 0 and grown < one, (grown, one)
