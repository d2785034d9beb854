"""Sources a user has at hand: each gives the same conversation as the same stream as bytes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_meta
from tests import needs

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


_FIRST_LINES = {
    "id": ["id: 1"],
    "event": ["event: message"],
    "retry": ["retry: 3000", ""],
    "comment": [": hello", ""],
    "several": ["id: 7", "retry: 10", ": c", "event: x"],
    "fields-without-colon": ["event", "id"],
}


async def _places(source: Any) -> list[tuple[int | None, int | None]]:
    """Where each event's frame is, by the report each gives (an unknown field in each)."""
    reports: list[agui_meta.Report] = []
    async with agui_meta.wrap(source, on_report=reports.append) as stream:
        await stream.drain()
    assert {r.code for r in reports} <= {"unknown-field"}
    return [(r.offset, r.line) for r in reports]


@pytest.mark.parametrize("kind", sorted(_FIRST_LINES))
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
async def test_lines_without_line_endings_starting_with_any_sse_line(
    kind: str, as_bytes: bool
) -> None:
    lines: list[Any] = [*_FIRST_LINES[kind], *_sse_lines(WIRE)]
    source = [line.encode() for line in lines] if as_bytes else lines
    reports: list[agui_meta.Report] = []
    messages, _, count = await conversation(source, on_report=reports.append)
    assert (messages, count, reports) == (EXPECTED, len(WIRE), [])
    # Each report names the place of its event in the lines with LF endings.
    marked = [*_FIRST_LINES[kind], *_sse_lines([{**e, "zz": 1} for e in WIRE])]
    text = "".join(f"{line}\n" for line in marked).encode()
    frames = agui_meta.framing.SSEDecoder().feed(text)
    expected = [(f.offset, f.line) for f in frames]
    assert len(expected) == len(WIRE)
    assert await _places(marked) == expected
    assert await _places([text]) == expected


async def test_held_sse_lines_are_not_lost_at_the_end_of_the_stream() -> None:
    # No blank line after the last event: its lines are lines all the same.
    lines = ["id: 1", "event: x", *_sse_lines(WIRE)[:-1]]
    messages, _, count = await conversation(lines)
    assert (messages, count) == (EXPECTED, len(WIRE))
    messages, _, count = await conversation(["retry: 5", "data: " + json.dumps(WIRE[0])])
    assert count == 1


async def test_lines_given_after_held_lines_that_turn_out_to_be_pieces() -> None:
    # A byte stream in pieces that look like SSE lines: fed as they came, never joined wrongly.
    data = "".join(f"id: {i}\ndata: {json.dumps(e)}\n\n" for i, e in enumerate(WIRE)).encode()
    pieces = [b"id", b": 0", b"\ndata: ", b'{"type"', b': "RUN_STARTED", ']
    head = b"".join(pieces)
    assert data.startswith(head)
    pieces.append(data[len(head) :])
    assert await conversation(pieces) == await conversation([data])


async def test_sse_lines_from_httpx_aiter_lines_of_agui_metas_own_server() -> None:
    httpx = needs.module("httpx")
    from tests.servers import agent_app, serve

    run = {"threadId": "t", "runId": "r", "messages": [], "state": {}}
    results = {}
    with serve(agent_app(max_events=100)) as base:
        async with httpx.AsyncClient() as client:
            for how in ("aiter_lines", "aiter_bytes", "aiter_text"):
                async with client.stream("POST", f"{base}/thread", json=run) as response:
                    assert response.headers["content-type"].startswith("text/event-stream")
                    if how == "aiter_lines":
                        lines = [line async for line in response.aiter_lines()]
                        # The server's retry and id lines come first: what this is about.
                        assert lines[0].startswith("retry:") and lines[2].startswith("id:")
                        source: Any = lines
                    else:
                        source = getattr(response, how)()
                    results[how] = await conversation(source)
    messages, _, count = results["aiter_lines"]
    assert count >= 3 and messages
    assert results["aiter_lines"] == results["aiter_bytes"] == results["aiter_text"]


_SSE_STREAM = (
    b"retry: 3000\r\n\r\n: hi\nid: 1\nevent: message\n"
    + b"".join(
        b"data: " + json.dumps({**e, "zz": i}).encode() + (b"\r\n\r\n" if i % 2 else b"\n\n")
        for i, e in enumerate(WIRE)
    )
    + b"bogus: 1\n\nid: 2\r"
)


@given(st.lists(st.integers(0, len(_SSE_STREAM)), max_size=6))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_sse_byte_stream_split_anywhere_gives_the_same_events_and_places(
    cuts: list[int],
) -> None:
    points = sorted(set(cuts))
    chunks = [
        _SSE_STREAM[a:b] for a, b in zip([0, *points], [*points, len(_SSE_STREAM)], strict=True)
    ]
    assert b"".join(chunks) == _SSE_STREAM
    assert _run_sync_places(chunks) == _WHOLE_PLACES


