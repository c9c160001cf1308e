"""The background scrub: re-verify every stored tile and bundle, slowly, for as long as the
log is served.

The writer checks only the right edge of the tree when it starts (that is all it needs to go
on appending), so a flipped bit in a full interior tile or an old entry bundle would go
unnoticed until a client's inclusion proof failed. The scrub closes that gap: it runs the full
audit of :mod:`ledger.jobs.check` (every bundle re-hashed, every tile recomputed and compared, the
root matched against the signed checkpoint) over and over, at a bounded rate of stored tiles
and bundles read per second, so it costs a serving process little and finishes a pass over a
million entries (about 7,800 tiles and bundles) in under seven minutes at the default rate.

When it finds damage it stops writes (:meth:`ledger.log.sequencer.Sequencer.halt`: every new
checkpoint would commit to a tree whose proofs cannot be served), records the reason in
:attr:`Scrubber.status` and the metrics, and tells ``on_damage``; it does not scrub again, as
the store now needs an operator. Other failures (a locked or busy database) are logged and the
pass is tried again later.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from ledger.jobs.check import AuditError, audit_log
from ledger.log.facade import Log
from ledger.storage.damage import corruption_in

__all__ = ["DEFAULT_RATE", "ScrubStatus", "Scrubber"]

DEFAULT_RATE = 20.0
"""Stored tiles and bundles re-verified per second by default: a few milliseconds of CPU and
well under a megabyte of reads a second."""

_PAUSE = 1.0  # seconds at least between two passes (a small log is not re-read in a loop)
_RETRY = 30.0  # seconds before a pass that failed for another reason is tried again

_log = structlog.get_logger("ledger.jobs.scrub")


@dataclass
class ScrubStatus:
    """Where the scrub is, for ``/healthz``."""

    rate: float
    passes: int = 0  # passes completed without damage
    pass_size: int = 0  # the tree size the current pass checks
    position: int = 0  # entries of it checked so far
    checked: int = 0  # tiles and bundles re-verified in this pass
    last_pass_size: int | None = None
    last_pass_at: float | None = None  # UNIX time the last complete pass ended
    damage: str | None = None  # what the scrub found wrong, once it did

    def to_json(self) -> dict[str, object]:
        return {"rate": self.rate, "passes": self.passes,
                "pass": {"size": self.pass_size, "position": self.position,
                         "checked": self.checked},
                "last_pass": None if self.last_pass_at is None else {
                    "size": self.last_pass_size, "completed": round(self.last_pass_at, 3)},
                "damage": self.damage}


class Scrubber:
    """Scrubs one open, writable :class:`~ledger.log.facade.Log`; ``start`` it, ``close`` it
    first."""

    def __init__(self, log: Log, *, rate: float = DEFAULT_RATE,
                 on_damage: Callable[[str], None] | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        if rate <= 0:
            raise ValueError("the scrub rate must be positive (0 means no scrubber at all)")
        self.log = log
        self.rate = rate
        self.on_damage = on_damage
        self.status = ScrubStatus(rate)
        self._task: asyncio.Task[None] | None = None
        # About two seconds of reads per chunk: bundles and their level-0 tiles.
        self._chunk = max(1, min(64, int(rate)))
        r = registry if registry is not None else CollectorRegistry()
        self.m_passes = Counter("ledger_scrub_passes_total",
                                "Complete scrub passes that found no damage", registry=r)
        self.m_checked = Counter("ledger_scrub_checked_total",
                                 "Stored tiles and bundles re-verified by the scrub", registry=r)
        self.m_position = Gauge("ledger_scrub_position_entries",
                                "Entries checked so far in the current scrub pass",
                                multiprocess_mode="livemax", registry=r)
        self.m_size = Gauge("ledger_scrub_pass_size_entries",
                            "Tree size the current scrub pass checks",
                            multiprocess_mode="livemax", registry=r)
        self.m_last = Gauge("ledger_scrub_last_pass_timestamp_seconds",
                            "UNIX time the last complete scrub pass ended",
                            multiprocess_mode="max", registry=r)
        self.m_damage = Gauge("ledger_scrub_damage",
                              "1 once the scrub found a stored tile or bundle that does not "
                              "match the entries (writes are stopped)",
                              multiprocess_mode="max", registry=r)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="scrub")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while self.status.damage is None:
            try:
                await self.scrub_once()
                wait = _PAUSE
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the scrub must never take the server down
                found = corruption_in(e)
                if found is not None:
                    self._damaged(f"the database is damaged: {found}")
                    return
                _log.warning("scrub_pass_failed", error=type(e).__name__, reason=str(e)[:200])
                wait = _RETRY
            await asyncio.sleep(wait)

    async def scrub_once(self) -> bool:
        """One pass over the current checkpoint's tree; False when it found damage."""
        st = self.status
        st.position = st.checked = 0
        store, verifier = self.log.store, self.log.verifier
        on = getattr(store, "log_number", 0)  # which log of a sequence of logs (docs/lifecycle.md)
        head = await store.latest()
        if head is not None and not head.note.startswith(verifier.name.encode() + b"\n"):
            return True  # the store moved to the next log; the writer follows, then the scrub
        st.pass_size = head.size if head is not None else 0
        self.m_size.set(st.pass_size)
        self.m_position.set(0)
        try:
            report = await audit_log(store, verifier,
                                     progress=self._progress, pace=self._pace,
                                     chunk_bundles=self._chunk)
        except AuditError as e:
            if getattr(store, "log_number", 0) != on:
                return True  # a roll was followed mid-pass: it read two logs, found nothing
            self._damaged(str(e))
            return False
        st.passes += 1
        st.last_pass_size, st.last_pass_at = report.size, time.time()
        self.m_passes.inc()
        self.m_last.set(st.last_pass_at)
        return True

    def _progress(self, done: int, total: int) -> None:
        self.status.position, self.status.pass_size = done, total
        self.m_position.set(done)
        self.m_size.set(total)

    async def _pace(self, read: int) -> None:
        self.status.checked += read
        self.m_checked.inc(read)
        await asyncio.sleep(read / self.rate)

    def _damaged(self, reason: str) -> None:
        self.status.damage = reason
        self.m_damage.set(1)
        _log.error("scrub_found_damage", reason=reason)
        if self.log.sequencer is not None:
            self.log.sequencer.halt(reason)
        if self.on_damage is not None:
            self.on_damage(reason)
