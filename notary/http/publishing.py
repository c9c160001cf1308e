"""``--publish DIR`` or ``--publish s3://BUCKET/PREFIX``: the notary's logs as static tlog-tiles
trees, for a web server, the bucket itself or a CDN to serve (docs/object-storage.md).

Each log of the lifecycle (docs/lifecycle.md) has a prefix of its own: log 0 at the target's
root (where ``--publish`` has always written it), log n ≥ 1 under ``logs/<n>/``. Not the active
log at the root, as ``/checkpoint`` serves it: a tile path of the next log holds other bytes
than the same path of the last one, and a tile is immutable. The active log is published every
round (:class:`~ledger.jobs.publish.Publisher`); a frozen log once, up to its final checkpoint,
after which its prefix is a complete static log that needs no notary at all.

One process at a time publishes (the lease): for a directory a lock file in it, for a bucket
the database's lease when it has one (PostgreSQL frontends on several machines), else a lock
file in the data directory (``--workers``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from ledger.core.publish_target import BucketTarget, parse_publish_target
from ledger.http.routes import LOG, published_note
from ledger.jobs.export import ExportError
from ledger.jobs.lease import FileLease, JobRunner, Lease
from ledger.jobs.publish import (
    LOCK_FILE,
    MAX_DELAY,
    Publisher,
    PublishMetrics,
    PublishStatus,
    public_problem,
)
from ledger.jobs.sinks import DirectorySink, ObjectConflict, S3Sink, Sink, s3_client_missing
from ledger.storage.base import LogRecord
from notary.http.appkeys import METRICS, NOTARY, SETTINGS
from notary.serving.config import ConfigError
from notary.serving.service import Notary

__all__ = ["PUBLISHING", "LogsPublisher", "log_prefix", "publish_context"]

_log = structlog.get_logger("notary.publish")


def log_prefix(n: int) -> str:
    """Where log ``n``'s tree goes below the ``--publish`` target ("" for log 0)."""
    return "" if n == 0 else f"logs/{n}/"


def _sink_factory(target: BucketTarget | str) -> Callable[[int], Sink]:
    if isinstance(target, str):
        out = Path(target)
        return lambda n: DirectorySink(out / log_prefix(n) if n else out)
    return lambda n: S3Sink(target.under(log_prefix(n)) if n else target)


