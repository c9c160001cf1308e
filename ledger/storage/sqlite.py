"""SQLite backend: one file, WAL, ``synchronous=FULL`` so a commit survives power loss.

Writes go through their own connection inside ``BEGIN IMMEDIATE``, which is also the lock that
keeps a second writer process (``ledger add`` beside ``ledger serve``) from interleaving. A write
transaction costs two trips to a worker thread: one to take the lock and read the stored
checkpoint, one to run every buffered statement and ``COMMIT`` (its fsync included). Reads use
other connections (aiosqlite for bulk reads, a synchronous one for point reads), so they only
ever see committed data.
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from ledger.storage.base import (
    CheckpointRecord,
    StorageFullError,
    StoreError,
    TileKey,
    WriterBusyError,
)

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


def _read_tiles_sync(conn: sqlite3.Connection, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
    out: dict[TileKey, bytes] = {}
    keys = list(dict.fromkeys(keys))
    for i in range(0, len(keys), 500):
        chunk = [_tile_id(k) for k in keys[i : i + 500]]
        marks = ",".join("?" * len(chunk))
        for rowid, data in conn.execute(f"SELECT id, data FROM tiles WHERE id IN ({marks})", chunk):
            out[_tile_key(rowid)] = bytes(data)
    return out


def _latest_sync(conn: sqlite3.Connection) -> CheckpointRecord | None:
    row = conn.execute("SELECT size, time, note FROM log_state WHERE one = 1").fetchone()
    return None if row is None else CheckpointRecord(row[0], row[1], bytes(row[2]))


class StatementBuffer:
    """What a batch hook writes through: statements queued to run inside the transaction."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, list[Sequence[Any]]]] = []

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.statements.append((sql, list(rows)))

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.statements.append((sql, [params]))


class SqliteWriteTx:
    """One write transaction: the lock is held, writes are buffered until the commit."""

    def __init__(self, store: SqliteStore, latest: CheckpointRecord | None) -> None:
        self._store = store
        self._latest = latest
        self._buffer = StatementBuffer()
        self._pending_history: float | None = None

    @property
    def handle(self) -> StatementBuffer:
        return self._buffer

    async def latest(self) -> CheckpointRecord | None:
        return self._latest

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await asyncio.to_thread(_read_tiles_sync, self._store._wconn, keys)

    async def write(self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord) -> None:
        cp = checkpoint
        buf = self._buffer.statements
        buf.append(("INSERT OR REPLACE INTO tiles (id, data) VALUES (?, ?)",
                    [(_tile_id(k), v) for k, v in tiles.items()]))
        buf.append(("INSERT OR REPLACE INTO log_state (one, size, time, note) VALUES (1, ?, ?, ?)",
                    [(cp.size, cp.time, cp.note)]))
        last = self._store._last_history
        if last is None:
            last = await asyncio.to_thread(self._store._last_history_time)
        if cp.time - last >= HISTORY_INTERVAL:
            buf.append(("INSERT OR REPLACE INTO checkpoints (size, time, note) VALUES (?, ?, ?)",
                        [(cp.size, cp.time, cp.note)]))
            self._pending_history = cp.time


class SqliteStore:
    """A log in one SQLite file. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: aiosqlite.Connection):
        self.path = path
        self._wconn = writer  # used only from worker threads, one call at a time (_wlock)
        self._wlock = asyncio.Lock()
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
            writer = await asyncio.to_thread(_connect_writer, path, ms)
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
        async with self._wlock:
            try:
                await asyncio.to_thread(
                    self._wconn.execute, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                    (key, value))
            except (sqlite3.Error, OSError) as e:
                full = self._full(e)
                if full is None:
                    raise
                raise full from e

    def _last_history_time(self) -> float:
        row = self._wconn.execute("SELECT max(time) FROM checkpoints").fetchone()
        return float(row[0]) if row and row[0] is not None else float("-inf")

    def _begin(self) -> CheckpointRecord | None:
        """Take the write lock (``BEGIN IMMEDIATE``, waiting up to the busy timeout)."""
        started = time.monotonic()
        try:
            self._wconn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                raise WriterBusyError(
                    f"another process is writing to {self.path} "
                    f"(waited {time.monotonic() - started:.1f}s)"
                ) from e
            raise
        try:
            return _latest_sync(self._wconn)
        except BaseException:
            self._wconn.execute("ROLLBACK")
            raise

    def _finish(self, statements: list[tuple[str, list[Sequence[Any]]]]) -> None:
        """Run the buffered statements and COMMIT; roll back if anything fails."""
        conn = self._wconn
        try:
            for sql, rows in statements:
                conn.executemany(sql, rows)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _abort(self) -> None:
        if self._wconn.in_transaction:
            self._wconn.execute("ROLLBACK")

    def _full(self, e: BaseException) -> StorageFullError | None:
        """The error to raise instead of ``e`` when ``e`` means the disk is full."""
        if isinstance(e, sqlite3.Error):
            code = getattr(e, "sqlite_errorcode", None)
            full = code == sqlite3.SQLITE_FULL or "database or disk is full" in str(e)
        else:
            full = isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)
        if not full:
            return None
        return StorageFullError(f"cannot write to {self.path}: the disk or the database is full")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteWriteTx]:
        async with self._wlock:
            try:
                latest = await _in_thread(self._begin)
            except (sqlite3.Error, OSError) as e:
                full = self._full(e)
                if full is None:
                    raise
                raise full from e
            tx = SqliteWriteTx(self, latest)
            try:
                yield tx
                await _in_thread(self._finish, tx._buffer.statements)
            except BaseException as e:
                await _in_thread(self._abort)
                full = self._full(e)
                if full is not None:
                    raise full from e
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
        async with self._wlock:
            await asyncio.to_thread(self._wconn.close)




def _connect_writer(path: Path, busy_ms: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.executescript(_SCHEMA)
    return conn


async def _in_thread(fn: Any, *args: Any) -> Any:
    """Run ``fn`` in a worker thread and wait for it even if the caller is cancelled.

    A commit that has started must finish (or fail) before anything else touches the
    connection, or a rollback could race it; the cancellation is delivered afterwards.
    """
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise
