"""A stored receipt is served exactly as it was signed, whatever the server's URL became.

Schema version 1 rebuilt ``ledger.entry_url`` from the *current* base URL, so after a change of
``--public-url``, port or host every old receipt failed ``bad_signature``. Version 2 stores the
``entry_url`` prefix each receipt was signed with; a version-1 store (built here with the old
DDL, rows written the way the old notary wrote them) is migrated by finding, per receipt, the
base URL under which its signature verifies, and withholds (never serves) the ones it cannot.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger.log.facade import Log
from ledger.storage.sqlite import SqliteStore
from notary.core.accounts import NewApiKey, month_of, new_api_key
from notary.core.entry import LogEntry
from notary.core.ids import format_issued_at, new_receipt_id
from notary.core.jwks import Jwks
from notary.core.receipts import build_receipt
from notary.core.records import CallRecord, new_salt
from notary.serving.config import Settings
from notary.serving.keys import Paths, load_log_key, load_receipt_key
from notary.serving.startup import init_data_dir
from notary.store.base import ReceiptWithheldError, notary_tx
from notary.store.sqlite import SqliteNotaryStore
from notary.store.sqlite_schema import SCHEMA_VERSION
from tests.notary_server import NotaryFactory, NotaryProcess, free_port, run_cli

# The notary's tables as every release before schema version 2 created them (verbatim).
V1_DDL = """
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

# What the last version-1 release added: a counter the triggers bump on any key change.
V1_KEY_VERSION_DDL = """
CREATE TABLE IF NOT EXISTS key_version (
    one INTEGER PRIMARY KEY CHECK (one = 1), n INTEGER NOT NULL);
INSERT OR IGNORE INTO key_version (one, n) VALUES (1, 0);
""" + "".join(
    f"CREATE TRIGGER IF NOT EXISTS {table}_{op.lower()}_version AFTER {op} ON {table} "
    "BEGIN UPDATE key_version SET n = n + 1 WHERE one = 1; END;\n"
    for table in ("api_keys", "accounts") for op in ("INSERT", "UPDATE", "DELETE"))

FIRST_URL = "http://old.example:8080"  # the first run's URL: the origin is old.example:8080
MOVED_URL = "https://notary.example"  # where the operator moved it later
ELSEWHERE = "http://10.1.2.3:9000"  # a URL no candidate names


@dataclass
class V1Store:
    data: Path
    api_key: NewApiKey
    signed: dict[str, dict[str, Any]]  # receipt id -> the receipt exactly as signed
    under: dict[str, str]  # receipt id -> the base URL it was signed under
    bad_signature: str  # the id of a row whose signature was damaged
    wrong_entry: str  # the id of a row that disagrees with its log entry

    @property
    def broken(self) -> set[str]:
        """Ids whose row can never be recovered."""
        return {self.bad_signature, self.wrong_entry}

    def ids_under(self, base: str) -> list[str]:
        return [i for i, b in self.under.items() if b == base]


