"""The witness's memory: per origin, the latest checkpoint it cosigned, in one SQLite file.

Beside the checkpoint as submitted, each row keeps it as the witness serves it to monitors
(``GET /<origin hash>/checkpoint``): the log signatures it verified and its own cosignatures,
written in the same transaction that accepts the checkpoint, so the monitoring view can never
lag behind, or run ahead of, what the witness has durably cosigned. It is written once per
size: a resubmission at the witnessed size never rewrites it.

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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ledger.core.checkpoint import Checkpoint
from ledger.core.errors import LedgerError
from ledger.core.note import Note, NoteSignature, format_note
from ledger.core.witness_protocol import Decision, Outcome, StoredCheckpoint, decide

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

#: What the cosigning callback of :meth:`WitnessStore.add` gets and returns: the checkpoint's
#: note text in, the witness's cosignature lines out.
Cosign = Callable[[str], list[NoteSignature]]


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
    async def open(cls, path: Path, witness_vkeys: str | Iterable[str]) -> WitnessStore:
        """Open (or create) the store of the witness whose verifier keys are ``witness_vkeys``.

        The keys are recorded and checked afterwards: a data directory describes what one
        witness has cosigned, and using it with none of that witness's keys would be a mix-up.
        A witness may gain keys (say, an ML-DSA-44 key beside its Ed25519 one): any overlap
        with the recorded keys opens the store, and the new keys are recorded.
        """
        vkeys = [witness_vkeys] if isinstance(witness_vkeys, str) else sorted(witness_vkeys)
        if not vkeys:
            raise WitnessStoreError("a witness store needs at least one witness key")
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="witness-store")
        loop = asyncio.get_running_loop()
        try:
            conn = await loop.run_in_executor(executor, _connect, path, vkeys)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(path, executor, conn)

    async def _run(self, fn: Callable[..., _T], *args: object) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def add(self, origin: str, old: int, proof: Sequence[bytes], checkpoint: Checkpoint,
                  note: bytes, request: bytes, *, text: str = "",
                  log_signatures: Sequence[NoteSignature] = (),
                  cosign: Cosign | None = None) -> tuple[Decision, list[NoteSignature]]:
        """Compare the request with the stored state and persist it if it is accepted, atomically.

        When the checkpoint is to be cosigned, ``cosign(text)`` makes the witness's lines inside
        the transaction, and the monitoring view (``text`` with ``log_signatures`` and those
        lines) is written with it when the size is new. A resubmission at the stored size is
        cosigned but leaves the view alone: its text may differ in what the log's signatures do
        not cover (extension lines, under an ML-DSA-44 log key) and it may carry fewer of
        them, and monitors must get what the witness verified when it first cosigned the size.
        Returns the decision and the lines once the transaction is durable: only then may the
        caller send them.
        """
        return await self._run(self._add, origin, old, tuple(proof), checkpoint, note, request,
                               text, tuple(log_signatures), cosign)

    def _add(self, origin: str, old: int, proof: tuple[bytes, ...], checkpoint: Checkpoint,
             note: bytes, request: bytes, text: str, log_signatures: tuple[NoteSignature, ...],
             cosign: Cosign | None) -> tuple[Decision, list[NoteSignature]]:
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            row = c.execute("SELECT size, root, cosigned IS NULL FROM checkpoints "
                            "WHERE origin = ?", (origin,)).fetchone()
            stored = None if row is None else StoredCheckpoint(int(row[0]), bytes(row[1]))
            decision = decide(stored, old, proof, checkpoint)
            now = time.time()
            sigs: list[NoteSignature] = []
            served: bytes | None = None
            if decision.outcome is Outcome.COSIGN and cosign is not None:
                sigs = cosign(text)
                served = format_note(Note(text, (*log_signatures, *sigs)))
            if decision.store:
                c.execute(
                    "INSERT INTO checkpoints (origin, size, root, note, updated, cosigned) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (origin) DO UPDATE SET "
                    "size = excluded.size, root = excluded.root, note = excluded.note, "
                    "updated = excluded.updated, cosigned = excluded.cosigned",
                    (origin, str(checkpoint.size), checkpoint.root_hash, note, now, served))
            elif served is not None and row is not None and row[2]:
                # A size cosigned before the store kept the monitoring view: this is its first
                # view. Once there, a resubmission at that size never replaces it.
                c.execute("UPDATE checkpoints SET cosigned = ?, updated = ? WHERE origin = ?",
                          (served, now, origin))
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
        return decision, sigs

    async def cosigned(self, origin: str) -> bytes | None:
        """The newest checkpoint cosigned for ``origin`` as monitors get it, or None."""
        return await self._run(self._cosigned, origin)

    def _cosigned(self, origin: str) -> bytes | None:
        row = self._conn.execute("SELECT cosigned FROM checkpoints WHERE origin = ?",
                                 (origin,)).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

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


def _connect(path: Path, vkeys: list[str]) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.executescript(_SCHEMA)
        columns = {r[1] for r in conn.execute("PRAGMA table_info(checkpoints)")}
        if "cosigned" not in columns:  # a store written before the monitoring view
            conn.execute("ALTER TABLE checkpoints ADD COLUMN cosigned BLOB")
        conn.execute("BEGIN IMMEDIATE")
        # The first key, in the form stores before several keys had (and still read).
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('witness_vkey', ?)",
                     (vkeys[0],))
        known = {r[0] for r in conn.execute("SELECT vkey FROM witness_keys")}
        known |= {r[0] for r in conn.execute(
            "SELECT value FROM meta WHERE key = 'witness_vkey'")}
        if known.isdisjoint(vkeys):
            conn.execute("ROLLBACK")
            conn.close()
            raise WitnessStoreError(
                f"{path} holds the state of witness {sorted(known)[0]}, not of "
                f"{vkeys[0]}; use that witness's key or another data directory")
        conn.executemany("INSERT OR IGNORE INTO witness_keys (vkey) VALUES (?)",
                         [(k,) for k in known | set(vkeys)])
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        raise WitnessStoreError(f"cannot open witness database {path}: {e}") from e
    return conn
