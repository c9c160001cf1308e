"""The notary's store on SQLite: the log's file (``ledger.storage.sqlite``) with the notary's
tables beside the tiles, so that a receipt row and the log entry it points at commit in one
transaction. The layout is :mod:`notary.store.sqlite_schema`, its migrations
:mod:`notary.store.sqlite_migrations`.

Point reads (a receipt, usage) are indexed lookups in a WAL database, where readers never wait
for the writer: they take microseconds, less than a hop to a worker thread, so they run on the
caller's thread on their own connection. A receipt's id and digest lead to it through the lookup
tables and the keys appended since (:mod:`notary.store.sqlite_lookup`), which each commit
appends to and merges a slice of. API keys are answered from memory while no change is
signalled across processes (:class:`~notary.store.sqlite_state.KeyCache`). These caches are
one :class:`~notary.store.sqlite_state.NotaryState`, which the store shares with its
transactions.
Batch writes are buffered into the log's transaction and run in its commit trip; the screen of
a batch (duplicates, usage) reads on the writer connection under the lock, on the caller's
thread (a worker-thread trip only for a batch of more than 512 digests: see _SCREEN_NOW).
Administration takes short write transactions of its own, beside a running server in this
process or another.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Self, TypeVar, cast

import aiosqlite

from ledger.core.tiles import ENTRIES_LEVEL
from ledger.storage.base import CheckpointRecord, StoreError
from ledger.storage.sqlite import (
    SqliteStore,
    SqliteWriter,
    SqliteWriteTx,
    Tables,
    latest_sync,
    logs_sync,
    read_tiles_sync,
)
from notary.core.logs import position, split_position
from notary.core.receipts import Receipt
from notary.core.search import in_window
from notary.core.server_names import NameHold, holds_from_rows, skeletons
from notary.store import sqlite_lookup, sqlite_reclaim
from notary.store.base import (
    AllowanceConflict,
    ApiKeyListing,
    ApiKeyRecord,
    IssuedReceipt,
    ReceiptKeyRecord,
    ReceiptWithheldError,
    Screening,
    ServerNameRecord,
    ServerNameTaken,
    UsageKey,
    check_skeletons,
    new_claims,
)
from notary.store.sqlite_lookup import (
    APPEND,
    LookupView,
    MergeState,
    Runs,
    build_runs,
    merge_statements,
    read_since,
)
from notary.store.sqlite_migrations import MigrationReport, prepare
from notary.store.sqlite_schema import (
    RECEIPT_COLUMNS,
    RECEIPT_JOINS,
    Refs,
    digest_key,
    entry_at,
    from_cache,
    id_key,
    key_rows,
    lookup_salt,
    receipt_from_row,
    receipt_statements,
    refs_for,
    resolve_refs,
)
from notary.store.sqlite_state import KeyCache, NotaryState

__all__ = ["SqliteNotaryStore"]

_CHUNK = 500  # bound on the parameters of one IN (...) list
_SCREEN_NOW = 512
"""Digests a batch screen reads on the event loop's thread; more take a trip to the worker
thread. One indexed lookup of a few µs each: even a batch of 512 holds the loop for about a
millisecond, while a trip costs its own CPU in hand-offs and adds the screen's wait to every
commit (at 64 connections a batch is about 32 to 64 entries, which used to make a third trip)."""

_BY_ID = (f"SELECT {RECEIPT_COLUMNS} FROM receipt_ids i JOIN receipts r ON r.idx = i.idx "
          f"{RECEIPT_JOINS} WHERE i.k = ?")
_BY_DIGEST = (f"SELECT {RECEIPT_COLUMNS} FROM receipt_digests i JOIN receipts r ON r.idx = i.idx "
              f"{RECEIPT_JOINS} WHERE i.k IN ({{marks}})")
_AT = f"SELECT {RECEIPT_COLUMNS} FROM receipts r {RECEIPT_JOINS} WHERE r.idx IN ({{marks}})"


_T = TypeVar("_T")

_SCREEN_STATE = ("SELECT (SELECT last_issued_at FROM notary_state WHERE one = 1), "
                 "(SELECT n FROM key_version WHERE one = 1), "
                 "(SELECT version FROM skeleton_version WHERE one = 1)")


def _rows_in(conn: sqlite3.Connection, query: str, values: Sequence[int]
             ) -> list[tuple[int, bytes, str, str, str]]:
    """``query`` (with ``{marks}`` for an ``IN`` list) for every value, in chunks."""
    rows: list[tuple[int, bytes, str, str, str]] = []
    for i in range(0, len(values), _CHUNK):
        chunk = values[i : i + _CHUNK]
        rows.extend(conn.execute(query.format(marks=",".join("?" * len(chunk))), chunk))
    return rows


def _candidates(conn: sqlite3.Connection, query: str, keys: Sequence[int],
                recent: set[int]) -> list[tuple[int, bytes, str, str, str]]:
    """The receipt rows that lookup ``keys`` lead to through a lookup table (``query``) and
    those at the ``recent`` indexes that the same keys lead to (:class:`LookupView`)."""
    rows = _rows_in(conn, query, keys)
    more = sorted(recent - {row[0] for row in rows}) if recent else []
    return rows + _rows_in(conn, _AT, more) if more else rows


def _receipts_by_digest(conn: sqlite3.Connection, digests: Collection[str], salt: bytes,
                        withheld: bool, view: LookupView, keyed: dict[str, int] | None = None
                        ) -> dict[str, Receipt | None]:
    """The stored receipts of these digests (None for a withheld one, looked for only when
    ``withheld``); absent ones left out. ``keyed`` gets each digest's lookup key."""
    wanted = set(digests)
    out: dict[str, Receipt | None] = {}
    lookup = {d: digest_key(d, salt) for d in wanted}
    if keyed is not None:
        keyed.update(lookup)
    keys = sorted(set(lookup.values()))
    for receipt in _receipts(conn, _candidates(conn, _BY_DIGEST, keys, view.digests(keys))):
        if receipt.call_sha256 in wanted:
            out[receipt.call_sha256] = receipt
    rest = sorted(wanted - out.keys()) if withheld else []
    for i in range(0, len(rest), _CHUNK):
        names = rest[i : i + _CHUNK]
        marks = ",".join("?" * len(names))
        for (digest,) in conn.execute(
                f"SELECT call_sha256 FROM withheld_receipts WHERE call_sha256 IN ({marks})",
                names):
            out[digest] = None
    return out