class LogsPublisher:
    """Publishes the active log every round and each frozen log once (module doc)."""

    def __init__(self, app: web.Application, sink: Callable[[int], Sink]) -> None:
        self.notary: Notary = app[NOTARY]
        self.sink = sink
        self.metrics = PublishMetrics(app[METRICS].registry)
        self._choose = lambda head: published_note(app, head)[0]
        self.active = self._active_publisher()
        self.frozen_done: set[int] = set()
        self.frozen_status = PublishStatus()  # a frozen log's failure, else ok
        self._frozen_failures = 0  # in a row: the frozen logs back off as the active one does
        self._frozen_retry_at = 0.0

    def _active_publisher(self) -> Publisher:
        n = self.notary.sequencer.log_number
        return Publisher(self.notary.log, self.sink(n), choose=self._choose,
                         metrics=self.metrics)

    @property
    def running(self) -> bool:
        return self.active.running

    @property
    def status(self) -> PublishStatus:
        """The active log's status, unless a frozen log's publishing is worse off."""
        rank = {"ok": 0, "lagging": 1, "stopped": 2}
        worse = rank[self.frozen_status.state] > rank[self.active.status.state]
        return self.frozen_status if worse else self.active.status

    async def check(self) -> None:
        await self.active.check()

    async def run(self, interval: float = 1.0) -> None:
        """Until cancelled: the active log's publisher as a task (a new one after a roll),
        and each frozen log not yet complete in its prefix."""
        task = asyncio.create_task(self.active.run(), name="publish active log")
        number = self.notary.sequencer.log_number
        try:
            while True:
                if self.notary.sequencer.log_number != number:  # rolled
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                    await self.active.close()
                    self.active = self._active_publisher()
                    number = self.notary.sequencer.log_number
                    task = asyncio.create_task(self.active.run(), name="publish active log")
                await self._frozen_round(number)
                await asyncio.sleep(interval)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if self.notary.sequencer.log_number == number:
                await self.active.publish_final()

    async def _frozen_round(self, active: int) -> None:
        if time.monotonic() < self._frozen_retry_at:
            return
        try:
            records = await self.notary.logs.refresh()
        except Exception:  # the store away: the active log's publisher says so
            return
        todo = [r for r in records if r.state == "frozen" and r.n != active
                and r.n not in self.frozen_done]
        for record in todo:
            try:
                if await self._publish_frozen(record):
                    self.frozen_done.add(record.n)
                    _log.info("published_frozen_log", n=record.n, size=record.final_size)
                if self.frozen_status.state == "lagging":
                    self.frozen_status = PublishStatus()
                    self._frozen_failures = 0
            except ExportError as e:  # an alarm: that log's prefix waits for an operator
                self.frozen_done.add(record.n)
                self.metrics.failures.inc()
                if isinstance(e, ObjectConflict):
                    self.metrics.conflicts.inc()
                self.frozen_status = PublishStatus("stopped", problem=public_problem(e))
                _log.error("publish_stopped", log=record.n, error=str(e))
            except Exception as e:  # retried next round; said once
                self.metrics.failures.inc()
                if self.frozen_status.state != "lagging":
                    _log.warning("publish_failing", log=record.n,
                                 error=f"{type(e).__name__}: {e}")
                self.frozen_status = PublishStatus("lagging", problem=public_problem(e))
                self._frozen_failures += 1
                self._frozen_retry_at = time.monotonic() + min(
                    2.0 ** self._frozen_failures, MAX_DELAY)
                return

    async def _publish_frozen(self, record: LogRecord) -> bool:
        """True once the frozen log's prefix holds its final checkpoint's whole tree."""
        log = await self.notary.logs.frozen(record.origin)
        if log is None:
            return False
        note = self.notary.frozen_note
        frozen_metrics = PublishMetrics(CollectorRegistry())  # its own size and lag
        frozen_metrics.requests = self.metrics.requests
        publisher = Publisher(log, self.sink(record.n), metrics=frozen_metrics,
                              choose=(lambda head: note(log, head)) if note is not None
                              else None)
        try:
            await publisher.check()
            head = await log.head()
            if head is None:
                return False
            if publisher.size != head.size:
                await publisher.publish()
            return publisher.size == head.size
        finally:
            await publisher.close()

    async def close(self) -> None:
        await self.active.close()


PUBLISHING = web.AppKey("notary.publishing", LogsPublisher)  # absent without --publish


def _lease(app: web.Application, target: BucketTarget | str) -> Lease:
    if isinstance(target, str):
        return FileLease(Path(target) / LOCK_FILE)
    make = getattr(app[LOG].store, "lease", None)
    if make is not None:
        lease: Lease = make(f"publish {target.url()}")
        return lease
    return FileLease(app[SETTINGS].data / "publish-bucket.lock")


async def publish_context(app: web.Application) -> AsyncIterator[None]:
    """The cleanup context of ``--publish`` (after the log is open, and witnessing: it
    publishes what ``/checkpoint`` serves)."""
    target = parse_publish_target(app[SETTINGS].publish)  # checked with the settings
    if not isinstance(target, str):
        missing = s3_client_missing()
        if missing is not None:
            raise ConfigError(f"--publish: {missing}")
    publishing = LogsPublisher(app, _sink_factory(target))
    where = publishing.active.sink.where
    try:  # another log's tree there: refuse now (a bucket slower than that: the first round)
        await asyncio.wait_for(publishing.check(), 5.0)
    except ExportError as e:
        raise ConfigError(f"--publish: {e}") from None
    except OSError as e:
        if isinstance(target, str):
            raise ConfigError(f"--publish: {e}") from None
        _log.warning("publish_failing", to=where, error=f"{type(e).__name__}: {e}")
    except Exception as e:  # a bucket away at start: receipts are not held for it
        _log.warning("publish_failing", to=where, error=f"{type(e).__name__}: {e}")
    app[PUBLISHING] = publishing

    async def job() -> None:
        await publishing.run()

    runner = JobRunner("publish", _lease(app, target), job, retry=1.0)
    task = asyncio.create_task(runner.run(), name="publish lease")
    _log.info("publishing", to=where)
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await publishing.close()
