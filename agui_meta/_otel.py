"""OpenTelemetry for AG-UI streams: runs, tool calls, steps and subagents as spans, and metrics.

:func:`otel` is a pass-through stage (extra ``otel``: it needs ``opentelemetry-api`` only; an
SDK, exporters and their configuration are the application's). It goes anywhere in a chain
after the source, before or after the default stages, and uses the global tracer and meter
providers unless it is given its own. It follows the OpenTelemetry semantic conventions for
generative AI (development status; the ``gen_ai_latest_experimental`` names), as written in
``open-telemetry/semantic-conventions-genai`` on its main branch as of 2026-12-03 (unreleased;
the ``cache_write`` rename of #440 and the token counters of ``model/gen-ai/token-metrics.yaml``
included):

- ``docs/gen-ai/gen-ai-agent-spans.md``: a run is an *invoke agent* span, named
  ``invoke_agent {gen_ai.agent.name}`` (``invoke_agent`` when no ``agent_name`` is given), kind
  ``CLIENT`` (the agent is remote to the stream's consumer), with ``gen_ai.operation.name`` =
  ``invoke_agent``, ``gen_ai.conversation.id`` = the thread id, ``gen_ai.agent.name``, and
  ``gen_ai.provider.name`` / ``gen_ai.request.model`` when the run's usage names exactly one;
  a tool call is an *execute tool* span, ``execute_tool {gen_ai.tool.name}``, kind ``INTERNAL``,
  with ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` and ``gen_ai.tool.type`` = ``function``
  (AG-UI tool calls are executed by the client); ``gen_ai.tool.call.arguments`` and
  ``gen_ai.tool.call.result`` (opt-in attributes there) only with ``capture_content=True``;
  a subagent is a nested ``invoke_agent {name}`` span (kind ``INTERNAL``, the *invoke agent
  internal span*) under its parent tool call (else its parent subagent, else the run);
- ``docs/gen-ai/gen-ai-spans.md`` and the attribute registry: usage from RUN_FINISHED and
  RUN_ERROR becomes ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``,
  ``gen_ai.usage.cache_read.input_tokens``, ``gen_ai.usage.cache_write.input_tokens`` and
  ``gen_ai.usage.reasoning.output_tokens`` (AG-UI's ``inputTokens`` already include the cached
  and cache-written parts and ``outputTokens`` the reasoning part, as the conventions count
  them), on the run's span (summed) and on one *inference* span per provider/model entry of the
  run's aggregated usage: ``chat {model}``, kind ``CLIENT``, under the run's span and as long as
  the run, with ``gen_ai.operation.name`` = ``chat``, ``gen_ai.provider.name``,
  ``gen_ai.request.model`` and ``gen_ai.response.model`` (AG-UI reports usage per run, per
  provider and model, never per model call: a span per entry is what a backend can sum without
  an invented split). A run whose usage names several models or providers lists them in
  ``agui.run.models`` / ``agui.run.providers``. ``error.type`` (RUN_ERROR's ``code``, else
  ``_OTHER``) and an ``ERROR`` status, on the run's and its model calls' spans. With
  ``capture_content``, the run's span has ``gen_ai.input.messages`` (RUN_STARTED's input) and
  ``gen_ai.output.messages`` (what the run's own agent streamed; :mod:`agui_meta._otel_messages`);
- ``model/gen-ai/token-metrics.yaml``: the counters ``gen_ai.client.inference.usage.input_tokens``,
  ``.output_tokens``, ``.cache_read.input_tokens``, ``.cache_write.input_tokens`` and
  ``.reasoning.output_tokens`` (``{token}``; ``gen_ai.operation.name`` = ``chat``, provider,
  model, ``gen_ai.token.modality`` = ``unknown``: AG-UI reports no modality), which replace the
  ``gen_ai.client.token.usage`` histogram; ``docs/gen-ai/gen-ai-metrics.md``:
  ``gen_ai.invoke_agent.duration`` (s, buckets 0.1 … 409.6) and ``gen_ai.execute_tool.duration``
  (s, buckets 0.01 … 81.92), with the attributes listed there.
- ``legacy_usage_names=True`` also emits the names being replaced, while backends move:
  ``gen_ai.usage.cache_creation.input_tokens`` beside ``cache_write``, and the
  ``gen_ai.client.token.usage`` histogram (``gen_ai.token.type`` = ``input``/``output``, buckets
  1, 4, 16, … 67108864).

AG-UI's own facts use the ``agui.`` namespace: ``agui.run.id``, ``agui.run.parent_id``,
``agui.run.status`` (``finished``, ``error``, ``incomplete``), ``agui.run.outcome``
(``success``, ``interrupt``, ``cancelled``), ``agui.run.pending_tool_call_ids``, one
``agui.interrupt`` span event per interrupt (``agui.interrupt.id``, ``.reason``,
``.tool_call_id``), ``agui.tool_call.pending`` (still waiting for its result when the run
ended), ``agui.tool_call.parent_message_id``, ``agui.tool_call.result_message_id``,
``agui.tool_call.arguments_length``; steps are ``INTERNAL`` spans ``step {name}`` with
``agui.step.name``. Two counters: ``agui.events`` (by ``agui.event.type``) and ``agui.reports``
(by ``agui.report.code`` and ``agui.report.severity``: every report of the pipeline, whichever
stage made it).

Times are the ledger's (:mod:`agui_meta._ledger`): an event's ``timestamp`` when it has one
(for an event synthesized from a chunk, the chunk's), else the time it was received, so a
recorded stream exports after the fact with its own times. A span never ends before it starts
(a stream that mixes its own times with times of receipt, or goes back in time, gets a span of
zero length, not a negative one).
A run's span starts at RUN_STARTED and ends at RUN_FINISHED or RUN_ERROR; a tool call's from
its start to its result, or at the run's end when no result came; spans still open when the
stream ends end with the run (``agui.run.status`` = ``incomplete``, an ``ERROR`` status with
``error.type`` = ``incomplete``). A RUN_ERROR after its run's RUN_FINISHED is counted but cannot
change the span, which has ended.

Trace context: a W3C ``traceparent`` under the run's metadata key ``w3c.traceparent`` (with
``w3c.tracestate``, when present) — in RUN_STARTED's metadata — parents the run's span;
otherwise the current context does (:mod:`agui_meta._tracecontext`). Behind an
:class:`~agui_meta.HttpAgent`, the context current when the run started parents it.

What leaves the process: ids, names, counts, times, statuses, and nothing else — no metadata
value unless ``attributes`` maps its key to an attribute name (for run, step, subagent,
tool-call and interrupt metadata; a tool call's is its merged metadata), no message content
unless ``capture_content`` is on.

Bounds (a stream is hostile input): every string the stream puts in a span (attribute values,
span names, the error status message) is cut to ``max_attribute_length`` characters (4096 by
default), ending with ``…`` when cut; a list attribute keeps its first 128 items. Each metric
instrument records at most ``max_series`` distinct attribute sets (1000 by default, below the
SDK's own limit of 2000): past it, a new set has its stream-given values (model, provider,
tool name, error type, event type, report code) replaced by ``_OTHER``, and the counter
``agui.telemetry.overflow`` (by ``agui.instrument``) counts each recording so folded. The
series seen are shared by every stage of one meter provider.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from msgspec import UnsetType

from ._events import (
    EVENT_TYPES,
    Event,
    Metadata,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ._exceptions import Report, UsageError
from ._ledger import (
    Ledger,
    RunCancelled,
    RunInterrupted,
    RunRecord,
    RunSuccess,
    StepRecord,
    SubagentRecord,
    ToolCallRecord,
)
from ._otel_messages import OutputMessages, input_messages
from ._prices import PriceTable
from ._stage import Context, Transducer
from ._tokens import Usage
from ._tracecontext import TRACEPARENT_KEY, TRACESTATE_KEY
from ._usage import SCOPE_KEY, UsageMeter, scope_of

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

__all__ = [
    "DEFAULT_MAX_ATTRIBUTE_LENGTH",
    "DEFAULT_MAX_SERIES",
    "OTHER",
    "TRACEPARENT_KEY",
    "TRACESTATE_KEY",
    "OTel",
    "otel",
]

T = TypeVar("T")


#: Instrumentation scope of the tracer and the meter.
SCOPE = "agui_meta"
#: Explicit bucket boundaries the GenAI semantic conventions give (gen-ai-metrics.md).
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)  # fmt: skip
AGENT_BUCKETS = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6)
TOOL_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                40.96, 81.92)  # fmt: skip

_USAGE_ATTRIBUTES = (
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
    ("cached_input_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_write_input_tokens", "gen_ai.usage.cache_write.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
)
#: The name ``gen_ai.usage.cache_write.input_tokens`` had before (``legacy_usage_names``).
LEGACY_CACHE_WRITE = "gen_ai.usage.cache_creation.input_tokens"
#: The per-direction token counters (``gen_ai.client.inference.usage.*``), by usage field.
_TOKEN_COUNTERS = (
    ("input_tokens", "gen_ai.client.inference.usage.input_tokens",
     "The number of input (prompt) tokens used, including cached tokens."),
    ("output_tokens", "gen_ai.client.inference.usage.output_tokens",
     "The number of output (completion) tokens used, including reasoning tokens."),
    ("cached_input_tokens", "gen_ai.client.inference.usage.cache_read.input_tokens",
     "The number of input tokens served from a provider-managed cache."),
    ("cache_write_input_tokens", "gen_ai.client.inference.usage.cache_write.input_tokens",
     "The number of input tokens written to a provider-managed cache."),
    ("reasoning_tokens", "gen_ai.client.inference.usage.reasoning.output_tokens",
     "The number of output tokens used for reasoning."),
)  # fmt: skip
_EVENT_CLASSES = frozenset(EVENT_TYPES.values())
_INT64 = 2**63


#: The range of OTLP's ``fixed64`` times: a producer's timestamp outside it is clamped.
_MAX_NS = 2**64 - 1

#: The longest string (in characters) the stage puts in a span by default.
DEFAULT_MAX_ATTRIBUTE_LENGTH = 4096
#: The most attribute sets an instrument records by default before folding into ``_OTHER``.
DEFAULT_MAX_SERIES = 1000
#: What a metric attribute value becomes past the series limit (the conventions' fallback).
OTHER = "_OTHER"
_MAX_LIST = 128
#: Metric attributes whose values agui-meta or the application chooses: never folded.
_FIXED_LABELS = frozenset(
    {
        "gen_ai.operation.name",
        "gen_ai.token.type",
        "gen_ai.tool.type",
        "gen_ai.agent.name",
        "agui.report.severity",
    }
)


def _clip(value: Any, limit: int) -> Any:
    """A string cut to ``limit`` characters (``…`` last when cut); a list to its first items."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[: max(limit - 1, 0)] + "…"
    if isinstance(value, list):
        return [_clip(v, limit) for v in value[:_MAX_LIST]]
    return value


