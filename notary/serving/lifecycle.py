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
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ledger.core.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.core.compact import TreeState, integrate
from ledger.core.note import Ed25519Signer, Ed25519Verifier, NoteError, merge_signatures, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.timestamps import rfc3339
from ledger.log.errors import LogIntegrityError
from ledger.log.facade import Head, Log
from ledger.log.reader import LogReader
from ledger.log.tree_state import load_state
from ledger.storage.base import CheckpointRecord, LogRecord, RollingTx, StoreError
from notary.core.entry import EntryError, decode_entry
from notary.core.errors import NotaryBaseError
from notary.core.ids import format_issued_at, parse_issued_at
from notary.core.logs import (
    COMPROMISED,
    key_generations,
    log_origin,
    log_seed,
    position,
    retired_by,
    shard_name,
)
from notary.core.periods import Span, age_cutoff, period_start
from notary.core.successor import REASONS, SuccessorRecord
from notary.store.base import NotaryStore

__all__ = ["FROZEN_CACHE_TILES", "FROZEN_OPEN", "LogBook", "PruneRefused", "Rolled",
           "RootKeyMismatch", "all_logs", "check_root", "expire", "key_status", "log_path",
           "log_signer", "log_vkeys", "own_signer", "prune", "roll", "roll_due"]


def log_signer(root: Ed25519Signer, record: LogRecord) -> Ed25519Signer:
    """The Ed25519 key of a log: ``log.key`` for log 0, derived from it for the others."""
    if record.n == 0:
        return root
    return Ed25519Signer(record.origin, log_seed(root.seed, record.origin))


def log_path(n: int) -> str:
    """The path prefix a log is served under besides ``/logs/<n>``: '' for log 0, whose
    receipts' ``entry_url`` predates the sequence of logs."""
    return f"/logs/{n}" if n else ""


def log_vkeys(signer: Ed25519Signer) -> tuple[str, str]:
    """A log's note verifier keys: Ed25519, then the ML-DSA-44 key derived from it."""
    return (signer.verifier_key_text(),
            SubtreeCosignatureSigner.derived_from(signer).verifier_key_text())


class RootKeyMismatch(NotaryBaseError, RuntimeError):
    """This process's ``log.key`` does not make the active log's keys: a compromised roll
    replaced the root elsewhere (docs/lifecycle.md), so it must not sign."""


def own_signer(root: Ed25519Signer, record: LogRecord) -> Ed25519Signer | None:
    """The key of log ``record`` if ``root`` is that log's root, i.e. it makes the keys the
    registry lists for it; None for a log of another root generation (retired, or newer)."""
    signer = log_signer(root, record)
    if record.vkeys and log_vkeys(signer) != tuple(record.vkeys):
        return None
    return signer


def check_root(root: Ed25519Signer, records: list[LogRecord], key_file: str) -> None:
    """Refuse to sign with a ``log.key`` that does not make the active log's keys, saying what
    to copy where (every frontend needs the new root after a compromised roll)."""
    active = records[-1]
    if own_signer(root, active) is not None:
        return
    gens = key_generations([r.reason for r in records])
    raise RootKeyMismatch(
        f"{key_file} does not make the keys of the active log {active.n} ({active.origin}), "
        f"which comes from root key generation {gens[-1]} (a compromised roll replaced "
        f"log.key): this process must not sign. Copy log.key from the data directory where "
        f"`notary log roll --reason compromised` ran to {key_file} (mode 0600): a running "
        "notary reads it at its next commit, a stopped one when it starts")


def key_status(records: list[LogRecord]) -> list[dict[str, object]]:
    """Each log's ``key_generation`` and ``retired`` (None, or the compromised roll that
    retired its keys: ``reason``, ``at``, ``by`` = that roll's frozen log), as ``/v1/ledger``'s
    ``logs`` and ``notary log list --json`` show them."""
    reasons = [r.reason for r in records]
    out: list[dict[str, object]] = []
    for g, by in zip(key_generations(reasons), retired_by(reasons), strict=True):
        end = None if by is None else records[by]
        retired = None if end is None or end.frozen_at is None else {
            "reason": COMPROMISED, "at": rfc3339(end.frozen_at), "by": end.origin}
        out.append({"key_generation": g, "retired": retired})
    return out


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


class _NotDue(Exception):
    """The active log started at or after the boundary: someone rolled already (rolls back)."""


