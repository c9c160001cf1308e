"""A frontend whose clock runs ahead must not pin ``issued_at`` for everyone (DESIGN.md,
Receipts: no receipt carries an ``issued_at`` more than a few seconds ahead of the issuing
process's clock).

``issued_at`` never decreases along the log, so once a frontend with a clock a day ahead has
logged an entry, a correctly-clocked one would take that future time for every later receipt.
It refuses instead (503 ``clock_behind_log``) until its clock reaches the log's time.
Two notaries on one SQLite file or one PostgreSQL database, as two processes would be.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from notary.core.ids import parse_issued_at
from notary.service import MAX_AHEAD, ClockBehindLog, utc_now
from tests.notary.store.test_notary_store import SHARED, _backend, digest, issue, running


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest) -> str:
    """A backend two notaries (two processes, as far as the store can tell) can share."""
    return _backend(request)


async def test_a_clock_ahead_does_not_pin_issued_at_for_other_frontends(
        tmp_path: Path, shared: str) -> None:
    data = tmp_path / "d"
    async with running(data, shared) as fast, running(data, shared) as right:
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


async def test_refusing_ends_once_the_clock_catches_up(tmp_path: Path, shared: str) -> None:
    data = tmp_path / "d"
    async with running(data, shared) as fast, running(data, shared) as right:
        fast.clock = lambda: utc_now() + timedelta(minutes=10)
        ahead, _ = await issue(fast, 1)
        with pytest.raises(ClockBehindLog):
            await issue(right, 2)
        assert right.clock_problem() is not None
        later = parse_issued_at(ahead.issued_at) + timedelta(seconds=1)
        right.clock = lambda: later
        assert right.clock_problem() is None  # /healthz clears without waiting for a write
        receipt, created = await issue(right, 2)
        assert created and parse_issued_at(receipt.issued_at) <= later
