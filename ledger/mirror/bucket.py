"""The mirror's copies in a bucket (``ledger mirror serve --publish s3://BUCKET/PREFIX``, or a
directory): each mirrored log as a complete tlog-tiles log under ``PREFIX/<origin hash>/``.

The layout is the mirror's own monitoring URLs, so a bucket prefix stands in for the mirror:
``PREFIX/<origin hash>/checkpoint`` is the mirror checkpoint as the mirror serves it (the log's
signature lines it verified and the mirror's cosignatures), ``PREFIX/<origin hash>/tile/…`` the
log's tiles and entry bundles byte for byte. Objects are written by the publisher's sinks
(:mod:`ledger.jobs.sinks`) and :func:`~ledger.jobs.publish.write_tree`: tiles and bundles once,
with a conditional create; an object already there with other bytes is an alarm, never
overwritten.

The rule that keeps a cosignature meaningful: the mirror cosigns a size only once the bucket
holds every tile and bundle of it (:meth:`MirrorBucket.store_tiles`, before the mirror
checkpoint moves), and hands the cosignature out only once the bucket's checkpoint is that
mirror checkpoint (:meth:`MirrorBucket.store_checkpoint`). A bucket that fails makes the mirror
answer ``add-entries`` with a 503, which a log retries; nothing is queued and nothing cosigned
meanwhile. The caller holds :meth:`MirrorBucket.lock` around both steps and the commit between
them, so the bucket's checkpoint of a log only moves forward.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import structlog

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.errors import LedgerError
from ledger.core.note import NoteError, NoteVerifier, open_note
from ledger.core.publish_target import BucketTarget
from ledger.core.tiles import Tile
from ledger.cosigner.cosigner import origin_hash
from ledger.jobs.export import ExportError
from ledger.jobs.publish import PARTIAL_GRACE, write_tree
from ledger.jobs.sinks import DirectorySink, ObjectConflict, S3Sink, Sink
from ledger.mirror.copy import LogCopy

__all__ = ["BucketStopped", "BucketUnavailable", "MirrorBucket"]

_log = structlog.get_logger("ledger.mirror")

_Step = Callable[[Sink], Awaitable[None]]

#: Entries written to the bucket per step of a catch-up (a level-2 tile's worth: each step
#: writes 256 bundles and 257 hash tiles; the step's partial level-2 tile is one small object).
_STEP = 256 * 256


class BucketUnavailable(LedgerError):
    """The bucket did not store what the mirror would cosign; the log should retry."""


class BucketStopped(BucketUnavailable):
    """The bucket holds other bytes where a tile of this log goes (or another log's
    checkpoint): never overwritten, nothing more cosigned for that log; an operator must look."""


class MirrorBucket:
    """One sink per mirrored log, and what each holds: the size its tiles reach and the size
    of its checkpoint (read from the bucket the first time, kept in memory after)."""

    def __init__(self, sinks: Mapping[str, Sink], logs: Mapping[str, Sequence[NoteVerifier]]
                 ) -> None:
        self.sinks = dict(sinks)
        self.logs = {origin: list(keys) for origin, keys in logs.items()}
        self._tiles: dict[str, int] = {}  # origin -> size the stored tiles reach
        self._checkpoint: dict[str, int] = {}  # origin -> size of the bucket's checkpoint
        self._written: dict[str, list[Tile]] = {}  # origin -> tiles not yet pruned after
        self._locks = {origin: asyncio.Lock() for origin in self.sinks}
        self.stopped: dict[str, str] = {}  # origin -> why (an alarm)
        self.failing: dict[str, str] = {}  # origin -> the current failure (retried)

    @classmethod
    def at(cls, target: BucketTarget | Path, logs: Mapping[str, Sequence[NoteVerifier]]
           ) -> MirrorBucket:
        """Each log of ``logs`` under ``target/<origin hash>/`` (a bucket prefix or a
        directory)."""
        sinks: dict[str, Sink] = {}
        for origin in logs:
            sub = origin_hash(origin)
            sinks[origin] = (DirectorySink(target / sub) if isinstance(target, Path)
                             else S3Sink(target.under(sub)))
        return cls(sinks, logs)

    def lock(self, origin: str) -> asyncio.Lock:
        return self._locks[origin]

    def problem(self) -> str | None:
        """What ``/healthz`` says: an alarm, or a bucket failing now; None when all is well."""
        if self.stopped:
            return "the bucket holds other bytes where the mirror's copy goes (never " \
                   "overwritten; nothing more is cosigned for that log): an operator must look"
        if self.failing:
            return "the bucket is failing; add-entries is refused (503) until it stores again"
        return None

    async def store_tiles(self, origin: str, copy: LogCopy, size: int) -> None:
        """Make the bucket hold every tile and bundle of the copy's first ``size`` entries,
        durably; raise :class:`BucketUnavailable` (or :class:`BucketStopped`) if it does not."""
        async def store(sink: Sink) -> None:
            done = await self._tiles_size(origin, sink)
            while done < size:  # in steps, so that a long catch-up cut short keeps its progress
                step = min(size, (done // _STEP + 1) * _STEP)
                written = await write_tree(sink, copy.store, copy.reader, done, step)
                self._tiles[origin] = done = step
                self._written.setdefault(origin, []).extend(written)

        await self._guarded(origin, store)

    async def store_checkpoint(self, origin: str, size: int, note: bytes) -> None:
        """Make ``note`` (the mirror checkpoint at ``size``, whose tiles :meth:`store_tiles`
        stored) the bucket's checkpoint, unless the bucket's is already that size or larger."""
        async def store(sink: Sink) -> None:
            if size > await self._checkpoint_size(origin, sink):
                await sink.write_checkpoint(note)
                self._checkpoint[origin] = size
                # A directory drops the partial tiles this made redundant (a bucket keeps them)
                await sink.prune(self._written.pop(origin, []), PARTIAL_GRACE)

        await self._guarded(origin, store)

    async def _guarded(self, origin: str, step: _Step) -> None:
        """Run ``step`` on the log's sink; a failure is logged once when it starts (and the
        recovery once), a conflict is an alarm that stops the bucket for that log."""
        if origin in self.stopped:
            raise BucketStopped(self.stopped[origin])
        sink = self.sinks[origin]
        try:
            await sink.start()
            await step(sink)
        except ExportError as e:
            self.stopped[origin] = str(e)
            self.failing.pop(origin, None)
            _log.error("mirror_publish_stopped", origin=origin, to=sink.where, error=str(e),
                       conflict=isinstance(e, ObjectConflict),
                       note="never overwritten; nothing more is cosigned for this log")
            raise BucketStopped(str(e)) from None
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the bucket away, refused, full: the log retries
            problem = f"{type(e).__name__}: {e}"
            if origin not in self.failing:
                _log.warning("mirror_publish_failing", origin=origin, to=sink.where,
                             error=problem, note="add-entries is refused (503) meanwhile")
            self.failing[origin] = problem
            raise BucketUnavailable(problem) from None
        if self.failing.pop(origin, None) is not None:
            _log.info("mirror_publish_recovered", origin=origin, to=sink.where)

    async def _checkpoint_size(self, origin: str, sink: Sink) -> int:
        if origin not in self._checkpoint:
            note = await sink.read("checkpoint")
            size = 0
            if note is not None:
                try:
                    opened, _ = open_note(note, self.logs[origin])
                    cp = parse_checkpoint_text(opened.text)
                    if cp.origin != origin:
                        raise NoteError(f"its origin is {cp.origin[:100]!r}")
                    size = cp.size
                except NoteError as e:
                    raise ExportError(f"{sink.where}checkpoint is not a checkpoint of "
                                      f"{origin} ({e})") from None
            self._checkpoint[origin] = size
        return self._checkpoint[origin]

    async def _tiles_size(self, origin: str, sink: Sink) -> int:
        # Tiles beyond the bucket's checkpoint (a round that ended before its checkpoint) are
        # written again: the same bytes are fine, which the conditional create checks.
        if origin not in self._tiles:
            self._tiles[origin] = await self._checkpoint_size(origin, sink)
        return self._tiles[origin]

    async def close(self) -> None:
        for sink in self.sinks.values():
            await sink.close()
