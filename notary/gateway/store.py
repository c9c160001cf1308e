"""The gateway's own SQLite file: idempotency outcomes, decision evidence, policy commitments.

Why a file of its own: the notary's ledger holds only digests. To re-check a decision an
auditor needs the *facts* it was made on, and to answer a retried non-idempotent call without
calling the upstream twice the gateway needs the outcome it sent. Both live here.

Durability, per table (WAL mode, two connections to the one file):

- idempotency keys and policy commitments: ``synchronous=FULL``, so each commit is on disk
  before the call that made it returns. A key is written ``pending`` *before* the upstream call
  and ``done`` with the full result *before* the answer is sent; a crash in between leaves
  ``pending``, and a retry then gets ``gateway.IDEMPOTENCY_OUTCOME_UNKNOWN``, never a second
  execution. The ``pending`` row is written in one transaction with the call's (allowed,
  notarized) decision evidence: one fsync'ed commit before forwarding, not two writes.
- other decision evidence: ``synchronous=NORMAL``, durable across a crash of the gateway but
  not across a power loss (the last commits may roll back). The decision itself is already
  durable in the ledger before anything is forwarded; this file is the operator's copy of the
  facts, and an fsync per call here would double the gateway's own latency. ``gateway audit``
  reports a ledger decision without local evidence as unverifiable, not as valid.

Both connections are in autocommit mode, each on a thread of its own: every write is one
trip to that thread (a few tens of microseconds each), and an fsync never blocks the event
loop.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import aiosqlite

from ledger.storage.sqlite_thread import WriterThread
from notary.core.errors import NotaryBaseError

__all__ = ["DecisionEvidence", "GatewayStore", "IdempotencyRow", "KeyClaim", "KeyTaken",
           "read_decisions"]

_T = TypeVar("_T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS policies (
    commitment TEXT PRIMARY KEY, first_used TEXT NOT NULL, receipt TEXT);
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, tool TEXT NOT NULL,
    decision TEXT NOT NULL, record TEXT NOT NULL, facts TEXT NOT NULL, receipt TEXT);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY, tool TEXT NOT NULL, request_sha256 TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done')), created TEXT NOT NULL,
    result TEXT);
"""


@dataclass(frozen=True)
class IdempotencyRow:
    key: str
    tool: str
    request_sha256: str
    state: Literal["pending", "done"]
    result: dict[str, object] | None


@dataclass(frozen=True)
class KeyClaim:
    """An idempotency key to claim ``pending`` with an allowed decision's evidence."""

    key: str
    tool: str
    request_sha256: str
    created: str


class KeyTaken(NotaryBaseError):
    """The key was claimed already (by another gateway process): nothing may be forwarded.

    The decision evidence it came with is saved all the same."""


@dataclass(frozen=True)
class DecisionEvidence:
    """What an auditor needs for one decision: the record, the facts, the notary receipt."""

    record: Mapping[str, object]
    facts: Mapping[str, object]
    receipt: Mapping[str, object] | None

    def to_json(self) -> dict[str, object]:
        return {"record": self.record, "facts": self.facts, "receipt": self.receipt}


def _private_file(path: Path) -> None:
    """Create ``path`` 0600 if absent; take group and other access off one that exists."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o077:
            os.fchmod(fd, mode & 0o700)
            for suffix in ("-wal", "-shm"):
                side = path.with_name(path.name + suffix)
                if side.exists():
                    os.chmod(side, stat.S_IMODE(side.stat().st_mode) & 0o700)
    finally:
        os.close(fd)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _StateConnection:
    """A sqlite3 connection (autocommit) used only from a thread of its own, the ledger's
    :class:`~ledger.storage.sqlite_thread.WriterThread` (a bare queue: an executor's futures
    cost 10-25 µs more a trip).

    Each :meth:`run` is one trip to that thread, however many statements the function runs:
    a transaction of several statements costs one trip (aiosqlite needs one per statement and
    one for the commit), and every fsync stays off the event loop. A call that started is
    waited out even if its caller is cancelled, so a transaction never races the next. The
    thread is a daemon: a gateway that exits without closing its store leaves what a crash
    leaves (the last transaction rolled back), never a process that cannot exit.
    """

    def __init__(self, thread: WriterThread, conn: sqlite3.Connection) -> None:
        self._thread = thread
        self._conn: sqlite3.Connection | None = conn

    @classmethod
    async def open(cls, path: Path, *pragmas: str) -> _StateConnection:
        thread = WriterThread("gateway-state")
        try:
            return cls(thread, await thread.run(_connect, path, pragmas))
        except BaseException:
            thread.stop()
            raise

    async def run(self, fn: Callable[..., _T], *args: object) -> _T:
        """``fn(connection, *args)`` on the connection's thread."""
        if self._conn is None:
            raise RuntimeError("the gateway store is closed")
        return await self._thread.run(fn, self._conn, *args)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        try:
            if conn is not None:
                await self._thread.run(conn.close)
        finally:
            self._thread.stop()


