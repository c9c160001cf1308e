"""A notary's sequence of logs, as its processes use it: the registry as a list of every log
(log 0 included, which has no registry row until the first roll), each log's keys, and the roll.

The roll (``notary log roll``, docs/lifecycle.md) is ONE write transaction holding the log's
lock (``ledger.storage.base``), so a kill at any point leaves either no trace of it or all of
it: the active log's last entry (the successor record, :mod:`notary.core.successor`) and its
final checkpoint, signed as every commit's; the registry marking it frozen and the next log
active; the next log's tables and its first checkpoint (the empty tree, signed with its key).
A running writer learns of it under the same lock at its next commit (``active_log``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ledger.core.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.core.compact import TreeState, integrate
from ledger.core.note import Ed25519Signer, NoteError
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.log.sequencer import LogIntegrityError, load_state
from ledger.storage.base import CheckpointRecord, LogRecord, RollingTx, StoreError
from notary.core.entry import EntryError, decode_entry
from notary.core.ids import format_issued_at, parse_issued_at
from notary.core.logs import log_origin, log_seed, shard_name
from notary.core.successor import REASONS, SuccessorRecord
from notary.store.base import NotaryStore

__all__ = ["Rolled", "all_logs", "log_signer", "log_vkeys", "roll"]


def log_signer(root: Ed25519Signer, record: LogRecord) -> Ed25519Signer:
    """The Ed25519 key of a log: ``log.key`` for log 0, derived from it for the others."""
    if record.n == 0:
        return root
    return Ed25519Signer(record.origin, log_seed(root.seed, record.origin))


def log_vkeys(signer: Ed25519Signer) -> tuple[str, str]:
    """A log's note verifier keys: Ed25519, then the ML-DSA-44 key derived from it."""
    return (signer.verifier_key_text(),
            SubtreeCosignatureSigner.derived_from(signer).verifier_key_text())


def _log0(root: Ed25519Signer, started: float) -> LogRecord:
    return LogRecord(0, root.name, "", "active", started, log_vkeys(root))


def all_logs(root: Ed25519Signer, rows: list[LogRecord]) -> list[LogRecord]:
    """Every log, oldest first: the registry, or log 0 alone for a store that never rolled
    (its start then unknown here: 0)."""
    return rows or [_log0(root, 0.0)]


@dataclass(frozen=True)
class Rolled:
    frozen: LogRecord
    active: LogRecord


async def _log0_started(tx: RollingTx, latest: CheckpointRecord) -> float:
    """When log 0 started: its first entry's ``issued_at`` (else its checkpoint's time)."""
    if latest.size > 0:
        try:
            first = (await tx.read_entries(0, 1))[0]
            return parse_issued_at(decode_entry(first).issued_at).timestamp()
        except (IndexError, ValueError, EntryError):
            pass
    return latest.time


async def roll(store: NotaryStore, root: Ed25519Signer, *, reason: str = "operator",
               clock: float | None = None) -> Rolled:
    """Freeze the active log and start the next one, in one transaction (see the module)."""
    if reason not in REASONS:
        raise ValueError(f"reason must be one of {REASONS}, not {reason!r}")
    now = time.time() if clock is None else clock
    async with store.transaction() as tx:
        rows = await tx.logs()
        if tx.log_number != tx.active_log:
            await tx.switch_log(tx.active_log)
        latest = await tx.latest()
        if latest is None:
            raise StoreError("the active log has no checkpoint yet: start the notary once")
        if not rows:
            rows = [_log0(root, await _log0_started(tx, latest))]
        active = rows[-1]
        if active.state != "active" or active.n != tx.active_log:
            raise StoreError(f"the registry's newest log ({active.n}) is not the active one")
        signer = log_signer(root, active)
        try:
            cp, _ = open_checkpoint(latest.note, signer.verifier())
        except NoteError as e:
            raise LogIntegrityError(f"log {active.n}'s checkpoint does not verify: {e}") from e
        state = await load_state(tx.read_tiles, latest.size)
        if state.root() != cp.root_hash:
            raise LogIntegrityError(f"log {active.n}'s tiles do not match its checkpoint")
        at = datetime.fromtimestamp(now, UTC)
        shard = shard_name(at, {r.shard for r in rows})
        base = rows[0].origin
        nxt = LogRecord(active.n + 1, log_origin(base, shard), shard, "active", now, ())
        nxt_signer = log_signer(root, nxt)
        nxt = replace(nxt, vkeys=log_vkeys(nxt_signer))
        record = SuccessorRecord(nxt.origin, nxt.vkeys, active.origin, format_issued_at(at),
                                 reason)
        done = integrate(state, [record.encode()])
        note = sign_checkpoint(Checkpoint(active.origin, done.state.size, done.state.root()),
                               signer)
        await tx.write(done.tiles, CheckpointRecord(done.state.size, now, note))
        frozen = replace(active, state="frozen", frozen_at=now, final_size=done.state.size,
                         reason=reason)
        await tx.put_log(frozen)
        await tx.put_log(nxt)
        await tx.switch_log(nxt.n, create=True)
        empty = sign_checkpoint(Checkpoint(nxt.origin, 0, TreeState().root()), nxt_signer)
        await tx.write({}, CheckpointRecord(0, now, empty))
    return Rolled(frozen, nxt)
