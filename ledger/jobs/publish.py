"""Keep a static tlog-tiles tree up to date as the log grows (``--publish DIR`` or
``--publish s3://BUCKET/PREFIX``).

Any web server, bucket or CDN can then serve the log's reads (checkpoint, tiles, partial tiles,
entry bundles) without touching the database. Each round writes only what the new size adds
(:func:`~ledger.core.tiles.tiles_between`): the full tiles completed since the last round, once
each, and the new partial tiles; then, once the sink says all of it is durable, the checkpoint,
so the published checkpoint never names a missing tile. Where the objects go is a
:class:`~ledger.jobs.sinks.Sink` (a directory, an S3 bucket): one loop, two sinks.

A tile already stored with other bytes is never overwritten: publishing stops with an alarm
(a log line, ``ledger_publish_conflicts_total``, and :attr:`Publisher.status` for ``/healthz``).
Any other failure (a store or bucket away, a full disk, refused credentials) is retried with a
growing delay; the first failure and the recovery are logged once each, and the status and the
``ledger_publish_lag_entries`` gauge say how far behind the published tree is meanwhile. The log
itself never waits for publishing: receipts are issued whatever the bucket does.

What a directory keeps stays proportional to the log: once a tile's full tile is published its
partial tiles are deleted (tlog-tiles clients fall back to the full tile), and a partial tile of
the right edge is deleted once a wider one has been published for ``partial_grace`` seconds.

The checkpoint published is the one the log serves at ``/checkpoint`` (``choose``: the notary
publishes its witnessed checkpoint there), and the tiles are those of exactly that size.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import NoteError
from ledger.core.tiles import Tile, tiles_between
from ledger.jobs.export import ExportError, check_full_tile
from ledger.jobs.sinks import DirectorySink, ObjectConflict, S3Sink, Sink
from ledger.log.facade import Head, Log
from ledger.log.reader import LogReader
from ledger.storage.base import LogStore

__all__ = ["LOCK_FILE", "PublishMetrics", "PublishStatus", "Publisher", "public_problem",
           "write_tree"]

LOCK_FILE = ".publish.lock"
"""In the directory: held by the one process that publishes there (see :mod:`ledger.jobs.lease`)."""

_log = structlog.get_logger("ledger.jobs.publish")

Choose = Callable[[Head], bytes]
"""Given the log's head, the checkpoint note to publish (it may be an older, cosigned one)."""

_CHUNK = 256

PARTIAL_GRACE = 600.0
"""Seconds a superseded partial tile of the right edge stays published after the wider one
that replaced it, for clients that read the older checkpoint just before."""

FINAL_ROUND_TIMEOUT = 10.0
"""Seconds the last round at shutdown may take."""

MAX_DELAY = 30.0
"""The longest wait between two tries while the sink fails."""


async def write_tree(sink: Sink, store: LogStore, reader: LogReader, old: int, new: int
                     ) -> list[Tile]:
    """Write the tiles and bundles a tree of size ``new`` adds to one of size ``old`` (full
    ones once each, the new partial ones), from ``store``; return once the sink says they are
    durable, with the tiles written. The one way a tree reaches a sink: the publisher's rounds
    and the mirror's copies (:mod:`ledger.mirror.bucket`) both use it."""
    tiles = tiles_between(old, new)
    for i in range(0, len(tiles), _CHUNK):
        await sink.write_tiles(await _tile_bytes(store, reader, tiles[i : i + _CHUNK], new))
    await sink.commit()
    return tiles


async def _tile_bytes(store: LogStore, reader: LogReader, chunk: list[Tile], size: int
                      ) -> list[tuple[Tile, bytes]]:
    full = await store.read_tiles([(t.level, t.index) for t in chunk if t.is_full])
    out = []
    for t in chunk:
        if t.is_full:
            data = check_full_tile(t, full.get((t.level, t.index)))
        else:
            partial = await reader.tile(t.level, t.index, t.width)
            if partial is None:
                raise ExportError(f"{t.path()} (tree size {size}) is missing from the store")
            data = partial
        out.append((t, data))
    return out


@dataclass
class PublishStatus:
    """What ``/healthz`` says of publishing: ``ok``, ``lagging`` (rounds fail and are retried)
    or ``stopped`` (an object with other bytes, or another log's tree: an operator must look)."""

    state: str = "ok"
    size: int = 0  # of the checkpoint published
    behind: int = 0  # entries the log has that the published checkpoint does not cover yet
    problem: str | None = None  # in words fit for a public page (no hosts, no keys)
    since: float | None = None  # when the current failure started

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"state": self.state, "size": self.size, "behind": self.behind}
        if self.problem is not None:
            out["problem"] = self.problem
        return out


