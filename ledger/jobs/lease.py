"""Leases: which one of several processes on one log runs a background job right now.

Some work must run once per log, not once per process: submitting checkpoints to witnesses,
keeping one published directory up to date. Every process runs a :class:`JobRunner`; it tries to
take the job's lease every few seconds, runs the job while it holds the lease, and stops it as
soon as the lease is lost. A lease is released by the operating system or the database when its
holder dies (SIGKILL included), so another process takes the job over within one retry interval:

- :class:`FileLease`: an exclusive ``flock`` on a file (SQLite logs, published directories: the
  processes share a machine). The kernel drops it when the holder's process ends.
- PostgreSQL: a session advisory lock (:meth:`ledger.storage.postgres.PostgresStore.lease`),
  dropped when the holder's connection ends (its process died, or the server failed over).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Protocol

import structlog

__all__ = ["FileLease", "JobRunner", "Lease"]

_log = structlog.get_logger("ledger.jobs.lease")


class Lease(Protocol):
    """One job's lease, as held (or not) by this process."""

    async def try_acquire(self) -> bool:
        """Take the lease if nobody holds it; True if this process holds it now."""
        ...

    def held(self) -> bool:
        """Whether this process still holds it (False once its connection is lost)."""
        ...

    async def release(self) -> None: ...


class FileLease:
    """An exclusive ``flock`` on ``path`` (created 0600 if missing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    async def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def held(self) -> bool:
        return self._fd is not None

    async def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor drops the lock


class JobRunner:
    """Runs ``job()`` in this process whenever it holds ``lease``; call :meth:`run` as a task.

    ``job`` is started when the lease is taken and cancelled when the lease is lost or the
    runner is stopped; ``on_change`` is told True/False as this process gains or loses it.
    """

    def __init__(self, name: str, lease: Lease, job: Callable[[], Coroutine[object, None, None]], *,
                 retry: float = 2.0, on_change: Callable[[bool], None] | None = None) -> None:
        self.name = name
        self.lease = lease
        self.job = job
        self.retry = retry
        self.on_change = on_change
        self.holding = False

    async def run(self) -> None:
        task: asyncio.Task[None] | None = None
        try:
            while True:
                if task is None:
                    try:
                        got = await self.lease.try_acquire()
                    except Exception as e:  # the store is unreachable: not ours this round
                        _log.warning("lease_unavailable", job=self.name, error=type(e).__name__)
                        got = False
                    if got:
                        self._set(True)
                        task = asyncio.create_task(self.job(), name=self.name)
                elif not self.lease.held() or task.done():
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        _log.error("job_failed", job=self.name,
                                   error=type(task.exception()).__name__)
                    await _cancel(task)
                    task = None
                    await self.lease.release()
                    self._set(False)
                await asyncio.sleep(self.retry if task is None else min(self.retry, 0.5))
        finally:
            if task is not None:
                await _cancel(task)
            with contextlib.suppress(Exception):
                await self.lease.release()
            self._set(False)

    def _set(self, holding: bool) -> None:
        if holding != self.holding:
            self.holding = holding
            _log.info("job_lease", job=self.name, holding=holding)
            if self.on_change is not None:
                self.on_change(holding)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
