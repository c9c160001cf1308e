"""Creating the notary's tables in a SQLite file, or migrating them to the current layout
(:mod:`notary.store.sqlite_schema`, schema version 6) from versions 1 to 5, when a store opens
(:func:`prepare`). Synchronous functions on a connection that the caller has inside a write
transaction (``BEGIN IMMEDIATE``): a migration commits whole or not at all.

Version 1 (every store before this layout) stored each receipt as text columns beside the
entry (id, hex digest, names, time, kid, base64url signature, account) and rebuilt
``entry_url`` from the *current* base URL, so old receipts stopped verifying after a change of
``--public-url``, port or host. :func:`migrate_v1` finds the base URL each one was signed with
by checking its signature against candidates, and withholds (and reports) the ones it cannot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ledger.core.note import NoteError, parse_note
from ledger.core.paths import ENTRIES_PATH
from ledger.core.tiles import ENTRIES_LEVEL
from ledger.storage.base import StoreError
from ledger.storage.sqlite import read_tiles_sync
from notary.core.ids import b64url_decode
from notary.core.jwks import Jwks, JwksError
from notary.core.receipts import Receipt, ReceiptSignature, ReceiptSignatureError
from notary.core.server_names import SKELETON_VERSION, name_skeleton
from notary.store.sqlite_lookup import LOOKUP_SCHEMA
from notary.store.sqlite_schema import (
    CLAIM_NAME,
    SCHEMA_VERSION,
    SERVER_NAMES,
    SKELETON_VERSION_TABLE,
    TAIL_UPDATE,
    Needed,
    Refs,
    create_tables,
    ddl_statements,
    entry_at,
    key_rows,
    lookup_salt,
    receipt_statements,
    resolve_refs,
    split_entry_url,
)

__all__ = ["MigrationReport", "prepare"]

_V1_TABLES = ("accounts", "api_keys", "usage", "receipts", "receipt_keys")


def lookup_statements(keys: Sequence[tuple[int, int, int]]
                      ) -> list[tuple[str, Sequence[Sequence[object]]]]:
    """The keys straight into the lookup tables, as a migration writes them (sorted: the pages
    of each table are written once)."""
    return [("INSERT INTO receipt_ids (k, idx) VALUES (?, ?)",
             sorted((i, idx) for idx, i, _ in keys)),
            ("INSERT INTO receipt_digests (k, idx) VALUES (?, ?)",
             sorted((d, idx) for idx, _, d in keys))]


@dataclass
class MigrationReport:
    """What :func:`prepare` did: the version it found, receipts moved to the current layout,
    the ``entry_url`` prefixes they were signed with, and the receipts withheld (id, why)."""

    from_version: int
    created: bool = False
    migrated: int = 0
    prefixes: list[str] = field(default_factory=list)
    withheld: list[tuple[str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """An older layout was migrated, or withheld receipts were recovered."""
        return not self.created and (self.from_version != SCHEMA_VERSION or self.migrated > 0)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def prepare(conn: sqlite3.Connection, entry_url_bases: Sequence[str]) -> MigrationReport:
    """Create the notary's tables, or migrate them to :data:`SCHEMA_VERSION`, in the caller's
    write transaction; then retry withheld receipts against ``entry_url_bases``."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = _tables(conn)
    report = MigrationReport(version)
    if version == 0 and "receipts" in tables:
        report.from_version = 1
        migrate_v1(conn, entry_url_bases, report)
    elif version == 0:
        report.created = True
        create_tables(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    elif version in (2, 3, 4, 5):
        if version == 2:
            for statement in ddl_statements(SERVER_NAMES):
                conn.execute(statement)
            fill_server_names(conn)
        if version <= 3:
            for statement in ddl_statements(LOOKUP_SCHEMA):
                conn.execute(statement)
        if version <= 4:
            for statement in ddl_statements(SKELETON_VERSION_TABLE):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        if conn.execute("SELECT 1 FROM withheld_receipts LIMIT 1").fetchone() is not None:
            recover_withheld(conn, entry_url_bases, report)
    elif version != SCHEMA_VERSION:
        raise StoreError(f"the notary's tables are at schema version {version}; this notary "
                         f"knows version {SCHEMA_VERSION} and older (is the file from a newer "
                         "release?)")
    elif conn.execute("SELECT 1 FROM withheld_receipts LIMIT 1").fetchone() is not None:
        recover_withheld(conn, entry_url_bases, report)
    refresh_skeletons(conn)
    return report


def refresh_skeletons(conn: sqlite3.Connection) -> None:
    """Recompute the stored skeletons if they were computed with other data than this
    process's (:data:`SKELETON_VERSION`), in the caller's write transaction. Holds are
    unaffected (a holder is found by the exact name); look-alikes are judged by this
    process's data from now on."""
    (stored,) = conn.execute("SELECT version FROM skeleton_version WHERE one = 1").fetchone()
    if stored == SKELETON_VERSION:
        return
    changed = [(new, name) for name, old in conn.execute(
        "SELECT name, skeleton FROM server_names").fetchall()
        if (new := name_skeleton(name)) != old]
    conn.executemany("UPDATE server_names SET skeleton = ? WHERE name = ?", changed)
    conn.execute("UPDATE skeleton_version SET version = ? WHERE one = 1", (SKELETON_VERSION,))


def prefixes_for(bases: Iterable[str]) -> list[str]:
    """``entry_url`` prefixes of candidate base URLs, in order, without duplicates."""
    return list(dict.fromkeys(b.rstrip("/") + ENTRIES_PATH for b in bases if b))


def log_origin(conn: sqlite3.Connection) -> str | None:
    """The log's origin: the first line of its stored checkpoint (None for an empty store)."""
    row = conn.execute("SELECT note FROM log_state WHERE one = 1").fetchone()
    if row is None:
        return None
    try:
        return parse_note(bytes(row[0])).text.split("\n", 1)[0]
    except (NoteError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class _V1Row:
    id: str
    call_sha256: str
    idx: int
    server: str
    tool: str
    issued_at: str
    kid: str
    sig: str
    account: str


_V1_COLUMNS = "id, call_sha256, idx, server, tool, issued_at, kid, sig, account"


def migrate_v1(conn: sqlite3.Connection, entry_url_bases: Sequence[str],
               report: MigrationReport) -> None:
    """Version 1 → 2 in the caller's transaction (all or nothing).

    Accounts, keys, usage and receipt keys are copied. Each receipt is rebuilt from its log
    entry (which must match the row) with each candidate ``entry_url`` prefix in turn (the one
    that matched the previous receipt first, then ``entry_url_bases`` in order) until its
    signature verifies under its kid: only then is it what was signed. One that matches no
    candidate, or whose entry or key is missing, goes to ``withheld_receipts`` with the reason.
    """
    for table in _V1_TABLES:
        conn.execute(f"ALTER TABLE {table} RENAME TO v1_{table}")
    create_tables(conn)
    conn.execute("INSERT INTO accounts (name, monthly_allowance, created) "
                 "SELECT name, monthly_allowance, created FROM v1_accounts ORDER BY created, name")
    conn.execute("INSERT INTO api_keys (key_id, account, secret_sha256, created, revoked) "
                 "SELECT k.key_id, a.id, k.secret_sha256, k.created, k.revoked "
                 "FROM v1_api_keys k JOIN accounts a ON a.name = k.account")
    conn.execute("INSERT INTO usage (account, month, count) SELECT a.id, u.month, u.count "
                 "FROM v1_usage u JOIN accounts a ON a.name = u.account")
    conn.execute("INSERT INTO receipt_keys (kid, jwk, created) "
                 "SELECT kid, jwk, created FROM v1_receipt_keys ORDER BY created, kid")
    rows = (_V1Row(*r) for r in conn.execute(
        f"SELECT {_V1_COLUMNS} FROM v1_receipts ORDER BY idx"))
    _recover(conn, rows, entry_url_bases, report, from_withheld=False)
    (latest,) = conn.execute("SELECT max(issued_at) FROM v1_receipts").fetchone()
    if latest is not None:  # withheld entries are in the log too: no new one goes before them
        conn.execute(TAIL_UPDATE, (latest, latest))
    for table in _V1_TABLES:
        conn.execute(f"DROP TABLE v1_{table}")
    fill_server_names(conn)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def fill_server_names(conn: sqlite3.Connection) -> None:
    """Give each server name logged before names were held to the account of its first
    receipt (withheld ones included), as if that receipt had claimed it."""
    first: dict[str, tuple[int, int]] = {}  # name -> (index, account id)
    for name, idx, account in conn.execute(
            "SELECT n.name, min(r.idx), r.account FROM receipts r "
            "JOIN names n ON n.id = r.server GROUP BY r.server"):
        first[name] = (idx, account)  # SQLite: a bare column comes from the min(idx) row
    for name, idx, account_name in conn.execute(
            "SELECT server, idx, account FROM withheld_receipts ORDER BY idx"):
        if name in first and first[name][0] < idx:
            continue
        conn.execute("INSERT OR IGNORE INTO accounts (name, monthly_allowance, created) "
                     "VALUES (?, NULL, 0)", (account_name,))
        (account,) = conn.execute("SELECT id FROM accounts WHERE name = ?",
                                  (account_name,)).fetchone()
        first[name] = (idx, account)
    conn.executemany(CLAIM_NAME, [(name, name_skeleton(name), account, 0.0)
                                  for name, (_, account) in sorted(first.items())])


def recover_withheld(conn: sqlite3.Connection, entry_url_bases: Sequence[str],
                     report: MigrationReport) -> None:
    """Try the withheld receipts again with these candidate base URLs."""
    rows = [_V1Row(*r) for r in conn.execute(
        f"SELECT {_V1_COLUMNS} FROM withheld_receipts ORDER BY idx")]
    _recover(conn, iter(rows), entry_url_bases, report, from_withheld=True)


def _jwks(conn: sqlite3.Connection) -> Jwks:
    keys = []
    for (jwk,) in conn.execute("SELECT jwk FROM receipt_keys"):
        try:
            keys.append(json.loads(jwk))
        except ValueError:
            continue
    try:
        return Jwks({"keys": keys})
    except JwksError as e:
        raise StoreError(f"a stored receipt key is malformed: {e}") from e


def _recover(conn: sqlite3.Connection, rows: Iterator[_V1Row], entry_url_bases: Sequence[str],
             report: MigrationReport, *, from_withheld: bool) -> None:
    origin = log_origin(conn)
    jwks = _jwks(conn)
    salt = lookup_salt(conn)
    candidates = prefixes_for(entry_url_bases)
    refs = Refs()
    last: str | None = None
    bundle_no, bundle = -1, b""
    batch: list[tuple[Receipt, str]] = []
    withheld: list[tuple[_V1Row, str]] = []
    moved: list[str] = []

    def flush() -> None:
        if batch:
            refs.merge(resolve_refs(conn, Needed.of(batch).missing_from(refs),
                                    create_accounts=True))
            keys = key_rows((r for r, _ in batch), salt)
            for sql, params in [*receipt_statements(batch, refs), *lookup_statements(keys)]:
                conn.executemany(sql, params)
            batch.clear()

    for row in rows:
        if row.idx >> 8 != bundle_no:
            bundle_no = row.idx >> 8
            bundle = read_tiles_sync(conn, [(ENTRIES_LEVEL, bundle_no)]).get(
                (ENTRIES_LEVEL, bundle_no), b"")
        problem, receipt = _rebuild_v1(row, origin, bundle, jwks,
                                       ([last] if last else []) + candidates)
        if receipt is None:
            withheld.append((row, problem))
            continue
        last = split_entry_url(receipt)
        if last not in report.prefixes:
            report.prefixes.append(last)
        batch.append((receipt, row.account))
        moved.append(row.id)
        if len(batch) >= 1000:
            flush()
    flush()
    report.migrated += len(moved)
    if from_withheld:
        conn.executemany("DELETE FROM withheld_receipts WHERE id = ?", [(i,) for i in moved])
        report.withheld = [(r.id, p) for r, p in withheld]
    else:
        conn.executemany(
            f"INSERT INTO withheld_receipts ({_V1_COLUMNS}, problem) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(r.id, r.call_sha256, r.idx, r.server, r.tool, r.issued_at, r.kid, r.sig,
              r.account, p) for r, p in withheld])
        report.withheld.extend((r.id, p) for r, p in withheld)


