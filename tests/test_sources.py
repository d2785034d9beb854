"""Sources a user has at hand: each gives the same conversation as the same stream as bytes."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import agui_meta

pytestmark = pytest.mark.anyio

STREAMS = Path(__file__).resolve().parent.parent / "examples" / "streams"


async def conversation(source: Any, **kwargs: Any) -> tuple[list[dict[str, Any]], Any, int]:
    stages = agui_meta.DefaultStages()
    async with agui_meta.wrap(source, *stages, **kwargs) as stream:
        count = await stream.drain()
    return stages.store.messages_wire(), stages.store.state, count


@pytest.mark.parametrize("name", ["travel.sse", "support.jsonl"])
async def test_an_open_file_gives_what_its_path_gives(name: str) -> None:
    path = STREAMS / name
    expected = await conversation(path)
    with path.open("rb") as binary:
        assert await conversation(binary) == expected
        assert not binary.closed  # whoever opened it closes it
    with path.open(encoding="utf-8", newline="") as text:
        assert await conversation(text) == expected
    assert await conversation(io.BytesIO(path.read_bytes())) == expected


class _Reads(io.RawIOBase):
    """A binary file that counts how it is read."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.reads = 0
        self.lines = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.reads += 1
        return self._data.readinto(buffer)

    def readline(self, size: int | None = -1) -> bytes:
        self.lines += 1
        return self._data.readline(size)


async def test_an_open_file_is_read_in_large_chunks_not_by_line() -> None:
    data = (STREAMS / "travel.sse").read_bytes()
    file = _Reads(data)
    await conversation(file)
    assert file.lines == 0
    assert file.reads <= len(data) // 65536 + 2  # 64 KiB at a time, then the empty read
