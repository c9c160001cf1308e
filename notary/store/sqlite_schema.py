"""The notary's tables in the log's SQLite file: the layout (schema version 6), its row codecs,
and the migrations from versions 1 to 5. Synchronous functions on a connection that the
caller has inside a write transaction (``BEGIN IMMEDIATE``); ``notary.store.sqlite`` runs them.

Layout (version 6, ``PRAGMA user_version = 6``; what each version added is marked). A receipt
is its log entry plus what cannot be rebuilt from it, so the receipt row holds no copy of the
id, digest, names or time:

- ``receipts``: ``idx`` (INTEGER PRIMARY KEY, the entry's log index, so the row *is* the table
  b-tree's key), ``sig`` (the 64 signature bytes), and small references: ``kid`` →
  ``receipt_keys``, ``ledger`` → ``receipt_ledgers`` (the ``origin`` and the ``entry_url``
  prefix the receipt was signed with: ``entry_url`` = prefix + decimal ``idx``), ``account`` →
  ``accounts``, ``server`` and ``tool`` → ``names``.
- ``receipt_ids`` / ``receipt_digests``: WITHOUT ROWID lookup tables ``(k, idx)`` whose key
  ``k`` is a short signed integer: the first 4 bytes of the id's 16 random bytes (the notary
  draws them), and for the digest, which a client chooses, 6 bytes of BLAKE2b keyed with the
  store's own random ``lookup_salt`` (a client cannot aim many digests at one key without it).
  Short keys keep these indexes small; they are not unique, so every hit is confirmed against
  the entry itself (a chance collision only costs a read, rarely: 6 bytes leave one false hit
  per few hundred thousand lookups at a billion receipts).
- ``receipt_keys_recent`` and ``lookup_merge`` (version 4): a commit appends its receipts' keys
  there, and they reach ``receipt_ids`` / ``receipt_digests`` later, merged in key order a
  generation at a time (:mod:`notary.store.sqlite_lookup`); a lookup reads both. Version 3
  stores are migrated by creating the two tables: their keys are all in the lookup tables.
- Search (``search_receipts``): ``issued_at`` never decreases along the log (the notary issues
  under the log's lock, no earlier than ``notary_state.last_issued_at``), so newest first by
  ``(issued_at, idx)`` is newest first by ``idx``, and a time range is an index range (found by
  bisecting the entries). The indexes are on ``(server)``, ``(tool)`` and ``(server, tool)``:
  small integers, no text and no time. Every entry of an index ends with the rowid, which is
  ``idx``, so each is in ``idx`` order within its key and an ``idx`` range is a range of it.
  Stores created before 2026-12-01 also name ``idx`` as the last column (the same order, with
  ``idx`` stored twice: 3-4 bytes more per receipt and index); they keep those indexes, which
  the same queries use, so no migration is needed.
- The rest of a receipt (``spec``, ``id``, ``server``, ``tool``, ``call_sha256``,
  ``issued_at``) is read back from the CBOR entry in its bundle, which holds exactly the values
  that were signed: the receipt comes back byte for byte.
- ``accounts``, ``api_keys`` (SHA-256 of the secret only), ``usage`` per account and UTC month,
  ``receipt_keys`` (public JWKs), ``names``, ``receipt_ledgers``: small tables with explicit
  INTEGER PRIMARY KEYs (VACUUM keeps those stable).
- ``server_names`` (version 3): each held server name, its UTS #39 skeleton (indexed: the
  screen finds look-alikes by it) and the account that holds it. The first receipt logged
  under a free name claims it, in the batch's transaction; version 2 stores are migrated by
  giving each name to the account of its first receipt (:func:`fill_server_names`). A
  name's holder is found by the exact name; the skeleton only finds its look-alikes.
- ``skeleton_version`` (version 5): the :data:`~notary.core.server_names.SKELETON_VERSION`
  (rules, ICU and Unicode data) the stored skeletons were computed with. Opening the store
  recomputes them when this process's differs (:func:`refresh_skeletons`), and a batch's
  screen refuses to decide on names when another process has since recomputed them with
  other data (a clear error rather than look-alikes judged by two different tables).
- ``withheld_receipts``: rows of a migrated store whose signed form could not be recovered
  (version 1 kept no ``entry_url``; see :func:`migrate_v1`). They are never served, and their
  digests are never logged again.

Version 1 (every store before this layout) stored each receipt as text columns beside the
entry (id, hex digest, names, time, kid, base64url signature, account) and rebuilt
``entry_url`` from the *current* base URL, so old receipts stopped verifying after a change of
``--public-url``, port or host. :func:`migrate_v1` finds the base URL each one was signed with
by checking its signature against candidates, and withholds (and reports) the ones it cannot.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ledger.core.compact import bundle_entry
from ledger.core.note import NoteError, parse_note
from ledger.core.paths import ENTRIES_PATH
from ledger.core.tiles import ENTRIES_LEVEL
from ledger.storage.base import StoreError
from ledger.storage.sqlite import read_tiles_sync
from notary.core.entry import EntryError, LogEntry, decode_entry
from notary.core.ids import b64url_decode, b64url_encode, is_receipt_id
from notary.core.jwks import Jwks, JwksError
from notary.core.logs import position, split_position
from notary.core.receipts import Receipt, ReceiptSignature, ReceiptSignatureError
from notary.core.server_names import SKELETON_VERSION, name_skeleton
from notary.store.sqlite_lookup import LOOKUP_SCHEMA

__all__ = [
    "SCHEMA_VERSION",
    "MigrationReport",
    "Needed",
    "Refs",
    "digest_key",
    "id_key",
    "last_issued_at",
    "lookup_salt",
    "prepare",
    "receipt_from_row",
]

SCHEMA_VERSION = 6
"""Version 6 (docs/lifecycle.md): the file may hold a sequence of logs (the ledger's ``logs``
table and log n's ``tiles_n`` …), and a receipt of log n >= 1 is keyed by its position
``n << 40 | index``. No table changes; the number makes an older release, which would write
to a frozen log and misread those rows, refuse the file."""

SCHEMA_V2 = """
CREATE TABLE accounts (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, monthly_allowance INTEGER,
    created REAL NOT NULL);
CREATE TABLE api_keys (
    key_id TEXT PRIMARY KEY, account INTEGER NOT NULL REFERENCES accounts(id),
    secret_sha256 BLOB NOT NULL, created REAL NOT NULL, revoked REAL);
CREATE TABLE usage (
    account INTEGER NOT NULL REFERENCES accounts(id), month TEXT NOT NULL,
    count INTEGER NOT NULL, PRIMARY KEY (account, month)) WITHOUT ROWID;
CREATE TABLE receipt_keys (
    id INTEGER PRIMARY KEY, kid TEXT NOT NULL UNIQUE, jwk TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE receipt_ledgers (
    id INTEGER PRIMARY KEY, origin TEXT NOT NULL, entry_url_prefix TEXT NOT NULL,
    UNIQUE (origin, entry_url_prefix));
CREATE TABLE names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE receipts (
    idx INTEGER PRIMARY KEY, sig BLOB NOT NULL, kid INTEGER NOT NULL, ledger INTEGER NOT NULL,
    account INTEGER NOT NULL, server INTEGER NOT NULL, tool INTEGER NOT NULL);
CREATE INDEX receipts_by_server ON receipts (server);
CREATE INDEX receipts_by_tool ON receipts (tool);
CREATE INDEX receipts_by_server_tool ON receipts (server, tool);
CREATE TABLE receipt_ids (k INTEGER NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY (k, idx))
    WITHOUT ROWID;
CREATE TABLE receipt_digests (k INTEGER NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY (k, idx))
    WITHOUT ROWID;
CREATE TABLE lookup_salt (one INTEGER PRIMARY KEY CHECK (one = 1), salt BLOB NOT NULL);
CREATE TABLE notary_state (one INTEGER PRIMARY KEY CHECK (one = 1), last_issued_at TEXT);
CREATE TABLE withheld_receipts (
    id TEXT PRIMARY KEY, call_sha256 TEXT NOT NULL UNIQUE, idx INTEGER NOT NULL UNIQUE,
    server TEXT NOT NULL, tool TEXT NOT NULL, issued_at TEXT NOT NULL,
    kid TEXT NOT NULL, sig TEXT NOT NULL, account TEXT NOT NULL, problem TEXT NOT NULL);
"""

SERVER_NAMES = """
CREATE TABLE server_names (
    name TEXT PRIMARY KEY, skeleton TEXT NOT NULL,
    account INTEGER NOT NULL REFERENCES accounts(id), since REAL NOT NULL);
CREATE INDEX server_names_by_skeleton ON server_names (skeleton)
"""
"""Version 3: who holds each server name (see the module's docstring)."""

CLAIM_NAME = ("INSERT OR IGNORE INTO server_names (name, skeleton, account, since) "
              "VALUES (?, ?, ?, ?)")
"""A migrated receipt's server name becomes its account's unless an earlier one's holds it."""

CLAIM_FREE_NAME = ("INSERT INTO server_names (name, skeleton, account, since) "
                   "VALUES (?, ?, ?, ?)")
"""A new receipt's server name that the batch's screen found free becomes its account's: a
name held after all fails the transaction (a lost claim is never hidden)."""

SKELETON_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS skeleton_version (
    one INTEGER PRIMARY KEY CHECK (one = 1), version TEXT NOT NULL);
INSERT OR IGNORE INTO skeleton_version (one, version) VALUES (1, '')
"""
"""Version 5: the data the stored skeletons were computed with ('': unknown, recomputed at
open by :func:`refresh_skeletons`)."""

_V1_TABLES = ("accounts", "api_keys", "usage", "receipts", "receipt_keys")

# A receipt read back: its row and the references resolved; its entry comes from its bundle
# (ledger.storage.sqlite.read_tiles_sync: an edge bundle is stored in parts).
RECEIPT_COLUMNS = "r.idx, r.sig, k.kid, l.origin, l.entry_url_prefix"
RECEIPT_JOINS = ("JOIN receipt_keys k ON k.id = r.kid "
                 "JOIN receipt_ledgers l ON l.id = r.ledger")


def id_key(receipt_id: str) -> int:
    """The lookup key of a receipt id (``tc_`` + base64url of 16 random bytes): 4 bytes."""
    if not is_receipt_id(receipt_id):  # the shape, canonical trailing bits included
        raise ValueError("not a receipt id")
    return _id_key(receipt_id)


def _id_key(receipt_id: str) -> int:
    """:func:`id_key` of an id known to be well formed (one the notary signed)."""
    # Its first 8 characters are the first 6 bytes: all the key needs, without decoding 22.
    return int.from_bytes(base64.urlsafe_b64decode(receipt_id[3:11])[:4], "big", signed=True)


def digest_key(call_sha256: str, salt: bytes) -> int:
    """The lookup key of a ``call_sha256`` (64 lower-case hex) in a store with this salt."""
    keyed = hashlib.blake2b(bytes.fromhex(call_sha256), digest_size=6, key=salt).digest()
    return int.from_bytes(keyed, "big", signed=True)


def lookup_salt(conn: sqlite3.Connection) -> bytes:
    row = conn.execute("SELECT salt FROM lookup_salt WHERE one = 1").fetchone()
    if row is None:
        raise StoreError("the store has no lookup salt (a damaged notary schema)")
    return bytes(row[0])


KEY_VERSION = """
CREATE TABLE IF NOT EXISTS key_version (
    one INTEGER PRIMARY KEY CHECK (one = 1), n INTEGER NOT NULL);
INSERT OR IGNORE INTO key_version (one, n) VALUES (1, 0)
"""
"""A counter that any change to API keys or accounts, by any process, bumps (the triggers of
:func:`_create_v2`): a frontend caches every key and reloads them when it moves, so that
authenticating costs the same for a known and an unknown key id (see
:meth:`notary.store.sqlite.SqliteNotaryStore.api_key`). Version 1 stores already have it."""

_KEY_TRIGGERS = [
    f"CREATE TRIGGER {table}_{op.lower()}_version AFTER {op} ON {table} "
    "BEGIN UPDATE key_version SET n = n + 1 WHERE one = 1; END"
    for table in ("api_keys", "accounts") for op in ("INSERT", "UPDATE", "DELETE")]


def _create_v2(conn: sqlite3.Connection) -> None:
    for statement in _statements(SCHEMA_V2 + ";" + SERVER_NAMES + ";" + KEY_VERSION + ";"
                                 + LOOKUP_SCHEMA + ";" + SKELETON_VERSION_TABLE):
        conn.execute(statement)
    for table in ("api_keys", "accounts"):  # a version-1 store's triggers, on renamed tables
        for op in ("insert", "update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_{op}_version")
    for trigger in _KEY_TRIGGERS:
        conn.execute(trigger)
    conn.execute("INSERT INTO lookup_salt (one, salt) VALUES (1, ?)", (os.urandom(16),))
    conn.execute("INSERT INTO notary_state (one, last_issued_at) VALUES (1, NULL)")


def last_issued_at(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT last_issued_at FROM notary_state WHERE one = 1").fetchone()
    return None if row is None else row[0]


TAIL_UPDATE = ("UPDATE notary_state SET last_issued_at = ? WHERE one = 1 "
               "AND (last_issued_at IS NULL OR last_issued_at < ?)")
"""Parameters (t, t): the latest issued_at becomes ``t`` unless a later one is stored."""


def entry_at(bundle: bytes, index: int) -> LogEntry:
    """The entry at log ``index`` from its bundle (StoreError if it is not a notary entry)."""
    try:
        return decode_entry(bundle_entry(bundle, index & 0xFF))
    except (ValueError, EntryError) as e:
        raise StoreError(f"the log entry at index {index} cannot be read: {e}") from e


def receipt_from_row(row: Sequence[object]) -> Receipt:
    """The stored receipt from a row of ``SELECT {RECEIPT_COLUMNS} … {RECEIPT_JOINS}`` and the
    entry bundle that holds its entry."""
    pos, sig, kid, origin, prefix, bundle = row
    assert isinstance(pos, int) and isinstance(sig, bytes) and isinstance(kid, str)
    assert isinstance(origin, str) and isinstance(prefix, str) and isinstance(bundle, bytes)
    _, idx = split_position(pos)  # the row's key is the receipt's position (notary.core.logs)
    entry = entry_at(bundle, idx)
    return Receipt(id=entry.id, server=entry.server, tool=entry.tool,
                   call_sha256=entry.call_sha256_hex, issued_at=entry.issued_at, origin=origin,
                   index=idx, entry_url=prefix + str(idx),
                   signature=ReceiptSignature(kid, b64url_encode(sig)))


def split_entry_url(receipt: Receipt) -> str:
    """The prefix of ``receipt.entry_url`` before its index (StoreError if it does not end so)."""
    suffix = str(receipt.index)
    if not receipt.entry_url.endswith(suffix):
        raise StoreError(f"receipt {receipt.id}: entry_url does not end with its index {suffix}")
    return receipt.entry_url[: -len(suffix)]


@dataclass
class Refs:
    """Name → id of the small tables a receipt row refers to.

    Ids are only ever added, so a cache of committed ones stays right; ids created inside a
    transaction are kept apart (``pending``) until it commits.
    """

    kids: dict[str, int] = field(default_factory=dict)
    ledgers: dict[tuple[str, str], int] = field(default_factory=dict)
    names: dict[str, int] = field(default_factory=dict)  # servers and tools
    accounts: dict[str, int] = field(default_factory=dict)

    def merge(self, other: Refs) -> None:
        self.kids.update(other.kids)
        self.ledgers.update(other.ledgers)
        self.names.update(other.names)
        self.accounts.update(other.accounts)


@dataclass
class Needed:
    """The names a set of receipts refers to."""

    kids: set[str] = field(default_factory=set)
    ledgers: set[tuple[str, str]] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    accounts: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, receipts: Iterable[tuple[Receipt, str]]) -> Needed:
        out = cls()
        for r, account in receipts:
            assert r.signature is not None
            out.kids.add(r.signature.kid)
            out.ledgers.add((r.origin, split_entry_url(r)))
            out.names.update((r.server, r.tool))
            out.accounts.add(account)
        return out

    def missing_from(self, refs: Refs) -> Needed:
        return Needed(self.kids - refs.kids.keys(), self.ledgers - refs.ledgers.keys(),
                      self.names - refs.names.keys(), self.accounts - refs.accounts.keys())

    def __bool__(self) -> bool:
        return bool(self.kids or self.ledgers or self.names or self.accounts)


def refs_for(receipts: Iterable[tuple[Receipt, str]], usage_accounts: Iterable[str],
             *known: Refs) -> tuple[Refs, Needed]:
    """The ids a batch's receipt rows and usage rows can take from ``known`` (merged), and the
    names still to resolve inside its transaction."""
    refs = Refs()
    for k in known:
        refs.merge(k)
    missing = Needed.of(receipts).missing_from(refs)
    missing.accounts |= set(usage_accounts) - refs.accounts.keys()
    return refs, missing


def resolve_refs(conn: sqlite3.Connection, needed: Needed, *, create_accounts: bool = False
                 ) -> Refs:
    """The ids of ``needed``, creating name and ledger rows that do not exist yet (and
    accounts, for migrated rows only); a receipt key must be registered already."""
    new = Refs()
    for kid in needed.kids:
        row = conn.execute("SELECT id FROM receipt_keys WHERE kid = ?", (kid,)).fetchone()
        if row is None:
            raise StoreError(f"receipt key {kid} is not registered in the store")
        new.kids[kid] = row[0]
    for origin, prefix in needed.ledgers:
        conn.execute("INSERT OR IGNORE INTO receipt_ledgers (origin, entry_url_prefix) "
                     "VALUES (?, ?)", (origin, prefix))
        new.ledgers[(origin, prefix)] = conn.execute(
            "SELECT id FROM receipt_ledgers WHERE origin = ? AND entry_url_prefix = ?",
            (origin, prefix)).fetchone()[0]
    for name in needed.names:
        conn.execute("INSERT OR IGNORE INTO names (name) VALUES (?)", (name,))
        new.names[name] = conn.execute("SELECT id FROM names WHERE name = ?",
                                       (name,)).fetchone()[0]
    for name in needed.accounts:
        if create_accounts:
            conn.execute("INSERT OR IGNORE INTO accounts (name, monthly_allowance, created) "
                         "VALUES (?, NULL, 0)", (name,))
        row = conn.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise StoreError(f"account {name!r} does not exist")
        new.accounts[name] = row[0]
    return new


def receipt_statements(receipts: Sequence[tuple[Receipt, str]], refs: Refs,
                       claims: Sequence[tuple[str, str]] | None = None, log: int = 0
                       ) -> list[tuple[str, Sequence[Sequence[object]]]]:
    """The INSERTs that store signed receipts (each with its account), ``refs`` complete, and
    claim server names: ``claims`` ((name, account) that the batch's screen found free, see
    :func:`notary.store.base.new_claims`), or, for a migration (None), the name of each
    receipt unless an earlier receipt's account holds it. Their lookup keys are written apart
    (:func:`key_rows`). ``log``: the number of the log they are in (their rows are keyed by
    position)."""
    rows: list[Sequence[object]] = []
    now = time.time()
    latest = ""
    first: dict[str, str] = {}
    for r, account in receipts:
        first.setdefault(r.server, account)
        assert r.signature is not None
        rows.append((position(log, r.index), r.signature.raw, refs.kids[r.signature.kid],
                     refs.ledgers[(r.origin, split_entry_url(r))], refs.accounts[account],
                     refs.names[r.server], refs.names[r.tool]))
        latest = max(latest, r.issued_at)
    claiming = first.items() if claims is None else claims
    return [
        ("INSERT INTO receipts (idx, sig, kid, ledger, account, server, tool) "
         "VALUES (?, ?, ?, ?, ?, ?, ?)", rows),
        (TAIL_UPDATE, [(latest, latest)] if receipts else []),
        (CLAIM_NAME if claims is None else CLAIM_FREE_NAME,
         [(name, name_skeleton(name), refs.accounts[account], now)
          for name, account in claiming]),
    ]


def key_rows(receipts: Iterable[Receipt], salt: bytes, log: int = 0
             ) -> list[tuple[int, int, int]]:
    """Each receipt's (position, id key, digest key): a row of ``receipt_keys_recent``."""
    return [(position(log, r.index), _id_key(r.id), digest_key(r.call_sha256, salt))
            for r in receipts]


def lookup_statements(keys: Sequence[tuple[int, int, int]]
                      ) -> list[tuple[str, Sequence[Sequence[object]]]]:
    """The keys straight into the lookup tables, as a migration writes them (sorted: the pages
    of each table are written once)."""
    return [("INSERT INTO receipt_ids (k, idx) VALUES (?, ?)",
             sorted((i, idx) for idx, i, _ in keys)),
            ("INSERT INTO receipt_digests (k, idx) VALUES (?, ?)",
             sorted((d, idx) for idx, _, d in keys))]


# Creating and migrating ---------------------------------------------------------------------


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
        _create_v2(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    elif version in (2, 3, 4, 5):
        if version == 2:
            for statement in _statements(SERVER_NAMES):
                conn.execute(statement)
            fill_server_names(conn)
        if version <= 3:
            for statement in _statements(LOOKUP_SCHEMA):
                conn.execute(statement)
        if version <= 4:
            for statement in _statements(SKELETON_VERSION_TABLE):
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


def _statements(script: str) -> Iterator[str]:
    """The statements of a DDL script, for ``execute`` one by one (``executescript`` would
    commit the caller's transaction first)."""
    for part in script.split(";"):
        if part.strip():
            yield part.strip()


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
    _create_v2(conn)
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
