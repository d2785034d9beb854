"""Tests of the byte-level framing: SSE and JSON-lines decoders, detection, encoders, async.

Expected values come from the WHATWG HTML "event stream interpretation" rules (including the
examples of that section), from the AG-UI encoder's output format (``data: <json>\\n\\n``), or
from a plain line-by-line model of those rules written below; offsets are computed from the
test input itself.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_meta._exceptions import FramingError, UsageError
from agui_meta._framing import (
    DEFAULT_MAX_FRAME_SIZE,
    AutoDecoder,
    Frame,
    FrameDecoder,
    JsonArrayDecoder,
    JsonLinesDecoder,
    PayloadRun,
    SSEDecoder,
    aiter_file_frames,
    aiter_frames,
    aiter_httpx_frames,
    detect_format,
    encode_jsonl,
    encode_sse,
    make_decoder,
)

BOM = b"\xef\xbb\xbf"
Outcome = tuple[list[Frame], tuple[int | None, int | None] | None]


# -- helpers -------------------------------------------------------------------------------------


def run(decoder: FrameDecoder, parts: Sequence[bytes]) -> Outcome:
    """Feed ``parts`` then close; returns the frames and the error's (offset, line), if any."""
    frames: list[Frame] = []
    try:
        for part in parts:
            frames += decoder.feed(part)
        frames += decoder.close()
    except FramingError as exc:
        return frames, (exc.offset, exc.line)
    return frames, None


def split(stream: bytes, cuts: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(stream)]
    return [stream[a:b] for a, b in pairwise(bounds)]


def chunkings(stream: bytes) -> list[list[bytes]]:
    """Whole, split in two at every byte boundary, and byte by byte."""
    out = [[stream], [stream[i : i + 1] for i in range(len(stream))]]
    out += [[stream[:i], stream[i:]] for i in range(len(stream) + 1)]
    return out


def decode(make: Callable[[], FrameDecoder], stream: bytes) -> Outcome:
    """Decode ``stream`` under every chunking; asserts they agree and returns the outcome."""
    expected = run(make(), [stream])
    for parts in chunkings(stream):
        assert run(make(), parts) == expected, parts
    return expected


def sse(stream: bytes, **kw: object) -> list[Frame]:
    frames, error = decode(lambda: SSEDecoder(**kw), stream)  # type: ignore[arg-type]
    assert error is None, error
    return frames


def sse_error(stream: bytes, **kw: object) -> tuple[list[Frame], tuple[int | None, int | None]]:
    frames, error = decode(lambda: SSEDecoder(**kw), stream)  # type: ignore[arg-type]
    assert error is not None
    return frames, error


def jsonl(stream: bytes, **kw: object) -> list[Frame]:
    frames, error = decode(lambda: JsonLinesDecoder(**kw), stream)  # type: ignore[arg-type]
    assert error is None, error
    return frames


def line_of(stream: bytes, offset: int) -> int:
    """The 1-based SSE line number (CRLF, LF or CR ends) of the byte at ``offset``."""
    return len(re.findall(rb"\r\n|\r|\n", stream[:offset])) + 1


def at(stream: bytes, needle: bytes) -> tuple[int, int]:
    """(offset, SSE line) of the first occurrence of ``needle`` in ``stream``."""
    offset = stream.index(needle)
    return offset, line_of(stream, offset)


def data(frames: list[Frame]) -> list[bytes]:
    return [f.data for f in frames]


# -- a model of the WHATWG rules, one line at a time, for property tests ---------------------------


def model_sse(stream: bytes) -> Outcome:
    """The event stream interpretation rules applied line by line to the whole stream.

    Same policies as the decoder: strict UTF-8 for data, event and id values; the final
    event's data dispatched with ``final_unterminated``; no size limit.
    """
    frames: list[Frame] = []
    pos = 3 if stream.startswith(BOM) else 0
    lines: list[tuple[int, bytes]] = []
    start = pos
    i = pos
    while i < len(stream):
        c = stream[i : i + 1]
        if c in (b"\r", b"\n"):
            lines.append((start, stream[start:i]))
            i += 2 if stream[i : i + 2] == b"\r\n" else 1
            start = i
        else:
            i += 1
    final = stream[start:] if start < len(stream) else None
    buf: list[bytes] | None = None
    event = ""
    last_id = ""
    first: tuple[int, int] | None = None

    def field(offset: int, line: bytes) -> None:
        nonlocal buf, event, last_id, first
        if line.startswith(b":"):
            return
        if first is None:
            first = (offset, line_of(stream, offset))
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        where = (offset, line_of(stream, offset))
        if name == b"data":
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise FramingError("bad data", offset=where[0], line=where[1]) from None
            buf = [*(buf or []), value]
        elif name == b"event":
            try:
                event = value.decode("utf-8")
            except UnicodeDecodeError:
                raise FramingError("bad event", offset=where[0], line=where[1]) from None
        elif name == b"id" and b"\0" not in value:
            try:
                last_id = value.decode("utf-8")
            except UnicodeDecodeError:
                raise FramingError("bad id", offset=where[0], line=where[1]) from None

    try:
        for offset, line in lines:
            if line:
                field(offset, line)
                continue
            if buf is not None:
                assert first is not None
                frames.append(
                    Frame(b"\n".join(buf), first[0], first[1], event or None, last_id or None)
                )
            buf = None
            event = ""
            first = None
        if final is not None:
            field(start, final)
        if buf is not None:
            assert first is not None
            frames.append(
                Frame(b"\n".join(buf), first[0], first[1], event or None, last_id or None, True)
            )
    except FramingError as exc:
        return frames, (exc.offset, exc.line)
    return frames, None


# -- SSE: the examples of the WHATWG section -------------------------------------------------------


class TestSSEStandardExamples:
    def test_stock_ticker_multiline_data(self) -> None:
        stream = b"data: YHOO\ndata: +2\ndata: 10\n\n"
        assert sse(stream) == [Frame(b"YHOO\n+2\n10", 0, 1)]

    def test_comment_ids_and_spaces(self) -> None:
        stream = (
            b": test stream\n\ndata: first event\nid: 1\n\n"
            b"data:second event\nid\n\ndata:  third event\n"
        )
        frames = sse(stream)
        assert frames == [
            Frame(b"first event", *at(stream, b"data: first"), None, "1"),
            # "id" with no colon resets the last event ID to the empty string
            Frame(b"second event", *at(stream, b"data:second"), None, None),
            # only the first space is removed; no blank line follows, so the standard would
            # not dispatch it: we return it, flagged (the reference client parses it)
            Frame(b" third event", *at(stream, b"data:  third"), None, None, True),
        ]

    def test_empty_data_blocks(self) -> None:
        stream = b"data\n\ndata\ndata\n\ndata:"
        frames = sse(stream)
        # "The first block fires events with the data set to the empty string, as would the
        # last block if it was followed by a blank line. The middle block fires an event with
        # the data set to a single newline character."
        assert data(frames) == [b"", b"\n", b""]
        assert [f.final_unterminated for f in frames] == [False, False, True]

    def test_space_after_colon_is_optional(self) -> None:
        assert data(sse(b"data:test\n\ndata: test\n\n")) == [b"test", b"test"]


# -- SSE: line ends, BOM, comments -----------------------------------------------------------------


