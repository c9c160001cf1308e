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

The layout of a log's tables and their reads are in :mod:`ledger.storage.sqlite_layout`, the
writer's thread in :mod:`ledger.storage.sqlite_thread`. What a store shares with its write
transactions is one :class:`SqliteWriter`, which the store creates and each transaction
receives; the notary's store extends the transaction through its documented API
(:class:`SqliteWriteTx`, :class:`~ledger.storage.base.TxHooks`).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Self, TypeVar

import aiosqlite

from ledger.core.tileparts import BundleEnd, plan_writes
from ledger.core.tiles import TILE_WIDTH
from ledger.storage.base import (
    CheckpointRecord,
    LogRecord,
    ReadOnlyLogView,
    StorageFullError,
    StoreError,
    TileKey,
    TxHooks,
    WitnessState,
    WriterBusyError,
)
from ledger.storage.sqlite_layout import (
    LOG0,
    Tables,
    has_table,
    history_async,
    latest_async,
    latest_sync,
    part_id,
    read_entries_sync,
    read_tiles_async,
    read_tiles_sync,
    tile_id,
)
from ledger.storage.sqlite_thread import WriterThread
from ledger.storage.writer_queue import WriterQueue

__all__ = [
    "LOG0",
    "SqliteLogView",
    "SqliteStore",
    "SqliteWriteTx",
    "SqliteWriter",
    "Tables",
    "latest_sync",
    "logs_sync",
    "multi_row",
    "read_tiles_sync",
]

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


_T = TypeVar("_T")

Statements = list[tuple[str, list[Sequence[object]]]]


class _Busy:
    """The write lock is held by another connection (see :meth:`SqliteStore._begin_now`)."""


_BUSY = _Busy()


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


@dataclass
class SqliteWriter:
    """What a :class:`SqliteStore` shares with its write transactions: the writer connection,
    the thread that runs its work, and what the store knows of its current log as it last
    committed it. The store creates it; each transaction starts from it and, once committed,
    leaves its own there (:meth:`SqliteWriteTx.committed`).

    ``conn`` is used one call at a time (the store's ``_wlock``): from the thread, and from
    the caller's thread only for what cannot wait (trying the lock, reads under it).
    """

    path: Path
    conn: sqlite3.Connection
    thread: WriterThread
    tables: Tables = LOG0
    log_number: int = 0
    last_history: float | None = None  # the newest history checkpoint's time; None: unread
    last_adds: int = 0  # entries the last commit added (see LONE_ENTRIES)
    bundle_end: BundleEnd | None = None  # the edge bundle as this store last committed it
    last_written: CheckpointRecord | None = None  # the checkpoint it last committed

    def use_log(self, n: int) -> None:
        """Write to log ``n`` from now on (what is known of the log written before is
        forgotten: it is another tree)."""
        if n == self.log_number:
            return
        self.tables, self.log_number = Tables.of(n), n
        self.last_history = None
        self.bundle_end = None
        self.last_written = None
        self.last_adds = 0

    def last_history_time(self, t: Tables) -> float:
        """The newest history checkpoint's time in log tables ``t`` (-inf: none)."""
        row = self.conn.execute(f"SELECT max(time) FROM {t.checkpoints}").fetchone()
        return float(row[0]) if row and row[0] is not None else float("-inf")