async def roll(store: NotaryStore, root: Ed25519Signer, *, reason: str = "operator",
               clock: float | None = None, started_before: float | None = None,
               new_root: Ed25519Signer | None = None) -> Rolled:
    """Freeze the active log and start the next one, in one transaction (see the module).

    ``started_before``: roll only if the active log started before this time, decided under
    the lock (:func:`roll_due`); else :class:`_NotDue`, and nothing is written.

    A ``compromised`` roll needs ``new_root``: the next log's key is derived from it, not from
    ``root`` (which may be in other hands), and the frozen log's final checkpoint is stored
    dual-signed (Ed25519 and ML-DSA-44), since its keys never sign again.
    """
    if reason not in REASONS:
        raise ValueError(f"reason must be one of {REASONS}, not {reason!r}")
    if (reason == COMPROMISED) != (new_root is not None):
        raise ValueError("a new root key goes with a compromised roll, and only with one")
    if new_root is not None and new_root.seed == root.seed:
        raise ValueError("the new root key is the compromised one")
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
        if started_before is not None and active.started >= started_before:
            raise _NotDue
        check_root(root, rows, "log.key")
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
        nxt_signer = log_signer(new_root or root, nxt)
        nxt = replace(nxt, vkeys=log_vkeys(nxt_signer))
        record = SuccessorRecord(nxt.origin, nxt.vkeys, active.origin, format_issued_at(at),
                                 reason)
        done = integrate(state, [record.encode()])
        note = sign_checkpoint(Checkpoint(active.origin, done.state.size, done.state.root()),
                               signer)
        if reason == COMPROMISED:
            pq = SubtreeCosignatureSigner.derived_from(signer)
            note = merge_signatures(note, [pq.cosign(parse_note(note).text, int(now))])
        await tx.write(done.tiles, CheckpointRecord(done.state.size, now, note))
        frozen = replace(active, state="frozen", frozen_at=now, final_size=done.state.size,
                         reason=reason)
        await tx.put_log(frozen)
        await tx.put_log(nxt)
        await tx.switch_log(nxt.n, create=True)
        empty = sign_checkpoint(Checkpoint(nxt.origin, 0, TreeState().root()), nxt_signer)
        await tx.write({}, CheckpointRecord(0, now, empty))
    return Rolled(frozen, nxt)


async def roll_due(store: NotaryStore, root: Ed25519Signer, period: Span, *,
                   clock: float | None = None) -> Rolled | None:
    """A period roll (reason ``scheduled``) if the active log started before the latest
    boundary of ``period`` (:mod:`notary.core.periods`), else None.

    The check is made again under the log's write lock, in the roll's own transaction: of
    several processes crossing one boundary (``--workers``, PostgreSQL frontends), the first
    rolls and the others find a log started at or after the boundary, so each boundary rolls
    once; and a notary stopped across several boundaries rolls once, at start.
    """
    now = time.time() if clock is None else clock
    boundary = period_start(period, datetime.fromtimestamp(now, UTC)).timestamp()
    try:
        return await roll(store, root, reason="scheduled", clock=now, started_before=boundary)
    except _NotDue:
        return None


class PruneRefused(NotaryBaseError, ValueError):
    """A prune the registry does not allow: no such log, the active one, past its size."""


async def prune(store: NotaryStore, origin: str, min_index: int) -> LogRecord:
    """Set the minimum index of the frozen log ``origin`` (0 undoes it), in one transaction.

    tlog-tiles "Pruning": the log then denies the tiles and entries wholly below it, and keeps
    them stored. A frozen log only: the active one still grows, and its tiles feed every
    client's proofs. Nothing else changes, so receipts keep their proofs (docs/lifecycle.md).
    """
    if min_index < 0:
        raise PruneRefused(f"the minimum index is at least 0, not {min_index}")
    async with store.transaction() as tx:
        record = next((r for r in await tx.logs() if r.origin == origin), None)
        if record is None or record.state != "frozen" or record.final_size is None:
            what = "not a frozen log of this notary" if record is None else "the active log"
            raise PruneRefused(f"{origin!r} is {what}: only a frozen log can be pruned "
                               "(`notary log list` shows them)")
        if min_index > record.final_size:
            raise PruneRefused(f"log {record.n} ({origin}) has {record.final_size} entries: "
                               f"the minimum index is at most that, not {min_index}")
        record = replace(record, min_index=min_index)
        await tx.put_log(record)
    return record


async def expire(store: NotaryStore, age: Span, *, clock: float | None = None
                 ) -> list[LogRecord]:
    """Retention: prune whole (minimum index = final size, through :func:`prune`) every frozen
    log frozen longer than ``age`` ago that is not pruned whole yet; the logs it pruned."""
    now = time.time() if clock is None else clock
    cutoff = age_cutoff(age, datetime.fromtimestamp(now, UTC)).timestamp()
    pruned = []
    for r in await store.logs():
        if (r.state == "frozen" and r.frozen_at is not None and r.final_size is not None
                and r.frozen_at < cutoff and r.min_index < r.final_size):
            pruned.append(await prune(store, r.origin, r.final_size))
    return pruned


REGISTRY_TTL = 2.0
"""How long the running notary trusts its copy of the registry (a roll elsewhere shows within)."""

