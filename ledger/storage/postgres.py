"""PostgreSQL backend (asyncpg): one log shared by any number of processes, on any machines.

The commit protocol is docs/design.md's "one log, many processes": a write transaction starts with
``SELECT … FOR UPDATE`` on the log's single state row, which is the log's write lock across every
process on the database; the writer then sees the checkpoint as the last committer left it,
catches up from the tiles that committer wrote, and writes its own tiles, bundles, checkpoint and
(through :attr:`PostgresWriteTx.handle`) its own rows, all committed at once. The state row exists
from the moment the schema does (with no checkpoint yet), so even the first commit on an empty
database is serialized: two processes starting at once create one log.

The schema is versioned per component (``schema_versions``) and created or migrated inside a
transaction holding an advisory lock, so concurrent starts never race on ``CREATE TABLE``;
a database whose schema is newer than this code is refused rather than used.

Availability: the URL may name several hosts with ``target_session_attrs=read-write``, so new
connections find the primary after a failover. Reads, and a write transaction up to the moment it
holds the lock, are retried with exponential back-off for ``retry_for`` seconds when the server
cannot be reached; after that, or when the connection is lost once writes have started (the
transaction rolled back, or, during ``COMMIT``, its outcome is unknown), the caller gets
:class:`~ledger.storage.base.StoreUnavailableError`, which HTTP answers as 503. A commit whose
outcome is unknown was never acknowledged; the sequencer re-reads the store before its next one.

asyncpg is an optional dependency (the ``postgres`` extra): importing this module without it
raises a :class:`~ledger.storage.base.StoreError` that says how to install it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, Self, TypeAlias, TypeVar

from ledger.core.compact import bundle_keys, entries_between
from ledger.core.tileparts import BundleEnd, entries_from_parts, plan_writes
from ledger.core.tiles import ENTRIES_LEVEL, TILE_HEIGHT, TILE_WIDTH
from ledger.storage.base import (
    POSTGRES_EXTRA_MISSING,
    CheckpointRecord,
    LogRecord,
    ReadOnlyLogView,
    StorageFullError,
    StoreError,
    StoreUnavailableError,
    TileKey,
    TxHooks,
    WitnessState,
    WriterBusyError,
    log_suffix,
)
from ledger.storage.postgres_failures import Backoff, describe, transient
from ledger.storage.postgres_lease import PostgresLease
from ledger.storage.postgres_schema import LEDGER_MIGRATIONS, lz4

try:
    import asyncpg
except ImportError as e:  # pragma: no cover - exercised only where the extra is missing
    raise StoreError(POSTGRES_EXTRA_MISSING) from e

__all__ = ["HISTORY_INTERVAL", "PgConnection", "PostgresLease", "PostgresStore",
           "PostgresWriteTx", "is_postgres_url", "migrate", "numbered", "shift_params"]

HISTORY_INTERVAL = 60.0  # keep at least one checkpoint a minute in the history
SCHEMA_LOCK = 0x6C6F67736368656D  # advisory lock key held while creating or migrating the schema
PLANNER_SETTINGS = {"enable_seqscan": "off", "jit": "off"}
"""Every statement here finds its rows by an indexed key, but a cached plan is made from the
sizes of the tables when it is made: a batch's screen planned on a new database (a few hundred
receipts) scanned all of ``notary_receipts`` at every later batch. Index lookups at any size;
no JIT, which a plan with a scan no index can replace (its cost inflated) compiled each time."""

T = TypeVar("T")

PgConnection: TypeAlias = "asyncpg.Connection | asyncpg.pool.PoolConnectionProxy"
"""A connection of its own (``asyncpg.connect``) or the pool's proxy for one (``acquire``)."""