async def build_v1_store(data: Path, bases: Sequence[str], *, key_version: bool = False
                         ) -> V1Store:
    """A data directory as the old notary left it: log, keys, and version-1 rows whose receipts
    were signed under ``bases`` in turn (then one with a damaged signature, one whose entry is
    another receipt's)."""
    first = init_data_dir(Settings(data=data, public_url=FIRST_URL))
    assert first is not None
    paths = Paths(data)
    key = load_receipt_key(paths, first.kid)
    log = await Log.open(await SqliteStore.open(paths.db), signer=load_log_key(paths))
    now = time.time()
    entries = [LogEntry(id=new_receipt_id(), server="srv", tool=f"tool{i}",
                        call_sha256=os.urandom(32), issued_at=format_issued_at(datetime.now(UTC)))
               for i in range(len(bases) * 3 + 2)]
    appended = await log.append_many([e.encode() for e in entries])
    await log.close()
    api_key = new_api_key()
    signed: dict[str, dict[str, Any]] = {}
    under: dict[str, str] = {}
    rows = []
    for i, (entry, where) in enumerate(zip(entries, appended, strict=True)):
        base = bases[i % len(bases)]
        receipt = build_receipt(id=entry.id, server=entry.server, tool=entry.tool,
                                call_sha256_hex=entry.call_sha256_hex,
                                issued_at=entry.issued_at, origin=log.origin, index=where.index,
                                entry_url=f"{base}/v1/ledger/entries/{where.index}")
        sig = key.signature_for(receipt)
        receipt["signature"] = {"alg": "EdDSA", "kid": key.kid, "sig": sig}
        signed[entry.id], under[entry.id] = receipt, base
        rows.append([entry.id, entry.call_sha256_hex, where.index, entry.server, entry.tool,
                     entry.issued_at, key.kid, sig, "alice"])
    rows[-2][7] = rows[-2][7][:-2] + ("AA" if not rows[-2][7].endswith("AA") else "BA")
    rows[-1][4] = "not-its-tool"  # the row disagrees with its log entry
    with sqlite3.connect(paths.db) as db:
        db.executescript(V1_DDL + (V1_KEY_VERSION_DDL if key_version else ""))
        db.execute("INSERT INTO accounts VALUES ('alice', 100, ?)", (now,))
        db.execute("INSERT INTO api_keys VALUES (?, 'alice', ?, ?, NULL)",
                   (api_key.key_id, api_key.secret_sha256, now))
        db.execute("INSERT INTO usage VALUES ('alice', ?, ?)",
                   (month_of(datetime.now(UTC)), len(rows)))
        db.execute("INSERT INTO receipt_keys VALUES (?, ?, ?)",
                   (key.kid, json.dumps(key.public_jwk(), sort_keys=True), now))
        db.executemany("INSERT INTO receipts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return V1Store(data, api_key, signed, under, str(rows[-2][0]), str(rows[-1][0]))


def without_proof(receipt: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in receipt.items() if k != "proof"}


async def test_migration_recovers_what_was_signed_and_withholds_the_rest(tmp_path: Path) -> None:
    v1 = await build_v1_store(tmp_path / "d", [FIRST_URL, MOVED_URL, ELSEWHERE])
    db = Paths(v1.data).db
    store = await SqliteNotaryStore.open(db, entry_url_bases=[MOVED_URL, FIRST_URL])
    try:
        report = store.migration
        assert report is not None and report.from_version == 1 and report.changed
        recovered = [i for i in v1.signed if v1.under[i] != ELSEWHERE and i not in v1.broken]
        withheld = {i for i in v1.signed if i not in recovered}
        assert report.migrated == len(recovered)
        assert {i for i, _ in report.withheld} == withheld
        assert set(report.prefixes) == {f"{FIRST_URL}/v1/ledger/entries/",
                                        f"{MOVED_URL}/v1/ledger/entries/"}
        problems = dict(report.withheld)
        assert "none of the base URLs tried" in problems[v1.ids_under(ELSEWHERE)[0]]
        assert "not this receipt's" in problems[v1.wrong_entry]
        assert "signature" in problems[v1.bad_signature]
        jwks = Jwks({"keys": [json.loads(k.jwk) for k in await store.receipt_keys()]})
        for receipt_id in recovered:
            got = await store.receipt_by_id(receipt_id)
            assert got is not None and got.to_json() == v1.signed[receipt_id]
            assert got == await store.receipt_by_digest(got.call_sha256)
            jwks.verify(got)
        for receipt_id in withheld:
            with pytest.raises(ReceiptWithheldError):
                await store.receipt_by_id(receipt_id)
            with pytest.raises(ReceiptWithheldError):
                await store.receipt_by_digest(str(v1.signed[receipt_id]["call_sha256"]))
        # A withheld receipt's digest still counts as logged: it is never logged twice.
        some = str(v1.signed[sorted(withheld)[0]]["call_sha256"])
        async with store.transaction() as tx:
            assert (await notary_tx(tx).screen([some], [])).logged == {some: None}
        # Accounts, keys and usage came along.
        record = await store.api_key(v1.api_key.key_id)
        assert record is not None and record.account == "alice"
        assert record.secret_sha256 == v1.api_key.secret_sha256 and record.monthly_allowance == 100
        month = month_of(datetime.now(UTC))
        assert await store.usage("alice", month) == len(v1.signed)
    finally:
        await store.close()
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert not any(t.startswith("v1_") for t in tables)
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)

    # Naming the missing base URL later recovers those; the damaged ones stay withheld.
    store = await SqliteNotaryStore.open(db, entry_url_bases=[ELSEWHERE])
    try:
        report = store.migration
        assert report is not None and report.from_version == SCHEMA_VERSION
        assert report.migrated == len(v1.ids_under(ELSEWHERE)) - len(
            set(v1.ids_under(ELSEWHERE)) & v1.broken)
        assert {i for i, _ in report.withheld} == v1.broken
        for receipt_id in set(v1.ids_under(ELSEWHERE)) - v1.broken:
            got = await store.receipt_by_id(receipt_id)
            assert got is not None and got.to_json() == v1.signed[receipt_id]
    finally:
        await store.close()