def public_problem(error: Exception) -> str:
    """What ``/healthz`` may say of a publishing failure: the kind, never the endpoint, the
    bucket or the path (those are in the log line)."""
    if isinstance(error, ObjectConflict):
        return "a tile or bundle is already stored with other bytes (never overwritten)"
    if isinstance(error, ExportError):
        return "the directory or bucket holds another log's tree"
    return f"the directory or bucket failed ({type(error).__name__}); retried with backoff"


class PublishMetrics:
    """The publishing metrics of one process (one registry): a notary publishing several logs
    shares the counters between them; the size and lag are the active log's."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.size = Gauge("ledger_published_size",
                          "Tree size of the checkpoint published by --publish (directory or "
                          "bucket)", multiprocess_mode="livemax", registry=r)
        self.last = Gauge("ledger_publish_last_success_timestamp_seconds",
                          "UNIX time the last publishing round ended with the directory or "
                          "bucket up to date (whether or not it had anything new to write)",
                          multiprocess_mode="max", registry=r)
        self.failures = Counter("ledger_publish_failures_total",
                                "Publishing rounds that failed (retried, slower), and a "
                                "directory or bucket refused (publishing stops)", registry=r)
        self.lag = Gauge("ledger_publish_lag_entries",
                         "Entries of the log the published checkpoint does not cover yet",
                         multiprocess_mode="livemax", registry=r)
        self.conflicts = Counter("ledger_publish_conflicts_total",
                                 "Tiles or bundles found already stored with other bytes "
                                 "(never overwritten; publishing stops: an alarm)", registry=r)
        self.requests = Counter("ledger_publish_requests_total",
                                "Requests made to the --publish bucket, by operation", ["op"],
                                registry=r)
        for op in ("get", "put"):  # each series from 0, before the first request
            self.requests.labels(op)


class Publisher:
    """Publishes ``log`` into ``out`` (a directory or a :class:`Sink`); call :meth:`publish`
    once, or :meth:`run` as a task."""

    def __init__(self, log: Log, out: Path | Sink, *, choose: Choose | None = None,
                 interval: float = 1.0, partial_grace: float = PARTIAL_GRACE,
                 registry: CollectorRegistry | None = None,
                 metrics: PublishMetrics | None = None) -> None:
        self.log = log
        self.origin = log.origin  # a Log that switches to the next one (a roll) is not ours
        self.sink: Sink = DirectorySink(out) if isinstance(out, Path) else out
        self.choose = choose
        self.interval = interval
        self.partial_grace = partial_grace
        self._started = False
        self.size: int | None = None  # of the checkpoint published; None: not read yet
        self.note: bytes | None = None
        self.status = PublishStatus()
        self.running = False  # run() has started in this process (it holds the lease)
        if metrics is None:
            metrics = PublishMetrics(registry if registry is not None else CollectorRegistry())
        self.metrics = m = metrics
        (self.m_size, self.m_last, self.m_failures, self.m_lag, self.m_conflicts,
         self.m_requests) = m.size, m.last, m.failures, m.lag, m.conflicts, m.requests
        if isinstance(self.sink, S3Sink) and self.sink.requests is None:
            self.sink.requests = self.m_requests

    async def check(self) -> None:
        """Raise :class:`ExportError` if the sink holds another log's tree (or cannot be
        read at all: the caller decides whether that stops it)."""
        await self._start()
        await self._read_published()

    async def _start(self) -> None:
        if not self._started:
            await self.sink.start()
            self._started = True

    async def _read_published(self) -> None:
        """What the sink's checkpoint is: the starting point (and a check it is this log's)."""
        existing = await self.sink.read("checkpoint")
        if existing is None:
            self.size, self.note = 0, None
            return
        try:
            cp, _ = open_checkpoint(existing, self.log.verifier)
        except NoteError as e:
            raise ExportError(f"{self.sink.where}checkpoint is not a checkpoint of this log "
                              f"({e})") from None
        self.size, self.note = cp.size, existing

    async def publish(self) -> bool:
        """Bring the sink up to the checkpoint the log publishes now; True if anything changed."""
        head = await self.log.head()
        if head is not None:
            self._behind(head.size)  # first: while the sink fails, the lag still shows
        await self._start()
        if self.size is None:
            await self._read_published()
        assert self.size is not None
        if head is None:
            return False
        self._behind(head.size)
        note = self.choose(head) if self.choose is not None else head.note
        if note == self.note:
            return False
        if note.split(b"\n", 1)[0].decode(errors="replace") != self.origin:
            return False  # the log rolled: its final tree is published as a frozen log's
        cp, _ = open_checkpoint(note, self.log.verifier)
        if cp.size < self.size:
            return False  # a witnessed checkpoint lagging what was published: wait for it
        tiles = await write_tree(self.sink, self.log.store, self.log.reader, self.size, cp.size)
        if await self._overtaken(cp.size):
            return False
        await self.sink.write_checkpoint(note)
        self.size, self.note = cp.size, note
        self._behind(head.size)
        await self.sink.prune(tiles, self.partial_grace)
        return True

    async def _overtaken(self, size: int) -> bool:
        """Whether the sink's checkpoint is already newer than ``size``: another publisher
        (one that took the lease while this one's round was under way) is ahead, and the
        published checkpoint never goes backwards. Then this round ends, and the next starts
        from what the sink holds."""
        current = await self.sink.read("checkpoint")
        if current is None or current == self.note:
            return False
        try:
            now, _ = open_checkpoint(current, self.log.verifier)
        except NoteError as e:
            raise ExportError(f"{self.sink.where}checkpoint is not a checkpoint of this log "
                              f"({e})") from None
        if now.size <= size:
            return False
        self.size = self.note = None
        return True

    def _behind(self, head_size: int) -> None:
        if self.size is not None:
            self.status.size = self.size
        self.status.behind = max(0, head_size - self.status.size)
        self.m_lag.set(self.status.behind)

    async def run(self) -> None:
        """Publish every ``interval`` seconds until cancelled; errors are retried with a
        growing delay, except a conflict or another log's tree, which stops publishing."""
        delay = self.interval
        self.running = True
        while True:
            try:
                if await self.publish():
                    _log.debug("published", size=self.size)
                assert self.size is not None
                self.m_size.set(self.size)
                self.m_last.set(time.time())
                self._recovered()
                delay = self.interval
            except ExportError as e:
                self.m_failures.inc()
                if isinstance(e, ObjectConflict):
                    self.m_conflicts.inc()
                self.status.state, self.status.problem = "stopped", public_problem(e)
                _log.error("publish_stopped", to=self.sink.where, error=str(e),
                           conflict=isinstance(e, ObjectConflict))
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bucket or store away, a full disk: try again, slower
                self.m_failures.inc()
                self._failing(e)
                delay = min(delay * 2, MAX_DELAY)
            await self._wait(delay)

    async def _wait(self, delay: float) -> None:
        """Sleep ``delay`` seconds, keeping the lag current meanwhile (a backoff is long)."""
        end = time.monotonic() + delay
        while (left := end - time.monotonic()) > 0:
            await asyncio.sleep(min(left, self.interval))
            with contextlib.suppress(Exception):  # the store away too: the lag waits
                head = await self.log.head()
                if head is not None:
                    self._behind(head.size)

    def _failing(self, error: Exception) -> None:
        """The first failure of a run of them is logged; the retries only counted."""
        problem = f"{type(error).__name__}: {error}"
        if self.status.state != "lagging":
            self.status.since = time.time()
            _log.warning("publish_failing", to=self.sink.where, error=problem,
                         note="retried with backoff until it succeeds; receipts are not held")
        self.status.state, self.status.problem = "lagging", public_problem(error)

    def _recovered(self) -> None:
        if self.status.state == "lagging":
            since = self.status.since or time.time()
            _log.info("publish_recovered", to=self.sink.where, size=self.size,
                      after_seconds=round(time.time() - since, 1))
        self.status.state, self.status.problem, self.status.since = "ok", None, None

    async def publish_final(self) -> None:
        """One last round (at shutdown), so the sink ends at the log's last checkpoint;
        a failure is only logged. Not after publishing stopped: that waits for an operator."""
        if self.status.state == "stopped":
            return
        self.size = None  # re-read: another process may have published since
        try:  # bounded: a bucket away must not hold a shutdown
            await asyncio.wait_for(self.publish(), FINAL_ROUND_TIMEOUT)
        except Exception as e:
            _log.warning("publish_failed", to=self.sink.where, error=f"{type(e).__name__}: {e}")

    async def close(self) -> None:
        await self.sink.close()

    async def stop_after_final_round(self, task: asyncio.Task[None]) -> None:
        """Cancel ``task`` (running :meth:`run`), then :meth:`publish_final`."""
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await self.publish_final()
