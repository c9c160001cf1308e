"""SQLite backend: one file, WAL, ``synchronous=FULL`` so a commit survives power loss.

Writes go through their own connection inside ``BEGIN IMMEDIATE``, which is also the lock that
keeps a second writer process (``ledger add`` beside ``ledger serve``) from interleaving. A write
transaction costs one trip to a worker thread, to run every buffered statement and ``COMMIT``
(its fsync included), except when the log is idle between lone entries (:data:`LONE_ENTRIES`):
then it commits on the caller's thread. The lock is tried on the caller's thread without
waiting (when it is free, taking it and reading the stored checkpoint are a few µs, less than
a thread hand-off); only when another connection holds it is it waited for, up to the busy
timeout, on the worker thread, which is one more trip. Reads use other connections (aiosqlite
for bulk reads, a synchronous one for point reads), so they only ever see committed data.

Layout. ``tiles`` holds each tile and entry bundle whole by :func:`_tile_id`; a right-edge
tile grows by appended rows of ``tile_parts`` (:mod:`ledger.core.tileparts`), keyed by
:func:`_part_id`. Every read takes the two tables in one statement (:func:`read_tiles_sync`),
hence one snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import queue
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, Self, TypeVar, TypeVarTuple

import aiosqlite

from ledger.core.compact import bundle_keys, entries_between
from ledger.core.tileparts import BundleEnd, entries_from_parts, plan_writes
from ledger.core.tiles import ENTRIES_LEVEL, TILE_HEIGHT, TILE_WIDTH
from ledger.storage.base import (
    CheckpointRecord,
    LogRecord,
    ReadOnlyLogView,
    StorageFullError,
    StoreError,
    TileKey,
    WitnessState,
    WriterBusyError,
    log_suffix,
)
from ledger.storage.writer_queue import WriterQueue

HISTORY_INTERVAL = 60.0  # keep at least one checkpoint a minute in the history

PAGE_SIZE = 2048
"""The page size of a new file (an existing one keeps its own). Entry bundles (~40 KB) and
hash tiles (8 KiB) live mostly in overflow pages, but SQLite keeps up to a page of each on a
leaf page, where it leaves on average a fraction of a page unused: with 2 KiB pages that is
about 2 bytes per log entry, with the default 4 KiB about 7. Small rows (a notary's ~80-byte
receipt rows) pack slightly worse in small pages (+1.6 bytes), and 1 KiB pages lose more to
page headers than they save (benchmarks/docs/receipt_bytes.md)."""

LONE_ENTRIES = 1
"""A commit that adds at most this many entries, right after one that did too, runs on the
caller's (the event loop's) thread.

Two such batches in a row mean that nothing arrived while the first one committed: there is no
other work for the loop to overlap with the commit, and the trip to the writer thread is pure
latency. In process, one receipt at a time, committing on the loop took 1.5-1.6 ms a receipt
against 2.2-2.3 ms through the thread: the trip's two cross-thread wake-ups, and the statements
and ``COMMIT`` running slower on a core whose caches are cold (benchmarks/docs/history.md,
http_notarize).
A lone batch after a larger one keeps the thread, as larger batches do: requests that arrive
during its fsync are read and prepared meanwhile (at 4 connections batches alternate 1 and 3).
The price: while a lone commit's fsync lasts, the loop serves nothing else; a disk that stalls
it stalls the loop for that long, where the thread would have kept other connections answered.
"""

GATHER_TURNS = 3
"""Turns of the event loop a transaction lets pass before it takes the lock, when the last
commit added more than :data:`LONE_ENTRIES` entries.

