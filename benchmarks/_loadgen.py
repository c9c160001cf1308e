"""Closed-loop HTTP load generator, run in its own process by the HTTP benchmarks.

``python -m benchmarks._loadgen URL [URL …] --seconds S --concurrency C [--key K] [--warmup W]``
POSTs ``{server, tool, call_sha256}`` bodies with distinct digests on C keep-alive connections
(one request in flight on each) and prints one JSON line: requests/s over the measured window,
latency percentiles (ms), errors (non-2xx or failures) and its own CPU per request. With several
URLs (frontends of one log), the connections are spread over them evenly. ``--windows MS``
adds the 2xx answers completed in each MS-millisecond window of the measured time
(``window_counts``) and when that time began (``measure_start_unix``), for a rate over time.

It is written to cost the server's machine as little as possible, because it shares the cores
with the server it measures: raw asyncio protocols, requests spliced from pre-built bytes, and a
response parser that reads only the status line and ``Content-Length``. The first version (the
aiohttp client) spent about as much CPU per request as the bare aiohttp server it was driving,
so on two cores it, not the server, set the "ceiling". ``benchmarks.http_notarize`` prefers
``wrk`` when it is installed and falls back to this.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from urllib.parse import urlsplit

_HEADER_END = b"\r\n\r\n"
_LENGTH = b"\r\ncontent-length:"


class _Request:
    """Bytes of one POST with a fresh digest: a nonce of this run and a counter, so digests are
    distinct across connections, runs and processes without a random call per request."""

    def __init__(self, url: str, key: str | None) -> None:
        parts = urlsplit(url)
        body_head = b'{"server":"bench","tool":"t","call_sha256":"'
        body_tail = b'"}'
        length = len(body_head) + 64 + len(body_tail)
        head = (f"POST {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {length}\r\n")
        if key:
            head += f"Authorization: Bearer {key}\r\n"
        self.prefix = head.encode() + b"\r\n" + body_head
        self.suffix = body_tail
        self.nonce = os.urandom(24).hex().encode()
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80

    def make(self, counter: int) -> bytes:
        return b"%s%s%016x%s" % (self.prefix, self.nonce, counter, self.suffix)


class _Run:
    """Shared counters of one run; each connection appends its samples here."""

    def __init__(self, measure_from: float, stop_at: float, window: float | None = None
                 ) -> None:
        self.measure_from = measure_from
        self.stop_at = stop_at
        self.window = window
        self.window_counts: list[int] = []
        self.latencies: list[float] = []
        self.errors = 0  # in the measured window
        self.failures = 0  # anywhere (connection lost, unparseable answer)
        self.completed = 0  # every answered request, warm-up included
        self.counter = 0


class _Connection(asyncio.Protocol):
    """One keep-alive connection: send, wait for the whole answer, record it, send the next."""

    def __init__(self, run: _Run, request: _Request, done: asyncio.Future[None]) -> None:
        self.run = run
        self.request = request
        self.done = done
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.sent_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._send()

    def _send(self) -> None:
        assert self.transport is not None
        now = time.perf_counter()
        if now >= self.run.stop_at:
            self.transport.close()
            return
        self.run.counter += 1
        self.sent_at = now
        self.transport.write(self.request.make(self.run.counter))

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        end = buf.find(_HEADER_END)
        if end < 0:
            return
        head = bytes(buf[:end]).lower()
        at = head.find(_LENGTH)
        if at < 0 or not head.startswith(b"http/1.1 "):
            self._fail()  # chunked or not HTTP/1.1: not what the servers measured here send
            return
        line_end = head.find(b"\r\n", at + 2)
        length = int(head[at + len(_LENGTH): line_end if line_end > 0 else None])
        total = end + len(_HEADER_END) + length
        if len(buf) < total:
            return
        status = int(head[9:12])
        del buf[:total]
        now = time.perf_counter()
        run = self.run
        run.completed += 1
        if self.sent_at >= run.measure_from and now <= run.stop_at:
            run.latencies.append(now - self.sent_at)
            if not 200 <= status < 300:
                run.errors += 1
            elif run.window is not None:
                at = int((now - run.measure_from) / run.window)
                counts = run.window_counts
                counts.extend([0] * (at + 1 - len(counts)))
                counts[at] += 1
        self._send()

    def _fail(self) -> None:
        self.run.failures += 1
        if self.sent_at >= self.run.measure_from:
            self.run.errors += 1
        assert self.transport is not None
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def run(urls: list[str], key: str | None, seconds: float, warmup: float,
              concurrency: int, window_ms: float | None = None
              ) -> dict[str, float | int | list[int]]:
    loop = asyncio.get_running_loop()
    requests = [_Request(url, key) for url in urls]
    cpu0 = time.process_time()
    start = time.perf_counter()
    start_unix = time.time()
    state = _Run(start + warmup, start + warmup + seconds,
                 None if window_ms is None else window_ms / 1000)
    waits = []
    for i in range(concurrency):
        req = requests[i % len(requests)]
        done: asyncio.Future[None] = loop.create_future()
        await loop.create_connection(lambda r=req, d=done: _Connection(state, r, d),  # type: ignore[misc]
                                     req.host, req.port)
        waits.append(done)
    await asyncio.gather(*waits)
    cpu = time.process_time() - cpu0
    lat = sorted(state.latencies)

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q / 100 * len(lat)))] * 1000 if lat else float("nan")

    windows: dict[str, float | list[int]] = {} if window_ms is None else {
        "window_ms": window_ms, "window_counts": state.window_counts,
        "measure_start_unix": start_unix + warmup}
    return {**windows, "requests_per_s": len(lat) / seconds, "requests": len(lat),
            "errors": state.errors, "failures": state.failures, "p50_ms": pct(50),
            "p90_ms": pct(90), "p99_ms": pct(99),
            "max_ms": lat[-1] * 1000 if lat else float("nan"), "concurrency": concurrency,
            "completed": state.completed,
            "client_cpu_us_per_request": cpu / max(state.completed, 1) * 1e6}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("url", nargs="+")
    p.add_argument("--key")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=2)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--windows", type=float, metavar="MS", help="count answers per window")
    a = p.parse_args()
    print(json.dumps(asyncio.run(run(a.url, a.key, a.seconds, a.warmup, a.concurrency,
                                     a.windows))))


if __name__ == "__main__":
    main()
