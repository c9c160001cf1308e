"""The notary's own tables, in the same SQLite file as the log so that a receipt row and the log
entry it points at commit in one transaction (see ``Notary.hook``).

Rows here are an index over the log plus accounts: the log entry carries everything a receipt
signs, and the account never enters the log.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

TABLES = """
CREATE TABLE IF NOT EXISTS accounts (
    name TEXT PRIMARY KEY, monthly_allowance INTEGER, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY, account TEXT NOT NULL REFERENCES accounts(name),
    secret_sha256 BLOB NOT NULL, created REAL NOT NULL, revoked REAL);
CREATE TABLE IF NOT EXISTS usage (
    account TEXT NOT NULL, month TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (account, month));
CREATE TABLE IF NOT EXISTS receipts (
    id TEXT PRIMARY KEY, call_sha256 TEXT NOT NULL UNIQUE, idx INTEGER NOT NULL UNIQUE,
    server TEXT NOT NULL, tool TEXT NOT NULL, issued_at TEXT NOT NULL,
    kid TEXT NOT NULL, sig TEXT NOT NULL, account TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS receipt_keys (
    kid TEXT PRIMARY KEY, jwk TEXT NOT NULL, created REAL NOT NULL);
"""

#: The indexes of :meth:`NotaryDB.search_receipts`: newest first by (issued_at, idx), with the
#: equality filters (server; server and tool; tool) leading the key.
SEARCH_INDEXES = """
CREATE INDEX IF NOT EXISTS receipts_by_time ON receipts (issued_at, idx);
CREATE INDEX IF NOT EXISTS receipts_by_server_time ON receipts (server, issued_at, idx);
CREATE INDEX IF NOT EXISTS receipts_by_server_tool_time ON receipts (server, tool, issued_at, idx);
CREATE INDEX IF NOT EXISTS receipts_by_tool_time ON receipts (tool, issued_at, idx);
"""

SCHEMA = TABLES + SEARCH_INDEXES

RECEIPT_COLUMNS = "id, call_sha256, idx, server, tool, issued_at, kid, sig, account"


@dataclass(frozen=True)
class ReceiptRow:
    id: str
    call_sha256: str
    index: int
    server: str
    tool: str
    issued_at: str
    kid: str
    sig: str
    account: str


@dataclass(frozen=True)
class ApiKeyRow:
    key_id: str
    account: str
    secret_sha256: bytes
    revoked: float | None
    monthly_allowance: int | None


def init_schema(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(SCHEMA)


class NotaryDB:
    """Point reads on their own connection; batch writes go through the log's transaction.

    The reads are indexed lookups of one row in a WAL database, where readers never wait for the
    writer: they take a few microseconds, less than handing them to a thread would, so they run
    on the event loop's thread. The methods stay ``async`` so a networked backend fits the same
    interface.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, path: Path) -> NotaryDB:
        init_schema(path)
        conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        return cls(conn)

    async def close(self) -> None:
        self.conn.close()

    async def _one(self, sql: str, args: Sequence[Any]) -> Any:
        return self.conn.execute(sql, args).fetchone()

    async def receipt_by_id(self, receipt_id: str) -> ReceiptRow | None:
        row = await self._one(f"SELECT {RECEIPT_COLUMNS} FROM receipts WHERE id = ?",
                              (receipt_id,))
        return None if row is None else ReceiptRow(*row)

    async def receipt_by_digest(self, call_sha256: str) -> ReceiptRow | None:
        row = await self._one(f"SELECT {RECEIPT_COLUMNS} FROM receipts WHERE call_sha256 = ?",
                              (call_sha256,))
        return None if row is None else ReceiptRow(*row)

    # Search -------------------------------------------------------------------------------
    # One self-contained query, kept apart so that it ports as one method of a store contract.

    async def search_receipts(self, *, server: str | None = None, tool: str | None = None,
                              since: str | None = None, until: str | None = None,
                              before: tuple[str, int] | None = None, limit: int = 20
                              ) -> list[ReceiptRow]:
        """Receipts newest first by ``(issued_at, index)``, at most ``limit`` of them.

        ``since`` (inclusive) and ``until`` (exclusive) are ``issued_at`` strings in the
        receipts' own fixed-width RFC 3339 form, so text order is time order. ``before`` is
        the ``(issued_at, index)`` of the last row of the previous page: the next page starts
        strictly after it, which keeps pages stable while new receipts arrive (they are newer
        than any cursor). The index on ``(server, tool, issued_at, idx)`` (or its shorter
        siblings) makes every combination a range scan.
        """
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("server", server), ("tool", tool)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if since is not None:
            where.append("issued_at >= ?")
            args.append(since)
        if until is not None:
            where.append("issued_at < ?")
            args.append(until)
        if before is not None:
            where.append("(issued_at, idx) < (?, ?)")
            args.extend(before)
        sql = (f"SELECT {RECEIPT_COLUMNS} FROM receipts"
               + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY issued_at DESC, idx DESC LIMIT ?")
        args.append(limit)
        return [ReceiptRow(*row) for row in self.conn.execute(sql, args).fetchall()]

    async def api_key(self, key_id: str) -> ApiKeyRow | None:
        row = await self._one(
            "SELECT k.key_id, k.account, k.secret_sha256, k.revoked, a.monthly_allowance "
            "FROM api_keys k JOIN accounts a ON a.name = k.account WHERE k.key_id = ?",
            (key_id,),
        )
        return None if row is None else ApiKeyRow(row[0], row[1], bytes(row[2]), row[3], row[4])

    async def usage(self, account: str, month: str) -> int:
        row = await self._one("SELECT count FROM usage WHERE account = ? AND month = ?",
                              (account, month))
        return 0 if row is None else int(row[0])

    async def receipt_keys(self) -> list[tuple[str, str]]:
        rows = self.conn.execute("SELECT kid, jwk FROM receipt_keys ORDER BY created").fetchall()
        return [(r[0], r[1]) for r in rows]


async def insert_receipts(conn: aiosqlite.Connection, rows: Sequence[ReceiptRow],
                          usage: dict[tuple[str, str], int]) -> None:
    """Inside the log's batch transaction: the receipts and the writes they count."""
    await conn.executemany(
        f"INSERT INTO receipts ({RECEIPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(r.id, r.call_sha256, r.index, r.server, r.tool, r.issued_at, r.kid, r.sig, r.account)
         for r in rows],
    )
    await conn.executemany(
        "INSERT INTO usage (account, month, count) VALUES (?, ?, ?) "
        "ON CONFLICT (account, month) DO UPDATE SET count = count + excluded.count",
        [(a, m, n) for (a, m), n in usage.items()],
    )