@dataclass(frozen=True)
class _Sql:
    """One log's statements: log 0's tables are the original ones, log n's end in ``_n``."""

    read_tiles: str
    read_parts: str
    latest: str
    head: str
    history: str
    write_ctes: tuple[str, ...]
    schema: str

    @classmethod
    def of(cls, n: int) -> _Sql:
        x = log_suffix(n)
        return cls(
            read_tiles=(
                f"SELECT t.level, t.idx, t.data FROM ledger_tile_data{x} t "
                "JOIN unnest($1::smallint[], $2::bigint[]) AS k(level, idx) "
                "ON t.level = k.level AND t.idx = k.idx"),
            read_parts=(f"SELECT start, data FROM ledger_tile_parts{x} WHERE level = $1 "
                        "AND idx = $2 AND start >= $3 ORDER BY start"),
            latest=f"SELECT size, time, note, history_time FROM ledger_state{x} WHERE one = 1",
            head=f"SELECT size, time, note FROM ledger_state{x} WHERE one = 1",
            history=(f"SELECT size, time, note FROM ledger_checkpoints{x} "
                     "ORDER BY size DESC LIMIT $1"),
            # The checkpoint; tiles, bundles and their parts; (every HISTORY_INTERVAL) a
            # history row: data-modifying CTEs of one statement, each numbering its own
            # arguments from $1, to which a subclass adds its own rows (see flush).
            write_ctes=(
                f"""s AS (
    UPDATE ledger_state{x} SET size = $1, time = $2, note = $3,
        history_time = CASE WHEN $4 THEN $2 ELSE history_time END
    WHERE one = 1)""",
                f"""t AS (
    INSERT INTO ledger_tiles{x} (level, idx, data)
    SELECT unnest($1::smallint[]), unnest($2::bigint[]), unnest($3::bytea[])
    ON CONFLICT (level, idx) DO UPDATE SET data = excluded.data)""",
                f"""p AS (
    INSERT INTO ledger_tile_parts{x} (level, idx, start, data)
    SELECT unnest($1::smallint[]), unnest($2::bigint[]), unnest($3::smallint[]),
        unnest($4::bytea[])
    ON CONFLICT (level, idx, start) DO UPDATE SET data = excluded.data)""",
                f"""c AS (
    DELETE FROM ledger_tile_parts{x} d USING unnest($1::smallint[], $2::bigint[]) AS k(level, idx)
    WHERE d.level = k.level AND d.idx = k.idx)""",
                f"""h AS (
    INSERT INTO ledger_checkpoints{x} (size, time, note) VALUES ($1, $2, $3)
    ON CONFLICT (size) DO NOTHING)""",
            ),
            schema=f"""
    CREATE TABLE ledger_tiles{x} (
        level smallint NOT NULL, idx bigint NOT NULL, data bytea NOT NULL,
        PRIMARY KEY (level, idx));
    CREATE TABLE ledger_tile_parts{x} (
        level smallint NOT NULL, idx bigint NOT NULL, start smallint NOT NULL,
        data bytea NOT NULL, PRIMARY KEY (level, idx, start));
    CREATE TABLE ledger_state{x} (
        one smallint PRIMARY KEY CHECK (one = 1),
        size bigint, time double precision, note bytea,
        history_time double precision NOT NULL DEFAULT '-infinity');
    INSERT INTO ledger_state{x} (one) VALUES (1);
    CREATE TABLE ledger_checkpoints{x} (
        size bigint PRIMARY KEY, time double precision NOT NULL, note bytea NOT NULL);
    CREATE VIEW ledger_tile_data{x} AS
    SELECT t.level, t.idx, t.data || COALESCE(
        (SELECT string_agg(p.data, ''::bytea ORDER BY p.start) FROM ledger_tile_parts{x} p
         WHERE p.level = t.level AND p.idx = t.idx), ''::bytea) AS data
    FROM ledger_tiles{x} t;
    """ + lz4(x))


_LOG0 = _Sql.of(0)
_LOCK_STATE = ("SELECT size, time, note, history_time, active_log FROM ledger_state "
               "WHERE one = 1 FOR UPDATE")
"""The write lock of every log: log 0's state row, always (a roll and a commit serialize)."""
_LOG_COLUMNS = ("n, origin, shard, state, started, frozen_at, final_size, min_index, vkeys, "
                "reason")
_READ_LOGS = f"SELECT {_LOG_COLUMNS} FROM ledger_logs ORDER BY n"
_PUT_LOG = (f"INSERT INTO ledger_logs ({_LOG_COLUMNS}) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (n) DO UPDATE SET "
            "origin = excluded.origin, shard = excluded.shard, state = excluded.state, "
            "started = excluded.started, frozen_at = excluded.frozen_at, "
            "final_size = excluded.final_size, min_index = excluded.min_index, "
            "vkeys = excluded.vkeys, reason = excluded.reason")

_PARAM = re.compile(r"\$(\d+)")


@functools.lru_cache(maxsize=256)
def shift_params(sql: str, by: int) -> str:
    """``sql`` with each ``$n`` renumbered ``$(n + by)``, to follow ``by`` earlier arguments
    in one statement (remembered: every commit shifts the same few statements alike)."""
    return _PARAM.sub(lambda m: f"${int(m.group(1)) + by}", sql)


def is_postgres_url(text: str) -> bool:
    """Whether a ``--database`` value names PostgreSQL (else it is SQLite)."""
    return text.startswith(("postgresql://", "postgres://"))