def _rebuild_v1(row: _V1Row, origin: str | None, bundle: bytes, jwks: Jwks,
                prefixes: Sequence[str]) -> tuple[str, Receipt | None]:
    """(why not, None) or ("", the receipt exactly as signed) for one version-1 row."""
    if origin is None:
        return "the log has no signed checkpoint to take the origin from", None
    try:
        entry = entry_at(bundle, row.idx)
    except StoreError as e:
        return str(e), None
    if (entry.id, entry.server, entry.tool, entry.call_sha256_hex, entry.issued_at) != (
            row.id, row.server, row.tool, row.call_sha256, row.issued_at):
        return f"the log entry at index {row.idx} is not this receipt's", None
    try:
        signature = ReceiptSignature.from_raw(row.kid, b64url_decode(row.sig))
    except ValueError as e:
        return f"its signature cannot be read: {e}", None
    if row.kid not in jwks:
        return f"its receipt key {row.kid} is not in the store", None
    for prefix in dict.fromkeys(prefixes):
        receipt = Receipt(id=entry.id, server=entry.server, tool=entry.tool,
                          call_sha256=entry.call_sha256_hex, issued_at=entry.issued_at,
                          origin=origin, index=row.idx, entry_url=prefix + str(row.idx),
                          signature=signature)
        try:
            jwks.verify(receipt)
        except ReceiptSignatureError:
            continue
        return "", receipt
    tried = ", ".join(p.removesuffix(ENTRIES_PATH) for p in dict.fromkeys(prefixes)) or "none"
    return (f"its signature verifies under none of the base URLs tried ({tried}); name the one "
            "it was issued under with `notary migrate --base-url URL`"), None