class _Series:
    """The attribute sets recorded per instrument of one meter provider, at most ``limit``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, set[frozenset[tuple[str, Any]]]] = {}


_SERIES: weakref.WeakKeyDictionary[Any, _Series] = weakref.WeakKeyDictionary()
_SERIES_LOCK = threading.Lock()


def _series_of(provider: Any) -> _Series:
    """The series of ``provider`` (shared by its stages); a provider without weak references
    gets series of its own for each stage."""
    with _SERIES_LOCK:
        try:
            found = _SERIES.get(provider)
            if found is None:
                found = _SERIES[provider] = _Series()
        except TypeError:
            return _Series()
        return found


def _ns(ms: float | None) -> int | None:
    """Milliseconds since the epoch (the ledger's times) as OpenTelemetry's nanoseconds.

    Clamped to what OTLP can carry (0 … 2**64 - 1 ns): an AG-UI ``timestamp`` may be any safe
    integer, negative or far in the future, and an exporter would fail on the whole batch.
    """
    if ms is None:
        return None
    ns = ms * 1_000_000 if isinstance(ms, int) else round(ms * 1_000_000)
    return min(max(ns, 0), _MAX_NS)


def _end_ns(start: float | None, end: float | None) -> int | None:
    """A span's end time: ``end``, never before ``start`` (a stream may mix its own times with
    times of receipt, or go back in time: a span's latency is never negative)."""
    if start is not None and end is not None and end < start:
        end = start
    return _ns(end)


def _seconds(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start) / 1000.0)