# Administration (CLI): short synchronous transactions beside a running server.

def connect_admin(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise FileNotFoundError(f"no notary database at {path}; run `notary serve` once first")
    init_schema(path)
    conn = sqlite3.connect(path, timeout=10)
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def create_account_key(conn: sqlite3.Connection, account: str, allowance: int | None,
                       key_id: str, secret_sha256: bytes) -> None:
    now = time.time()
    with conn:
        conn.execute(
            "INSERT INTO accounts (name, monthly_allowance, created) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET monthly_allowance = "
            "coalesce(excluded.monthly_allowance, accounts.monthly_allowance)",
            (account, allowance, now),
        )
        conn.execute(
            "INSERT INTO api_keys (key_id, account, secret_sha256, created) VALUES (?, ?, ?, ?)",
            (key_id, account, secret_sha256, now),
        )


def list_keys(conn: sqlite3.Connection, month: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT k.key_id, k.account, a.monthly_allowance, coalesce(u.count, 0), k.created, "
        "k.revoked FROM api_keys k JOIN accounts a ON a.name = k.account "
        "LEFT JOIN usage u ON u.account = k.account AND u.month = ? ORDER BY k.created",
        (month,),
    ).fetchall()


def revoke_key(conn: sqlite3.Connection, key_id: str) -> bool:
    with conn:
        cur = conn.execute("UPDATE api_keys SET revoked = ? WHERE key_id = ? AND revoked IS NULL",
                           (time.time(), key_id))
    return cur.rowcount == 1


def add_receipt_key(conn: sqlite3.Connection, kid: str, jwk: str) -> None:
    with conn:
        conn.execute("INSERT OR IGNORE INTO receipt_keys (kid, jwk, created) VALUES (?, ?, ?)",
                     (kid, jwk, time.time()))