class TestSSELines:
    @pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"], ids=["LF", "CR", "CRLF"])
    def test_each_line_end(self, end: bytes) -> None:
        stream = end.join([b"event: a", b"data: 1", b"data: 2", b"", b"data: 3", b"", b""])
        assert sse(stream) == [
            Frame(b"1\n2", 0, 1, "a"),
            Frame(b"3", *at(stream, b"data: 3")),
        ]
        assert [f.line for f in sse(stream)] == [1, 5]

    def test_mixed_line_ends(self) -> None:
        stream = b"data: a\r\ndata: b\rdata: c\n\r\n: x\r\rdata: d\n\r"
        frames = sse(stream)
        assert frames == [Frame(b"a\nb\nc", 0, 1), Frame(b"d", *at(stream, b"data: d"))]
        assert frames[1].line == 7

    def test_cr_then_lf_in_the_next_chunk_is_one_line_end(self) -> None:
        stream = b"data: a\r\n\r\ndata: b\r\n\r\n"
        for cut in (8, 10, 19, 21):
            assert stream[cut - 1 : cut] == b"\r"
            decoder = SSEDecoder()
            frames = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:]) + decoder.close()
            assert frames == [Frame(b"a", 0, 1), Frame(b"b", 11, 3)]

    def test_cr_cr_is_two_line_ends(self) -> None:
        assert sse(b"data: a\r\rdata: b\r\r") == [Frame(b"a", 0, 1), Frame(b"b", 9, 3)]

    def test_bom_skipped_once_at_start(self) -> None:
        assert sse(BOM + b"data: 1\n\n") == [Frame(b"1", 3, 1)]
        # a second BOM is part of the first field's name: "\ufeffdata" is unknown, ignored
        assert sse(BOM + BOM + b"data: 1\n\ndata: 2\n\n") == [Frame(b"2", 15, 3)]
        # a BOM later in the stream is not special either
        assert sse(b"data: 1\n\n" + BOM + b"data: 2\n\n") == [Frame(b"1", 0, 1)]

    def test_partial_bom_alone(self) -> None:
        assert sse(b"\xef\xbb") == []
        assert sse(BOM) == []

    def test_comments_and_keep_alives_are_ignored(self) -> None:
        stream = b": ping\n\n:\n\n: ping\r\n\r\ndata: 1\n: inside an event\ndata: 2\n\n: bye\n"
        assert sse(stream) == [Frame(b"1\n2", *at(stream, b"data: 1"))]

    def test_comment_before_the_first_field_does_not_start_the_frame(self) -> None:
        stream = b": keep-alive\nevent: e\ndata: x\n\n"
        assert sse(stream) == [Frame(b"x", *at(stream, b"event: e"), "e")]

    def test_blank_lines_between_events(self) -> None:
        stream = b"\n\n\r\ndata: 1\n\n\n\n\rdata: 2\n\n"
        assert sse(stream) == [
            Frame(b"1", *at(stream, b"data: 1")),
            Frame(b"2", *at(stream, b"data: 2")),
        ]

    def test_non_ascii_payload_split_inside_a_character(self) -> None:
        text = '{"delta":"héllo → 世界 🎉"}'
        stream = b"data: " + text.encode() + b"\n\n"
        assert sse(stream) == [Frame(text.encode(), 0, 1)]

    @pytest.mark.parametrize(
        "stream",
        [
            b"data: 1\n\ndata: 2\n\n: c\n\nevent: e\nid: 5\n\ndata: 3\n\nevent: f\ndata: 4\n\n",
            b"data: 1\n\ndata: \xff\n\n",
            b"data: 1\n\ndata: " + b"x" * 40 + b"\n\n",
            b"data: 1\n\ndata: \xc3\xa9\n\ndata: 2\r\n\r\ndata: 3\n\n",
        ],
    )
    def test_one_event_per_chunk(self, stream: bytes) -> None:
        # network reads often hold exactly one event: the same frames, offsets and errors
        events = [e + b"\n\n" for e in stream.split(b"\n\n")[:-1]]
        assert b"".join(events) == stream
        expected = run(SSEDecoder(max_frame_size=32), [stream])
        assert run(SSEDecoder(max_frame_size=32), events) == expected
        assert run(SSEDecoder(max_frame_size=32), [b"", *events, b""]) == expected

    def test_fields_in_earlier_chunks(self) -> None:
        parts = [
            b"event: e\n",
            b"id: 1\n",
            b"data: 1\n\n",
            b"data: 2\n\n",
            b": x\n",
            b"data: 3\n\n",
        ]
        stream = b"".join(parts)
        expected = [
            Frame(b"1", 0, 1, "e", "1"),
            Frame(b"2", *at(stream, b"data: 2"), None, "1"),
            Frame(b"3", *at(stream, b"data: 3"), None, "1"),
        ]
        assert run(SSEDecoder(), parts) == (expected, None)
        assert sse(stream) == expected

    def test_other_chunk_types(self) -> None:
        decoder = SSEDecoder()
        frames = decoder.feed(bytearray(b"data: 1\n\nda")) + decoder.feed(  # type: ignore[arg-type]
            memoryview(b"ta: 2\n\n")  # type: ignore[arg-type]
        )
        assert frames == [Frame(b"1", 0, 1), Frame(b"2", 9, 3)]
        assert all(type(f.data) is bytes for f in frames)


# -- SSE: fields -----------------------------------------------------------------------------------


class TestSSEFields:
    def test_event_type_set_and_reset(self) -> None:
        stream = b"event: a\ndata: 1\n\ndata: 2\n\nevent: b\n\ndata: 3\n\nevent:\ndata: 4\n\n"
        frames = sse(stream)
        # reset after every blank line, dispatching or not; an empty type means "message"
        assert [(f.data, f.event) for f in frames] == [
            (b"1", "a"),
            (b"2", None),
            (b"3", None),
            (b"4", None),
        ]

    def test_event_type_last_one_wins_and_keeps_spaces(self) -> None:
        assert sse(b"event: a\nevent:  b \ndata\n\n") == [Frame(b"", 0, 1, " b ")]

    def test_id_persists_across_events(self) -> None:
        decoder = SSEDecoder()
        frames = decoder.feed(b"id: 7\ndata: 1\n\ndata: 2\n\nid: 8\n\ndata: 3\n\n")
        assert [f.id for f in frames] == ["7", "7", "8"]
        assert decoder.last_event_id == "8"

    def test_id_with_nul_is_ignored(self) -> None:
        frames = sse(b"id: 1\n\ndata: a\nid: 2\x003\n\n")
        assert frames == [Frame(b"a", 7, 3, None, "1")]

    def test_empty_id_resets(self) -> None:
        decoder = SSEDecoder()
        frames = decoder.feed(b"id: 1\ndata: a\n\nid\ndata: b\n\nid: 2\ndata: c\n\nid:\n\n")
        assert [f.id for f in frames] == ["1", None, "2"]
        assert decoder.last_event_id == ""

    def test_last_event_id_is_updated_at_dispatch(self) -> None:
        decoder = SSEDecoder()
        decoder.feed(b"id: 1\n\nid: 2\n")
        assert decoder.last_event_id == "1"
        decoder.feed(b"\n")
        assert decoder.last_event_id == "2"

    @pytest.mark.parametrize(
        ("lines", "expected"),
        [
            (b"retry: 1000\n", 1000),
            (b"retry:0\n", 0),
            (b"retry: 1000\nretry: 5\n", 5),
            (b"retry: 1000\nretry: 10a\n", 1000),
            (b"retry: -1\n", None),
            (b"retry: 1.5\n", None),
            (b"retry: \n", None),
            (b"retry\n", None),
            (b"retry:  5\n", None),  # the second space is part of the value
            (b"retry: 5 \n", None),
            ("retry: ١٢\n".encode(), None),  # not ASCII digits
        ],
    )
    def test_retry(self, lines: bytes, expected: int | None) -> None:
        decoder = SSEDecoder()
        assert run(decoder, [lines]) == ([], None)
        assert decoder.retry == expected

    def test_unknown_fields_are_ignored(self) -> None:
        stream = b"foo: bar\nDATA: x\ndata : y\n data: z\nretryx: 1\ndata: 1\n\n"
        assert sse(stream) == [Frame(b"1", 0, 1)]

    def test_an_ignored_line_after_a_run_counts_the_run_s_frames(self) -> None:
        # feed_runs gives a run of simple blocks as one PayloadRun: an ignored line after it
        # still comes after each of its frames, as with feed.
        chunk = b'data: {"a":1}\n\ndata: {"a":2}\n\n{}\nxy: 1\n'
        for runs in (False, True):
            decoder = SSEDecoder()
            parts = decoder.feed_runs(chunk) if runs else decoder.feed(chunk)
            assert runs == any(isinstance(p, PayloadRun) for p in parts)
            assert [i.before for i in decoder.ignored] == [2, 2], runs
            frames = [f for p in parts for f in (p.frames() if isinstance(p, PayloadRun) else [p])]
            assert data(frames) == [b'{"a":1}', b'{"a":2}']

    def test_field_without_colon(self) -> None:
        assert sse(b"data\n\n") == [Frame(b"", 0, 1)]
        assert sse(b"event\ndata: x\n\n") == [Frame(b"x", 0, 1)]

    def test_only_one_space_removed(self) -> None:
        stream = b"data:   x  \ndata:\ty\ndata: \n\n"
        assert data(sse(stream)) == [b"  x  \n\ty\n"]

    def test_colon_in_value(self) -> None:
        assert data(sse(b'data: {"a":"b: c"}\n\n')) == [b'{"a":"b: c"}']

    def test_empty_data_lines(self) -> None:
        assert data(sse(b"data:\n\ndata: \n\ndata:\ndata:\n\n")) == [b"", b"", b"\n"]

    def test_blank_line_without_data_dispatches_nothing(self) -> None:
        assert sse(b"event: a\nid: 1\nretry: 3\n\n\n\n") == []