def _attribute_value(value: Any) -> Any:
    """A metadata value as an attribute value: scalars as they are, anything else as JSON."""
    if isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        return value if -_INT64 <= value < _INT64 else str(value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _label(value: object) -> str:
    """A usage entry's provider or model (``""`` when absent)."""
    return value if isinstance(value, str) else ""


def _count(entry: Usage, field: str) -> int | None:
    """A usage entry's count (``None`` when absent, however the record spells absent)."""
    value = getattr(entry, field, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _names(record: RunRecord, field: str) -> list[str]:
    """The distinct providers or models a run's usage names, in order of first appearance."""
    return list(
        dict.fromkeys(n for e in record.aggregated_usage if (n := _label(getattr(e, field))))
    )


def _event_of(item: object) -> Event | None:
    if isinstance(item, Event):
        return item
    event = getattr(item, "event", None)
    return event if isinstance(event, Event) else None


class _Spans:
    """The spans of the open run."""

    __slots__ = ("args", "live", "output", "record", "span", "steps", "subagents", "tools")

    def __init__(self, record: RunRecord, span: Span, output: OutputMessages | None) -> None:
        self.record = record
        self.span = span
        self.output = output  # with capture_content: what the run's own agent streamed
        self.tools: dict[str, tuple[ToolCallRecord, Span]] = {}
        self.live: dict[str, Any] = {}  # the store's tool call, behind the accumulator
        self.args: dict[str, list[str]] = {}  # argument deltas, with capture on bare events
        self.steps: list[tuple[StepRecord, Span]] = []
        self.subagents: dict[str, tuple[SubagentRecord, Span]] = {}


class OTel(Transducer[T, T]):
    """The OpenTelemetry stage (see the module documentation); build it with :func:`otel`."""

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        agent_name: str | None = None,
        attributes: Mapping[str, str] | None = None,
        capture_content: bool = False,
        usage: UsageMeter | None = None,
        clock: Callable[[], float] | None = None,
        max_attribute_length: int = DEFAULT_MAX_ATTRIBUTE_LENGTH,
        max_series: int = DEFAULT_MAX_SERIES,
        legacy_usage_names: bool = False,
        traces: bool = True,
        metrics: bool = True,
        prices: PriceTable | None = None,
        scope_key: str = SCOPE_KEY,
    ) -> None:
        from opentelemetry import metrics as otel_metrics
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        if max_attribute_length < 1 or max_series < 1:
            raise UsageError(
                "max_attribute_length and max_series must be at least 1, got "
                f"{max_attribute_length}, {max_series}"
            )
        self.max_attribute_length = max_attribute_length
        self.max_series = max_series
        if not traces:
            tracer_provider = trace.NoOpTracerProvider()
        if not metrics:
            meter_provider = otel_metrics.NoOpMeterProvider()
        self._series = _series_of(
            meter_provider if meter_provider is not None else otel_metrics.get_meter_provider()
        )
        self._trace = trace
        self._tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = otel_metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self._propagator = TraceContextTextMapPropagator()
        self.agent_name = agent_name
        self.attributes: dict[str, str] = dict(attributes or {})
        self.capture_content = capture_content
        self.usage = usage
        self.legacy_usage_names = legacy_usage_names
        self.prices = prices
        self.scope_key = scope_key
        #: When set, the context that parents every run's span, whatever the run's metadata
        #: says (:class:`~agui_meta.HttpAgent` sets it to the context current when its run
        #: starts, so that a client's spans stay in the client's trace).
        self.parent_context: Any = None
        self._cost = (
            meter.create_counter(
                "agui.usage.cost",
                unit=prices.currency,
                description="What the runs' tokens cost, by the price table.",
            )
            if prices is not None
            else None
        )
        self._token_usage = (
            meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
            )
            if legacy_usage_names
            else None
        )
        self._token_counters = [
            (field, name, meter.create_counter(name, unit="{token}", description=text))
            for field, name, text in _TOKEN_COUNTERS
        ]
        self._agent_duration = meter.create_histogram(
            "gen_ai.invoke_agent.duration",
            unit="s",
            description="The end-to-end duration of a single agent invocation.",
            explicit_bucket_boundaries_advisory=AGENT_BUCKETS,
        )
        self._tool_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration",
            unit="s",
            description="The duration of a single tool execution.",
            explicit_bucket_boundaries_advisory=TOOL_BUCKETS,
        )
        self._events = meter.create_counter(
            "agui.events", unit="{event}", description="AG-UI events seen, by type."
        )
        self._reports = meter.create_counter(
            "agui.reports", unit="{report}", description="Reports of the pipeline, by code."
        )
        self._overflow = meter.create_counter(
            "agui.telemetry.overflow",
            unit="{recording}",
            description="Recordings whose stream-given attribute values were folded into "
            "_OTHER (the instrument's series limit was reached).",
        )
        self._counts: dict[str, int] = {}
        self._run: _Spans | None = None
        self._ledger: Ledger[Any] = Ledger(self._run_ended, max_runs=0, clock=clock)
        self._classes: dict[type, type] = {}
        self._handlers: dict[type, Callable[[Any, Any], None]] = {
            RunStartedEvent: self._run_started,
            ToolCallStartEvent: self._tool_started,
            ToolCallChunkEvent: self._tool_started,
            ToolCallArgsEvent: self._tool_args,
            ToolCallResultEvent: self._tool_result,
            StepStartedEvent: self._step_started,
            StepFinishedEvent: self._step_finished,
            SubagentStartedEvent: self._subagent_started,
            SubagentFinishedEvent: self._subagent_ended,
            TextMessageStartEvent: self._text_started,
            TextMessageContentEvent: self._text_content,
            TextMessageChunkEvent: self._text_chunk,
            SubagentErrorEvent: self._subagent_ended,
        }

    # -- the stage -------------------------------------------------------------------------

    def connect(self, emit: Callable[[T], None], ctx: Context) -> Callable[[T], None]:
        self.emit = emit
        self.ctx = ctx
        self._ledger.connect(emit, ctx)
        handler = ctx.on_report
        counter = self._reports

        def count(report: Report) -> None:
            labels = {"agui.report.code": report.code, "agui.report.severity": report.severity}
            counter.add(1, self._points("agui.reports", labels))
            handler(report)

        ctx.on_report = count
        return self.feed

    def feed(self, item: T) -> None:
        self._ledger.feed(item)  # emits the item, then records it
        event = _event_of(item)
        if event is None:
            return
        kind = event.type
        counts = self._counts
        counts[kind] = counts.get(kind, 0) + 1
        cls = type(event)
        base = self._classes.get(cls)
        if base is None:
            base = self._classes[cls] = next((c for c in cls.__mro__ if c in _EVENT_CLASSES), cls)
        handler = self._handlers.get(base)
        if handler is not None:
            handler(event, item)

    def close(self) -> None:
        self._ledger.close()  # ends the open run, if any
        self._flush_counts()

    def _flush_counts(self) -> None:
        counts, self._counts = self._counts, {}
        for kind, n in counts.items():
            self._events.add(n, self._points("agui.events", {"agui.event.type": kind}))

    # -- helpers ---------------------------------------------------------------------------

    def _clipped(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """Span attributes with their strings and lists bounded."""
        limit = self.max_attribute_length
        return {key: _clip(value, limit) for key, value in attributes.items()}

    def _name(self, name: str) -> str:
        return str(_clip(name, self.max_attribute_length))

    def _points(self, instrument: str, labels: dict[str, Any]) -> dict[str, Any]:
        """Metric attributes within the instrument's series limit: a new set past it has its
        stream-given values folded into ``_OTHER`` (and the folding is counted)."""
        labels = self._clipped(labels)
        key = frozenset(labels.items())
        series = self._series
        with series.lock:
            seen = series.seen.setdefault(instrument, set())
            if key in seen:
                return labels
            if len(seen) < self.max_series:
                seen.add(key)
                return labels
        self._overflow.add(1, {"agui.instrument": instrument})
        return {k: (v if k in _FIXED_LABELS else OTHER) for k, v in labels.items()}

    def _allowed(self, *metadata: Metadata | UnsetType | None) -> dict[str, Any]:
        """The allow-listed keys of ``metadata`` (merged in order) under their attribute names."""
        mapping = self.attributes
        out: dict[str, Any] = {}
        if not mapping:
            return out
        for md in metadata:
            if isinstance(md, Mapping):
                for key, name in mapping.items():
                    if key in md:
                        out[name] = _attribute_value(md[key])
        return out

    def _parent(self, record: RunRecord) -> OtelContext | None:
        if self.parent_context is not None:
            return self.parent_context  # type: ignore[no-any-return]
        md = record.started_metadata
        if not isinstance(md, Mapping):
            return None
        traceparent = md.get(TRACEPARENT_KEY)
        if not isinstance(traceparent, str):
            return None
        carrier = {"traceparent": traceparent}
        tracestate = md.get(TRACESTATE_KEY)
        if isinstance(tracestate, str):
            carrier["tracestate"] = tracestate
        context = self._propagator.extract(carrier)
        span = self._trace.get_current_span(context)
        return context if span.get_span_context().is_valid else None

    def _child(self, parent: Span) -> OtelContext:
        return self._trace.set_span_in_context(parent)

    def _owner(self, run: _Spans, subagent_run_id: str | None) -> Span:
        if subagent_run_id is not None:
            found = run.subagents.get(subagent_run_id)
            if found is not None:
                return found[1]
        return run.span

    # -- runs ------------------------------------------------------------------------------

    def _run_started(self, event: RunStartedEvent, item: Any) -> None:
        record = self._ledger.current
        if record is None:  # pragma: no cover - the ledger opens one at RUN_STARTED
            return
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": event.thread_id,
            "agui.run.id": event.run_id,
        }
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        if not isinstance(event.parent_run_id, UnsetType):
            attributes["agui.run.parent_id"] = event.parent_run_id
        attributes.update(self._allowed(event.metadata))
        output = None
        if self.capture_content:
            output = OutputMessages(self.max_attribute_length)
            if not isinstance(event.input, UnsetType):
                attributes["gen_ai.input.messages"] = input_messages(event.input.messages)
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        span = self._tracer.start_span(
            self._name(name),
            context=self._parent(record),
            kind=self._trace.SpanKind.CLIENT,
            attributes=self._clipped(attributes),
            start_time=_ns(record.started_at),
        )
        self._run = _Spans(record, span, output)

    def _run_ended(self, record: RunRecord) -> None:
        """The ledger ended a run (at RUN_FINISHED, RUN_ERROR, a new RUN_STARTED or the end)."""
        if self.usage is not None:
            self.usage.add_run(record)
        run = self._run
        if run is None or run.record is not record:
            return  # a run without RUN_STARTED, or a RUN_ERROR amending an ended run
        self._run = None
        end = _end_ns(record.started_at, record.ended_at)
        for tool, span in run.tools.values():
            if span.is_recording():
                self._end_tool(run, tool, span, record.ended_at)
        for step, span in run.steps:
            span.set_attribute("agui.step.status", step.status)
            span.end(end_time=_end_ns(step.started_at, record.ended_at))
        for sub, span in run.subagents.values():
            if span.is_recording():
                span.set_attribute("agui.subagent.status", _clip(sub.status, 64))
                span.end(end_time=_end_ns(sub.started_at, record.ended_at))
        span = run.span
        attributes: dict[str, Any] = {"agui.run.status": record.status}
        if record.status == "running":  # pragma: no cover - the ledger sets it first
            attributes["agui.run.status"] = "incomplete"
        outcome = record.outcome
        if isinstance(outcome, RunSuccess):
            attributes["agui.run.outcome"] = "success"
            if outcome.pending_tool_call_ids:
                attributes["agui.run.pending_tool_call_ids"] = list(outcome.pending_tool_call_ids)
        elif isinstance(outcome, RunInterrupted):
            attributes["agui.run.outcome"] = "interrupt"
            for interrupt in outcome.interrupts:
                event_attributes: dict[str, Any] = {
                    "agui.interrupt.id": interrupt.id,
                    "agui.interrupt.reason": interrupt.reason,
                }
                if not isinstance(interrupt.tool_call_id, UnsetType):
                    event_attributes["agui.interrupt.tool_call_id"] = interrupt.tool_call_id
                if self.capture_content and not isinstance(interrupt.message, UnsetType):
                    event_attributes["agui.interrupt.message"] = interrupt.message
                event_attributes.update(self._allowed(interrupt.metadata))
                span.add_event("agui.interrupt", self._clipped(event_attributes), timestamp=end)
        elif isinstance(outcome, RunCancelled):
            attributes["agui.run.outcome"] = "cancelled"
        provider, model = self._labels(record)
        if provider is not None:
            attributes["gen_ai.provider.name"] = provider
        if model is not None:
            attributes["gen_ai.request.model"] = model
        models = _names(record, "model")
        if len(models) > 1:
            attributes["agui.run.models"] = models
        providers = _names(record, "provider")
        if len(providers) > 1:
            attributes["agui.run.providers"] = providers
        sums: dict[str, int] = {}
        for entry in record.aggregated_usage:
            for name, value in self._usage_attributes(entry).items():
                sums[name] = sums.get(name, 0) + value
        attributes.update(sums)
        scope = scope_of(record, self.scope_key)
        if scope is not None:
            attributes["agui.scope"] = scope
        if self.prices is not None:
            cost = self.prices.total(record.aggregated_usage)
            if cost is not None:
                attributes["agui.usage.cost"] = cost
                attributes["agui.usage.currency"] = self.prices.currency
        attributes.update(
            self._allowed(record.started_metadata, record.finished_metadata, record.error_metadata)
        )
        error_type: str | None = None
        message: str | None = None
        if record.status == "error":
            error_type, message = record.error_code or "_OTHER", record.error_message
        elif record.status in ("incomplete", "running"):
            error_type, message = "incomplete", "the stream ended before the run did"
        if run.output is not None:
            attributes["gen_ai.output.messages"] = self._output(run, error_type)
        for entry in record.aggregated_usage:
            self._model_call(run, entry, end, error_type)
        self._end_span(span, attributes, end, error_type, message)
        # Metrics, with the attributes the conventions list for each.
        metric: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
        if self.agent_name:
            metric["gen_ai.agent.name"] = self.agent_name
        if model is not None:
            metric["gen_ai.request.model"] = model
        if error_type is not None:
            metric["error.type"] = error_type
        seconds = _seconds(record.started_at, record.ended_at)
        if seconds is not None:
            self._agent_duration.record(
                seconds, self._points("gen_ai.invoke_agent.duration", metric)
            )
        for entry in record.aggregated_usage:
            labels: dict[str, Any] = {"gen_ai.operation.name": "chat"}
            provider_name, model_name = _label(entry.provider), _label(entry.model)
            if provider_name:
                labels["gen_ai.provider.name"] = provider_name
            if model_name:
                labels["gen_ai.request.model"] = model_name
            if error_type is not None:
                labels["error.type"] = error_type
            counted = {**labels, "gen_ai.token.modality": "unknown"}
            if self._cost is not None and self.prices is not None:
                cost = self.prices.cost(entry)
                if cost is not None:
                    priced = {**labels, "agui.scope": scope or ""}
                    self._cost.add(cost, self._points("agui.usage.cost", priced))
            for field, name, counter in self._token_counters:
                count = _count(entry, field)
                if count is not None:
                    counter.add(count, self._points(name, counted))
            if self._token_usage is not None:
                labels["gen_ai.operation.name"] = "invoke_agent"
                labels.pop("error.type", None)
                for field, token_type in (("input_tokens", "input"), ("output_tokens", "output")):
                    count = _count(entry, field)
                    if count is not None:
                        point = self._points(
                            "gen_ai.client.token.usage", {**labels, "gen_ai.token.type": token_type}
                        )
                        self._token_usage.record(count, point)
        self._flush_counts()

    def _usage_attributes(self, entry: Usage) -> dict[str, int]:
        """A usage entry's counts under the conventions' span attributes (and the old name of
        ``cache_write`` too, with ``legacy_usage_names``)."""
        out: dict[str, int] = {}
        for field, name in _USAGE_ATTRIBUTES:
            value = _count(entry, field)
            if value is not None:
                out[name] = value
        if self.legacy_usage_names and "gen_ai.usage.cache_write.input_tokens" in out:
            out[LEGACY_CACHE_WRITE] = out["gen_ai.usage.cache_write.input_tokens"]
        return out

    def _model_call(
        self, run: _Spans, entry: Usage, end: int | None, error_type: str | None
    ) -> None:
        """The span of a run's calls to one provider/model (a usage entry): an inference span
        ``chat {model}`` under the run's, from its start to its end, with the tokens."""
        record = run.record
        provider, model = _label(entry.provider), _label(entry.model)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if provider:
            attributes["gen_ai.provider.name"] = provider
        if model:
            attributes["gen_ai.request.model"] = model
            attributes["gen_ai.response.model"] = model
        if isinstance(record.thread_id, str):
            attributes["gen_ai.conversation.id"] = record.thread_id
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        attributes.update(self._usage_attributes(entry))
        total = _count(entry, "total_tokens")
        if total is not None:
            attributes["agui.usage.total_tokens"] = total
        if self.prices is not None:
            cost = self.prices.cost(entry)
            if cost is not None:
                attributes["agui.usage.cost"] = cost
                attributes["agui.usage.currency"] = self.prices.currency
        span = self._tracer.start_span(
            self._name(f"chat {model}" if model else "chat"),
            context=self._child(run.span),
            kind=self._trace.SpanKind.CLIENT,
            attributes=self._clipped(attributes),
            start_time=_ns(record.started_at),
        )
        if error_type is not None:
            span.set_attribute("error.type", _clip(error_type, self.max_attribute_length))
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
        span.end(end_time=end)

    def _output(self, run: _Spans, error_type: str | None) -> str:
        """``gen_ai.output.messages``: the run's text messages and its own tool calls."""
        output = run.output
        assert output is not None
        record = run.record
        outcome = record.outcome
        for tool in record.tool_calls:
            if tool.subagent_run_id is None and tool.started_at is not None:
                name = tool.name if isinstance(tool.name, str) else ""
                output.tool_call(
                    tool.parent_message_id, tool.tool_call_id, name, self._arguments(run, tool)
                )
        if error_type is not None:
            reason = "error"
        elif isinstance(outcome, RunSuccess) and outcome.pending_tool_call_ids:
            reason = "tool_call"
        else:
            reason = "stop"
        return output.to_json(reason)

    @staticmethod
    def _arguments(run: _Spans, tool: ToolCallRecord) -> str | None:
        live = run.live.get(tool.tool_call_id)
        if live is not None:
            arguments = live.arguments
            return arguments if isinstance(arguments, str) else None
        return "".join(run.args.get(tool.tool_call_id, ()))

    # -- text messages (captured content only) ---------------------------------------------

    def _text_started(self, event: TextMessageStartEvent, item: Any) -> None:
        run = self._run
        if run is None or run.output is None or not isinstance(event.subagent_run_id, UnsetType):
            return
        if isinstance(event.role, UnsetType) or event.role == "assistant":
            run.output.open(event.message_id)

    def _text_content(self, event: TextMessageContentEvent, item: Any) -> None:
        run = self._run
        if run is not None and run.output is not None:
            run.output.text(event.message_id, event.delta)

    def _text_chunk(self, event: TextMessageChunkEvent, item: Any) -> None:
        # Before chunk expansion: a chunk naming a message opens (or continues) it; one without
        # an id continues the last.
        run = self._run
        if run is None or run.output is None or not isinstance(event.subagent_run_id, UnsetType):
            return
        output = run.output
        message_id = event.message_id
        if isinstance(message_id, UnsetType):
            if output.last_chunk is None:
                return
            message_id = output.last_chunk
        elif isinstance(event.role, UnsetType) or event.role == "assistant":
            output.open(message_id)
        output.last_chunk = message_id
        if isinstance(event.delta, str):
            output.text(message_id, event.delta)

    @staticmethod
    def _labels(record: RunRecord) -> tuple[str | None, str | None]:
        """The provider and the model, when the run's usage names exactly one of each."""
        providers = {e.provider for e in record.aggregated_usage if e.provider is not None}
        models = {e.model for e in record.aggregated_usage if e.model is not None}
        provider = next(iter(providers)) if len(providers) == 1 else None
        model = next(iter(models)) if len(models) == 1 else None
        return provider or None, model or None

    # -- tool calls ------------------------------------------------------------------------

    def _tool_started(self, event: ToolCallStartEvent | ToolCallChunkEvent, item: Any) -> None:
        run = self._run
        call_id = event.tool_call_id
        if run is None or isinstance(call_id, UnsetType):
            return
        if call_id in run.tools:  # a START repeated, or a chunk continuing its call
            if isinstance(event, ToolCallChunkEvent):
                self._tool_args(event, item)
            return
        calls = run.record.tool_calls
        if not calls or calls[-1].tool_call_id != call_id:
            return  # not kept by the ledger (its bound): no span
        tool = calls[-1]
        name = tool.name if isinstance(tool.name, str) else ""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if tool.parent_message_id is not None:
            attributes["agui.tool_call.parent_message_id"] = tool.parent_message_id
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        span = self._tracer.start_span(
            self._name(f"execute_tool {name}" if name else "execute_tool"),
            context=self._child(self._owner(run, tool.subagent_run_id)),
            kind=self._trace.SpanKind.INTERNAL,
            attributes=self._clipped(attributes),
            start_time=_ns(tool.started_at),
        )
        run.tools[call_id] = (tool, span)
        live = getattr(item, "item", None)
        if hasattr(live, "arguments"):
            run.live[call_id] = live
        elif self.capture_content and isinstance(event, ToolCallChunkEvent):
            self._tool_args(event, item)

    def _tool_args(self, event: ToolCallArgsEvent | ToolCallChunkEvent, item: Any) -> None:
        run = self._run
        if not self.capture_content or run is None:
            return
        call_id = event.tool_call_id
        if isinstance(call_id, UnsetType) or call_id in run.live or call_id not in run.tools:
            return
        if isinstance(event.delta, str):
            run.args.setdefault(call_id, []).append(event.delta)

    def _tool_result(self, event: ToolCallResultEvent, item: Any) -> None:
        run = self._run
        if run is None:
            return
        found = run.tools.get(event.tool_call_id)
        if found is None or not found[1].is_recording():
            return
        tool, span = found
        if self.capture_content:
            content = event.content
            span.set_attribute(
                "gen_ai.tool.call.result",
                _clip(
                    content if isinstance(content, str) else _attribute_value(content),
                    self.max_attribute_length,
                ),
            )
        self._end_tool(run, tool, span, tool.result_at)

    def _end_tool(self, run: _Spans, tool: ToolCallRecord, span: Span, end: float | None) -> None:
        attributes: dict[str, Any] = {"agui.tool_call.arguments_length": tool.arguments_length}
        if tool.status != "answered":
            attributes["agui.tool_call.pending"] = tool.pending
            attributes["agui.tool_call.status"] = tool.status
        if tool.result_message_id is not None:
            attributes["agui.tool_call.result_message_id"] = tool.result_message_id
        live = run.live.get(tool.tool_call_id)
        metadata = live.metadata if live is not None else tool.metadata
        attributes.update(self._allowed(metadata, tool.result_metadata))
        if self.capture_content:
            if live is not None:
                arguments = live.arguments
            else:
                arguments = "".join(run.args.get(tool.tool_call_id, ()))
            if isinstance(arguments, str):
                attributes["gen_ai.tool.call.arguments"] = arguments
        span.set_attributes(self._clipped(attributes))
        span.end(end_time=_end_ns(tool.started_at, end))
        seconds = _seconds(tool.started_at, end)
        if seconds is not None:
            name = tool.name if isinstance(tool.name, str) else ""
            metric: dict[str, Any] = {"gen_ai.tool.name": name}
            if self.agent_name:
                metric["gen_ai.agent.name"] = self.agent_name
            metric["gen_ai.tool.type"] = "function"
            self._tool_duration.record(
                seconds, self._points("gen_ai.execute_tool.duration", metric)
            )

    # -- steps and subagents ---------------------------------------------------------------

    def _step_started(self, event: StepStartedEvent, item: Any) -> None:
        run = self._run
        if run is None:
            return
        steps = run.record.steps
        if not steps or steps[-1].started_index is None or steps[-1].status != "running":
            return
        step = steps[-1]
        if any(s is step for s, _ in run.steps):
            return
        attributes: dict[str, Any] = {"agui.step.name": step.name}
        attributes.update(self._allowed(step.started_metadata))
        span = self._tracer.start_span(
            self._name(f"step {step.name}"),
            context=self._child(self._owner(run, step.subagent_run_id)),
            kind=self._trace.SpanKind.INTERNAL,
            attributes=self._clipped(attributes),
            start_time=_ns(step.started_at),
        )
        run.steps.append((step, span))

    def _step_finished(self, event: StepFinishedEvent, item: Any) -> None:
        run = self._run
        if run is None:
            return
        still: list[tuple[StepRecord, Span]] = []
        for step, span in run.steps:
            if step.status == "finished":
                span.set_attributes(self._clipped(self._allowed(step.finished_metadata)))
                span.end(end_time=_end_ns(step.started_at, step.ended_at))
            else:
                still.append((step, span))
        run.steps = still

    def _subagent_started(self, event: SubagentStartedEvent, item: Any) -> None:
        run = self._run
        if run is None:
            return
        subs = run.record.subagents
        if not subs or subs[-1].subagent_run_id != event.subagent_run_id:
            return
        sub = subs[-1]
        if sub.status != "running" or event.subagent_run_id in run.subagents:
            return
        parent = run.span
        tool = sub.parent_tool_call_id
        if tool is not None and tool in run.tools:
            parent = run.tools[tool][1]
        elif sub.parent_subagent_run_id is not None:
            parent = self._owner(run, sub.parent_subagent_run_id)
        name = sub.name if isinstance(sub.name, str) else ""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": run.record.thread_id
            if isinstance(run.record.thread_id, str)
            else "",
            "agui.subagent.run_id": sub.subagent_run_id,
        }
        if name:
            attributes["gen_ai.agent.name"] = name
        if isinstance(sub.description, str):
            attributes["gen_ai.agent.description"] = sub.description
        attributes.update(self._allowed(sub.started_metadata))
        span = self._tracer.start_span(
            self._name(f"invoke_agent {name}" if name else "invoke_agent"),
            context=self._child(parent),
            kind=self._trace.SpanKind.INTERNAL,
            attributes=self._clipped(attributes),
            start_time=_ns(sub.started_at),
        )
        run.subagents[sub.subagent_run_id] = (sub, span)

    def _subagent_ended(self, event: SubagentFinishedEvent | SubagentErrorEvent, item: Any) -> None:
        run = self._run
        if run is None:
            return
        found = run.subagents.get(event.subagent_run_id)
        if found is None or not found[1].is_recording():
            return
        sub, span = found
        attributes: dict[str, Any] = {"agui.subagent.status": sub.status}
        if isinstance(sub.outcome, str):
            attributes["agui.subagent.outcome"] = sub.outcome
        attributes.update(self._allowed(sub.finished_metadata, sub.error_metadata))
        error_type = (sub.error_code or "_OTHER") if sub.status == "error" else None
        end = _end_ns(sub.started_at, sub.ended_at)
        self._end_span(span, attributes, end, error_type, sub.error_message)

    def _end_span(
        self,
        span: Span,
        attributes: dict[str, Any],
        end: int | None,
        error_type: str | None,
        message: str | None,
    ) -> None:
        """End a run's or a subagent's span with its attributes; a failed one (``error_type``
        given) with an error status saying ``message``, and ``error.type``."""
        if error_type is not None:
            attributes["error.type"] = error_type
            status = None if message is None else self._name(message)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, status))
        span.set_attributes(self._clipped(attributes))
        span.end(end_time=end)


