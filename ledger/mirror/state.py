"""The mirror's checkpoints, per origin: its pending checkpoints and its mirror checkpoint, in
one SQLite file (``mirror.db``).

What tlog-mirror asks a mirror to keep beside its copy of each log:

- the *pending checkpoint*: the largest log-signed checkpoint accepted by ``add-checkpoint``,
  which that endpoint treats exactly as a witness treats its latest cosigned checkpoint (the
  compare step is :func:`ledger.core.witness_protocol.decide`). The last
  :data:`PENDING_KEPT` pending checkpoints are kept, so that ``add-entries`` accepts any of
  them as ``upload_end`` (the spec's "last several"), with no ticket needed;
- the *mirror checkpoint*: the pending checkpoint the mirror last committed, as it is served
  (``GET /<origin hash>/checkpoint``): the checkpoint text, the log signatures it verified and
  the mirror's cosignatures.

Every change is one durable transaction on the file's own thread
(:mod:`ledger.cosigner.sqlite`), so the compare step and the write are atomic, and a commit is
on disk before anything is answered. The mirror checkpoint only moves forward:
:meth:`MirrorState.commit` compares and writes it atomically, and the cosignatures it returns
are sent only once that is durable. The entries themselves live in the log copy
(:mod:`ledger.mirror.copy`), which is committed before the mirror checkpoint that covers them
is even computed.

Sizes are stored as decimal text because tree sizes are uint64 and SQLite integers are signed.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ledger.core.errors import LedgerError
from ledger.core.note import Note, NoteSignature, format_note, parse_note
from ledger.core.witness_protocol import AcceptedTree, CheckpointDecision, decide
from ledger.cosigner.cosigner import Cosign, Submitted
from ledger.cosigner.sqlite import SqliteThread, another_cosigners_key, immediate

__all__ = ["PENDING_KEPT", "MirrorState", "MirrorStateError", "Mirrored",
           "PendingCheckpoint"]

#: Pending checkpoints kept per origin (the newest ones), each a valid ``upload_end``.
PENDING_KEPT = 16

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    origin TEXT NOT NULL,
    size TEXT NOT NULL,
    root BLOB NOT NULL,
    note BLOB NOT NULL,
    time REAL NOT NULL,
    PRIMARY KEY (origin, size));
CREATE TABLE IF NOT EXISTS mirrored (
    origin TEXT PRIMARY KEY,
    size TEXT NOT NULL,
    root BLOB NOT NULL,
    note BLOB NOT NULL,
    time REAL NOT NULL);
CREATE TABLE IF NOT EXISTS mirror_keys (vkey TEXT PRIMARY KEY);
"""


class MirrorStateError(LedgerError, RuntimeError):
    """The state cannot be used (another mirror's data, or an unreadable file)."""


@dataclass(frozen=True)
class PendingCheckpoint:
    """A pending checkpoint: its size and root, and the note with the log signatures that
    verified (and only those)."""

    size: int
    root: bytes
    note: bytes


@dataclass(frozen=True)
class Mirrored:
    """The mirror checkpoint as served: the log's signatures and the mirror's cosignatures."""

    size: int
    root: bytes
    note: bytes

    def cosignatures(self, names: Iterable[tuple[str, int]]) -> list[NoteSignature]:
        """The lines of the note made by the keys ``(name, key ID)`` (the mirror's own)."""
        keys = set(names)
        return [s for s in parse_note(self.note).signatures if (s.name, s.key_id) in keys]


