"""The one-call runners: a whole input through stages on the driver, in one call.

- :func:`run_sync`: items through stages, synchronously (tests, scripts, command lines);
- :func:`transduce`: stages over an async iterator, outside a pipeline;
- :func:`compact_events`: a history compacted as the official client's ``compactEvents``
  does (the rules: :mod:`agui_meta._compact`);
- :func:`run_case` / :func:`run_cases`: the conformance runner, one case of the reference
  oracle's format through the default pipeline.

Each builds a :class:`~agui_meta._driver.Runner` (the one loop), feeds it and closes it.

The conformance runner's cases are ``{"name", "events", "messages"?, "state"?}``: AG-UI wire
events (dicts), and the client's history and state before the run. :func:`run_case` runs the
default pipeline — enforce, expand_chunks, verify (unless ``verify=False``), accumulate — and
returns the result line ``{"name", "messages", "state"}`` (messages in wire JSON) or
``{"name", "error"}`` when the pipeline rejects the stream. This is what ``python -m agui_meta
apply`` prints, and what the official client gives through ``../shared/oracle/apply.cjs``. As
in that script, the initial history is the client's own: it is copied as it is (unknown
members included) and not enforced; a missing or ``null`` history is ``[]``, and a missing or
falsy state (``null``, ``0``, ``""``, ``false``) is ``{}``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any

from ._accumulate import Accumulate
from ._chunks import ExpandChunks
from ._compact import Compact
from ._decode import Enforce
from ._driver import Runner
from ._events import Event
from ._exceptions import DataError, Report
from ._framing import Frame
from ._js import js_truthy
from ._stage import Context, Mode, ReportHandler, Transducer
from ._store import Store
from ._verify import Verify

__all__ = ["compact_events", "run_case", "run_cases", "run_sync", "transduce"]


def run_sync(
    transducers: Iterable[Transducer[Any, Any]],
    items: Iterable[Any],
    *,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    ctx: Context | None = None,
    fuse: bool = True,
) -> list[Any]:
    """Run items through transducers synchronously and return every output (for tests, CLIs).

    Each item is one event. When the first stage takes events
    (:attr:`~agui_meta.Transducer.takes_events`: every built-in event stage), items in an
    event's wire form (a dict, the JSON of one event as ``bytes``/``str``, an ``ag_ui.core``
    model, a frame) are decoded first, with the reports and errors of
    :class:`~agui_meta.Enforce`, as ``wrap()`` does; anything else (events, updates, your own
    items) passes as it is. ``fuse=False`` runs every stage's ``feed`` (no fast path).

    >>> import agui_meta
    >>> stages = agui_meta.DefaultStages()
    >>> _ = run_sync(stages, [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}])
    >>> stages.ledger.runs[0].run_id
    'r'
    """
    transducers = list(transducers)
    if transducers and transducers[0].takes_events:
        transducers.insert(0, _DecodeWire())
    ctx = ctx or Context(mode, on_report)
    try:
        return Runner(transducers, ctx, fuse=fuse).feed_all(items)
    finally:
        ctx.finish()


#: What run_sync() decodes before a stage that takes events (and pydantic models).
_WIRE_FORMS = (Mapping, bytes, bytearray, memoryview, str, Frame)


class _DecodeWire(Transducer[Any, Any]):
    """run_sync()'s entry: decodes wire forms with an Enforce, passes everything else."""

    def __init__(self) -> None:
        self._enforce = Enforce()

    def connect(self, emit: Callable[[Any], None], ctx: Context) -> Callable[[Any], None]:
        decode = self._enforce.connect(emit, ctx)

        def feed(item: Any) -> None:
            if isinstance(item, _WIRE_FORMS) or hasattr(item, "model_dump"):
                decode(item)
            else:
                emit(item)

        self.emit = emit
        self.ctx = ctx
        self.feed = feed  # type: ignore[method-assign]
        return feed


async def transduce(
    upstream: AsyncIterator[Any],
    *transducers: Transducer[Any, Any],
    ctx: Context | None = None,
) -> AsyncIterator[Any]:
    """Run transducers over an async iterator, outside a pipeline; closes ``upstream`` when done."""
    runner = Runner(transducers, ctx or Context())
    out = runner.out
    try:
        async for item in upstream:
            runner.feed(item)
            if out:
                batch = out[:]
                out.clear()
                for x in batch:
                    yield x
        runner.close()
        for x in out:
            yield x
    finally:
        runner.ctx.finish()
        aclose = getattr(upstream, "aclose", None)
        if aclose is not None:
            await aclose()


def compact_events(
    events: Iterable[Any] | bytes | str,
    *,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
) -> list[Event]:
    """Compact a history of events exactly as the official client's ``compactEvents`` does.

    ``events`` is an iterable of anything agui-meta decodes as one event (an
    :class:`~agui_meta.events.Event`, a wire ``dict``, an ``ag_ui.core`` model, one event's JSON as
    ``bytes``/``str``), or a whole recorded stream as one ``bytes``/``str`` (SSE or JSON
    lines, detected). Every item is decoded and validated first, with the usual reports and
    errors (``mode`` and ``on_report`` as for a pipeline); the result is a new list of events
    (see :mod:`agui_meta._compact` for the rules). Collect an async source first:
    ``compact_events([e async for e in agui_meta.wrap(source)])``.

    >>> compact_events(b'{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\\n'
    ...                b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"Hi"}\\n'
    ...                b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"!"}\\n'
    ...                b'{"type":"TEXT_MESSAGE_END","messageId":"m"}\\n')[1].delta
    'Hi!'
    """
    ctx = Context(mode, on_report)
    if isinstance(events, (bytes, bytearray, memoryview, str)):
        # A whole stream: framed by the driver, a slice at a time, as wrap() frames it (a
        # stream cut off inside a frame is an error in every mode, as there).
        runner = Runner([Enforce(), Compact()], ctx, framing="auto", close_errors="raise")
        items: Iterable[Any] = (events,)
    else:
        runner = Runner([Enforce(), Compact()], ctx)
        items = events
    try:
        for item in items:
            runner.feed(item)
        runner.close()
    finally:
        ctx.finish()
    return runner.out


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