class SqliteWriteTx(TxHooks):
    """One write transaction: the lock is held, writes are buffered until the commit.

    Its extension API (the notary's store subclasses it): add rows with :meth:`queue`, which
    run in the commit's trip in the order queued; read under the lock with
    :meth:`read_locked` (a trip to the writer thread) or :meth:`read_locked_now` (on the
    caller's thread); :meth:`alone_since_last_commit` says whether another connection wrote
    since this store's last commit; and the hooks of :class:`~ledger.storage.base.TxHooks`.
    The store reads :attr:`statements` and :attr:`adds` to commit it.
    """

    def __init__(self, writer: SqliteWriter, latest: CheckpointRecord | None) -> None:
        self._w = writer
        self._latest = latest
        self._t = writer.tables
        self.log_number = writer.log_number
        self.active_log = writer.log_number  # set under the lock by the store
        self._last_history = writer.last_history
        self._switched = False
        self._base: CheckpointRecord | None = None  # the last write's, once switched
        self.statements: Statements = []  # what the commit runs, in order
        self._pending_history: float | None = None
        self.adds = 0  # entries this transaction's checkpoint adds to the stored one
        self._bundle_end = writer.bundle_end  # the store's, then what this commit leaves
        self._written: CheckpointRecord | None = None

    def queue(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run ``sql`` for each of ``rows`` in the commit; an ``INSERT … VALUES (?, …)`` of
        several rows becomes a few statements of many rows each (:func:`multi_row`)."""
        if rows:
            self.statements.extend(multi_row(sql, rows))

    async def read_locked(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(writer connection)`` in a worker thread, inside this transaction (one trip)."""
        result: _T = await self._w.thread.run(fn, self._w.conn)
        return result

    def read_locked_now(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(writer connection)`` on the caller's thread, inside this transaction: for a few
        indexed reads, cheaper than a trip to the worker thread. Safe because the transaction
        holds the store's writer lock and no trip is running between two awaits."""
        return fn(self._w.conn)

    def committed(self) -> None:
        """What this transaction leaves becomes the store's (its log, after a switch)."""
        w = self._w
        if self._switched:
            w.use_log(self.log_number)
            w.last_history = self._last_history
        elif self._pending_history is not None:
            w.last_history = self._pending_history
        w.bundle_end = self._bundle_end
        if self._written is not None:
            w.last_written = self._written

    async def logs(self) -> list[LogRecord]:
        return self.read_locked_now(logs_sync)

    async def put_log(self, record: LogRecord) -> None:
        self.statements.append((
            f"INSERT OR REPLACE INTO logs ({_LOG_COLUMNS}) VALUES ({', '.join('?' * 10)})",
            [record.row()]))

    async def switch_log(self, n: int, *, create: bool = False) -> None:
        """See :class:`~ledger.storage.base.RollingTx`. The new log's tables are created
        at once (DDL inside the transaction: rolled back with it)."""
        t = Tables.of(n)
        conn = self._w.conn
        if not has_table(conn, t.state):
            if not create:
                raise StoreError(f"log {n} has no tables in {self._w.path}")
            for sql in t.schema():
                conn.execute(sql)
        self._t, self.log_number, self._switched = t, n, True
        self._latest = self._base = latest_sync(conn, t)
        self._written = None
        self._bundle_end = None
        self.adds = 0
        self._last_history = self._w.last_history_time(t)

    def alone_since_last_commit(self) -> bool:
        """Whether the stored checkpoint is the one this store committed last: no other
        connection has appended to the log since, so what this store knows of its own
        commits is all there is."""
        return self._latest is not None and self._latest == self._w.last_written

    async def latest(self) -> CheckpointRecord | None:
        return self._latest

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        got: dict[TileKey, bytes] = await self._w.thread.run(
            read_tiles_sync, self._w.conn, keys, self._t)
        return got

    async def read_entries(self, start: int, end: int) -> list[bytes]:
        conn = self._w.conn
        got: list[bytes]
        if end - start > TILE_WIDTH:  # a long catch-up: on the worker thread, as bulk reads
            got, known = await self._w.thread.run(
                read_entries_sync, conn, start, end, self._bundle_end, self._t)
        else:  # a part or two (see read_locked_now)
            got, known = read_entries_sync(conn, start, end, self._bundle_end, self._t)
        self._bundle_end = known
        return got

    async def write(self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord) -> None:
        t = self._t
        # What an earlier write of this transaction left is the base of this one (a roll
        # writes a log's last entry, then switches, then writes the next log's first state).
        base = self._base if self._switched else self._latest
        cp = self._written = self._base = checkpoint
        before = base.size if base is not None else 0
        self.adds = cp.size - before
        plan = plan_writes(tiles, before, cp.size, self._bundle_end)
        self.queue(f"INSERT OR REPLACE INTO {t.tiles} (id, data) VALUES (?, ?)",
                    [(tile_id(k), data) for k, data in plan.whole])
        self.queue(f"INSERT OR REPLACE INTO {t.parts} (id, data) VALUES (?, ?)",
                    [(part_id(tile_id(k), start), data) for k, start, data in plan.parts])
        self.queue(f"DELETE FROM {t.parts} WHERE id BETWEEN ? AND ?",
                    [(part_id(tile_id(k), 0), part_id(tile_id(k), TILE_WIDTH - 1))
                     for k in plan.cleared])
        self._bundle_end = plan.bundle_end or self._bundle_end
        self.queue(f"INSERT OR REPLACE INTO {t.state} (one, size, time, note) VALUES (1, ?, ?, ?)",
                    [(cp.size, cp.time, cp.note)])
        last = self._last_history
        if last is None:
            last = await self._w.thread.run(self._w.last_history_time, t)
        if cp.time - last >= HISTORY_INTERVAL:
            self.queue(f"INSERT OR REPLACE INTO {t.checkpoints} (size, time, note) "
                        "VALUES (?, ?, ?)", [(cp.size, cp.time, cp.note)])
            self._pending_history = self._last_history = cp.time


class SqliteStore:
    """A log in one SQLite file. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: aiosqlite.Connection):
        self.path = path
        # Used one call at a time (_wlock): from the writer thread, and from the caller's thread
        # only for what cannot wait (trying the lock, reads under it).
        self._wconn = writer  # shared with the transactions through self._w
        self._busy_ms = int(writer.execute("PRAGMA busy_timeout").fetchone()[0])
        # The writer never waits in SQLite's busy handler except in _lock (a worker thread):
        # with the write lock held nothing it runs can be busy in WAL mode (reads see their
        # snapshot, commits' checkpoints are passive), and the lock is tried on the loop's
        # thread without waiting (_begin_now), so no statement there has to set it first.
        writer.execute("PRAGMA busy_timeout = 0")
        self._wlock = asyncio.Lock()
        self._writer = WriterThread(f"sqlite writer {path.name}")
        # Taken before SQLite's write lock, so that writer processes take turns (the module's
        # theory of operation).
        self._queue = WriterQueue(path)
        self._reader = reader
        self._w = SqliteWriter(path, writer, self._writer)
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
        return SqliteWriteTx(self._w, latest)

    @property
    def log_number(self) -> int:
        return self._w.log_number

    @property
    def _t(self) -> Tables:
        return self._w.tables

    def use_log(self, n: int) -> None:
        """Read from and write to log ``n`` from now on (what this store knows of the log it
        wrote before is forgotten: it is another tree)."""
        self._w.use_log(n)

    async def logs(self) -> list[LogRecord]:
        return logs_sync(self._point)

    def for_log(self, n: int) -> SqliteLogView:
        return SqliteLogView(self._reader, self._point, Tables.of(n), self.probe_space)

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await read_tiles_async(self._reader, keys, self._t)

    async def latest(self) -> CheckpointRecord | None:
        return await latest_async(self._reader, self._t)

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return await history_async(self._reader, self._t, limit)

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
        if self._w.last_adds > LONE_ENTRIES:  # entries are arriving together: gather them
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
            lone = tx.adds <= LONE_ENTRIES and self._w.last_adds <= LONE_ENTRIES
            self._w.last_adds = tx.adds
            if lone:
                self._finish(tx.statements)
            else:
                await self._writer.run(self._finish, tx.statements)
        except BaseException as e:
            await self._writer.run(self._abort)
            full = self._full(e)
            if full is not None:
                raise full from e
            raise
        tx.committed()

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


class SqliteLogView(ReadOnlyLogView):
    """A read-only view of one log of a store (``SqliteStore.for_log``), on its connections."""

    def __init__(self, reader: aiosqlite.Connection, point: sqlite3.Connection, tables: Tables,
                 probe_space: Callable[[int], Awaitable[None]]) -> None:
        self._reader = reader
        self._point = point
        self._t = tables
        self._probe_space = probe_space  # the store's

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await read_tiles_async(self._reader, keys, self._t)

    def read_tiles_now(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        try:
            return read_tiles_sync(self._point, keys, self._t)
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return {}
            raise

    async def latest(self) -> CheckpointRecord | None:
        return await latest_async(self._reader, self._t)

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return await history_async(self._reader, self._t, limit)

    async def probe_space(self, nbytes: int) -> None:
        await self._probe_space(nbytes)


def _connect_writer(path: Path, busy_ms: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # a new file only (before WAL fixes it)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.executescript(_SCHEMA)
    return conn

