"""The stage contract: :class:`Transducer` (a synchronous stage) and its :class:`Context`.

A transducer turns each input into zero or more outputs by calling ``self.emit`` from
:meth:`Transducer.feed`, and may emit trailing outputs from :meth:`Transducer.close` when the
stream ends normally. The driver (``_driver``) connects a run of transducers directly (the
``emit`` of one is the ``feed`` of the next), so a chain of built-in stages costs a few plain
calls per event, with no ``await`` and no intermediate lists.

Problems a stage handles without stopping go to :meth:`Context.report`. Data errors are raised
as :class:`~agui_meta.DataError` subclasses; the driver attaches the event index and, in
keep-going mode, turns them into reports and carries on with the next event.

The fast path. About nine events in ten are content deltas (:data:`CONTENT_DELTAS`) of an item
that is open, and most stages have nothing to do for them but let them pass. A stage says when
that is so through the ``fast_*`` members below, and its own :meth:`~Transducer.feed` begins
with that same test, so the driver may skip the call: for a *candidate* (a content delta with
no ``subagentRunId``) that every stage of a run lets pass, the driver does in one step what the
stages' feeds would do one by one. Whatever a stage does not let pass goes through its feed. A
rule added to a stage after its test applies to what does not pass, on both paths alike; a rule
about what passes must change the test, which the driver reads. The members:

- ``fast_feed``: the class's ``feed`` the members describe (``Stage.fast_feed = Stage.feed``
  after the class body). A subclass that overrides ``feed`` without setting it again offers no
  fast path.
- ``fast_passes``: by candidate class, the ids of the open items whose deltas the stage lets
  pass unchanged right now (a live container), or ``None`` for any id; a class not listed does
  not pass. A plain attribute, given a new mapping whenever that changes: after every event
  the stage saw itself, the driver compares it (and ``fast_tally``) by identity with what it
  holds, and reads it again only when it changed.
- ``fast_tally``: a dict in which the driver counts (by ``type``) each candidate the stage let
  pass, after the rest of the chain took it (a ledger's event counts). The counts of a batch
  of frames are added before the stage sees its next event and when the batch ends, so they
  are exact whenever the stage or the pipeline's consumer looks.
- ``fast_wrapped``: the stage also lets pass items that carry a candidate in ``.event``
  (``Update``), with the same test; it may follow ``fast_converts``.
- ``fast_converts``: by candidate class, the function that gives what ``feed`` would emit for
  it, with every effect ``feed`` has (accumulate's content handlers).
- ``fast_decode``: a decoding stage's function from a frame's bytes to the event it emits (or
  ``None``: then its ``feed`` decides).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar

import msgspec

from ._events import ReasoningMessageContentEvent, TextMessageContentEvent, ToolCallArgsEvent
from ._exceptions import DataError, Report, Severity, StrictError, UsageError
from ._warn import ReportWarnings

__all__ = [
    "CONTENT_DELTAS",
    "Context",
    "Mode",
    "ReportHandler",
    "Transducer",
    "building_for",
    "handler_table",
]

#: The event classes the fast path takes: content deltas of an open item.
CONTENT_DELTAS: Final = (TextMessageContentEvent, ReasoningMessageContentEvent, ToolCallArgsEvent)

In = TypeVar("In")
Out = TypeVar("Out")
Key = TypeVar("Key")

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

    __slots__ = (
        "dropped_reports",
        "frames",
        "frames_start",
        "index",
        "max_reports",
        "mode",
        "on_report",
        "reports",
        "timestamp",
    )

    def __init__(
        self,
        mode: Mode = "default",
        on_report: ReportHandler | None = None,
        *,
        max_reports: int = 10_000,
    ) -> None:
        if mode not in ("default", "strict", "keep_going"):
            raise UsageError(f"mode must be 'default', 'strict' or 'keep_going', got {mode!r}")
        self.mode: Mode = mode
        self.on_report: ReportHandler = on_report or ReportWarnings()
        self.index = -1
        self.reports: list[Report] = []
        self.max_reports = max_reports
        self.dropped_reports = 0
        #: The batch of frames being processed, and the event index of its first: a report or
        #: an error of one of these events gets the frame's byte offset and line.
        self.frames: Sequence[Any] = ()
        self.frames_start = 0
        #: While a stage emits the events it synthesizes from a source event (chunk
        #: expansion), that event's ``timestamp``; ``None`` otherwise. A synthesized event
        #: carries no ``timestamp`` of its own (as the reference builds it): stages that time
        #: events (the ledger, ``otel()``) read this one instead of the time of receipt — those
        #: in the same run of synchronous stages (an async stage between them ends the run).
        self.timestamp: int | None = None

    def renew(self) -> None:
        """Be as a new context of the same mode, handler and bound is (a pipeline kept for the
        next stream): no index, no reports, no batch, no timestamp."""
        self.index = -1
        self.reports = []
        self.dropped_reports = 0
        self.frames = ()
        self.frames_start = 0
        self.timestamp = None

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
        """Report a problem at the current event. Raises :class:`StrictError` in strict mode.

        A report made while the stages close (the end of the stream: ``stream-ended-open``…)
        is located at the end, as a stream cut inside its last frame is: the last event's index
        and, when it came as a frame, that frame's line and byte offset.
        """
        if index is None:
            if self.index >= 0:
                index = self.index
            elif self.frames:  # closing: the stream's last event ends its last batch
                index = self.frames_start + len(self.frames) - 1
        self.deliver(
            Report(
                code=code,
                message=message,
                severity=severity,
                index=index,
                path=path,
                event_type=event_type,
            )
        )

    def where(self, index: int | None) -> tuple[int | None, int | None]:
        """The byte offset and line of event ``index`` when it came as a frame of this batch."""
        if index is not None:
            i = index - self.frames_start
            frames = self.frames
            if 0 <= i < len(frames):
                frame = frames[i]
                return getattr(frame, "offset", None), getattr(frame, "line", None)
        return None, None

    def locate(self, report: Report) -> Report:
        """``report``, with its frame's byte offset and line when it has none (see :meth:`where`)."""
        if report.offset is None and report.line is None and self.frames:
            offset, line = self.where(report.index)
            if offset is not None or line is not None:
                return msgspec.structs.replace(report, offset=offset, line=line)
        return report

    def deliver(self, report: Report) -> None:
        """Record a report built elsewhere and hand it to the handler (or raise, when strict).

        A report of an event that came as a frame gets the frame's byte offset and line.
        """
        report = self.locate(report)
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
        if error.offset is None and error.line is None and self.frames:
            offset, line = self.where(error.index)
            error.locate(offset=offset, line=line)
        if self.mode != "keep_going":
            raise error
        self.deliver(error.to_report())


