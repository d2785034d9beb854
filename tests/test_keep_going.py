"""Keep-going mode loses nothing: property tests on randomly corrupted valid streams.

Streams come from :func:`tests.strategies.runs` (valid-ish AG-UI runs with text, tool calls,
reasoning, activity, state, chunks in subagent lanes, snapshots, steps, metadata), encoded as SSE
or JSON lines, then corrupted, and run through
``wrap(source, ExpandChunks(), Verify(), Accumulate(store))`` delivered in random chunks.

What is asserted, for every corruption:

- **No crash, no hang.** Keep-going mode raises nothing, with one documented exception: when
  the format is left to detection and the damage hits the stream's first bytes, a stream that
  is neither SSE nor JSON lines is a FramingError in every mode (the other fatal framing error,
  a frame over ``max_frame_size``, cannot arise from these corruptions). Default and strict
  modes raise nothing but the package's own :class:`~agui_meta.DataError`, and strict mode
  never gets further than default mode. Inputs are bounded (a few kilobytes), so a run that
  ends is a run that did not hang; nothing is timed.

- **The prefix is never lost (P2).** Let ``k`` be the first frame the corruption touches (the
  frame whose bytes, terminator included, hold the first changed byte, or the first moved,
  deleted or inserted event). Frames before ``k`` are byte-identical in both streams, so both
  runs build the same items from them. Such an item must still be in the final store, with
  the same wire form (content, metadata, tool calls, every field), unless something at or
  after ``k`` may legitimately have changed it: an id is *settled* when no event that reached
  the accumulator from frame ``k`` on, in the clean run or in the corrupted one, names it
  (``messageId``, ``toolCallId``, ``parentMessageId``, ``entityId``, an input message's id) and
  no MESSAGES_SNAPSHOT reached it from frame ``k`` on (a snapshot may replace or delete any
  message). A message is compared when its id and the ids of all its tool calls are settled.
  Both runs are keep-going runs, so this holds whether or not the clean stream was valid.

Single-frame damage (truncating, flipping bytes inside, ``metadata: null``, a wrong field type,
deleting the event, injecting a garbage frame) also has:

- **Isolation (P1).** The damaged frame is worth exactly what it decodes to on its own: the
  corrupted stream builds the same store (messages and state) as the clean stream with event
  ``k`` removed (when the damaged frame does not decode: it is skipped and reported at index
  ``k``) or replaced by the event it decodes to. No neighbour is lost, whatever the chunking.

- **The suffix is never lost (P3).** When the event ``k`` removed leaves a stream that is valid
  in default mode, and event ``k`` was neither a chunk nor an event that closed a chunk stream
  (so chunk lanes, the verifier and the accumulator see every other event exactly as before),
  the corrupted stream builds exactly what the clean stream without event ``k`` builds, and
  every message of the clean run that event ``k`` does not name is present and identical. This
  is the "everything assembled before and after a bad event is kept" of keep-going mode, under
  the one formulation that does not depend on the verifier's reaction to a missing opener or
  closer: those cascade (a missing TEXT_MESSAGE_END makes RUN_FINISHED fail, a missing
  RUN_STARTED makes the whole run fail, as in the reference), and P1 and P2 cover them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import agui_meta
from agui_meta import Accumulate, DataError, EventDecoder, ExpandChunks, Report, Transducer, Verify
from agui_meta._framing import JsonLinesDecoder, SSEDecoder
from agui_meta.events import Event, MessagesSnapshotEvent, RunStartedEvent
from tests.strategies import runs

Format = Literal["sse", "jsonl"]
Wire = dict[str, Any]

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# ---------------------------------------------------------------------------------------------
# Running a stream


def frame_of(payload: bytes, fmt: Format) -> bytes:
    return b"data: " + payload + b"\n\n" if fmt == "sse" else payload + b"\n"


def payload_of(event: Wire) -> bytes:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


class Tap(Transducer[Event, Event]):
    """Records every event that reaches the accumulator, with the source index it came from."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, Event]] = []

    def feed(self, item: Event) -> None:
        self.seen.append((self.ctx.index, item))
        self.emit(item)


@dataclass
class Run:
    error: BaseException | None
    reports: list[Report]
    messages: list[Wire]
    state: Any
    seen: list[tuple[int, Event]] = field(default_factory=list)

    def store(self) -> tuple[Any, Any]:
        return self.messages, self.state

    def by_id(self) -> dict[Any, list[Wire]]:
        out: dict[Any, list[Wire]] = {}
        for message in self.messages:
            out.setdefault(message.get("id"), []).append(message)
        return out