# -- SSE: end of stream ----------------------------------------------------------------------------


class TestSSETruncation:
    def test_complete_stream_has_no_flag(self) -> None:
        assert sse(b'data: {"a":1}\n\n') == [Frame(b'{"a":1}', 0, 1)]

    @pytest.mark.parametrize(
        "stream", [b'data: {"a"', b'data: {"a":1}', b'data: {"a":1}\n', b'data: {"a":1}\r']
    )
    def test_unterminated_event_is_returned_flagged(self, stream: bytes) -> None:
        payload = stream[6:].rstrip(b"\r\n")
        assert sse(stream) == [Frame(payload, 0, 1, None, None, True)]

    def test_unterminated_event_keeps_event_and_id(self) -> None:
        stream = b"data: 1\n\nevent: e\nid: 9\ndata: 2\ndata: 3"
        assert sse(stream)[-1] == Frame(b"2\n3", *at(stream, b"event: e"), "e", "9", True)

    def test_unterminated_event_as_error(self) -> None:
        stream = b"data: 1\n\nevent: e\ndata: 2\n"
        frames, error = sse_error(stream, unterminated="error")
        assert frames == [Frame(b"1", 0, 1)]
        assert error == at(stream, b"event: e")

    def test_pending_fields_without_data_are_not_an_error(self) -> None:
        assert sse(b"data: 1\n\nevent: e\nid: 3\n: c", unterminated="error") == [Frame(b"1", 0, 1)]

    def test_feed_after_close(self) -> None:
        decoder = SSEDecoder()
        decoder.close()
        with pytest.raises(UsageError):
            decoder.feed(b"data: 1\n\n")
        with pytest.raises(UsageError):
            decoder.close()


# -- SSE: invalid UTF-8 ----------------------------------------------------------------------------


class TestSSEInvalidUTF8:
    @pytest.mark.parametrize(
        "bad",
        [
            b"\xff",
            b"\xc3",
            b"\xc3(",
            b"\xe2\x82",
            b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80",
            b"\xc0\xaf",
        ],
        ids=[
            "ff",
            "truncated-2",
            "bad-continuation",
            "truncated-3",
            "surrogate",
            "too-big",
            "overlong",
        ],
    )
    def test_in_data(self, bad: bytes) -> None:
        stream = b"data: ok\n\ndata: 1\ndata: x" + bad + b"y\n\ndata: 3\n\n"
        frames, error = sse_error(stream)
        assert frames == [Frame(b"ok", 0, 1)]
        assert error == at(stream, b"data: x")

    def test_in_event_and_id(self) -> None:
        stream = b"data: 1\n\nevent: \xff\ndata: 2\n\n"
        assert sse_error(stream) == ([Frame(b"1", 0, 1)], at(stream, b"event:"))
        stream = b"id: \xe2\x82\ndata: 2\n\n"
        assert sse_error(stream) == ([], (0, 1))

    def test_in_unterminated_last_line(self) -> None:
        stream = b"data: 1\n\ndata: \xff"
        assert sse_error(stream) == ([Frame(b"1", 0, 1)], at(stream, b"data: \xff"))

    def test_in_comment_or_unknown_field_is_ignored(self) -> None:
        # the standard ignores these lines; there is no payload to corrupt
        stream = b": \xff\n\xff: x\nfoo: \xff\ndata: 1\n\n"
        # the frame starts at its first field line, whatever the field
        assert sse(stream) == [Frame(b"1", *at(stream, b"\xff: x"))]

    def test_error_message_says_where(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"data: \n\ndata: ab\xffc\n\n") == [Frame(b"", 0, 1)]
        with pytest.raises(FramingError, match="not valid UTF-8") as info:
            decoder.close()
        assert (info.value.offset, info.value.line) == (8, 3)
        assert "line 3" in str(info.value)
        assert "byte 8" in str(info.value)

    def test_decoder_stays_failed(self) -> None:
        decoder = SSEDecoder()
        frames = decoder.feed(b"data: 1\n\ndata: \xff\n\n")
        assert frames == [Frame(b"1", 0, 1)]  # the frames before the bad line
        with pytest.raises(FramingError) as first:
            decoder.feed(b"data: 2\n\n")
        with pytest.raises(FramingError) as again:
            decoder.close()
        assert first.value is again.value
        assert first.value.offset == 9


# -- SSE: size limit -------------------------------------------------------------------------------


class TestSSEMaxFrameSize:
    def test_default_is_10_mib(self) -> None:
        assert SSEDecoder().max_frame_size == 10 * 1024 * 1024

    @pytest.mark.parametrize("bad", [0, -1, 1.5, "10"])
    def test_bad_limit(self, bad: object) -> None:
        with pytest.raises(UsageError, match="max_frame_size"):
            SSEDecoder(max_frame_size=bad)  # type: ignore[arg-type]

    def test_line_at_the_limit_is_accepted(self) -> None:
        line = b"data: " + b"x" * 26  # 32 bytes
        assert sse(line + b"\n\n", max_frame_size=32) == [Frame(b"x" * 26, 0, 1)]

    def test_line_over_the_limit(self) -> None:
        stream = b"data: 1\n\n: " + b"x" * 31 + b"\n\ndata: 2\n\n"
        assert sse_error(stream, max_frame_size=32) == ([Frame(b"1", 0, 1)], (9, 3))

    def test_event_data_over_the_limit(self) -> None:
        # each line fits, but the event's data so far plus the next line does not
        lines = b"".join(b"data: " + bytes([c]) * 9 + b"\n" for c in b"abcd")
        stream = b"event: e\n" + lines + b"\n"
        frames, error = sse_error(stream, max_frame_size=40)
        assert frames == []
        # held before the last line: 3 values of 9 bytes and their 3 LFs; the line: 15 bytes
        assert error == at(stream, b"data: ddd")
        assert sse(stream, max_frame_size=45)[0].data == b"\n".join(bytes([c]) * 9 for c in b"abcd")
        assert sse_error(stream, max_frame_size=44)[1] == at(stream, b"data: ddd")

    def test_endless_line_keeps_memory_bounded(self) -> None:
        limit = 10_000
        decoder = SSEDecoder(max_frame_size=limit)
        decoder.feed(b"data: 1\n\nevent: e\ndata: ")
        fed = 0
        with pytest.raises(FramingError, match="max_frame_size") as info:
            for _ in range(1000):
                decoder.feed(b"x" * 777)
                fed += 777
                assert decoder.buffered <= limit
        assert fed <= limit
        assert decoder.buffered <= limit
        assert (info.value.offset, info.value.line) == (18, 4)

    def test_endless_line_with_data_before(self) -> None:
        limit = 1000
        decoder = SSEDecoder(max_frame_size=limit)
        decoder.feed(b"data: " + b"a" * 500 + b"\ndata: ")
        assert decoder.buffered == 501 + 6
        with pytest.raises(FramingError):
            for _ in range(100):
                decoder.feed(b"b" * 10)
                assert decoder.buffered <= limit


