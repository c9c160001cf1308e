"""The witness's memory: per origin, the latest checkpoint it cosigned, in one SQLite file.

A witness must never cosign two inconsistent checkpoints of one log, including across crashes
and restarts, so the compare step and the write are one transaction (``BEGIN IMMEDIATE`` holds
SQLite's write lock from the read of the stored size to the commit), and the file is in WAL mode
with ``synchronous = FULL``: ``COMMIT`` returns only once the new state is on disk. The server
signs and answers only after that, so a SIGKILL (or a power cut) at any moment can lose an
answer, never roll the stored size back.

All database work runs on one dedicated thread with one connection: the transactions of all
origins are serialised, and the event loop never waits on the disk.

Sizes are stored as decimal text because tree sizes are uint64 and SQLite integers are signed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ledger.core.checkpoint import Checkpoint
from ledger.core.errors import LedgerError
from ledger.core.witness_protocol import Decision, StoredCheckpoint, decide

__all__ = ["EVIDENCE_KEPT", "Evidence", "WitnessStore", "WitnessStoreError"]

#: Refused log-signed checkpoints kept as evidence (the oldest go first); bounded so that a
#: misbehaving log cannot fill the witness's disk.
EVIDENCE_KEPT = 1000

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    origin TEXT PRIMARY KEY,
    size TEXT NOT NULL,
    root BLOB NOT NULL,
    note BLOB NOT NULL,
    updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS evidence (
    id INTEGER PRIMARY KEY,
    origin TEXT NOT NULL,
    time REAL NOT NULL,
    status INTEGER NOT NULL,
    reason TEXT NOT NULL,
    request BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class WitnessStoreError(LedgerError, RuntimeError):
    """The store cannot be used (another witness's data, or an unreadable file)."""


@dataclass(frozen=True)
class Evidence:
    """A log-signed checkpoint the witness refused, with the request that carried it."""

    origin: str
    time: float
    status: int
    reason: str
    request: bytes


class WitnessStore:
    """Open with :meth:`open`; every method is a coroutine run on the store's own thread."""

    def __init__(self, path: Path, executor: ThreadPoolExecutor, conn: sqlite3.Connection
                 ) -> None:
        self.path = path
        self._executor = executor
        self._conn = conn

    @classmethod
    async def open(cls, path: Path, witness_vkey: str) -> WitnessStore:
        """Open (or create) the store of the witness whose verifier key is ``witness_vkey``.

        The key is recorded on creation and checked afterwards: a data directory describes what
        one witness key has cosigned, and using it with another key would be a mix-up.
        """
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="witness-store")
        loop = asyncio.get_running_loop()
        try:
            conn = await loop.run_in_executor(executor, _connect, path, witness_vkey)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(path, executor, conn)

    async def _run(self, fn: Callable[..., _T], *args: object) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def add(self, origin: str, old: int, proof: Sequence[bytes], checkpoint: Checkpoint,
                  note: bytes, request: bytes) -> Decision:
        """Compare the request with the stored state and persist it if it is accepted, atomically.

        Returns the decision once the transaction is durable; the caller may then cosign.
        """
        return await self._run(self._add, origin, old, tuple(proof), checkpoint, note, request)

    def _add(self, origin: str, old: int, proof: tuple[bytes, ...], checkpoint: Checkpoint,
             note: bytes, request: bytes) -> Decision:
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            row = c.execute("SELECT size, root FROM checkpoints WHERE origin = ?",
                            (origin,)).fetchone()
            stored = None if row is None else StoredCheckpoint(int(row[0]), bytes(row[1]))
            decision = decide(stored, old, proof, checkpoint)
            now = time.time()
            if decision.store:
                c.execute(
                    "INSERT INTO checkpoints (origin, size, root, note, updated) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (origin) DO UPDATE SET "
                    "size = excluded.size, root = excluded.root, note = excluded.note, "
                    "updated = excluded.updated",
                    (origin, str(checkpoint.size), checkpoint.root_hash, note, now))
            if decision.evidence:
                c.execute("INSERT INTO evidence (origin, time, status, reason, request) "
                          "VALUES (?, ?, ?, ?, ?)",
                          (origin, now, decision.outcome.value, decision.reason, request))
                c.execute("DELETE FROM evidence WHERE id <= "
                          "(SELECT max(id) FROM evidence) - ?", (EVIDENCE_KEPT,))
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        return decision

    async def latest(self, origin: str) -> tuple[StoredCheckpoint, bytes] | None:
        """The stored size and root for ``origin``, with the note as it was submitted."""
        return await self._run(self._latest, origin)

    def _latest(self, origin: str) -> tuple[StoredCheckpoint, bytes] | None:
        row = self._conn.execute("SELECT size, root, note FROM checkpoints WHERE origin = ?",
                                 (origin,)).fetchone()
        if row is None:
            return None
        return StoredCheckpoint(int(row[0]), bytes(row[1])), bytes(row[2])

    async def evidence(self, limit: int = 100) -> list[Evidence]:
        """The most recent refused log-signed checkpoints, newest first."""
        return await self._run(self._evidence, limit)

    def _evidence(self, limit: int) -> list[Evidence]:
        rows = self._conn.execute(
            "SELECT origin, time, status, reason, request FROM evidence ORDER BY id DESC "
            "LIMIT ?", (limit,)).fetchall()
        return [Evidence(r[0], r[1], r[2], r[3], bytes(r[4])) for r in rows]

    async def close(self) -> None:
        await self._run(self._conn.close)
        self._executor.shutdown(wait=True)


def _connect(path: Path, witness_vkey: str) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.executescript(_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('witness_vkey', ?)",
                     (witness_vkey,))
        (stored,) = conn.execute("SELECT value FROM meta WHERE key = 'witness_vkey'").fetchone()
    except sqlite3.DatabaseError as e:
        raise WitnessStoreError(f"cannot open witness database {path}: {e}") from e
    if stored != witness_vkey:
        conn.close()
        raise WitnessStoreError(
            f"{path} holds the state of witness {stored}, not of {witness_vkey}; use that "
            "witness's key or another data directory")
    return conn
