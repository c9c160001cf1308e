"""An in-memory store with the same transaction semantics, for tests and throwaway logs.

The transaction is an ``asyncio.Lock`` (one writer at a time within the process) and a buffer:
nothing a transaction wrote is visible to reads until it ends without an exception, and then
everything is, as with the database backends. Subclasses (the notary's store) add their own
buffered rows through their own transaction type, whose :meth:`~MemoryWriteTx.committed` hook
applies them (:class:`~ledger.storage.base.TxHooks`). What the store shares with its
transactions is one :class:`MemoryLogs`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

from ledger.core.compact import bundle_keys, entries_between
from ledger.storage.base import (
    CheckpointRecord,
    LogRecord,
    ReadOnlyLogView,
    StoreError,
    TileKey,
    TxHooks,
    WitnessState,
    log_suffix,
)


@dataclass
class _MemLog:
    """One log's tiles and checkpoints."""

    tiles: dict[TileKey, bytes] = field(default_factory=dict)
    latest: CheckpointRecord | None = None
    history: list[CheckpointRecord] = field(default_factory=list)


@dataclass
class MemoryLogs:
    """A :class:`MemoryStore`'s logs, its registry and its current log: what it shares with
    its transactions, which apply their writes here once they end cleanly."""

    logs: dict[int, _MemLog] = field(default_factory=lambda: {0: _MemLog()})
    registry: dict[int, LogRecord] = field(default_factory=dict)
    log_number: int = 0

    def active(self) -> int:
        active = [n for n, r in self.registry.items() if r.state == "active"]
        return max(active, default=0)


class MemoryWriteTx(TxHooks):
    def __init__(self, state: MemoryLogs) -> None:
        self._state = state
        self.log_number = state.log_number
        self.active_log = state.active()
        # Per log touched: the tiles and the checkpoint written (applied at the end).
        self._writes: dict[int, tuple[dict[TileKey, bytes], list[CheckpointRecord]]] = {}
        self._registry: dict[int, LogRecord] = {}

    @property
    def tiles(self) -> dict[TileKey, bytes]:
        return self._mine()[0]

    @property
    def checkpoint(self) -> CheckpointRecord | None:
        written = self._mine()[1]
        return written[-1] if written else None

    def _mine(self) -> tuple[dict[TileKey, bytes], list[CheckpointRecord]]:
        return self._writes.setdefault(self.log_number, ({}, []))

    async def latest(self) -> CheckpointRecord | None:
        log = self._state.logs.get(self.log_number)
        return self.checkpoint or (log.latest if log is not None else None)

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        log = self._state.logs.get(self.log_number, _MemLog())
        out = {k: log.tiles[k] for k in keys if k in log.tiles}
        out.update({k: self.tiles[k] for k in keys if k in self.tiles})
        return out

    async def read_entries(self, start: int, end: int) -> list[bytes]:
        return entries_between(await self.read_tiles(bundle_keys(start, end)), start, end)

    async def write(self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord) -> None:
        mine = self._mine()
        mine[0].update(tiles)
        mine[1].append(checkpoint)

    async def logs(self) -> list[LogRecord]:
        merged = {**self._state.registry, **self._registry}
        return [merged[n] for n in sorted(merged)]

    async def put_log(self, record: LogRecord) -> None:
        self._registry[record.n] = record

    async def switch_log(self, n: int, *, create: bool = False) -> None:
        log_suffix(n)
        if n not in self._state.logs and n not in self._writes and not create:
            raise StoreError(f"log {n} does not exist")
        self.log_number = n
        self._mine()

    def committed(self) -> None:
        """Make the writes visible (runs only if the transaction ended cleanly)."""
        state = self._state
        for n, (tiles, checkpoints) in self._writes.items():
            log = state.logs.setdefault(n, _MemLog())
            log.tiles.update(tiles)
            if checkpoints:
                log.latest = checkpoints[-1]
                log.history.append(checkpoints[-1])
        state.registry.update(self._registry)
        state.log_number = self.log_number


class MemoryLogView(ReadOnlyLogView):
    """A read-only view of one log of a :class:`MemoryStore` (``for_log``)."""

    def __init__(self, state: MemoryLogs, n: int) -> None:
        self._state = state
        self._n = n

    def _log(self) -> _MemLog:
        return self._state.logs.get(self._n, _MemLog())

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        tiles = self._log().tiles
        return {k: tiles[k] for k in keys if k in tiles}

    async def latest(self) -> CheckpointRecord | None:
        return self._log().latest

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return self._log().history[::-1][:limit]


    async def probe_space(self, nbytes: int) -> None:
        return None



class MemoryStore:
    def __init__(self) -> None:
        self._state = MemoryLogs()
        self._witness_state: WitnessState | None = None
        self._finals: dict[str, bytes] = {}
        self._lock = asyncio.Lock()

    @property
    def log_number(self) -> int:
        return self._state.log_number

    @property
    def tiles(self) -> dict[TileKey, bytes]:
        return self._state.logs[self.log_number].tiles

    @property
    def _latest(self) -> CheckpointRecord | None:
        return self._state.logs[self.log_number].latest

    @_latest.setter
    def _latest(self, record: CheckpointRecord | None) -> None:  # tests: a restored backup
        self._state.logs[self.log_number].latest = record

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return {k: self.tiles[k] for k in keys if k in self.tiles}

    async def latest(self) -> CheckpointRecord | None:
        return self._latest

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return self._state.logs[self.log_number].history[::-1][:limit]

    async def logs(self) -> list[LogRecord]:
        registry = self._state.registry
        return [registry[n] for n in sorted(registry)]

    def use_log(self, n: int) -> None:
        if n not in self._state.logs:
            raise StoreError(f"log {n} does not exist")
        self._state.log_number = n

    def for_log(self, n: int) -> MemoryLogView:
        log_suffix(n)
        return MemoryLogView(self._state, n)

    async def witness_state(self) -> WitnessState | None:
        return self._witness_state

    async def save_witness_state(self, state: WitnessState) -> None:
        self._witness_state = WitnessState(dict(state.sizes), state.published)

    async def witnessed_finals(self) -> dict[str, bytes]:
        return dict(self._finals)

    async def save_witnessed_final(self, origin: str, note: bytes) -> None:
        self._finals[origin] = note

    async def probe_space(self, nbytes: int) -> None:
        return None  # memory is never full in the sense of a disk

    def _new_tx(self) -> MemoryWriteTx:
        return MemoryWriteTx(self._state)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[MemoryWriteTx]:
        async with self._lock:
            tx = self._new_tx()
            yield tx
            tx.committed()

    def transaction(self) -> AbstractAsyncContextManager[MemoryWriteTx]:
        return self._transaction()

    async def close(self) -> None:
        return None