# -- SSE: against the line-by-line model ------------------------------------------------------------

sse_alphabet = st.sampled_from(
    [
        b"\n",
        b"\r",
        b"\r\n",
        b":",
        b" ",
        b"data",
        b"event",
        b"id",
        b"retry",
        b"x",
        b"1",
        b"\0",
        b"\xff",
        "é".encode(),
        BOM,
        b"{",
        b"}",
        b'"',
    ]
)
sse_streams = st.lists(sse_alphabet, max_size=40).map(b"".join)


def cuts_of(
    stream_strategy: st.SearchStrategy[bytes],
) -> st.SearchStrategy[tuple[bytes, list[int]]]:
    return stream_strategy.flatmap(
        lambda s: st.tuples(st.just(s), st.lists(st.integers(0, len(s)), max_size=8))
    )


class TestSSEProperties:
    @settings(max_examples=400, deadline=None)
    @given(cuts_of(sse_streams))
    def test_matches_the_model_under_any_chunking(self, case: tuple[bytes, list[int]]) -> None:
        stream, cuts = case
        assert run(SSEDecoder(), split(stream, cuts)) == model_sse(stream)

    @settings(max_examples=300, deadline=None)
    @given(cuts_of(st.binary(max_size=200)), st.integers(1, 64))
    def test_arbitrary_bytes_only_framing_errors(
        self, case: tuple[bytes, list[int]], limit: int
    ) -> None:
        stream, cuts = case
        for make in (SSEDecoder, JsonLinesDecoder, AutoDecoder):
            # anything but FramingError propagates and fails the test
            whole = run(make(max_frame_size=limit), [stream])
            assert run(make(max_frame_size=limit), split(stream, cuts)) == whole
            for frame in whole[0]:
                frame.data.decode("utf-8")  # frames are always valid UTF-8
                assert len(frame.data) <= limit


# -- SSE: the fast path for runs of "data: <json>" blocks ------------------------------------------


class _LineByLine(SSEDecoder):
    """The decoder without its many-blocks fast path (``_run_simple``): the general path only."""

    __slots__ = ()

    def _run_simple(self, chunk: bytes, frames: list[Frame]) -> bytes:
        return chunk


Where = tuple[int | None, int | None, str]
FullOutcome = tuple[list[Frame], Where | None, str, list[Where | None]]


def where(exc: FramingError | None) -> Where | None:
    return None if exc is None else (exc.offset, exc.line, str(exc))


def run_full(decoder: SSEDecoder, parts: Sequence[bytes]) -> FullOutcome:
    """Like :func:`run`, also with the error message, ``last_event_id`` at the end and the
    frames' ``error`` (exceptions compare by identity: these are compared by content)."""
    frames: list[Frame] = []
    error = None
    try:
        for part in parts:
            frames += decoder.feed(part)
        frames += decoder.close()
    except FramingError as exc:
        error = where(exc)
    errors = [where(f.error) for f in frames]
    frames = [msgspec.structs.replace(f, error=None) for f in frames]
    return frames, error, decoder.last_event_id, errors


def same_as_general_path(parts: Sequence[bytes], **kw: Any) -> FullOutcome:
    """Decode ``parts``; assert it matches the general path (byte by byte, and whole chunks)."""
    outcome = run_full(SSEDecoder(**kw), parts)
    stream = b"".join(parts)
    # A one-byte chunk never takes a fast path: both need a chunk starting with "data: ".
    assert run_full(SSEDecoder(**kw), [stream[i : i + 1] for i in range(len(stream))]) == outcome
    assert run_full(_LineByLine(**kw), parts) == outcome
    assert run_full(_LineByLine(**kw), [stream]) == outcome
    return outcome


def blocks(*payloads: bytes) -> bytes:
    return b"".join(b"data: " + p + b"\n\n" for p in payloads)


PAYLOADS = [b'{"a":%d}' % i for i in range(20)]


