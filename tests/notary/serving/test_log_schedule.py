"""Period rolls and retention (issue 33: ``--log-period``, ``--log-retention``), driven by a
fake clock: one roll per boundary however many processes cross it, one roll at start after a
stop across several boundaries, and retention pruning each old frozen log once, through the
same ``prune`` as ``notary log prune``."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

from structlog.testing import capture_logs

from notary.core.periods import Span, next_boundary
from notary.core.successor import decode_successor
from notary.serving.lifecycle import all_logs
from notary.serving.log_schedule import PeriodRolls, Retention
from tests.notary_server import headless_notary, issue

HOUR = Span(1, "h")


class FakeClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def to_next_boundary(self, period: Span, plus: float = 1.0) -> None:
        self.now = next_boundary(period, datetime.fromtimestamp(self.now, UTC)).timestamp() + plus


async def test_two_processes_crossing_a_boundary_roll_once(shared: str, tmp_path: Path) -> None:
    clock = FakeClock()
    async with headless_notary(tmp_path, shared) as a, headless_notary(tmp_path, shared) as b:
        await issue(a, 1)
        rolls = [PeriodRolls(n.logs, HOUR, clock=clock) for n in (a, b)]
        # At start, within the period log 0 started in: nothing to do.
        assert await asyncio.gather(*(r.check() for r in rolls)) == [None, None]
        clock.to_next_boundary(HOUR)
        done = [r for r in await asyncio.gather(*(r.check() for r in rolls)) if r is not None]
        assert len(done) == 1, done
        rolled = done[0]
        assert (rolled.frozen.reason, rolled.frozen.final_size) == ("scheduled", 2)
        assert rolled.active.started == clock.now
        records = await a.store.logs()
        assert [r.state for r in records] == ["frozen", "active"]
        # Later in the same period: nothing more, from either process.
        clock.now += 1800
        assert await asyncio.gather(*(r.check() for r in rolls)) == [None, None]
        # Both writers follow: a receipt from either lands in the new log.
        for n, k in ((a, 2), (b, 3)):
            receipt, _ = await issue(n, k)
            assert receipt.origin == rolled.active.origin


async def test_a_notary_stopped_across_boundaries_rolls_once_at_start(backend: str,
                                                                      tmp_path: Path) -> None:
    clock = FakeClock()
    async with headless_notary(tmp_path, backend) as notary:
        await issue(notary, 1)
        clock.now += 5 * 3600 + 1  # five boundaries missed while stopped
        started = PeriodRolls(notary.logs, HOUR, clock=clock)  # a process starting now
        rolled = await started.check()
        assert rolled is not None and rolled.frozen.reason == "scheduled"
        assert await started.check() is None
        assert await PeriodRolls(notary.logs, HOUR, clock=clock).check() is None
        logs = all_logs(notary.logs.root, await notary.store.logs())
        assert [g.state for g in logs] == ["frozen", "active"]
        # The frozen log's last entry says why.
        frozen = await notary.logs.frozen(rolled.frozen.origin)
        assert frozen is not None
        (last,) = await frozen.reader.entries(1, 2)
        assert decode_successor(last).reason == "scheduled"


async def test_retention_prunes_each_old_frozen_log_once(backend: str, tmp_path: Path) -> None:
    clock = FakeClock()
    async with headless_notary(tmp_path, backend) as notary:
        for i in range(3):
            await issue(notary, i)
        rolls = PeriodRolls(notary.logs, HOUR, clock=clock)
        clock.to_next_boundary(HOUR)
        first = await rolls.check()
        assert first is not None
        await issue(notary, 10)
        clock.to_next_boundary(HOUR)
        second = await rolls.check()
        assert second is not None
        retention = Retention(notary.logs, Span(1, "d"), clock=clock)
        assert await retention.check() == 0  # frozen an hour ago, and a minute
        clock.now = first.frozen.frozen_at + 86400 + 1  # type: ignore[operator]
        with capture_logs() as logs:
            assert await retention.check() == 1  # log 0 only: log 1 was frozen an hour later
            assert await retention.check() == 0  # done: not pruned (nor logged) again
        assert [(e["event"], e["log"]) for e in logs] == [("log_pruned", 0)]
        records = await notary.store.logs()
        assert [(r.min_index, r.final_size) for r in records[:2]] == [(4, 4), (0, 2)]
        clock.now += 3600
        assert await retention.check() == 1
        records = await notary.store.logs()
        assert records[1].min_index == records[1].final_size == 2
        # The active log is never pruned, however old.
        clock.now += 10 * 86400
        assert await retention.check() == 0
        assert records[2].state == "active" and records[2].min_index == 0
