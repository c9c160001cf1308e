"""Leases for run-once background jobs: one holder at a time, taken over when it dies."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest

from ledger.jobs.lease import FileLease, JobRunner, Lease
from ledger.storage.postgres import PostgresLease

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


async def test_file_lease_is_exclusive_and_dies_with_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "job.lock"
    a, b = FileLease(path), FileLease(path)
    assert await a.try_acquire() and a.held()
    assert not await b.try_acquire()
    await a.release()
    assert await b.try_acquire()
    await b.release()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
    assert not await a.try_acquire()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert await a.try_acquire()  # the kernel dropped the dead holder's lock
    await a.release()


async def _until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout  # generous: not a timing assertion
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_one_runner_runs_the_job_and_another_takes_over(pg_url: str) -> None:
    running: list[str] = []

    def runner(name: str, lease: Lease) -> JobRunner:
        async def job() -> None:
            running.append(name)
            try:
                await asyncio.Event().wait()
            finally:
                running.remove(name)
        return JobRunner("witnessing", lease, job, retry=0.1)

    first = runner("a", PostgresLease(pg_url, "witnessing"))
    second = runner("b", PostgresLease(pg_url, "witnessing"))
    other = PostgresLease(pg_url, "another-job")  # another job's lease is independent
    tasks = [asyncio.create_task(first.run()), asyncio.create_task(second.run())]
    await _until(lambda: len(running) == 1)
    assert await other.try_acquire()
    await asyncio.sleep(0.5)
    assert len(running) == 1  # still exactly one holder
    holder = first if running == ["a"] else second
    # The holder's database session dies (its machine was lost): the other one takes over.
    # Every step is bounded, so that a hang fails at its own line, not at the suite's timeout.
    conn = await asyncpg.connect(pg_url, timeout=30)
    await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE application_name = 'ledger-lease' AND pid IN "
                       "(SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = $1)",
                       holder.lease.key & 0xFFFFFFFF, timeout=30)  # type: ignore[attr-defined]
    await conn.close(timeout=30)
    await _until(lambda: running == ["b" if holder is first else "a"])
    for t in tasks:
        t.cancel()
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
    assert running == []
    await other.release()


async def test_a_lease_whose_server_stops_answering_still_lets_go(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The holder's server process stops (SIGSTOP: a frozen machine, a partition that sends
    no reset): releasing the lease, as a runner does when it stops, gives up on the graceful
    close after ``TIMEOUT`` and drops the socket, instead of waiting for an answer forever."""
    monkeypatch.setattr(PostgresLease, "TIMEOUT", 0.5)
    lease = PostgresLease(pg_url, "frozen")
    assert await lease.try_acquire()
    conn = await asyncpg.connect(pg_url, timeout=30)
    pid = await conn.fetchval("SELECT pid FROM pg_locks WHERE locktype = 'advisory' "
                              "AND objid = $1", lease.key & 0xFFFFFFFF, timeout=30)
    os.kill(pid, signal.SIGSTOP)
    try:
        await asyncio.wait_for(lease.release(), 30)  # a graceful close would wait forever
        assert not lease.held()
    finally:
        os.kill(pid, signal.SIGCONT)
    other = PostgresLease(pg_url, "frozen")
    deadline = time.monotonic() + 30
    while not await other.try_acquire():  # the dropped session ends, and its lock with it
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await other.release()
    await conn.close(timeout=30)