if TYPE_CHECKING:

    class OTelStage(OTel[Any]):
        """For type checkers only: what :func:`otel` gives, an :class:`OTel` of any items.

        A type without parameters, so that :func:`~agui_meta.wrap`'s overloads can read
        ``wrap(source, *stages, otel())`` as ``Pipeline[Update]`` (a pass-through stage after
        the default stages); ``OTel[Any]`` would make the call ambiguous, hence ``Any``.
        """


def otel(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    agent_name: str | None = None,
    attributes: Mapping[str, str] | None = None,
    capture_content: bool = False,
    usage: UsageMeter | None = None,
    clock: Callable[[], float] | None = None,
    max_attribute_length: int = DEFAULT_MAX_ATTRIBUTE_LENGTH,
    max_series: int = DEFAULT_MAX_SERIES,
    legacy_usage_names: bool = False,
    traces: bool = True,
    metrics: bool = True,
    prices: PriceTable | None = None,
    scope_key: str = SCOPE_KEY,
) -> OTelStage:
    """A pass-through stage that turns the stream into OpenTelemetry spans and metrics.

    :param tracer_provider: where spans go (the global provider by default).
    :param meter_provider: where metrics go (the global provider by default).
    :param agent_name: the agent's name: ``gen_ai.agent.name``, and the run span's name
        ``invoke_agent {agent_name}``.
    :param attributes: the allowlist: metadata key → attribute name (for example
        ``{"acme.model": "gen_ai.request.model"}``); no other metadata value is exported.
    :param capture_content: also export tool-call arguments and results
        (``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``), interrupt messages, and
        the run's input and output messages (``gen_ai.input.messages``,
        ``gen_ai.output.messages``).
    :param usage: a :class:`~agui_meta.UsageMeter` that every run's usage is added to.
    :param clock: the time of receipt in milliseconds, for events without ``timestamp``.
    :param max_attribute_length: the longest string put in a span (characters; longer ones
        are cut, ending with ``…``).
    :param max_series: the most attribute sets each metric instrument records (shared by the
        stages of one meter provider); past it, stream-given values are recorded as
        ``_OTHER`` and counted by ``agui.telemetry.overflow``.
    :param legacy_usage_names: also emit the names the conventions are moving away from, for
        backends that still read them: the span attribute
        ``gen_ai.usage.cache_creation.input_tokens`` (beside ``cache_write``) and the
        ``gen_ai.client.token.usage`` histogram (beside the ``gen_ai.client.inference.usage.*``
        counters).
    :param traces: record spans (``False``: metrics only, whatever the tracer provider).
    :param metrics: record metrics (``False``: traces only, whatever the meter provider).
    :param prices: a :class:`~agui_meta.PriceTable`: model-call and run spans get
        ``agui.usage.cost`` (and ``agui.usage.currency``), and the counter ``agui.usage.cost``
        sums it by provider, model and scope.
    :param scope_key: the run-metadata key of a run's scope (tenant or user): ``agui.scope``
        on the run's span and the cost counter.

    Needs ``opentelemetry-api`` (``pip install 'agui-meta[otel]'``). See
    :mod:`agui_meta._otel` for the spans, attributes and metrics.
    """
    stage: OTel[Any] = OTel(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        agent_name=agent_name,
        attributes=attributes,
        capture_content=capture_content,
        usage=usage,
        clock=clock,
        max_attribute_length=max_attribute_length,
        max_series=max_series,
        legacy_usage_names=legacy_usage_names,
        traces=traces,
        metrics=metrics,
        prices=prices,
        scope_key=scope_key,
    )
    return cast("OTelStage", stage)