Taking the lock is a few µs on the caller's thread, and the batch is what is queued then. On
PostgreSQL it is a round trip, during which the loop sends the last batch's answers and reads
the next requests, which join the batch. Without those turns, SQLite's batches were half as
large under steady load (at 64 connections two batches of 32 took turns, PostgreSQL's were
64), and every commit's own cost (checkpoint signature, ``BEGIN``, ``COMMIT`` and its fsync)
was shared by half as many receipts. Three turns: the answers are written, the next requests
read, their handlers queue their entries (benchmarks/docs/http_notarize.md). A lone entry
after a lone entry does not wait: nothing else is coming.
"""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tiles (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS tile_parts (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS log_state (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    size INTEGER NOT NULL, time REAL NOT NULL, note BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    size INTEGER PRIMARY KEY, time REAL NOT NULL, note BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS write_probe (one INTEGER PRIMARY KEY CHECK (one = 1), data BLOB);
CREATE TABLE IF NOT EXISTS witness_sizes (vkey TEXT PRIMARY KEY, size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS witness_published (
    one INTEGER PRIMARY KEY CHECK (one = 1), note BLOB);
CREATE TABLE IF NOT EXISTS witness_finals (origin TEXT PRIMARY KEY, note BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS logs (
    n INTEGER PRIMARY KEY, origin TEXT NOT NULL UNIQUE, shard TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('active', 'frozen')), started REAL NOT NULL,
    frozen_at REAL, final_size INTEGER, min_index INTEGER NOT NULL DEFAULT 0,
    vkeys TEXT NOT NULL, reason TEXT);
"""


@dataclass(frozen=True)
class Tables:
    """The names of one log's tables: log 0's are the original ones, log n's carry ``_n``
    (DESIGN-33: no migration of an existing log, ever)."""

    tiles: str
    parts: str
    state: str
    checkpoints: str

    @classmethod
    def of(cls, n: int) -> Tables:
        suffix = log_suffix(n)
        return cls(f"tiles{suffix}", f"tile_parts{suffix}", f"log_state{suffix}",
                   f"checkpoints{suffix}")

    def schema(self) -> list[str]:
        """The statements that create these tables (log 0's exist from the start)."""
        return [
            f"CREATE TABLE IF NOT EXISTS {self.tiles} (id INTEGER PRIMARY KEY, data BLOB NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {self.parts} (id INTEGER PRIMARY KEY, data BLOB NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {self.state} (one INTEGER PRIMARY KEY CHECK (one = 1), "
            "size INTEGER NOT NULL, time REAL NOT NULL, note BLOB NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {self.checkpoints} (size INTEGER PRIMARY KEY, "
            "time REAL NOT NULL, note BLOB NOT NULL)",
        ]


LOG0 = Tables.of(0)

_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")

Statements = list[tuple[str, list[Sequence[object]]]]


class _Busy:
    """The write lock is held by another connection (see :meth:`SqliteStore._begin_now`)."""


_BUSY = _Busy()


def _tile_id(key: TileKey) -> int:
    level, index = key
    return ((level + 1) << 48) | index


def _tile_key(rowid: int) -> TileKey:
    return (rowid >> 48) - 1, rowid & ((1 << 48) - 1)


def _part_id(tile_id: int, start: int) -> int:
    """The ``tile_parts`` id of a tile's part whose first element is at ``start`` (0-255)."""
    return tile_id << TILE_HEIGHT | start


def _tiles_query(keys: Sequence[TileKey], t: Tables = LOG0) -> tuple[str, list[int]]:
    """One statement for these tiles' rows and every part between the first and the last.

    Parts exist only for right-edge tiles (one per level at most), so the range holds few
    rows beyond the ones asked for; they are dropped by :func:`_assemble`.
    """
    ids = [_tile_id(k) for k in keys]
    marks = ",".join("?" * len(ids))
    sql = (f"SELECT id, NULL, data FROM {t.tiles} WHERE id IN ({marks}) UNION ALL "
           f"SELECT id >> 8, id, data FROM {t.parts} WHERE id BETWEEN ? AND ?")
    return sql, [*ids, _part_id(min(ids), 0), _part_id(max(ids), TILE_WIDTH - 1)]


