"""Prometheus metrics, one registry per application (so tests can run several apps at once).

Under ``notary serve --workers N`` every scrape must describe the whole service, whichever
worker answers it: the workers run in prometheus-client's multiprocess mode (the parent gives
them a private directory in ``PROMETHEUS_MULTIPROC_DIR``, :mod:`notary.serving.workers`), each
value is kept in a memory-mapped file there, and ``/metrics`` merges every worker's files.
Counters and histograms add up, a dead worker's counts included (so they never go back when a
worker is replaced); each gauge says how its workers' values combine (``multiprocess_mode``,
ignored by a single process).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from structlog.typing import FilteringBoundLogger

from ledger.log.sequencer import WriterState

_access = structlog.get_logger("notary.access")

_MAX_SERIES = 4096  # (route, method, status) children kept resolved

REFRESH_SECONDS = 1.0
"""How often a worker re-reads the gauges sampled from its state (another worker may answer
the scrape)."""

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class Metrics:
    """The notary's metrics; ``shared``: the workers' directory (multiprocess mode)."""

    def __init__(self, shared: Path | None = None) -> None:
        self.registry = CollectorRegistry()
        self.shared = shared
        r = self.registry
        self.requests = Counter("notary_http_requests_total", "HTTP requests",
                                ["route", "method", "status"], registry=r)
        self.latency = Histogram("notary_http_request_duration_seconds",
                                 "HTTP request latency", ["route", "method"],
                                 buckets=_LATENCY_BUCKETS, registry=r)
        # Set by the process answering the scrape, just before it collects: the newest.
        self.log_size = Gauge("ledger_tree_size", "Entries in the log (latest checkpoint)",
                              multiprocess_mode="livemostrecent", registry=r)
        self.batch_size = Histogram("ledger_batch_size", "Entries per committed batch",
                                    buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000),
                                    registry=r)
        self.commit_seconds = Histogram("ledger_commit_duration_seconds",
                                        "Time to integrate, sign and durably commit a batch",
                                        buckets=_LATENCY_BUCKETS, registry=r)
        self.receipts = Counter("notary_receipts_issued_total", "Receipts issued", registry=r)
        self.refusing = Gauge("ledger_writer_refusing",
                              "1 while this process (with --workers, any worker) refuses to "
                              "sign: the store does not extend the newest checkpoint it saw "
                              "committed (restored or lagging database); writes get 503 until "
                              "it does", multiprocess_mode="livemax", registry=r)
        self.halted = Gauge("ledger_writer_halted",
                            "1 while this process (with --workers, any worker) has stopped "
                            "writes: damage was found in the stored log (by the scrub, a "
                            "request or an earlier run); writes get 503 until an operator "
                            "restores the store and restarts", multiprocess_mode="livemax",
                            registry=r)
        self.checkpoint_time = Gauge(
            "notary_checkpoint_timestamp_seconds",
            "UNIX time the checkpoint /checkpoint serves was last vouched for: when a quorum "
            "of witnesses last cosigned it (with witnesses), else when it was committed; what "
            "/healthz/checkpoint compares with its bound",
            multiprocess_mode="livemostrecent", registry=r)
        self.clock_refusals = Counter(
            "notary_clock_refusals_total",
            "Writes refused rather than signed with a future issued_at: the log's latest "
            "issued_at is ahead of this process's clock, or this clock is ahead of the "
            "database server's, by more than a few seconds (a frontend's clock is wrong)",
            registry=r)
        self.cose_roots_signed = Counter(
            "notary_cose_roots_signed_total",
            "Tree roots signed for RFC 9942 COSE receipts, by algorithm (one signature per "
            "root serves every receipt under it; signed when a receipt first asks, off the "
            "write path)", ["alg"], registry=r)
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._access: FilteringBoundLogger | None = None
        self._sampled: list[tuple[Gauge, Callable[[], float]]] = []
        self._collect = r
        if shared is not None:
            self._collect = CollectorRegistry()
            MultiProcessCollector(self._collect, path=str(shared))  # type: ignore[no-untyped-call]

    def watch_writer(self, state: Callable[[], WriterState]) -> None:
        """Report the writer's ``state()`` as ``ledger_writer_refusing`` and
        ``ledger_writer_halted``, read at each scrape (and, in a worker, every
        :data:`REFRESH_SECONDS`)."""
        self._sampled.append((self.refusing,
                              lambda: 1.0 if state() is WriterState.REFUSING else 0.0))
        self._sampled.append((self.halted, lambda: 1.0 if state() is WriterState.HALTED else 0.0))

    def refresh(self) -> None:
        """Set the gauges sampled from this process's state."""
        for gauge, sample in self._sampled:
            gauge.set(sample())

    def exposition(self) -> bytes:
        """The text a scrape gets: this registry, or every worker's files merged."""
        self.refresh()
        return generate_latest(self._collect)

    async def refreshing(self, app: web.Application) -> AsyncIterator[None]:
        """The aiohttp cleanup_ctx that keeps a worker's sampled gauges current in its files,
        for the scrapes another worker answers (nothing to do in a single process)."""
        if self.shared is None:
            yield
            return

        async def loop() -> None:
            while True:
                self.refresh()
                await asyncio.sleep(REFRESH_SECONDS)

        task = asyncio.create_task(loop(), name="metrics refresh")
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    def observe_batch(self, size: int, seconds: float) -> None:
        self.batch_size.observe(size)
        self.commit_seconds.observe(seconds)

    def _series(self, route: str, method: str, status: int) -> tuple[Counter, Histogram]:
        """The request counter and latency histogram of one (route, method, status).

        ``labels()`` takes a lock and builds the label tuple on every call, about as much as
        the rest of the middleware; the children are looked up once and kept. Methods are
        whatever clients send, so the cache is bounded (past it, lookups are uncached).
        """
        key = (route, method, status)
        series = self._children.get(key)
        if series is None:
            series = (self.requests.labels(route, method, str(status)),
                      self.latency.labels(route, method))
            if len(self._children) < _MAX_SERIES:
                self._children[key] = series
        return series

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count and time one request, and write its access-log line (debug level).

        The log line carries method, route, status and duration only: never bodies, queries or
        headers, which may hold API keys, call records or digests. The access logger is bound
        at the first request (after the process configured logging): calling a bound logger
        whose level is filtered out costs a no-op call, the lazy proxy several µs a request.
        """
        count, latency = self._series(route, method, status)
        count.inc()
        latency.observe(seconds)
        if self._access is None:
            self._access = _access.bind()
        self._access.debug("request", method=method, route=route, status=status,
                           ms=round(seconds * 1000, 2))

    def middleware(self) -> web.middleware:  # type: ignore[valid-type]
        """The aiohttp middleware that observes every request (:meth:`observe_request`)."""
        @web.middleware
        async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            started = time.perf_counter()
            status = 500
            try:
                resp = await handler(request)
                status = resp.status
                return resp
            except web.HTTPException as e:
                status = e.status
                raise
            finally:
                info = request.match_info.route.resource
                route = info.canonical if info is not None else "unmatched"
                self.observe_request(route, request.method, status,
                                     time.perf_counter() - started)

        return metrics_middleware
