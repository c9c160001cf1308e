"""The background lifecycle of ``notary serve``: period rolls (``--log-period``) and retention
(``--log-retention``), docs/lifecycle.md.

Period rolls run in every process: at each boundary each process tries :func:`roll_due`
once, whose check under the log's write lock lets only the first one roll. So a process that
dies at the boundary leaves the roll to the others, and no lease is needed. At start a process
tries once too: a notary stopped across a boundary rolls then (once, whatever it missed).

Retention runs in one process of the group at a time (the lease of :mod:`ledger.jobs.lease`):
at once when it takes the lease, then every :data:`RETENTION_EVERY` seconds. Pruning is
idempotent (a log pruned whole is not pruned again), so a hand-over repeats nothing.

Both read the time from a clock they are given (``time.time`` in production), so that tests
drive them across boundaries without waiting for one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import structlog

from notary.core.periods import Span, period_start
from notary.serving.lifecycle import LogBook, Rolled, expire, roll_due

__all__ = ["POLL", "RETENTION_EVERY", "Clock", "PeriodRolls", "Retention"]

_log = structlog.get_logger("notary.lifecycle")

Clock = Callable[[], float]
"""Seconds since the epoch, as ``time.time``."""

POLL = 1.0
"""Seconds between looks at the clock: a boundary is acted on within about this."""

RETENTION_EVERY = 3600.0
"""Seconds between two retention passes of the process holding the lease."""


class PeriodRolls:
    """Rolls the notary's active log at the boundaries of ``period`` (see the module)."""

    def __init__(self, book: LogBook, period: Span, *, clock: Clock = time.time,
                 poll: float = POLL, rolled: Callable[[Rolled], Awaitable[None]] | None = None
                 ) -> None:
        self.book = book
        self.period = period
        self.clock = clock
        self.poll = poll
        self.rolled = rolled
        self._done = float("-inf")  # the latest boundary this process has decided on

    async def check(self) -> Rolled | None:
        """Once per boundary (and once at start): roll if nobody has since it."""
        now = self.clock()
        boundary = period_start(self.period, datetime.fromtimestamp(now, UTC)).timestamp()
        if boundary <= self._done:
            return None
        done = await roll_due(self.book.store, self.book.root, self.period, clock=now)
        self._done = boundary
        if done is not None:
            _log.info("log_rolled", reason="scheduled", period=str(self.period),
                      frozen=done.frozen.origin, size=done.frozen.final_size,
                      active=done.active.origin)
            await self.book.refresh(force=True)
            if self.rolled is not None:
                await self.rolled(done)
        return done

    async def run(self) -> None:
        await _every(self.poll, self.check, "log_period_roll_failed")


class Retention:
    """Prunes whole the frozen logs frozen longer than ``age`` ago (see the module)."""

    def __init__(self, book: LogBook, age: Span, *, clock: Clock = time.time,
                 every: float = RETENTION_EVERY) -> None:
        self.book = book
        self.age = age
        self.clock = clock
        self.every = every

    async def check(self) -> int:
        """One pass; how many logs it pruned (each logged once: a log pruned whole is done)."""
        pruned = await expire(self.book.store, self.age, clock=self.clock())
        for r in pruned:
            _log.info("log_pruned", reason="retention", retention=str(self.age), log=r.n,
                      origin=r.origin, min_index=r.min_index)
        if pruned:
            await self.book.refresh(force=True)
        return len(pruned)

    async def run(self) -> None:
        """The lease's job: a pass now, then one every ``every`` seconds."""
        await _every(self.every, self.check, "log_retention_failed")


async def _every(seconds: float, check: Callable[[], Awaitable[object]], failed: str) -> None:
    """``check`` now and every ``seconds`` after; a failure (the store unavailable) is logged as
    ``failed`` and the next look tries again."""
    while True:
        try:
            await check()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            _log.warning(failed, error=type(e).__name__, detail=str(e))
        await asyncio.sleep(seconds)
