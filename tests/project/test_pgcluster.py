"""The PostgreSQL test harness itself: a synchronous standby loses no acknowledged commit when
the primary is SIGKILLed and the standby promoted (the premise of the failover tests)."""

from __future__ import annotations

from tests.pgcluster import primary_with_standby


def test_sync_standby_keeps_acknowledged_commits_across_failover() -> None:
    with primary_with_standby() as (primary, standby):
        primary.psql("CREATE TABLE t (n integer PRIMARY KEY)")
        primary.psql("INSERT INTO t SELECT generate_series(1, 100)")
        primary.kill()
        assert primary.pid() is not None  # killed, not shut down: the pid file stays behind
        standby.promote()
        assert standby.psql("SELECT count(*) FROM t") == "100"
        standby.psql("INSERT INTO t VALUES (101)")  # the promoted standby takes writes
        assert standby.psql("SELECT max(n) FROM t") == "101"