async def test_a_migration_that_fails_changes_nothing(tmp_path: Path) -> None:
    v1 = await build_v1_store(tmp_path / "d", [FIRST_URL])
    db = Paths(v1.data).db
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE receipt_keys SET jwk = '{\"kty\": \"OKP\", \"crv\": \"Ed25519\"}'")
        before = conn.execute("SELECT * FROM receipts ORDER BY idx").fetchall()
    with pytest.raises(Exception, match="receipt key is malformed"):
        await SqliteNotaryStore.open(db, entry_url_bases=[FIRST_URL])
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (0,)
        assert conn.execute("SELECT * FROM receipts ORDER BY idx").fetchall() == before


async def test_a_version_1_key_cache_keeps_working_after_migration(tmp_path: Path) -> None:
    """A store of the last version-1 release (with ``key_version`` and its triggers on the old
    tables) migrates, and a change to the keys still reaches a store that cached them."""
    v1 = await build_v1_store(tmp_path / "d", [FIRST_URL], key_version=True)
    db = Paths(v1.data).db
    store = await SqliteNotaryStore.open(db, entry_url_bases=[FIRST_URL])
    try:
        assert store.migration is not None and store.migration.from_version == 1
        cached = await store.api_key(v1.api_key.key_id)
        assert cached is not None and cached.revoked is None
        with sqlite3.connect(db) as other:  # another process revokes it
            other.execute("UPDATE api_keys SET revoked = 1 WHERE key_id = ?",
                          (v1.api_key.key_id,))
        # That writer signals nothing (not a store of ours): the key_version its trigger
        # bumped is read at the next periodic re-check (the screen reads it under the lock).
        store._notary.keys.checked = float("-inf")
        now = await store.api_key(v1.api_key.key_id)
        assert now is not None and now.revoked == 1
    finally:
        await store.close()
    with sqlite3.connect(db) as conn:
        triggers = {r[0]: r[1] for r in conn.execute(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'")}
        assert set(triggers.values()) == {"api_keys", "accounts"} and len(triggers) == 6


def _record(tool: str) -> CallRecord:
    return CallRecord(server="srv", tool=tool, arguments={"q": 1},
                      result={"content": [{"type": "text", "text": "ok"}]}, salt=new_salt())


def _verify(server: NotaryProcess, receipt: dict[str, Any], record: CallRecord) -> None:
    """The receipt's signature, and the server's own verify endpoint, both say valid."""
    Jwks(server.get("/.well-known/jwks.json").json()).verify(receipt)
    body = {"id": receipt["id"], "record": {k: v for k, v in record.to_json().items()
                                             if k != "spec"}}
    verdict = server.post("/v1/tool-calls/verify", json_body=body).json()
    assert verdict["valid"] is True, verdict
    assert without_proof(verdict["receipt"]) == without_proof(receipt)


def test_receipts_verify_after_a_new_public_url_and_port(notary_factory: NotaryFactory) -> None:
    server = notary_factory(name="moving")
    key = server.create_api_key("a")
    record = _record("before")
    issued = server.post("/v1/tool-calls", api_key=key, json_body={
        "server": "srv", "tool": "before", "call_sha256": record.call_sha256()})
    assert issued.status == 201
    receipt = issued.json()
    old_url = receipt["ledger"]["entry_url"]

    server.stop()
    server.port = free_port()
    server.args = ("--public-url", "https://notary.example/")
    server.start()
    fetched = server.get(f"/v1/tool-calls/{receipt['id']}")
    assert fetched.status == 200
    assert without_proof(fetched.json()) == without_proof(receipt)  # byte for byte as signed
    assert fetched.json()["ledger"]["entry_url"] == old_url
    _verify(server, fetched.json(), record)
    by_digest = server.get(f"/v1/tool-calls?call_sha256={record.call_sha256()}").json()
    assert without_proof(by_digest) == without_proof(receipt)

    # New receipts carry the new URL, and both keep verifying side by side.
    record2 = _record("after")
    new = server.post("/v1/tool-calls", api_key=key, json_body={
        "server": "srv", "tool": "after", "call_sha256": record2.call_sha256()}).json()
    assert new["ledger"]["entry_url"].startswith("https://notary.example/v1/ledger/entries/")
    _verify(server, new, record2)
    _verify(server, server.get(f"/v1/tool-calls/{receipt['id']}").json(), record)


def test_serving_a_version_1_store(tmp_path: Path, notary_factory: NotaryFactory) -> None:
    v1 = asyncio.run(build_v1_store(tmp_path / "v1", [FIRST_URL, MOVED_URL, ELSEWHERE]))
    server = NotaryProcess(v1.data, args=("--public-url", MOVED_URL))
    with server:
        assert "receipts_withheld" in server.log_text(20_000)
        for receipt_id, receipt in v1.signed.items():
            got = server.get(f"/v1/tool-calls/{receipt_id}")
            if v1.under[receipt_id] == ELSEWHERE or receipt_id in v1.broken:
                assert got.status == 404 and "withheld" in got.json()["error"]["message"]
                again = server.post("/v1/tool-calls", api_key=v1.api_key.token, json_body={
                    "server": receipt["server"], "tool": receipt["tool"],
                    "call_sha256": receipt["call_sha256"]})
                assert again.status == 409  # never logged a second time
                continue
            assert got.status == 200 and without_proof(got.json()) == receipt
            Jwks(server.get("/.well-known/jwks.json").json()).verify(got.json())
        size = server.get("/healthz").json()["size"]
        assert size == len(v1.signed)

    # The operator names the missing URL; what can be recovered is, and served as signed.
    code, out = run_cli("migrate", "--data", str(v1.data), "--base-url", ELSEWHERE)
    assert code == 1 and "withheld" in out  # the damaged two can never be recovered
    for receipt_id in v1.broken:
        assert receipt_id in out
    with server:
        for receipt_id in set(v1.ids_under(ELSEWHERE)) - v1.broken:
            got = server.get(f"/v1/tool-calls/{receipt_id}")
            assert got.status == 200 and without_proof(got.json()) == v1.signed[receipt_id]


def test_migrate_command_on_a_current_store(notary_factory: NotaryFactory) -> None:
    server = notary_factory(name="current")
    server.stop()
    code, out = run_cli("migrate", "--data", str(server.data_dir))
    assert code == 0 and "Every receipt is served exactly as it was signed" in out
    code, _ = run_cli("migrate", "--data", str(server.data_dir), "--base-url", "ftp://x")
    assert code == 2