class TestSSEFastPath:
    # the longest line, 'data: {"a":10}', is 14 bytes: that limit is enough
    @pytest.mark.parametrize("limit", [14, DEFAULT_MAX_FRAME_SIZE])
    def test_many_simple_blocks_take_the_fast_path(
        self, monkeypatch: pytest.MonkeyPatch, limit: int
    ) -> None:
        stream = blocks(*PAYLOADS)

        def general(*args: object) -> None:
            raise AssertionError("the general path ran")

        monkeypatch.setattr(SSEDecoder, "_run", general)
        decoder = SSEDecoder(max_frame_size=limit)
        frames = decoder.feed(stream) + decoder.close()
        # offsets and lines computed from the input: each block is its own 2 lines
        expected, pos = [], 0
        for i, p in enumerate(PAYLOADS):
            expected.append(Frame(p, pos, 2 * i + 1))
            pos += len(p) + 8
        assert frames == expected
        assert decoder.offset == len(stream)

    @pytest.mark.parametrize("first", [b"", b": ping\n\n", b"event: e\ndata: x\n\n"])
    def test_a_run_after_a_cut_takes_the_fast_path(
        self, monkeypatch: pytest.MonkeyPatch, first: bytes
    ) -> None:
        stream = first + blocks(*PAYLOADS)
        general = SSEDecoder._run
        lines_run: list[int] = []

        def counting(
            self: SSEDecoder, lines: Iterable[bytes], seps: Iterable[int], frames: list[Frame]
        ) -> None:
            lines = list(lines)
            lines_run.append(len(lines))
            general(self, lines, seps, frames)

        monkeypatch.setattr(SSEDecoder, "_run", counting)
        expected = run(SSEDecoder(), [stream[i : i + 1] for i in range(len(stream))])
        for cut in range(len(first) + 1, len(first) + 20):
            lines_run.clear()
            assert run(SSEDecoder(), [stream[:cut], stream[cut:]]) == expected
            # the second chunk: at most the rest of the first block line by line
            assert sum(lines_run) <= 3 + first.count(b"\n"), cut

    def test_many_simple_blocks(self) -> None:
        stream = blocks(*PAYLOADS)
        frames, error, *_ = same_as_general_path([stream])
        assert error is None
        assert data(frames) == PAYLOADS
        assert (frames, None) == model_sse(stream)

    def test_empty_and_odd_payloads(self) -> None:
        odd = [b"", b"data: x", b" ", b":", b"\0", "é\u2028".encode(), b"event: y", b"{}"]
        stream = blocks(*odd)
        frames, error, *_ = same_as_general_path([stream])
        assert error is None
        assert data(frames) == odd
        assert (frames, None) == model_sse(stream)

    @pytest.mark.parametrize(
        "middle",
        [
            b"event: e\ndata: x\n\n",
            b"id: 7\ndata: x\n\n",
            b"id: 8\n\n",
            b"data: x\ndata: y\n\n",
            b"data:x\n\n",
            b"data\n\n",
            b": keep-alive\n\n",
            b": keep-alive\n",
            b"\n",
            b"\n\n\n",
            b"data: x\r\n\r\n",
            b"data: x\r\r",
            b"data: x\n\r",
            b"retry: 5\n\n",
            b"xdata: 1\n\n",
            b"data: \xff\n\n",
            b"event: \xff\ndata: x\n\n",
        ],
    )
    def test_other_blocks_between_runs(self, middle: bytes) -> None:
        stream = blocks(*PAYLOADS[:5]) + middle + blocks(*PAYLOADS[5:10])
        for parts in ([stream], split(stream, [len(stream) // 2])):
            for mode in ("raise", "frame"):
                same_as_general_path(parts, invalid_utf8=mode)
        assert run(SSEDecoder(), [stream]) == model_sse(stream)

    def test_id_before_a_run_is_carried(self) -> None:
        stream = b"id: 7\n\n" + blocks(*PAYLOADS[:3])
        frames, error, last_id, _ = same_as_general_path([b"id: 7\n\n", blocks(*PAYLOADS[:3])])
        assert error is None
        assert [f.id for f in frames] == ["7"] * 3
        assert last_id == "7"
        assert (frames, None) == model_sse(stream)

    def test_every_split_point(self) -> None:
        stream = blocks(*PAYLOADS[:4]) + b"event: e\ndata: x\n\n" + blocks(*PAYLOADS[4:6])
        expected = same_as_general_path([stream])
        for i in range(len(stream) + 1):
            assert same_as_general_path([stream[:i], stream[i:]]) == expected
            for j in range(i, len(stream) + 1, 7):
                assert same_as_general_path([stream[:i], stream[i:j], stream[j:]]) == expected

    def test_partial_block_continued_in_the_next_chunk(self) -> None:
        stream = blocks(*PAYLOADS[:6])
        cut = stream.index(b"data: ", 30) + 9
        frames, error, *_ = same_as_general_path([stream[:cut], stream[cut:]])
        assert error is None
        assert data(frames) == PAYLOADS[:6]
        for tail in (b"data: x\n", b"data: x", b"data: ", b"da", b"data: x\n\r"):
            same_as_general_path([blocks(*PAYLOADS[:3]) + tail, b"\n" + blocks(b"1")])

    def test_unterminated_last_block(self) -> None:
        stream = blocks(*PAYLOADS[:3]) + b"data: end"
        for mode in ("frame", "error"):
            frames, error, *_ = same_as_general_path([stream], unterminated=mode)
            assert data(frames) == [*PAYLOADS[:3], b"end"][: 3 if mode == "error" else 4]
            assert (error is None) == (mode == "frame")

    def test_after_bom_and_split_crlf(self) -> None:
        same_as_general_path([BOM + blocks(*PAYLOADS[:3])])
        same_as_general_path([BOM[:2], BOM[2:] + blocks(*PAYLOADS[:3])])
        same_as_general_path([b"data: a\r", b"\n\r\n" + blocks(*PAYLOADS[:3])])
        same_as_general_path([b"data: a\r\n\r", b"\n" + blocks(*PAYLOADS[:3])])

    @pytest.mark.parametrize("limit", [8, 13, 14, 15, 20, 40, 200])
    def test_max_frame_size_inside_a_run(self, limit: int) -> None:
        payloads = [b"12345678", b"123", b"1234567890123", b"1"]  # lines of 14, 9, 19, 7 bytes
        for stream in (blocks(*payloads), blocks(*payloads) + b"data: 12345678901234"):
            frames, error, *_ = same_as_general_path([stream], max_frame_size=limit)
            assert run(SSEDecoder(max_frame_size=limit), [stream])[0] == frames
        frames, error, *_ = same_as_general_path([blocks(*payloads)], max_frame_size=15)
        assert data(frames) == payloads[:2]
        assert error is not None
        assert error[:2] == at(blocks(*payloads), b"data: 1234567890123")

    def test_whole_run_over_the_limit_but_every_line_within(self) -> None:
        stream = blocks(*PAYLOADS)
        frames, error, *_ = same_as_general_path([stream], max_frame_size=20)
        assert error is None
        assert data(frames) == PAYLOADS

    @pytest.mark.parametrize("mode", ["raise", "frame"])
    def test_invalid_utf8_inside_a_run(self, mode: str) -> None:
        payloads = [*PAYLOADS[:3], "é".encode(), b'{"x":"\xc3"}', *PAYLOADS[3:5]]
        stream = blocks(*payloads)
        frames, error, _, errors = same_as_general_path([stream], invalid_utf8=mode)
        bad_at = at(stream, b'data: {"x":"\xc3')
        if mode == "raise":
            assert data(frames) == payloads[:4]
            assert error is not None
            assert error[:2] == bad_at
        else:
            assert error is None
            assert data(frames) == payloads
            assert [e and e[:2] for e in errors] == [None] * 4 + [bad_at] + [None] * 2

    def test_non_ascii_run_takes_the_fast_path(self, monkeypatch: pytest.MonkeyPatch) -> None:
        payloads = ["é".encode(), "日本".encode(), b"x", "\U0001f600".encode()]

        def general(*args: object) -> None:
            raise AssertionError("the general path ran")

        monkeypatch.setattr(SSEDecoder, "_run", general)
        decoder = SSEDecoder()
        assert data(decoder.feed(blocks(*payloads))) == payloads


block_kinds = st.sampled_from(
    [
        *(blocks(p) for p in PAYLOADS[:3]),
        blocks(b""),
        blocks("é".encode()),
        blocks(b"\xff"),
        b"data: x\ndata: y\n\n",
        b"event: e\n",
        b"id: 1\n",
        b"id: \xfe\n",
        b": c\n",
        b"data:x\n",
        b"\n",
        b"\r",
        b"\r\n",
        b"data: ",
        b"data: x\n",
        b"x",
        BOM,
    ]
)


class TestSSEFastPathProperties:
    @settings(max_examples=400, deadline=None)
    @given(
        cuts_of(st.lists(block_kinds, max_size=30).map(b"".join)),
        st.sampled_from([3, 9, 16, 1000]),
        st.sampled_from(["raise", "frame"]),
    )
    def test_same_as_the_general_path(
        self, case: tuple[bytes, list[int]], limit: int, mode: str
    ) -> None:
        stream, cuts = case
        parts = split(stream, cuts)
        kw: dict[str, Any] = {"max_frame_size": limit, "invalid_utf8": mode}
        same_as_general_path(parts, **kw)
        if limit == 1000 and mode == "raise":
            assert run(SSEDecoder(), parts) == model_sse(stream)


# -- JSON lines ------------------------------------------------------------------------------------


class TestJsonLines:
    def test_lines(self) -> None:
        stream = b'{"a":1}\n[2]\n{"b":"c"}\n'
        assert jsonl(stream) == [
            Frame(b'{"a":1}', 0, 1),
            Frame(b"[2]", 8, 2),
            Frame(b'{"b":"c"}', 12, 3),
        ]

    def test_crlf(self) -> None:
        assert jsonl(b'{"a":1}\r\n[2]\r\n') == [Frame(b'{"a":1}', 0, 1), Frame(b"[2]", 9, 2)]

    def test_lone_cr_is_not_a_line_end(self) -> None:
        assert jsonl(b'{"a":\r1}\n') == [Frame(b'{"a":\r1}', 0, 1)]

    def test_blank_lines_skipped_and_counted(self) -> None:
        stream = b'\n  \n\t\r\n{"a":1}\n\n \r\n[2]\n   '
        assert jsonl(stream) == [
            Frame(b'{"a":1}', stream.index(b"{"), 4),
            Frame(b"[2]", stream.index(b"["), 7),
        ]

    def test_surrounding_whitespace_is_kept(self) -> None:
        assert jsonl(b'  {"a":1} \n') == [Frame(b'  {"a":1} ', 0, 1)]

    def test_final_line_without_newline(self) -> None:
        stream = b'{"a":1}\n{"b":2}'
        assert jsonl(stream) == [Frame(b'{"a":1}', 0, 1), Frame(b'{"b":2}', 8, 2, None, None, True)]

    def test_partial_final_line_is_flagged(self) -> None:
        frames = jsonl(b'{"a":1}\n{"b":')
        assert frames[-1] == Frame(b'{"b":', 8, 2, None, None, True)

    def test_final_line_with_cr_only(self) -> None:
        # no LF follows: the CR is not part of a line end, it stays (JSON whitespace)
        assert jsonl(b'{"a":1}\r') == [Frame(b'{"a":1}\r', 0, 1, None, None, True)]

    def test_unterminated_as_error(self) -> None:
        stream = b'{"a":1}\n{"b":2}'
        frames, error = decode(lambda: JsonLinesDecoder(unterminated="error"), stream)
        assert (frames, error) == ([Frame(b'{"a":1}', 0, 1)], (8, 2))
        assert jsonl(b'{"a":1}\n  ', unterminated="error") == [Frame(b'{"a":1}', 0, 1)]

    def test_bom(self) -> None:
        assert jsonl(BOM + b'{"a":1}\n') == [Frame(b'{"a":1}', 3, 1)]
        frames, error = decode(JsonLinesDecoder, BOM + BOM + b"{}\n")
        assert error is None
        assert frames == [Frame(BOM + b"{}", 3, 1)]

    def test_empty(self) -> None:
        assert jsonl(b"") == []
        assert jsonl(b"\n\n") == []

    def test_invalid_utf8(self) -> None:
        stream = b'{"a":1}\n\n{"b":"\xff"}\n{"c":3}\n'
        frames, error = decode(JsonLinesDecoder, stream)
        assert (frames, error) == ([Frame(b'{"a":1}', 0, 1)], (9, 3))

    def test_max_frame_size(self) -> None:
        assert jsonl(b"[" + b"1" * 8 + b"]\n", max_frame_size=10)[0].data == b"[11111111]"
        # the CR of a CRLF counts
        frames, error = decode(lambda: JsonLinesDecoder(max_frame_size=10), b"{}\n[11111111]\r\n")
        assert (frames, error) == ([Frame(b"{}", 0, 1)], (3, 2))

    def test_endless_line_keeps_memory_bounded(self) -> None:
        decoder = JsonLinesDecoder(max_frame_size=5000)
        decoder.feed(b'{"a":1}\n["')
        with pytest.raises(FramingError, match="max_frame_size") as info:
            for _ in range(1000):
                decoder.feed(b"y" * 333)
                assert decoder.buffered <= 5000
        assert (info.value.offset, info.value.line) == (8, 2)

    @settings(max_examples=300, deadline=None)
    @given(
        cuts_of(
            st.lists(
                st.sampled_from(
                    [b"\n", b"\r", b" ", b"\t", b"{}", b"[1]", b"\xff", "é".encode(), BOM]
                ),
                max_size=30,
            ).map(b"".join)
        )
    )
    def test_matches_a_line_split(self, case: tuple[bytes, list[int]]) -> None:
        stream, cuts = case
        got = run(JsonLinesDecoder(), split(stream, cuts))
        expected: list[Frame] = []
        offset = 3 if stream.startswith(BOM) else 0
        lines = stream[offset:].split(b"\n")
        error = None
        for number, line in enumerate(lines, 1):
            content = line[:-1] if line.endswith(b"\r") and number < len(lines) else line
            if content.strip(b" \t\r"):
                try:
                    content.decode()
                except UnicodeDecodeError:
                    error = (offset, number)
                    break
                expected.append(Frame(content, offset, number, None, None, number == len(lines)))
            offset += len(line) + 1
        assert got == (expected, error)


# -- detection -------------------------------------------------------------------------------------


class TestDetectFormat:
    @pytest.mark.parametrize(
        ("prefix", "expected"),
        [
            (b'{"type":"RUN_STARTED"}', "jsonl"),
            (b"[", "json-array"),
            (b" \t\r\n {", "jsonl"),
            (BOM + b"{", "jsonl"),
            (BOM + b"\n\n[", "json-array"),
            (b"data: {", "sse"),
            (b"data:", "sse"),
            (b"data\n", "sse"),
            (b"data\r\n", "sse"),
            (b"event: x", "sse"),
            (b"id:1", "sse"),
            (b"retry: 3", "sse"),
            (b":", "sse"),
            (b": keep-alive\n", "sse"),
            (b"\n\ndata: x", "sse"),
            (BOM + b":", "sse"),
            (b"", None),
            (b"  \r\n\t", None),
            (b"\xef", None),
            (b"\xef\xbb", None),
            (BOM, None),
            (b"d", None),
            (b"dat", None),
            (b"data", None),
            (b"  i", None),
            (b"id", None),
            (b"retr", None),
            (b"ev", None),
        ],
    )
    def test_rule(self, prefix: bytes, expected: str | None) -> None:
        assert detect_format(prefix) == expected

    @pytest.mark.parametrize(
        ("prefix", "offset", "line"),
        [
            (b"hello", 0, 1),
            (b"datum: 1", 0, 1),
            (b"data : 1", 0, 1),
            (b"ids: 1", 0, 1),
            (b"\n\n  x", 4, 3),
            (b'"text"\n', 0, 1),
            (b"42\n", 0, 1),
            (BOM + b"<html>", 3, 1),
            (b"\xef\xbbx", 0, 1),
        ],
    )
    def test_undecidable(self, prefix: bytes, offset: int, line: int) -> None:
        with pytest.raises(FramingError, match="format") as info:
            detect_format(prefix)
        assert (info.value.offset, info.value.line) == (offset, line)


class TestAutoDecoder:
    def test_sse(self) -> None:
        stream = BOM + b"\n: hi\ndata: 1\n\nevent: e\ndata: 2\n\n"
        frames, error = decode(AutoDecoder, stream)
        assert error is None
        assert frames == sse(stream)
        assert data(frames) == [b"1", b"2"]
        decoder = AutoDecoder()
        assert decoder.format is None
        decoder.feed(b"  \n")
        assert decoder.format is None
        assert decoder.buffered == 3
        decoder.feed(b"dat")
        assert decoder.format is None
        decoder.feed(b"a:")
        assert decoder.format == "sse"

    def test_jsonl(self) -> None:
        stream = b'\r\n {"a":1}\n[2]'
        frames, error = decode(AutoDecoder, stream)
        assert error is None
        assert frames == jsonl(stream)
        assert data(frames) == [b' {"a":1}', b"[2]"]

    def test_empty_and_blank_streams(self) -> None:
        for stream in (b"", b"\n \r\n", BOM, BOM + b"\n"):
            assert decode(AutoDecoder, stream) == ([], None)

    def test_undecidable(self) -> None:
        assert decode(AutoDecoder, b"\n<html>\n") == ([], (1, 2))
        # the stream ends before the format is known
        assert decode(AutoDecoder, b"\ndat") == ([], (1, 2))
        assert decode(AutoDecoder, b"\xef\xbb") == ([], (0, 1))

    def test_leading_whitespace_is_bounded(self) -> None:
        decoder = AutoDecoder(max_frame_size=100)
        with pytest.raises(FramingError, match="max_frame_size"):
            for _ in range(100):
                decoder.feed(b"\n" * 7)
                assert decoder.buffered <= 100

    def test_errors_propagate_and_stick(self) -> None:
        decoder = AutoDecoder()
        with pytest.raises(FramingError):
            decoder.feed(b"nope")
        with pytest.raises(FramingError):
            decoder.close()

    def test_make_decoder(self) -> None:
        assert isinstance(make_decoder("sse"), SSEDecoder)
        assert isinstance(make_decoder("jsonl"), JsonLinesDecoder)
        assert isinstance(make_decoder(), AutoDecoder)
        with pytest.raises(UsageError, match="format"):
            make_decoder("xml")  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="unterminated"):
            make_decoder(unterminated="drop")  # type: ignore[arg-type]


# -- encoders --------------------------------------------------------------------------------------


class TestEncoders:
    def test_sse_like_the_agui_encoder(self) -> None:
        # the AG-UI encoder writes `data: ${JSON.stringify(event)}\n\n`
        payload = b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}'
        assert encode_sse(payload) == b"data: " + payload + b"\n\n"

    def test_sse_event_and_id(self) -> None:
        assert (
            encode_sse(b"{}", event="message", id="42") == b"event: message\nid: 42\ndata: {}\n\n"
        )
        assert sse(encode_sse(b"{}", event="e", id="7")) == [Frame(b"{}", 0, 1, "e", "7")]

    def test_sse_multiline(self) -> None:
        assert encode_sse(b"a\nb") == b"data: a\ndata: b\n\n"
        assert encode_sse(b"a\r\nb\rc\n") == b"data: a\ndata: b\ndata: c\ndata: \n\n"
        assert data(sse(encode_sse(b"\n"))) == [b"\n"]
        assert data(sse(encode_sse(b""))) == [b""]
        assert data(sse(encode_sse(b" x"))) == [b" x"]

    @pytest.mark.parametrize(
        "kw", [{"event": "a\nb"}, {"event": "a\r"}, {"id": "1\n"}, {"id": "\r"}, {"id": "a\0b"}]
    )
    def test_sse_rejects_bad_event_or_id(self, kw: dict[str, str]) -> None:
        with pytest.raises(UsageError, match="cannot contain"):
            encode_sse(b"{}", **kw)

    def test_jsonl(self) -> None:
        assert encode_jsonl(b'{"a":1}') == b'{"a":1}\n'
        for bad in (b'{"a":\n1}', b"{}\r", b"\n"):
            with pytest.raises(UsageError, match="raw line end"):
                encode_jsonl(bad)

    @settings(max_examples=300, deadline=None)
    @given(st.text(), st.none() | st.text(), st.none() | st.text())
    def test_sse_round_trip(self, text: str, event: str | None, id: str | None) -> None:
        payload = text.encode()
        try:
            encoded = encode_sse(payload, event=event, id=id)
        except UsageError:
            assert any(c in (event or "") + (id or "") for c in "\r\n") or "\0" in (id or "")
            return
        frames = sse(encoded) if len(encoded) < 60 else run(SSEDecoder(), [encoded])[0]
        normalized = payload.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        assert frames == [Frame(normalized, 0, 1, event or None, id or None)]

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.text().filter(lambda t: "\n" not in t and "\r" not in t), max_size=5))
    def test_jsonl_round_trip(self, texts: list[str]) -> None:
        stream = b"".join(encode_jsonl(t.encode()) for t in texts)
        frames = run(JsonLinesDecoder(), [stream])[0]
        assert data(frames) == [t.encode() for t in texts if t.strip(" \t")]


