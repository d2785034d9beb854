"""Token usage across runs and streams: one meter that many pipelines share.

A :class:`UsageMeter` sums the token usage the ledger records per run (its
``aggregated_usage``: the entries of RUN_FINISHED and RUN_ERROR summed per provider and model)
into totals per thread, run, provider, model and provider/model pair, and for the whole
process. Feed it from any number of ledgers, in any number of tasks or threads::

    meter = agui_meta.UsageMeter()
    stages = agui_meta.DefaultStages(ledger=agui_meta.Ledger(on_run=meter.add_run))

(the :func:`agui_meta.otel` stage takes it as ``usage=`` too). A run is known by its thread
and run ids: when the same run is recorded again — a recorded stream replayed, a RUN_ERROR
amending a finished run, the same run seen by two pipelines — its new usage *replaces* what
it added before, so nothing is counted twice. A record without a run id (events outside any
run) is added each time it is seen. Counts keep AG-UI's meaning: ``input_tokens`` includes
the cached (``cached_input_tokens``) and cache-written input, ``output_tokens`` includes
``reasoning_tokens``; a count no run reported stays absent, distinct from zero.

Memory is bounded (the ids and names come from streams, which may be hostile):

- one entry per run for the last ``max_runs`` runs (10,000 by default): older runs stay in
  every total but can no longer be recognised when replayed;
- one total for each of the last ``max_threads`` threads counted (10,000): past it, the least
  recently counted thread is folded into the thread ``"_OTHER"`` (its sums added there);
  ``threads_folded`` in the snapshot counts the threads so folded;
- one total for each of the first ``max_labels`` providers, models and provider/model pairs
  (1,000 each): a new one past that is counted under ``"_OTHER"``; ``labels_folded`` counts
  the usage entries so counted (each time: replays included);
- a thread id, provider or model longer than ``max_label_length`` characters (256) is counted
  under ``"_OTHER"`` too (a run with such an id is not kept for recognition).

A thread, provider or model literally named ``"_OTHER"`` shares that bucket.

Scopes and cost. A run's *scope* (a tenant or a user) is the string under the metadata key
``scope_key`` (``"agui_meta.scope"`` by default, :data:`SCOPE_KEY`) of its RUN_STARTED, else of
its RUN_FINISHED or RUN_ERROR (a gateway stamps it there); ``""`` when none. Totals per scope
are kept like those per provider (``max_labels``, ``"_OTHER"`` past it). With a price table
(``prices=``, a :class:`~agui_meta.PriceTable`), every total also has a cost: the sum of the
costs of the entries the table prices (:class:`CostTotals`, in ``snapshot().cost``); a run's
cost is in its :class:`RunUsage`.

:meth:`UsageMeter.snapshot` gives everything as data (:meth:`UsageMeter.to_json` as JSON), and
:meth:`UsageMeter.observe` publishes the totals through OpenTelemetry metrics.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UnsetType

from ._events import TokenUsage
from ._exceptions import UsageError
from ._ledger import RunRecord
from ._prices import PriceTable
from ._speedups import new_list
from ._tokens import COUNTS, Usage, aggregate_token_usage

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

__all__ = ["SCOPE_KEY", "CostTotals", "RunUsage", "UsageMeter", "UsageSnapshot", "scope_of"]

#: The run-metadata key whose string value is the run's scope (tenant or user).
SCOPE_KEY = "agui_meta.scope"


def scope_of(record: RunRecord, key: str = SCOPE_KEY) -> str | None:
    """A run's scope: the string under ``key`` in RUN_STARTED's metadata, else in RUN_FINISHED's
    or RUN_ERROR's; ``None`` when none of them has one."""
    for metadata in (record.started_metadata, record.finished_metadata, record.error_metadata):
        if metadata is not None:
            value = metadata.get(key)
            if isinstance(value, str):
                return value
    return None


#: The OpenTelemetry ``gen_ai.token.type`` of each count the counter publishes: the two
#: well-known values of the GenAI semantic conventions (``input``, ``output``), and custom
#: values for the parts AG-UI reports inside them.
_TOKEN_TYPES = {
    "input_tokens": "input",
    "output_tokens": "output",
    "reasoning_tokens": "reasoning",
    "cached_input_tokens": "cache_read",
    "cache_write_input_tokens": "cache_write",
}


