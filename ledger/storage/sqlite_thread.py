"""The thread that runs a SQLite store's writer-connection work (``ledger.storage.sqlite``).

A dedicated thread with a plain queue, rather than ``asyncio.to_thread``: see
:class:`WriterThread`.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar, TypeVarTuple

__all__ = ["WriterThread"]

_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")


class _Work(Protocol):
    """What the writer thread does with a job: :meth:`call` it, then have its loop
    :meth:`settle` it (a :class:`_Job` of any result type)."""

    loop: asyncio.AbstractEventLoop

    def call(self) -> None: ...

    def settle(self) -> None: ...


class _Job(Generic[_T]):
    """One call for the writer thread, and how its waiter hears of the outcome."""

    __slots__ = ("after", "args", "error", "finished", "fn", "fut", "loop", "result")

    result: _T
    """What ``fn`` returned, once it returned (unset before, and when it raised)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., _T],
                 args: tuple[object, ...]) -> None:
        self.loop = loop
        self.fn = fn
        self.args = args
        self.fut: asyncio.Future[_T] = loop.create_future()
        self.after: asyncio.Future[None] | None = None  # set by a cancelled waiter
        self.finished = False
        self.error: BaseException | None = None

    def call(self) -> None:
        """On the writer thread: run the call, keep what it returned or raised."""
        try:
            self.result = self.fn(*self.args)
        except BaseException as e:  # handed to the waiter, whatever it is
            self.error = e

    def settle(self) -> None:
        """On the loop's thread, once the call returned or raised."""
        self.finished = True
        if not self.fut.done():
            if self.error is not None:
                self.fut.set_exception(self.error)
            else:
                self.fut.set_result(self.result)
        if self.after is not None and not self.after.done():
            self.after.set_result(None)
        self.error = None  # no cycle through the traceback


class WriterThread:
    """The thread that runs a store's writer-connection work, one job at a time, in order.

    A dedicated thread with a plain queue, rather than ``asyncio.to_thread``: a trip through
    the default executor (its concurrent future, the chained asyncio future, the task around
    ``to_thread``, ``asyncio.shield``) cost about 1.5 times the event loop's CPU of this one
    (benchmarks/docs/history.md, notarize_cpu), and every commit makes one. The jobs are already
    serialized by the store's ``_wlock``, so one thread loses nothing; it is a daemon and
    started on first use.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.call()
            with contextlib.suppress(RuntimeError):  # the loop closed without waiting
                job.loop.call_soon_threadsafe(job.settle)
            del job

    async def run(self, fn: Callable[[*_Args], _T], *args: *_Args) -> _T:
        """``fn(*args)`` on the thread, waited for even if the caller is cancelled.

        A commit that has started must finish (or fail) before anything else touches the
        connection, or a rollback could race it; the cancellation is delivered afterwards.
        """
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        loop = asyncio.get_running_loop()
        job = _Job(loop, fn, args)
        self._jobs.put(job)
        try:
            return await job.fut
        except asyncio.CancelledError:
            if not job.finished:  # the call still runs (or is queued): wait for its end
                job.after = loop.create_future()
                await job.after
            raise

    def stop(self) -> None:
        """Let the thread end once its queued jobs are done."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None