FROZEN_OPEN = 8
"""How many frozen logs a process keeps open (read most recently); another is opened again
when read, which costs nothing but its cold caches: a notary of 100 frozen logs must not hold
100 readers' caches."""

FROZEN_CACHE_TILES = 256
"""Tiles cached per open frozen log (and 16 times as many tile tops): ~4 MiB and ~4 MiB,
against the active log's ~64 MiB and ~64 MiB. A frozen log is read for old receipts' proofs,
seldom; its tiles, once full, never change, so a miss is one store read."""


class LogBook:
    """The running notary's logs: its copy of the registry, each log's key, and a read-only
    :class:`Log` of each frozen log read lately (its head: the final checkpoint, which never
    changes; at most :data:`FROZEN_OPEN`, each with a small cache)."""

    def __init__(self, store: NotaryStore, root: Ed25519Signer,
                 reload: Callable[[LogRecord], Ed25519Signer | None] | None = None,
                 key_file: str = "this data directory's log.key") -> None:
        self.store = store
        self.root = root
        self.key_file = key_file
        #: Reads the root key files again for a log this root does not make (a compromised
        #: roll made on this machine replaced log.key): the new root, or None.
        self.reload = reload
        self.records: list[LogRecord] = all_logs(root, [])
        self._read = float("-inf")
        self._frozen: OrderedDict[int, Log] = OrderedDict()  # the FROZEN_OPEN last read

    async def refresh(self, *, force: bool = False) -> list[LogRecord]:
        if force or time.monotonic() - self._read >= REGISTRY_TTL:
            self.records = all_logs(self.root, await self.store.logs())
            self._read = time.monotonic()
        return self.records

    def record(self, n: int) -> LogRecord | None:
        return next((r for r in self.records if r.n == n), None)

    def number_of(self, origin: str) -> int | None:
        return next((r.n for r in self.records if r.origin == origin), None)

    def position(self, origin: str, index: int) -> int:
        """A receipt's position (its log by origin; log 0 when unknown: never rolled)."""
        return position(self.number_of(origin) or 0, index)

    async def signer(self, n: int) -> Ed25519Signer:
        """The key of log ``n``, the registry read again when it does not know ``n`` yet (the
        sequencer's :data:`~ledger.log.sequencer.RollHook`)."""
        record = self.record(n)
        if record is None:
            await self.refresh(force=True)
            record = self.record(n)
        if record is None:
            raise StoreError(f"log {n} is active but not in the registry")
        if own_signer(self.root, record) is None and self.reload is not None:
            self.root = self.reload(record) or self.root
        check_root(self.root, [r for r in self.records if r.n <= n], self.key_file)
        return log_signer(self.root, record)

    def own_signer(self, record: LogRecord) -> Ed25519Signer | None:
        """``record``'s key, when this process's root makes it (None: a retired log's)."""
        return own_signer(self.root, record)

    async def rolled(self, writing: int) -> bool:
        """Whether another log than ``writing`` is now active (the sequencer's RollPoll)."""
        records = await self.refresh(force=True)
        return records[-1].n != writing

    async def frozen(self, origin: str) -> Log | None:
        """A frozen log's read-only :class:`Log`, by its origin; None for an unknown origin or
        one not frozen."""
        n = self.number_of(origin)
        if n is None:
            await self.refresh(force=True)
            n = self.number_of(origin)
        record = None if n is None else self.record(n)
        if record is None or record.state != "frozen":
            return None
        log = self._frozen.get(record.n)
        if log is None:
            view = self.store.for_log(record.n)
            # its key as registered: a log of a retired root is not this root's to derive
            reader = LogReader(view, cache_tiles=FROZEN_CACHE_TILES,
                               cache_tops=16 * FROZEN_CACHE_TILES)
            log = Log(view, Ed25519Verifier.from_vkey(record.vkeys[0]), reader, None)
            self._frozen[record.n] = log
            while len(self._frozen) > FROZEN_OPEN:  # nothing to close: views share the store
                self._frozen.popitem(last=False)
        self._frozen.move_to_end(record.n)
        return log

    async def frozen_proof(self, origin: str, index: int,
                           note: Callable[[Log, Head], bytes] | None
                           ) -> tuple[list[bytes], bytes] | None:
        """The inclusion proof of entry ``index`` of the frozen log ``origin`` in its final
        checkpoint, and that checkpoint (``note`` may dual-sign it); None when ``origin`` is
        no frozen log of this store."""
        log = await self.frozen(origin)
        if log is None:
            return None
        head = await log.head()
        if head is None or head.size <= index:
            raise StoreError(f"the frozen log {origin} does not hold entry {index}")
        proof = await log.reader.inclusion_proof(index, head.size)
        return list(proof), head.note if note is None else note(log, head)
