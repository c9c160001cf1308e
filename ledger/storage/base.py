"""The log's storage contract: tiles and entry bundles by (level, index), the signed checkpoint
and its history, behind one atomic write transaction.

Theory of operation
-------------------
A backend needs only keyed blobs and one write transaction that is also the log's single-writer
lock. The sequencer commits a batch like this (docs/design.md, "One log, many processes"):

1. ``async with store.transaction() as tx`` takes the lock. SQLite: ``BEGIN IMMEDIATE``;
   PostgreSQL: ``BEGIN`` then ``SELECT … FROM log_state … FOR UPDATE`` on the log's one state
   row. Whoever holds it is the only writer until the transaction ends, in any process.
2. ``await tx.latest()`` re-reads the stored checkpoint *under the lock*. When another process
   moved it, the sequencer catches up from what that process wrote (``tx.read_entries``,
   the new entries, when they are few; else ``tx.read_tiles``, the tiles) before integrating
   anything of its own, so two processes never sign inconsistent trees.
3. Backends that add tables to the log (the notary: receipts, usage) read and decide inside the
   same transaction (duplicates, quota) and add their rows to it; see ``notary/store/base.py``.
4. ``await tx.write(tiles, checkpoint)`` queues the new tiles, bundles and the signed checkpoint;
   leaving the ``async with`` block commits them together (durably: SQLite ``synchronous=FULL``,
   PostgreSQL a synchronous commit) or, on any exception, rolls everything back. A checkpoint
   is thus never visible without the tiles it commits to, and nothing is answered before the
   commit returns.

Reads outside a transaction (``read_tiles``, ``latest``, ``history``) see committed data only.
Full tiles never change once written; partial tiles and bundles grow (a backend may store
them whole each time, or append what each commit adds, as SQLite does).
The checkpoint history (one checkpoint a minute at least) is written by the batch that signs it;
the witnessing job keeps its :class:`WitnessState` in the store too, so that every process of
one log resumes from the same state, and so are the frozen logs' cosigned final checkpoints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import NoReturn, Protocol

from ledger.core.errors import LedgerError

TileKey = tuple[int, int]  # (tile level, or -1 for entry bundles; tile index)


class StoreError(LedgerError, RuntimeError):
    """The store cannot be used as asked (missing, corrupt, or of another format)."""


POSTGRES_EXTRA_MISSING = (
    "a postgresql:// database needs asyncpg, which comes with the `postgres` extra: "
    "pip install 'mcp-notary[postgres]' (from a clone: NOTARY_EXTRAS=postgres ./scripts/serve)")
"""What to do when asyncpg is not installed (PostgreSQL support is optional)."""


class StorageFullError(StoreError):
    """A write failed because the disk (or the database's size limit) is full.

    Nothing of the failed transaction was written; it is safe to retry once space is freed.
    Backends raise this rather than their driver's error so that servers can answer 503 and
    report themselves unhealthy instead of failing every request with a 500.
    """


class StoreUnavailableError(StoreError):
    """The store cannot be reached right now (connection lost, failover under way).

    Nothing was written that was acknowledged; the caller may retry later (HTTP: 503).
    """


class WriterBusyError(StoreError):
    """Another writer holds the log's write lock for longer than we were willing to wait."""


@dataclass(frozen=True)
class CheckpointRecord:
    size: int
    time: float  # UNIX seconds when it was committed
    note: bytes  # the signed checkpoint note


@dataclass(frozen=True)
class WitnessState:
    """What the witnessing job keeps between runs (``ledger.jobs.witnessing``): each witness's last
    known tree size, by its cosignature verifier key, and the newest witnessed checkpoint it
    published (so a restart serves it at once, and never an older one)."""

    sizes: Mapping[str, int]
    published: bytes | None = None


LOG_STATES = ("active", "frozen")


def log_suffix(n: int) -> str:
    """What log ``n``'s table names end with: nothing for log 0 (today's tables), ``_n``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"a log number is an integer >= 0, not {n!r}")
    return "" if n == 0 else f"_{n}"


@dataclass(frozen=True)
class LogRecord:
    """One log of the store's sequence of logs (the ``logs`` registry, DESIGN-33).

    A store that never rolled has no rows: it is one active log 0. Exactly one row is
    ``active`` once there are rows; the others are ``frozen`` at ``final_size``.
    """

    n: int
    origin: str
    shard: str
    state: str
    started: float
    vkeys: tuple[str, ...]
    frozen_at: float | None = None
    final_size: int | None = None
    min_index: int = 0
    reason: str | None = None

    def __post_init__(self) -> None:
        log_suffix(self.n)
        if self.state not in LOG_STATES:
            raise ValueError(f"a log's state is one of {LOG_STATES}, not {self.state!r}")

    def row(self) -> tuple[object, ...]:
        """The registry row, in the column order of :meth:`from_row`."""
        return (self.n, self.origin, self.shard, self.state, self.started, self.frozen_at,
                self.final_size, self.min_index, json.dumps(list(self.vkeys)), self.reason)

    @classmethod
    def from_row(cls, row: Sequence[object]) -> LogRecord:
        n, origin, shard, state, started, frozen_at, final_size, min_index, vkeys, reason = row
        return cls(int(str(n)), str(origin), str(shard), str(state), float(str(started)),
                   tuple(str(k) for k in json.loads(str(vkeys))),
                   None if frozen_at is None else float(str(frozen_at)),
                   None if final_size is None else int(str(final_size)),
                   int(str(min_index)), None if reason is None else str(reason))


class WriteTx(Protocol):
    """One open write transaction; it holds the log's single-writer lock until it ends."""

    async def latest(self) -> CheckpointRecord | None:
        """The stored checkpoint as of the lock (or as written earlier in this transaction)."""
        ...

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]: ...

    async def read_entries(self, start: int, end: int) -> list[bytes]:
        """The stored entries at positions [start, end), from their bundles: what another
        process appended since this one's state (``start``). Fewer when some are not stored
        (the caller checks the count); ValueError for a malformed bundle. A backend that
        stores a growing bundle by parts reads only the parts from ``start`` on."""
        ...

    async def write(
        self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord
    ) -> None: ...