async def run(chunks: list[bytes], mode: agui_meta.Mode, fmt: str) -> Run:
    store = agui_meta.Store()
    tap = Tap()
    reports: list[Report] = []
    error: BaseException | None = None
    try:
        async with agui_meta.wrap(
            chunks,
            ExpandChunks(),
            Verify(),
            tap,
            Accumulate(store),
            mode=mode,
            on_report=reports.append,
            format=fmt,
        ) as stream:
            await stream.drain()
    except Exception as exc:  # noqa: BLE001 - what each property allows is asserted by the caller
        error = exc
    return Run(error, reports, store.messages_wire(), store.state, tap.seen)


def run_all(*jobs: tuple[list[bytes], agui_meta.Mode, str]) -> list[Run]:
    async def main() -> list[Run]:
        return [await run(*job) for job in jobs]

    return anyio.run(main)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """``data`` split at the given points (any order, duplicates allowed)."""
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges)] or [b""]


# ---------------------------------------------------------------------------------------------
# What an event names


def named(event: Event) -> set[str] | None:
    """The ids an accepted event may change (``None``: any message, a MESSAGES_SNAPSHOT)."""
    if isinstance(event, MessagesSnapshotEvent):
        return None
    ids = set()
    for attr in ("message_id", "tool_call_id", "parent_message_id", "entity_id"):
        value = getattr(event, attr, None)
        if isinstance(value, str):
            ids.add(value)
    if isinstance(event, RunStartedEvent) and event.input is not msgspec.UNSET:
        for message in msgspec.to_builtins(event.input.messages):
            ids.add(message["id"])
            ids.update(call["id"] for call in message.get("toolCalls", ()))
    return ids


def touched_from(k: int, *runs_: Run) -> set[str] | None:
    """Every id named by an event that reached the accumulator from frame ``k`` on."""
    ids: set[str] = set()
    for r in runs_:
        for index, event in r.seen:
            if index >= k or index < 0:
                more = named(event)
                if more is None:
                    return None
                ids |= more
    return ids


def ids_of(message: Wire) -> set[Any]:
    return {message.get("id"), *(call.get("id") for call in message.get("toolCalls", ()))}


def assert_kept(expected: Run, got: Run, unsettled: set[str] | None, what: str) -> int:
    """Every message of ``expected`` whose ids are all settled is in ``got``, identical."""
    if unsettled is None:
        return 0
    compared = 0
    mine = got.by_id()
    for key, messages in expected.by_id().items():
        if any(ids_of(m) & unsettled for m in messages):
            continue
        if any(ids_of(m) & unsettled for m in mine.get(key, [])):
            continue
        assert mine.get(key) == messages, f"{what}: message {key!r} lost or changed"
        compared += 1
    return compared


# ---------------------------------------------------------------------------------------------
# Streams and corruptions


@dataclass
class Stream:
    events: list[Wire]
    fmt: Format

    def frames(self) -> list[bytes]:
        return [frame_of(payload_of(e), self.fmt) for e in self.events]

    def data(self) -> bytes:
        return b"".join(self.frames())

    def frame_at(self, position: int) -> int:
        """The index of the frame whose bytes (terminator included) hold ``position``."""
        start = 0
        for i, frame in enumerate(self.frames()):
            start += len(frame)
            if position < start:
                return i
        return len(self.events)


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    return Stream(draw(runs()), draw(st.sampled_from(["sse", "jsonl"])))


def baseline(stream: Stream) -> Run:
    [clean] = run_all(([stream.data()], "keep_going", stream.fmt))
    assert clean.error is None
    return clean


def check_modes(data: bytes, chunks: list[bytes], fmt: str, *, k: int = -1) -> Run:
    """Keep-going raises nothing; default and strict raise only the package's data errors.

    With ``fmt="auto"``, damage to the first frame (``k == 0``) may leave a stream that is
    neither SSE nor JSON lines: that one documented FramingError ends every mode.
    """
    keep, default, strict = run_all(
        (chunks, "keep_going", fmt), ([data], "default", fmt), ([data], "strict", fmt)
    )
    if fmt == "auto" and k == 0 and isinstance(keep.error, agui_meta.FramingError):
        assert "cannot tell the stream's format" in str(keep.error)
        assert keep.error.offset is not None and keep.messages == []
        keep.error = None
    assert keep.error is None, repr(keep.error)
    for other in (default, strict):
        assert other.error is None or isinstance(other.error, DataError), repr(other.error)
    # Strict stops at the first problem: it never gets further than default mode.
    if default.error is not None:
        assert strict.error is not None
        first, last = strict.error.index, default.error.index  # type: ignore[attr-defined]
        assert first is not None and last is not None and first <= last
    return keep


