"""A real OTLP/HTTP trace receiver on 127.0.0.1 for the tracing tests.

It accepts what the standard OTLP exporters send (``POST /v1/traces``, protobuf, optionally
gzip-compressed, sized or chunked), decodes it with the opentelemetry-proto package's classes
and keeps each span as a :class:`ReceivedSpan`. It runs on a thread of its own, so that it
keeps receiving while a test blocks or waits on its own loop.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["OtlpReceiver", "ReceivedSpan", "otlp_receiver"]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived: ids in lower-case hex (``parent`` empty for a root)."""

    service: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent: str
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...]  # (trace id, span id)


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    return getattr(value, which) if which is not None else None


class OtlpReceiver:
    """The spans received so far (:attr:`spans`) and the endpoint to export to (:attr:`url`)."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self._body()
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or not self.headers.get(
                        "Content-Type", "").startswith("application/x-protobuf"):
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._keep(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def _body(self) -> bytes:
                """The request body, sized or chunked (the JavaScript exporter streams it)."""
                if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
                    return self.rfile.read(int(self.headers.get("Content-Length", "0")))
                parts: list[bytes] = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline().strip():  # trailers, up to the blank line
                    pass
                return b"".join(parts)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        got: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    got.append(ReceivedSpan(
                        service=str(resource.get("service.name", "")), name=span.name,
                        kind=span.kind, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent=span.parent_span_id.hex(),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        links=tuple((link.trace_id.hex(), link.span_id.hex())
                                    for link in span.links)))
        with self._lock:
            self.requests += 1
            self.spans.extend(got)

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def env(self) -> dict[str, str]:
        """The standard variables that send a process's spans here, promptly."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.url, "OTEL_BSP_SCHEDULE_DELAY": "50"}


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A receiver serving on a thread until the block ends."""
    receiver = OtlpReceiver()
    thread = threading.Thread(target=receiver._server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver._server.shutdown()
        receiver._server.server_close()
        thread.join()