async def migrate(conn: PgConnection, component: str, migrations: Sequence[str]) -> int:
    """Bring ``component``'s tables to the newest version, inside the caller's transaction
    (which must hold :data:`SCHEMA_LOCK`). Returns the version the database is now at."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_versions (component text PRIMARY KEY, "
        "version integer NOT NULL)")
    have = await conn.fetchval("SELECT version FROM schema_versions WHERE component = $1",
                               component)
    have = 0 if have is None else int(have)
    if have > len(migrations):
        raise StoreError(
            f"the database's {component} schema is version {have}, newer than this program's "
            f"{len(migrations)}: upgrade the program before using this database")
    for version in range(have + 1, len(migrations) + 1):
        await conn.execute(migrations[version - 1])
        await conn.execute(
            "INSERT INTO schema_versions (component, version) VALUES ($1, $2) "
            "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            component, version)
    return len(migrations)


class PostgresWriteTx(TxHooks):
    """One open write transaction on one connection; it holds the state row's lock.

    Its extension API (the notary's store subclasses it): the hooks of
    :class:`~ledger.storage.base.TxHooks`, of which :meth:`more_writes` adds a subclass's rows
    to the commit's one statement, :attr:`handle`, the connection, for reads under the
    lock, and :meth:`catch_up_read`, the log's own read under the lock, to be sent with the
    subclass's first statement. The store starts it on its log (:meth:`begin_on`) and sends
    it (:meth:`flush`).
    """

    def __init__(self, conn: PgConnection, latest: CheckpointRecord | None,
                 history_time: float) -> None:
        self._conn = conn
        self._latest = latest
        self._history_time = history_time
        self._pending: tuple[Mapping[TileKey, bytes], CheckpointRecord] | None = None
        self.bundle_end: BundleEnd | None = None  # the store's, then what this commit leaves
        self._sql = _LOG0
        self.log_number = 0  # set by the store (the log it is on)
        self.active_log = 0  # set by the store, from the locked row (begin_on)
        self.switched = False
        # The base of the pending write: the stored checkpoint, or (after a switch with
        # writes before it) what the last write left.
        self._base: CheckpointRecord | None = latest
        # The edge bundle's parts read ahead with a subclass's statement (catch_up_read):
        # (bundle, first position) asked, then with its parts from there on, until
        # read_entries takes them.
        self._ahead_of: tuple[int, int] | None = None
        self._read_ahead: tuple[int, int, list[tuple[int, bytes]]] | None = None

    def begin_on(self, sql: _Sql, log_number: int, active_log: int,
                 bundle_end: BundleEnd | None) -> None:
        """The log the store is on, the registry's active log as of the lock, and the edge
        bundle as the store last committed it."""
        self._sql, self.log_number, self.active_log = sql, log_number, active_log
        self.bundle_end = bundle_end

    @property
    def handle(self) -> PgConnection:
        """The asyncpg connection of this transaction, for rows that commit with the log."""
        return self._conn

    async def latest(self) -> CheckpointRecord | None:
        return self._latest

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await _read_tiles(self._conn, keys, self._sql)

    async def logs(self) -> list[LogRecord]:
        return [LogRecord.from_row(tuple(r)) for r in await self._conn.fetch(_READ_LOGS)]

    async def put_log(self, record: LogRecord) -> None:
        await self._conn.execute(_PUT_LOG, *record.row())
        if record.state == "active":
            await self._conn.execute("UPDATE ledger_state SET active_log = $1 WHERE one = 1",
                                     record.n)

    async def switch_log(self, n: int, *, create: bool = False) -> None:
        """See :class:`~ledger.storage.base.RollingTx`: what was written to the log so far is
        sent now (rows of a subclass stay for the commit), then the rest is on log ``n``."""
        if self._pending is not None:
            statement, args = self._log_writes()
            await self._conn.execute(statement, *args)
            self._pending = None
        sql = _Sql.of(n)
        exists = await self._conn.fetchval("SELECT to_regclass($1) IS NOT NULL",
                                           f"ledger_state{log_suffix(n)}")
        if not exists:
            if not create:
                raise StoreError(f"log {n} has no tables in the database")
            await self._conn.execute(sql.schema)
        row = await self._conn.fetchrow(sql.latest)
        self._sql, self.log_number, self.switched = sql, n, True
        self._ahead_of = self._read_ahead = None
        self._latest = self._base = _record(row)
        self._history_time = float(row["history_time"])
        self.bundle_end = None

    async def read_entries(self, start: int, end: int) -> list[bytes]:
        """As SQLite's: from inside the edge bundle, only its parts from ``start`` on (one
        round trip, as the whole bundle would be), and where they end is remembered."""
        out: list[bytes] = []
        if start & (TILE_WIDTH - 1) and start < end:
            parts = self._parts_read_ahead(start)
            if parts is None:
                rows = await self._conn.fetch(self._sql.read_parts, ENTRIES_LEVEL,
                                              start >> TILE_HEIGHT, start & (TILE_WIDTH - 1))
                parts = [(r[0], bytes(r[1])) for r in rows]
            out, start, self.bundle_end = entries_from_parts(parts, start, end, self.bundle_end)
        if start < end:
            out.extend(entries_between(await self.read_tiles(bundle_keys(start, end)),
                                       start, end))
        return out

    def catch_up_read(self, first: int) -> tuple[str, list[object]] | None:
        """For a subclass's first statement under the lock: the read with which the writer
        will catch up on another process's commit, so that it costs no round trip of its own.

        When the stored log grew past where this store last committed its edge bundle (another
        process appended), that read is the bundle's parts from there on (``read_entries``):
        given here as a query of (start, data) rows, its arguments numbered from ``$first``,
        to be sent with the subclass's statement; the rows come back through
        :meth:`parts_read_ahead`. None when no such read is due."""
        edge, latest = self.bundle_end, self._latest
        if edge is None or latest is None or self.switched or self._pending is not None \
                or not 0 < edge[1] < TILE_WIDTH \
                or not (edge[0] << TILE_HEIGHT) + edge[1] < latest.size:
            return None
        self._ahead_of = (edge[0], edge[1])
        return shift_params(self._sql.read_parts, first - 1), [ENTRIES_LEVEL, edge[0], edge[1]]

    def parts_read_ahead(self, rows: Sequence[tuple[int, bytes]]) -> None:
        """The rows of :meth:`catch_up_read`'s query, as the subclass's statement returned
        them (in any order)."""
        if self._ahead_of is not None:
            self._read_ahead = (*self._ahead_of, sorted((int(s), bytes(d)) for s, d in rows))
            self._ahead_of = None

    def _parts_read_ahead(self, start: int) -> list[tuple[int, bytes]] | None:
        """The edge bundle's parts from ``start`` on, as :meth:`catch_up_read` read them under
        this lock (nothing of this transaction is written before its commit, so they are what
        a read now would give); None if they were not read ahead for that position."""
        ahead, self._read_ahead = self._read_ahead, None
        if ahead is None or start >> TILE_HEIGHT != ahead[0] \
                or (start & (TILE_WIDTH - 1)) < ahead[1]:
            return None
        return [(s, d) for s, d in ahead[2] if s >= start & (TILE_WIDTH - 1)]

    async def write(self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord) -> None:
        # Written at commit, in one statement; a later write in the same transaction wins.
        self._pending = (tiles, checkpoint)

    def _log_ctes(self) -> list[tuple[str, list[object]]]:
        """The pending write of the log's tiles and checkpoint: its CTEs, each with its
        arguments. One with nothing to write is left out (every CTE a statement has costs
        the server its plan's set-up and its tables' locks at each execution)."""
        if self._pending is None:
            return []
        tiles, cp = self._pending
        history = cp.time - self._history_time >= HISTORY_INTERVAL
        base = self._base
        before = base.size if base is not None else 0
        plan = plan_writes(tiles, before, cp.size, self.bundle_end)
        self.bundle_end = plan.bundle_end or self.bundle_end
        state, whole, parts, cleared, row = self._sql.write_ctes
        out: list[tuple[str, list[object]]] = [(state, [cp.size, cp.time, cp.note, history])]
        if plan.whole:
            out.append((whole, [[k[0] for k, _ in plan.whole], [k[1] for k, _ in plan.whole],
                                [d for _, d in plan.whole]]))
        if plan.parts:
            out.append((parts, [[k[0] for k, _, _ in plan.parts],
                                [k[1] for k, _, _ in plan.parts],
                                [start for _, start, _ in plan.parts],
                                [d for _, _, d in plan.parts]]))
        if plan.cleared:
            out.append((cleared, [[k[0] for k in plan.cleared], [k[1] for k in plan.cleared]]))
        if history:
            out.append((row, [cp.size, cp.time, cp.note]))
        return out

    def _log_writes(self) -> tuple[str, list[object]]:
        ctes, args = numbered(self._log_ctes())
        return "WITH " + ",\n".join(ctes) + "\nSELECT 1", args

    async def flush(self) -> None:
        """Send what the transaction wrote (the log's and :meth:`more_writes`), before
        ``COMMIT``: one statement."""
        ctes, args = numbered(self._log_ctes())
        more, more_args = self.more_writes(len(args) + 1)
        ctes.extend(more)
        args.extend(more_args)
        if ctes:
            # Each data-modifying CTE runs exactly once, whether or not the query reads it.
            await self._conn.execute("WITH " + ",\n".join(ctes) + "\nSELECT 1", *args)


def numbered(ctes: Sequence[tuple[str, Sequence[object]]], first: int = 1
             ) -> tuple[list[str], list[object]]:
    """CTEs given each with its arguments numbered from ``$1``, renumbered to follow one
    another in one statement from ``$first``; and their arguments, in order."""
    out: list[str] = []
    args: list[object] = []
    for cte, cte_args in ctes:
        out.append(shift_params(cte, first - 1 + len(args)))
        args.extend(cte_args)
    return out, args


async def _read_tiles(conn: PgConnection, keys: Sequence[TileKey], sql: _Sql = _LOG0
                      ) -> dict[TileKey, bytes]:
    keys = list(dict.fromkeys(keys))
    if not keys:
        return {}
    rows = await conn.fetch(sql.read_tiles, [k[0] for k in keys], [k[1] for k in keys])
    return {(r[0], r[1]): bytes(r[2]) for r in rows}


async def _no_reset(conn: PgConnection) -> None:
    """What a connection needs between uses here: nothing. No session state is ever left on
    one (settings are per pool, transactions always end), and asyncpg's default reset would
    cost a round trip after every read and every commit."""


def _record(row: asyncpg.Record | None) -> CheckpointRecord | None:
    if row is None or row["note"] is None:
        return None
    return CheckpointRecord(int(row["size"]), float(row["time"]), bytes(row["note"]))


class _Retrying(Protocol):
    """A store's way to run a read on a pooled connection, retrying while it is unreachable
    (:meth:`PostgresStore._retrying`)."""

    def __call__(self, fn: Callable[[PgConnection], Awaitable[T]]) -> Awaitable[T]: ...


async def _latest_of(retrying: _Retrying, sql: _Sql
                     ) -> CheckpointRecord | None:
    try:
        row = await retrying(lambda conn: conn.fetchrow(sql.head))
    except asyncpg.exceptions.UndefinedTableError:  # a roll not committed yet
        return None
    return _record(row)


async def _history_of(retrying: _Retrying, sql: _Sql, limit: int
                      ) -> list[CheckpointRecord]:
    try:
        rows = await retrying(lambda conn: conn.fetch(sql.history, limit))
    except asyncpg.exceptions.UndefinedTableError:
        return []
    return [CheckpointRecord(int(r[0]), float(r[1]), bytes(r[2])) for r in rows]


class PostgresStore:
    """A log in a PostgreSQL database. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, pool: asyncpg.Pool, url: str, *, retry_for: float, lock_timeout: float
                 ) -> None:
        self._pool = pool
        self.url = url
        self.retry_for = retry_for
        self.lock_timeout = lock_timeout
        self._wlock = asyncio.Lock()  # one write transaction per process at a time
        self._bundle_end: BundleEnd | None = None  # as this store last committed it
        self._sql = _LOG0
        self.log_number = 0

    @classmethod
    async def open(cls, url: str, *, retry_for: float = 30.0, lock_timeout: float = 10.0,
                   pool_size: int = 8, components: Sequence[tuple[str, Sequence[str]]] = ()
                   ) -> Self:
        """Connect (retrying for ``retry_for`` seconds), then create or migrate the schema.

        ``components`` are further (name, migrations) pairs, such as the notary's tables,
        migrated in the same locked transaction as the log's.
        """
        cannot = "cannot connect to the PostgreSQL database"
        backoff = Backoff(retry_for, cannot)
        while True:
            try:
                pool = await asyncpg.create_pool(
                    url, min_size=1, max_size=pool_size, command_timeout=max(retry_for, 5.0),
                    reset=_no_reset,
                    server_settings={"lock_timeout": str(int(lock_timeout * 1000)),
                                     "application_name": "ledger", **PLANNER_SETTINGS})
                break
            except Exception as e:
                if not transient(e):  # a wrong password or database name: no use retrying
                    raise StoreUnavailableError(f"{cannot}: {describe(e)}") from None
                await backoff.after(e)
        store = cls(pool, url, retry_for=retry_for, lock_timeout=lock_timeout)
        try:
            await store._retrying(lambda conn: store._migrate(conn, components))
        except BaseException:
            await store.close()
            raise
        return store

    async def _migrate(self, conn: PgConnection,
                       components: Sequence[tuple[str, Sequence[str]]]) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
            await migrate(conn, "ledger", LEDGER_MIGRATIONS)
            for name, steps in components:
                await migrate(conn, name, steps)

    async def _retrying(self, fn: Callable[[PgConnection], Awaitable[T]]) -> T:
        """Run ``fn`` on a pooled connection; retry it while the server is unreachable.

        Only for work that is safe to repeat (reads, idempotent writes, whole transactions
        that roll back on failure).
        """
        backoff = Backoff(self.retry_for)
        while True:
            conn = None
            try:
                conn = await self._pool.acquire()
                result = await fn(conn)
            except Exception as e:
                await self._discard(conn)
                await backoff.after(e)
            else:
                await self._release(conn)
                return result

    async def _release(self, conn: PgConnection) -> None:
        with contextlib.suppress(Exception):
            await self._pool.release(conn, timeout=5.0)

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        return await self._retrying(lambda conn: _read_tiles(conn, keys, self._sql))

    async def latest(self) -> CheckpointRecord | None:
        return await _latest_of(self._retrying, self._sql)

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return await _history_of(self._retrying, self._sql, limit)

    async def logs(self) -> list[LogRecord]:
        rows = await self._retrying(lambda conn: conn.fetch(_READ_LOGS))
        return [LogRecord.from_row(tuple(r)) for r in rows]

    def use_log(self, n: int) -> None:
        """Read from and write to log ``n`` from now on."""
        if n != self.log_number:
            self._sql, self.log_number = _Sql.of(n), n
            self._bundle_end = None

    def for_log(self, n: int) -> PostgresLogView:
        return PostgresLogView(self._retrying, self.probe_space, _Sql.of(n))

    async def witness_state(self) -> WitnessState | None:
        async def read(conn: PgConnection) -> WitnessState | None:
            async with conn.transaction(readonly=True, isolation="repeatable_read"):
                row = await conn.fetchrow(
                    "SELECT note FROM ledger_witness_published WHERE one = 1")
                if row is None:
                    return None
                sizes = await conn.fetch("SELECT vkey, size FROM ledger_witness_sizes")
            return WitnessState({r[0]: int(r[1]) for r in sizes},
                                None if row[0] is None else bytes(row[0]))

        return await self._retrying(read)

    async def save_witness_state(self, state: WitnessState) -> None:
        async def write(conn: PgConnection) -> None:
            async with conn.transaction():
                await conn.execute("DELETE FROM ledger_witness_sizes")
                await conn.executemany(
                    "INSERT INTO ledger_witness_sizes (vkey, size) VALUES ($1, $2)",
                    sorted(state.sizes.items()))
                await conn.execute(
                    "INSERT INTO ledger_witness_published (one, note) VALUES (1, $1) "
                    "ON CONFLICT (one) DO UPDATE SET note = excluded.note", state.published)

        await self._retrying(write)  # one transaction: a retry repeats all of it or none

    async def witnessed_finals(self) -> dict[str, bytes]:
        rows = await self._retrying(
            lambda conn: conn.fetch("SELECT origin, note FROM ledger_witness_finals"))
        return {r[0]: bytes(r[1]) for r in rows}

    async def save_witnessed_final(self, origin: str, note: bytes) -> None:
        await self._retrying(lambda conn: conn.execute(
            "INSERT INTO ledger_witness_finals (origin, note) VALUES ($1, $2) "
            "ON CONFLICT (origin) DO UPDATE SET note = excluded.note", origin, note))

    async def probe_space(self, nbytes: int) -> None:
        async def probe(conn: PgConnection) -> None:
            try:
                await conn.execute(
                    "INSERT INTO ledger_write_probe (one, data) VALUES (1, $1) "
                    "ON CONFLICT (one) DO UPDATE SET data = excluded.data", bytes(nbytes))
                await conn.execute("DELETE FROM ledger_write_probe")
            except asyncpg.exceptions.DiskFullError as e:
                raise StorageFullError(f"the PostgreSQL server's disk is full: "
                                       f"{describe(e)}") from None

        await self._retrying(probe)

    async def _begin(self) -> tuple[PgConnection, asyncpg.transaction.Transaction,
                                    asyncpg.Record]:
        """Acquire a connection, BEGIN and lock the state row, retrying while unreachable.

        Nothing has been written yet at any point where this retries.
        """
        backoff = Backoff(self.retry_for)
        while True:
            conn = None
            try:
                conn = await self._pool.acquire()
                tr = conn.transaction()
                await tr.start()
                row = await conn.fetchrow(_LOCK_STATE)
                if row is None:
                    raise StoreError("the log's state row is missing: the schema is damaged")
                return conn, tr, row
            except asyncpg.exceptions.LockNotAvailableError as e:
                await self._discard(conn)
                raise WriterBusyError(
                    f"another process held the log's write lock for over "
                    f"{self.lock_timeout:.0f}s") from e
            except Exception as e:
                await self._discard(conn)
                await backoff.after(e)

    async def _discard(self, conn: PgConnection | None) -> None:
        """Drop a connection after any failure on it: closed, never reused in whatever state
        the failure left it (an open transaction rolls back with it); the pool opens a new
        one when it needs one."""
        if conn is None:
            return
        with contextlib.suppress(Exception):
            conn.terminate()
        await self._release(conn)

    def _new_tx(self, conn: PgConnection, latest: CheckpointRecord | None, history_time: float
                ) -> PostgresWriteTx:
        """The transaction object; subclasses (the notary's store) return their own."""
        return PostgresWriteTx(conn, latest, history_time)

    def transaction(self) -> AbstractAsyncContextManager[PostgresWriteTx]:
        return self._transaction()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[PostgresWriteTx]:
        async with self._wlock:
            conn, tr, row = await self._begin()
            committing = False
            try:
                active = int(row["active_log"])
                if self.log_number != 0:  # its state row, read now that the lock is held
                    row = await conn.fetchrow(self._sql.latest)
                    if row is None:
                        raise StoreError(f"log {self.log_number}'s state row is missing")
                tx = self._new_tx(conn, _record(row), float(row["history_time"]))
                tx.begin_on(self._sql, self.log_number, active, self._bundle_end)
                yield tx
                await tx.flush()
                committing = True
                await tr.commit()
            except BaseException as e:
                await self._discard(conn)
                if isinstance(e, asyncpg.exceptions.DiskFullError):
                    raise StorageFullError(
                        f"the PostgreSQL server's disk is full ({describe(e)}): the "
                        "transaction was rolled back") from None
                if isinstance(e, Exception) and transient(e):
                    what = ("the connection was lost during COMMIT; whether it committed is "
                            "unknown, and nothing of it was acknowledged") if committing else (
                            "the transaction was rolled back")
                    raise StoreUnavailableError(
                        f"the PostgreSQL database became unavailable ({describe(e)}): "
                        f"{what}") from None
                raise
            await self._release(conn)  # committed: a connection that dies now changes nothing
            self.use_log(tx.log_number)
            self._bundle_end = tx.bundle_end
            tx.committed()

    def lease(self, name: str) -> PostgresLease:
        """The lease of job ``name`` (see :mod:`ledger.jobs.lease`): a session advisory lock."""
        return PostgresLease(self.url, name)

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self._pool.close(), 10.0)
        except (TimeoutError, Exception):
            self._pool.terminate()


class PostgresLogView(ReadOnlyLogView):
    """A read-only view of one log of a :class:`PostgresStore` (``for_log``), on its pool."""

    def __init__(self, retrying: _Retrying, probe_space: Callable[[int], Awaitable[None]],
                 sql: _Sql) -> None:
        self._retrying = retrying  # the store's
        self._probe_space = probe_space
        self._sql = sql

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        try:
            return await self._retrying(lambda conn: _read_tiles(conn, keys, self._sql))
        except asyncpg.exceptions.UndefinedTableError:
            return {}

    async def latest(self) -> CheckpointRecord | None:
        return await _latest_of(self._retrying, self._sql)

    async def history(self, limit: int = 100) -> list[CheckpointRecord]:
        return await _history_of(self._retrying, self._sql, limit)

    async def probe_space(self, nbytes: int) -> None:
        await self._probe_space(nbytes)
