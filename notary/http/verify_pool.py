"""Bounded verification for ``POST /v1/tool-calls/verify``: off the event loop, per client fair.

Verifying is unauthenticated and CPU-bound (canonicalizing a record is pure Python), so without
bounds a handful of clients sending large records could take the event loop from notarization.
Here the work runs in worker processes (threads would still hold the interpreter lock), and
three limits keep it bounded; what is over them is answered 429 with ``Retry-After`` at once:

- ``per_client`` in flight per client address (checked before the body is read);
- ``workers + queue`` verifications at most being worked on in the whole server (counted from
  when the body has arrived, so slow senders cannot hold the server's places);
- per client address, ``budget`` worker-seconds per second on average (a token bucket holding
  up to ``BURST_SECONDS`` of it), charged with the CPU time each verification really took.

Workers run at a lower CPU priority (nice 10): when CPU is short, notarization wins. A client
that sends again while it was told to wait gets its 429 without the server reading the rest of
its body. A client address is the peer's IP address. Behind a reverse proxy every client shares the
proxy's address, so the proxy should apply its own per-client limits.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

import structlog

from ledger.http.errors import ApiError
from notary.core.verify_request import timed
from notary.http.verify_worker import lower_priority

__all__ = ["BURST_SECONDS", "Refused", "VerifyPool"]

BURST_SECONDS = 10.0
"""A client address's bucket holds this many seconds of its budget (its allowed burst)."""

MAX_TRACKED_CLIENTS = 10_000

T = TypeVar("T")
_log = structlog.get_logger("notary.verify")


class _Bucket:
    __slots__ = ("inflight", "tokens", "told_until", "when")

    def __init__(self, tokens: float, when: float) -> None:
        self.tokens = tokens
        self.when = when
        self.inflight = 0
        self.told_until = 0.0  # this client was told (Retry-After) to wait until then


class Refused(ApiError):
    """A 429. ``ignored_retry_after``: the client had already been told to wait and sent
    anyway, so its body need not be read (see :func:`ledger.http.aiohttp_adapter.close_unread`)."""

    def __init__(self, message: str, retry_after: int, *, ignored_retry_after: bool) -> None:
        super().__init__(429, "verify_rate_limited", message,
                         headers={"Retry-After": str(retry_after)})
        self.ignored_retry_after = ignored_retry_after


class VerifyPool:
    """Admission control and the worker processes. ``close()`` when done."""

    def __init__(self, *, workers: int, queue: int, per_client: int, budget: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.workers = workers
        self.capacity = workers + queue
        self.per_client = per_client
        self.budget = budget
        self.burst = budget * BURST_SECONDS
        self._clock = clock
        self._executor: ProcessPoolExecutor | None = None
        self._inflight = 0
        self._clients: OrderedDict[str, _Bucket] = OrderedDict()
        self.refused = 0

    # Admission -----------------------------------------------------------------------------

    def _bucket(self, client: str, now: float) -> _Bucket:
        bucket = self._clients.pop(client, None)
        if bucket is None:
            bucket = _Bucket(self.burst, now)
        else:
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.when) * self.budget)
            bucket.when = now
        self._clients[client] = bucket  # most recently used last
        if len(self._clients) > MAX_TRACKED_CLIENTS:
            self._forget()
        return bucket

    def _forget(self) -> None:
        """Drop the least recently used idle clients (a full bucket is what a new one gets)."""
        for client in list(self._clients)[: len(self._clients) - MAX_TRACKED_CLIENTS]:
            bucket = self._clients[client]
            if bucket.inflight == 0:
                del self._clients[client]

    def _refuse(self, why: str, retry_after: float, bucket: _Bucket | None = None) -> Refused:
        self.refused += 1
        seconds = max(1, math.ceil(retry_after))
        ignored = False
        if bucket is not None:
            now = self._clock()
            ignored = now < bucket.told_until
            bucket.told_until = max(bucket.told_until, now + seconds)
        return Refused(f"{why}; retry in {seconds} s", seconds, ignored_retry_after=ignored)

    @contextmanager
    def admit(self, client: str) -> Iterator[None]:
        """Hold one of ``client``'s slots (reading its body included), or raise
        :class:`Refused`: before the body is read, so refusing costs next to nothing."""
        now = self._clock()
        bucket = self._bucket(client, now)
        if bucket.tokens <= 0:
            raise self._refuse("this client address has used its verification budget",
                               -bucket.tokens / self.budget, bucket)
        if bucket.inflight >= self.per_client:
            raise self._refuse(f"this client address already has {bucket.inflight} "
                               "verifications in progress", 1, bucket)
        bucket.inflight += 1
        try:
            yield
        finally:
            bucket.inflight -= 1

    @contextmanager
    def working(self) -> Iterator[None]:
        """Hold one of the server's ``workers + queue`` places, or raise the 429.

        Taken once the body has arrived, so clients that send their bodies slowly hold only
        their own per-client slots, never the server's.
        """
        if self._inflight >= self.capacity:
            raise self._refuse("the server is verifying as much as it is configured to", 1)
        self._inflight += 1
        try:
            yield
        finally:
            self._inflight -= 1

    def charge(self, client: str, seconds: float) -> None:
        bucket = self._clients.get(client)
        if bucket is not None:
            bucket.tokens -= seconds

    # Work ----------------------------------------------------------------------------------

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            # spawn, not fork: the server has threads (SQLite, aiosqlite) that a fork would
            # copy mid-operation.
            self._executor = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=lower_priority)
        return self._executor

    async def run(self, client: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker process, its CPU time charged to ``client``."""
        loop = asyncio.get_running_loop()
        try:
            result, seconds = await loop.run_in_executor(self._pool(), timed, fn, *args)
        except BrokenProcessPool:
            # A worker died (killed, out of memory): start afresh for the next request.
            broken, self._executor = self._executor, None
            if broken is not None:
                broken.shutdown(wait=False, cancel_futures=True)
            _log.error("verify_worker_died")
            raise ApiError(503, "unavailable", "a verification worker failed; retry",
                           headers={"Retry-After": "1"}) from None
        self.charge(client, seconds)
        return result

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, True, cancel_futures=True)