class RunUsage(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """One run's usage: its ids (``None`` when the run had none) and its entries summed per
    provider and model."""

    thread_id: str | None = None
    run_id: str | None = None
    usage: list[Usage] = msgspec.field(default_factory=new_list)
    scope: str | None = None
    cost: float | None = None


class CostTotals(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """The cost of the totals, in the price table's ``currency`` (a total nothing priced is
    absent); ``provider_models`` lists ``[provider, model, cost]``."""

    currency: str
    total: float | None = None
    threads: dict[str, float] = msgspec.field(default_factory=dict)
    providers: dict[str, float] = msgspec.field(default_factory=dict)
    models: dict[str, float] = msgspec.field(default_factory=dict)
    scopes: dict[str, float] = msgspec.field(default_factory=dict)
    provider_models: list[tuple[str, str, float]] = msgspec.field(default_factory=list)


class UsageSnapshot(msgspec.Struct, kw_only=True, rename="camel"):
    """The meter's totals at one moment (plain data: its dicts and lists are copies).

    ``total`` is the sum of every run; ``threads``, ``providers`` and ``models`` map a thread
    id, provider or model (``""`` when a run named none) to its sum; ``provider_models`` sums
    per pair, in order of first appearance; ``runs`` lists the runs still recognised (the last
    ``max_runs``), oldest first; ``recorded`` counts the records added, replays included.
    ``threads_folded`` counts the threads folded into ``threads["_OTHER"]`` (``max_threads``);
    ``labels_folded`` the usage entries whose provider or model was counted under ``"_OTHER"``
    (``max_labels``, ``max_label_length``), each time it was counted (replays included).
    ``scopes`` sums per scope (``""``: runs without one); ``cost`` is ``None`` without a price
    table.
    """

    total: Usage = msgspec.field(default_factory=Usage)
    threads: dict[str, Usage] = msgspec.field(default_factory=dict)
    providers: dict[str, Usage] = msgspec.field(default_factory=dict)
    models: dict[str, Usage] = msgspec.field(default_factory=dict)
    provider_models: list[Usage] = msgspec.field(default_factory=list)
    runs: list[RunUsage] = msgspec.field(default_factory=list)
    recorded: int = 0
    threads_folded: int = 0
    labels_folded: int = 0
    scopes: dict[str, Usage] = msgspec.field(default_factory=dict)
    cost: CostTotals | None = None

    def to_json(self) -> bytes:
        """The totals as JSON, in ``bytes`` (UTF-8): camelCase, absent counts omitted."""
        return msgspec.json.encode(self)

    def to_builtins(self) -> dict[str, Any]:
        """The totals as a ``dict`` of JSON types (``json.dumps`` takes it), shaped like
        :meth:`to_json`."""
        result: dict[str, Any] = msgspec.to_builtins(self)
        return result


#: The bucket of the threads, providers and models past the meter's bounds.
OTHER = "_OTHER"


def _label(value: str | None) -> str:
    return "" if value is None else value


class _Sums:
    """Signed sums of the six counts and of the cost; a count (or the cost) stays absent until
    some entry reports it (or is priced)."""

    __slots__ = ("cost", "counts")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.cost: float | None = None

    def add(self, entry: Usage, sign: int, cost: float | None = None) -> None:
        counts = self.counts
        for name in COUNTS:
            value = getattr(entry, name)
            if value is not None:
                counts[name] = counts.get(name, 0) + sign * value
        if cost is not None:
            self.cost = (self.cost or 0.0) + sign * cost

    def merge(self, other: _Sums) -> None:
        counts = self.counts
        for name, value in other.counts.items():
            counts[name] = counts.get(name, 0) + value
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost

    def usage(self, provider: str | None = None, model: str | None = None) -> Usage:
        return Usage(provider=provider, model=model, **self.counts)


class UsageMeter:
    """Token usage totals shared by many pipelines (safe across tasks and threads).

    >>> from agui_meta import Ledger, run_sync
    >>> from agui_meta.events import decode_event
    >>> meter = UsageMeter()
    >>> stream = [decode_event(e) for e in (
    ...     b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
    ...     b'{"type":"RUN_FINISHED","threadId":"t","runId":"r",'
    ...     b'"usage":[{"provider":"openai","model":"gpt-5","inputTokens":10,"outputTokens":3}]}')]
    >>> for _ in range(2):  # the same run, replayed: counted once
    ...     _ = run_sync([Ledger(on_run=meter.add_run)], stream)
    >>> meter.snapshot().total
    Usage(provider=None, model=None, input_tokens=10, output_tokens=3, total_tokens=None, reasoning_tokens=None, cached_input_tokens=None, cache_write_input_tokens=None)
    """

    def __init__(
        self,
        *,
        max_runs: int = 10_000,
        max_threads: int = 10_000,
        max_labels: int = 1_000,
        max_label_length: int = 256,
        prices: PriceTable | None = None,
        scope_key: str = SCOPE_KEY,
    ) -> None:
        if max_runs < 0:
            raise UsageError(f"max_runs must be >= 0, got {max_runs}")
        if max_threads < 1 or max_labels < 1 or max_label_length < 1:
            raise UsageError(
                "max_threads, max_labels and max_label_length must be at least 1, got "
                f"{max_threads}, {max_labels}, {max_label_length}"
            )
        self.max_runs = max_runs
        self.max_threads = max_threads
        self.max_labels = max_labels
        self.max_label_length = max_label_length
        #: The price table that gives the totals a cost (``None``: no cost).
        self.prices = prices
        #: The run-metadata key of a run's scope.
        self.scope_key = scope_key
        self._lock = threading.Lock()
        # Each run kept with the thread total it was added to (a thread folded since is in
        # the "_OTHER" total, where a replay takes it back from).
        self._runs: OrderedDict[tuple[str, str], tuple[RunUsage, _Sums]] = OrderedDict()
        self._total = _Sums()
        self._threads: OrderedDict[str, _Sums] = OrderedDict()  # least recently counted first
        self._providers: dict[str, _Sums] = {}
        self._models: dict[str, _Sums] = {}
        self._pairs: dict[tuple[str, str], tuple[Usage, _Sums]] = {}
        self._scopes: dict[str, _Sums] = {}
        self._recorded = 0
        self._threads_folded = 0
        self._labels_folded = 0

    def add_run(self, record: RunRecord) -> None:
        """Count a run's usage (a ledger's ``on_run`` callback); a run seen before is replaced."""
        self.add(
            record.thread_id,
            record.run_id,
            record.aggregated_usage,
            scope=scope_of(record, self.scope_key),
        )

    def add(
        self,
        thread_id: str | UnsetType | None,
        run_id: str | UnsetType | None,
        usage: Iterable[TokenUsage | Usage],
        *,
        scope: str | None = None,
    ) -> None:
        """Count ``usage`` (entries of one run) for a thread, run and scope, replacing what the
        same run added before. ``None``/``UNSET`` ids: a run that cannot be recognised again."""
        thread = None if isinstance(thread_id, UnsetType) else thread_id
        run = None if isinstance(run_id, UnsetType) else run_id
        entries = aggregate_token_usage(usage)
        cost = self.prices.total(entries) if self.prices is not None else None
        entry = RunUsage(thread_id=thread, run_id=run, usage=entries, scope=scope, cost=cost)
        limit = self.max_label_length
        with self._lock:
            self._recorded += 1
            if run is not None and len(run) <= limit and len(_label(thread)) <= limit:
                key = (_label(thread), run)
                previous = self._runs.pop(key, None)
                if previous is not None:
                    self._apply(previous[0], -1, previous[1])
                thread_sums = self._apply(entry, 1)
                if self.max_runs:
                    self._runs[key] = (entry, thread_sums)
                    while len(self._runs) > self.max_runs:
                        self._runs.popitem(last=False)
            else:
                self._apply(entry, 1)

    def _thread(self, thread_id: str | None) -> _Sums:
        """The total of a thread being counted (made, or moved to the most recent)."""
        threads = self._threads
        label = _label(thread_id)
        if len(label) > self.max_label_length:
            label = OTHER
        sums = threads.get(label)
        if sums is not None:
            threads.move_to_end(label)
            return sums
        if len(threads) - (OTHER in threads) >= self.max_threads:
            oldest = next(k for k in threads if k != OTHER)
            folded = threads.pop(oldest)
            other = threads.get(OTHER)
            if other is None:
                other = threads[OTHER] = _Sums()
            other.merge(folded)
            self._threads_folded += 1
        sums = threads[label] = _Sums()
        return sums

    def _bucket(self, table: dict[str, _Sums], key: str, sign: int) -> _Sums:
        """``table``'s total for ``key``; ``"_OTHER"``'s for a key past the bounds (or one
        folded there before, when a replayed run is taken back)."""
        sums = table.get(key)
        if sums is None:
            if (
                sign > 0
                and len(key) <= self.max_label_length
                and len(table) - (OTHER in table) < self.max_labels
            ):
                sums = table[key] = _Sums()
            else:
                sums = table.get(OTHER)
                if sums is None:
                    sums = table[OTHER] = _Sums()
        return sums

    def _pair(self, entry: Usage, provider: str, model: str, sign: int) -> _Sums:
        pairs = self._pairs
        found = pairs.get((provider, model))
        if found is None:
            limit = self.max_label_length
            if (
                sign > 0
                and len(provider) <= limit
                and len(model) <= limit
                and len(pairs) - ((OTHER, OTHER) in pairs) < self.max_labels
            ):
                found = pairs[(provider, model)] = (entry, _Sums())
            else:
                found = pairs.get((OTHER, OTHER))
                if found is None:
                    other = Usage(provider=OTHER, model=OTHER)
                    found = pairs[(OTHER, OTHER)] = (other, _Sums())
        return found[1]

    def _apply(self, run: RunUsage, sign: int, thread: _Sums | None = None) -> _Sums:
        """Add (``sign`` 1) or take back (-1) a run's usage; the thread total it went to."""
        if thread is None:
            thread = self._thread(run.thread_id)
        elif self._threads.get(_label(run.thread_id)) is not thread:
            thread = self._bucket(self._threads, OTHER, sign)  # folded since
        scope = self._bucket(self._scopes, _label(run.scope), sign)
        prices = self.prices
        for entry in run.usage:
            provider, model = _label(entry.provider), _label(entry.model)
            cost = prices.cost(entry) if prices is not None else None
            self._total.add(entry, sign, cost)
            thread.add(entry, sign, cost)
            scope.add(entry, sign, cost)
            known = 0
            for table, key in ((self._providers, provider), (self._models, model)):
                sums = self._bucket(table, key, sign)
                known += sums is table.get(key)
                sums.add(entry, sign, cost)
            if sign > 0 and known < 2:
                self._labels_folded += 1
            self._pair(entry, provider, model, sign).add(entry, sign, cost)
        return thread

    # -- reading ---------------------------------------------------------------------------

    def snapshot(self) -> UsageSnapshot:
        """The totals now, as data."""
        with self._lock:
            return UsageSnapshot(
                total=self._total.usage(),
                threads={k: v.usage() for k, v in self._threads.items()},
                providers={k: v.usage(provider=k) for k, v in self._providers.items()},
                models={k: v.usage(model=k) for k, v in self._models.items()},
                provider_models=[
                    sums.usage(first.provider, first.model) for first, sums in self._pairs.values()
                ],
                runs=[
                    RunUsage(
                        thread_id=r.thread_id,
                        run_id=r.run_id,
                        usage=list(r.usage),
                        scope=r.scope,
                        cost=r.cost,
                    )
                    for r, _ in self._runs.values()
                ],
                recorded=self._recorded,
                threads_folded=self._threads_folded,
                labels_folded=self._labels_folded,
                scopes={k: v.usage() for k, v in self._scopes.items()},
                cost=self._costs(),
            )

    def _costs(self) -> CostTotals | None:
        if self.prices is None:
            return None

        def priced(table: dict[str, _Sums]) -> dict[str, float]:
            return {k: v.cost for k, v in table.items() if v.cost is not None}

        return CostTotals(
            currency=self.prices.currency,
            total=self._total.cost,
            threads=priced(self._threads),
            providers=priced(self._providers),
            models=priced(self._models),
            scopes=priced(self._scopes),
            provider_models=[
                (_label(first.provider), _label(first.model), sums.cost)
                for first, sums in self._pairs.values()
                if sums.cost is not None
            ],
        )

    def to_json(self) -> bytes:
        """:meth:`snapshot` as JSON, in ``bytes`` (UTF-8): camelCase, absent counts omitted."""
        return self.snapshot().to_json()

    def to_builtins(self) -> dict[str, Any]:
        """:meth:`snapshot` as a ``dict`` of JSON types (``json.dumps`` takes it)."""
        return self.snapshot().to_builtins()

    def observe(self, meter: Meter, name: str = "agui_meta.token.usage") -> None:
        """Publish the totals through an OpenTelemetry ``meter`` as observable sums.

        ``name`` (``agui_meta.token.usage``): one point per provider/model pair and token type:
        ``gen_ai.provider.name``, ``gen_ai.request.model`` (when the usage names them) and
        ``gen_ai.token.type`` (``input``/``output`` as in the GenAI semantic conventions;
        ``reasoning``, ``cache_read``, ``cache_write`` for the parts of those AG-UI reports).
        ``agui_meta.scope.token.usage``: the same per scope (``agui.scope``) and token type.
        With a price table, ``agui_meta.cost`` per provider/model pair and
        ``agui_meta.scope.cost`` per scope (unit: the table's currency). Totals are read at each
        collection (up-down counters: a replayed run that reports less than before lowers
        them), so a replayed run is never counted twice.
        """
        meter.create_observable_up_down_counter(
            name,
            callbacks=[self._observations],
            unit="{token}",
            description="Tokens used by the agent runs agui-meta observed, since the start.",
        )
        meter.create_observable_up_down_counter(
            "agui_meta.scope.token.usage",
            callbacks=[self._scope_observations],
            unit="{token}",
            description="Tokens used by the agent runs agui-meta observed, per scope.",
        )
        if self.prices is not None:
            unit = self.prices.currency
            meter.create_observable_up_down_counter(
                "agui_meta.cost",
                callbacks=[self._cost_observations],
                unit=unit,
                description="What the observed runs' tokens cost, by the price table.",
            )
            meter.create_observable_up_down_counter(
                "agui_meta.scope.cost",
                callbacks=[self._scope_cost_observations],
                unit=unit,
                description="What the observed runs' tokens cost, per scope.",
            )

    def _observations(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        out: list[Observation] = []
        for usage in self.snapshot().provider_models:
            base = _pair_labels(usage.provider, usage.model)
            for field, token_type in _TOKEN_TYPES.items():
                value = getattr(usage, field)
                if value is not None:
                    out.append(Observation(value, {**base, "gen_ai.token.type": token_type}))
        return out

    def _scope_observations(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        out: list[Observation] = []
        for scope, usage in self.snapshot().scopes.items():
            for field, token_type in _TOKEN_TYPES.items():
                value = getattr(usage, field)
                if isinstance(value, int):
                    labels = {"agui.scope": scope, "gen_ai.token.type": token_type}
                    out.append(Observation(value, labels))
        return out

    def _cost_observations(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        cost = self.snapshot().cost
        if cost is None:
            return []
        return [Observation(c, _pair_labels(p, m)) for p, m, c in cost.provider_models]

    def _scope_cost_observations(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        cost = self.snapshot().cost
        if cost is None:
            return []
        return [Observation(c, {"agui.scope": scope}) for scope, c in cost.scopes.items()]


def _pair_labels(provider: object, model: object) -> dict[str, Any]:
    labels: dict[str, Any] = {}
    if isinstance(provider, str) and provider:
        labels["gen_ai.provider.name"] = provider
    if isinstance(model, str) and model:
        labels["gen_ai.request.model"] = model
    return labels
