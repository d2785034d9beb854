"""Synchronous transducers: the stages the pipeline fuses into one loop.

A transducer turns each input into zero or more outputs by calling ``self.emit`` from
:meth:`Transducer.feed`, and may emit trailing outputs from :meth:`Transducer.close` when the
stream ends normally. The pipeline connects a run of transducers directly (the ``emit`` of one
is the ``feed`` of the next), so a chain of built-in stages costs a few plain calls per event,
with no ``await`` and no intermediate lists.

Problems a stage handles without stopping go to :meth:`Context.report`. Data errors are raised
as :class:`~agui_meta.DataError` subclasses; the driver attaches the event index and, in
keep-going mode, turns them into reports and carries on with the next event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from ._exceptions import DataError, Report, Severity, StrictError
from ._framing import Frame
from ._warn import ReportWarnings

__all__ = ["Context", "Mode", "ReportHandler", "Transducer", "close_chain", "run_sync"]

In = TypeVar("In")
Out = TypeVar("Out")

#: ``"default"``: what the reference client warns about is reported, what it rejects raises.
#: ``"strict"``: every report raises :class:`StrictError`.
#: ``"keep_going"``: data errors are reported (severity ``"error"``) and the event is skipped.
Mode = Literal["default", "strict", "keep_going"]
ReportHandler = Callable[[Report], None]


class Context:
    """What a running pipeline shares with its stages: the mode, the event index, reporting.

    ``index`` is the 0-based index of the source item being processed (events a stage
    synthesizes share the index of the event that caused them); ``-1`` while stages close.
    ``reports`` keeps every report in order (bounded by ``max_reports`` to keep memory
    bounded on endless streams; ``dropped_reports`` counts the overflow). Without
    ``on_report``, reports are issued as :class:`~agui_meta.AguiWarning` warnings, repeats of
    a code summed up (see :mod:`agui_meta._warn`); :meth:`finish` ends the stream.
    """

    __slots__ = ("dropped_reports", "index", "max_reports", "mode", "on_report", "reports")

    def __init__(
        self,
        mode: Mode = "default",
        on_report: ReportHandler | None = None,
        *,
        max_reports: int = 10_000,
    ) -> None:
        if mode not in ("default", "strict", "keep_going"):
            raise ValueError(f"mode must be 'default', 'strict' or 'keep_going', got {mode!r}")
        self.mode: Mode = mode
        self.on_report: ReportHandler = on_report or ReportWarnings()
        self.index = -1
        self.reports: list[Report] = []
        self.max_reports = max_reports
        self.dropped_reports = 0

    def report(
        self,
        code: str,
        message: str,
        *,
        path: str | None = None,
        severity: Severity = "warning",
        event_type: str | None = None,
        index: int | None = None,
    ) -> None:
        """Report a problem at the current event. Raises :class:`StrictError` in strict mode."""
        self.deliver(
            Report(
                code=code,
                message=message,
                severity=severity,
                index=self.index if index is None and self.index >= 0 else index,
                path=path,
                event_type=event_type,
            )
        )

    def deliver(self, report: Report) -> None:
        """Record a report built elsewhere and hand it to the handler (or raise, when strict)."""
        if self.mode == "strict" and report.severity != "info":
            raise StrictError(report)
        if len(self.reports) < self.max_reports:
            self.reports.append(report)
        else:
            self.dropped_reports += 1
        self.on_report(report)

    def finish(self) -> None:
        """The stream ended: without ``on_report``, sum up the repeated reports' warnings."""
        if type(self.on_report) is ReportWarnings:
            self.on_report.finish()

    def skip(self, error: DataError) -> None:
        """In keep-going mode, report ``error`` and carry on; otherwise raise it."""
        error.locate(index=self.index if self.index >= 0 else None)
        if self.mode != "keep_going":
            raise error
        self.deliver(error.to_report())


