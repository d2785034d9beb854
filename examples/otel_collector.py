"""Recorded AG-UI streams as OpenTelemetry traces and metrics, sent to an OTLP collector.

    pip install 'agui-meta[otel,otlp]'
    python examples/otel_collector.py                                   # examples/streams, to :4318
    python examples/otel_collector.py --endpoint http://collector:4318 recording.sse

The application owns the SDK: it sets the global tracer and meter providers once, with the
OTLP/HTTP exporters (``/v1/traces`` and ``/v1/metrics`` under the endpoint, the collector's
default port being 4318), and ``agui_meta.otel()`` — which needs the API only — uses them. Each
run becomes an ``invoke_agent`` span with its tool calls, steps, subagents and model calls
(``chat {model}``, one per provider/model of its usage) below it, stamped with the stream's own
timestamps; usage becomes ``gen_ai.usage.*`` attributes and the ``gen_ai.client.inference.usage.*``
token counters. Shutting the providers down flushes everything.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio
from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import agui_meta

STREAMS = Path(__file__).resolve().parent / "streams"


def configure(endpoint: str) -> tuple[TracerProvider, MeterProvider]:
    """The SDK, set up as an application would: global providers exporting over OTLP/HTTP."""
    resource = Resource.create({"service.name": "agui-meta-example"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    )
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"), export_interval_millis=10_000
    )
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return tracer_provider, meter_provider


async def export(path: Path) -> list[agui_meta.RunRecord]:
    """One recorded stream through the default stages and the OpenTelemetry stage."""
    stages = agui_meta.DefaultStages()
    telemetry = agui_meta.otel(
        agent_name="example-agent",
        # Only what the allowlist names leaves the process: here, two metadata keys.
        attributes={"travelco.request_id": "app.request_id", "helpdesk.ticket": "app.ticket"},
    )
    async with agui_meta.wrap(
        await anyio.Path(path).read_bytes(), *stages, telemetry, mode="keep_going"
    ) as stream:
        await stream.drain()
    return stages.ledger.runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="recorded streams (SSE or JSON lines)")
    parser.add_argument("--endpoint", default="http://127.0.0.1:4318", help="OTLP/HTTP endpoint")
    args = parser.parse_args()
    paths = args.files or [STREAMS / "travel.sse", STREAMS / "support.jsonl"]
    tracer_provider, meter_provider = configure(args.endpoint.rstrip("/"))
    try:
        for path in paths:
            runs = anyio.run(export, path)
            print(f"{path.name}: {len(runs)} run{'' if len(runs) == 1 else 's'} exported")
    finally:
        tracer_provider.shutdown()  # flushes the batch of spans
        meter_provider.shutdown()  # a last collection and export
    print(f"sent to {args.endpoint}")


if __name__ == "__main__":
    main()
