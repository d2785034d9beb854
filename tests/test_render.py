"""The text output of the command line: JSON for people, metadata lines, locations."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agui_meta import Report, VerifyError
from agui_meta.cli._render import (
    Style,
    compact_json,
    format_report,
    metadata_text,
    pretty_json,
    where,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=40,
)


@given(json_values, st.integers(min_value=10, max_value=120))
def test_pretty_json_is_the_same_json(value: Any, width: int) -> None:
    lines = pretty_json(value, max_lines=10**9, width=width)
    assert json.loads("\n".join(lines)) == value
    # A line longer than the width holds a scalar (or an empty container), never a container
    # that could have been broken up.
    for line in lines:
        text = line.strip().removesuffix(",")
        if len(line) <= width or text in ("{", "[", "}", "]") or text.endswith((": {", ": [")):
            continue
        try:
            shown = json.loads(text)
        except ValueError:  # "key": value
            (shown,) = json.loads("{" + text + "}").values()
        assert not (isinstance(shown, (dict, list)) and shown), line


@given(json_values)
def test_compact_json_is_one_line_of_the_same_json(value: Any) -> None:
    text = compact_json(value)
    assert "\n" not in text
    assert json.loads(text) == value


def test_pretty_json_keeps_short_containers_on_one_line() -> None:
    value = {"daily": [{"date": "2026-05-14", "high_c": 22}, {"date": "2026-05-15", "high_c": 24}]}
    assert pretty_json(value, width=60) == [
        "{",
        '  "daily": [',
        '    {"date": "2026-05-14", "high_c": 22},',
        '    {"date": "2026-05-15", "high_c": 24}',
        "  ]",
        "}",
    ]
    assert pretty_json(value, width=200) == [json.dumps(value)]


def test_pretty_json_has_a_line_budget() -> None:
    lines = pretty_json(list(range(100)), max_lines=10, width=5)
    assert len(lines) == 10
    assert lines[-1] == "… (93 more lines)"


def test_big_integers_stay_exact() -> None:
    big = 2**64 + 1
    assert compact_json({"n": big}) == '{"n": 18446744073709551617}'


@given(st.dictionaries(st.text(max_size=20), json_values, max_size=8))
def test_metadata_text_that_fits_is_the_metadata(metadata: dict[str, Any]) -> None:
    text = metadata_text(metadata, width=10**9)
    if "…" not in text:
        assert json.loads(text) == metadata


def test_metadata_text_cuts_values_and_counts_what_does_not_fit() -> None:
    metadata = {"acme.blob": "x" * 1000, **{f"acme.k{i}": i for i in range(50)}}
    text = metadata_text(metadata, width=100)
    assert text.startswith('{"acme.blob": "xxx') and text.endswith(" more}")
    assert len(text) < 200
    shown = text.count('"acme.k')
    assert text.endswith(f"… +{50 - shown} more}}")


def test_where_names_the_parts_that_are_known() -> None:
    assert (
        where("f", Report(code="c", message="m", index=3, line=4, offset=99)) == "f:4:99: event 3"
    )
    assert where("f", Report(code="c", message="m", offset=7)) == "f: byte 7"
    assert where("f", Report(code="c", message="m")) == "f"


def test_format_report() -> None:
    report = Report(code="unknown-field", message="removed", index=1, line=2, offset=9, path="$.x")
    assert format_report("s.jsonl", report, Style(False)) == (
        "s.jsonl:2:9: event 1: warning: [unknown-field] removed (at $.x)"
    )
    coloured = format_report("s.jsonl", report, Style(True), "error")
    assert "\x1b[1;31merror\x1b[0m" in coloured
    # A path the message names already is not repeated.
    named = Report(code="c", message="bad `$.x`", path="$.x")
    assert format_report("f", named, Style(False)) == "f: warning: [c] bad `$.x`"


def test_error_report_of_a_verify_error() -> None:
    error = VerifyError("out of order", rule="run.first-event", index=0)
    report = error.to_report()
    assert (report.code, report.message, report.severity, report.index) == (
        "run.first-event",
        "out of order",
        "error",
        0,
    )
