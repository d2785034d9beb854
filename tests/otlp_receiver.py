"""A real OTLP/HTTP receiver on 127.0.0.1 for the tests: protobuf decoded with opentelemetry-proto.

``with OtlpReceiver() as receiver:`` serves ``POST /v1/traces`` and ``POST /v1/metrics`` on a
free port (``receiver.url``) in a thread; :meth:`OtlpReceiver.spans` and
:meth:`OtlpReceiver.metrics` give what arrived, flattened. ``fail=True`` answers every export
with HTTP 500; ``signals=("traces",)`` serves traces only (``/v1/metrics`` answers 404, as
Phoenix does); ``paths`` lists every path posted to.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, final

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in kvs}


@final
class OtlpReceiver:
    def __init__(
        self, *, fail: bool = False, signals: tuple[str, ...] = ("traces", "metrics")
    ) -> None:
        self.fail = fail
        self.signals = signals
        self.paths: list[str] = []
        self.traces: list[ExportTraceServiceRequest] = []
        self.metric_requests: list[ExportMetricsServiceRequest] = []
        self.content_types: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                receiver.content_types.add(self.headers.get("Content-Type", ""))
                receiver.paths.append(self.path)
                if receiver.fail:
                    self.send_response(500)
                    self.end_headers()
                    return
                if self.path == "/v1/traces" and "traces" in receiver.signals:
                    receiver.traces.append(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics" and "metrics" in receiver.signals:
                    receiver.metric_requests.append(ExportMetricsServiceRequest.FromString(body))
                    reply = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def spans(self) -> list[dict[str, Any]]:
        """Every span received: name, ids (hex), parent, kind, times, attributes, status."""
        out = []
        for request in self.traces:
            for resource in request.resource_spans:
                service = attributes(resource.resource.attributes).get("service.name")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        out.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex() or None,
                                "kind": span.kind,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "attributes": attributes(span.attributes),
                                "events": [e.name for e in span.events],
                                "status": span.status.code,
                                "scope": scope.scope.name,
                                "service": service,
                            }
                        )
        return out

    def metrics(self) -> Iterator[tuple[str, Any]]:
        """Every metric received: (name, metric message)."""
        for request in self.metric_requests:
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        yield metric.name, metric
