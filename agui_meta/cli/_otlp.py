"""``replay --otlp URL``: the OpenTelemetry SDK wired to OTLP/HTTP endpoints for one run.

Spans and metrics of the :func:`agui_meta.otel` stage go to ``URL/v1/traces`` and
``URL/v1/metrics`` (OTLP over HTTP, protobuf) through the SDK's own exporters (extra
``otlp``); a URL that already ends in ``/v1/traces`` or ``/v1/metrics`` (what backends such as
Phoenix advertise) is understood as the endpoint's base. ``--otlp-signals traces`` (or
``metrics``) sends one signal only, for a backend without a receiver for the other;
``--otlp-traces URL`` and ``--otlp-metrics URL`` name each endpoint on its own.
``--otlp-agent-name NAME`` and ``--otlp-capture-content`` are the stage's ``agent_name`` and
``capture_content`` (``gen_ai.agent.name`` and the run span's name; the opt-in content
attributes). Everything is flushed when the stream ends; a failed export is said, not hidden.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._args import http_url, name

if TYPE_CHECKING:
    from .._prices import PriceTable

__all__ = ["SIGNALS", "OtlpExport", "add_arguments", "endpoint", "from_args"]

#: Seconds each export may take (the exporters retry within it).
TIMEOUT = 10.0
SIGNALS = ("traces", "metrics")


def endpoint(url: str, signal: str) -> str:
    """The OTLP/HTTP endpoint of ``signal`` for ``url``: ``URL/v1/<signal>``, where a URL that
    ends in ``/v1/traces`` or ``/v1/metrics`` is read as its base (never ``/v1/traces/v1/traces``)."""
    base = url.rstrip("/")
    for known in SIGNALS:
        if base.endswith(f"/v1/{known}"):
            base = base[: -len(f"/v1/{known}")]
            break
    return f"{base}/v1/{signal}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--otlp URL``, ``--otlp-signals``, ``--otlp-traces URL``, ``--otlp-metrics URL``,
    ``--otlp-legacy-names``, ``--otlp-agent-name NAME``, ``--otlp-capture-content``."""
    parser.add_argument(
        "--otlp",
        metavar="URL",
        type=http_url,
        help="also export the runs as OpenTelemetry spans and metrics, with the stream's own "
        "timestamps, to an OTLP/HTTP endpoint (URL/v1/traces, URL/v1/metrics; a URL ending in "
        "/v1/traces or /v1/metrics is understood; needs pip install 'agui-meta[otel,otlp]')",
    )
    parser.add_argument(
        "--otlp-signals",
        choices=("traces", "metrics", "both"),
        default="both",
        help="what --otlp sends: traces, metrics or both (default; a backend without a metrics "
        "receiver, such as Phoenix, takes traces)",
    )
    parser.add_argument(
        "--otlp-traces",
        metavar="URL",
        type=http_url,
        help="export spans to this OTLP/HTTP endpoint",
    )
    parser.add_argument(
        "--otlp-metrics",
        metavar="URL",
        type=http_url,
        help="export metrics to this OTLP/HTTP endpoint",
    )
    parser.add_argument(
        "--otlp-legacy-names",
        action="store_true",
        help="also export the names the GenAI conventions are replacing "
        "(gen_ai.usage.cache_creation.input_tokens, gen_ai.client.token.usage), for backends "
        "that still read them",
    )
    parser.add_argument(
        "--otlp-agent-name",
        metavar="NAME",
        type=name,
        help="the agent's name: gen_ai.agent.name, and the run spans' name invoke_agent NAME",
    )
    parser.add_argument(
        "--otlp-capture-content",
        action="store_true",
        help="also export content, opt-in in the GenAI conventions: the runs' input and output "
        "messages (gen_ai.input.messages, gen_ai.output.messages), tool-call arguments and "
        "results, interrupt messages",
    )


def from_args(args: argparse.Namespace, prices: PriceTable | None = None) -> OtlpExport | None:
    """The export the options ask for (``None`` when none); raises ``ImportError`` without
    the SDK."""
    traces = metrics = None
    if args.otlp:
        if args.otlp_signals in ("traces", "both"):
            traces = endpoint(args.otlp, "traces")
        if args.otlp_signals in ("metrics", "both"):
            metrics = endpoint(args.otlp, "metrics")
    if args.otlp_traces:
        traces = endpoint(args.otlp_traces, "traces")
    if args.otlp_metrics:
        metrics = endpoint(args.otlp_metrics, "metrics")
    if traces is None and metrics is None:
        return None
    return OtlpExport(
        traces=traces,
        metrics=metrics,
        prices=prices,
        legacy=args.otlp_legacy_names,
        agent_name=args.otlp_agent_name,
        capture_content=args.otlp_capture_content,
    )


class OtlpExport:
    """Private SDK providers exporting to OTLP/HTTP endpoints; :meth:`close` flushes them.

    ``traces`` and ``metrics`` are the full endpoint URLs (``…/v1/traces``, ``…/v1/metrics``);
    a signal without one is not recorded at all. ``agent_name`` and ``capture_content`` go to
    the :func:`~agui_meta.otel` stage as they are.
    """

    def __init__(
        self,
        *,
        traces: str | None,
        metrics: str | None,
        timeout: float = TIMEOUT,
        prices: PriceTable | None = None,
        legacy: bool = False,
        agent_name: str | None = None,
        capture_content: bool = False,
    ) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import (
                MetricExportResult,
                PeriodicExportingMetricReader,
            )
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
        except ImportError as exc:
            raise ImportError(
                f"--otlp needs the OpenTelemetry SDK and its OTLP exporter "
                f"(pip install 'agui-meta[otel,otlp]'): {exc}"
            ) from None
        self.traces = traces
        self.metrics = metrics
        self.prices = prices
        self.legacy = legacy
        self.agent_name = agent_name
        self.capture_content = capture_content
        self.failures: list[str] = []
        failures = self.failures

        class Spans(OTLPSpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                result = super().export(spans)
                if result is not SpanExportResult.SUCCESS:
                    failures.append(f"{len(spans)} spans to {traces}")
                return result

        class Metrics(OTLPMetricExporter):
            def export(  # type: ignore[override]  # its two bases disagree on the timeout
                self, metrics_data: Any, timeout_millis: float = 10_000, **kw: Any
            ) -> MetricExportResult:
                result = super().export(metrics_data, timeout_millis, **kw)
                if result is not MetricExportResult.SUCCESS:
                    failures.append(
                        f"metrics to {metrics} (to send traces only: --otlp-signals traces)"
                    )
                return result

        resource = Resource.create({"service.name": "agui-meta replay"})
        self.tracer_provider = TracerProvider(resource=resource)
        if traces is not None:
            self.tracer_provider.add_span_processor(
                BatchSpanProcessor(Spans(endpoint=traces, timeout=timeout))
            )
        readers = []
        if metrics is not None:
            readers.append(
                PeriodicExportingMetricReader(
                    Metrics(endpoint=metrics, timeout=timeout),
                    export_interval_millis=3_600_000,  # once, when closed
                )
            )
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers)

    def stage(self) -> Any:
        from .._otel import otel

        return otel(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            traces=self.traces is not None,
            metrics=self.metrics is not None,
            prices=self.prices,
            legacy_usage_names=self.legacy,
            agent_name=self.agent_name,
            capture_content=self.capture_content,
        )

    def close(self) -> None:
        """Export what is left and stop; ``failures`` then lists what could not be sent."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