def _connect(path: Path, pragmas: tuple[str, ...]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for pragma in pragmas:
            conn.execute(pragma)
    except BaseException:
        conn.close()
        raise
    return conn


_INSERT_DECISION = ("INSERT INTO decisions (time, tool, decision, record, facts, receipt) "
                    "VALUES (?, ?, ?, ?, ?, ?)")


def _claim_with(conn: sqlite3.Connection, decision: tuple[object, ...],
                claim: KeyClaim) -> bool:
    """One transaction: the decision's evidence, and ``claim`` ``pending`` unless taken."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_INSERT_DECISION, decision)
        claimed = conn.execute(
            "INSERT OR IGNORE INTO idempotency (key, tool, request_sha256, state, created) "
            "VALUES (?, ?, ?, 'pending', ?)",
            (claim.key, claim.tool, claim.request_sha256, claim.created)).rowcount == 1
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return claimed


def _lookup(conn: sqlite3.Connection, key: str) -> IdempotencyRow | None:
    row = conn.execute(
        "SELECT key, tool, request_sha256, state, result FROM idempotency WHERE key = ?",
        (key,)).fetchone()
    if row is None:
        return None
    return IdempotencyRow(row[0], row[1], row[2], row[3],
                          None if row[4] is None else json.loads(row[4]))


def _execute(conn: sqlite3.Connection, sql: str, parameters: tuple[object, ...]) -> None:
    conn.execute(sql, parameters)


class GatewayStore:
    """Two connections to the gateway's state file. Use :meth:`open`/:meth:`close`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db: _StateConnection | None = None
        self._log: _StateConnection | None = None

    async def open(self) -> GatewayStore:
        """Open (creating it, mode 0600) the state file; a file others can read is fixed.

        The file holds results, facts and record salts: only the gateway's user may read it.
        SQLite gives its ``-wal`` and ``-shm`` files the database file's mode, so creating
        the database 0600 before SQLite touches it covers all three.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _private_file(self.path)
        # Autocommit (both connections): a write of one statement is its own transaction,
        # committed (and on the durable connection fsync'ed) by that statement.
        db = await _StateConnection.open(self.path, "PRAGMA journal_mode=WAL",
                                         "PRAGMA synchronous=FULL", "PRAGMA busy_timeout=10000")
        try:
            await db.run(sqlite3.Connection.executescript, SCHEMA)
            log = await _StateConnection.open(self.path, "PRAGMA synchronous=NORMAL",
                                              "PRAGMA busy_timeout=10000")
        except BaseException:
            await db.close()
            raise
        self._db, self._log = db, log
        return self

    async def close(self) -> None:
        for conn in (self._log, self._db):
            if conn is not None:
                await conn.close()
        self._db = self._log = None

    @property
    def db(self) -> _StateConnection:
        """The durable connection (``synchronous=FULL``)."""
        if self._db is None:
            raise RuntimeError("the gateway store is not open")
        return self._db

    @property
    def log(self) -> _StateConnection:
        """The decision-evidence connection (``synchronous=NORMAL``)."""
        if self._log is None:
            raise RuntimeError("the gateway store is not open")
        return self._log

    # Policies and decisions ---------------------------------------------------------------

    async def save_policy(self, commitment: str, when: str,
                          receipt: Mapping[str, object] | None) -> None:
        await self.db.run(
            _execute,
            "INSERT INTO policies (commitment, first_used, receipt) VALUES (?, ?, ?) "
            "ON CONFLICT(commitment) DO UPDATE SET receipt = COALESCE(excluded.receipt, receipt)",
            (commitment, when, None if receipt is None else _dumps(receipt)))

    async def save_decision(self, evidence: DecisionEvidence, claim: KeyClaim | None = None
                            ) -> None:
        """Save one decision's evidence (committed when this returns).

        With a ``claim`` (an allowed decision of a non-idempotent call), the evidence and the
        key's ``pending`` row are one durable transaction: one fsync before forwarding, not
        an evidence write and then a claim. Raises :class:`KeyTaken` (the evidence saved)
        when the key was claimed already.
        """
        record = evidence.record
        row = (record["time"], record["tool"], record["decision"], _dumps(record),
               _dumps(evidence.facts),
               None if evidence.receipt is None else _dumps(evidence.receipt))
        if claim is None:
            await self.log.run(_execute, _INSERT_DECISION, row)
        elif not await self.db.run(_claim_with, row, claim):
            raise KeyTaken(claim.key)

    # Idempotency --------------------------------------------------------------------------

    async def lookup(self, key: str) -> IdempotencyRow | None:
        return await self.db.run(_lookup, key)

    async def release(self, key: str) -> None:
        """Give up a ``pending`` claim whose call reached no outcome (it asked for input)."""
        await self.db.run(_execute,
                          "DELETE FROM idempotency WHERE key = ? AND state = 'pending'", (key,))

    async def finish(self, key: str, result: Mapping[str, object]) -> None:
        """Record the outcome sent for ``key`` (durable before the answer goes out)."""
        await self.db.run(_execute,
                          "UPDATE idempotency SET state = 'done', result = ? WHERE key = ?",
                          (_dumps(result), key))


async def read_decisions(path: Path) -> AsyncIterator[DecisionEvidence]:
    """The decision evidence in a gateway state file, oldest first (for ``gateway audit``)."""
    async with aiosqlite.connect(f"file:{path}?mode=ro", uri=True) as db, db.execute(
            "SELECT record, facts, receipt FROM decisions ORDER BY seq") as cur:
        async for record, facts, receipt in cur:
            yield DecisionEvidence(json.loads(record), json.loads(facts),
                                   None if receipt is None else json.loads(receipt))


async def read_policy_receipts(path: Path) -> dict[str, dict[str, object] | None]:
    """Commitment → its ``policy.commit`` notary receipt, from a gateway state file."""
    out: dict[str, dict[str, object] | None] = {}
    async with aiosqlite.connect(f"file:{path}?mode=ro", uri=True) as db, db.execute(
            "SELECT commitment, receipt FROM policies") as cur:
        async for commitment, receipt in cur:
            out[commitment] = None if receipt is None else json.loads(receipt)
    return out
