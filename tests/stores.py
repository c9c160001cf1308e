"""The log store backends under test, behind one factory: every store test runs on each.

``StoreFactory.open()`` opens another handle on the same log (as a second process would), and
``flip_tile_byte`` damages a stored tile behind the store's back, for the integrity tests.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ledger.storage.base import CheckpointRecord, LogStore, TileKey
from tests.tamper import flip_tile_bit

BACKENDS = ("memory", "sqlite", "postgres")


class StoreFactory:
    def __init__(self, backend: str, tmp: Path, pg_url: str | None = None) -> None:
        self.backend = backend
        self.path = tmp / "log.db"
        self.url = pg_url
        self._memory: LogStore | None = None

    @property
    def shared(self) -> bool:
        """Whether two opened stores are two handles on one log (memory: one object)."""
        return self.backend != "memory"

    async def open(self) -> LogStore:
        if self.backend == "sqlite":
            from ledger.storage.sqlite import SqliteStore

            return await SqliteStore.open(self.path, create=True)
        if self.backend == "postgres":
            from ledger.storage.postgres import PostgresStore

            assert self.url is not None
            return await PostgresStore.open(self.url, retry_for=5.0)
        from ledger.storage.memory import MemoryStore

        if self._memory is None:
            self._memory = MemoryStore()
        return self._memory

    async def flip_tile_byte(self, key: TileKey) -> None:
        """XOR the first byte of a stored tile, as disk damage or an intruder would."""
        if self.backend == "sqlite":
            flip_tile_bit(self.path, key[0], key[1])
        elif self.backend == "postgres":
            import asyncpg

            conn = await asyncpg.connect(self.url)
            await conn.execute(
                "UPDATE ledger_tiles SET data = set_byte(data, 0, get_byte(data, 0) # 1) "
                "WHERE level = $1 AND idx = $2", key[0], key[1])
            await conn.close()
        else:
            assert self._memory is not None
            tiles = self._memory.tiles  # type: ignore[attr-defined]
            tiles[key] = bytes([tiles[key][0] ^ 1]) + tiles[key][1:]

    async def set_state(self, record: CheckpointRecord) -> None:
        """Put an older checkpoint back as the stored one, as restoring a backup would."""
        if self.backend == "sqlite":
            db = sqlite3.connect(self.path)
            db.execute("UPDATE log_state SET size = ?, time = ?, note = ? WHERE one = 1",
                       (record.size, record.time, record.note))
            db.commit()
            db.close()
        elif self.backend == "postgres":
            import asyncpg

            conn = await asyncpg.connect(self.url)
            await conn.execute("UPDATE ledger_state SET size = $1, time = $2, note = $3",
                               record.size, record.time, record.note)
            await conn.close()
        else:
            assert self._memory is not None
            self._memory._latest = record  # type: ignore[attr-defined]