class RollingTx(WriteTx, Protocol):
    """A write transaction of a store that holds a sequence of logs (every backend here).

    It starts on the store's current log (:attr:`log_number`); :attr:`active_log` is the
    registry's active log as of the lock, so a writer learns of a roll by another process at
    no extra cost. :meth:`switch_log` re-targets the rest of the transaction (reads, writes,
    :meth:`latest`) to another log, creating its tables when ``create``; once it commits,
    the store itself follows (:meth:`RollingStore.use_log`).
    """

    log_number: int
    active_log: int

    async def logs(self) -> list[LogRecord]:
        """The registry as of the lock (or as written earlier in this transaction)."""
        ...

    async def put_log(self, record: LogRecord) -> None:
        """Insert or replace registry row ``record.n`` (committed with the transaction)."""
        ...

    async def switch_log(self, n: int, *, create: bool = False) -> None: ...


class TxHooks:
    """The extension API of every backend's write transaction: what a store that adds tables
    to the log (the notary's, ``notary/store/``) overrides in its subclass of the backend's
    transaction (``SqliteWriteTx``, ``PostgresWriteTx``, ``MemoryWriteTx``), under the same
    names everywhere.

    The backend calls the hooks; a subclass calls ``super()`` first. What a subclass *uses*
    (not overrides) is the backend's own and documented on its transaction class: SQLite
    buffers rows with ``queue`` and reads under the lock with ``read_locked`` and
    ``read_locked_now``; PostgreSQL adds rows to its one commit statement through the
    :meth:`more_writes` hook and reads on ``handle``; memory keeps rows on the transaction.
    """

    def committed(self) -> None:
        """Called once the transaction has committed, on the caller's thread, before the
        ``async with`` block returns: caches may now trust what it wrote (never called for a
        transaction that rolled back). Memory applies the transaction's writes here."""

    def more_writes(self, first: int) -> tuple[list[str], list[object]]:
        """Rows to commit with the log's own in one statement, as data-modifying CTEs
        (``name AS (…)``) with their arguments numbered from ``$first``: PostgreSQL only,
        where the whole commit is one round trip before ``COMMIT``. None by default."""
        return [], []


class LogStore(Protocol):
    """A log's store: committed reads, and :meth:`transaction` for the one writer at a time."""

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]: ...

    async def latest(self) -> CheckpointRecord | None: ...

    async def history(self, limit: int) -> list[CheckpointRecord]: ...

    async def witness_state(self) -> WitnessState | None:
        """The witnessing job's saved state, or None if it never saved one."""
        ...

    async def save_witness_state(self, state: WitnessState) -> None:
        """Replace the witnessing job's state (durably, outside the log's batches)."""
        ...

    async def witnessed_finals(self) -> dict[str, bytes]:
        """Each frozen log's final checkpoint with the cosignatures collected for it so far,
        by origin (:mod:`ledger.jobs.final_checkpoint`)."""
        ...

    async def save_witnessed_final(self, origin: str, note: bytes) -> None:
        """Replace the cosigned final checkpoint of the frozen log ``origin`` (durably)."""
        ...

    async def probe_space(self, nbytes: int) -> None:
        """Write ``nbytes`` outside the log's tables and remove them again; raises
        :class:`StorageFullError` while the store cannot take a write that large (how the
        sequencer learns that space came back after a full disk)."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[WriteTx]: ...

    async def close(self) -> None: ...


class ReadOnlyLogView:
    """What every backend's read-only view of one log (``RollingStore.for_log``) answers
    alike: it has no witness state, takes no write and owns no connection (the store's are the
    store's to close). A backend's view adds its reads and ``probe_space``."""

    async def witness_state(self) -> WitnessState | None:
        return None

    async def save_witness_state(self, state: WitnessState) -> None:
        raise StoreError("a log view is read-only")

    async def witnessed_finals(self) -> dict[str, bytes]:
        return {}

    async def save_witnessed_final(self, origin: str, note: bytes) -> None:
        raise StoreError("a log view is read-only")

    def transaction(self) -> NoReturn:
        raise StoreError("a log view is read-only: write through the store")

    async def close(self) -> None:
        return None


class RollingStore(LogStore, Protocol):
    """A store of a sequence of logs: reads and transactions are on :attr:`log_number`."""

    @property
    def log_number(self) -> int:
        """The log it reads and writes (changed by :meth:`use_log` only)."""
        ...

    async def logs(self) -> list[LogRecord]: ...

    def use_log(self, n: int) -> None:
        """Read from and write to log ``n`` from now on (its tables must exist)."""
        ...

    def for_log(self, n: int) -> LogStore:
        """A read-only view of log ``n`` sharing this store's connections: its tiles,
        checkpoint and history (``transaction`` and the witness state are not for views)."""
        ...
