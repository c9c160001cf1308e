"""The SQLite file of a cosigner (the witness's ``witness.db``, the mirror's ``mirror.db``): one
connection on one dedicated thread, durable transactions, and the keys the file belongs to.

A cosigner must never sign two inconsistent checkpoints of one log, including across crashes
and restarts, so its compare step and its write are one transaction (``BEGIN IMMEDIATE`` holds
SQLite's write lock from the first read to the commit), and the file is in WAL mode with
``synchronous = FULL``: ``COMMIT`` returns only once the new state is on disk. All work runs on
one thread with one connection, so the transactions of all origins are serialised and the
event loop never waits on the disk. Several processes may share the file: the write lock
serialises them.

A data directory describes what one cosigner has signed, so the file records the verifier keys
of the cosigner that uses it and refuses to open with none of them (a mix-up of directories);
a cosigner may gain keys (an ML-DSA-44 key beside its Ed25519 one), which are then recorded.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

__all__ = ["SqliteThread", "another_cosigners_key", "immediate"]

_T = TypeVar("_T")


class SqliteThread:
    """One connection on its own thread. Open with :meth:`open`; :meth:`run` calls a function
    with the connection on that thread."""

    def __init__(self, executor: ThreadPoolExecutor, conn: sqlite3.Connection) -> None:
        self._executor = executor
        self.conn = conn

    @classmethod
    async def open(cls, path: Path, setup: Callable[[sqlite3.Connection], None],
                   thread_name: str) -> SqliteThread:
        """Connect to ``path`` in WAL mode with ``synchronous = FULL`` and run ``setup`` (the
        schema, the key check) on the thread; the connection is closed if ``setup`` raises."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)
        try:
            conn = await asyncio.get_running_loop().run_in_executor(
                executor, _connect, path, setup)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(executor, conn)

    async def run(self, fn: Callable[..., _T], *args: object) -> _T:
        """``fn(connection, *args)`` on the thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, fn, self.conn, *args)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self.conn.close)
        self._executor.shutdown(wait=True)


def _connect(path: Path, setup: Callable[[sqlite3.Connection], None]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        setup(conn)
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction, committed (durably) when the block ends, rolled
    back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def another_cosigners_key(conn: sqlite3.Connection, table: str, vkeys: Iterable[str],
                          also_known: Iterable[str] = ()) -> str | None:
    """Record ``vkeys`` in ``table`` (one ``vkey`` column) as the keys of the cosigner this
    file belongs to, unless it already belongs to a cosigner with none of them: then return one
    of that cosigner's keys (for the message) and record nothing. ``also_known`` are keys the
    file records elsewhere. Runs inside the caller's transaction."""
    given = set(vkeys)
    known = {r[0] for r in conn.execute(f"SELECT vkey FROM {table}")} | set(also_known)
    if known and known.isdisjoint(given):
        return sorted(known)[0]
    conn.executemany(f"INSERT OR IGNORE INTO {table} (vkey) VALUES (?)",
                     [(k,) for k in sorted(known | given)])
    return None
