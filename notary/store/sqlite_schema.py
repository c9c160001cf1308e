"""The notary's tables in the log's SQLite file: the layout (schema version 6) and its row
codecs; the migrations from versions 1 to 5 are :mod:`notary.store.sqlite_migrations`.
Synchronous functions on a connection that the caller has inside a write transaction
(``BEGIN IMMEDIATE``); ``notary.store.sqlite`` runs them.

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
  giving each name to the account of its first receipt
  (:func:`~notary.store.sqlite_migrations.fill_server_names`). A name's holder is found by the
  exact name; the skeleton only finds its look-alikes.
- ``skeleton_version`` (version 5): the :data:`~notary.core.server_names.SKELETON_VERSION`
  (rules, ICU and Unicode data) the stored skeletons were computed with. Opening the store
  recomputes them when this process's differs
  (:func:`~notary.store.sqlite_migrations.refresh_skeletons`), and a batch's screen refuses
  to decide on names when another process has since recomputed them with other data (a clear
  error rather than look-alikes judged by two different tables).
- ``withheld_receipts``: rows of a migrated store whose signed form could not be recovered
  (version 1 kept no ``entry_url``; see :func:`~notary.store.sqlite_migrations.migrate_v1`).
  They are never served, and their digests are never logged again.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ledger.core.compact import bundle_entry
from ledger.storage.base import StoreError
from notary.core.entry import EntryError, LogEntry, decode_entry
from notary.core.ids import b64url_encode, is_receipt_id
from notary.core.logs import position, split_position
from notary.core.receipts import Receipt, ReceiptSignature
from notary.core.server_names import name_skeleton
from notary.store.sqlite_lookup import LOOKUP_SCHEMA

__all__ = [
    "SCHEMA_VERSION",
    "Needed",
    "Refs",
    "create_tables",
    "ddl_statements",
    "digest_key",
    "from_cache",
    "id_key",
    "last_issued_at",
    "lookup_salt",
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
:func:`create_tables`): a frontend caches every key and reloads them when it moves, so that
authenticating costs the same for a known and an unknown key id (see
:meth:`notary.store.sqlite_state.KeyCache.get`). Version 1 stores already have it."""

_KEY_TRIGGERS = [
    f"CREATE TRIGGER {table}_{op.lower()}_version AFTER {op} ON {table} "
    "BEGIN UPDATE key_version SET n = n + 1 WHERE one = 1; END"
    for table in ("api_keys", "accounts") for op in ("INSERT", "UPDATE", "DELETE")]


def create_tables(conn: sqlite3.Connection) -> None:
    for statement in ddl_statements(SCHEMA_V2 + ";" + SERVER_NAMES + ";" + KEY_VERSION + ";"
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

    def __bool__(self) -> bool:
        return bool(self.kids or self.ledgers or self.names or self.accounts)


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


_T = TypeVar("_T")


def from_cache(cache: Refs, pending: Refs, accounts: Iterable[str],
               build: Callable[[Refs], _T]) -> _T | None:
    """``build(cache)`` for the usual batch, whose rows' ids the cache of committed ids holds
    already: the cache serves as it is (merging a copy of it for each batch, as
    :func:`refs_for` does, costs as much as the names it holds). None when the transaction has
    ids of its own (``pending``) or ``build`` meets a name the cache lacks (``KeyError``): the
    caller then takes :func:`refs_for`'s way. ``accounts``: the usage rows' accounts."""
    if pending or not all(a in cache.accounts for a in accounts):
        return None
    try:
        return build(cache)
    except KeyError:
        return None


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


def key_rows(receipts: Iterable[Receipt], salt: bytes, log: int = 0,
             keyed: Mapping[str, int] | None = None) -> list[tuple[int, int, int]]:
    """Each receipt's (position, id key, digest key): a row of ``receipt_keys_recent``.
    ``keyed``: digest keys already computed (by the batch's screen), by digest."""
    known = keyed or {}
    return [(position(log, r.index), _id_key(r.id),
             known[d] if (d := r.call_sha256) in known else digest_key(d, salt))
            for r in receipts]


def ddl_statements(script: str) -> Iterator[str]:
    """The statements of a DDL script, for ``execute`` one by one (``executescript`` would
    commit the caller's transaction first)."""
    for part in script.split(";"):
        if part.strip():
            yield part.strip()
