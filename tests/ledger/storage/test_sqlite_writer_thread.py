"""The SQLite store's writer thread: one thread, calls in order, cancellation after the call;
which commits take it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from ledger.core.note import Ed25519Signer
from ledger.log.facade import Log
from ledger.storage.sqlite import LONE_ENTRIES, SqliteStore
from ledger.storage.sqlite_thread import WriterThread


async def test_batches_commit_on_the_stores_own_thread_and_an_idle_logs_on_the_loops(
        tmp_path: Path) -> None:
    # A batch is a trip to a dedicated thread (about two thirds of the loop's CPU of a trip
    # through the default executor); a lone entry after a lone entry commits on the loop's
    # thread, where it skips the trip's latency (LONE_ENTRIES; benchmarks/docs/history.md).
    store = await SqliteStore.open(tmp_path / "log.db", create=True)
    log = await Log.open(store, signer=Ed25519Signer.generate("example.com/log"))
    ran: list[str] = []
    real = store._finish

    def finish(statements: object) -> None:
        ran.append(threading.current_thread().name)
        real(statements)  # type: ignore[arg-type]

    store._finish = finish  # type: ignore[method-assign]
    loop, writer = threading.current_thread().name, "sqlite writer log.db"
    lone = [b"entry %d" % i for i in range(LONE_ENTRIES)]
    await log.append_many(lone)
    await log.append_many(lone)
    assert ran == [loop, loop]
    await log.append_many([b"many %d" % i for i in range(LONE_ENTRIES + 1)])
    await asyncio.gather(*(log.append(b"together %d" % i) for i in range(LONE_ENTRIES + 2)))
    await log.append_many(lone)  # right after a batch: requests may be arriving
    await log.append_many(lone)
    assert ran == [loop, loop, writer, writer, writer, loop]
    await log.close()

    reopened = await SqliteStore.open(tmp_path / "log.db")
    latest = await reopened.latest()
    assert latest is not None and latest.size == 6 * LONE_ENTRIES + 3
    await reopened.close()


async def test_calls_run_in_order_and_errors_reach_the_caller() -> None:
    thread = WriterThread("test writer")
    seen: list[int] = []

    def note(i: int) -> int:
        seen.append(i)
        return i

    assert await asyncio.gather(*(thread.run(note, i) for i in range(20))) == list(range(20))
    assert seen == list(range(20))

    def fail() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await thread.run(fail)
    assert await thread.run(lambda: "still serving") == "still serving"
    thread.stop()


async def test_a_cancelled_caller_is_answered_only_after_the_call_ended() -> None:
    # A commit that has started must end before anything else touches the connection.
    thread = WriterThread("test writer")
    started, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def slow() -> None:
        started.set()
        release.wait(10)
        ended.append("call")

    waiter = asyncio.create_task(thread.run(slow))
    await asyncio.to_thread(started.wait, 10)
    waiter.cancel()
    await asyncio.sleep(0.2)
    assert not waiter.done() and ended == []
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert ended == ["call"]
    thread.stop()
