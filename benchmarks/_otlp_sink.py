"""An OTLP/HTTP endpoint that takes every export and keeps only counts, for measuring what
tracing costs the notary (``http_notarize --tracing-compare``) without a collector: the
exporter's work is all done, the receiving end costs next to nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Sink(ThreadingHTTPServer):
    exports = 0
    bytes = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Sink

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(size)
        self.server.exports += 1
        self.server.bytes += size
        self.send_response(200)  # an empty ExportTraceServiceResponse is zero bytes
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def otlp_sink() -> Iterator[_Sink]:
    """A sink on 127.0.0.1 (``server_address`` has its port) until the block ends."""
    sink = _Sink(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=sink.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        sink.shutdown()
        sink.server_close()
        thread.join()