# -- async wrappers --------------------------------------------------------------------------------


async def chunks_of(parts: Sequence[bytes | str], closed: list[bool]) -> AsyncIterator[bytes | str]:
    try:
        for part in parts:
            yield part
    finally:
        closed.append(True)


SSE_STREAM = b'data: {"a":1}\n\n: ping\n\nevent: e\ndata: {"b":\ndata: 2}\n\n'
SSE_FRAMES = [
    Frame(b'{"a":1}', 0, 1),
    Frame(b'{"b":\n2}', SSE_STREAM.index(b"event"), 5, "e"),
]


class TestAsync:
    @pytest.mark.anyio
    async def test_from_byte_chunks(self) -> None:
        closed: list[bool] = []
        parts = [SSE_STREAM[i : i + 5] for i in range(0, len(SSE_STREAM), 5)]
        async with aclosing(aiter_frames(chunks_of(parts, closed))) as frames:
            assert [f async for f in frames] == SSE_FRAMES
        assert closed == [True]

    @pytest.mark.anyio
    async def test_from_text_chunks_offsets_count_utf8_bytes(self) -> None:
        closed: list[bool] = []
        parts = ['{"a":"é"}\n{"b":', "1}\n", "", "[3]"]
        encoded = "".join(parts).encode()
        async with aclosing(aiter_frames(chunks_of(parts, closed), format="jsonl")) as frames:
            got = [f async for f in frames]
        assert got == [
            Frame('{"a":"é"}'.encode(), 0, 1),
            Frame(b'{"b":1}', encoded.index(b'{"b"'), 2),
            Frame(b"[3]", encoded.index(b"[3]"), 3, None, None, True),
        ]

    @pytest.mark.anyio
    async def test_lone_surrogate_in_text(self) -> None:
        closed: list[bool] = []
        src = chunks_of(["data: é\n", "data: \ud800\n"], closed)
        with pytest.raises(FramingError, match="surrogate") as info:
            async with aclosing(aiter_frames(src)) as frames:
                async for _ in frames:
                    pass
        # Refused as the bytes it would be are (as wrap() refuses it): the line is named.
        assert (info.value.offset, info.value.line) == (len("data: é\n".encode()), 2)
        assert closed == [True]

    @pytest.mark.anyio
    async def test_break_closes_the_source(self) -> None:
        closed: list[bool] = []
        async with aclosing(aiter_frames(chunks_of([SSE_STREAM] * 3, closed))) as frames:
            async for _ in frames:
                break
        assert closed == [True]

    @pytest.mark.anyio
    async def test_error_closes_the_source(self) -> None:
        closed: list[bool] = []
        src = chunks_of([b"data: 1\n\n", b"data: \xff\n\n", b"data: 3\n\n"], closed)
        got: list[Frame] = []
        with pytest.raises(FramingError) as info:
            async with aclosing(aiter_frames(src, format="sse")) as frames:
                async for frame in frames:
                    got.append(frame)
        assert got == [Frame(b"1", 0, 1)]
        assert (info.value.offset, info.value.line) == (9, 3)
        assert closed == [True]

    @pytest.mark.anyio
    async def test_plain_async_iterable(self) -> None:
        class Source:
            def __aiter__(self) -> AsyncIterator[bytes]:
                return self.gen()

            async def gen(self) -> AsyncIterator[bytes]:
                yield b"{}\n[2]"

        async with aclosing(aiter_frames(Source())) as frames:
            assert data([f async for f in frames]) == [b"{}", b"[2]"]

    @pytest.mark.anyio
    async def test_file(self, tmp_path: Path) -> None:
        path = tmp_path / "events.sse"
        path.write_bytes(SSE_STREAM * 3000)
        async with aclosing(aiter_file_frames(path, chunk_size=1000)) as frames:
            got = [f async for f in frames]
        assert len(got) == 6000
        assert got[:2] == SSE_FRAMES
        assert got[-1].offset == len(SSE_STREAM) * 2999 + SSE_FRAMES[1].offset
        assert got[-1].line == SSE_STREAM.count(b"\n") * 2999 + SSE_FRAMES[1].line

    @pytest.mark.anyio
    async def test_file_jsonl_break(self, tmp_path: Path) -> None:
        path = tmp_path / "events.jsonl"
        path.write_bytes(b'{"a":1}\n' * 100_000)
        async with aclosing(aiter_file_frames(str(path), format="jsonl")) as frames:
            async for frame in frames:
                assert frame == Frame(b'{"a":1}', 0, 1)
                break

    @staticmethod
    def client(body: bytes, content_type: str | None, pieces: int = 7) -> httpx.AsyncClient:
        async def stream() -> AsyncIterator[bytes]:
            size = max(1, len(body) // pieces)
            for i in range(0, len(body), size):
                yield body[i : i + size]

        def handler(request: httpx.Request) -> httpx.Response:
            headers = {"content-type": content_type} if content_type else {}
            return httpx.Response(200, headers=headers, content=stream())

        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    @pytest.mark.anyio
    @pytest.mark.parametrize("content_type", ["text/event-stream; charset=utf-8", None])
    async def test_httpx_sse(self, content_type: str | None) -> None:
        async with (
            self.client(SSE_STREAM, content_type) as client,
            client.stream("GET", "http://agent.test/run") as response,
            aclosing(aiter_httpx_frames(response)) as frames,
        ):
            assert [f async for f in frames] == SSE_FRAMES

    @pytest.mark.anyio
    @pytest.mark.parametrize("content_type", ["application/x-ndjson", "application/jsonl", None])
    async def test_httpx_jsonl(self, content_type: str | None) -> None:
        body = b'{"a":1}\n{"b":2}\n'
        async with (
            self.client(body, content_type) as client,
            client.stream("GET", "http://agent.test/run") as response,
            aclosing(aiter_httpx_frames(response)) as frames,
        ):
            assert data([f async for f in frames]) == [b'{"a":1}', b'{"b":2}']

    @pytest.mark.anyio
    async def test_httpx_content_type_wins_over_the_body(self) -> None:
        # a JSON-lines body served as an event stream: under the SSE rules its lines are
        # fields with unknown names, which the standard ignores
        body = b'{"a":1}\n{"b":2}\n'
        async with (
            self.client(body, "text/event-stream") as client,
            client.stream("GET", "http://agent.test/run") as response,
            aclosing(aiter_httpx_frames(response)) as frames,
        ):
            assert [f async for f in frames] == []

    @pytest.mark.anyio
    # Leaving an httpx body early lets httpx's own nested generators (aiter_raw inside
    # aiter_bytes) be garbage-collected unexhausted, which trio reports; httpx issue #3686.
    @pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning")
    async def test_httpx_explicit_format_and_error(self) -> None:
        body = b"data: 1\n\ndata: " + b"x" * 100 + b"\n\n"
        async with (
            self.client(body, "application/octet-stream", pieces=20) as client,
            client.stream("GET", "http://agent.test/run") as response,
        ):
            got: list[Frame] = []
            with pytest.raises(FramingError, match="max_frame_size") as info:
                async with aclosing(
                    aiter_httpx_frames(response, format="sse", max_frame_size=50)
                ) as frames:
                    async for frame in frames:
                        got.append(frame)
            assert got == [Frame(b"1", 0, 1)]
            assert (info.value.offset, info.value.line) == (9, 3)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=20), max_size=10))