class Transducer(Generic[In, Out]):
    """Base class of synchronous stages. Subclasses override :meth:`feed` (and maybe :meth:`close`).

    ``emit`` and ``ctx`` are set by :meth:`connect` before the first item is fed. A stage fed
    directly, outside any chain, works too: its outputs are dropped (``run_sync`` collects
    them) and it reports to a :class:`Context` of its own (``stage.ctx``: the default mode,
    reports issued as warnings), made with the stage.

    The ``fast_*`` members are the fast path's (see the module documentation); by default a
    stage offers none.

    >>> from agui_meta import run_sync
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

    fast_feed: ClassVar[Callable[..., None] | None] = None
    fast_wrapped: ClassVar[bool] = False
    fast_decode: Callable[[Any], Any] | None = None
    #: The candidates this stage lets pass now (see the module documentation).
    fast_passes: Mapping[type, Container[str] | None] | None = None
    #: Where the driver counts the candidates this stage let pass.
    fast_tally: dict[str, int] | None = None

    @property
    def fast_converts(self) -> Mapping[type, Callable[[Any], Any]] | None:
        """See the module documentation: a property, so that a stage can give its own bound
        methods without holding them (a stage that holds its bound methods is a reference
        cycle, which only the cyclic garbage collector frees)."""
        return None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # A stage never connected drops its outputs and reports to a context of its own. Set
        # on the instance, not the class (a class-level default, like a __getattr__, would
        # keep the interpreter from specialising every stage's ``self.emit`` and ``self.ctx``).
        stage = super().__new__(cls)
        stage.emit = _drop
        stage.ctx = default_context()
        return stage

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


def _drop(item: object) -> None:
    """The ``emit`` of a stage fed outside any chain: nothing downstream."""


#: The context stages made now are given before they are connected (see building_for); per
#: thread and task, like any context variable.
_building: ContextVar[Context | None] = ContextVar("agui_meta_building_for", default=None)


def default_context() -> Context:
    """The context a stage has until it is connected: the one given to :func:`building_for`
    while stages are built for it, else a new one of its own (the default mode, reports
    issued as warnings that point at the code feeding the stage: no walk of the frames of the
    code making it, which a stage connected later would pay for nothing)."""
    ctx = _building.get()
    return Context(on_report=ReportWarnings(origin=False)) if ctx is None else ctx


@contextmanager
def building_for(ctx: Context) -> Iterator[Context]:
    """Stages made inside the block are for a pipeline of ``ctx`` (they will be connected to
    it): they start with it rather than with a context of their own, whose warnings handler
    costs a walk of the caller's frames per stage (the durable segments build a pipeline per
    run).

    >>> from agui_meta import Verify
    >>> ctx = Context("keep_going")
    >>> with building_for(ctx):
    ...     verify = Verify()
    >>> verify.ctx is ctx, Verify().ctx is ctx
    (True, False)
    """
    token = _building.set(ctx)
    try:
        yield ctx
    finally:
        _building.reset(token)


def handler_table(cls: type, names: Mapping[Key, str]) -> dict[Key, Callable[..., Any]]:
    """A stage's table of handlers: by key, the method ``cls`` has under each name (its own
    or inherited), as the plain function, to be called with the stage first.

    A table of the stage's bound methods would make every stage a reference cycle (the stage
    holds the table, each method holds the stage), which only the cyclic garbage collector
    frees; with plain functions, a finished pipeline's stages are freed as soon as nothing
    refers to them. And then the table depends on the class alone: the stages of one class
    share it (made once per class and ``names``), so that a running pipeline does not hold
    tables of its own for the collector to walk. A stage may add to it only what its class
    alone decides (``Accumulate`` adds an event subclass's handler).
    """
    # Kept in the class's own __dict__ (not inherited), by the identity of the names, kept
    # with them: the tables go with the class.
    tables = cls.__dict__.get("_handler_tables")
    if tables is None:
        tables = {}
        setattr(cls, "_handler_tables", tables)  # noqa: B010 (no such attribute declared on type)
    made = tables.get(id(names))
    if made is None or made[0] is not names:
        made = tables[id(names)] = (names, {key: getattr(cls, name) for key, name in names.items()})
    return made[1]
