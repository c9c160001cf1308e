"""The SQLite log's right edge: a commit appends what it adds to a partial tile or bundle as a
part (``tile_parts``) instead of rewriting it, and every read puts the parts back together."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger.storage.sqlite as sqlite_module
from ledger.core import tileparts
from ledger.core.compact import TreeState, encode_bundle_entry, integrate
from ledger.core.note import Ed25519Signer
from ledger.core.tiles import ENTRIES_LEVEL, tiles_for_size
from ledger.log.facade import Log
from ledger.storage.base import TileKey
from ledger.storage.sqlite import SqliteStore
from ledger.storage.sqlite_layout import read_tiles_sync, tile_id

SIGNER = Ed25519Signer.generate("parts.test/log")


def _entry(i: int) -> bytes:
    return b"entry %d " % i + bytes(i % 50)  # lengths vary, as a bundle's prefixes must


def _expected(size: int) -> dict[TileKey, bytes]:
    """Every tile and bundle of a log of ``size`` entries, computed in memory."""
    return integrate(TreeState(), [_entry(i) for i in range(size)]).tiles


def _every_key(size: int) -> list[TileKey]:
    return [(t.level, t.index) for t in tiles_for_size(size, entries=True)]


async def _stored(store: SqliteStore, size: int) -> list[dict[TileKey, bytes]]:
    """The log's tiles as each read path returns them: aiosqlite, the point connection, and
    any other connection to the file."""
    keys = _every_key(size)
    with sqlite3.connect(store.path) as other:
        return [await store.read_tiles(keys), store.read_tiles_now(keys),
                read_tiles_sync(other, keys)]


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.integers(1, 90), min_size=1, max_size=12))
async def test_what_is_read_is_what_was_appended_whatever_the_batches(
        tmp_path_factory: object, batches: list[int]) -> None:
    path = tmp_path_factory.mktemp("parts") / "log.db"  # type: ignore[attr-defined]
    store = await SqliteStore.open(path, create=True)
    log = await Log.open(store, signer=SIGNER)
    size = 0
    for n in batches:
        await log.append_many([_entry(i) for i in range(size, size + n)])
        size += n
        for got in await _stored(store, size):
            assert got == _expected(size)
    await log.close()


async def test_the_edge_grows_by_parts_and_a_full_tile_is_stored_whole(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "log.db", create=True)
    log = await Log.open(store, signer=SIGNER)
    for i in range(10):
        await log.append(_entry(i))
    with sqlite3.connect(store.path) as db:
        parts = dict(db.execute("SELECT id, data FROM tile_parts").fetchall())
        bundle = db.execute("SELECT data FROM tiles WHERE id = 0").fetchone()[0]
    # The first commit stored the bundle and the level-0 tile whole; each later one only
    # added its entry (with its length) and its leaf hash.
    assert bundle == encode_bundle_entry(_entry(0))
    bundle_parts = [data for part, data in sorted(parts.items()) if part >> 8 == 0]
    assert bundle_parts == [encode_bundle_entry(_entry(i)) for i in range(1, 10)]
    assert len(parts) == 2 * 9 and all(len(d) == 32 for p, d in parts.items() if p >> 8 != 0)

    await log.append_many([_entry(i) for i in range(10, 256)])
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT count(*) FROM tile_parts").fetchone()[0] == 0
        full = db.execute("SELECT data FROM tiles WHERE id = 0").fetchone()[0]
    assert full == _expected(256)[(ENTRIES_LEVEL, 0)]
    await log.close()


async def test_a_store_with_its_edge_written_whole_gains_parts_after_it(tmp_path: Path) -> None:
    # Stores written before tile_parts hold their partial edge tiles whole in ``tiles``.
    path = tmp_path / "log.db"
    store = await SqliteStore.open(path, create=True)
    log = await Log.open(store, signer=SIGNER)
    for i in range(300):
        await log.append(_entry(i)) if i % 7 else await log.append_many([_entry(i)])
    await log.close()
    with sqlite3.connect(path) as db:
        edge = read_tiles_sync(db, _every_key(300))
        db.execute("DELETE FROM tile_parts")
        db.executemany("INSERT OR REPLACE INTO tiles (id, data) VALUES (?, ?)",
                       [(tile_id(key), data) for key, data in edge.items()])
    assert edge == _expected(300)

    store = await SqliteStore.open(path)
    log = await Log.open(store, signer=SIGNER)
    for i in range(300, 520):
        await log.append(_entry(i))
    for got in await _stored(store, 520):
        assert got == _expected(520)
    await log.close()


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.integers(1, 300), min_size=1, max_size=8), data=st.data())
async def test_entries_are_read_from_any_position_whatever_the_parts(
        tmp_path_factory: object, batches: list[int], data: st.DataObject) -> None:
    """``read_entries`` from a part boundary, inside a part, on a bundle boundary or past the
    end: exactly the stored entries of that range (fewer past the end)."""
    path = tmp_path_factory.mktemp("entries") / "log.db"  # type: ignore[attr-defined]
    store = await SqliteStore.open(path, create=True)
    log = await Log.open(store, signer=SIGNER)
    size, sizes = 0, [0]
    for n in batches:
        await log.append_many([_entry(i) for i in range(size, size + n)])
        size += n
        sizes.append(size)
    starts = [*sizes[:-1], *data.draw(st.lists(st.integers(0, size - 1), max_size=6))]
    async with store.transaction() as tx:
        for start in starts:
            end = data.draw(st.integers(start + 1, size + 3))
            assert await tx.read_entries(start, end) == [
                _entry(i) for i in range(start, min(end, size))]
    await log.close()


async def test_catching_up_reads_only_the_other_writers_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After another writer's few entries, a writer reads the parts it added (no bundle whole)
    and appends its own part where they end, without walking the bundle to find it."""
    path = tmp_path / "log.db"
    a = await Log.open(await SqliteStore.open(path, create=True), signer=SIGNER)
    b = await Log.open(await SqliteStore.open(path), signer=SIGNER)
    await a.append_many([_entry(i) for i in range(10)])
    await b.append(_entry(10))  # b catches up from a's whole first bundle, then adds a part
    await b.append_many([_entry(11), _entry(12)])
    whole_reads: list[list[TileKey]] = []
    walks: list[int] = []
    read_whole = sqlite_module.read_tiles_sync
    walk = tileparts.bundle_prefix

    def counted_read(conn: sqlite3.Connection, keys: list[TileKey]) -> dict[TileKey, bytes]:
        whole_reads.append(list(keys))
        return read_whole(conn, keys)

    def counted_walk(bundle: bytes, count: int) -> int:
        walks.append(count)
        return walk(bundle, count)

    monkeypatch.setattr(sqlite_module, "read_tiles_sync", counted_read)
    monkeypatch.setattr(tileparts, "bundle_prefix", counted_walk)
    assert (await a.append(_entry(13))).index == 13  # a: b's two parts, then its own part
    assert whole_reads == [] and walks == []
    with sqlite3.connect(path) as conn:
        starts = [row[0] & 0xFF for row in conn.execute(
            "SELECT id FROM tile_parts WHERE id >> 8 = ? ORDER BY id",
            (tile_id((ENTRIES_LEVEL, 0)),))]
    assert starts == [10, 11, 13]
    monkeypatch.undo()
    for got in await _stored(a.store, 14):  # type: ignore[arg-type]
        assert got == _expected(14)
    await a.close()
    await b.close()
