"""The notary's tables in a PostgreSQL database (``notary.store.postgres``): the versioned
migrations that create them, the statements that read and write them, the rows a receipt
refers to (:func:`resolve_refs`) and the skeletons' refresh when a frontend opens the store.
The layout follows the SQLite one (:mod:`notary.store.sqlite_schema`).
"""

from __future__ import annotations

from collections.abc import Callable

from ledger.storage.base import StoreError
from ledger.storage.postgres import PgConnection
from notary.core.server_names import SKELETON_VERSION, name_skeleton
from notary.store.sqlite_schema import Needed, Refs

__all__ = ["ADD_CTES", "BY_DIGESTS", "BY_ID", "KEYS_CHANNEL", "LOG_LOCK", "NOTARY_MIGRATIONS",
           "RECEIPT", "SCREEN", "SCREEN_PARTS", "USAGE", "refresh_skeletons", "resolve_refs"]

NOTARY_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE notary_accounts (
        id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL UNIQUE,
        monthly_allowance bigint, created double precision NOT NULL);
    CREATE TABLE notary_api_keys (
        key_id text PRIMARY KEY, account integer NOT NULL REFERENCES notary_accounts (id),
        secret_sha256 bytea NOT NULL, created double precision NOT NULL,
        revoked double precision);
    CREATE TABLE notary_usage (
        account integer NOT NULL REFERENCES notary_accounts (id), month text NOT NULL,
        count bigint NOT NULL, PRIMARY KEY (account, month));
    CREATE TABLE notary_receipt_keys (
        id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kid text NOT NULL UNIQUE,
        jwk text NOT NULL, created double precision NOT NULL);
    CREATE TABLE notary_ledgers (
        id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, origin text NOT NULL,
        entry_url_prefix text NOT NULL, UNIQUE (origin, entry_url_prefix));
    CREATE TABLE notary_names (
        id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL UNIQUE);
    CREATE TABLE notary_receipts (
        idx bigint PRIMARY KEY, sig bytea NOT NULL, kid integer NOT NULL, ledger integer NOT NULL,
        account integer NOT NULL, server integer NOT NULL, tool integer NOT NULL,
        id_k integer NOT NULL, digest_k bigint NOT NULL);
    CREATE INDEX notary_receipts_by_id ON notary_receipts (id_k);
    CREATE INDEX notary_receipts_by_digest ON notary_receipts (digest_k);
    CREATE INDEX notary_receipts_by_server ON notary_receipts (server, idx);
    CREATE INDEX notary_receipts_by_tool ON notary_receipts (tool, idx);
    CREATE INDEX notary_receipts_by_server_tool ON notary_receipts (server, tool, idx);
    CREATE TABLE notary_state (
        one smallint PRIMARY KEY CHECK (one = 1), lookup_salt bytea NOT NULL,
        last_issued_at text);
    INSERT INTO notary_state (one, lookup_salt)
        VALUES (1, decode(replace(gen_random_uuid()::text, '-', ''), 'hex'));
    CREATE TABLE notary_key_version (one smallint PRIMARY KEY CHECK (one = 1), n bigint NOT NULL);
    INSERT INTO notary_key_version (one, n) VALUES (1, 0);
    CREATE FUNCTION notary_bump_key_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN UPDATE notary_key_version SET n = n + 1 WHERE one = 1; RETURN NULL; END $$;
    CREATE TRIGGER notary_api_keys_version AFTER INSERT OR UPDATE OR DELETE ON notary_api_keys
        FOR EACH STATEMENT EXECUTE FUNCTION notary_bump_key_version();
    CREATE TRIGGER notary_accounts_version AFTER INSERT OR UPDATE OR DELETE ON notary_accounts
        FOR EACH STATEMENT EXECUTE FUNCTION notary_bump_key_version();
    """,
    # Version 2: every change to keys or accounts is also announced (at commit) to the
    # frontends LISTENing on the channel, which keep their key cache current from it.
    """
    CREATE OR REPLACE FUNCTION notary_bump_key_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE notary_key_version SET n = n + 1 WHERE one = 1;
            PERFORM pg_notify('notary_key_version', '');
            RETURN NULL;
        END $$;
    """,
    # Version 3: server names belong to accounts. Names logged before go to the account of
    # their first receipt; their UTS #39 skeletons are filled in by the first frontend that
    # opens the store (PgNotaryStore.open: the skeleton is ICU's, not SQL's).
    """
    CREATE TABLE notary_server_names (
        name text PRIMARY KEY, skeleton text,
        account integer NOT NULL REFERENCES notary_accounts (id),
        since double precision NOT NULL);
    CREATE INDEX notary_server_names_by_skeleton ON notary_server_names (skeleton);
    INSERT INTO notary_server_names (name, account, since)
        SELECT DISTINCT ON (r.server) n.name, r.account, 0
        FROM notary_receipts r JOIN notary_names n ON n.id = r.server
        ORDER BY r.server, r.idx;
    """,
    # Version 4: the data the stored skeletons were computed with ('': unknown); the first
    # frontend that opens the store with other data recomputes them (refresh_skeletons).
    """
    CREATE TABLE notary_skeleton_version (
        one smallint PRIMARY KEY CHECK (one = 1), version text NOT NULL);
    INSERT INTO notary_skeleton_version (one, version) VALUES (1, '');
    """,
)
"""Versioned like the log's (``schema_versions``, component ``notary``); append, never edit."""

