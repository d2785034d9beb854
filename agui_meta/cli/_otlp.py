"""``replay --otlp URL``: the OpenTelemetry SDK wired to an OTLP/HTTP endpoint for one run.

Spans and metrics of the :func:`agui_meta.otel` stage go to ``URL/v1/traces`` and
``URL/v1/metrics`` (OTLP over HTTP, protobuf) through the SDK's own exporters (extra
``otlp``). Everything is flushed when the stream ends; a failed export is said, not hidden.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OtlpExport"]

#: Seconds each export may take (the exporters retry within it).
TIMEOUT = 10.0


class OtlpExport:
    """Private SDK providers exporting to one OTLP/HTTP endpoint; :meth:`close` flushes them."""

    def __init__(self, url: str, *, timeout: float = TIMEOUT) -> None:
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
        base = url.rstrip("/")
        self.url = base
        self.failures: list[str] = []
        failures = self.failures

        class Spans(OTLPSpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                result = super().export(spans)
                if result is not SpanExportResult.SUCCESS:
                    failures.append(f"{len(spans)} spans to {base}/v1/traces")
                return result

        class Metrics(OTLPMetricExporter):
            def export(  # type: ignore[override]  # its two bases disagree on the timeout
                self, metrics_data: Any, timeout_millis: float = 10_000, **kw: Any
            ) -> MetricExportResult:
                result = super().export(metrics_data, timeout_millis, **kw)
                if result is not MetricExportResult.SUCCESS:
                    failures.append(f"metrics to {base}/v1/metrics")
                return result

        resource = Resource.create({"service.name": "agui-meta replay"})
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(
            BatchSpanProcessor(Spans(endpoint=f"{base}/v1/traces", timeout=timeout))
        )
        reader = PeriodicExportingMetricReader(
            Metrics(endpoint=f"{base}/v1/metrics", timeout=timeout),
            export_interval_millis=3_600_000,  # once, when closed
        )
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[reader])

    def stage(self) -> Any:
        from .._otel import otel

        return otel(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def close(self) -> None:
        """Export what is left and stop; ``failures`` then lists what could not be sent."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