def test_an_sse_byte_stream_split_at_every_position() -> None:
    data = _SSE_STREAM
    for i in range(len(data) + 1):
        assert _run_sync_places([data[:i], data[i:]]) == _WHOLE_PLACES, i
    assert _run_sync_places([data[i : i + 1] for i in range(len(data))]) == _WHOLE_PLACES


def _run_sync_places(chunks: list[bytes]) -> tuple[list[str], list[tuple[Any, ...]]]:
    reports: list[agui_meta.Report] = []

    async def go() -> list[str]:
        async with agui_meta.wrap(chunks, on_report=reports.append) as stream:
            return [event.type async for event in stream]

    types = anyio.run(go)
    return types, [(r.code, r.index, r.offset, r.line) for r in reports]


_WHOLE_PLACES = _run_sync_places([_SSE_STREAM])


def test_the_split_property_sees_every_report() -> None:
    types, places = _WHOLE_PLACES
    assert types == [e["type"] for e in WIRE]
    assert [p[0] for p in places] == ["unknown-field"] * len(WIRE) + ["sse-unknown-field"]
    assert places[0][2:] == (_SSE_STREAM.index(b"id: 1"), 4)  # the event's "id:" line


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
    core = needs.module("ag_ui.core")
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
    httpx = needs.module("httpx")
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
    core = needs.module("ag_ui.core")
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
    with pytest.raises(agui_meta.UsageError, match=r"store item or store, got builtins\.int"):
        agui_meta.to_agui_core(3)  # type: ignore[call-overload]


# -- one JSON array of events as a source --------------------------------------------------------


def _support_events() -> list[dict[str, Any]]:
    text = (STREAMS / "support.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("indent", [None, 2])
async def test_a_json_array_file_is_a_source(tmp_path: Path, indent: int | None) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps(_support_events(), indent=indent))
    expected = await conversation(STREAMS / "support.jsonl")
    assert await conversation(path) == expected
    assert await conversation(path, format="json-array") == expected
    data = path.read_bytes()
    assert await conversation([data[i : i + 5] for i in range(0, len(data), 5)]) == expected
    with path.open("rb") as file:
        assert await conversation(file) == expected


async def test_a_json_array_is_read_element_by_element() -> None:
    # The consumer gets each event before the rest of the array exists.
    events = WIRE
    seen: list[str] = []

    async def source() -> Any:
        yield b"[\n"
        for i, event in enumerate(events):
            yield (b"," if i else b"") + json.dumps(event).encode()
            # Each element is out before the next one is made.
            assert len(seen) == i + 1
        yield b"\n]"

    async with agui_meta.wrap(source()) as stream:
        async for event in stream:
            seen.append(event.type)
    assert seen == [e["type"] for e in events]


async def test_json_array_errors_name_their_byte(tmp_path: Path) -> None:
    good = json.dumps(WIRE[0])
    path = tmp_path / "cut.json"
    path.write_text(f"[{good}, {good[:-5]}")
    with pytest.raises(agui_meta.FramingError, match="inside element 1") as exc:
        await conversation(path)
    assert exc.value.offset == len(good) + 3
    path.write_text(f"[{good}] trailing")
    with pytest.raises(agui_meta.FramingError, match="after the JSON array") as exc:
        await conversation(path)
    assert exc.value.offset == len(good) + 3
    # An element that is not an object is one bad event, with its place.
    path.write_text(f"[{good},\n 42,\n {json.dumps(WIRE[-1])}]")
    reports: list[agui_meta.Report] = []
    _, _, count = await conversation(path, mode="keep_going", on_report=reports.append)
    assert count == 2
    (report,) = reports
    assert report.severity == "error" and report.index == 1
    assert (report.offset, report.line) == (len(good) + 4, 2)
    with pytest.raises(agui_meta.DecodeError, match="not a JSON object"):
        await conversation(path)


async def test_hostile_json_arrays(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    depth = 100_000
    path.write_bytes(b'[{"type": "RAW", "event": ' + b"[" * depth + b"]" * depth + b"}]")
    with pytest.raises(agui_meta.DecodeError, match="nested more than 128 levels"):
        await conversation(path)
    big = json.dumps({"type": "RAW", "event": "x" * 5000})
    path.write_text(f"[{json.dumps(WIRE[0])}, {big}]")
    with pytest.raises(agui_meta.FramingError, match=r"element 1 .* max_frame_size=4096"):
        await conversation(path, max_frame_size=4096)
