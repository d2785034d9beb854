"""Partial tool-call arguments, against the reference client's ``partialToolCallArgs``.

The reference (``tests/partial_args_ref.cjs``, the official client's pipeline with one
subscriber) gives, at each ``TOOL_CALL_ARGS``, the arguments streamed before it completed into
JSON text; agui-meta's :func:`complete_json` must give the same text on the same prefix, and a
store item's :meth:`partial_arguments` the same value. Prefixes come from hypothesis: JSON
documents (compact, spaced, indented, ASCII-escaped) cut at random places, and arbitrary text.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agui_meta
from agui_meta._partial_json import complete_json, parse_partial_json
from tests.oracle import OracleUnavailable, oracle_missing, prepare_oracle
from tests.strategies import json_values

SCRIPT = Path(__file__).with_name("partial_args_ref.cjs")


class Reference:
    """One Node process running the reference on one case a line."""

    def __init__(self) -> None:
        try:
            directory = prepare_oracle()
        except OracleUnavailable as exc:
            oracle_missing(exc)
        self.proc = subprocess.Popen(
            ["node", str(SCRIPT), str(directory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[str] = self.proc.stdin
        self.stdout: IO[str] = self.proc.stdout

    def run(self, deltas: list[str]) -> dict[str, Any]:
        self.stdin.write(json.dumps({"deltas": deltas}) + "\n")
        self.stdin.flush()
        line = self.stdout.readline()
        assert line, "the reference process ended"
        result: dict[str, Any] = json.loads(line)
        assert "error" not in result, result
        return result

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(30)
        self.stdout.close()


@pytest.fixture(scope="module")
def reference() -> Iterator[Reference]:
    ref = Reference()
    try:
        yield ref
    finally:
        ref.close()


def cuts(text: str) -> st.SearchStrategy[list[str]]:
    """``text`` cut into non-empty deltas at random places."""
    if len(text) < 2:
        return st.just([text] if text else ["{}"])
    return st.sets(st.integers(1, len(text) - 1), max_size=12).map(
        lambda points: [
            text[a:b]
            for a, b in zip([0, *sorted(points)], [*sorted(points), len(text)], strict=True)
        ]
    )


@st.composite
def documents(draw: st.DrawFn) -> list[str]:
    value = draw(json_values(12))
    style = draw(st.sampled_from(["compact", "spaced", "indented"]))
    text = json.dumps(
        value,
        ensure_ascii=draw(st.booleans()),
        separators=(",", ":") if style == "compact" else None,
        indent=2 if style == "indented" else None,
    )
    return draw(cuts(text))


def _stringified(value: Any) -> Any:
    """``value`` as the reference's side reads back what ``JSON.stringify`` printed: an
    infinity (a number past the doubles) is ``null``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_stringified(v) for v in value]
    if isinstance(value, dict):
        return {k: _stringified(v) for k, v in value.items()}
    return value


def check(reference: Reference, deltas: list[str]) -> None:
    theirs = reference.run(deltas)
    partial = theirs["partial"]
    assert len(partial) == len(deltas)
    prefix = ""
    for n, delta in enumerate(deltas):
        step = partial[n]
        assert step["buffer"] == prefix
        assert complete_json(prefix) == step["text"], prefix
        assert _stringified(parse_partial_json(prefix)) == step["value"], prefix
        prefix += delta


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deltas=documents())
def test_json_prefixes_complete_as_the_reference_completes_them(
    reference: Reference, deltas: list[str]
) -> None:
    check(reference, deltas)
    whole = "".join(deltas)
    if "\\u" not in whole:  # the reference's quirk: a \uXXXX escape takes the next character
        assert parse_partial_json(whole) == json.loads(whole)  # a whole document is itself


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    deltas=st.lists(
        st.text(st.sampled_from('{}[]",:-.eE+0123456789 \\utrfalsn\n\tx\u00e9'), min_size=1),
        min_size=1,
        max_size=8,
    )
)
@example(deltas=["9007199254740993", "0"])  # found by this test: a double to the reference
@example(deltas=["[1", "e400, -", "1" + "0" * 400])  # past the doubles: infinities
def test_any_text_completes_as_the_reference_completes_it(
    reference: Reference, deltas: list[str]
) -> None:
    check(reference, deltas)  # never raises, and the same text even on what is not JSON


