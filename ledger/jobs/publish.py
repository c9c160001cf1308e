"""Keep a static tlog-tiles tree in a directory up to date as the log grows (``--publish DIR``).

Any web server or CDN can then serve the log's reads (checkpoint, tiles, partial tiles, entry
bundles) without touching the database. Each round writes only what the new size adds
(:func:`~ledger.core.tiles.tiles_between`): the full tiles completed since the last round, once
each, and the new partial tiles. Every file goes to a temporary name, is fsynced and renamed into
place, so a reader never sees a torn file; the directories are fsynced before the checkpoint is
replaced last, so even after a power loss the published checkpoint never names a missing tile.

What the directory keeps stays proportional to the log (a few dozen bytes per entry beside the
entries themselves), however small the rounds: once a tile's full tile is published its partial
tiles are deleted (tlog-tiles clients fall back to the full tile), and a partial tile of the
right edge is deleted once a wider one has been published for ``partial_grace`` seconds, time
enough for a client that read the older checkpoint to fetch it. The partial tile of the
published size is always kept. Temporary files a crash left mid-round are removed when a
publisher starts on the directory, before its first round.

The checkpoint published is the one the log serves at ``/checkpoint`` (``choose``: the notary
publishes its witnessed checkpoint there), and the tiles are those of exactly that size.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import NoteError
from ledger.core.tiles import Tile, tiles_between
from ledger.jobs.export import ExportError, check_full_tile, write_tile_once
from ledger.log.facade import Head, Log
from ledger.process.atomic import fsync_dir, write_atomic

__all__ = ["LOCK_FILE", "Publisher"]

LOCK_FILE = ".publish.lock"
"""In the directory: held by the one process that publishes there (see :mod:`ledger.jobs.lease`)."""

_log = structlog.get_logger("ledger.jobs.publish")

Choose = Callable[[Head], bytes]
"""Given the log's head, the checkpoint note to publish (it may be an older, cosigned one)."""

_CHUNK = 256

PARTIAL_GRACE = 600.0
"""Seconds a superseded partial tile of the right edge stays published after the wider one
that replaced it, for clients that read the older checkpoint just before."""

# :func:`ledger.process.atomic.write_atomic`'s temporary files: ``.<name>.*.tmp``
_TMP_SUFFIX = ".tmp"