RECEIPT = ("SELECT r.idx, r.sig, k.kid, l.origin, l.entry_url_prefix, t.data "
            "FROM notary_receipts r "
            "JOIN notary_receipt_keys k ON k.id = r.kid "
            "JOIN notary_ledgers l ON l.id = r.ledger "
            "LEFT JOIN ledger_tile_data t ON t.level = -1 AND t.idx = r.idx >> 8 ")
# LEFT: a receipt of a later log (its position is n << 40 | index) has its bundle in that
# log's tables, read apart (_receipts); log 0's, as always, in the same statement.
BY_DIGESTS = RECEIPT + "WHERE r.digest_k = ANY($1::bigint[])"
BY_ID = RECEIPT + "WHERE r.id_k = $1"
USAGE = ("SELECT a.name, u.month, u.count FROM notary_usage u "
          "JOIN notary_accounts a ON a.id = u.account "
          "JOIN unnest($1::text[], $2::text[]) AS q(name, month) "
          "ON a.name = q.name AND u.month = q.month")
# The batch's rows, as data-modifying CTEs of the statement that writes the log's tiles and
# checkpoint at commit (PostgresWriteTx.more_writes): one round trip for all of it. Each CTE
# numbers its arguments from $1 (ledger.storage.postgres.numbered), and one with no row to
# write is left out of the statement. Each array is unnested in the select list (a
# ProjectSet, arrays of one length in step), not by unnest(a, b, ...) in FROM: that is a
# function scan which first copies each array into a tuple store of its own; the rows are
# the same, at ~0.5-1 µs less of the server's CPU a row.
ADD_CTES = (
    """r AS (
    INSERT INTO notary_receipts (idx, sig, kid, ledger, account, server, tool, id_k, digest_k)
    SELECT unnest($1::bigint[]), unnest($2::bytea[]), unnest($3::integer[]),
        unnest($4::integer[]), unnest($5::integer[]), unnest($6::integer[]),
        unnest($7::integer[]), unnest($8::integer[]), unnest($9::bigint[]))""",
    """u AS (
    INSERT INTO notary_usage (account, month, count)
    SELECT unnest($1::integer[]), unnest($2::text[]), unnest($3::bigint[])
    ON CONFLICT (account, month) DO UPDATE SET count = notary_usage.count + excluded.count)""",
    """n AS (
    UPDATE notary_state SET last_issued_at = $1
    WHERE one = 1 AND (last_issued_at IS NULL OR last_issued_at < $1))""",
    # A claim the screen found free; a name held after all fails the commit (never hidden).
    """sn AS (
    INSERT INTO notary_server_names (name, skeleton, account, since)
    SELECT unnest($1::text[]), unnest($2::text[]), unnest($3::integer[]),
        unnest($4::float8[]))""",
)
# The screen's reads in one round trip: the batch's known digests and their accounts (kind 0),
# the holders of the batch's server names (by exact name) and their look-alikes (by skeleton;
# kind 3), the asked usage (kind 1), and the latest issued_at with the database server's clock
# and the stored skeletons' version (kind 2, always exactly one row: frontends on other
# machines compare their clocks with it). SCREEN_PARTS adds the log's catch-up read (kind 4).
SCREEN = """
SELECT 0, r.idx, r.sig, k.kid, l.origin, l.entry_url_prefix, t.data, a.name, NULL, NULL
FROM notary_receipts r
JOIN notary_receipt_keys k ON k.id = r.kid
JOIN notary_ledgers l ON l.id = r.ledger
LEFT JOIN ledger_tile_data t ON t.level = -1 AND t.idx = r.idx >> 8
JOIN notary_accounts a ON a.id = r.account
WHERE r.digest_k = ANY($1::bigint[])
UNION ALL
SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, a.name, u.month, u.count
FROM notary_usage u
JOIN notary_accounts a ON a.id = u.account
JOIN unnest($2::text[], $3::text[]) AS q(name, month) ON a.name = q.name AND u.month = q.month
UNION ALL
SELECT 2, NULL, NULL, sv.version, NULL, NULL, NULL, s.last_issued_at,
    to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), v.n
FROM notary_state s, notary_key_version v, notary_skeleton_version sv
WHERE s.one = 1 AND v.one = 1 AND sv.one = 1
UNION ALL
SELECT 3, NULL, NULL, s.name, s.skeleton, NULL, NULL, a.name, NULL, NULL
FROM notary_server_names s JOIN notary_accounts a ON a.id = s.account
WHERE s.skeleton = ANY($4::text[]) OR s.name = ANY($5::text[])
"""
SCREEN_PARTS = """UNION ALL
SELECT 4, q.start, NULL, NULL, NULL, NULL, q.data, NULL, NULL, NULL FROM ({}) AS q
"""
"""Appended to SCREEN (formatted with the query of PostgresWriteTx.catch_up_read): the edge
bundle's parts that the writer catches up from after another frontend's commit, (start, data)
as kind 4, read with the screen rather than in a round trip of their own under the lock."""
LOG_LOCK = "SELECT 1 FROM ledger_state WHERE one = 1 FOR UPDATE"
"""The log's write lock (the state row every batch locks first), for administrative writes
that a batch's screen must not interleave with (who holds a server name)."""
KEYS_CHANNEL = "notary_key_version"  # notified by notary_bump_key_version() on every change


