"""The same bad bytes give the same error on every path that frames bytes.

One owner frames every source (``agui_meta._framing.Framer``), so each bad stream below is
refused with the same class, message, byte offset and line whichever way it comes in:
``wrap()`` over the whole bytes, over small chunks and over a file; ``aiter_frames`` and
``aiter_file_frames``; :func:`~agui_meta.compact_events`; the command line's ``compact``; the
Redis ingest's reader; and over HTTP from a real server on 127.0.0.1, through ``HttpAgent``
and ``aiter_httpx_frames``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

import agui_meta
from agui_meta.cli import main
from agui_meta.framing import aiter_file_frames, aiter_frames, aiter_httpx_frames
from agui_meta.redis import read_frames
from tests import needs
from tests.servers import serve

START = b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}'
RAW = b'{"type":"RAW","event":1}'

#: Bad streams, each refused by the framer: (name, bytes, whether a keep-going reader — the
#: Redis ingest's, which keeps frames that are not UTF-8 for the worker to report — takes it).
BAD: list[tuple[str, bytes, bool]] = [
    ("neither format", b"hello world\n", True),
    ("neither format after blank lines", b"\r\n\r\n\nxyz: 1\n", True),
    ("ends inside a field name", b"  dat", True),
    ("a JSON array cut off", b"[" + START + b",\n" + RAW, True),
    ("a JSON array without a comma", b"[" + START + b"\n " + RAW + b"]", True),
    ("bytes after a JSON array", b"[" + START + b"]\n[]", True),
    ("SSE data not UTF-8", b"data: " + START + b"\n\n: note\ndata: {\xff}\n\n", False),
    ("a JSON line not UTF-8", START + b"\n" + b'{"type":"\xc3"}\n', False),
    ("a JSON array element not UTF-8", b"[" + START + b',\r\n"\xed\xa0\x80"]', False),
]

Seen = tuple[str, str, int | None, int | None]


def _seen(exc: BaseException) -> Seen:
    assert isinstance(exc, agui_meta.FramingError), repr(exc)
    return type(exc).__name__, exc.reason, exc.offset, exc.line


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def _drain(source: Any) -> None:
    async with agui_meta.wrap(source) as stream:
        await stream.drain()


async def _frames(frames: Any) -> None:
    async with aclosing(frames) as each:
        async for _ in each:
            pass


def _paths(path: Path, data: bytes) -> Iterator[tuple[str, Callable[[], Any]]]:
    """Each local path, as a name and an async callable that raises the framing error."""
    yield "wrap(bytes)", lambda: _drain(data)
    yield "wrap(chunks of 3)", lambda: _drain(_chunks(data, 3))
    yield "wrap(Path)", lambda: _drain(path)
    yield "aiter_frames", lambda: _frames(aiter_frames(_chunks(data, 5)))
    yield "aiter_file_frames", lambda: _frames(aiter_file_frames(path, chunk_size=7))

    async def compact() -> None:
        agui_meta.compact_events(data)

    yield "compact_events", compact


def _cli_compact(path: Path, capsys: pytest.CaptureFixture[str]) -> Seen:
    status = main(["compact", str(path)])
    err = capsys.readouterr().err
    assert status == 1, err
    found = re.search(r":(\d+):(\d+): (?:event \d+: )?error: \[(\w+)\] (.*)", err)
    assert found is not None, err
    return found[3], found[4], int(found[2]), int(found[1])


def _app(bodies: dict[str, bytes]) -> Any:
    """A raw ASGI app answering ``/<name>`` with that bad body (no media type: detected)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        body = bodies[scope["path"].lstrip("/")]
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/octet-stream")],
            }
        )
        for start in range(0, len(body), 4):  # in pieces, as a network delivers them
            await send(
                {"type": "http.response.body", "body": body[start : start + 4], "more_body": True}
            )
        await send({"type": "http.response.body", "body": b""})

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve(_app({str(n): data for n, (_, data, _) in enumerate(BAD)})) as url:
        yield url


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("case", range(len(BAD)), ids=[name for name, _, _ in BAD])
async def test_the_same_bad_bytes_give_the_same_error_on_every_path(
    case: int, server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    httpx = needs.module("httpx")
    _, data, ingest_takes_it = BAD[case]
    path = tmp_path / "bad.stream"
    path.write_bytes(data)
    seen: dict[str, Seen] = {}
    for name, attempt in _paths(path, data):
        with pytest.raises(agui_meta.FramingError) as info:
            await attempt()
        seen[name] = _seen(info.value)
    seen["agui-meta compact"] = _cli_compact(path, capsys)
    if ingest_takes_it:
        with pytest.raises(agui_meta.FramingError) as info:
            await anyio.to_thread.run_sync(read_frames, str(path))
        seen["redis read_frames"] = _seen(info.value)
    else:  # kept as a frame with its error, for the worker to report as one bad event
        assert any(not _utf8(f) for f in read_frames(str(path)))
    url = f"{server}/{case}"
    with pytest.raises(agui_meta.FramingError) as info:
        await agui_meta.HttpAgent(url, thread_id="t").run_agent(run_id="r")
    seen["HttpAgent"] = _seen(info.value)
    async with httpx.AsyncClient() as client, client.stream("GET", url) as response:
        with pytest.raises(agui_meta.FramingError) as info:
            await _frames(aiter_httpx_frames(response))
    seen["aiter_httpx_frames"] = _seen(info.value)

    first = seen["wrap(bytes)"]
    assert first[2] is not None and first[3] is not None, first
    assert {name: got for name, got in seen.items() if got != first} == {}, first


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True