class Publisher:
    """Publishes ``log`` into ``out``; call :meth:`publish` once, or :meth:`run` as a task."""

    def __init__(self, log: Log, out: Path, *, choose: Choose | None = None,
                 interval: float = 1.0, partial_grace: float = PARTIAL_GRACE,
                 registry: CollectorRegistry | None = None) -> None:
        self.log = log
        self.out = out
        self.choose = choose
        self.interval = interval
        self.partial_grace = partial_grace
        self._swept = False  # temporary files of an earlier (crashed) round removed
        self.size: int | None = None  # of the checkpoint published in ``out``; None: not read
        self.note: bytes | None = None
        r = registry if registry is not None else CollectorRegistry()
        self.m_size = Gauge("ledger_published_size",
                            "Tree size of the checkpoint published in the --publish directory",
                            multiprocess_mode="livemax", registry=r)
        self.m_last = Gauge("ledger_publish_last_success_timestamp_seconds",
                            "UNIX time the last publishing round ended with the directory up "
                            "to date (whether or not it had anything new to write)",
                            multiprocess_mode="max", registry=r)
        self.m_failures = Counter("ledger_publish_failures_total",
                                  "Publishing rounds that failed (retried, slower), and a "
                                  "directory refused (publishing stops)", registry=r)

    def check_directory(self) -> None:
        """Raise :class:`ExportError` if ``out`` holds another log's tree."""
        self._read_published()

    def _read_published(self) -> None:
        """What ``out/checkpoint`` holds: the starting point (and a check it is this log's)."""
        path = self.out / "checkpoint"
        try:
            existing = path.read_bytes()
        except FileNotFoundError:
            self.size, self.note = 0, None
            return
        try:
            cp, _ = open_checkpoint(existing, self.log.verifier)
        except NoteError as e:
            raise ExportError(f"{path} is not a checkpoint of this log ({e})") from None
        self.size, self.note = cp.size, existing

    async def publish(self) -> bool:
        """Bring ``out`` up to the checkpoint the log publishes now; True if anything changed."""
        if not self._swept:
            await asyncio.to_thread(self._sweep_temporary)
            self._swept = True
        if self.size is None:
            await asyncio.to_thread(self._read_published)
        assert self.size is not None
        head = await self.log.head()
        if head is None:
            return False
        note = self.choose(head) if self.choose is not None else head.note
        if note == self.note:
            return False
        cp, _ = open_checkpoint(note, self.log.verifier)
        if cp.size < self.size:
            return False  # a witnessed checkpoint lagging what was published: wait for it
        tiles = tiles_between(self.size, cp.size)
        dirs: set[Path] = set()
        for i in range(0, len(tiles), _CHUNK):
            pairs = await self._tile_bytes(tiles[i : i + _CHUNK], cp.size)
            dirs.update(await asyncio.to_thread(self._write, pairs))
        await asyncio.to_thread(self._finish, dirs, note)
        self.size, self.note = cp.size, note
        await asyncio.to_thread(self._prune, tiles)
        return True

    def _sweep_temporary(self) -> None:
        """Remove the temporary files of a round that did not finish (a crash, a kill): only
        the one publisher holding the directory writes there, and it has not started yet."""
        for root, _dirs, names in os.walk(self.out):
            for name in names:
                if name.startswith(".") and name.endswith(_TMP_SUFFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(root, name))

    def _prune(self, written: list[Tile]) -> None:
        """Delete the partial tiles the tiles just published made redundant (module doc)."""
        cutoff = time.time() - self.partial_grace
        for tile in written:
            partials = self.out / f"{tile.path()}.p" if tile.is_full else \
                (self.out / tile.path()).parent
            if tile.is_full:
                shutil.rmtree(partials, ignore_errors=True)
                continue
            widths: list[tuple[int, Path]] = []
            with contextlib.suppress(FileNotFoundError):
                widths = sorted((int(f.name), f) for f in partials.iterdir() if f.name.isdigit())
            # A width goes once the next wider one has been out for the grace period.
            for (width, path), (_, wider) in itertools.pairwise(widths):
                if width < tile.width:
                    with contextlib.suppress(FileNotFoundError):
                        if wider.stat().st_mtime <= cutoff:
                            path.unlink()

    async def _tile_bytes(self, chunk: list[Tile], size: int) -> list[tuple[Tile, bytes]]:
        full = await self.log.store.read_tiles([(t.level, t.index) for t in chunk if t.is_full])
        out = []
        for t in chunk:
            if t.is_full:
                data = check_full_tile(t, full.get((t.level, t.index)))
            else:
                partial = await self.log.reader.tile(t.level, t.index, t.width)
                if partial is None:
                    raise ExportError(f"{t.path()} (tree size {size}) is missing from the store")
                data = partial
            out.append((t, data))
        return out

    def _write(self, pairs: list[tuple[Tile, bytes]]) -> set[Path]:
        touched = set()
        for tile, data in pairs:
            path = self.out / tile.path()
            write_tile_once(path, data)
            touched.add(path.parent)
        return touched

    def _finish(self, dirs: set[Path], note: bytes) -> None:
        # Tile renames made durable first (parents too: new directories), then the checkpoint.
        more: set[Path] = set()
        for d in dirs:
            more.update(p for p in d.parents if p == self.out or self.out in p.parents)
        for d in sorted(dirs | more, key=lambda p: -len(p.parts)):
            fsync_dir(d)
        write_atomic(self.out / "checkpoint", note, mode=0o644)

    async def run(self) -> None:
        """Publish every ``interval`` seconds until cancelled; errors are logged and retried,
        except a directory that holds another log, which stops publishing."""
        delay = self.interval
        while True:
            try:
                if await self.publish():
                    _log.debug("published", size=self.size)
                assert self.size is not None
                self.m_size.set(self.size)
                self.m_last.set(time.time())
                delay = self.interval
            except ExportError as e:
                self.m_failures.inc()
                _log.error("publish_stopped", dir=str(self.out), error=str(e))
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a store outage, a full disk: try again, slower
                self.m_failures.inc()
                _log.warning("publish_failed", dir=str(self.out), error=f"{type(e).__name__}: {e}")
                delay = min(delay * 2, 30.0)
            await asyncio.sleep(delay)

    async def publish_final(self) -> None:
        """One last round (at shutdown), so the directory ends at the log's last checkpoint;
        a failure is only logged."""
        self.size = None  # re-read: another process may have published since
        try:
            await self.publish()
        except Exception as e:
            _log.warning("publish_failed", dir=str(self.out), error=f"{type(e).__name__}: {e}")

    async def stop_after_final_round(self, task: asyncio.Task[None]) -> None:
        """Cancel ``task`` (running :meth:`run`), then :meth:`publish_final`."""
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await self.publish_final()
