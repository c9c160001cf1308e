"""The SQLite store's writer thread: one thread, calls in order, cancellation after the call."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from ledger.core.note import Ed25519Signer
from ledger.log import Log
from ledger.storage.sqlite import SqliteStore, _WriterThread


async def test_commits_run_on_the_stores_own_thread(tmp_path: Path) -> None:
    # Every commit is a trip to a thread; a dedicated one costs the event loop about two
    # thirds of a trip through the default executor (issue 13).
    store = await SqliteStore.open(tmp_path / "log.db", create=True)
    log = await Log.open(store, signer=Ed25519Signer.generate("example.com/log"))
    ran: list[str] = []
    real = store._finish

    def finish(statements: object) -> None:
        ran.append(threading.current_thread().name)
        real(statements)  # type: ignore[arg-type]

    store._finish = finish  # type: ignore[method-assign]
    for i in range(3):
        await log.append(b"entry %d" % i)
    assert ran == ["sqlite writer log.db"] * 3
    await log.close()


async def test_calls_run_in_order_and_errors_reach_the_caller() -> None:
    thread = _WriterThread("test writer")
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
    thread = _WriterThread("test writer")
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
