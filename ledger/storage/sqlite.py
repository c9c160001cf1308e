"""SQLite backend (aiosqlite): one file, WAL, ``synchronous=FULL`` so a commit survives power loss.

Writes go through their own connection inside ``BEGIN IMMEDIATE``, which is also the lock that
keeps a second writer process (``ledger add`` beside ``ledger serve``) from interleaving. Reads use
a second connection, so they only ever see committed data.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

from .base import CheckpointRecord, StoreError, TileKey, WriterBusyError

HISTORY_INTERVAL = 60.0  # keep at least one checkpoint a minute in the history

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tiles (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS log_state (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    size INTEGER NOT NULL, time REAL NOT NULL, note BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    size INTEGER PRIMARY KEY, time REAL NOT NULL, note BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _tile_id(key: TileKey) -> int:
    level, index = key
    return ((level + 1) << 48) | index


def _tile_key(rowid: int) -> TileKey:
    return (rowid >> 48) - 1, rowid & ((1 << 48) - 1)


async def _read_tiles(conn: aiosqlite.Connection, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
    out: dict[TileKey, bytes] = {}
    keys = list(dict.fromkeys(keys))
    for i in range(0, len(keys), 500):
        chunk = [_tile_id(k) for k in keys[i : i + 500]]
        marks = ",".join("?" * len(chunk))
        # One round trip to aiosqlite's thread (iterating a cursor costs one per chunk and close).
        rows = await conn.execute_fetchall(f"SELECT id, data FROM tiles WHERE id IN ({marks})",
                                           chunk)
        for rowid, data in rows:
            out[_tile_key(rowid)] = bytes(data)
    return out


async def _latest(conn: aiosqlite.Connection) -> CheckpointRecord | None:
    rows = list(await conn.execute_fetchall("SELECT size, time, note FROM log_state WHERE one = 1"))
    if not rows:
        return None
    row = rows[0]
    return CheckpointRecord(row[0], row[1], bytes(row[2]))


class SqliteWriteTx:
    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self._conn = store._writer
        self._pending_history: float | None = None

    @property
    def handle(self) -> aiosqlite.Connection:
        return self._conn

    async def latest(self) -> CheckpointRecord | None:
        return await _latest(self._conn)

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await _read_tiles(self._conn, keys)

    async def write(self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord) -> None:
        conn = self._conn
        await conn.executemany(
            "INSERT OR REPLACE INTO tiles (id, data) VALUES (?, ?)",
            [(_tile_id(k), v) for k, v in tiles.items()],
        )
        cp = checkpoint
        await conn.execute(
            "INSERT OR REPLACE INTO log_state (one, size, time, note) VALUES (1, ?, ?, ?)",
            (cp.size, cp.time, cp.note),
        )
        last = self._store._last_history
        if last is None:
            rows = list(await conn.execute_fetchall("SELECT max(time) FROM checkpoints"))
            last = rows[0][0] if rows and rows[0][0] is not None else float("-inf")
        if cp.time - last >= HISTORY_INTERVAL:
            await conn.execute(
                "INSERT OR REPLACE INTO checkpoints (size, time, note) VALUES (?, ?, ?)",
                (cp.size, cp.time, cp.note),
            )
            self._pending_history = cp.time


class SqliteStore:
    """A log in one SQLite file. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, path: Path, writer: aiosqlite.Connection, reader: aiosqlite.Connection):
        self.path = path
        self._writer = writer
        self._reader = reader
        self._last_history: float | None = None
        # Point reads of a few tiles for proofs: in WAL mode a reader never waits for the writer,
        # and an indexed read of a few 8 KiB rows takes microseconds, several times less than a
        # hop to aiosqlite's thread, so these run on the caller's thread.
        self._point = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    @classmethod
    async def open(cls, path: str | Path, *, create: bool = False, busy_timeout: float = 10.0
                   ) -> SqliteStore:
        path = Path(path)
        if not create and not path.exists():
            raise StoreError(f"no log database at {path}")
        ms = int(busy_timeout * 1000)
        try:
            writer = await aiosqlite.connect(path, isolation_level=None)
            await writer.execute(f"PRAGMA busy_timeout = {ms}")
            await writer.execute("PRAGMA journal_mode = WAL")
            await writer.execute("PRAGMA synchronous = FULL")
            await writer.executescript(_SCHEMA)
            reader = await aiosqlite.connect(path, isolation_level=None)
            await reader.execute(f"PRAGMA busy_timeout = {ms}")
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open log database {path}: {e}") from e
        return cls(path, writer, reader)

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await _read_tiles(self._reader, keys)

    async def latest(self) -> CheckpointRecord | None:
        return await _latest(self._reader)

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        rows = await self._reader.execute_fetchall(
            "SELECT size, time, note FROM checkpoints ORDER BY size DESC LIMIT ?", (limit,)
        )
        return [CheckpointRecord(r[0], r[1], bytes(r[2])) for r in rows]

    async def get_meta(self, key: str) -> str | None:
        rows = list(await self._reader.execute_fetchall(
            "SELECT value FROM meta WHERE key = ?", (key,)
        ))
        return str(rows[0][0]) if rows else None

    async def set_meta(self, key: str, value: str) -> None:
        await self._writer.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value)
        )

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteWriteTx]:
        conn = self._writer
        started = time.monotonic()
        try:
            await conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                waited = time.monotonic() - started
                raise WriterBusyError(
                    f"another process is writing to {self.path} (waited {waited:.1f}s)"
                ) from e
            raise
        tx = SqliteWriteTx(self)
        try:
            yield tx
            await conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                await conn.execute("ROLLBACK")
            raise
        if tx._pending_history is not None:
            self._last_history = tx._pending_history

    def read_tiles_now(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        """Synchronous :meth:`read_tiles` for a handful of keys (see ``_point``)."""
        ids = [_tile_id(k) for k in dict.fromkeys(keys)]
        marks = ",".join("?" * len(ids))
        rows = self._point.execute(f"SELECT id, data FROM tiles WHERE id IN ({marks})", ids)
        return {_tile_key(rowid): bytes(data) for rowid, data in rows}

    async def close(self) -> None:
        self._point.close()
        await self._reader.close()
        await self._writer.close()