def _log_numbers(conn: sqlite3.Connection) -> dict[str, int]:
    """Each log's number by its origin (empty for a store that never rolled: all is log 0)."""
    return {r.origin: r.n for r in logs_sync(conn)}


def _logged_by(conn: sqlite3.Connection, logged: Mapping[str, Receipt | None]
               ) -> dict[str, str]:
    """The account each logged digest was logged under (withheld ones from their row)."""
    out = {}
    numbers = _log_numbers(conn) if logged else {}
    for digest, receipt in logged.items():
        if receipt is not None:
            pos = position(numbers.get(receipt.origin, 0), receipt.index)
            row = conn.execute("SELECT a.name FROM receipts r JOIN accounts a "
                               "ON a.id = r.account WHERE r.idx = ?", (pos,)).fetchone()
        else:
            row = conn.execute("SELECT account FROM withheld_receipts WHERE call_sha256 = ?",
                               (digest,)).fetchone()
        if row is not None:
            out[digest] = str(row[0])
    return out


def _holds(conn: sqlite3.Connection, names: Collection[str]) -> dict[str, NameHold]:
    """Who holds each of ``names`` (found by the exact name) and the names confusable with
    it (by skeleton)."""
    wanted = skeletons(names)
    rows: list[tuple[str, str, str]] = []
    for column, keys in (("name", sorted(wanted)), ("skeleton", sorted(set(wanted.values())))):
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            rows.extend(conn.execute(
                "SELECT s.name, s.skeleton, a.name FROM server_names s JOIN accounts a "
                f"ON a.id = s.account WHERE s.{column} IN ({','.join('?' * len(chunk))})",
                chunk))
    return holds_from_rows(wanted, rows)


def _log_size(conn: sqlite3.Connection, n: int = 0) -> int:
    latest = latest_sync(conn, Tables.of(n))
    return 0 if latest is None else latest.size


Bundle = tuple[int, int]
"""(log number, entry bundle number): where a receipt's entry is."""


def _bundle_of(pos: int) -> Bundle:
    n, index = split_position(pos)
    return n, index >> 8


def _bundles(conn: sqlite3.Connection, wanted: Collection[Bundle]) -> dict[Bundle, bytes]:
    """Entry bundles by (log, number), each log's from its own tables."""
    by_log: dict[int, list[int]] = {}
    for n, number in wanted:
        by_log.setdefault(n, []).append(number)
    out: dict[Bundle, bytes] = {}
    for n, numbers in by_log.items():
        got = read_tiles_sync(conn, [(ENTRIES_LEVEL, b) for b in sorted(numbers)], Tables.of(n))
        out.update(((n, b), got[(ENTRIES_LEVEL, b)]) for b in numbers
                   if (ENTRIES_LEVEL, b) in got)
    missing = set(wanted) - out.keys()
    if missing:
        n, number = min(missing)
        raise StoreError(f"entry bundle {number} of log {n} is missing from the store")
    return out


def _receipts(conn: sqlite3.Connection, rows: Sequence[tuple[int, bytes, str, str, str]]
              ) -> list[Receipt]:
    """The receipts of rows of ``SELECT {RECEIPT_COLUMNS} …``, with their entries read from
    their bundles. Later than the rows' statement, but a logged entry never changes."""
    bundles = _bundles(conn, {_bundle_of(row[0]) for row in rows})
    return [receipt_from_row((*row, bundles[_bundle_of(row[0])])) for row in rows]


def _spans(conn: sqlite3.Connection) -> list[tuple[int, int]]:
    """(log number, receipts' entries) of every log, oldest first: a frozen log's last entry
    is its successor record, not a receipt's."""
    logs = logs_sync(conn)
    if not logs:
        return [(0, _log_size(conn))]
    return [(r.n, r.final_size - 1 if r.final_size is not None else _log_size(conn, r.n))
            for r in logs]


def _first_position_at(conn: sqlite3.Connection, issued_at: str,
                       spans: Sequence[tuple[int, int]]) -> int:
    """The first receipt position whose entry was issued at or after ``issued_at`` (the end
    of the newest log if none): logs are in time order, and so is each log's entries."""
    for n, size in spans:
        index = _first_index_at(conn, issued_at, size, n)
        if index < size:
            return position(n, index)
    return position(*spans[-1])


def _first_index_at(conn: sqlite3.Connection, issued_at: str, size: int, n: int = 0) -> int:
    """The first index of log ``n`` whose entry was issued at or after ``issued_at`` (``size``
    if none): a bisection over the entries, which ``issued_at`` orders (a bundle read a step)."""
    cache: dict[int, bytes] = {}

    def at(index: int) -> str:
        number = index >> 8
        if number not in cache:
            cache[number] = _bundles(conn, [(n, number)])[(n, number)]
        return entry_at(cache[number], index).issued_at

    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi) // 2
        if at(mid) < issued_at:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _usage(conn: sqlite3.Connection, keys: Collection[UsageKey]) -> dict[UsageKey, int]:
    out = {}
    for account, month in keys:
        row = conn.execute("SELECT u.count FROM usage u JOIN accounts a ON a.id = u.account "
                           "WHERE a.name = ? AND u.month = ?", (account, month)).fetchone()
        out[(account, month)] = 0 if row is None else int(row[0])
    return out


def _account_id(conn: sqlite3.Connection, account: str) -> int:
    row = conn.execute("SELECT id FROM accounts WHERE name = ?", (account,)).fetchone()
    if row is None:
        raise StoreError(f"account {account!r} does not exist")
    return int(row[0])


class SqliteNotaryWriteTx(SqliteWriteTx):
    """The log's transaction plus the notary's screen and receipt rows."""

    def __init__(self, writer: SqliteWriter, latest: CheckpointRecord | None,
                 notary: NotaryState) -> None:
        super().__init__(writer, latest)
        self._notary = notary
        self._new_refs = Refs()
        # The merge's state after this commit, the keys it appends and the runs it merged
        # from (for the view, once committed).
        self._lookup_after: tuple[MergeState, list[tuple[int, int, int]], Runs | None] | None \
            = None
        self._caught_up = False
        self._held: dict[str, str] = {}  # server names' holders, as screened, and claims
        self._digest_keys: dict[str, int] = {}  # the screen's, for the receipts' key rows

    def _catch_up(self) -> None:
        """Bring this process's view of the recent lookup keys to the store's, under the lock:
        what other processes logged and merged since. Once per transaction (no other writer
        commits while it holds the lock), and not at all when the log is as this store left it
        (nobody else logged anything)."""
        if self._caught_up or self.alone_since_last_commit():
            return
        view = self._notary.lookup
        view.apply(*self.read_locked_now(lambda conn: read_since(conn, view.seen)))
        self._caught_up = True

    async def screen(self, digests: Collection[str], usage: Collection[UsageKey],
                     servers: Collection[str] = ()) -> Screening:
        self._catch_up()  # every digest logged by any process is found below

        def read(conn: sqlite3.Connection) -> Screening:
            notary = self._notary
            found = (_receipts_by_digest(conn, digests, notary.salt, notary.may_withhold,
                                         notary.lookup, self._digest_keys) if digests else {})
            tail, version, skeleton_version = conn.execute(_SCREEN_STATE).fetchone()
            if servers:
                check_skeletons(skeleton_version)
            # Under the lock: a key revoked (committed) by any process, signalled or not, is
            # seen here, and the batch's keys are then re-checked (Notary.screen).
            changed = notary.keys.screen(conn, version)
            holds = _holds(conn, servers)
            self._held.update((n, h.holder) for n, h in holds.items() if h.holder is not None)
            return Screening(found, _usage(conn, usage), tail, keys_changed=changed,
                             logged_by=_logged_by(conn, found), servers=holds)

        if len(digests) + len(usage) + len(servers) <= _SCREEN_NOW:
            # Index lookups of a few microseconds each: less than the trip to the worker
            # thread would cost (see _SCREEN_NOW).
            return self.read_locked_now(read)
        return await self.read_locked(read)

    async def add_receipts(self, receipts: Sequence[IssuedReceipt],
                           usage: Mapping[UsageKey, int]) -> None:
        pairs = [(r.receipt, r.account) for r in receipts]
        claims = new_claims(pairs, self._held)
        refs = self._notary.refs
        statements = from_cache(refs, self._new_refs, (a for a, _ in usage),
                                lambda cached: receipt_statements(pairs, cached, claims,
                                                                  self.log_number))
        if statements is None:
            refs, missing = refs_for(pairs, (a for a, _ in usage), refs, self._new_refs)
            if missing:
                # New names (a server's first receipt, or the first batch since start): one
                # trip, inside this transaction; the ids are trusted by others only after the
                # commit.
                def resolve(conn: sqlite3.Connection) -> Refs:
                    return resolve_refs(conn, missing)

                self._new_refs.merge(await self.read_locked(resolve))
                refs.merge(self._new_refs)
            statements = receipt_statements(pairs, refs, claims, self.log_number)
        for sql, rows in statements:
            self.queue(sql, rows)
        await self._lookup_keys([r.receipt for r in receipts])
        if usage:
            self.queue("INSERT INTO usage (account, month, count) VALUES (?, ?, ?) "
                       "ON CONFLICT (account, month) DO UPDATE SET count = count + excluded.count",
                       [(refs.accounts[a], m, n) for (a, m), n in usage.items()])

    async def _lookup_keys(self, receipts: Sequence[Receipt]) -> None:
        """Append the receipts' lookup keys, and merge a slice of the generation being merged
        (closing one first when it is time): a quarter more keys of each table than are
        appended, so a generation is merged before the next one is due, and every commit does
        about the same share of the work."""
        view = self._notary.lookup
        keys = key_rows(receipts, self._notary.salt, self.log_number, self._digest_keys)
        self.queue(APPEND, keys)
        self._catch_up()  # the merge's state as committed, whoever committed it
        runs: Runs | None = None
        if self._lookup_after is not None:  # receipts added twice in one transaction
            state, earlier, runs = self._lookup_after
            keys = earlier + keys
        else:
            state = view.closes() or view.state
        if state.merging:
            runs = runs if runs is not None else view.runs
            if runs is None or not runs.covers(state):
                closing = state  # built once per generation and process, off the loop
                runs = await self.read_locked(lambda conn: build_runs(conn, closing))
            statements, state = merge_statements(state, runs, len(receipts) * 5 // 4 + 1)
            for sql, rows in statements:
                self.queue(sql, rows)
        self._lookup_after = (state, keys, runs)

    def committed(self) -> None:
        super().committed()
        self._notary.refs.merge(self._new_refs)
        if self._lookup_after is not None:
            self._notary.lookup.apply(*self._lookup_after)


class SqliteNotaryStore(SqliteStore):
    """The log and the notary's tables in one SQLite file. Open with :meth:`open`.

    ``migration`` tells what opening did to the notary's tables (created, migrated from an
    older layout, receipts withheld): see :func:`notary.store.sqlite_migrations.prepare`.
    """

    def __init__(self, path: Path, writer: sqlite3.Connection,
                 reader: aiosqlite.Connection) -> None:
        super().__init__(path, writer, reader)
        # The lookup view and the salt are read at open.
        self._notary = NotaryState(KeyCache(path), LookupView(sqlite_lookup.GENERATION))
        self.migration: MigrationReport | None = None

    def _new_tx(self, latest: CheckpointRecord | None) -> SqliteNotaryWriteTx:
        return SqliteNotaryWriteTx(self._w, latest, self._notary)

    def transaction(self) -> AbstractAsyncContextManager[SqliteNotaryWriteTx]:
        # _transaction yields what _new_tx made, which is a SqliteNotaryWriteTx here.
        return cast(AbstractAsyncContextManager[SqliteNotaryWriteTx], self._transaction())

    @classmethod
    async def open(cls, path: str | Path, *, create: bool = False, busy_timeout: float = 10.0,
                   entry_url_bases: Sequence[str] = ()) -> Self:
        """Open (``create``: or create) the file, and create or migrate the notary's tables.

        ``entry_url_bases`` are the base URLs that receipts of an older layout may have been
        signed with (the current one first); a receipt that verifies under none is withheld.
        """
        store = await super().open(path, create=create, busy_timeout=busy_timeout)
        try:
            store.migration = await store._write_keys(lambda c: prepare(c, entry_url_bases))
            notary, conn = store._notary, store._point
            notary.salt = lookup_salt(conn)
            notary.lookup.refresh(conn)
            notary.may_withhold = conn.execute(
                "SELECT 1 FROM withheld_receipts LIMIT 1").fetchone() is not None
        except BaseException:
            await store.close()
            raise
        return store

    # Receipts -------------------------------------------------------------------------------

    def _withheld(self, column: str, value: str) -> None:
        if not self._notary.may_withhold:
            return
        row = self._point.execute(f"SELECT id, problem FROM withheld_receipts WHERE {column} = ?",
                                  (value,)).fetchone()
        if row is not None:
            raise ReceiptWithheldError(row[0], row[1])

    async def receipt_by_id(self, receipt_id: str) -> Receipt | None:
        try:
            key = id_key(receipt_id)
        except ValueError:
            return None
        conn, view = self._point, self._notary.lookup
        for _ in range(2):  # again after reading what other processes logged since
            rows = _candidates(conn, _BY_ID, [key], view.ids([key]))
            for receipt in _receipts(conn, rows):
                if receipt.id == receipt_id:
                    return receipt
            if not view.refresh(conn):
                break
        self._withheld("id", receipt_id)
        return None

    def _by_digest(self, call_sha256: str) -> dict[str, Receipt | None]:
        """:func:`_receipts_by_digest` of one digest, outside the lock (so read again after
        what other processes logged since when it finds nothing)."""
        found: dict[str, Receipt | None] = {}
        notary = self._notary
        for _ in range(2):
            found = _receipts_by_digest(self._point, [call_sha256], notary.salt,
                                        notary.may_withhold, notary.lookup)
            if found or not notary.lookup.refresh(self._point):
                break
        return found

    async def receipt_by_digest(self, call_sha256: str) -> Receipt | None:
        found = self._by_digest(call_sha256)
        if call_sha256 in found and found[call_sha256] is None:
            self._withheld("call_sha256", call_sha256)
        return found.get(call_sha256)

    async def search_receipts(self, *, server: str | None = None, tool: str | None = None,
                              since: str | None = None, until: str | None = None,
                              before: tuple[str, int] | None = None, limit: int = 20
                              ) -> list[Receipt]:
        # issued_at never decreases along the log (see sqlite_schema): the time bounds are an
        # index range, and (issued_at, idx) order is idx order. Receipts of version 1 were
        # stamped before the lock and may be out of time order by a few milliseconds; the
        # page is filtered exactly on its own issued_at, so none outside the bounds shows.
        conn = self._point
        refs: list[int] = []
        where = ["r.idx >= ?", "r.idx < ?"]
        for column, name in (("server", server), ("tool", tool)):
            if name is None:
                continue
            row = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
            if row is None:
                return []  # never used: nothing to find
            where.append(f"r.{column} = ?")
            refs.append(int(row[0]))
        spans = _spans(conn)
        lo = 0 if since is None else _first_position_at(conn, since, spans)
        hi = position(*spans[-1]) if until is None else _first_position_at(conn, until, spans)
        if before is not None:
            hi = min(hi, before[1])
        if lo >= hi or limit <= 0:
            return []
        rows = conn.execute(
            f"SELECT {RECEIPT_COLUMNS} FROM receipts r {RECEIPT_JOINS} WHERE "
            + " AND ".join(where) + " ORDER BY r.idx DESC LIMIT ?",
            [lo, hi, *refs, limit]).fetchall()
        out = []
        for row, receipt in zip(rows, _receipts(conn, rows), strict=True):
            # The cursor's second half is a position (the index, in log 0).
            if in_window(receipt.issued_at, row[0], since=since, until=until, before=before):
                out.append(receipt)
        return out

    # Accounts, API keys and usage -----------------------------------------------------------

    async def api_key(self, key_id: str) -> ApiKeyRecord | None:
        """The key, or None; the work is the same either way (:meth:`KeyCache.get`)."""
        return self._notary.keys.get(self._point, key_id)

    async def _write_keys(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """:meth:`_write_locked` for a write that may change keys or accounts (the only ones:
        these methods and the migration), signalled once it has ended, committed or not (a
        needless signal costs every frontend one reload)."""
        try:
            return await self._write_locked(fn)
        finally:
            self._notary.keys.changed()

    async def close(self) -> None:
        await super().close()
        self._notary.keys.close()

    async def usage(self, account: str, month: str) -> int:
        return _usage(self._point, [(account, month)])[(account, month)]

    async def create_api_key(self, account: str, monthly_allowance: int | None, key_id: str,
                             secret_sha256: bytes) -> None:
        now = time.time()

        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT monthly_allowance FROM accounts WHERE name = ?",
                               (account,)).fetchone()
            if row is None:
                conn.execute("INSERT INTO accounts (name, monthly_allowance, created) "
                             "VALUES (?, ?, ?)", (account, monthly_allowance, now))
            elif monthly_allowance is not None and row[0] != monthly_allowance:
                raise AllowanceConflict(account, row[0])
            conn.execute(
                "INSERT INTO api_keys (key_id, account, secret_sha256, created) "
                "SELECT ?, id, ?, ? FROM accounts WHERE name = ?",
                (key_id, secret_sha256, now, account))

        try:
            await self._write_keys(write)
        except sqlite3.IntegrityError as e:
            raise StoreError(f"cannot add API key {key_id}: {e}") from e

    async def set_monthly_allowance(self, account: str, monthly_allowance: int | None
                                    ) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            cur = conn.execute("UPDATE accounts SET monthly_allowance = ? WHERE name = ?",
                               (monthly_allowance, account))
            return cur.rowcount == 1

        return await self._write_keys(write)

    async def digest_account(self, call_sha256: str) -> str | None:
        return _logged_by(self._point, self._by_digest(call_sha256)).get(call_sha256)

    # Server names ---------------------------------------------------------------------------

    async def server_names(self, account: str | None = None) -> list[ServerNameRecord]:
        rows = self._point.execute(
            "SELECT s.name, a.name, s.since FROM server_names s JOIN accounts a "
            "ON a.id = s.account WHERE ? IS NULL OR a.name = ? ORDER BY s.name",
            (account, account)).fetchall()
        return [ServerNameRecord(*r) for r in rows]

    async def grant_server_name(self, name: str, account: str) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            account_id = _account_id(conn, account)
            check_skeletons(conn.execute(
                "SELECT version FROM skeleton_version WHERE one = 1").fetchone()[0])
            hold = _holds(conn, [name])[name]
            if hold.holder == account:
                return False
            if hold.holder is not None or hold.confusable - {account}:
                raise ServerNameTaken(f"server name {name!r}, or one confusable with it, is "
                                      "held by another account")
            conn.execute("INSERT INTO server_names (name, skeleton, account, since) "
                         "VALUES (?, ?, ?, ?)", (name, skeletons([name])[name], account_id,
                                                 time.time()))
            return True

        return await self._write_locked(write)  # BEGIN IMMEDIATE: the log's write lock

    async def move_server_name(self, name: str, account: str) -> str:
        def write(conn: sqlite3.Connection) -> str:
            account_id = _account_id(conn, account)
            row = conn.execute("SELECT a.name FROM server_names s JOIN accounts a "
                               "ON a.id = s.account WHERE s.name = ?", (name,)).fetchone()
            if row is None:
                raise StoreError(f"no account holds server name {name!r}")
            conn.execute("UPDATE server_names SET account = ?, since = ? WHERE name = ?",
                         (account_id, time.time(), name))
            return str(row[0])

        return await self._write_locked(write)

    async def list_api_keys(self, month: str) -> list[ApiKeyListing]:
        rows = self._point.execute(
            "SELECT k.key_id, a.name, a.monthly_allowance, coalesce(u.count, 0), k.created, "
            "k.revoked FROM api_keys k JOIN accounts a ON a.id = k.account "
            "LEFT JOIN usage u ON u.account = k.account AND u.month = ? "
            "ORDER BY k.created, k.key_id", (month,)).fetchall()
        return [ApiKeyListing(*r) for r in rows]

    async def revoke_api_key(self, key_id: str) -> bool:
        now = time.time()

        def write(conn: sqlite3.Connection) -> bool:
            cur = conn.execute("UPDATE api_keys SET revoked = ? WHERE key_id = ? "
                               "AND revoked IS NULL", (now, key_id))
            return cur.rowcount == 1

        return await self._write_keys(write)

    # Reclaiming a pruned range (notary.store.sqlite_reclaim) --------------------------------

    async def first_receipt(self, lo: int, hi: int) -> int | None:
        return sqlite_reclaim.first_receipt(self._point, lo, hi)

    async def reclaim_receipts(self, lo: int, hi: int,
                               keys: Sequence[tuple[int, str, str]]) -> int:
        return await self._write_locked(
            lambda c: sqlite_reclaim.reclaim_rows(c, lo, hi, keys, self._notary.salt))

    async def free_bytes(self) -> int | None:
        return sqlite_reclaim.free_bytes(self._point)

    # Receipt keys ---------------------------------------------------------------------------

    async def receipt_keys(self) -> list[ReceiptKeyRecord]:
        rows = self._point.execute(
            "SELECT kid, jwk, created FROM receipt_keys ORDER BY created, id").fetchall()
        return [ReceiptKeyRecord(*r) for r in rows]

    async def add_receipt_key(self, kid: str, jwk: str, created: float) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            cur = conn.execute("INSERT OR IGNORE INTO receipt_keys (kid, jwk, created) "
                               "VALUES (?, ?, ?)", (kid, jwk, created))
            return cur.rowcount == 1

        return await self._write_locked(write)