async def refresh_skeletons(conn: PgConnection) -> None:
    """Recompute the stored UTS #39 skeletons (those the version-3 migration left out too) if
    they were computed with other data than this process's (:data:`SKELETON_VERSION`), under
    the log's lock so that no batch screens names meanwhile. Holds are unaffected (a holder is
    found by the exact name)."""
    if await conn.fetchval("SELECT version FROM notary_skeleton_version WHERE one = 1"
                           ) == SKELETON_VERSION:
        return  # the usual open: no lock taken
    async with conn.transaction():
        await conn.execute(LOG_LOCK)
        stored = await conn.fetchval(
            "SELECT version FROM notary_skeleton_version WHERE one = 1 FOR UPDATE")
        if stored == SKELETON_VERSION:
            return
        rows = await conn.fetch("SELECT name, skeleton FROM notary_server_names")
        changed = [(r[0], new) for r in rows if (new := name_skeleton(r[0])) != r[1]]
        await conn.executemany(
            "UPDATE notary_server_names SET skeleton = $2 WHERE name = $1", changed)
        await conn.execute("UPDATE notary_skeleton_version SET version = $1 WHERE one = 1",
                           SKELETON_VERSION)


async def resolve_refs(conn: PgConnection, needed: Needed) -> Refs:
    """The ids of ``needed``, creating name and ledger rows that do not exist yet; receipt keys
    and accounts must exist."""
    new = Refs()
    if needed.kids:
        new.kids.update(await _existing_ids(
            conn, "SELECT kid, id FROM notary_receipt_keys WHERE kid = ANY($1)", needed.kids,
            lambda kid: f"receipt key {kid} is not registered in the store"))
    for origin, prefix in sorted(needed.ledgers):
        await conn.execute("INSERT INTO notary_ledgers (origin, entry_url_prefix) VALUES ($1, $2) "
                           "ON CONFLICT DO NOTHING", origin, prefix)
        new.ledgers[(origin, prefix)] = await conn.fetchval(
            "SELECT id FROM notary_ledgers WHERE origin = $1 AND entry_url_prefix = $2",
            origin, prefix)
    if needed.names:
        await conn.execute("INSERT INTO notary_names (name) SELECT unnest($1::text[]) "
                           "ON CONFLICT DO NOTHING", sorted(needed.names))
        rows = await conn.fetch("SELECT name, id FROM notary_names WHERE name = ANY($1)",
                                sorted(needed.names))
        new.names.update((r[0], r[1]) for r in rows)
    if needed.accounts:
        new.accounts.update(await _existing_ids(
            conn, "SELECT name, id FROM notary_accounts WHERE name = ANY($1)", needed.accounts,
            lambda name: f"account {name!r} does not exist"))
    return new


async def _existing_ids(conn: PgConnection, sql: str, wanted: set[str],
                        missing: Callable[[str], str]) -> dict[str, int]:
    """{name: id} of rows that must exist already; the first one missing is a StoreError."""
    found = {r[0]: r[1] for r in await conn.fetch(sql, sorted(wanted))}
    absent = wanted - found.keys()
    if absent:
        raise StoreError(missing(min(absent)))
    return found
