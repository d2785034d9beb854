"""The C core's framing (``_frame.h``: ``sse_run``, ``jsonl_run``) against its Python
specification (``py_sse_run``, ``py_jsonl_run`` in ``agui_meta._framing._common``).

The functions themselves give the same result on any bytes; and the SSE and JSON-lines
decoders give the same frames (payload, offset, line, event, id, final flag, error) and the
same errors (class, message, offset, line) with the C framing and with the Python one, through
``feed`` and ``feed_runs``, on the golden files, generated streams, the hostile corpus
(``fuzz/corpus``), each in one piece, split at every byte position and in random chunks.
The pipeline-level comparisons (``tests/test_native.py``) switch the framing with the rest of
the C core. Skipped like ``tests/test_native.py`` when the extension is off or not built.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_meta import FramingError
from agui_meta._framing import JsonLinesDecoder, PayloadRun, SSEDecoder, _common, _jsonl, _sse
from tests.helpers import random_chunks
from tests.needs import native_core

NATIVE = native_core()
ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "fuzz" / "corpus").iterdir())
STREAMS = sorted(
    p for p in (ROOT / "examples" / "streams").iterdir() if p.suffix in (".sse", ".jsonl")
)
GOLDEN = sorted(
    p for p in (ROOT / "tests").rglob("*") if p.is_file() and p.suffix in (".sse", ".jsonl")
)
LIMITS = (1, 7, 8, 64, 10 * 1024 * 1024)

_pieces = st.sampled_from(
    [
        b"data: ",
        b"data:",
        b"\n",
        b"\n\n",
        b"\r",
        b"\r\n",
        b"{}",
        b"[1]",
        b" ",
        b"\t",
        b"x",
        b"event: e\n",
        b"id: 1\n",
        b": c\n",
        b"retry: 5\n",
        b"\xc3\xa9",
        b"\xc3",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xef\xbb\xbf",
        b"DATA: x\n",
        b'data: {"a":1}\n\n',
        b'{"b":2}\n',
    ]
)
streams = st.lists(st.one_of(_pieces, st.binary(max_size=12)), max_size=24).map(b"".join)


def test_the_functions_give_their_specification_on_the_corpus() -> None:
    for path in CORPUS + STREAMS + GOLDEN:
        data = path.read_bytes()
        for cut in range(0, len(data) + 1, max(1, len(data) // 200)):
            chunk = data[cut:]
            for limit in LIMITS:
                assert NATIVE.sse_run(chunk, limit) == _common.py_sse_run(chunk, limit)
                assert NATIVE.jsonl_run(chunk, limit) == _common.py_jsonl_run(chunk, limit)


@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams, st.sampled_from((*LIMITS, 2, 6, 9, 12, 2**70)))
def test_the_functions_give_their_specification(chunk: bytes, limit: int) -> None:
    assert NATIVE.sse_run(chunk, limit) == _common.py_sse_run(chunk, limit)
    assert NATIVE.jsonl_run(chunk, limit) == _common.py_jsonl_run(chunk, limit)


@pytest.mark.parametrize(
    "odd",
    [
        b"\r",
        b"\n",
        b"\xc3\xa9",
        b"\xe2\x82\xac",
        b"\xf0\x9f\x98\x80",
        b"\xff",
        b"\xc3",
        b"\xed\xa0\x80",
    ],
)
def test_an_odd_byte_at_every_place_of_a_word(odd: bytes) -> None:
    # The core reads eight bytes at a time while they are plain ASCII: whatever stands at
    # any place of a word, or across two, is seen.
    for before in range(20):
        for after in range(12):
            payload = b"x" * before + odd + b"y" * after
            for chunk in (b"data: " + payload + b"\n\n", payload + b"\n"):
                assert NATIVE.sse_run(chunk, 10**6) == _common.py_sse_run(chunk, 10**6)
                assert NATIVE.jsonl_run(chunk, 10**6) == _common.py_jsonl_run(chunk, 10**6)


def test_bad_arguments_are_a_type_error() -> None:
    for bad in ((bytearray(b"data: a\n\n"), 10), (b"data: a\n\n", "10"), (b"",)):
        for fn in (NATIVE.sse_run, NATIVE.jsonl_run):
            with pytest.raises(TypeError):
                fn(*bad)


@contextmanager
def _framing(native: bool) -> Iterator[None]:
    with (
        mock.patch.object(_sse, "sse_run", NATIVE.sse_run if native else _common.py_sse_run),
        mock.patch.object(
            _jsonl, "jsonl_run", NATIVE.jsonl_run if native else _common.py_jsonl_run
        ),
    ):
        yield


def _decode(chunks: list[bytes], fmt: str, runs: bool, limit: int, tolerant: bool) -> Any:
    cls = SSEDecoder if fmt == "sse" else JsonLinesDecoder
    decoder = cls(max_frame_size=limit, invalid_utf8="frame" if tolerant else "raise")
    out: list[Any] = []
    try:
        for chunk in chunks:
            parts = decoder.feed_runs(chunk) if runs else decoder.feed(chunk)
            for part in parts:
                if isinstance(part, PayloadRun):
                    out.append(("run", len(part.payloads)))
                    out.extend(part.frames())
                else:
                    out.append(part)
            out.append(("ignored", list(decoder.ignored)))
            decoder.ignored.clear()
        out.extend(decoder.close())
    except FramingError as exc:
        out.append(("error", str(exc), exc.offset, exc.line))
    return [
        (f.data, f.offset, f.line, f.event, f.id, f.final_unterminated, repr(f.error))
        if not isinstance(f, tuple)
        else f
        for f in out
    ]


def _compare(chunks: list[bytes], fmt: str) -> None:
    for limit in (8, 10 * 1024 * 1024):
        for tolerant in (False, True):
            with _framing(False):
                plain = _decode(chunks, fmt, False, limit, tolerant)
                python = _decode(chunks, fmt, True, limit, tolerant)
            with _framing(True):
                native = _decode(chunks, fmt, True, limit, tolerant)
                native_plain = _decode(chunks, fmt, False, limit, tolerant)
            assert native == python, (fmt, limit, tolerant, [len(c) for c in chunks])
            assert native_plain == plain
            # feed_runs' frames (the runs spelt out) are feed's frames.
            assert [x for x in python if x[0] != "run"] == plain


@pytest.mark.parametrize("fmt", ["sse", "jsonl"])
@pytest.mark.parametrize("path", STREAMS + GOLDEN, ids=lambda p: p.name)
def test_the_decoders_on_recorded_and_golden_streams(path: Path, fmt: str) -> None:
    data = path.read_bytes()
    _compare([data], fmt)
    for cut in range(0, len(data) + 1, 1 if len(data) <= 1024 else len(data) // 100):
        _compare([data[:cut], data[cut:]], fmt)
    for seed in range(5):
        _compare(random_chunks(data, seed), fmt)


@pytest.mark.parametrize("fmt", ["sse", "jsonl"])
def test_the_decoders_on_the_hostile_corpus(fmt: str) -> None:
    for path in CORPUS:
        data = path.read_bytes()
        _compare([data], fmt)
        for cut in range(0, len(data) + 1, max(1, len(data) // 40)):
            _compare([data[:cut], data[cut:]], fmt)
        _compare(random_chunks(data, len(data)), fmt)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(streams, min_size=1, max_size=6), st.sampled_from(["sse", "jsonl"]))
def test_the_decoders_on_generated_streams(chunks: list[bytes], fmt: str) -> None:
    _compare(chunks, fmt)
    data = b"".join(chunks)
    for cut in range(len(data) + 1):
        _compare([data[:cut], data[cut:]], fmt)
