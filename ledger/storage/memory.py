"""An in-memory store with the same transaction semantics, for tests and throwaway logs.

The transaction is an ``asyncio.Lock`` (one writer at a time within the process) and a buffer:
nothing a transaction wrote is visible to reads until it ends without an exception, and then
everything is, as with the database backends. Subclasses (the notary's store) add their own
buffered rows through their own transaction type and :meth:`MemoryStore._apply`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from ledger.core.compact import bundle_keys, entries_between
from ledger.storage.base import CheckpointRecord, TileKey, WitnessState


class MemoryWriteTx:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.tiles: dict[TileKey, bytes] = {}
        self.checkpoint: CheckpointRecord | None = None

    async def latest(self) -> CheckpointRecord | None:
        return self.checkpoint or self._store._latest

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        out = await self._store.read_tiles(keys)
        out.update({k: self.tiles[k] for k in keys if k in self.tiles})
        return out

    async def read_entries(self, start: int, end: int) -> list[bytes]:
        return entries_between(await self.read_tiles(bundle_keys(start, end)), start, end)

    async def write(self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord) -> None:
        self.tiles.update(tiles)
        self.checkpoint = checkpoint


class MemoryStore:
    def __init__(self) -> None:
        self.tiles: dict[TileKey, bytes] = {}
        self._latest: CheckpointRecord | None = None
        self._history: list[CheckpointRecord] = []
        self._witness_state: WitnessState | None = None
        self._lock = asyncio.Lock()

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return {k: self.tiles[k] for k in keys if k in self.tiles}

    async def latest(self) -> CheckpointRecord | None:
        return self._latest

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return self._history[::-1][:limit]

    async def witness_state(self) -> WitnessState | None:
        return self._witness_state

    async def save_witness_state(self, state: WitnessState) -> None:
        self._witness_state = WitnessState(dict(state.sizes), state.published)

    async def probe_space(self, nbytes: int) -> None:
        return None  # memory is never full in the sense of a disk

    def _apply(self, tx: MemoryWriteTx) -> None:
        """Make a finished transaction's writes visible (runs only if it ended cleanly)."""
        self.tiles.update(tx.tiles)
        if tx.checkpoint is not None:
            self._latest = tx.checkpoint
            self._history.append(tx.checkpoint)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[MemoryWriteTx]:
        async with self._lock:
            tx = MemoryWriteTx(self)
            yield tx
            self._apply(tx)

    def transaction(self) -> AbstractAsyncContextManager[MemoryWriteTx]:
        return self._transaction()

    async def close(self) -> None:
        return None
