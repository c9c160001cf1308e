"""The gateway's own SQLite file: idempotency outcomes, decision evidence, policy commitments.

Why a file of its own: the notary's ledger holds only digests. To re-check a decision an
auditor needs the *facts* it was made on, and to answer a retried non-idempotent call without
calling the upstream twice the gateway needs the outcome it sent. Both live here.

Durability, per table (WAL mode, two connections to the one file):

- idempotency keys and policy commitments: ``synchronous=FULL``, so each commit is on disk
  before the call that made it returns. A key is written ``pending`` *before* the upstream call
  and ``done`` with the full result *before* the answer is sent; a crash in between leaves
  ``pending``, and a retry then gets ``gateway.IDEMPOTENCY_OUTCOME_UNKNOWN``, never a second
  execution.
- decision evidence: ``synchronous=NORMAL``, durable across a crash of the gateway but not
  across a power loss (the last commits may roll back). The decision itself is already
  durable in the ledger before anything is forwarded; this file is the operator's copy of the
  facts, and an fsync per call here would double the gateway's own latency. ``gateway audit``
  reports a ledger decision without local evidence as unverifiable, not as valid.

All I/O runs on aiosqlite's threads, so an fsync never blocks the event loop.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import aiosqlite

__all__ = ["DecisionEvidence", "GatewayStore", "IdempotencyRow", "read_decisions"]

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


class GatewayStore:
    """One aiosqlite connection to the gateway's state file. Use :meth:`open`/:meth:`close`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db: aiosqlite.Connection | None = None
        self._log: aiosqlite.Connection | None = None

    async def open(self) -> GatewayStore:
        """Open (creating it, mode 0600) the state file; a file others can read is fixed.

        The file holds results, facts and record salts: only the gateway's user may read it.
        SQLite gives its ``-wal`` and ``-shm`` files the database file's mode, so creating
        the database 0600 before SQLite touches it covers all three.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _private_file(self.path)
        # Autocommit (both connections): each write is one statement, its own transaction,
        # committed (and on the durable connection fsync'ed) by that statement, so it costs
        # one trip to aiosqlite's thread, not two.
        db = await aiosqlite.connect(self.path, isolation_level=None)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute("PRAGMA busy_timeout=10000")
        await db.executescript(SCHEMA)
        log = await aiosqlite.connect(self.path, isolation_level=None)
        await log.execute("PRAGMA synchronous=NORMAL")
        await log.execute("PRAGMA busy_timeout=10000")
        self._db, self._log = db, log
        return self

    async def close(self) -> None:
        for conn in (self._log, self._db):
            if conn is not None:
                await conn.close()
        self._db = self._log = None

    @property
    def db(self) -> aiosqlite.Connection:
        """The durable connection (``synchronous=FULL``)."""
        if self._db is None:
            raise RuntimeError("the gateway store is not open")
        return self._db

    @property
    def log(self) -> aiosqlite.Connection:
        """The decision-evidence connection (``synchronous=NORMAL``)."""
        if self._log is None:
            raise RuntimeError("the gateway store is not open")
        return self._log

    # Policies and decisions ---------------------------------------------------------------

    async def save_policy(self, commitment: str, when: str,
                          receipt: Mapping[str, object] | None) -> None:
        await self.db.execute(
            "INSERT INTO policies (commitment, first_used, receipt) VALUES (?, ?, ?) "
            "ON CONFLICT(commitment) DO UPDATE SET receipt = COALESCE(excluded.receipt, receipt)",
            (commitment, when, None if receipt is None else _dumps(receipt)))

    async def save_decision(self, evidence: DecisionEvidence) -> None:
        """Save one decision's evidence (committed when this returns: the connection is in
        autocommit mode)."""
        record = evidence.record
        await self.log.execute(
            "INSERT INTO decisions (time, tool, decision, record, facts, receipt) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (record["time"], record["tool"], record["decision"], _dumps(record),
             _dumps(evidence.facts),
             None if evidence.receipt is None else _dumps(evidence.receipt)))

    # Idempotency --------------------------------------------------------------------------

    async def lookup(self, key: str) -> IdempotencyRow | None:
        rows = list(await self.db.execute_fetchall(
            "SELECT key, tool, request_sha256, state, result FROM idempotency WHERE key = ?",
            (key,)))
        if not rows:
            return None
        row = rows[0]
        return IdempotencyRow(row[0], row[1], row[2], row[3],
                              None if row[4] is None else json.loads(row[4]))

    async def begin(self, key: str, tool: str, request_sha256: str, when: str) -> bool:
        """Claim ``key`` as ``pending`` (durable); False when it was claimed already."""
        cur = await self.db.execute(
            "INSERT OR IGNORE INTO idempotency (key, tool, request_sha256, state, created) "
            "VALUES (?, ?, ?, 'pending', ?)", (key, tool, request_sha256, when))
        return cur.rowcount == 1

    async def release(self, key: str) -> None:
        """Give up a ``pending`` claim whose call reached no outcome (it asked for input)."""
        await self.db.execute("DELETE FROM idempotency WHERE key = ? AND state = 'pending'",
                              (key,))

    async def finish(self, key: str, result: Mapping[str, object]) -> None:
        """Record the outcome sent for ``key`` (durable before the answer goes out)."""
        await self.db.execute("UPDATE idempotency SET state = 'done', result = ? WHERE key = ?",
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
