"""A real OTLP/gRPC trace receiver (grpcio + opentelemetry-proto) on 127.0.0.1, and the Envoy
configuration that makes Envoy's own OpenTelemetry tracer export every request's spans to it.

Spans are kept as plain dicts: name, hex trace/span/parent ids, kind and attributes (string values)."""
from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from .envoy import grpc_cluster

CLUSTER = "otlp"


def _value(v) -> str:
    kind = v.WhichOneof("value")
    return "" if kind is None else str(getattr(v, kind))


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self):
        self.spans: list[dict] = []
        self.resources: list[dict] = []
        self._lock = threading.Lock()
        self._server = None
        self.port = 0

    def Export(self, request, context):  # noqa: N802 (the gRPC method's name)
        with self._lock:
            for rs in request.resource_spans:
                self.resources.append({a.key: _value(a.value) for a in rs.resource.attributes})
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append({
                            "name": s.name,
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex(),
                            "kind": s.kind,
                            "attributes": {a.key: _value(a.value) for a in s.attributes},
                            "start": s.start_time_unix_nano,
                            "end": s.end_time_unix_nano,
                        })
        return trace_service_pb2.ExportTraceServiceResponse()

    def start(self) -> "Receiver":
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)

    def trace(self, trace_id: str, count: int, timeout_s: float = 15) -> list[dict]:
        """The spans of `trace_id`, once at least `count` arrived (fails with what did arrive)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                got = [s for s in self.spans if s["trace_id"] == trace_id]
            if len(got) >= count or time.monotonic() > deadline:
                assert len(got) >= count, f"{len(got)} of {count} spans of trace {trace_id}: {got}"
                return got
            time.sleep(0.05)

    def all(self) -> list[dict]:
        with self._lock:
            return list(self.spans)


def with_tracing(config: dict, port: int, service: str = "gateway") -> dict:
    """Envoy's OpenTelemetry tracer on the listener (every request sampled), exporting to the receiver
    on `port` at once (one span per export, flushed every 50 ms)."""
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["tracing"] = {
        "random_sampling": {"value": 100},
        "provider": {
            "name": "envoy.tracers.opentelemetry",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig",
                "grpc_service": {"envoy_grpc": {"cluster_name": CLUSTER}, "timeout": "1s"},
                "service_name": service,
            },
        },
    }
    config["static_resources"]["clusters"].append(grpc_cluster(CLUSTER, port))
    config["layered_runtime"] = {"layers": [{"name": "otel", "static_layer": {
        "tracing.opentelemetry.min_flush_spans": 1, "tracing.opentelemetry.flush_interval_ms": 50}}]}
    return config
