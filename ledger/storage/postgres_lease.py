"""A job's lease on PostgreSQL (:mod:`ledger.jobs.lease`): a session advisory lock."""

from __future__ import annotations

import contextlib
import hashlib

from ledger.storage.base import POSTGRES_EXTRA_MISSING, StoreError
from ledger.storage.postgres_failures import transient

try:
    import asyncpg
except ImportError as e:  # pragma: no cover - exercised only where the extra is missing
    raise StoreError(POSTGRES_EXTRA_MISSING) from e

__all__ = ["PostgresLease"]


class PostgresLease:
    """A session advisory lock on a connection of its own, for one job (:mod:`ledger.jobs.lease`).

    The lock lives as long as that connection: when the holder dies, or the server it is
    connected to does, the lock is gone and another process's :meth:`try_acquire` succeeds (on
    the new primary after a failover, where no session holds it).
    """

    #: Seconds any one exchange with the server may take (connect, the lock's query, a close):
    #: a server that stops answering costs a runner a round, never its task.
    TIMEOUT = 5.0

    def __init__(self, url: str, name: str) -> None:
        self.url = url
        self.key = int.from_bytes(hashlib.sha256(b"lease:" + name.encode()).digest()[:8], "big",
                                  signed=True)
        self._conn: asyncpg.Connection | None = None

    async def try_acquire(self) -> bool:
        if self.held():
            return True
        await self.release()
        try:
            conn = await asyncpg.connect(self.url, timeout=self.TIMEOUT,
                                         server_settings={"application_name": "ledger-lease"})
        except Exception as e:
            if transient(e):
                return False
            raise
        try:
            got = bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", self.key,
                                           timeout=self.TIMEOUT))
        except Exception:
            with contextlib.suppress(Exception):
                conn.terminate()
            return False
        if not got:
            await self._close(conn)
            return False
        self._conn = conn
        return True

    def held(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._close(conn)

    async def _close(self, conn: asyncpg.Connection) -> None:
        """Close gracefully (the server logs no lost client) within :attr:`TIMEOUT`, else drop
        the socket: either way the session ends, and with it any lock it held."""
        with contextlib.suppress(Exception):
            await conn.close(timeout=self.TIMEOUT)
        with contextlib.suppress(Exception):
            conn.terminate()
