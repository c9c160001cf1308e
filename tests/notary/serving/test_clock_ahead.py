"""A frontend whose clock runs ahead must not pin ``issued_at`` for everyone (docs/design.md,
"Honest times": no receipt carries an ``issued_at`` more than a few seconds ahead of the issuing
process's clock).

``issued_at`` never decreases along the log, so once a frontend with a clock a day ahead has
logged an entry, a correctly-clocked one would take that future time for every later receipt.
It refuses instead (503 ``clock_behind_log``) until its clock reaches the log's time. On
PostgreSQL, whose frontends may run on other machines, a frontend also compares its clock
with the database server's under the log's lock, and one that is ahead refuses (503
``clock_ahead_of_database``) before it logs anything. Two notaries on one SQLite file or one
PostgreSQL database, as two processes would be; the clock is the test hook ``Notary.clock``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from notary.core.ids import parse_issued_at
from notary.serving.clock_guard import MAX_AHEAD, utc_now
from notary.serving.refusals import ClockAheadOfDatabase, ClockBehindLog
from tests.notary_server import digest, headless_notary, issue


async def test_a_clock_ahead_does_not_pin_issued_at_for_other_frontends(tmp_path: Path
                                                                        ) -> None:
    """SQLite: processes on one machine share its clock; one whose clock is wrong anyway (the
    hook) logs a time a day ahead, and the others refuse rather than take it."""
    data = tmp_path / "d"
    async with headless_notary(data, "sqlite") as fast, headless_notary(data, "sqlite") as right:
        fast.clock = lambda: utc_now() + timedelta(days=1)
        ahead, _ = await issue(fast, 1)
        assert parse_issued_at(ahead.issued_at) > utc_now() + timedelta(hours=23)

        with pytest.raises(ClockBehindLog) as refused:
            await issue(right, 2)
        assert refused.value.status == 503
        assert int(refused.value.headers["Retry-After"]) >= 1
        assert right.clock_problem() is not None
        # Nothing changed: no entry, no receipt, no usage.
        assert right.log is not None
        head = await right.log.head(0)
        assert head is not None and head.size == 1
        assert await right.store.receipt_by_digest(digest(2)) is None
        assert await right.store.usage("alice", ahead.issued_at[:7]) == 1

        # A few seconds ahead is still taken (clocks differ a little, commits wait a little).
        right.clock = lambda: parse_issued_at(ahead.issued_at) - MAX_AHEAD + timedelta(
            milliseconds=1)
        late, _ = await issue(right, 3)
        assert late.issued_at == ahead.issued_at
        assert right.clock_problem() is None


async def test_a_frontend_ahead_of_the_database_refuses_before_logging(
        tmp_path: Path, pg_url: str) -> None:
    data = tmp_path / "d"
    async with headless_notary(data, pg_url) as fast, headless_notary(data, pg_url) as right:
        fast.clock = lambda: utc_now() + timedelta(days=1)
        with pytest.raises(ClockAheadOfDatabase) as refused:
            await issue(fast, 1)
        assert (refused.value.status, refused.value.code) == (503, "clock_ahead_of_database")
        assert "database" in (fast.clock_problem() or "")
        counted: list[int] = []
        fast.on_clock_refusal = lambda: counted.append(1)
        with pytest.raises(ClockAheadOfDatabase):
            await issue(fast, 4)
        assert counted == [1]  # once per refused request
        assert fast.log is not None
        head = await fast.log.head(0)
        assert head is None or head.size == 0  # nothing logged
        # The correctly-clocked frontend is not pinned: it issues at its own time.
        before = utc_now()
        mine, created = await issue(right, 2)
        assert created and parse_issued_at(mine.issued_at) <= before + timedelta(seconds=1)
        # Once its clock is right, the other frontend issues again.
        fast.clock = utc_now
        assert (await issue(fast, 3))[1]
        assert fast.clock_problem() is None


async def test_refusing_ends_once_the_clock_catches_up(tmp_path: Path, shared: str) -> None:
    data = tmp_path / "d"
    async with headless_notary(data, shared) as first, headless_notary(data, shared) as late:
        logged, _ = await issue(first, 1)
        late.clock = lambda: utc_now() - timedelta(minutes=10)  # behind the log (and database)
        with pytest.raises(ClockBehindLog):
            await issue(late, 2)
        assert late.clock_problem() is not None
        caught_up = parse_issued_at(logged.issued_at) + timedelta(seconds=1)
        late.clock = lambda: caught_up
        assert late.clock_problem() is None  # /healthz clears without waiting for a write
        receipt, created = await issue(late, 2)
        assert created and parse_issued_at(receipt.issued_at) <= caught_up
