"""A fair hand-over of a SQLite file's write lock between processes.

Theory of operation. SQLite's write lock (``BEGIN IMMEDIATE``) is not a queue: a connection that
finds it held sleeps in SQLite's busy handler, in steps of up to 100 ms, and retries. When two
busy writers share a file (``notary serve --workers 2``), the one that just committed takes the
lock again at once for its next batch, while the other is still asleep; the sleeper can lose
several rounds in a row, and its clients wait seconds. So every writer of the file first takes
an exclusive ``flock`` on a lock file beside it, and only then ``BEGIN IMMEDIATE``. A process
blocked in ``flock`` is woken by the kernel the moment the holder unlocks, which is before the
holder, busy answering the batch it just committed, asks again: the lock passes back and forth.
SQLite's own lock still guards the data; the queue only decides who asks first. A writer that
does not use the queue (the ``sqlite3`` shell, an older release) is still excluded by SQLite's
lock, and simply does not queue.

``flock`` has no timeout, so a wait longer than the busy timeout is abandoned from the event
loop: the waiting thread, when it finally gets the lock, gives it straight back and closes its
descriptor, and later waits use a descriptor of their own (a lock is its descriptor's: the
abandoned thread's unlock must not release a later holder's). The kernel
drops a dead holder's ``flock`` with its descriptors, so a crashed writer never blocks the file.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
from pathlib import Path

__all__ = ["WriterQueue"]


class _Wait:
    """One blocked wait, and whether its waiter gave up (then the lock is given back)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acquired = False
        self.abandoned = False

    def abandon(self) -> bool:
        """Give up; False if the lock was already taken (the caller then owns it)."""
        with self.lock:
            if self.acquired:
                return False
            self.abandoned = True
            return True


class WriterQueue:
    """The lock file ``<database>-writer.lock`` (0600), held around each write transaction."""

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + "-writer.lock")
        self._fd = -1  # opened on the first write: a store that only reads makes no file

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _try(self) -> bool:
        if self._fd < 0:
            self._fd = self._open()
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    @staticmethod
    def _block(fd: int, wait: _Wait) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with wait.lock:
            if wait.abandoned:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)  # abandoned: the queue moved on to a new descriptor
            else:
                wait.acquired = True

    def _abandoned(self) -> None:
        self._fd = self._open()

    async def take(self, timeout: float) -> bool:
        """Hold the queue lock: at once when it is free (on the caller's thread), else after
        waiting in a thread for at most ``timeout`` seconds. False when the wait timed out
        (nothing is held then)."""
        if self._try():
            return True
        wait = _Wait()
        task = asyncio.ensure_future(asyncio.to_thread(self._block, self._fd, wait))
        try:
            done, _ = await asyncio.wait([task], timeout=timeout)
        except BaseException:  # cancelled: never leave the lock taken behind our back
            if wait.abandon():
                self._abandoned()
            else:
                await asyncio.wait([task])
                self.release()
            raise
        if done:
            task.result()
            return True
        if wait.abandon():
            self._abandoned()
            return False
        await task  # taken just as the wait timed out: keep it
        return True

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
