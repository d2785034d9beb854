"""Sources a user has at hand: each gives the same conversation as the same stream as bytes."""

from __future__ import annotations

import io
import json
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


# -- lines without their line endings, text chunks, ag_ui.core models --------------------------

WIRE: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"acme.model": "x"}},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi\nthere"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]
EXPECTED = [
    {"id": "m", "role": "assistant", "content": "Hi\nthere", "metadata": {"acme.model": "x"}}
]


def _sse_lines(events: list[dict[str, Any]]) -> list[str]:
    return [line for e in events for line in (f"data: {json.dumps(e)}", "")]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param([json.dumps(e) for e in WIRE], id="json-dumps-strings"),
        pytest.param([json.dumps(e).encode() for e in WIRE], id="json-dumps-bytes"),
        pytest.param([json.dumps(e, indent=None) + "  " for e in WIRE], id="trailing-blanks"),
        pytest.param(_sse_lines(WIRE), id="sse-lines"),
        pytest.param(
            ["data: " + json.dumps(WIRE[0]), "", ": keepalive", "id: 2", *_sse_lines(WIRE[1:])],
            id="sse-lines-with-fields",
        ),
    ],
)
async def test_lines_without_line_endings(source: list[Any]) -> None:
    messages, _, count = await conversation(source)
    assert messages == EXPECTED
    assert count == len(WIRE)


async def test_a_byte_stream_split_right_before_its_line_endings_is_unchanged() -> None:
    data = "".join(f"data: {json.dumps(e)}\n\n" for e in WIRE).encode()
    # Every chunk ends just before a line ending: the added endings make only blank lines.
    chunks, start = [], 0
    for end in [i for i in range(len(data)) if data[i : i + 1] == b"\n"]:
        chunks.append(data[start:end])
        start = end
    chunks.append(data[start:])
    assert await conversation(chunks) == await conversation(data)


async def test_an_incomplete_line_is_still_reported_as_such() -> None:
    with pytest.raises(agui_meta.FramingError):
        await conversation(['{"type": "RUN_STARTED", "threadId": "t"'])


async def test_ag_ui_core_models() -> None:
    core = pytest.importorskip("ag_ui.core")
    models = [
        core.RunStartedEvent(thread_id="t", run_id="r"),
        core.TextMessageStartEvent(message_id="m", role="assistant", metadata={"acme.model": "x"}),
        core.TextMessageContentEvent(message_id="m", delta="Hi\nthere"),
        core.TextMessageEndEvent(message_id="m"),
        core.RunFinishedEvent(thread_id="t", run_id="r"),
    ]
    messages, _, _ = await conversation(models)
    assert messages == EXPECTED


def _app(body: bytes, media_type: str) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def stream(request: Any) -> Any:
        async def chunks() -> Any:
            for i in range(0, len(body), 7):  # small chunks, split anywhere
                yield body[i : i + 7]

        return StreamingResponse(chunks(), media_type=media_type)

    return Starlette(routes=[Route("/agent", stream, methods=["POST"])])


@pytest.mark.parametrize("fmt", ["sse", "jsonl"])
@pytest.mark.parametrize("how", ["aiter_lines", "aiter_text", "aiter_bytes"])
async def test_httpx_responses_read_any_way(how: str, fmt: str) -> None:
    httpx = pytest.importorskip("httpx")
    from tests.servers import serve

    if fmt == "sse":
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in WIRE).encode()
        media = "text/event-stream"
    else:
        body = "".join(f"{json.dumps(e)}\n" for e in WIRE).encode()
        media = "application/x-ndjson"
    with serve(_app(body, media)) as base:
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", f"{base}/agent", json={}) as response,
        ):
            messages, _, count = await conversation(getattr(response, how)())
    assert messages == EXPECTED
    assert count == len(WIRE)


async def test_to_agui_core_takes_store_items_and_gives_the_conversation() -> None:
    core = pytest.importorskip("ag_ui.core")
    stages = agui_meta.DefaultStages()
    agui_meta.run_sync(
        stages,
        [
            *WIRE[:4],
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c",
                "toolCallName": "f",
                "parentMessageId": "m",
                "metadata": {"acme.id": 1},
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c"},
        ],
    )
    conversation_models = agui_meta.to_agui_core(stages.store)
    assert [type(m) for m in conversation_models] == [core.AssistantMessage]
    (message,) = conversation_models
    assert message.content == "Hi\nthere" and message.metadata == {"acme.model": "x"}
    item = stages.store.message("m")
    assert item is not None and item.tool_calls is not None
    assert agui_meta.to_agui_core(item) == message
    call = agui_meta.to_agui_core(item.tool_calls[0])
    assert isinstance(call, core.ToolCall)
    assert (call.id, call.function.name, call.function.arguments) == ("c", "f", "{}")
    assert message.tool_calls == [call]
    with pytest.raises(TypeError, match=r"store item or store, got builtins\.int"):
        agui_meta.to_agui_core(3)  # type: ignore[call-overload]
