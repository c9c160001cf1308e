"""The notary's store on PostgreSQL: the log's database (``ledger.storage.postgres``) with the
notary's tables beside the tiles, so that a receipt row and the log entry it points at commit in
one transaction, from any number of frontends on any machines.

The layout follows the SQLite one (:mod:`notary.store.sqlite_schema`): a receipt is its log entry
plus what cannot be rebuilt from it (index, 64 signature bytes, small references to its key id,
``origin`` + ``entry_url`` prefix, account, server and tool), so it is stored compactly and comes
back byte for byte as signed. Lookups by id and digest go through short integer keys (4 bytes of
the id's random part; 6 bytes of BLAKE2b of the digest keyed with the store's random salt), every
hit confirmed against the entry itself.

Across processes:

- duplicates and quota are read by :meth:`PgNotaryWriteTx.screen` inside the batch transaction,
  after the log's state row is locked (``SELECT … FOR UPDATE``), so no other frontend can commit
  between that read and this commit;
- API keys are cached per process and reloaded whenever ``notary_key_version`` moved (statement
  triggers bump it on any change to keys or accounts, from any process): authenticating costs one
  one-row read whether or not the key id exists, and a revocation holds at once everywhere;
- ids of small rows (names, ledgers, accounts, receipt keys) are cached only once the transaction
  that created them committed.

No ``notary migrate`` history applies here (PostgreSQL stores start at this layout), so no receipt
is ever withheld.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Self, cast

import asyncpg

from ledger.storage.base import CheckpointRecord, StoreError, log_suffix
from ledger.storage.postgres import PgConnection, PostgresStore, PostgresWriteTx, numbered
from notary.core.logs import position, split_position
from notary.core.receipts import Receipt
from notary.core.search import in_window
from notary.core.server_names import (
    NameHold,
    holds_from_rows,
    name_skeleton,
    skeletons,
)
from notary.store.base import (
    AllowanceConflict,
    ApiKeyListing,
    ApiKeyRecord,
    IssuedReceipt,
    ReceiptKeyRecord,
    Screening,
    ServerNameRecord,
    ServerNameTaken,
    UsageKey,
    check_skeletons,
    new_claims,
)
from notary.store.postgres_rows import receipt_columns
from notary.store.postgres_schema import (
    ADD_CTES,
    BY_DIGESTS,
    BY_ID,
    KEYS_CHANNEL,
    LOG_LOCK,
    NOTARY_MIGRATIONS,
    RECEIPT,
    SCREEN,
    SCREEN_PARTS,
    USAGE,
    refresh_skeletons,
    resolve_refs,
)
from notary.store.sqlite_schema import (
    Refs,
    digest_key,
    entry_at,
    from_cache,
    id_key,
    receipt_from_row,
    refs_for,
)

__all__ = ["NOTARY_MIGRATIONS", "PgNotaryStore", "PgNotaryWriteTx"]

async def _receipts(conn: PgConnection, rows: Sequence[asyncpg.Record], at: int = 0
                    ) -> list[Receipt]:
    return [r for _, r in await _placed_receipts(conn, rows, at)]


async def _placed_receipts(conn: PgConnection, rows: Sequence[asyncpg.Record], at: int = 0
                           ) -> list[tuple[int, Receipt]]:
    """(position, receipt) of the six columns of ``rows`` from ``at`` on (``RECEIPT``'s):
    a later log's entries are read from its own tables (one statement a log); a log 0 row
    without its bundle is left out, as the inner join before later logs left it out."""
    wanted: dict[int, set[int]] = {}
    for row in rows:
        n, index = split_position(int(row[at]))
        if row[at + 5] is None and n > 0:
            wanted.setdefault(n, set()).add(index >> 8)
    bundles: dict[tuple[int, int], bytes] = {}
    for n, numbers in wanted.items():
        for b in await conn.fetch(
                f"SELECT idx, data FROM ledger_tile_data{log_suffix(n)} "
                "WHERE level = -1 AND idx = ANY($1::bigint[])", sorted(numbers)):
            bundles[(n, int(b[0]))] = bytes(b[1])
    out = []
    for row in rows:
        pos = int(row[at])
        data = row[at + 5]
        if data is None:
            n, index = split_position(pos)
            data = bundles.get((n, index >> 8))
            if data is None:
                if n == 0:
                    continue
                raise StoreError(f"entry bundle {index >> 8} of log {n} is missing")
        out.append((pos, receipt_from_row((pos, bytes(row[at + 1]), row[at + 2], row[at + 3],
                                           row[at + 4], bytes(data)))))
    return out


async def _receipts_by_digest(conn: PgConnection, digests: Collection[str], salt: bytes
                              ) -> dict[str, Receipt | None]:
    wanted = set(digests)
    if not wanted:
        return {}
    out: dict[str, Receipt | None] = {}
    rows = await conn.fetch(BY_DIGESTS, sorted({digest_key(d, salt) for d in wanted}))
    for receipt in await _receipts(conn, rows):
        if receipt.call_sha256 in wanted:  # a short key: confirmed against the entry
            out[receipt.call_sha256] = receipt
    return out


async def _usage(conn: PgConnection, keys: Collection[UsageKey]) -> dict[UsageKey, int]:
    out = dict.fromkeys(keys, 0)
    if keys:
        names, months = zip(*keys, strict=True)
        for name, month, count in await conn.fetch(USAGE, list(names), list(months)):
            out[(name, month)] = int(count)
    return out


async def _account_id(conn: PgConnection, account: str) -> int:
    found = await conn.fetchval("SELECT id FROM notary_accounts WHERE name = $1", account)
    if found is None:
        raise StoreError(f"account {account!r} does not exist")
    return int(found)


async def _holds(conn: PgConnection, name: str) -> NameHold:
    """Who holds ``name`` (by the exact name) and the names confusable with it, under the log's
    lock."""
    check_skeletons(await conn.fetchval(
        "SELECT version FROM notary_skeleton_version WHERE one = 1"))
    asked = skeletons([name])
    rows = await conn.fetch("SELECT s.name, s.skeleton, a.name FROM notary_server_names s "
                            "JOIN notary_accounts a ON a.id = s.account "
                            "WHERE s.skeleton = $1 OR s.name = $2", asked[name], name)
    return holds_from_rows(asked, [(r[0], r[1], r[2]) for r in rows])[name]


@dataclass
class PgNotaryState:
    """What a :class:`PgNotaryStore` shares with its transactions: the lookup salt (read at
    open), the ids of the small tables a receipt row refers to (trusted once committed), and
    how a screen tells the store's key cache which ``key_version`` it saw under the lock
    (whether it moved: :meth:`PgNotaryStore._keys_screened`)."""

    keys_screened: Callable[[int | None], bool]
    salt: bytes = b""
    refs: Refs = field(default_factory=Refs)


class PgNotaryWriteTx(PostgresWriteTx):
    """The log's transaction plus the notary's screen and receipt rows."""

    def __init__(self, conn: PgConnection, latest: CheckpointRecord | None,
                 history_time: float, notary: PgNotaryState) -> None:
        super().__init__(conn, latest, history_time)
        self._notary = notary
        self._new_refs = Refs()
        self._rows: list[tuple[str, list[object]]] = []  # (CTE, its arguments) to write
        self._held: dict[str, str] = {}  # server names' holders, as screened, and claims
        self._digest_keys: dict[str, int] = {}  # the screen's, for the rows

    async def screen(self, digests: Collection[str], usage: Collection[UsageKey],
                     servers: Collection[str] = ()) -> Screening:
        wanted = set(digests)
        salt = self._notary.salt
        names, months = (list(c) for c in zip(*usage, strict=True)) if usage else ([], [])
        asked = skeletons(servers)
        found: dict[str, Receipt | None] = {}
        logged_by: dict[str, str] = {}
        held: list[tuple[str, str, str]] = []
        spent = dict.fromkeys(usage, 0)
        skeleton_version: str | None = None
        last: str | None = None
        version: int | None = None
        clock: str | None = None
        keys = {d: digest_key(d, salt) for d in wanted}
        self._digest_keys.update(keys)
        ahead = self.catch_up_read(6)  # the log's catch-up read, in the same round trip
        rows = await self._conn.fetch(
            SCREEN if ahead is None else SCREEN + SCREEN_PARTS.format(ahead[0]),
            sorted(set(keys.values())), names, months, sorted(set(asked.values())),
            sorted(asked), *(ahead[1] if ahead is not None else ()))
        if ahead is not None:
            self.parts_read_ahead([(row[1], row[6]) for row in rows if row[0] == 4])
        logged = [row for row in rows if row[0] == 0]
        accounts = {int(row[1]): row[7] for row in logged}
        for pos, receipt in await _placed_receipts(self._conn, logged, 1):
            if receipt.call_sha256 in wanted:  # a short key: confirmed against the entry
                found[receipt.call_sha256] = receipt
                logged_by[receipt.call_sha256] = accounts[pos]
        for row in rows:
            if row[0] == 0 or row[0] == 4:
                continue
            if row[0] == 3:
                held.append((row[3], row[4], row[7]))
            elif row[0] == 1:
                spent[(row[7], row[8])] = int(row[9])
            else:
                last, clock, version, skeleton_version = row[7], row[8], row[9], row[3]
        changed = self._notary.keys_screened(version)
        if asked:
            check_skeletons(skeleton_version)
        holds = holds_from_rows(asked, held)
        self._held.update((n, h.holder) for n, h in holds.items() if h.holder is not None)
        return Screening(found, spent, last, changed, logged_by=logged_by, servers=holds,
                         store_clock=clock)

    async def add_receipts(self, receipts: Sequence[IssuedReceipt],
                           usage: Mapping[UsageKey, int]) -> None:
        pairs = [(r.receipt, r.account) for r in receipts]
        salt = self._notary.salt
        refs = known = self._notary.refs
        new = self._new_refs
        cols = from_cache(known, new, (a for a, _ in usage),
                          lambda cached: receipt_columns(pairs, cached, self.log_number, salt,
                                                         self._digest_keys))
        if cols is None:
            refs, missing = refs_for(pairs, (a for a, _ in usage), known, new)
            if missing:
                new.merge(await resolve_refs(self._conn, missing))
                refs.merge(new)
            cols = receipt_columns(pairs, refs, self.log_number, salt, self._digest_keys)
        now = time.time()
        claims = [(name, name_skeleton(name), refs.accounts[account], now)
                  for name, account in new_claims(pairs, self._held)]
        latest = max((r.issued_at for r, _ in pairs), default=None)
        ucols: list[list[object]] = [[], [], []]
        for (account, month), n in usage.items():
            ucols[0].append(refs.accounts[account])
            ucols[1].append(month)
            ucols[2].append(n)
        if self._rows:  # a second call in one transaction: store the first now
            ctes, args = self.more_writes(1)
            await self._conn.execute("WITH " + ",\n".join(ctes) + "\nSELECT 1", *args)
        receipts_cte, usage_cte, latest_cte, claims_cte = ADD_CTES
        rows: list[tuple[str, list[object]]] = [(receipts_cte, [*cols])] if pairs else []
        if usage:
            rows.append((usage_cte, [*ucols]))
        if latest is not None:
            rows.append((latest_cte, [latest]))
        if claims:
            rows.append((claims_cte, [list(c) for c in zip(*claims, strict=True)]))
        self._rows = rows

    def more_writes(self, first: int) -> tuple[list[str], list[object]]:
        rows, self._rows = self._rows, []
        return numbered(rows, first)

    def committed(self) -> None:
        super().committed()
        self._notary.refs.merge(self._new_refs)


class PgNotaryStore(PostgresStore):
    """The log and the notary's tables in one PostgreSQL database. Open with :meth:`open`."""

    def __init__(self, pool: asyncpg.Pool, url: str, *, retry_for: float, lock_timeout: float
                 ) -> None:
        super().__init__(pool, url, retry_for=retry_for, lock_timeout=lock_timeout)
        self._notary = PgNotaryState(self._keys_screened)  # the salt is read at open
        self._keys: dict[str, ApiKeyRecord] = {}
        self._keys_version: int | None = None
        # The key cache is "fresh" while a LISTEN connection is up and nothing was notified
        # since the cache was last checked: then authenticating reads nothing at all.
        self._keys_fresh = False
        self._notices = 0
        self._listener: asyncpg.Connection | None = None
        self._listening: asyncio.Task[None] | None = None
        self._listen_after = 0.0

    @classmethod
    async def open(cls, url: str, *, retry_for: float = 30.0, lock_timeout: float = 10.0,
                   pool_size: int = 8, components: Sequence[tuple[str, Sequence[str]]] = ()
                   ) -> Self:
        """Connect, create or migrate the log's and the notary's tables (one locked
        transaction, so frontends starting at once on an empty database make one log)."""
        store = await super().open(url, retry_for=retry_for, lock_timeout=lock_timeout,
                                   pool_size=pool_size,
                                   components=[("notary", NOTARY_MIGRATIONS), *components])
        try:
            salt = await store._retrying(lambda conn: conn.fetchval(
                "SELECT lookup_salt FROM notary_state WHERE one = 1"))
            if salt is None:
                raise StoreError("the store has no lookup salt (a damaged notary schema)")
            store._notary.salt = bytes(salt)
            await store._retrying(refresh_skeletons)
            await store._listen()
        except BaseException:
            await store.close()
            raise
        return store

    def _new_tx(self, conn: PgConnection, latest: CheckpointRecord | None, history_time: float
                ) -> PgNotaryWriteTx:
        return PgNotaryWriteTx(conn, latest, history_time, self._notary)

    def transaction(self) -> AbstractAsyncContextManager[PgNotaryWriteTx]:
        # The base transaction yields what _new_tx made, which is a PgNotaryWriteTx here.
        return cast(AbstractAsyncContextManager[PgNotaryWriteTx], self._transaction())

    # Receipts -------------------------------------------------------------------------------

    async def receipt_by_id(self, receipt_id: str) -> Receipt | None:
        try:
            key = id_key(receipt_id)
        except ValueError:
            return None
        async def read(conn: PgConnection) -> list[Receipt]:
            return await _receipts(conn, await conn.fetch(BY_ID, key))

        for receipt in await self._retrying(read):
            if receipt.id == receipt_id:
                return receipt
        return None

    async def receipt_by_digest(self, call_sha256: str) -> Receipt | None:
        found = await self._retrying(
            lambda conn: _receipts_by_digest(conn, [call_sha256], self._notary.salt))
        return found.get(call_sha256)

    async def search_receipts(self, *, server: str | None = None, tool: str | None = None,
                              since: str | None = None, until: str | None = None,
                              before: tuple[str, int] | None = None, limit: int = 20
                              ) -> list[Receipt]:
        return await self._retrying(lambda conn: self._search(
            conn, server, tool, since, until, before, limit))

    async def _search(self, conn: PgConnection, server: str | None, tool: str | None,
                      since: str | None, until: str | None,
                      before: tuple[str, int] | None, limit: int) -> list[Receipt]:
        # As on SQLite: issued_at never decreases along the log, so a time range is an index
        # range (found by bisecting the entries) and newest first is highest index first.
        async with conn.transaction(readonly=True, isolation="repeatable_read"):
            where = ["r.idx >= $1", "r.idx < $2"]
            args: list[object] = []
            for column, name in (("server", server), ("tool", tool)):
                if name is None:
                    continue
                ref = await conn.fetchval("SELECT id FROM notary_names WHERE name = $1", name)
                if ref is None:
                    return []
                args.append(ref)
                where.append(f"r.{column} = ${len(args) + 2}")
            spans = await _spans(conn)
            lo = 0 if since is None else await _first_position_at(conn, since, spans)
            hi = position(*spans[-1]) if until is None else await _first_position_at(
                conn, until, spans)
            if before is not None:
                hi = min(hi, before[1])
            if lo >= hi or limit <= 0:
                return []
            rows = await conn.fetch(
                RECEIPT + "WHERE " + " AND ".join(where)
                + f" ORDER BY r.idx DESC LIMIT ${len(args) + 3}", lo, hi, *args, limit)
            placed = await _placed_receipts(conn, rows)
        # The cursor's second half is a position (the index, in log 0).
        return [r for pos, r in placed
                if in_window(r.issued_at, pos, since=since, until=until, before=before)]

    # Accounts, API keys and usage -----------------------------------------------------------

    async def api_key(self, key_id: str) -> ApiKeyRecord | None:
        """The key, or None; the same work either way (see the SQLite store's twin).

        While the LISTEN connection is up and nothing was notified since the cache was last
        checked, that work is a dict lookup and no round trip. Otherwise: one one-row read of
        ``notary_key_version``, a reload of every key when it moved (a cost unrelated to the
        key asked for), then the dict lookup. A notification arrives a moment after the change
        committed; the batch screen closes that moment (``Screening.keys_changed``), so a
        revoked key issues nothing once its revocation committed.
        """
        if self._keys_fresh:
            return self._keys.get(key_id)
        self._relisten()
        notices = self._notices
        listening = self._listener is not None
        version = await self._retrying(lambda conn: conn.fetchval(
            "SELECT n FROM notary_key_version WHERE one = 1"))
        if version != self._keys_version:
            rows = await self._retrying(lambda conn: conn.fetch(
                "SELECT k.key_id, a.name, k.secret_sha256, k.revoked, a.monthly_allowance "
                "FROM notary_api_keys k JOIN notary_accounts a ON a.id = k.account"))
            self._keys = {r[0]: ApiKeyRecord(r[0], r[1], bytes(r[2]), r[3], r[4]) for r in rows}
            self._keys_version = version  # read before the keys: a change in between reloads
        # Listening since before the read, and no notice since: any later change will notify.
        self._keys_fresh = listening and self._listener is not None and notices == self._notices
        return self._keys.get(key_id)

    def _keys_screened(self, version: int | None) -> bool:
        """Whether ``version``, read by a batch's screen under the lock, is not the cache's;
        then a notification may still be on its way, and the cache is not trusted now."""
        changed = version != self._keys_version
        if changed:
            self._keys_fresh = False
        return changed

    async def _listen(self) -> None:
        """Open the LISTEN connection for key changes; on failure stay on per-request reads
        (and try again later, see :meth:`_relisten`)."""
        try:
            conn = await asyncpg.connect(self.url, timeout=5.0, server_settings={
                "application_name": "notary-keys"})
        except Exception:
            return
        try:
            conn.add_termination_listener(self._listener_lost)
            await conn.add_listener(KEYS_CHANNEL, self._key_notice)
        except Exception:
            conn.terminate()
            return
        self._listener = conn

    def _relisten(self) -> None:
        """Reopen a lost LISTEN connection in the background, at most once a second."""
        if self._listener is not None or self._listening is not None:
            return
        now = time.monotonic()
        if now < self._listen_after:
            return
        self._listen_after = now + 1.0

        async def reopen() -> None:
            try:
                await self._listen()
            finally:
                self._listening = None

        self._listening = asyncio.get_running_loop().create_task(reopen())

    def _key_notice(self, conn: asyncpg.Connection, pid: int, channel: str, payload: str
                    ) -> None:
        self._notices += 1
        self._keys_fresh = False

    def _listener_lost(self, conn: asyncpg.Connection) -> None:
        if conn is self._listener:
            self._listener = None
        self._keys_fresh = False

    async def close(self) -> None:
        conn, self._listener = self._listener, None
        self._keys_fresh = False
        if self._listening is not None:
            self._listening.cancel()
        if conn is not None:
            try:
                await asyncio.wait_for(conn.close(), 5.0)
            except (TimeoutError, Exception):
                conn.terminate()
        await super().close()

    async def usage(self, account: str, month: str) -> int:
        got = await self._retrying(lambda conn: _usage(conn, [(account, month)]))
        return got[(account, month)]

    async def create_api_key(self, account: str, monthly_allowance: int | None, key_id: str,
                             secret_sha256: bytes) -> None:
        now = time.time()

        async def write(conn: PgConnection) -> None:
            async with conn.transaction():
                created = await conn.fetchval(
                    "INSERT INTO notary_accounts (name, monthly_allowance, created) "
                    "VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING RETURNING id",
                    account, monthly_allowance, now)
                if created is None:
                    current = await conn.fetchval(
                        "SELECT monthly_allowance FROM notary_accounts WHERE name = $1",
                        account)
                    if monthly_allowance is not None and current != monthly_allowance:
                        raise AllowanceConflict(account, current)
                await conn.execute(
                    "INSERT INTO notary_api_keys (key_id, account, secret_sha256, created) "
                    "SELECT $1, id, $2, $3 FROM notary_accounts WHERE name = $4",
                    key_id, secret_sha256, now, account)

        try:
            await self._retrying(write)
        except asyncpg.exceptions.IntegrityConstraintViolationError as e:
            raise StoreError(f"cannot add API key {key_id}: {type(e).__name__}") from None
        finally:
            self._keys_fresh = False  # this process sees its own change at once

    async def set_monthly_allowance(self, account: str, monthly_allowance: int | None
                                    ) -> bool:
        try:
            status = await self._retrying(lambda conn: conn.execute(
                "UPDATE notary_accounts SET monthly_allowance = $1 WHERE name = $2",
                monthly_allowance, account))
        finally:
            self._keys_fresh = False  # this process sees its own change at once
        return str(status).endswith(" 1")

    async def digest_account(self, call_sha256: str) -> str | None:
        async def read(conn: PgConnection) -> str | None:
            for row in await conn.fetch(
                    "SELECT r.idx, a.name FROM notary_receipts r "
                    "JOIN notary_accounts a ON a.id = r.account "
                    "WHERE r.digest_k = $1", digest_key(call_sha256, self._notary.salt)):
                n, index = split_position(int(row[0]))
                data = await conn.fetchval(
                    f"SELECT data FROM ledger_tile_data{log_suffix(n)} WHERE level = -1 "
                    "AND idx = $1", index >> 8)
                if data is not None and \
                        entry_at(bytes(data), index).call_sha256_hex == call_sha256:
                    return str(row[1])
            return None

        return await self._retrying(read)

    # Server names ---------------------------------------------------------------------------

    async def server_names(self, account: str | None = None) -> list[ServerNameRecord]:
        rows = await self._retrying(lambda conn: conn.fetch(
            "SELECT s.name, a.name, s.since FROM notary_server_names s "
            "JOIN notary_accounts a ON a.id = s.account "
            "WHERE $1::text IS NULL OR a.name = $1 ORDER BY s.name", account))
        return [ServerNameRecord(r[0], r[1], r[2]) for r in rows]

    async def grant_server_name(self, name: str, account: str) -> bool:
        async def write(conn: PgConnection) -> bool:
            async with conn.transaction():
                await conn.execute(LOG_LOCK)  # no batch screens names meanwhile
                account_id = await _account_id(conn, account)
                hold = await _holds(conn, name)
                if hold.holder == account:
                    return False
                if hold.holder is not None or hold.confusable - {account}:
                    raise ServerNameTaken(f"server name {name!r}, or one confusable with it, "
                                          "is held by another account")
                await conn.execute(
                    "INSERT INTO notary_server_names (name, skeleton, account, since) "
                    "VALUES ($1, $2, $3, $4)", name, name_skeleton(name), account_id,
                    time.time())
                return True

        return await self._retrying(write)

    async def move_server_name(self, name: str, account: str) -> str:
        async def write(conn: PgConnection) -> str:
            async with conn.transaction():
                await conn.execute(LOG_LOCK)
                account_id = await _account_id(conn, account)
                held = await conn.fetchval(
                    "SELECT a.name FROM notary_server_names s JOIN notary_accounts a "
                    "ON a.id = s.account WHERE s.name = $1", name)
                if held is None:
                    raise StoreError(f"no account holds server name {name!r}")
                await conn.execute("UPDATE notary_server_names SET account = $1, since = $2 "
                                   "WHERE name = $3", account_id, time.time(), name)
                return str(held)

        return await self._retrying(write)

    async def list_api_keys(self, month: str) -> list[ApiKeyListing]:
        rows = await self._retrying(lambda conn: conn.fetch(
            "SELECT k.key_id, a.name, a.monthly_allowance, coalesce(u.count, 0), k.created, "
            "k.revoked FROM notary_api_keys k JOIN notary_accounts a ON a.id = k.account "
            "LEFT JOIN notary_usage u ON u.account = k.account AND u.month = $1 "
            "ORDER BY k.created, k.key_id", month))
        return [ApiKeyListing(r[0], r[1], r[2], int(r[3]), r[4], r[5]) for r in rows]

    async def revoke_api_key(self, key_id: str) -> bool:
        now = time.time()
        try:
            status = await self._retrying(lambda conn: conn.execute(
                "UPDATE notary_api_keys SET revoked = $1 WHERE key_id = $2 AND revoked IS NULL",
                now, key_id))
        finally:
            self._keys_fresh = False  # this process sees its own change at once
        return str(status).endswith(" 1")

    # Reclaiming a pruned range: a receipt's row holds its lookup keys too (docs/lifecycle.md)

    async def first_receipt(self, lo: int, hi: int) -> int | None:
        found = await self._retrying(lambda conn: conn.fetchval(
            "SELECT min(idx) FROM notary_receipts WHERE idx >= $1 AND idx < $2", lo, hi))
        return None if found is None else int(found)

    async def reclaim_receipts(self, lo: int, hi: int,
                               keys: Sequence[tuple[int, str, str]]) -> int:
        status = await self._retrying(lambda conn: conn.execute(
            "DELETE FROM notary_receipts WHERE idx >= $1 AND idx < $2", lo, hi))
        return int(str(status).rsplit(" ", 1)[-1])

    async def free_bytes(self) -> int | None:
        return None

    # Receipt keys ---------------------------------------------------------------------------

    async def receipt_keys(self) -> list[ReceiptKeyRecord]:
        rows = await self._retrying(lambda conn: conn.fetch(
            "SELECT kid, jwk, created FROM notary_receipt_keys ORDER BY created, id"))
        return [ReceiptKeyRecord(r[0], r[1], r[2]) for r in rows]

    async def add_receipt_key(self, kid: str, jwk: str, created: float) -> bool:
        status = await self._retrying(lambda conn: conn.execute(
            "INSERT INTO notary_receipt_keys (kid, jwk, created) VALUES ($1, $2, $3) "
            "ON CONFLICT (kid) DO NOTHING", kid, jwk, created))
        return str(status).endswith(" 1")


async def _spans(conn: PgConnection) -> list[tuple[int, int]]:
    """(log number, receipts' entries) of every log, oldest first (as SQLite's ``_spans``)."""
    logs = await conn.fetch("SELECT n, final_size FROM ledger_logs ORDER BY n")
    numbers = [(int(r[0]), r[1]) for r in logs] or [(0, None)]
    out = []
    for n, final in numbers:
        if final is not None:
            out.append((n, int(final) - 1))
        else:
            out.append((n, int(await conn.fetchval(
                f"SELECT coalesce(size, 0) FROM ledger_state{log_suffix(n)} WHERE one = 1")
                or 0)))
    return out


async def _first_position_at(conn: PgConnection, issued_at: str,
                             spans: Sequence[tuple[int, int]]) -> int:
    for n, size in spans:
        index = await _first_index_at(conn, issued_at, size, n)
        if index < size:
            return position(n, index)
    return position(*spans[-1])


async def _first_index_at(conn: PgConnection, issued_at: str, size: int, n: int = 0) -> int:
    """The first index of log ``n`` whose entry was issued at or after ``issued_at`` (``size``
    if none): a bisection over the entries, a bundle read a step."""
    cache: dict[int, bytes] = {}

    async def at(index: int) -> str:
        number = index >> 8
        if number not in cache:
            data = await conn.fetchval(
                f"SELECT data FROM ledger_tile_data{log_suffix(n)} WHERE level = -1 "
                "AND idx = $1", number)
            if data is None:
                raise StoreError(f"entry bundle {number} is missing from the store")
            cache[number] = bytes(data)
        return entry_at(cache[number], index).issued_at

    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi) // 2
        if await at(mid) < issued_at:
            lo = mid + 1
        else:
            hi = mid
    return lo
