"""What only the PostgreSQL backend has: a schema created once under concurrent starts, schema
versions, many writers on one database, history decided under the lock, the right edge grown by
parts, and the errors a lost server gives (a StoreUnavailableError after bounded retries, never
a hang or a wrong answer)."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import asyncpg
import pytest

from ledger.core import tileparts
from ledger.core.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.core.compact import TreeState, encode_bundle_entry, integrate
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.note import Ed25519Signer
from ledger.core.tiles import ENTRIES_LEVEL, tiles_for_size
from ledger.log.facade import Log
from ledger.storage.base import StoreError, StoreUnavailableError, WitnessState
from ledger.storage.postgres import (
    LEDGER_MIGRATIONS,
    PostgresStore,
    PostgresWriteTx,
    is_postgres_url,
    migrate,
)
from tests.pgcluster import start_cluster


@pytest.fixture
def signer() -> Ed25519Signer:
    return Ed25519Signer.generate("pg.test/log")


async def test_concurrent_starts_on_an_empty_database_make_one_log(
        pg_url: str, signer: Ed25519Signer) -> None:
    stores = await asyncio.gather(*(PostgresStore.open(pg_url) for _ in range(6)))
    logs = await asyncio.gather(*(Log.open(s, signer=signer) for s in stores))
    # Every writer starts from the one empty tree, and their appends interleave into one log.
    results = await asyncio.gather(*(log.append(b"%d-%d" % (n, i))
                                     for n, log in enumerate(logs) for i in range(50)))
    assert sorted(r.index for r in results) == list(range(300))
    conn = await asyncpg.connect(pg_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM ledger_state") == 1
        assert await conn.fetchval(
            "SELECT version FROM schema_versions WHERE component = 'ledger'"
        ) == len(LEDGER_MIGRATIONS)
    finally:
        await conn.close()
    head = await logs[0].head(0)
    assert head is not None and head.size == 300
    entries = await logs[0].reader.entries(0, 300)
    assert sorted(entries) == sorted(b"%d-%d" % (n, i) for n in range(6) for i in range(50))
    assert head.checkpoint.root_hash == merkle_root([leaf_hash(e) for e in entries])
    # Every checkpoint any writer was handed is a prefix of the final tree.
    for r in results:
        cp, _ = open_checkpoint(r.checkpoint, signer.verifier())
        assert cp.root_hash == merkle_root([leaf_hash(e) for e in entries[: cp.size]])
    await asyncio.gather(*(log.close() for log in logs))


async def test_a_newer_schema_is_refused(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    await store.close()
    conn = await asyncpg.connect(pg_url)
    await conn.execute("UPDATE schema_versions SET version = version + 1 "
                       "WHERE component = 'ledger'")
    await conn.close()
    with pytest.raises(StoreError, match="newer than this program"):
        await PostgresStore.open(pg_url)


async def test_history_keeps_one_checkpoint_a_minute_across_writers(
        pg_url: str, signer: Ed25519Signer) -> None:
    clock = [time.time() + 3600]  # ahead of the empty tree signed at start
    a, b = (await PostgresStore.open(pg_url), await PostgresStore.open(pg_url))
    log_a = await Log.open(a, signer=signer)
    log_b = await Log.open(b, signer=signer)
    for seq in (log_a.sequencer, log_b.sequencer):
        assert seq is not None
        seq.clock = lambda: clock[0]
    for i in range(6):  # alternate writers, 30 s apart: a history row every other commit
        clock[0] += 30
        await (log_a if i % 2 else log_b).append(b"%d" % i)
    sizes = [r.size for r in await a.history(100)]
    assert sizes == sorted(sizes, reverse=True)
    times = sorted(r.time for r in await a.history(100))
    assert all(t2 - t1 >= 60 for t1, t2 in itertools.pairwise(times)), times
    assert len(times) >= 3
    assert await a.witness_state() is None
    await a.save_witness_state(WitnessState({"w1": 3, "w2": 5}, b"note"))
    await b.save_witness_state(WitnessState({"w1": 7}, None))  # replaces it, for every process
    assert await a.witness_state() == WitnessState({"w1": 7}, None)
    await log_a.close()
    await log_b.close()


def test_is_postgres_url() -> None:
    assert is_postgres_url("postgresql://h1:5432,h2:5433/db?target_session_attrs=read-write")
    assert is_postgres_url("postgres://localhost/db")
    assert not is_postgres_url("notary-data/notary.db")


async def test_a_dead_server_gives_unavailable_after_bounded_retries(
        signer: Ed25519Signer) -> None:
    with start_cluster("gone") as cluster:
        store = await PostgresStore.open(cluster.url, retry_for=1.0)
        log = await Log.open(store, signer=signer)
        await log.append(b"before")
        cluster.kill()
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            await log.append(b"after")
        with pytest.raises(StoreUnavailableError):
            await store.latest()
        assert time.monotonic() - started < 30  # bounded, not a hang (generous: a busy CI)
        cluster.start()  # the same server comes back: writes resume without a restart
        appended = await log.append(b"again")
        assert appended.index == 1
        await log.close()
    with pytest.raises(StoreUnavailableError, match="cannot connect"):
        await PostgresStore.open(cluster.url, retry_for=0.2)  # stopped and removed by now


def _entry(i: int) -> bytes:
    return b"entry %d " % i + bytes(i % 50)


async def test_the_edge_grows_by_parts_and_reads_put_them_together(
        pg_url: str, signer: Ed25519Signer) -> None:
    store = await PostgresStore.open(pg_url)
    log = await Log.open(store, signer=signer)
    for i in range(10):
        await log.append(_entry(i))
    conn = await asyncpg.connect(pg_url)
    parts = await conn.fetch("SELECT level, idx, start, data FROM ledger_tile_parts "
                             "WHERE level = -1 ORDER BY start")
    assert [(r["start"], bytes(r["data"])) for r in parts] == [
        (i, encode_bundle_entry(_entry(i))) for i in range(1, 10)]
    assert await store.read_tiles([(ENTRIES_LEVEL, 0)]) == {
        (ENTRIES_LEVEL, 0): b"".join(encode_bundle_entry(_entry(i)) for i in range(10))}

    # Grown in batches of every size, across a full bundle and tile: what is read is what
    # integrate computes, and a full tile keeps no parts.
    size = 10
    for n in (1, 1, 37, 200, 1, 63, 90):
        await log.append_many([_entry(i) for i in range(size, size + n)])
        size += n
        keys = [(t.level, t.index) for t in tiles_for_size(size, entries=True)]
        assert await store.read_tiles(keys) == integrate(
            TreeState(), [_entry(i) for i in range(size)]).tiles
    full = await conn.fetchval("SELECT count(*) FROM ledger_tile_parts WHERE idx = 0 AND "
                               "level IN (-1, 0)")
    assert size > 256 and full == 0
    await conn.close()
    await log.close()


async def test_catching_up_reads_only_the_other_writers_parts(
        pg_url: str, signer: Ed25519Signer, monkeypatch: pytest.MonkeyPatch) -> None:
    """As on SQLite: after another frontend's few entries, a writer reads the parts it added,
    not the whole bundle, and appends its own part without walking the bundle."""
    a = await Log.open(await PostgresStore.open(pg_url), signer=signer)
    b = await Log.open(await PostgresStore.open(pg_url), signer=signer)
    await a.append_many([_entry(i) for i in range(10)])
    await b.append(_entry(10))
    await b.append_many([_entry(11), _entry(12)])
    whole: list[object] = []
    walks: list[int] = []
    read_whole, walk = PostgresWriteTx.read_tiles, tileparts.bundle_prefix

    async def counted_read(self: PostgresWriteTx, keys: Any) -> dict[Any, bytes]:
        whole.append(list(keys))
        return await read_whole(self, keys)

    def counted_walk(bundle: bytes, count: int) -> int:
        walks.append(count)
        return walk(bundle, count)

    monkeypatch.setattr(PostgresWriteTx, "read_tiles", counted_read)
    monkeypatch.setattr(tileparts, "bundle_prefix", counted_walk)
    assert (await a.append(_entry(13))).index == 13
    assert whole == [] and walks == []
    monkeypatch.undo()
    assert await a.store.read_tiles([(ENTRIES_LEVEL, 0)]) == {
        (ENTRIES_LEVEL, 0): b"".join(encode_bundle_entry(_entry(i)) for i in range(14))}
    await a.close()
    await b.close()


async def test_a_version_1_log_is_migrated_and_its_whole_edge_gains_parts_after_it(
        pg_url: str, signer: Ed25519Signer) -> None:
    # Version 1 rewrote the edge whole in ledger_tiles: make such a log of 5 entries.
    first = integrate(TreeState(), [_entry(i) for i in range(5)])
    note = sign_checkpoint(Checkpoint(signer.name, 5, first.state.root()), signer)
    conn = await asyncpg.connect(pg_url)
    async with conn.transaction():
        await migrate(conn, "ledger", LEDGER_MIGRATIONS[:1])
        await conn.executemany("INSERT INTO ledger_tiles (level, idx, data) VALUES ($1, $2, $3)",
                               [(k[0], k[1], d) for k, d in first.tiles.items()])
        await conn.execute("UPDATE ledger_state SET size = 5, time = $1, note = $2",
                           time.time(), note)
    store = await PostgresStore.open(pg_url)
    assert await conn.fetchval(
        "SELECT version FROM schema_versions WHERE component = 'ledger'") == len(
            LEDGER_MIGRATIONS)
    log = await Log.open(store, signer=signer)
    for i in range(5, 20):
        await log.append(_entry(i))
    assert await conn.fetchval("SELECT count(*) FROM ledger_tile_parts") == 2 * 15
    assert await store.read_tiles([(ENTRIES_LEVEL, 0), (0, 0)]) == integrate(
        TreeState(), [_entry(i) for i in range(20)]).tiles
    await conn.close()
    await log.close()


async def test_tile_data_is_compressed_with_lz4_in_an_upgraded_database_and_later_logs(
        pg_url: str) -> None:
    """Version 5, and the tables of each later log: LZ4 costs the server about half the CPU
    of PostgreSQL's default pglz for a commit's bundle part, for the same size."""
    conn = await asyncpg.connect(pg_url)
    try:
        async with conn.transaction():
            await migrate(conn, "ledger", LEDGER_MIGRATIONS[:4])  # a version 4 database
        store = await PostgresStore.open(pg_url)
        async with store.transaction() as tx:
            await tx.switch_log(1, create=True)
        await store.close()
        for table in ("ledger_tiles", "ledger_tile_parts", "ledger_tiles_1",
                      "ledger_tile_parts_1"):
            assert await conn.fetchval(
                "SELECT attcompression FROM pg_attribute WHERE attrelid = $1::regclass "
                "AND attname = 'data'", table) == b"l", table
    finally:
        await conn.close()