# -- byte-level corruption: anything, anywhere ---------------------------------------------------


@st.composite
def byte_corruptions(draw: st.DrawFn, data: bytes) -> tuple[bytes, int]:
    """The corrupted bytes and the position of the first changed byte."""
    n = len(data)
    kind = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "garbage-line"]))
    if kind == "flip":
        out = bytearray(data)
        # Late damage more often: it leaves a longer prefix to check.
        low = draw(st.sampled_from([0, n // 2, n - n // 4 - 1]))
        points = draw(st.lists(st.integers(low, n - 1), min_size=1, max_size=4))
        for p in points:
            out[p] ^= draw(st.integers(1, 255))
        return bytes(out), min(points)
    if kind == "delete":
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a + 1, min(n, a + 40)))
        return data[:a] + data[b:], a
    if kind == "insert":
        p = draw(st.integers(0, n))
        return data[:p] + draw(st.binary(min_size=1, max_size=20)) + data[p:], p
    if kind == "truncate":
        p = draw(st.integers(0, n - 1))
        return data[:p], p
    p = draw(st.integers(0, n))
    line = draw(
        st.sampled_from([b"\x89PNG\r\n\x1a\n", b"<html>oops</html>\n", b"\x00\xff\xfe\n", b"}{\n"])
    )
    return data[:p] + line + data[p:], p


@SETTINGS
@given(streams(), st.data())
def test_any_byte_corruption_is_survived_and_the_prefix_is_kept(
    stream: Stream, data: st.DataObject
) -> None:
    clean_bytes = stream.data()
    assume(clean_bytes)
    bad, position = data.draw(byte_corruptions(clean_bytes))
    assume(bad != clean_bytes)
    points = data.draw(st.lists(st.integers(0, len(bad)), max_size=6))
    k = stream.frame_at(position)
    detect: bool = data.draw(st.booleans())  # let the pipeline tell SSE from JSON lines
    keep = check_modes(bad, cut(bad, points), "auto" if detect else stream.fmt, k=k)
    clean = baseline(stream)
    assert_kept(clean, keep, touched_from(k, clean, keep), "byte corruption")


# -- event-level mutations: delete, duplicate, swap, move ---------------------------------------


@SETTINGS
@given(streams(), st.data())
def test_deleted_duplicated_or_swapped_events_keep_the_prefix(
    stream: Stream, data: st.DataObject
) -> None:
    n = len(stream.events)
    events = list(stream.events)
    kind = data.draw(st.sampled_from(["delete", "duplicate", "swap", "move"]))
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, n - 1))
    if kind == "delete":
        del events[i]
        k = i
    elif kind == "duplicate":
        events.insert(j, events[i])
        k = j
    elif kind == "swap":
        events[i], events[j] = events[j], events[i]
        k = min(i, j)
    else:
        events.insert(j, events.pop(i))
        k = min(i, j)
    assume(events != stream.events)
    mutated = Stream(events, stream.fmt)
    points = data.draw(st.lists(st.integers(0, len(mutated.data())), max_size=6))
    keep = check_modes(mutated.data(), cut(mutated.data(), points), stream.fmt)
    clean = baseline(stream)
    assert_kept(clean, keep, touched_from(k, clean, keep), kind)


# -- single-frame damage: isolation, prefix and suffix ------------------------------------------

Damage = Callable[[Wire, st.DataObject], bytes]


def _truncate(event: Wire, data: st.DataObject) -> bytes:
    payload = payload_of(event)
    return payload[: data.draw(st.integers(0, len(payload) - 1))]


def _flip(event: Wire, data: st.DataObject) -> bytes:
    out = bytearray(payload_of(event))
    for _ in range(data.draw(st.integers(1, 3))):
        p = data.draw(st.integers(0, len(out) - 1))
        out[p] ^= data.draw(st.integers(1, 255))
        if out[p] in (10, 13):  # a line end would split the frame: that is byte-level damage
            out[p] = 32
    return bytes(out)


