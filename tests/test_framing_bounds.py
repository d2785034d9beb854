"""Framing's memory is bounded by ``max_frame_size`` plus the read size, on every source.

Each case runs in a fresh interpreter and reports its peak resident set (``VmHWM``): the
input (a 64 MiB chunk of blank lines, or a gzip body that inflates to 128 MiB) against a bound
of a few times that, where building per-line lists of a whole chunk (or inflating a whole read
at once) took gigabytes. A long chunk also yields to the scheduler between its slices: counted
in turns another task gets, never in time.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("peak RSS is read from /proc/self/status", allow_module_level=True)

import agui_meta
from agui_meta import Transducer
from tests.servers import serve

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
#: 64 MiB of blank CRLF lines: 32 Mi lines, a list entry each before the fix (2.4 GB).
BLANK = 64 * MIB
RUN_STARTED = b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}'
RUN_FINISHED = b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}'


def _peak_mib(code: str) -> tuple[int, str]:
    """Peak RSS (MiB) of a fresh interpreter running ``code``, and what it printed."""
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent through fork and
    # exec, so a child started by a test session would report the session's peak.
    script = textwrap.dedent(code) + (
        "\nimport re\nwith open('/proc/self/status') as status:\n"
        "    print('PEAK', re.search(r'VmHWM:\\s*(\\d+) kB', status.read())[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out, _, peak = done.stdout.rpartition("PEAK ")
    return int(peak) // 1024, out.strip()


# The child's input: two events around 64 MiB of blank lines, built without a second copy.
_INPUT = f"""
import anyio, agui_meta
fmt = FORMAT
first, last = {RUN_STARTED!r}, {RUN_FINISHED!r}
if fmt == "sse":
    first, last = b"data: " + first + b"\\n\\n", b"data: " + last + b"\\n\\n"
else:
    first, last = first + b"\\n", last + b"\\n"
