"""AG-UI token usage and durations as Prometheus metrics, through the OpenTelemetry SDK.

    pip install 'agui-meta[otel]' opentelemetry-sdk opentelemetry-exporter-prometheus
    python examples/prometheus_metrics.py --port 9464      # then scrape :9464/metrics

The SDK's Prometheus reader turns the OpenTelemetry metrics of ``agui_meta.otel()`` into a
scrape endpoint: the per-direction token counters of the GenAI conventions
(``gen_ai_client_inference_usage_input_tokens_total``, ``…_output_tokens_total``, ``…_cache_read_…``,
``…_cache_write_…``, ``…_reasoning_output_tokens_total``, by provider and model),
``gen_ai_invoke_agent_duration_seconds``, ``gen_ai_execute_tool_duration_seconds``,
``agui_events_total``, and the running totals of a shared ``agui_meta.UsageMeter``
(``agui_meta_token_usage``: a stream replayed is not counted twice). With a price table
(``--prices``, ``examples/prices.toml`` by default: illustrative figures), what the tokens cost:
``agui_usage_cost_USD_total`` (per provider, model and scope) and the meter's ``agui_meta_cost_USD``
and ``agui_meta_scope_cost_USD``. The script feeds the bundled recordings (or the files given)
once, prints the address, and serves until stopped.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

import anyio
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

import agui_meta

STREAMS = Path(__file__).resolve().parent / "streams"


async def feed(
    path: Path,
    meter_provider: MeterProvider,
    usage: agui_meta.UsageMeter,
    prices: agui_meta.PriceTable | None,
) -> None:
    stages = agui_meta.DefaultStages()
    telemetry = agui_meta.otel(meter_provider=meter_provider, usage=usage, prices=prices)
    async with agui_meta.wrap(
        await anyio.Path(path).read_bytes(), *stages, telemetry, mode="keep_going"
    ) as stream:
        await stream.drain()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="recorded streams (SSE or JSON lines)")
    parser.add_argument("--port", type=int, default=9464, help="0: any free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--prices", type=Path, default=STREAMS.parent / "prices.toml")
    args = parser.parse_args()
    prices = agui_meta.PriceTable.load(args.prices)
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    usage = agui_meta.UsageMeter(prices=prices)
    usage.observe(meter_provider.get_meter("agui_meta.usage"))
    for path in args.files or [STREAMS / "travel.sse", STREAMS / "support.jsonl"]:
        anyio.run(feed, path, meter_provider, usage, prices)
    server, _ = start_http_server(args.port, addr=args.host)
    print(f"serving http://{args.host}:{server.server_port}/metrics", flush=True)
    try:
        threading.Event().wait()  # until interrupted
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        meter_provider.shutdown()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
