"""The log's storage contract: tiles and entry bundles by (level, index), the signed checkpoint
and its history, behind one atomic write transaction.

Theory of operation
-------------------
A backend needs only keyed blobs and one write transaction that is also the log's single-writer
lock. The sequencer commits a batch like this (DESIGN.md, "One log, many processes"):

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
one log resumes from the same state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

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

    async def probe_space(self, nbytes: int) -> None:
        """Write ``nbytes`` outside the log's tables and remove them again; raises
        :class:`StorageFullError` while the store cannot take a write that large (how the
        sequencer learns that space came back after a full disk)."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[WriteTx]: ...

    async def close(self) -> None: ...