def _assemble(rows: Iterable[Any], keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
    """Each tile's row followed by its parts in order (``tiles`` rows come first in a
    ``UNION ALL``); tiles that were not asked for are dropped."""
    wanted = {_tile_id(k) for k in keys}
    whole: dict[int, bytes] = {}
    parts: list[tuple[int, int, bytes]] = []
    for tile_id, part_id, data in rows:
        if part_id is None:
            whole[tile_id] = bytes(data)
        elif tile_id in wanted:
            parts.append((tile_id, part_id, bytes(data)))
    if parts:
        parts.sort()
        grown: dict[int, list[bytes]] = {}
        for tile_id, _, data in parts:
            grown.setdefault(tile_id, [whole.get(tile_id, b"")]).append(data)
        whole.update((tile_id, b"".join(pieces)) for tile_id, pieces in grown.items())
    return {_tile_key(tile_id): data for tile_id, data in whole.items()}


async def _read_tiles(conn: aiosqlite.Connection, keys: Sequence[TileKey], t: Tables
                      ) -> dict[TileKey, bytes]:
    out: dict[TileKey, bytes] = {}
    keys = list(dict.fromkeys(keys))
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        # One round trip to aiosqlite's thread (iterating a cursor costs one per chunk and close).
        sql, params = _tiles_query(chunk, t)
        out.update(_assemble(await conn.execute_fetchall(sql, params), chunk))
    return out


async def _latest(conn: aiosqlite.Connection, t: Tables) -> CheckpointRecord | None:
    try:
        rows = list(await conn.execute_fetchall(
            f"SELECT size, time, note FROM {t.state} WHERE one = 1"))
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):  # a log whose roll has not committed yet
            return None
        raise
    if not rows:
        return None
    row = rows[0]
    return CheckpointRecord(row[0], row[1], bytes(row[2]))


def read_tiles_sync(conn: sqlite3.Connection, keys: Sequence[TileKey], t: Tables = LOG0
                    ) -> dict[TileKey, bytes]:
    """Stored tiles and bundles by key, on any connection to a log's file (the notary reads
    its receipts' entries with it); keys not stored are left out. ``t``: which log's."""
    out: dict[TileKey, bytes] = {}
    keys = list(dict.fromkeys(keys))
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        sql, params = _tiles_query(chunk, t)
        out.update(_assemble(conn.execute(sql, params), chunk))
    return out


def _read_entries_sync(conn: sqlite3.Connection, start: int, end: int,
                       known: BundleEnd | None, t: Tables = LOG0
                       ) -> tuple[list[bytes], BundleEnd | None]:
    """The entries at [start, end) and what is now known of the edge bundle's stored length.

    When ``start`` falls inside a bundle that grows by parts, only its parts from ``start`` on
    are read (the caller has the entries before): a part or two where the whole bundle is up
    to ~40 KB and a part per commit. Anything else, a bundle stored whole or parts that do not
    start there, is read whole. ``known`` is the edge bundle as this store last committed it;
    when the parts extend it, the returned one says where they end, so that the next commit
    appends its own part without walking the bundle (:func:`plan_writes`).
    """
    out: list[bytes] = []
    if start & (TILE_WIDTH - 1) and start < end:
        tile_id = _tile_id((ENTRIES_LEVEL, start >> TILE_HEIGHT))
        rows = conn.execute(f"SELECT id & 255, data FROM {t.parts} WHERE id BETWEEN ? AND ? "
                            "ORDER BY id", (_part_id(tile_id, start & (TILE_WIDTH - 1)),
                                            _part_id(tile_id, TILE_WIDTH - 1))).fetchall()
        out, start, known = entries_from_parts(rows, start, end, known)
    if start < end:
        out.extend(entries_between(read_tiles_sync(conn, bundle_keys(start, end), t),
                                   start, end))
    return out, known


def latest_sync(conn: sqlite3.Connection, t: Tables = LOG0) -> CheckpointRecord | None:
    if t is not LOG0 and not _has_table(conn, t.state):
        return None
    row = conn.execute(f"SELECT size, time, note FROM {t.state} WHERE one = 1").fetchone()
    return None if row is None else CheckpointRecord(row[0], row[1], bytes(row[2]))


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


_LOG_COLUMNS = ("n, origin, shard, state, started, frozen_at, final_size, min_index, vkeys, "
                "reason")


def logs_sync(conn: sqlite3.Connection) -> list[LogRecord]:
    """The registry of logs, oldest first (empty: a store that never rolled, one log 0)."""
    return [LogRecord.from_row(r) for r in conn.execute(
        f"SELECT {_LOG_COLUMNS} FROM logs ORDER BY n")]