class MirrorState:
    """A :class:`~ledger.cosigner.cosigner.CosignerState` whose checkpoint is the pending one.
    Open with :meth:`open`; every method is a coroutine run on the state's own thread."""

    def __init__(self, path: Path, db: SqliteThread) -> None:
        self.path = path
        self._db = db

    @classmethod
    async def open(cls, path: Path, mirror_vkeys: Sequence[str]) -> MirrorState:
        """Open (or create) the state of the mirror whose verifier keys are ``mirror_vkeys``
        (recorded, and checked afterwards: see :mod:`ledger.cosigner.sqlite`)."""
        if not mirror_vkeys:
            raise MirrorStateError("a mirror needs at least one key")
        vkeys = sorted(mirror_vkeys)
        try:
            db = await SqliteThread.open(path, lambda c: _setup(c, path, vkeys), "mirror-state")
        except sqlite3.DatabaseError as e:
            raise MirrorStateError(f"cannot open mirror database {path}: {e}") from e
        return cls(path, db)

    async def add_checkpoint(self, submitted: Submitted, cosign: Cosign
                             ) -> tuple[CheckpointDecision, list[NoteSignature]]:
        """``add-checkpoint``: the witness's compare step against the pending checkpoint, and
        the new pending checkpoint written in the same transaction when it is larger. Never
        signs: the mirror key signs only what the copy holds (:meth:`commit`)."""
        return await self._db.run(_add, submitted), []

    async def served(self, origin: str) -> bytes | None:
        """The mirror checkpoint of ``origin`` as served, or None before the first commit."""
        mirrored = await self.mirrored(origin)
        return None if mirrored is None else mirrored.note

    async def pending(self, origin: str) -> list[PendingCheckpoint]:
        """The kept pending checkpoints of ``origin``, largest (the current one) first."""
        return await self._db.run(_pending, origin)

    async def mirrored(self, origin: str) -> Mirrored | None:
        """The mirror checkpoint of ``origin``, or None before the first commit."""
        return await self._db.run(_mirrored, origin)

    async def commit(self, origin: str, pending: PendingCheckpoint, cosign: Cosign,
                     own: Iterable[tuple[str, int]]
                     ) -> tuple[Mirrored | None, list[NoteSignature]]:
        """Make ``pending`` the mirror checkpoint unless the mirror checkpoint is larger.

        The caller has made every entry up to ``pending.size`` durable in the log copy and
        checked its root. Returns the mirror checkpoint now stored and the cosignatures for
        ``pending`` (the fresh ones, or the stored ones, those of the keys ``own``, when it
        already was the mirror checkpoint); ``[]`` when the mirror checkpoint is larger (a
        409: it is never rewound).
        """
        return await self._db.run(_commit, origin, pending, cosign, frozenset(own))

    async def close(self) -> None:
        await self._db.close()


def _add(c: sqlite3.Connection, submitted: Submitted) -> CheckpointDecision:
    checkpoint, req, origin = submitted.checkpoint, submitted.request, submitted.checkpoint.origin
    with immediate(c):
        pending = _pending(c, origin)
        stored = None if not pending else AcceptedTree(pending[0].size, pending[0].root)
        decision = decide(stored, req.old, req.proof, checkpoint)
        if decision.store:
            c.execute("INSERT OR REPLACE INTO pending (origin, size, root, note, time) "
                      "VALUES (?, ?, ?, ?, ?)",
                      (origin, str(checkpoint.size), checkpoint.root_hash,
                       format_note(submitted.verified), time.time()))
            for old_row in pending[PENDING_KEPT - 1:]:
                c.execute("DELETE FROM pending WHERE origin = ? AND size = ?",
                          (origin, str(old_row.size)))
    return decision


def _commit(c: sqlite3.Connection, origin: str, pending: PendingCheckpoint, cosign: Cosign,
            own: frozenset[tuple[str, int]]) -> tuple[Mirrored | None, list[NoteSignature]]:
    with immediate(c):
        current = _mirrored(c, origin)
        if current is not None and current.size >= pending.size:
            if current.size == pending.size and current.root == pending.root:
                return current, current.cosignatures(own)
            return current, []
        opened = parse_note(pending.note)
        sigs = cosign(opened.text)
        served = format_note(Note(opened.text, (*opened.signatures, *sigs)))
        c.execute("INSERT OR REPLACE INTO mirrored (origin, size, root, note, time) "
                  "VALUES (?, ?, ?, ?, ?)",
                  (origin, str(pending.size), pending.root, served, time.time()))
    return Mirrored(pending.size, pending.root, served), sigs


def _pending(c: sqlite3.Connection, origin: str) -> list[PendingCheckpoint]:
    rows = c.execute("SELECT size, root, note FROM pending WHERE origin = ?",
                     (origin,)).fetchall()
    out = [PendingCheckpoint(int(r[0]), bytes(r[1]), bytes(r[2])) for r in rows]
    out.sort(key=lambda p: p.size, reverse=True)
    return out


def _mirrored(c: sqlite3.Connection, origin: str) -> Mirrored | None:
    row = c.execute("SELECT size, root, note FROM mirrored WHERE origin = ?",
                    (origin,)).fetchone()
    return None if row is None else Mirrored(int(row[0]), bytes(row[1]), bytes(row[2]))


def _setup(conn: sqlite3.Connection, path: Path, vkeys: list[str]) -> None:
    conn.executescript(_SCHEMA)
    with immediate(conn):
        other = another_cosigners_key(conn, "mirror_keys", vkeys)
        if other is not None:
            raise MirrorStateError(
                f"{path} holds the state of mirror {other}, not of {vkeys[0]}; use that "
                "mirror's key or another data directory")