def test_feeding_never_needs_more_than_the_input(parts: list[bytes]) -> None:
    """Every decoder consumes all it is fed: after close nothing is buffered."""
    for make in (SSEDecoder, JsonLinesDecoder):
        decoder = make()
        outcome = run(decoder, parts)
        if outcome[1] is None:
            assert decoder.buffered == 0


# -- one JSON array of events ---------------------------------------------------------------------


def _elements(stream: bytes) -> list[tuple[bytes, int, int]]:
    """A model: the elements of a JSON array stream with their offsets and lines, by parsing
    the whole array with msgspec and finding each element's text from its start."""
    text = stream[3:] if stream.startswith(BOM) else stream
    skip = len(stream) - len(text)
    values = msgspec.json.decode(text)
    out, pos = [], text.index(b"[") + 1
    for value in values:
        while text[pos : pos + 1] in b" \t\r\n,":
            pos += 1
        encoded = msgspec.json.encode(value)
        # The element's text is the shortest prefix that decodes to the value.
        end = pos + 1
        while True:
            try:
                if msgspec.json.decode(text[pos:end]) == value and (
                    end == len(text) or text[end : end + 1] in b" \t\r\n,]"
                ):
                    break
            except msgspec.DecodeError:
                pass
            end += 1
        del encoded
        out.append((text[pos:end], skip + pos, 1 + text.count(b"\n", 0, pos)))
        pos = end
    return out