def test_a_unicode_escape_takes_the_next_character_as_in_the_reference() -> None:
    assert complete_json('"\\u001f"') == '"\\u001f""'
    assert complete_json('["\\u00e9x"') == '["\\u00e9x"]'


def test_every_prefix_of_a_tricky_document(reference: Reference) -> None:
    text = '{"a": [true, false, null, -1.5e+3, "q\\"\\\\\\u00e9\\ud83d\\ude00"], "b": {"": 0}} '
    check(reference, list(text))  # one character a delta: every prefix


def test_the_store_item_exposes_partial_and_final_arguments() -> None:
    deltas = ['{"city": "Lis', 'bon", "days": [1, 2', "]}"]
    store = agui_meta.Store()
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
    ]
    seen: list[Any] = []

    class Watch(agui_meta.Transducer[Any, Any]):
        def feed(self, item: Any) -> None:
            if isinstance(item.item, agui_meta.ToolCallItem):
                seen.append((item.item.streaming, item.item.partial_arguments()))
            self.emit(item)

    events += [{"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": d} for d in deltas]
    events.append({"type": "TOOL_CALL_END", "toolCallId": "c"})
    agui_meta.run_sync([agui_meta.Accumulate(store), Watch()], events)
    assert seen == [
        (True, None),
        (True, {"city": "Lis"}),
        (True, {"city": "Lisbon", "days": [1, 2]}),
        (True, {"city": "Lisbon", "days": [1, 2]}),
        (False, {"city": "Lisbon", "days": [1, 2]}),
    ]
    call = store.tool_call("c")
    assert call is not None and call.arguments_json() == {"city": "Lisbon", "days": [1, 2]}


def test_arguments_json_while_streaming_or_not_json() -> None:
    store = agui_meta.Store()
    accumulate = agui_meta.Accumulate(store)
    start = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"a": '},
    ]
    agui_meta.run_sync([accumulate], start)
    call = store.tool_call("c")
    assert call is not None
    with pytest.raises(agui_meta.UsageError, match="still streaming"):
        call.arguments_json()
    agui_meta.run_sync([accumulate], [{"type": "TOOL_CALL_END", "toolCallId": "c"}])
    with pytest.raises(agui_meta.DecodeError, match="'c' are not JSON"):
        call.arguments_json()
    empty = agui_meta.Store(
        [{"id": "a", "role": "assistant", "toolCalls": [
            {"id": "e", "type": "function", "function": {"name": "f", "arguments": ""}}]}]
    )  # fmt: skip
    called = empty.tool_call("e")
    assert called is not None and called.arguments_json() == {}
    assert called.partial_arguments() is None and not called.streaming


def test_numbers_are_read_as_doubles_and_no_depth_raises() -> None:
    # JSON.parse reads every number as a double; a value nested past the decoders is None
    # here (never an exception), and a finished call's arguments say so as a DecodeError.
    big = "9007199254740993"
    assert parse_partial_json(big) == 2**53 and parse_partial_json("9007199254740992") == 2**53
    assert parse_partial_json(f'{{"a": [{big}, -{big}, "{big}", 1.5, true]') == {
        "a": [2**53, -(2**53), big, 1.5, True]
    }
    assert parse_partial_json("1" + "0" * 400) == math.inf
    assert parse_partial_json("[" * 5000 + big) is None
    call = agui_meta.ToolCallItem("c", "f", None)  # type: ignore[arg-type]
    call.append_arguments("[" * 5000 + "]" * 5000)
    assert call.partial_arguments() is None
    with pytest.raises(agui_meta.DecodeError, match="nest deeper than the JSON decoder goes"):
        call.arguments_json()
