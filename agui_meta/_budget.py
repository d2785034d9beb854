"""Budgets: a stage that ends the runs of a scope that has spent its tokens or its money.

:class:`Budget` is a pass-through stage with limits — ``max_tokens`` (input plus output tokens,
which in AG-UI include the cached and reasoning parts) and/or ``max_cost`` (by a
:class:`~agui_meta.PriceTable`) — for each scope (the tenant or user a run belongs to: the
string under the run-metadata key ``agui_meta.scope``, see :mod:`agui_meta._usage`), over each
run (``period=None``) or over fixed periods of ``period`` seconds (a day: ``86400``; windows
aligned to multiples of the period on ``clock``).

AG-UI 1.0 reports usage only at a run's end (RUN_FINISHED, RUN_ERROR), so what a stage on the
stream can do is:

- **at a run's end**, add its usage to its scope's spending; a run that takes its scope (or,
  per run, itself) past a limit is *crossed*: the terminal event passes unchanged (its outcome
  — interrupts to resume, pending tool calls — still matters to the client), the pipeline gets a
  report ``budget-exceeded`` (severity ``error``: in keep-going mode it is counted; in strict
  mode it raises) and ``on_exceeded(report)`` is called;
- **at a run's start**, when its scope has already spent a limit in the current period, the
  run is ended there: RUN_STARTED passes, then a RUN_ERROR with code ``budget_exceeded`` and a
  message saying the scope, the limit and what was spent; every later event of that run is
  dropped until its own terminal event, which is dropped too (a report ``budget-dropped``,
  severity ``info``, counts them).

Stopping the agent itself (rather than the stream its client sees) is the gateway's:
``Gateway(budget=Budget(...))`` (docs/gateway.md), where the scope is the gateway's scope
resolver's; across replicas on Redis, the totals of a period are kept in Redis and each run is
charged once. Here the spending is kept in memory, in the process: at most ``max_scopes`` scopes (1,000, the usage meter's label
bound); past it, the scope whose period began longest ago is forgotten (its spending too:
counted in ``forgotten``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from msgspec import UnsetType

from ._events import Event, RunErrorEvent, RunFinishedEvent, RunStartedEvent, TokenUsage
from ._exceptions import Report, UsageError
from ._prices import PriceTable
from ._stage import Transducer
from ._usage import SCOPE_KEY

__all__ = ["BUDGET_CODE", "Budget"]

T = TypeVar("T")

#: The ``code`` of the RUN_ERROR that ends a run over budget, and of the report (with ``-``).
BUDGET_CODE = "budget_exceeded"
_REPORT = "budget-exceeded"


def _tokens(usage: Iterable[TokenUsage]) -> int:
    total = 0
    for entry in usage:
        for value in (entry.input_tokens, entry.output_tokens):
            if isinstance(value, int):
                total += value
    return total


def _scope(metadata: Any, key: str) -> str:
    if isinstance(metadata, dict) or hasattr(metadata, "get"):
        value = metadata.get(key)
        if isinstance(value, str):
            return value
    return ""


class _Spent:
    __slots__ = ("cost", "period", "tokens")

    def __init__(self, period: int) -> None:
        self.period = period
        self.tokens = 0
        self.cost = 0.0


class Budget(Transducer[T, T]):
    """Ends the runs of a scope over its token or cost budget (see the module documentation).

    >>> from agui_meta import run_sync
    >>> from agui_meta.events import decode_event
    >>> def run(n):
    ...     ids = f'"threadId":"t","runId":"r{n}"'
    ...     return [decode_event(e) for e in (
    ...         f'{{"type":"RUN_STARTED",{ids},"metadata":{{"agui_meta.scope":"acme"}}}}',
    ...         f'{{"type":"RUN_FINISHED",{ids},"usage":[{{"inputTokens":800}}]}}')]
    >>> budget = Budget(max_tokens=1000, period=86400)
    >>> reports = []
    >>> out = run_sync([budget], run(1) + run(2) + run(3), on_report=reports.append)
    >>> [(e.type, getattr(e, "code", None)) for e in out]  # doctest: +NORMALIZE_WHITESPACE
    [('RUN_STARTED', None), ('RUN_FINISHED', None), ('RUN_STARTED', None),
     ('RUN_FINISHED', None), ('RUN_STARTED', None), ('RUN_ERROR', 'budget_exceeded')]
    >>> budget.spent("acme")
    (1600, None)
    >>> [r.code for r in reports]  # r2 crossed the budget; r3 was ended, its end dropped
    ['budget-exceeded', 'budget-exceeded', 'budget-dropped']
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        period: float | None = None,
        prices: PriceTable | None = None,
        scope_key: str = SCOPE_KEY,
        on_exceeded: Callable[[Report], object] | None = None,
        clock: Callable[[], float] | None = None,
        max_scopes: int = 1_000,
    ) -> None:
        if max_tokens is None and max_cost is None:
            raise UsageError("a Budget needs max_tokens, max_cost or both")
        if max_tokens is not None and max_tokens < 0:
            raise UsageError(f"max_tokens must be >= 0, got {max_tokens}")
        if max_cost is not None and not (math.isfinite(max_cost) and max_cost >= 0):
            raise UsageError(f"max_cost must be a finite number >= 0, got {max_cost}")
        if max_cost is not None and prices is None:
            raise UsageError("max_cost needs a price table (prices=)")
        if period is not None and not (math.isfinite(period) and period > 0):
            raise UsageError(f"period must be a number of seconds > 0, got {period}")
        if max_scopes < 1:
            raise UsageError(f"max_scopes must be at least 1, got {max_scopes}")
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        self.period = period
        self.prices = prices
        self.scope_key = scope_key
        self.on_exceeded = on_exceeded
        self.max_scopes = max_scopes
        #: Scopes forgotten to respect ``max_scopes`` (their spending with them).
        self.forgotten = 0
        #: The runs ended at their start, as ``(thread_id, run_id, scope)``, the last 1,000.
        self.ended: list[tuple[str, str, str]] = []
        self._clock = clock or time.time
        self._spent: dict[str, _Spent] = {}
        self._scope: str | None = None  # the open run's scope
        self._dropping: tuple[str, str, str] | None = None  # the run being dropped
        self._dropped = 0

    # -- reading ---------------------------------------------------------------------------

    def spent(self, scope: str = "") -> tuple[int, float | None]:
        """What ``scope`` spent in the current period (or in its last run, ``period=None``):
        tokens and cost (``None`` without a price table)."""
        found = self._spent.get(scope)
        if found is not None and found.period != self._window():
            found = None
        tokens = found.tokens if found is not None else 0
        cost = (found.cost if found is not None else 0.0) if self.prices is not None else None
        return tokens, cost

    # -- the stage -------------------------------------------------------------------------

    def feed(self, item: T) -> None:
        event = item if isinstance(item, Event) else getattr(item, "event", None)
        if self._dropping is not None:
            if isinstance(event, RunStartedEvent):
                self._stop_dropping()
            else:
                self._dropped += 1
                if isinstance(event, (RunFinishedEvent, RunErrorEvent)):
                    self._stop_dropping()
                return
        if isinstance(event, RunStartedEvent):
            self._started(item, event)
        elif isinstance(event, (RunFinishedEvent, RunErrorEvent)):
            self.emit(item)
            self._ended(event)
        else:
            self.emit(item)

    def close(self) -> None:
        if self._dropping is not None:
            self._stop_dropping()

    # -- runs ------------------------------------------------------------------------------

    def _window(self) -> int:
        return 0 if self.period is None else int(self._clock() // self.period)

    def _over(self, spent: _Spent) -> str | None:
        """What limit ``spent`` has reached, said, or None."""
        if self.max_tokens is not None and spent.tokens >= self.max_tokens and spent.tokens:
            return f"{spent.tokens} tokens of {self.max_tokens}"
        cost = spent.cost
        if self.max_cost is not None and self.prices is not None and cost >= self.max_cost > 0:
            currency = self.prices.currency
            return f"{cost:.6f} {currency} of {self.max_cost} {currency}"
        return None

    def _where(self) -> str:
        return "per run" if self.period is None else f"per {self.period:g} s"

    def over(self, scope: str = "") -> str | None:
        """The limit ``scope`` has reached in the current period, said (``"1600 tokens of
        1000"``), or ``None`` (always ``None`` per run: ``period=None``). A run of a scope
        over its budget is ended at its start."""
        if self.period is None:
            return None
        spent = self._spent.get(scope)
        if spent is None or spent.period != self._window():
            return None
        return self._over(spent)

    def window(self) -> int:
        """The number of the current period (``0`` per run)."""
        return self._window()

    def measure(self, usage: Iterable[Any]) -> tuple[int, float]:
        """Tokens and cost (``0.0`` without a price table) of a run's usage entries."""
        usage = list(usage)
        cost = (self.prices.total(usage) or 0.0) if self.prices is not None else 0.0
        return _tokens(usage), cost

    def reached(self, tokens: int, cost: float) -> str | None:
        """The limit a spending of ``tokens`` and ``cost`` has reached, said, or ``None``."""
        spent = _Spent(0)
        spent.tokens, spent.cost = tokens, cost
        return self._over(spent)

    def charge(self, scope: str, usage: Iterable[Any]) -> str | None:
        """Add a run's usage entries (:class:`~agui_meta.events.TokenUsage` or
        :class:`~agui_meta.Usage`) to ``scope``'s spending; the limit this took the scope
        past, said, or ``None``. Call it once per run: nothing here knows runs apart."""
        usage = list(usage)
        if not usage:
            return None
        window = self._window()
        spent = self._spent.get(scope)
        if spent is None or spent.period != window or self.period is None:
            spent = self._fresh(scope, window)
        was = self._over(spent)
        tokens, cost = self.measure(usage)
        spent.tokens += tokens
        spent.cost += cost
        over = self._over(spent)
        return over if was is None else None

    def refusal(self, scope: str, run_id: str, over: str) -> str:
        """The message of the RUN_ERROR that ends run ``run_id`` at its start."""
        return (
            f"budget exceeded: scope {scope!r} has spent {over} ({self._where()}); "
            f"run {run_id!r} is ended"
        )

    def crossing(self, scope: str, run_id: str | None, over: str) -> str:
        """The message of the report on run ``run_id``, which took ``scope`` to ``over``."""
        named = f"run {run_id!r}" if run_id is not None else "a run"
        later = "; its next runs in this period are ended at their start" if self.period else ""
        return f"budget exceeded: {named} took scope {scope!r} to {over} ({self._where()}){later}"

    def exceeded(
        self, message: str, event_type: str | None = None, index: int | None = None
    ) -> Report:
        """The ``budget-exceeded`` report saying ``message``, given to ``on_exceeded``."""
        report = Report(
            code=_REPORT, message=message, severity="error", index=index, event_type=event_type
        )
        if self.on_exceeded is not None:
            self.on_exceeded(report)
        return report

    def _started(self, item: T, event: RunStartedEvent) -> None:
        scope = _scope(event.metadata, self.scope_key)
        self._scope = scope
        self.emit(item)
        over = self.over(scope)
        if over is None:
            return
        message = self.refusal(scope, event.run_id, over)
        # An event among the items: behind the accumulator, the items are Updates (the stage
        # belongs before it, or at the end of a chain of events).
        self.emit(RunErrorEvent(message=message, code=BUDGET_CODE))  # type: ignore[arg-type]
        self._dropping = (event.thread_id, event.run_id, scope)
        self.note_ended(*self._dropping)
        self._report(message, "RUN_STARTED")

    def note_ended(self, thread_id: str, run_id: str, scope: str) -> None:
        """Note a run ended at its start in :attr:`ended`."""
        self.ended = [*self.ended[-999:], (thread_id, run_id, scope)]

    def _stop_dropping(self) -> None:
        if self._dropped:
            thread_id, run_id, scope = self._dropping or ("", "", "")
            self.ctx.report(
                "budget-dropped",
                f"{self._dropped} events of run {run_id!r} (thread {thread_id!r}, scope "
                f"{scope!r}) dropped after the budget ended it",
                severity="info",
            )
        self._dropping = None
        self._dropped = 0
        self._scope = None

    def _ended(self, event: RunFinishedEvent | RunErrorEvent) -> None:
        scope = self._scope
        if scope is None:
            scope = _scope(event.metadata, self.scope_key)
        self._scope = None
        over = self.charge(scope, [] if isinstance(event.usage, UnsetType) else event.usage)
        if over is not None:
            run = getattr(event, "run_id", None)
            self._report(
                self.crossing(scope, run if isinstance(run, str) else None, over), event.type
            )

    def _fresh(self, scope: str, window: int) -> _Spent:
        spent = self._spent.pop(scope, None)
        if spent is None and len(self._spent) >= self.max_scopes:
            oldest = min(self._spent, key=lambda k: self._spent[k].period)
            del self._spent[oldest]
            self.forgotten += 1
        spent = self._spent[scope] = _Spent(window)
        return spent

    def _report(self, message: str, event_type: str) -> None:
        ctx = self.ctx
        ctx.deliver(self.exceeded(message, event_type, ctx.index if ctx.index >= 0 else None))
