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
abandoned wait's unlock must not release a later holder's). They queue on the same thread
behind the abandoned one, which ends the moment the holder unlocks, each with its own timeout
on the loop. The kernel drops a dead holder's ``flock`` with its descriptors, so a crashed
writer never blocks the file.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import queue
import threading
from pathlib import Path

__all__ = ["WriterQueue"]


class _Wait:
    """One blocked wait: its descriptor, the future its waiter awaits, and whether the waiter
    gave up (then the waiting thread gives the lock back once it gets it)."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self.fd = fd
        self.loop = loop
        self.fut: asyncio.Future[bool] = loop.create_future()  # False: the wait timed out
        self.lock = threading.Lock()
        self.acquired = False
        self.failed = False  # flock itself failed: the waiting thread is done with ``fd``
        self.abandoned = False

    def abandon(self) -> bool:
        """Give up; False if the lock was already taken (the caller then owns it).

        A wait whose ``flock`` failed after its waiter stopped listening (it timed out in the
        meantime) is done with its descriptor, and nobody else will close it: this does."""
        with self.lock:
            if self.acquired:
                return False
            self.abandoned = True
            if self.failed:
                os.close(self.fd)
            return True


def _settle(fut: asyncio.Future[bool], error: OSError | None) -> None:
    if not fut.done():
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(True)


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)


class WriterQueue:
    """The lock file ``<database>-writer.lock`` (0600), held around each write transaction.

    A contended wait blocks in ``flock`` on a thread of the queue's own, which hands the
    outcome to the loop with one wake-up: the default executor's future, the task around
    ``to_thread`` and ``asyncio.wait`` cost the loop a few times as much, and with several
    processes on one log nearly every commit waits (benchmarks/docs/history.md, http_notarize).
    """

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + "-writer.lock")
        self._fd = -1  # opened on the first write: a store that only reads makes no file
        self._waits: queue.SimpleQueue[_Wait | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

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

    def _serve(self) -> None:
        """The waiting thread: one blocked ``flock`` at a time, in the order asked."""
        while True:
            wait = self._waits.get()
            if wait is None:
                return
            error: OSError | None = None
            try:
                fcntl.flock(wait.fd, fcntl.LOCK_EX)
            except OSError as e:
                error = e
            with wait.lock:
                if wait.abandoned:
                    if error is None:
                        fcntl.flock(wait.fd, fcntl.LOCK_UN)
                    os.close(wait.fd)  # abandoned: the queue moved on to a new descriptor
                    continue
                wait.acquired = error is None
                wait.failed = error is not None
            try:
                wait.loop.call_soon_threadsafe(_settle, wait.fut, error)
            except RuntimeError:  # the loop closed without waiting: hold nothing
                if error is None:
                    fcntl.flock(wait.fd, fcntl.LOCK_UN)

    def _abandoned(self) -> None:
        self._fd = self._open()

    async def take(self, timeout: float) -> bool:
        """Hold the queue lock: at once when it is free (on the caller's thread), else after
        waiting on the queue's thread for at most ``timeout`` seconds. False when the wait
        timed out (nothing is held then)."""
        if self._try():
            return True
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, daemon=True,
                                            name=f"writer queue {self.path.name}")
            self._thread.start()
        loop = asyncio.get_running_loop()
        wait = _Wait(self._fd, loop)
        self._waits.put(wait)
        timer = loop.call_later(timeout, _expire, wait.fut)
        try:
            taken = await wait.fut
        except OSError:  # flock itself failed: nothing is held, the descriptor is still ours
            raise
        except BaseException:  # cancelled: never leave the lock taken behind our back
            if wait.abandon():
                self._abandoned()
            else:
                self.release()
            raise
        finally:
            timer.cancel()
        if taken or not wait.abandon():  # not abandoned: taken just as the wait timed out
            return True
        self._abandoned()
        return False

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._thread is not None:
            self._waits.put(None)
            self._thread = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
