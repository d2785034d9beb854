"""Differential fuzz target: the C core against the pure-Python path, with atheris.

    python fuzz/fuzz_native.py fuzz/corpus -max_total_time=60

Each input is also a chunk for the C framing of the common SSE and JSON-lines shapes, which
must give what its Python specification gives. Each input is used twice: as JSON text (a clean scan must mean that ``fast_decode`` gives what
the typed decode gives) and as the body of an SSE stream after an open message, run through the
default chain from bytes with the C core and without; every update, report, error, message and
ledger entry must be equal, and with the updates counted instead of built (``drain()``'s way)
the count, reports, error, messages and ledger too. ``tests/test_fuzz.py`` runs it for a bounded time.
"""

from __future__ import annotations

import itertools
import sys
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import atheris

with atheris.instrument_imports():
    import msgspec

    import agui_meta
    from agui_meta import _speedups
    from agui_meta._driver import Runner
    from agui_meta._fastdecode import TYPED_DECODE, fast_decode
    from agui_meta._framing import _common, _jsonl, _sse
    from agui_meta._stage import Context

NATIVE = _speedups.NATIVE
if NATIVE is None:
    sys.exit(f"the C core is not in use: {_speedups.WHY_NOT}")

PREFIX = (
    b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
    b'data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\n\n'
    b'data: {"type":"TOOL_CALL_START","toolCallId":"m","toolCallName":"f"}\n\n'
)


def _run(chunks: list[bytes], native: bool, discard: bool = False) -> Any:
    minted = (uuid.UUID(int=n) for n in itertools.count())
    reports: list[str] = []
    store = agui_meta.Store()
    ledger = agui_meta.Ledger(clock=lambda: 0.0)
    ctx = Context("keep_going", lambda r: reports.append(repr(r)))
    with (
        mock.patch.object(_speedups, "NATIVE", NATIVE if native else None),
        mock.patch.object(_sse, "sse_run", NATIVE.sse_run if native else _common.py_sse_run),
        mock.patch.object(
            _jsonl, "jsonl_run", NATIVE.jsonl_run if native else _common.py_jsonl_run
        ),
        mock.patch.object(uuid, "uuid4", minted.__next__),
    ):
        runner = Runner(
            [agui_meta.Enforce(), *agui_meta.DefaultStages(store, ledger=ledger)],
            ctx,
            framing="sse",
        )
        runner.discard = discard  # drain()'s way: the fast path's updates counted, not built
        error = None
        try:
            for chunk in chunks:
                runner.feed(chunk)
            updates = runner.feed_all([])
        except agui_meta.AguiMetaError as exc:
            updates, error = runner.take(), (type(exc).__name__, str(exc))
    if discard:
        count = len(updates) + runner.discarded
        return count, reports, error, store.messages_wire(), store.state, ledger.to_builtins()
    wire = [
        (
            msgspec.json.encode(u.event),
            u.item is not None and u.item.to_wire(),
            u.done,
            None if u.metadata is None else dict(u.metadata),
        )
        for u in updates
    ]
    return wire, reports, error, store.messages_wire(), store.state, ledger.to_builtins()


def test_one(data: bytes) -> None:
    # The C framing of the common shapes against its Python specification.
    for limit in (1, 8, 64, 1 << 20):
        assert NATIVE.sse_run(data, limit) == _common.py_sse_run(data, limit), data
        assert NATIVE.jsonl_run(data, limit) == _common.py_jsonl_run(data, limit), data
    if NATIVE.scan(data):
        try:
            typed = TYPED_DECODE(data)
        except (msgspec.DecodeError, RecursionError):
            typed = None
        assert fast_decode(data) == typed, data
    body = PREFIX + b"data: " + data + b"\n\n" + data
    cut = len(body) // 2
    for chunks in ([body], [body[:cut], body[cut:]]):
        python = _run(chunks, False)
        assert _run(chunks, True) == python, data
        assert _run(chunks, True, discard=True) == (len(python[0]), *python[1:]), data


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()
