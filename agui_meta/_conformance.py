"""The conformance runner: one case of the reference oracle's format, through our pipeline.

A case is ``{"name", "events", "messages"?, "state"?}``: AG-UI wire events (dicts), and the
client's history and state before the run. :func:`run_case` runs the default pipeline —
enforce, expand_chunks, verify (unless ``verify=False``), accumulate — and returns the result
line ``{"name", "messages", "state"}`` (messages in wire JSON) or ``{"name", "error"}`` when the
pipeline rejects the stream. This is what ``python -m agui_meta apply`` prints, and what the
official client gives through ``../shared/oracle/apply.cjs``.

As in that script, the initial history is the client's own: it is copied as it is (unknown
members included) and not enforced; a missing or ``null`` history is ``[]``, and a missing or
falsy state (``null``, ``0``, ``""``, ``false``) is ``{}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ._accumulate import Accumulate
from ._chunks import ExpandChunks
from ._decode import Enforce
from ._driver import Runner
from ._exceptions import DataError, Report
from ._js import js_truthy
from ._stage import Context, Transducer
from ._store import Store
from ._verify import Verify

__all__ = ["run_case", "run_cases"]


def _ignore(report: Report) -> None:
    """The oracle silences the reference's warnings; so does the conformance runner."""


def run_case(case: dict[str, Any], *, verify: bool = True, on_report: Any = None) -> dict[str, Any]:
    """Run one case through the default pipeline; return its result line as a dict.

    :param case: ``{"name", "events", "messages"?, "state"?}``.
    :param verify: run the verify stage (``--no-verify`` turns it off).
    :param on_report: receives the reports (the reference's warnings); ignored by default.
    """
    name = case.get("name")
    try:
        history = case.get("messages") or []
        events = case.get("events")
        if not isinstance(events, list):
            raise DataError("a case's `events` must be a list", path="$.events")
        if not isinstance(history, list) or not all(isinstance(m, dict) for m in history):
            raise DataError("a case's `messages` must be a list of objects", path="$.messages")
        state = case.get("state")
        store = Store(history, state if js_truthy(state) else {})
        stages: list[Transducer[Any, Any]] = [Enforce(), ExpandChunks()]
        if verify:
            stages.append(Verify())
        stages.append(Accumulate(store))
        runner = Runner(stages, Context("default", on_report or _ignore), _discard)
        for event in events:
            runner.feed(event)
        runner.close()
    except DataError as exc:
        return {"name": name, "error": str(exc)}
    return {"name": name, "messages": store.messages_wire(), "state": store.state}


def _discard(update: Any) -> None:
    pass


def run_cases(cases: Iterable[dict[str, Any]], *, verify: bool = True) -> Iterator[dict[str, Any]]:
    """:func:`run_case` over many cases, lazily."""
    for case in cases:
        yield run_case(case, verify=verify)
