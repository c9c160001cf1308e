"""The witness's memory: per origin, the latest checkpoint it cosigned, in one SQLite file.

Beside the checkpoint as submitted, each row keeps it as the witness serves it to monitors
(``GET /<origin hash>/checkpoint``): the log signatures it verified and its own cosignatures,
written in the same transaction that accepts the checkpoint, so the monitoring view can never
lag behind, or run ahead of, what the witness has durably cosigned. It is written once per
size: a resubmission at the witnessed size never rewrites it.

A witness must never cosign two inconsistent checkpoints of one log, including across crashes
and restarts: the compare step and the write are one durable transaction on the file's own
thread (:mod:`ledger.cosigner.sqlite`), and the server signs and answers only after the commit,
so a SIGKILL (or a power cut) at any moment can lose an answer, never roll the stored size back.

Sizes are stored as decimal text because tree sizes are uint64 and SQLite integers are signed.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ledger.core.errors import LedgerError
from ledger.core.note import Note, NoteSignature, format_note
from ledger.core.witness_protocol import AcceptedTree, CheckpointDecision, Outcome, decide
from ledger.cosigner.cosigner import Cosign, Submitted
from ledger.cosigner.sqlite import SqliteThread, another_cosigners_key, immediate

__all__ = ["EVIDENCE_KEPT", "Evidence", "WitnessStore", "WitnessStoreError"]

#: Refused log-signed checkpoints kept as evidence (the oldest go first); bounded so that a
#: misbehaving log cannot fill the witness's disk.
EVIDENCE_KEPT = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    origin TEXT PRIMARY KEY,
    size TEXT NOT NULL,
    root BLOB NOT NULL,
    note BLOB NOT NULL,
    updated REAL NOT NULL,
    cosigned BLOB);
CREATE TABLE IF NOT EXISTS evidence (
    id INTEGER PRIMARY KEY,
    origin TEXT NOT NULL,
    time REAL NOT NULL,
    status INTEGER NOT NULL,
    reason TEXT NOT NULL,
    request BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS witness_keys (vkey TEXT PRIMARY KEY);
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
    """A :class:`~ledger.cosigner.cosigner.CosignerState`. Open with :meth:`open`; every
    method is a coroutine run on the store's own thread."""

    def __init__(self, path: Path, db: SqliteThread) -> None:
        self.path = path
        self._db = db

    @classmethod
    async def open(cls, path: Path, witness_vkeys: str | Iterable[str]) -> WitnessStore:
        """Open (or create) the store of the witness whose verifier keys are ``witness_vkeys``
        (recorded, and checked afterwards: see :mod:`ledger.cosigner.sqlite`)."""
        vkeys = [witness_vkeys] if isinstance(witness_vkeys, str) else sorted(witness_vkeys)
        if not vkeys:
            raise WitnessStoreError("a witness store needs at least one witness key")
        try:
            db = await SqliteThread.open(path, lambda c: _setup(c, path, vkeys),
                                         "witness-store")
        except sqlite3.DatabaseError as e:
            raise WitnessStoreError(f"cannot open witness database {path}: {e}") from e
        return cls(path, db)

    async def add_checkpoint(self, submitted: Submitted, cosign: Cosign
                             ) -> tuple[CheckpointDecision, list[NoteSignature]]:
        """Compare the request with the stored state and persist it if it is accepted, atomically.

        When the checkpoint is to be cosigned, ``cosign(text)`` makes the witness's lines inside
        the transaction, and the monitoring view (the verified note with those lines) is
        written with it when the size is new. A resubmission at the stored size is cosigned but
        leaves the view alone: its text may differ in what the log's signatures do not cover
        (extension lines, under an ML-DSA-44 log key) and it may carry fewer of them, and
        monitors must get what the witness verified when it first cosigned the size.
        """
        return await self._db.run(_add, submitted, cosign)

    async def served(self, origin: str) -> bytes | None:
        """The newest checkpoint cosigned for ``origin`` as monitors get it, or None."""
        return await self._db.run(_served, origin)

    async def latest(self, origin: str) -> tuple[AcceptedTree, bytes] | None:
        """The stored size and root for ``origin``, with the note as it was submitted."""
        return await self._db.run(_latest, origin)

    async def evidence(self, limit: int = 100) -> list[Evidence]:
        """The most recent refused log-signed checkpoints, newest first."""
        return await self._db.run(_evidence, limit)

    async def close(self) -> None:
        await self._db.close()


