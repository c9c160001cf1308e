"""Which PostgreSQL failures are worth waiting out, and how long (``ledger.storage.postgres``):
the server gone, restarting, failing over or full is *transient*, and a read, or a write up to
the moment it holds the lock, is retried with :class:`Backoff`; anything else (a wrong
password, a bad query) is raised at once.
"""

from __future__ import annotations

import asyncio
import random
import time

from ledger.storage.base import POSTGRES_EXTRA_MISSING, StoreError, StoreUnavailableError

try:
    import asyncpg
except ImportError as e:  # pragma: no cover - exercised only where the extra is missing
    raise StoreError(POSTGRES_EXTRA_MISSING) from e

__all__ = ["TRANSIENT", "Backoff", "describe", "transient"]

#: Errors that say "the server is not there (or not writable) right now", not "you asked wrong".
TRANSIENT: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # admin/crash shutdown, cannot connect now
    asyncpg.exceptions.ReadOnlySQLTransactionError,  # connected to a standby
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, disk full
    asyncpg.exceptions.TransactionRollbackError,  # serialization failure, deadlock
    asyncpg.InterfaceError,  # the connection was closed under us
    asyncpg.exceptions.InternalClientError,  # a connection left mid-operation by a failure
)


def transient(e: BaseException) -> bool:
    return isinstance(e, TRANSIENT)


def describe(e: BaseException) -> str:
    """An error's kind and text, never a query's parameters (they may be secrets)."""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class Backoff:
    """Jittered exponential back-off (50 ms doubling to 1 s) for ``retry_for`` seconds."""

    def __init__(self, retry_for: float,
                 giving_up: str = "the PostgreSQL database is unavailable") -> None:
        self._deadline = time.monotonic() + retry_for
        self._delay = 0.05
        self._giving_up = giving_up

    async def after(self, e: Exception) -> None:
        """Wait before the next try after ``e``; re-raise ``e`` unless it is transient, and
        raise :class:`StoreUnavailableError` once the next try would pass the deadline."""
        if not transient(e):
            raise e
        if time.monotonic() + self._delay > self._deadline:
            raise StoreUnavailableError(f"{self._giving_up}: {describe(e)}") from None
        await asyncio.sleep(self._delay * (0.5 + random.random()))
        self._delay = min(self._delay * 2, 1.0)