body = bytearray(first)
# Blank lines: CRLF in SSE; in JSON lines a space too (a line of one byte is a cached object).
body += b"\\r\\n" * ({BLANK} // 2) if fmt == "sse" else b" \\r\\n" * ({BLANK} // 3)
body += last
body = bytes(body)
"""


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["sse", "jsonl"])
def test_a_64_mib_chunk_of_blank_lines_through_wrap(fmt: str) -> None:
    peak, out = _peak_mib(
        _INPUT.replace("FORMAT", repr(fmt))
        + """
async def main():
    async with agui_meta.wrap([body], format=fmt) as stream:
        print([e.type async for e in stream])
anyio.run(main)
"""
    )
    assert out == "['RUN_STARTED', 'RUN_FINISHED']"
    assert peak < 250, f"{peak} MiB for a {BLANK // MIB} MiB chunk"


@pytest.mark.slow
def test_compact_events_of_64_mib_of_blank_lines() -> None:
    peak, out = _peak_mib(
        _INPUT.replace("FORMAT", "'sse'")
        + "print([e.type for e in agui_meta.compact_events(body)])\n"
    )
    assert out == "['RUN_STARTED', 'RUN_FINISHED']"
    assert peak < 250, f"{peak} MiB for a {BLANK // MIB} MiB stream"


@pytest.mark.slow
def test_a_file_read_in_64_mib_chunks(tmp_path: Path) -> None:
    path = tmp_path / "blank.sse"
    with path.open("wb") as file:
        file.write(b"data: " + RUN_STARTED + b"\n\n")
        for _ in range(BLANK // MIB):
            file.write(b"\r\n" * (MIB // 2))
        file.write(b"data: " + RUN_FINISHED + b"\n\n")
    peak, out = _peak_mib(
        f"""
import anyio
from agui_meta.framing import aiter_file_frames
async def main():
    print([f.line async for f in aiter_file_frames({str(path)!r}, chunk_size={BLANK})])
anyio.run(main)
"""
    )
    assert out == f"[1, {3 + BLANK // 2}]"
    assert peak < 250, f"{peak} MiB for {BLANK // MIB} MiB reads"


@pytest.mark.slow
def test_many_small_frames_in_one_chunk_are_run_a_slice_at_a_time() -> None:
    # 32 MiB of one-line events: a million frames and events, all built before any ran
    # (226 MiB before; 58 after).
    peak, out = _peak_mib(
        f"""
import anyio, agui_meta
event = b'data: {{"type":"RAW","event":1}}\\n\\n'
body = event * ({32 * MIB} // len(event))
async def main():
    async with agui_meta.wrap([body], format="sse") as stream:
        print(await stream.drain() == len(body) // len(event))
anyio.run(main)
"""
    )
    assert out == "True"
    assert peak < 150, f"{peak} MiB for a 32 MiB chunk"


def _encoded_app(body: bytes, encoding: str = "gzip") -> Any:
    """A raw ASGI app answering every request with ``body`` as SSE, with ``encoding`` as its
    Content-Encoding (``body`` is sent as given: encoded already)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"content-encoding", encoding.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.fixture(scope="module")
def bomb() -> Iterator[str]:
    """A server whose 130 KB gzip body inflates to a run around 128 MiB of blank lines."""
    stream = (
        b"data: "
        + RUN_STARTED
        + b"\n\n"
        + b"\r\n" * (64 * MIB)
        + b"data: "
        + RUN_FINISHED
        + b"\n\n"
    )
    body = gzip.compress(stream, compresslevel=9)
    assert len(body) < 200_000
    with serve(_encoded_app(body)) as url:
        yield url


@pytest.mark.slow
def test_http_agent_inflates_a_gzip_bomb_in_bounded_steps(bomb: str) -> None:
    peak, out = _peak_mib(
        f"""
import anyio, agui_meta
async def main():
    agent = agui_meta.HttpAgent({bomb!r}, thread_id="t")
    result = await agent.run_agent(run_id="r")
    print(result.run_id, len(agent.ledger.runs))
anyio.run(main)
"""
    )
    assert out == "r 1"
    assert peak < 120, f"{peak} MiB for a body of 130 KB inflating to 128 MiB"


@pytest.mark.slow
def test_aiter_httpx_frames_inflates_in_bounded_steps(bomb: str) -> None:
    peak, out = _peak_mib(
        f"""
import anyio, httpx
from agui_meta.framing import aiter_httpx_frames
async def main():
    async with httpx.AsyncClient() as client, client.stream("GET", {bomb!r}) as response:
        print([f.line async for f in aiter_httpx_frames(response)])
anyio.run(main)
"""
    )
    assert out == f"[1, {3 + 64 * MIB}]"
    assert peak < 120, f"{peak} MiB for a body of 130 KB inflating to 128 MiB"


# -- a long chunk yields between its slices ---------------------------------------------------


class _Count(Transducer[Any, Any]):
    def __init__(self) -> None:
        self.seen = 0

    def feed(self, item: Any) -> None:
        self.seen += 1
        self.emit(item)


@pytest.mark.anyio
async def test_a_long_chunk_is_cancelled_between_its_slices() -> None:
    event = b'data: {"type":"RAW","event":1}\n\n'
    chunk = event * (4 * MIB // len(event))  # 64 slices
    count = _Count()
    with anyio.CancelScope() as scope:
        async with agui_meta.wrap([chunk], count, format="sse") as stream:
            async for _ in stream.batches():
                scope.cancel()  # honoured at the next slice, not after the chunk
    assert scope.cancelled_caught
    assert 0 < count.seen <= 2 * 65536 // len(event) + 1


@pytest.mark.anyio
async def test_other_tasks_run_while_a_gzip_bomb_is_inflated(bomb: str) -> None:
    turns = 0
    done = anyio.Event()

    async def other() -> None:
        nonlocal turns
        while not done.is_set():
            turns += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        try:
            result = await agui_meta.HttpAgent(bomb, thread_id="t").run_agent(run_id="r")
        finally:
            done.set()
    assert result.run_id == "r"
    # 128 MiB inflated in 64 KiB steps, a checkpoint after each: about 2,000 turns. Inflated
    # in one step per read, the other task got a turn per network read (a handful).
    assert turns > 500


# -- content encodings ------------------------------------------------------------------------

STREAM = b"data: " + RUN_STARTED + b"\n\n: keep-alive\r\n\r\ndata: " + RUN_FINISHED + b"\n\n"


def _deflate(data: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return compressor.compress(data) + compressor.flush()


async def _frames_of(body: bytes, encoding: str) -> list[Any]:
    import httpx

    from agui_meta.framing import aiter_httpx_frames

    with serve(_encoded_app(body, encoding)) as url:
        async with httpx.AsyncClient() as client, client.stream("GET", url) as response:
            return [(f.data, f.offset, f.line) async for f in aiter_httpx_frames(response)]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", lambda data: _deflate(data, zlib.MAX_WBITS)),  # zlib-wrapped, per the RFC
        ("deflate", lambda data: _deflate(data, -zlib.MAX_WBITS)),  # raw, as some servers send
        ("identity", lambda data: data),
    ],
)
async def test_a_body_in_each_content_encoding_gives_the_same_frames(
    encoding: str, encode: Any
) -> None:
    expected = [
        (RUN_STARTED, 0, 1),
        (RUN_FINISHED, STREAM.index(b"data: " + RUN_FINISHED), 5),
    ]
    assert await _frames_of(encode(STREAM), encoding) == expected


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(
    ("encoding", "body", "message"),
    [
        ("br", STREAM, "content encoding 'br' is not one agui-meta decodes"),
        ("gzip, deflate", STREAM, "content encoding 'gzip, deflate' is not one"),
        ("gzip", b"not gzip at all" * 10, "not valid gzip data"),
        ("gzip", gzip.compress(STREAM)[:-12], "ends inside its gzip stream"),
        ("gzip", gzip.compress(STREAM) + b"trailing", "bytes after the end of its gzip stream"),
        ("deflate", b"\xff" * 40, "not valid deflate data"),
    ],
)
async def test_a_body_that_cannot_be_inflated_is_refused(
    encoding: str, body: bytes, message: str
) -> None:
    with pytest.raises(agui_meta.FramingError, match=message):
        await _frames_of(body, encoding)