def _add(c: sqlite3.Connection, submitted: Submitted, cosign: Cosign
         ) -> tuple[CheckpointDecision, list[NoteSignature]]:
    checkpoint, req, origin = submitted.checkpoint, submitted.request, submitted.checkpoint.origin
    with immediate(c):
        row = c.execute("SELECT size, root, cosigned IS NULL FROM checkpoints "
                        "WHERE origin = ?", (origin,)).fetchone()
        stored = None if row is None else AcceptedTree(int(row[0]), bytes(row[1]))
        decision = decide(stored, req.old, req.proof, checkpoint)
        now = time.time()
        sigs: list[NoteSignature] = []
        served: bytes | None = None
        if decision.outcome is Outcome.COSIGN:
            sigs = cosign(submitted.verified.text)
            served = format_note(Note(submitted.verified.text,
                                      (*submitted.verified.signatures, *sigs)))
        if decision.store:
            c.execute(
                "INSERT INTO checkpoints (origin, size, root, note, updated, cosigned) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (origin) DO UPDATE SET "
                "size = excluded.size, root = excluded.root, note = excluded.note, "
                "updated = excluded.updated, cosigned = excluded.cosigned",
                (origin, str(checkpoint.size), checkpoint.root_hash, req.checkpoint, now,
                 served))
        elif served is not None and row is not None and row[2]:
            # A size cosigned before the store kept the monitoring view: this is its first
            # view. Once there, a resubmission at that size never replaces it.
            c.execute("UPDATE checkpoints SET cosigned = ?, updated = ? WHERE origin = ?",
                      (served, now, origin))
        if decision.evidence:
            c.execute("INSERT INTO evidence (origin, time, status, reason, request) "
                      "VALUES (?, ?, ?, ?, ?)",
                      (origin, now, decision.outcome.value, decision.reason, submitted.body))
            c.execute("DELETE FROM evidence WHERE id <= "
                      "(SELECT max(id) FROM evidence) - ?", (EVIDENCE_KEPT,))
    return decision, sigs


def _served(c: sqlite3.Connection, origin: str) -> bytes | None:
    row = c.execute("SELECT cosigned FROM checkpoints WHERE origin = ?", (origin,)).fetchone()
    return None if row is None or row[0] is None else bytes(row[0])


def _latest(c: sqlite3.Connection, origin: str) -> tuple[AcceptedTree, bytes] | None:
    row = c.execute("SELECT size, root, note FROM checkpoints WHERE origin = ?",
                    (origin,)).fetchone()
    if row is None:
        return None
    return AcceptedTree(int(row[0]), bytes(row[1])), bytes(row[2])


def _evidence(c: sqlite3.Connection, limit: int) -> list[Evidence]:
    rows = c.execute("SELECT origin, time, status, reason, request FROM evidence "
                     "ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
    return [Evidence(r[0], r[1], r[2], r[3], bytes(r[4])) for r in rows]


def _setup(conn: sqlite3.Connection, path: Path, vkeys: list[str]) -> None:
    conn.executescript(_SCHEMA)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(checkpoints)")}
    if "cosigned" not in columns:  # a store written before the monitoring view
        conn.execute("ALTER TABLE checkpoints ADD COLUMN cosigned BLOB")
    with immediate(conn):
        # The first key, in the form stores before several keys had (and still read).
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('witness_vkey', ?)",
                     (vkeys[0],))
        legacy = [r[0] for r in conn.execute(
            "SELECT value FROM meta WHERE key = 'witness_vkey'")]
        other = another_cosigners_key(conn, "witness_keys", vkeys, legacy)
        if other is not None:
            raise WitnessStoreError(
                f"{path} holds the state of witness {other}, not of {vkeys[0]}; use that "
                "witness's key or another data directory")