class TestJsonArrayDecoder:
    @pytest.mark.parametrize(
        "stream",
        [
            b"[]",
            b" \r\n[ ]\n",
            b'[{"type":"RAW","event":1}]',
            BOM + b'[{"a": "]}\\"{["}, {"b": [1, {"c": []}]}]\n',
            b'[\n  {"a": 1},\n  {"b": "x\\\\"}\n]',
            b'[1, "two", true, null, -3.5e2, [4], {"five": 5}]',
            '[{"é": "ü"}, {"a": "\u2028"}]'.encode(),
        ],
    )
    def test_elements_with_their_places_however_split(self, stream: bytes) -> None:
        frames, error = decode(JsonArrayDecoder, stream)
        assert error is None
        assert [(f.data, f.offset, f.line) for f in frames] == _elements(stream)
        # Detected by the first significant byte, and the same through AutoDecoder.
        assert detect_format(stream) in ("json-array", None)
        assert decode(AutoDecoder, stream) == (frames, None)

    @pytest.mark.parametrize(
        ("stream", "where", "message"),
        [
            (b'[{"a":1}', 8, "before its closing"),
            (b'[{"a":1},', 9, "before its closing"),
            (b'[{"a":1}, {"b": [', 10, "inside element 1"),
            (b'[{"a": "}]', 1, "inside element 0"),
            (b'[{"a":1}] x', 10, "after the JSON array"),
            (b'[{"a":1}][]', 9, "after the JSON array"),
            (b'[{"a":1} {"b":2}]', 9, "expected ','"),
            (b'[{"a":1},]', 9, "trailing"),
            (b"[,]", 1, "a ','"),
            (b'\n\n{"a":1}', 2, "must begin with '['"),
        ],
    )
    def test_what_is_not_one_array_names_its_byte(
        self, stream: bytes, where: int, message: str
    ) -> None:
        frames, error = decode(JsonArrayDecoder, stream)
        assert error == (where, 1 + stream.count(b"\n", 0, where))
        with pytest.raises(FramingError, match=re.escape(message)):
            run_raising(JsonArrayDecoder(), stream)
        # The elements before the fault are delivered first.
        assert [f.data for f in frames] == ([b'{"a":1}'] if stream.startswith(b'[{"a":1}') else [])

    def test_an_element_over_max_frame_size_fails_before_it_is_read_whole(self) -> None:
        decoder = JsonArrayDecoder(max_frame_size=100)
        assert [f.data for f in decoder.feed(b'[{"a":1}, {"b": "')] == [b'{"a":1}']
        decoder.feed(b"x" * 50)
        assert decoder.buffered == 57
        with pytest.raises(
            FramingError, match=r"element 1 .* larger than max_frame_size=100"
        ) as exc:
            decoder.feed(b"x" * 50)
        assert (exc.value.offset, exc.value.line) == (10, 1)
        # An element of exactly the limit is fine.
        element = b'{"k": "' + b"y" * 91 + b'"}'
        assert len(element) == 100
        assert JsonArrayDecoder(max_frame_size=100).feed(b"[" + element + b"]") == [
            Frame(element, 1, 1)
        ]

    def test_deep_nesting_is_counted_not_recursed(self) -> None:
        depth = 200_000
        stream = b"[" + b"[" * depth + b"]" * depth + b', {"a": 1}]'
        decoder = JsonArrayDecoder()
        frames = decoder.feed(stream) + decoder.close()
        assert [len(f.data) for f in frames] == [2 * depth, 8]

    def test_not_utf8(self) -> None:
        stream = b'[{"a": "\xff"}, {"b": 2}]'
        frames, error = run(JsonArrayDecoder(), [stream])
        assert frames == [] and error == (1, 1)
        frames, error = run(JsonArrayDecoder(invalid_utf8="frame"), [stream])
        assert error is None
        assert [f.error is not None for f in frames] == [True, False]

    def test_make_decoder_and_a_closed_decoder(self) -> None:
        decoder = make_decoder("json-array")
        assert isinstance(decoder, JsonArrayDecoder)
        assert decoder.feed(b"[]") == [] and decoder.close() == []
        with pytest.raises(UsageError):
            decoder.feed(b"")
        assert make_decoder().feed(b"[{}]") == [Frame(b"{}", 1, 1)]

    @given(st.lists(st.integers(0, 60), max_size=8))
    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    def test_split_anywhere(self, cuts: list[int]) -> None:
        stream = b'\r\n[ {"a": "x\\"]"}\r\n, [1,\n[2]] ,"s\\\\",7 ]  \n'
        assert len(stream) <= 60
        expected = run(JsonArrayDecoder(), [stream])
        assert expected[1] is None and len(expected[0]) == 4
        assert run(JsonArrayDecoder(), split(stream, [c for c in cuts if c <= len(stream)])) == (
            expected
        )


def run_raising(decoder: FrameDecoder, stream: bytes) -> None:
    decoder.feed(stream)
    decoder.feed(b"")
    decoder.close()