class Transducer(Generic[In, Out]):
    """Base class of synchronous stages. Subclasses override :meth:`feed` (and maybe :meth:`close`).

    ``emit`` and ``ctx`` are set by :meth:`connect` before the first item is fed. A stage fed
    directly, outside any chain, works too: its outputs are dropped (``run_sync`` collects
    them) and it reports to a :class:`Context` of its own (``stage.ctx``: the default mode,
    reports issued as warnings), made on first use.

    >>> class Double(Transducer[int, int]):
    ...     def feed(self, item: int) -> None:
    ...         self.emit(item)
    ...         self.emit(item)
    >>> run_sync([Double()], [1, 2])
    [1, 1, 2, 2]
    """

    emit: Callable[[Out], None]
    ctx: Context
    #: Whether the stage takes decoded events only: :func:`run_sync` then decodes the wire
    #: forms it is given (dicts, JSON, ``ag_ui.core`` models) before feeding them to it.
    takes_events: ClassVar[bool] = False

    def connect(self, emit: Callable[[Out], None], ctx: Context) -> Callable[[In], None]:
        """Attach the downstream ``emit`` and the shared context; returns ``self.feed``."""
        self.emit = emit
        self.ctx = ctx
        return self.feed

    def feed(self, item: In) -> None:
        """Process one item, emitting zero or more outputs."""
        self.emit(item)  # type: ignore[arg-type]

    def close(self) -> None:
        """The stream ended normally: emit any trailing outputs."""

    if not TYPE_CHECKING:  # type checkers keep reporting misspelt attributes

        def __getattr__(self, name: str) -> Any:
            # Only reached when the attribute is missing: a stage that was never connected.
            if name == "ctx":
                self.ctx = Context()
                return self.ctx
            if name == "emit":
                return _drop
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


#: What run_sync() decodes before the first stage (besides pydantic models): an event's wire form.
_WIRE_FORMS = (Mapping, bytes, bytearray, memoryview, str, Frame)


def _drop(item: object) -> None:
    """The ``emit`` of a stage fed outside any chain: nothing downstream."""


def connect_chain(
    transducers: Iterable[Transducer[Any, Any]], sink: Callable[[Any], None], ctx: Context
) -> tuple[Callable[[Any], None], list[Transducer[Any, Any]]]:
    """Connect transducers first-to-last into ``sink``; returns the head's feed and the list.

    A run of built-in stages that :mod:`agui_meta._fuse` knows is fed through its fused feed.
    """
    from ._fuse import fuse  # the built-in stages import this module

    chain = list(transducers)
    emit = sink
    for i in range(len(chain) - 1, -1, -1):
        emit = chain[i].connect(emit, ctx)
        emit = fuse(chain, i) or emit
    return emit, chain


def close_chain(chain: Iterable[Transducer[Any, Any]], ctx: Context) -> None:
    """End of stream: close each transducer in order (a data error is skipped in keep-going mode)."""
    ctx.index = -1
    for t in chain:
        try:
            t.close()
        except DataError as exc:
            ctx.skip(exc)


def run_sync(
    transducers: Iterable[Transducer[Any, Any]],
    items: Iterable[Any],
    *,
    mode: Mode = "default",
    on_report: ReportHandler | None = None,
    ctx: Context | None = None,
) -> list[Any]:
    """Run items through transducers synchronously and return every output (for tests, CLIs).

    When the first stage takes events (:attr:`Transducer.takes_events`: every built-in event
    stage), items in an event's wire form (a dict, the JSON of one event as ``bytes``/``str``,
    an ``ag_ui.core`` model, a frame) are decoded first, with the reports and errors of
    :class:`~agui_meta.Enforce`, as ``wrap()`` does; anything else (events, updates, your own
    items) passes as it is.

    >>> import agui_meta
    >>> stages = agui_meta.DefaultStages()
    >>> _ = run_sync(stages, [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}])
    >>> stages.ledger.runs[0].run_id
    'r'
    """
    from ._decode import Enforce  # the driver decodes; the contract above does not know it

    ctx = ctx or Context(mode, on_report)
    out: list[Any] = []
    head, chain = connect_chain(transducers, out.append, ctx)
    if chain and chain[0].takes_events:
        decode = Enforce().connect(head, ctx)
        feed = head

        def head(item: Any) -> None:
            if isinstance(item, _WIRE_FORMS) or hasattr(item, "model_dump"):
                decode(item)
            else:
                feed(item)

    try:
        for i, item in enumerate(items):
            ctx.index = i
            try:
                head(item)
            except DataError as exc:
                ctx.skip(exc)
        close_chain(chain, ctx)
    finally:
        ctx.finish()
    return out
