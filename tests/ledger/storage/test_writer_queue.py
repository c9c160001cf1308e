"""The writer queue in front of SQLite's write lock (ledger/storage/writer_queue.py): every
write of a SqliteStore waits for its turn there, a wait past the busy timeout fails cleanly
and leaves nothing held, and two stores on one file take turns."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from ledger.core.note import Ed25519Signer
from ledger.log.facade import Log
from ledger.storage import writer_queue
from ledger.storage.base import WriterBusyError
from ledger.storage.sqlite import SqliteStore
from ledger.storage.writer_queue import WriterQueue


def _lock_file(db: Path) -> Path:
    return db.with_name(db.name + "-writer.lock")


async def test_a_write_waits_for_the_queue_and_proceeds_when_it_is_free(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    log = await Log.open(await SqliteStore.open(db, create=True),
                         signer=Ed25519Signer.generate("queue.test/log"))
    await log.append(b"first")
    lock = _lock_file(db)
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    other = os.open(lock, os.O_RDWR)  # another writer's turn: SQLite itself is free
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        appending = asyncio.create_task(log.append(b"second"))
        await asyncio.sleep(0.3)
        assert not appending.done()  # it waits for its turn, not just for SQLite's lock
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
    appended = await asyncio.wait_for(appending, 10)
    assert appended.index == 1
    os.close(other)
    await log.close()


async def test_a_wait_past_the_busy_timeout_fails_and_holds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    store = await SqliteStore.open(db, create=True, busy_timeout=0.2)
    log = await Log.open(store, signer=Ed25519Signer.generate("queue.test/log"))
    await log.append(b"first")
    other = os.open(_lock_file(db), os.O_RDWR)
    fcntl.flock(other, fcntl.LOCK_EX)
    with pytest.raises(WriterBusyError, match=r"waited 0\.2s for its turn"):
        await log.append(b"refused")
    fcntl.flock(other, fcntl.LOCK_UN)
    await asyncio.sleep(0.1)  # the abandoned wait gets the lock and gives it straight back
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: nothing was left held
    fcntl.flock(other, fcntl.LOCK_UN)
    assert (await log.append(b"later")).index == 1  # and the store writes again
    os.close(other)
    await log.close()


async def test_a_cancelled_wait_leaves_nothing_held(tmp_path: Path) -> None:
    queue = WriterQueue(tmp_path / "x.db")
    assert await queue.take(1.0)
    second = WriterQueue(tmp_path / "x.db")  # another descriptor: another writer
    waiting = asyncio.create_task(second.take(10.0))
    await asyncio.sleep(0.1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    queue.release()
    await asyncio.sleep(0.1)
    assert await queue.take(0.5)  # the cancelled waiter gave its turn back
    queue.release()
    queue.close()
    second.close()


async def test_two_stores_on_one_file_both_write(tmp_path: Path) -> None:
    """Two writers of one file (two processes' worth of stores) under load: every append of
    each is committed once, the log has no gap, and each saw the other's entries."""
    db = tmp_path / "log.db"
    signer = Ed25519Signer.generate("queue.test/log")
    first = await Log.open(await SqliteStore.open(db, create=True), signer=signer)
    second = await Log.open(await SqliteStore.open(db), signer=signer)
    results = await asyncio.gather(
        *(first.append(b"a%d" % i) for i in range(300)),
        *(second.append(b"b%d" % i) for i in range(300)))
    indexes = sorted(r.index for r in results)
    assert indexes == list(range(600))
    await first.close()
    await second.close()


async def test_a_wait_that_fails_as_it_times_out_closes_its_descriptor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``flock`` itself failing (say ENOLCK) just after the wait timed out, before the waiter
    gave up: the waiting thread is done with the descriptor, the waiter moves on to a new one,
    and the old one is closed all the same."""
    holder = WriterQueue(tmp_path / "x.db")
    assert await holder.take(1.0)
    before = set(os.listdir("/proc/self/fd"))
    queue = WriterQueue(tmp_path / "x.db")
    fail, reported = threading.Event(), threading.Event()
    real_flock = fcntl.flock

    def flock(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX:  # the queue thread's blocking wait
            fail.wait(10)
            raise OSError(errno.ENOLCK, "No locks available")
        real_flock(fd, operation)

    loop = asyncio.get_running_loop()
    real_soon = loop.call_soon_threadsafe

    def soon(*args: Any) -> Any:
        handle = real_soon(*args)
        reported.set()  # the thread has recorded the failure and handed it to the loop
        return handle

    real_expire = writer_queue._expire

    def expire(fut: asyncio.Future[bool]) -> None:
        real_expire(fut)  # the wait timed out; now flock fails, before the waiter resumes
        fail.set()
        assert reported.wait(10)

    monkeypatch.setattr(fcntl, "flock", flock)
    monkeypatch.setattr(loop, "call_soon_threadsafe", soon)
    monkeypatch.setattr(writer_queue, "_expire", expire)
    assert not await queue.take(0.1)
    monkeypatch.undo()
    queue.close()
    assert set(os.listdir("/proc/self/fd")) <= before  # no descriptor left open
    holder.release()
    holder.close()
