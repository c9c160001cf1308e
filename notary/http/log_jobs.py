"""``--log-period`` and ``--log-retention`` in ``notary serve``: the jobs of
:mod:`notary.serving.log_schedule`, started with the application and stopped with it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from aiohttp import web

from ledger.http.routes import LOG
from ledger.jobs.lease import FileLease, JobRunner, Lease
from notary.core.periods import parse_span
from notary.http.appkeys import NOTARY, SETTINGS
from notary.serving.lifecycle import Rolled
from notary.serving.log_schedule import Clock, PeriodRolls, Retention

__all__ = ["CLOCK", "LOCK_FILE", "log_jobs_context"]

CLOCK: web.AppKey[Clock] = web.AppKey("notary.lifecycle_clock")
"""The clock of both jobs: ``time.time`` unless code (a test) sets another before the
application starts; no setting, flag or variable reaches it."""

LOCK_FILE = "retention.lock"
"""In the data directory: held by the one process that runs retention (SQLite, memory)."""


def _retention_lease(app: web.Application) -> Lease:
    """A database shared by several machines has its own lease (PostgreSQL: an advisory lock);
    otherwise a lock file in the data directory, which every worker of ``--workers`` shares."""
    make = getattr(app[LOG].store, "lease", None)
    if make is not None:
        lease: Lease = make("retention")
        return lease
    return FileLease(app[SETTINGS].data / LOCK_FILE)


async def log_jobs_context(app: web.Application) -> AsyncIterator[None]:
    """The aiohttp cleanup_ctx (after the notary's own, which opens the log)."""
    settings = app[SETTINGS]
    period, age = parse_span(settings.log_period), parse_span(settings.log_retention)
    clock = app.get(CLOCK, time.time)
    notary = app[NOTARY]
    tasks: list[asyncio.Task[None]] = []
    if period is not None:
        async def rolled(_: Rolled) -> None:
            await notary.sequencer.follow()  # the writer moves now, not at its next poll

        rolls = PeriodRolls(notary.logs, period, clock=clock, rolled=rolled)
        tasks.append(asyncio.create_task(rolls.run(), name="log period"))
    if age is not None:
        retention = Retention(notary.logs, age, clock=clock)
        runner = JobRunner("retention", _retention_lease(app), retention.run)
        tasks.append(asyncio.create_task(runner.run(), name="retention lease"))
    yield
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
