"""The SQLite store answers API keys from memory, kept current across processes
(benchmarks/docs/history.md, notarize_cpu).

A lookup reads no database unless the shared signal (``<database>-keys``) moved or the cache is
older than ``KEYS_RECHECK_SECONDS``; a key created or revoked by another store on the same file
(another process, as far as the store can tell) takes effect at once; a revocation that was
committed without a signal (a writer that died before signalling, or the ``sqlite3`` shell)
still stops issuing at once, because the batch screen re-checks under the log's lock.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path

import pytest

from notary.operator import admin
from notary.serving.refusals import Unauthorized
from notary.store.sqlite import SqliteNotaryStore
from notary.store.sqlite_state import KEYS_RECHECK_SECONDS
from tests.notary_server import digest, headless_notary, issue


async def _statements(store: SqliteNotaryStore, key_id: str) -> list[str]:
    ran: list[str] = []
    store._point.set_trace_callback(ran.append)
    try:
        await store.api_key(key_id)
    finally:
        store._point.set_trace_callback(None)
    return ran


async def test_a_lookup_reads_nothing_while_no_key_changed(tmp_path: Path) -> None:
    store = await SqliteNotaryStore.open(tmp_path / "n.db", create=True)
    try:
        key = await admin.create_api_key(store, "alice")
        assert (await store.api_key(key.key_id)) is not None
        assert await _statements(store, key.key_id) == []
        assert await _statements(store, "000000000000") == []  # unknown: the same work
        assert stat.S_IMODE(os.stat(tmp_path / "n.db-keys").st_mode) == 0o600
    finally:
        await store.close()


async def test_keys_created_and_revoked_by_another_store_take_effect_at_once(
        tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    frontend = await SqliteNotaryStore.open(db, create=True)
    other = await SqliteNotaryStore.open(db)  # another process, as far as the file can tell
    try:
        assert await frontend.api_key("000000000000") is None  # the cache is loaded
        key = await admin.create_api_key(other, "bob")
        record = await frontend.api_key(key.key_id)
        assert record is not None and record.revoked is None
        await admin.revoke_api_key(other, key.key_id)
        record = await frontend.api_key(key.key_id)
        assert record is not None and record.revoked is not None
    finally:
        await other.close()
        await frontend.close()


async def test_an_unsignalled_change_is_seen_within_the_recheck_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "n.db"
    store = await SqliteNotaryStore.open(db, create=True)
    try:
        key = await admin.create_api_key(store, "alice")
        assert (await store.api_key(key.key_id)) is not None
        shell = sqlite3.connect(db, isolation_level=None)  # writes without signalling
        shell.execute("UPDATE api_keys SET revoked = 1 WHERE key_id = ?", (key.key_id,))
        shell.close()
        cached = await store.api_key(key.key_id)
        assert cached is not None and cached.revoked is None  # not signalled: still cached
        monkeypatch.setattr(store._notary.keys, "checked",
                            time.monotonic() - KEYS_RECHECK_SECONDS)
        fresh = await store.api_key(key.key_id)
        assert fresh is not None and fresh.revoked is not None
    finally:
        await store.close()


async def test_a_key_revoked_without_a_signal_issues_nothing_more(tmp_path: Path) -> None:
    async with headless_notary(tmp_path / "data", "sqlite") as notary:
        store = notary.store
        assert isinstance(store, SqliteNotaryStore)
        key = await admin.create_api_key(store, "carol")
        account = await notary.authenticate(f"Bearer {key.token}")
        _, new = await issue(notary, 1, account)
        assert new
        shell = sqlite3.connect(store.path, isolation_level=None)
        shell.execute("UPDATE api_keys SET revoked = 1 WHERE key_id = ?", (key.key_id,))
        shell.close()
        # The request authenticated from the cache (no signal yet), but the screen, under the
        # log's lock, sees the committed revocation.
        account = await notary.authenticate(f"Bearer {key.token}")
        with pytest.raises(Unauthorized, match="revoked"):
            await issue(notary, 2, account)
        assert await store.receipt_by_digest(digest(2)) is None


async def test_only_key_and_account_writes_signal(tmp_path: Path) -> None:
    from ledger.storage.base import WitnessState

    store = await SqliteNotaryStore.open(tmp_path / "n.db", create=True)
    try:
        signal = store._notary.keys.signal
        assert signal is not None
        before = signal.read()
        await store.save_witness_state(WitnessState({}, None))  # frequent, and no key change
        await store.add_receipt_key("kid", "{}", 0.0)
        assert signal.read() == before
        key = await admin.create_api_key(store, "alice")
        created = signal.read()
        assert created != before
        await admin.revoke_api_key(store, key.key_id)
        assert signal.read() != created
    finally:
        await store.close()
