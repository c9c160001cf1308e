"""The page size of the SQLite log file: new files take ``PAGE_SIZE`` because the large tile
blobs waste less of smaller pages; files made before keep theirs and work as they did."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger.core.note import Ed25519Signer
from ledger.log.facade import Log
from ledger.storage.sqlite import PAGE_SIZE, SqliteStore

# 16 full entry bundles of 153-byte entries: 39,680 bytes each, as a notary's receipts make.
ENTRIES = [i.to_bytes(4, "big") + bytes(149) for i in range(16 * 256)]


@pytest.fixture
def signer() -> Ed25519Signer:
    return Ed25519Signer.generate("pages.test/log")


async def _append(path: Path, signer: Ed25519Signer, entries: list[bytes]) -> None:
    log = await Log.open(await SqliteStore.open(path, create=True), signer=signer)
    try:
        await log.append_many(entries)
    finally:
        await log.close()


def _page_size(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA page_size").fetchone()[0])


async def test_a_new_log_file_keeps_its_tiles_with_little_slack(
        tmp_path: Path, signer: Ed25519Signer) -> None:
    path = tmp_path / "log.db"
    await _append(path, signer, ENTRIES)
    assert _page_size(path) == PAGE_SIZE == 2048
    with sqlite3.connect(path) as db:
        (pages,) = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'tiles'").fetchone()
    # Per entry: the entry and its 2-byte length in its bundle, its 32-byte leaf hash, a few
    # bits of the tiles above; and what the pages waste: 3 bytes here, 8 with 4 KiB pages.
    stored = 153 + 2 + 32
    assert stored < pages / len(ENTRIES) < stored + 4


async def test_a_log_file_made_with_other_pages_keeps_them(
        tmp_path: Path, signer: Ed25519Signer) -> None:
    path = tmp_path / "log.db"
    with sqlite3.connect(path) as db:  # as every file made before PAGE_SIZE was set
        db.execute("PRAGMA page_size = 4096")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE made_before (one INTEGER)")
    await _append(path, signer, ENTRIES[:300])
    await _append(path, signer, ENTRIES[300:700])  # a second opening goes on from there
    assert _page_size(path) == 4096
    log = await Log.open(await SqliteStore.open(path), signer=signer)
    try:
        head = await log.head(0)
        assert head is not None and head.size == 700
        assert await log.reader.entries(0, 700) == ENTRIES[:700]
    finally:
        await log.close()