def _active_sync(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(n) FROM logs WHERE state = 'active'").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


MAX_ROWS_PER_INSERT = 64
"""The most rows one multi-row ``INSERT`` of a commit carries (:func:`multi_row`)."""

_VALUES = re.compile(r"\bVALUES\s*(\(\s*\?(?:\s*,\s*\?)*\s*\))", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def _rows_sql(sql: str, rows: int) -> str | None:
    """``sql`` (an ``INSERT`` with one ``VALUES`` tuple of marks) made to insert ``rows``
    rows at once, or None if it is not such a statement."""
    found = _VALUES.search(sql)
    if found is None or not sql.lstrip().upper().startswith("INSERT"):
        return None
    return sql[:found.start(1)] + ",".join([found.group(1)] * rows) + sql[found.end(1):]


def multi_row(sql: str, rows: Sequence[Sequence[object]]) -> Statements:
    """``sql`` run once per row, as statements that each take many rows.

    ``executemany`` steps its statement once per row, and a step is where the sqlite3 module
    lets go of the GIL: on the writer thread, every row was a hand-over of the GIL to the event
    loop and back, which the loop, busy with requests during the commit, paid for. One
    ``INSERT`` of up to :data:`MAX_ROWS_PER_INSERT` rows binds them all and steps once. The
    row counts are powers of two, so that a table's inserts take a handful of statement texts,
    which stay in the connection's statement cache whatever the batch size. Anything that is
    not an ``INSERT … VALUES (?, …)`` is left to ``executemany``.
    """
    if len(rows) == 1 or _rows_sql(sql, 1) is None:
        return [(sql, list(rows))]
    out: Statements = []
    at = 0
    while at < len(rows):
        n = min(MAX_ROWS_PER_INSERT, 1 << ((len(rows) - at).bit_length() - 1))
        flat = [value for row in rows[at:at + n] for value in row]
        out.append((_rows_sql(sql, n) or sql, [flat]))
        at += n
    return out


class SqliteWriteTx:
    """One write transaction: the lock is held, writes are buffered until the commit.

    Subclasses (the notary's store) add rows with :meth:`_queue`, which run in the commit's
    trip in the order queued, and read under the lock with :meth:`_read_locked`.
    """

    def __init__(self, store: SqliteStore, latest: CheckpointRecord | None) -> None:
        self._store = store
        self._latest = latest
        self._t = store._t
        self.log_number = store.log_number
        self.active_log = store.log_number  # set under the lock by _locked_transaction
        self._last_history = store._last_history
        self._switched = False
        self._base: CheckpointRecord | None = None  # the last write's, once switched
        self._statements: Statements = []
        self._pending_history: float | None = None
        self._adds = 0  # entries this transaction's checkpoint adds to the stored one
        self._bundle_end = store._bundle_end  # the store's, then what this commit leaves
        self._written: CheckpointRecord | None = None

    def _queue(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run ``sql`` for each of ``rows`` in the commit; an ``INSERT … VALUES (?, …)`` of
        several rows becomes a few statements of many rows each (:func:`multi_row`)."""
        if rows:
            self._statements.extend(multi_row(sql, rows))

    async def _read_locked(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(writer connection)`` in a worker thread, inside this transaction (one trip)."""
        result: _T = await self._store._writer.run(fn, self._store._wconn)
        return result

    def _read_locked_now(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(writer connection)`` on the caller's thread, inside this transaction: for a few
        indexed reads, cheaper than a trip to the worker thread. Safe because the transaction
        holds the store's writer lock and no trip is running between two awaits."""
        return fn(self._store._wconn)

    def _committed(self) -> None:
        """Called once the transaction committed (caches may now trust what it wrote)."""
        if self._switched:
            self._store.use_log(self.log_number)
            self._store._last_history = self._last_history
        elif self._pending_history is not None:
            self._store._last_history = self._pending_history
        self._store._bundle_end = self._bundle_end
        if self._written is not None:
            self._store._last_written = self._written

    async def logs(self) -> list[LogRecord]:
        return self._read_locked_now(logs_sync)

    async def put_log(self, record: LogRecord) -> None:
        self._statements.append((
            f"INSERT OR REPLACE INTO logs ({_LOG_COLUMNS}) VALUES ({', '.join('?' * 10)})",
            [record.row()]))

    async def switch_log(self, n: int, *, create: bool = False) -> None:
        """See :class:`~ledger.storage.base.RollingTx`. The new log's tables are created
        at once (DDL inside the transaction: rolled back with it)."""
        t = Tables.of(n)
        conn = self._store._wconn
        if not _has_table(conn, t.state):
            if not create:
                raise StoreError(f"log {n} has no tables in {self._store.path}")
            for sql in t.schema():
                conn.execute(sql)
        self._t, self.log_number, self._switched = t, n, True
        self._latest = self._base = latest_sync(conn, t)
        self._written = None
        self._bundle_end = None
        self._adds = 0
        row = conn.execute(f"SELECT max(time) FROM {t.checkpoints}").fetchone()
        self._last_history = float(row[0]) if row and row[0] is not None else float("-inf")

    def _alone_since_last_commit(self) -> bool:
        """Whether the stored checkpoint is the one this store committed last: no other
        connection has appended to the log since, so what this store knows of its own
        commits is all there is."""
        return self._latest is not None and self._latest == self._store._last_written

    async def latest(self) -> CheckpointRecord | None:
        return self._latest

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        got: dict[TileKey, bytes] = await self._store._writer.run(
            read_tiles_sync, self._store._wconn, keys, self._t)
        return got

    async def read_entries(self, start: int, end: int) -> list[bytes]:
        conn = self._store._wconn
        got: list[bytes]
        if end - start > TILE_WIDTH:  # a long catch-up: on the worker thread, as bulk reads
            got, known = await self._store._writer.run(
                _read_entries_sync, conn, start, end, self._bundle_end, self._t)
        else:  # a part or two (see _read_locked_now)
            got, known = _read_entries_sync(conn, start, end, self._bundle_end, self._t)
        self._bundle_end = known
        return got

    async def write(self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord) -> None:
        t = self._t
        # What an earlier write of this transaction left is the base of this one (a roll
        # writes a log's last entry, then switches, then writes the next log's first state).
        base = self._base if self._switched else self._latest
        cp = self._written = self._base = checkpoint
        before = base.size if base is not None else 0
        self._adds = cp.size - before
        plan = plan_writes(tiles, before, cp.size, self._bundle_end)
        self._queue(f"INSERT OR REPLACE INTO {t.tiles} (id, data) VALUES (?, ?)",
                    [(_tile_id(k), data) for k, data in plan.whole])
        self._queue(f"INSERT OR REPLACE INTO {t.parts} (id, data) VALUES (?, ?)",
                    [(_part_id(_tile_id(k), start), data) for k, start, data in plan.parts])
        self._queue(f"DELETE FROM {t.parts} WHERE id BETWEEN ? AND ?",
                    [(_part_id(_tile_id(k), 0), _part_id(_tile_id(k), TILE_WIDTH - 1))
                     for k in plan.cleared])
        self._bundle_end = plan.bundle_end or self._bundle_end
        self._queue(f"INSERT OR REPLACE INTO {t.state} (one, size, time, note) VALUES (1, ?, ?, ?)",
                    [(cp.size, cp.time, cp.note)])
        last = self._last_history
        if last is None:
            last = await self._store._writer.run(self._store._last_history_time)
        if cp.time - last >= HISTORY_INTERVAL:
            self._queue(f"INSERT OR REPLACE INTO {t.checkpoints} (size, time, note) "
                        "VALUES (?, ?, ?)", [(cp.size, cp.time, cp.note)])
            self._pending_history = self._last_history = cp.time


class SqliteStore:
    """A log in one SQLite file. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: aiosqlite.Connection):
        self.path = path
        # Used one call at a time (_wlock): from the writer thread, and from the caller's thread
        # only for what cannot wait (trying the lock, reads under it).
        self._wconn = writer
        self._busy_ms = int(writer.execute("PRAGMA busy_timeout").fetchone()[0])
        # The writer never waits in SQLite's busy handler except in _lock (a worker thread):
        # with the write lock held nothing it runs can be busy in WAL mode (reads see their
        # snapshot, commits' checkpoints are passive), and the lock is tried on the loop's
        # thread without waiting (_begin_now), so no statement there has to set it first.
        writer.execute("PRAGMA busy_timeout = 0")
        self._wlock = asyncio.Lock()
        self._writer = _WriterThread(f"sqlite writer {path.name}")
        # Taken before SQLite's write lock, so that writer processes take turns (the module's
        # theory of operation).
        self._queue = WriterQueue(path)
        self._reader = reader
        self._t = LOG0
        self.log_number = 0
        self._last_history: float | None = None
        self._last_adds = 0  # entries the last commit added (see LONE_ENTRIES)
        self._bundle_end: BundleEnd | None = None  # as this store last committed it
        self._last_written: CheckpointRecord | None = None  # the checkpoint it last committed
        # Point reads of a few tiles for proofs: in WAL mode a reader never waits for the writer,
        # and an indexed read of a few 8 KiB rows takes microseconds, several times less than a
        # hop to aiosqlite's thread, so these run on the caller's thread.
        self._point = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    @classmethod
    async def open(cls, path: str | Path, *, create: bool = False, busy_timeout: float = 10.0
                   ) -> Self:
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

    def _new_tx(self, latest: CheckpointRecord | None) -> SqliteWriteTx:
        return SqliteWriteTx(self, latest)

    def use_log(self, n: int) -> None:
        """Read from and write to log ``n`` from now on (what this store knows of the log it
        wrote before is forgotten: it is another tree)."""
        if n == self.log_number:
            return
        self._t, self.log_number = Tables.of(n), n
        self._last_history = None
        self._bundle_end = None
        self._last_written = None
        self._last_adds = 0

    async def logs(self) -> list[LogRecord]:
        return logs_sync(self._point)

    def for_log(self, n: int) -> SqliteLogView:
        return SqliteLogView(self, Tables.of(n))

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await _read_tiles(self._reader, keys, self._t)

    async def latest(self) -> CheckpointRecord | None:
        return await _latest(self._reader, self._t)

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return await _history(self._reader, self._t, limit)

    async def witness_state(self) -> WitnessState | None:
        row = self._point.execute("SELECT note FROM witness_published WHERE one = 1").fetchone()
        if row is None:
            return None
        sizes = dict(self._point.execute("SELECT vkey, size FROM witness_sizes").fetchall())
        return WitnessState(sizes, None if row[0] is None else bytes(row[0]))

    async def save_witness_state(self, state: WitnessState) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM witness_sizes")
            conn.executemany("INSERT INTO witness_sizes (vkey, size) VALUES (?, ?)",
                             sorted(state.sizes.items()))
            conn.execute("INSERT OR REPLACE INTO witness_published (one, note) VALUES (1, ?)",
                         (state.published,))

        await self._write_locked(write)

    async def witnessed_finals(self) -> dict[str, bytes]:
        rows = self._point.execute("SELECT origin, note FROM witness_finals").fetchall()
        return {origin: bytes(note) for origin, note in rows}

    async def save_witnessed_final(self, origin: str, note: bytes) -> None:
        await self._write_locked(lambda conn: conn.execute(
            "INSERT OR REPLACE INTO witness_finals (origin, note) VALUES (?, ?)", (origin, note)))

    async def probe_space(self, nbytes: int) -> None:
        # Two commits, as real batches would make: the row must reach the WAL and the file.
        await self._write_locked(lambda conn: conn.execute(
            "INSERT OR REPLACE INTO write_probe (one, data) VALUES (1, ?)", (bytes(nbytes),)))
        await self._write_locked(lambda conn: conn.execute("DELETE FROM write_probe"))

    def _last_history_time(self) -> float:
        row = self._wconn.execute(f"SELECT max(time) FROM {self._t.checkpoints}").fetchone()
        return float(row[0]) if row and row[0] is not None else float("-inf")

    def _lock(self) -> None:
        """``BEGIN IMMEDIATE``: the write lock, waiting up to the busy timeout."""
        started = time.monotonic()
        conn = self._wconn
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                try:
                    conn.execute("PRAGMA busy_timeout = 0")
                except BaseException:
                    if conn.in_transaction:  # never leave the lock taken by a failed start
                        conn.execute("ROLLBACK")
                    raise
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                raise WriterBusyError(
                    f"another process is writing to {self.path} "
                    f"(waited {time.monotonic() - started:.1f}s)"
                ) from e
            raise

    def _begin(self) -> CheckpointRecord | None:
        """Take the write lock and read the stored checkpoint under it."""
        self._lock()
        return self._read_latest_locked()

    def _read_latest_locked(self) -> CheckpointRecord | None:
        try:
            return latest_sync(self._wconn, self._t)
        except BaseException:
            self._wconn.execute("ROLLBACK")
            raise

    def _begin_now(self) -> CheckpointRecord | _Busy | None:
        """:meth:`_begin` if the write lock is free at once (no waiting: this runs on the
        event loop's thread), else ``_BUSY`` and nothing was taken."""
        try:
            self._wconn.execute("BEGIN IMMEDIATE")  # busy_timeout is 0 here: see __init__
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                return _BUSY
            raise
        return self._read_latest_locked()

    def _locked_sync(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        self._lock()
        try:
            result = fn(self._wconn)
            self._wconn.execute("COMMIT")
        except BaseException:
            if self._wconn.in_transaction:
                self._wconn.execute("ROLLBACK")
            raise
        return result

    async def _write_locked(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(writer connection)`` in a short write transaction of its own, committed when
        it returns (rolled back if it raises): for rows outside the log's batches, such as a
        subclass's administration, serialized with every other writer of the file."""
        async with self._wlock:
            await self._take_queue()
            try:
                result: _T = await self._writer.run(self._locked_sync, fn)
            except (sqlite3.Error, OSError) as e:
                full = self._full(e)
                if full is None:
                    raise
                raise full from e
            finally:
                self._queue.release()
            return result

    async def _take_queue(self) -> None:
        timeout = self._busy_ms / 1000
        if not await self._queue.take(timeout):
            raise WriterBusyError(f"another process is writing to {self.path} "
                                  f"(waited {timeout:.1f}s for its turn)")

    def _finish(self, statements: Statements) -> None:
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
    async def _transaction(self) -> AsyncIterator[SqliteWriteTx]:
        if self._last_adds > LONE_ENTRIES:  # entries are arriving together: gather them
            for _ in range(GATHER_TURNS):
                await asyncio.sleep(0)
        async with self._wlock:
            await self._take_queue()
            try:
                async with self._locked_transaction() as tx:
                    yield tx
            finally:
                self._queue.release()

    @asynccontextmanager
    async def _locked_transaction(self) -> AsyncIterator[SqliteWriteTx]:
        """The transaction proper, once this store's turn in the writer queue has come."""
        try:
            latest = self._begin_now()
            if isinstance(latest, _Busy):  # another connection writes: wait in a thread
                latest = await self._writer.run(self._begin)
        except (sqlite3.Error, OSError) as e:
            full = self._full(e)
            if full is None:
                raise
            raise full from e
        tx = self._new_tx(latest)
        try:
            tx.active_log = _active_sync(self._wconn)
            yield tx
            lone = tx._adds <= LONE_ENTRIES and self._last_adds <= LONE_ENTRIES
            self._last_adds = tx._adds
            if lone:
                self._finish(tx._statements)
            else:
                await self._writer.run(self._finish, tx._statements)
        except BaseException as e:
            await self._writer.run(self._abort)
            full = self._full(e)
            if full is not None:
                raise full from e
            raise
        tx._committed()

    def transaction(self) -> AbstractAsyncContextManager[SqliteWriteTx]:
        return self._transaction()

    def read_tiles_now(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        """Synchronous :meth:`read_tiles` for a handful of keys (see ``_point``)."""
        return read_tiles_sync(self._point, keys, self._t)

    async def close(self) -> None:
        self._point.close()
        await self._reader.close()
        async with self._wlock:
            await self._writer.run(self._wconn.close)
            self._writer.stop()
            self._queue.close()


async def _history(conn: aiosqlite.Connection, t: Tables, limit: int) -> list[CheckpointRecord]:
    try:
        rows = await conn.execute_fetchall(
            f"SELECT size, time, note FROM {t.checkpoints} ORDER BY size DESC LIMIT ?", (limit,))
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return []
        raise
    return [CheckpointRecord(r[0], r[1], bytes(r[2])) for r in rows]


class SqliteLogView(ReadOnlyLogView):
    """A read-only view of one log of a store (``SqliteStore.for_log``), on its connections."""

    def __init__(self, store: SqliteStore, tables: Tables) -> None:
        self._store = store
        self._t = tables

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await _read_tiles(self._store._reader, keys, self._t)

    def read_tiles_now(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        try:
            return read_tiles_sync(self._store._point, keys, self._t)
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return {}
            raise

    async def latest(self) -> CheckpointRecord | None:
        return await _latest(self._store._reader, self._t)

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return await _history(self._store._reader, self._t, limit)


    async def probe_space(self, nbytes: int) -> None:
        await self._store.probe_space(nbytes)



def _connect_writer(path: Path, busy_ms: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # a new file only (before WAL fixes it)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.executescript(_SCHEMA)
    return conn


class _Work(Protocol):
    """What the writer thread does with a job: :meth:`call` it, then have its loop
    :meth:`settle` it (a :class:`_Job` of any result type)."""

    loop: asyncio.AbstractEventLoop

    def call(self) -> None: ...

    def settle(self) -> None: ...


class _Job(Generic[_T]):
    """One call for the writer thread, and how its waiter hears of the outcome."""

    __slots__ = ("after", "args", "error", "finished", "fn", "fut", "loop", "result")

    result: _T
    """What ``fn`` returned, once it returned (unset before, and when it raised)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., _T],
                 args: tuple[object, ...]) -> None:
        self.loop = loop
        self.fn = fn
        self.args = args
        self.fut: asyncio.Future[_T] = loop.create_future()
        self.after: asyncio.Future[None] | None = None  # set by a cancelled waiter
        self.finished = False
        self.error: BaseException | None = None

    def call(self) -> None:
        """On the writer thread: run the call, keep what it returned or raised."""
        try:
            self.result = self.fn(*self.args)
        except BaseException as e:  # handed to the waiter, whatever it is
            self.error = e

    def settle(self) -> None:
        """On the loop's thread, once the call returned or raised."""
        self.finished = True
        if not self.fut.done():
            if self.error is not None:
                self.fut.set_exception(self.error)
            else:
                self.fut.set_result(self.result)
        if self.after is not None and not self.after.done():
            self.after.set_result(None)
        self.error = None  # no cycle through the traceback


class _WriterThread:
    """The thread that runs a store's writer-connection work, one job at a time, in order.

    A dedicated thread with a plain queue, rather than ``asyncio.to_thread``: a trip through
    the default executor (its concurrent future, the chained asyncio future, the task around
    ``to_thread``, ``asyncio.shield``) cost about 1.5 times the event loop's CPU of this one
    (benchmarks/docs/history.md, notarize_cpu), and every commit makes one. The jobs are already
    serialized by the store's ``_wlock``, so one thread loses nothing; it is a daemon and
    started on first use.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.call()
            with contextlib.suppress(RuntimeError):  # the loop closed without waiting
                job.loop.call_soon_threadsafe(job.settle)
            del job

    async def run(self, fn: Callable[[*_Args], _T], *args: *_Args) -> _T:
        """``fn(*args)`` on the thread, waited for even if the caller is cancelled.

        A commit that has started must finish (or fail) before anything else touches the
        connection, or a rollback could race it; the cancellation is delivered afterwards.
        """
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        loop = asyncio.get_running_loop()
        job = _Job(loop, fn, args)
        self._jobs.put(job)
        try:
            return await job.fut
        except asyncio.CancelledError:
            if not job.finished:  # the call still runs (or is queued): wait for its end
                job.after = loop.create_future()
                await job.after
            raise

    def stop(self) -> None:
        """Let the thread end once its queued jobs are done."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None