def _null_metadata(event: Wire, data: st.DataObject) -> bytes:
    return payload_of({**event, "metadata": None})


def _wrong_type(event: Wire, data: st.DataObject) -> bytes:
    key = data.draw(st.sampled_from(sorted(event)))
    value: Any = data.draw(st.sampled_from([7, 1.5, True, None, [], {}, "x"]))
    return payload_of({**event, key: value})


def _inject(event: Wire, data: st.DataObject) -> bytes:
    # A garbage frame of its own, before the event (the event itself is then intact).
    return data.draw(
        st.sampled_from([b"\xff\xfe garbage", b"not json", b"[]", b"{}", b'{"type":"NOPE"}'])
    )


def _delete(event: Wire, data: st.DataObject) -> bytes:
    return b""


DAMAGE: dict[str, Damage] = {
    "truncate": _truncate,
    "flip": _flip,
    "null-metadata": _null_metadata,
    "wrong-type": _wrong_type,
    "inject": _inject,
    "delete": _delete,
}


#: Event types whose absence leaves every other event valid (nothing opens or closes).
LOCAL = frozenset(
    {
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_ARGS",
        "REASONING_MESSAGE_CONTENT",
        "TOOL_CALL_RESULT",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
        "CUSTOM",
        "RAW",
        "REASONING_ENCRYPTED_VALUE",
    }
)


def decode_alone(payload: bytes) -> Wire | None:
    """What a frame holding ``payload`` is worth on its own: its event, or None (skipped)."""
    try:
        event = EventDecoder(on_report=lambda r: None).decode(payload)
    except DataError:
        return None
    return None if event is None else msgspec.to_builtins(event)


@SETTINGS
@given(streams(), st.sampled_from(sorted(DAMAGE)), st.data())
def test_one_damaged_frame_costs_that_event_and_nothing_else(
    stream: Stream, kind: str, data: st.DataObject
) -> None:
    n = len(stream.events)
    local = [i for i, e in enumerate(stream.events) if e["type"] in LOCAL]
    prefer_local: bool = data.draw(st.booleans())
    if local and prefer_local:
        k = data.draw(st.sampled_from(local))  # more often an event whose loss is local (P3)
    else:
        k = data.draw(st.integers(0, n - 1))
    payload = DAMAGE[kind](stream.events[k], data)
    frames = stream.frames()
    if kind == "delete":
        del frames[k]
    elif kind == "inject":
        frames.insert(k, frame_of(payload, stream.fmt))
    else:
        frames[k] = frame_of(payload, stream.fmt)
    bad = b"".join(frames)
    points = data.draw(st.lists(st.integers(0, len(bad)), max_size=6))
    keep = check_modes(bad, cut(bad, points), stream.fmt)

    # P1: isolation. What the damaged frame is worth on its own, in place of event k.
    if kind == "inject":
        worth = decode_alone(payload)
        alternative = list(stream.events)
        if worth is not None:
            alternative.insert(k, worth)
        skipped = worth is None
    else:
        worth = None if kind == "delete" else decode_alone(payload)
        alternative = [e for i, e in enumerate(stream.events) if i != k]
        if worth is not None:
            alternative.insert(k, worth)
        skipped = worth is None and kind != "delete"
    [expected] = run_all(([Stream(alternative, stream.fmt).data()], "keep_going", stream.fmt))
    assert keep.store() == expected.store(), "a damaged frame cost more than itself"
    if skipped and payload.strip(b" \t\r\n"):
        assert any(r.index == k for r in keep.reports), "a skipped frame went unreported"

    # P2: the prefix.
    clean = baseline(stream)
    assert_kept(clean, keep, touched_from(k, clean, keep), kind)

    # P3: the suffix, when event k's absence changes nothing else's fate.
    if kind == "inject" or (not skipped and kind != "delete"):
        return
    event_k = stream.events[k]
    if event_k["type"].endswith("_CHUNK"):
        return
    outputs_k = [e for i, e in clean.seen if i == k]
    if len(outputs_k) != 1 or outputs_k[0].type != event_k["type"]:
        return  # rejected, or it closed a chunk stream
    without = Stream([e for i, e in enumerate(stream.events) if i != k], stream.fmt)
    default_clean, default_without = run_all(
        ([stream.data()], "default", stream.fmt), ([without.data()], "default", stream.fmt)
    )
    if default_clean.error is not None or default_without.error is not None:
        return  # not valid with or without event k: the verifier's cascade applies
    assert keep.store() == default_without.store()
    unsettled = named(outputs_k[0])
    assert_kept(clean, keep, unsettled, f"{kind} of event {k} ({event_k['type']})")


# ---------------------------------------------------------------------------------------------
# Chunking never matters; the framing layer's tolerant mode


@SETTINGS
@given(streams(), st.data())
def test_how_a_corrupted_stream_is_chunked_changes_nothing(
    stream: Stream, data: st.DataObject
) -> None:
    clean_bytes = stream.data()
    bad, _ = data.draw(byte_corruptions(clean_bytes))
    points = data.draw(st.lists(st.integers(0, len(bad)), max_size=10))
    whole, pieces = run_all(
        ([bad], "keep_going", stream.fmt), (cut(bad, points), "keep_going", stream.fmt)
    )
    assert whole.error is None and pieces.error is None
    assert whole.store() == pieces.store()
    assert [(r.code, r.index, r.offset, r.line) for r in whole.reports] == [
        (r.code, r.index, r.offset, r.line) for r in pieces.reports
    ]


def test_a_line_ignored_at_the_end_is_placed_the_same_after_a_run_however_chunked() -> None:
    # Found by the test above: a stream whose last event has no blank line after it and ends
    # in a line of an unknown field. Fed whole, the last feed gave one run standing for four
    # frames, and the close placed the ignored line as if those were still in its list (after
    # the event, under the next index); fed in two, before it. Each call counts its own.
    frames = [b'{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"s1"}',
              b'{"type":"SUBAGENT_STARTED","subagentRunId":"s2","name":"s2"}',
              b'{"type":"SUBAGENT_FINISHED","subagentRunId":"s1"}',
              b'{"type":"SUBAGENT_FINISHED","subagentRunId":"s2"}']  # fmt: skip
    last = b'{"type":"RUN_FINISHED","threadId":"t","runId":"r1"}'
    bad = (b'eata: {"type":"RUN_STARTED","threadId":"t","runId":"r1"}\n\n'
           + b"".join(b"data: " + f + b"\n\n" for f in frames) + b"data: " + last + b"\n\x0b")  # fmt: skip
    decoder = SSEDecoder()
    decoder.feed_runs(bad)
    decoder.ignored.clear()
    assert [f.data for f in decoder.close()] == [last]
    assert [(n.before, n.line) for n in decoder.ignored] == [(0, 12)]
    whole, pieces = run_all(([bad], "keep_going", "sse"), (cut(bad, [250]), "keep_going", "sse"))
    placed = [(r.code, r.index, r.offset, r.line) for r in whole.reports]
    assert placed == [(r.code, r.index, r.offset, r.line) for r in pieces.reports]
    assert placed[-2:] == [("sse-unknown-field", 4, 366, 12), ("run.first-event", 4, 308, 11)]


@pytest.mark.parametrize("cls", [SSEDecoder, JsonLinesDecoder])
@given(data=st.data())
@settings(deadline=None)
def test_tolerant_framing_returns_the_same_frames_however_chunked(
    cls: type[SSEDecoder | JsonLinesDecoder], data: st.DataObject
) -> None:
    lines = data.draw(
        st.lists(
            st.sampled_from(
                [
                    b"data: {}",
                    b"data: \xff",
                    b"event: \xe2\x82",
                    b"id: \xc3",
                    b"",
                    b": c",
                    b"{\x80}",
                    b"x",
                ]
            ),
            max_size=12,
        )
    )
    blob = b"\n".join(lines) + data.draw(st.sampled_from([b"", b"\n", b"\n\n"]))
    points = data.draw(st.lists(st.integers(0, len(blob)), max_size=8))

    def frames(chunks: list[bytes]) -> list[Any]:
        decoder = cls(invalid_utf8="frame")
        out = [f for chunk in chunks for f in decoder.feed(chunk)] + decoder.close()
        return [(f.data, f.offset, f.line, f.error and str(f.error)) for f in out]

    got = frames(cut(blob, points))
    assert got == frames([blob])
    # Every line that is not UTF-8 is reported by exactly one frame, at its own position.
    strict = cls()
    try:
        strict.feed(blob)
        strict.close()
    except agui_meta.FramingError as exc:
        first = next(f for f in got if f[3] is not None)
        assert first[3] == str(exc)
    else:
        assert all(f[3] is None for f in got)
