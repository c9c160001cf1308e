"""The sequencer's contract: durable group commit, refusals, and the start-up integrity check,
on every store backend (``stores``: memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ledger.core import compact as compact_module
from ledger.core.checkpoint import open_checkpoint, sign_checkpoint
from ledger.core.compact import EntryTooLargeError
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.note import Ed25519Signer
from ledger.core.proofs import ProofError, verify_inclusion
from ledger.core.tiles import MAX_ENTRY_SIZE
from ledger.log import catch_up
from ledger.log import sequencer as sequencer_module
from ledger.log.appended import Appended, AppendedRun
from ledger.log.catch_up import CATCH_UP_ENTRIES
from ledger.log.errors import LogIntegrityError, LogRollbackError
from ledger.log.facade import Log
from ledger.log.reader import LogReader
from ledger.log.sequencer import Sequencer, WriterState
from ledger.storage.base import CheckpointRecord, WriteTx
from ledger.storage.memory import MemoryStore, MemoryWriteTx
from ledger.storage.sqlite import SqliteStore
from tests.stores import StoreFactory


@pytest.fixture
def signer() -> Ed25519Signer:
    return Ed25519Signer.generate("seq.test/log")


async def open_log(stores: StoreFactory, signer: Ed25519Signer) -> Log:
    return await Log.open(await stores.open(), signer=signer)


async def test_append_resolves_to_durable_index_and_checkpoint(stores: StoreFactory,
                                                               signer: Ed25519Signer) -> None:
    log = await open_log(stores, signer)
    entries = [b"e%d" % i for i in range(1000)]
    results = await asyncio.gather(*(log.append(e) for e in entries))
    assert sorted(r.index for r in results) == list(range(1000))
    assert len({r.size for r in results}) < 1000, "concurrent appends were not grouped"
    for r in results:
        cp, _ = open_checkpoint(r.checkpoint, signer.verifier())
        assert cp.size == r.size > r.index
        assert cp.root_hash == merkle_root([leaf_hash(e) for e in entries[: cp.size]])
    await log.close()
    # A fresh process sees everything that was acknowledged.
    log = await open_log(stores, signer)
    head = await log.head(0)
    assert head is not None and head.size == 1000
    assert await log.reader.entries(0, 1000) == entries
    await log.close()


async def test_entry_limit(stores: StoreFactory, signer: Ed25519Signer) -> None:
    log = await open_log(stores, signer)
    await log.append(b"x" * MAX_ENTRY_SIZE)
    with pytest.raises(EntryTooLargeError, match="65535"):
        await log.append(b"x" * (MAX_ENTRY_SIZE + 1))
    head = await log.head(0)
    assert head is not None and head.size == 1
    await log.close()


async def test_refuses_to_start_when_tiles_do_not_match_checkpoint(
    stores: StoreFactory, signer: Ed25519Signer
) -> None:
    log = await open_log(stores, signer)
    await asyncio.gather(*(log.append(b"%d" % i) for i in range(300)))
    await log.close()
    await stores.flip_tile_byte((0, 1))  # level-0 tile 1, the partial edge the root depends on
    with pytest.raises(LogIntegrityError, match="root recomputed"):
        await open_log(stores, signer)


async def test_refuses_a_checkpoint_signed_by_another_key(stores: StoreFactory,
                                                          signer: Ed25519Signer) -> None:
    log = await open_log(stores, signer)
    await log.append(b"a")
    await log.close()
    other = Ed25519Signer.generate("seq.test/log")
    with pytest.raises(LogIntegrityError, match="does not verify"):
        await open_log(stores, other)


async def test_two_writers_share_one_log(stores: StoreFactory, signer: Ed25519Signer) -> None:
    a = await open_log(stores, signer)
    b = await open_log(stores, signer)
    got = []
    for i in range(20):
        got.append(await (a if i % 2 else b).append(b"w%d" % i))
    assert [r.index for r in got] == list(range(20))
    head = await a.head(0)
    assert head is not None and head.size == 20
    await a.close()
    await b.close()


async def test_hashes_made_beforehand_are_used_where_the_batch_lands(
        stores: StoreFactory, signer: Ed25519Signer, monkeypatch: pytest.MonkeyPatch) -> None:
    """``append_many(hashes=...)`` (``ledger add`` hashes the next batch while the last one
    commits): the writer hashes nothing more when the batch lands where they were made for;
    when another writer appended first, they are for the wrong place and it hashes the batch
    again. Either way the tree is the one of every entry in order."""
    a = await open_log(stores, signer)
    b = await open_log(stores, signer)
    made: list[tuple[int, int]] = []  # (start, entries) of each batch the writers hash
    plain = compact_module.batch_hashes

    def counted(start: int, entries: Any) -> compact_module.BatchHashes:
        made.append((start, len(entries)))
        return plain(start, entries)

    monkeypatch.setattr(compact_module, "batch_hashes", counted)
    first = [b"a%d" % i for i in range(700)]
    run = await a.append_many(first, plain(0, first))
    assert (run.first, made) == (0, [])  # landed at 0: nothing hashed again
    late = [b"c%d" % i for i in range(300)]
    stale = plain(700, late)
    await b.append_many([b"b0", b"b1"])  # another writer appends first
    made.clear()
    run = await a.append_many(late, stale)
    # a catches up with b's two entries, then hashes its batch again, for where it lands
    assert (run.first, made) == (702, [(700, 2), (702, 300)])
    everything = [*first, b"b0", b"b1", *late]
    head = await a.head(0)
    assert head is not None
    cp, _ = open_checkpoint(head.note, signer.verifier())
    assert cp.root_hash == merkle_root([leaf_hash(e) for e in everything])
    assert await a.reader.entries(0, 1002) == everything
    await a.close()
    await b.close()


async def test_catching_up_reads_the_store_once(signer: Ed25519Signer,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """After another writer's commit, the tiles for the new state and for the check that it
    extends what this writer saw come in one read (one round trip under the log's lock on
    PostgreSQL), and the check still runs on them."""
    store = MemoryStore()
    a = await Log.open(store, signer=signer)
    b = await Log.open(store, signer=signer)
    await a.append_many([b"a%d" % i for i in range(300)])
    await b.append(b"b")  # b catches up from 0 to 300
    reads: list[list[Any]] = []
    plain = MemoryWriteTx.read_tiles

    async def read_tiles(self: MemoryWriteTx, keys: Any) -> dict[Any, bytes]:
        reads.append(list(keys))
        return await plain(self, keys)

    monkeypatch.setattr(MemoryWriteTx, "read_tiles", read_tiles)
    more = CATCH_UP_ENTRIES + 200  # beyond what is caught up by integrating entries
    await a.append_many([b"c%d" % i for i in range(more)])  # a: from 300 to 301 and on
    assert len(reads) == 1
    reads.clear()
    await b.append(b"d")  # b: saw 301, store further on: the state and the root at 301
    assert len(reads) == 1 and len(reads[0]) > 1
    await a.close()
    await b.close()


async def test_a_few_entries_of_another_writer_are_caught_up_by_integrating_them(
        stores: StoreFactory, signer: Ed25519Signer, monkeypatch: pytest.MonkeyPatch) -> None:
    """With several processes on one log, nearly every commit follows another's: up to
    CATCH_UP_ENTRIES new entries are read from their bundles and integrated, and their root
    checked against the signed checkpoint, instead of rebuilding the state from tiles."""
    a = await open_log(stores, signer)
    b = await open_log(stores, signer)
    rebuilt: list[int] = []
    full = catch_up.verified_state

    async def verified_state(read_tiles: Any, latest: Any, *args: Any) -> Any:
        rebuilt.append(latest.size)
        return await full(read_tiles, latest, *args)

    monkeypatch.setattr(catch_up, "verified_state", verified_state)
    size = 0
    for n in (1, 1, 255, 2, 600, 1, CATCH_UP_ENTRIES - 1, 1):  # + a's single one after b's
        await a.append_many([b"a%d" % i for i in range(size, size + n)])
        size += n
        landed = await b.append(b"b%d" % size)  # b catches up from a's commit
        assert landed.index == size
        size += 1
        await a.append(b"a%d" % size)  # and a from b's
        size += 1
    assert rebuilt == []
    await a.append_many([b"x%d" % i for i in range(CATCH_UP_ENTRIES + 1)])
    await b.append(b"far behind")
    assert rebuilt == [size + CATCH_UP_ENTRIES + 1]
    head = await b.head(0)
    assert head is not None and head.size == size + CATCH_UP_ENTRIES + 2
    reopened = await open_log(stores, signer)  # the tiles the fast path trusted are right
    assert (await reopened.head(0)) == head
    for log in (a, b, reopened):
        await log.close()


async def test_a_transaction_reads_any_range_of_stored_entries(stores: StoreFactory,
                                                             signer: Ed25519Signer) -> None:
    a = await open_log(stores, signer)
    b = await open_log(stores, signer)
    entries: list[bytes] = []
    for n, log in ((3, a), (1, b), (300, a), (2, b)):
        batch = [b"e%d" % i for i in range(len(entries), len(entries) + n)]
        await log.append_many(batch)
        entries += batch
    async with a.store.transaction() as tx:
        for start, end in ((0, 1), (3, 4), (3, 306), (4, 260), (256, 306), (300, 310), (5, 5)):
            assert await tx.read_entries(start, end) == entries[start:end]
    await a.close()
    await b.close()


async def test_catching_up_trusts_only_the_note_this_log_key_signs(
        stores: StoreFactory, signer: Ed25519Signer) -> None:
    """The catch-up compares the stored note with the one it signs for the tree it computed:
    a note for that very tree under another key is not taken on the fast path, and the full
    path refuses it."""
    a = await open_log(stores, signer)
    b = await open_log(stores, signer)
    await a.append_many([b"a%d" % i for i in range(3)])
    latest = await a.store.latest()
    assert latest is not None
    cp, _ = open_checkpoint(latest.note, signer.verifier())
    forger = Ed25519Signer.generate(signer.name)
    async with a.store.transaction() as tx:
        await tx.write({}, CheckpointRecord(3, latest.time, sign_checkpoint(cp, forger)))
    with pytest.raises(LogIntegrityError, match="does not verify"):
        await b.append(b"b")
    await a.close()
    await b.close()


async def test_what_arrives_while_another_writer_holds_the_lock_joins_one_batch(
        stores: StoreFactory, signer: Ed25519Signer) -> None:
    """A batch is taken once the log's lock is held: appends that arrive while another
    process commits wait for it together and land in one commit, not one by one."""
    log = await open_log(stores, signer)
    other = await stores.open()  # another process's handle (memory: the same store)
    async with other.transaction():
        first = asyncio.create_task(log.append(b"first"))
        await asyncio.sleep(0.2)  # the sequencer is waiting for the lock by now
        later = [asyncio.create_task(log.append(b"later %d" % i)) for i in range(3)]
        await asyncio.sleep(0.1)
        assert not any(t.done() for t in (first, *later))
    landed = await asyncio.gather(first, *later)
    assert sorted(r.index for r in landed) == [0, 1, 2, 3]
    assert {r.size for r in landed} == {4}  # one commit for all four
    await log.close()
    if stores.shared:
        await other.close()


async def test_append_many_is_one_group_at_consecutive_indexes(stores: StoreFactory,
                                                               signer: Ed25519Signer) -> None:
    log = await Log.open(await stores.open(), signer=signer, max_batch=100)
    singles = [asyncio.create_task(log.append(b"s%d" % i)) for i in range(5)]
    group = [b"g%d" % i for i in range(250)]  # larger than max_batch: committed on its own
    results = await log.append_many(group)
    await asyncio.gather(*singles)
    indexes = [r.index for r in results]
    assert indexes == list(range(indexes[0], indexes[0] + 250))
    assert len({r.size for r in results}) == 1 and results[0].size > indexes[-1]
    entries = await log.reader.entries(0, (await log.head(0)).size)  # type: ignore[union-attr]
    assert entries[indexes[0]: indexes[0] + 250] == group
    with pytest.raises(EntryTooLargeError):
        await log.append_many([b"ok", b"x" * (MAX_ENTRY_SIZE + 1)])
    head = await log.head(0)
    assert head is not None and head.size == 255  # the refused group added nothing
    assert list(await log.append_many([])) == []
    await log.close()


def test_an_appended_run_reads_as_a_sequence_of_appended() -> None:
    run = AppendedRun(7, 3, 12, b"note")
    assert list(run) == [Appended(7, 12, b"note"), Appended(8, 12, b"note"),
                         Appended(9, 12, b"note")]
    assert len(run) == 3 and run[-1] == Appended(9, 12, b"note")
    assert run[1:] == [Appended(8, 12, b"note"), Appended(9, 12, b"note")]
    for bad in (3, -4):
        with pytest.raises(IndexError):
            run[bad]


async def test_a_screen_refuses_and_finalizes_entries_under_the_lock(
        signer: Ed25519Signer) -> None:
    """The screen sees every queued context inside the transaction: a refused entry is not
    logged and its caller gets the refusal; a replaced one is logged as replaced; the rest
    land in order. A group is refused as a whole."""
    seen: list[list[Any]] = []

    async def screen(tx: WriteTx, contexts: Any) -> list[Exception | bytes | None]:
        assert (await tx.latest()) is not None  # under the lock, after any catch-up
        seen.append(list(contexts))
        return [ValueError(f"no {c}") if c == "refuse" else
                b"replaced" if c == "replace" else None for c in contexts]

    store = MemoryStore()
    reader = LogReader(store)
    seq: Sequencer[str, None] = Sequencer(store, signer, reader=reader, screen=screen)
    await seq.start()
    log = Log(store, signer.verifier(), reader, seq)
    results = await asyncio.gather(
        seq.append(b"a", "keep"), seq.append(b"b", "refuse"), seq.append(b"c", "replace"),
        seq.append_many([b"d", b"e"], ["keep", "refuse"]),
        return_exceptions=True)
    assert isinstance(results[1], ValueError) and isinstance(results[3], ValueError)
    head = await log.head(0)
    assert head is not None and head.size == 2
    assert await log.reader.entries(0, 2) == [b"a", b"replaced"]
    assert sum(len(s) for s in seen) == 5
    # A batch whose every entry is refused signs nothing and leaves the log as it was.
    with pytest.raises(ValueError):
        await seq.append(b"x", "refuse")
    again = await log.head(0)
    assert again is not None and again.note == head.note
    await log.close()


async def test_refuses_to_sign_over_a_store_that_went_back(stores: StoreFactory,
                                                           signer: Ed25519Signer) -> None:
    """A restored (or failed-over, commit-losing) store: writes stop, nothing forks."""
    log = await open_log(stores, signer)
    await log.append_many([b"a%d" % i for i in range(5)])
    old = await log.store.latest()
    assert old is not None and old.size == 5
    await log.append_many([b"b%d" % i for i in range(5)])
    assert (await log.head(0)).size == 10  # type: ignore[union-attr]  # served to someone
    await stores.set_state(old)  # behind the writer's back: the database was restored
    with pytest.raises(LogRollbackError, match="older than size 10"):
        await log.append(b"c")
    assert log.sequencer is not None and log.sequencer.status.state is WriterState.REFUSING
    assert "restored" in log.sequencer.status.reason
    head = await log.head(0)
    assert head is not None and head.size == 10  # what it served never goes back either
    await log.close()
    # A restarted writer that remembers size 10 serves reads but refuses writes as well.
    assert log.sequencer.checkpoint is not None
    again = await Log.open(await stores.open(), signer=signer, trusted=log.sequencer.checkpoint)
    assert again.sequencer is not None
    assert again.sequencer.status.state is WriterState.REFUSING
    assert (await again.head(0)).size == 5  # type: ignore[union-attr]
    with pytest.raises(LogRollbackError):
        await again.append(b"d")
    await again.close()


async def test_refuses_a_tree_that_does_not_extend_what_it_saw(stores: StoreFactory,
                                                               signer: Ed25519Signer) -> None:
    """Same size or larger, but another tree (a different log under the same key): refused;
    a tree that does extend the remembered one is accepted."""
    log = await open_log(stores, signer)
    await log.append_many([b"x%d" % i for i in range(300)])
    assert log.sequencer is not None
    seen = log.sequencer.checkpoint
    await log.close()
    other = Ed25519Signer.from_private_key(signer.private_key_text())
    fork = await Log.open(await StoreFactory("memory", stores.path.parent).open(), signer=other)
    await fork.append_many([b"y%d" % i for i in range(400)])
    assert fork.sequencer is not None and fork.sequencer.checkpoint is not None
    refused = await Log.open(fork.store, signer=signer, trusted=seen)
    with pytest.raises(LogRollbackError, match="does not contain"):
        await refused.append(b"z")
    assert (await refused.head(0)).size == 400  # type: ignore[union-attr]
    again = await Log.open(await stores.open(), signer=signer, trusted=seen)
    await again.append(b"more")
    await again.close()


async def test_append_with_proof_answers_each_entry_s_inclusion_proof(
        stores: StoreFactory, signer: Ed25519Signer) -> None:
    """Proofs asked for with the append are computed for the batch together and are each
    entry's own proof in the checkpoint it is answered with; others get none."""
    log = await open_log(stores, signer)
    assert log.sequencer is not None
    entries = [b"p%d" % i for i in range(700)]
    results = await asyncio.gather(*(log.sequencer.append(e, None, proof=i % 3 != 0)
                                     for i, e in enumerate(entries)))
    assert len({r.size for r in results}) < 700, "concurrent appends were not grouped"
    for i, r in enumerate(results):
        if i % 3 == 0:
            assert r.proof is None
            continue
        assert r.proof is not None
        cp, _ = open_checkpoint(r.checkpoint, signer.verifier())
        assert list(r.proof) == await log.reader.inclusion_proof(r.index, r.size)
        verify_inclusion(r.index, r.size, leaf_hash(entries[i]), r.proof, cp.root_hash)
    await log.close()


async def test_append_with_proof_is_answered_when_proofs_fail(
        stores: StoreFactory, signer: Ed25519Signer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit is durable whatever happens to the proofs: the caller gets no proof (and
    reads its own), never an error for an entry that was logged."""
    log = await open_log(stores, signer)
    assert log.sequencer is not None

    async def broken(indexes: Any, tree_size: int) -> Any:
        raise OSError("tile read failed")

    def broken_batch(*args: Any) -> Any:
        raise ProofError("a compact range of another size")

    log.reader.inclusion_proofs = broken  # type: ignore[method-assign]
    monkeypatch.setattr(sequencer_module, "newest_leaves_proofs", broken_batch)
    # Two in one batch (a batch of one has its proof without the reader).
    got = await asyncio.gather(log.sequencer.append(b"x", None, proof=True),
                               log.sequencer.append(b"y", None, proof=True))
    assert [(r.proof, r.index, r.size) for r in got] == [(None, 0, 2), (None, 1, 2)]
    await log.close()


async def test_an_uncontended_commit_runs_no_busy_timeout_pragma(
        tmp_path: Path, signer: Ed25519Signer) -> None:
    # The writer connection keeps busy_timeout 0 and only _lock (a worker thread) raises it
    # around its wait: two PRAGMAs less on every commit than switching it off and on again.
    store = await SqliteStore.open(tmp_path / "log.db", create=True, busy_timeout=7.5)
    log = await Log.open(store, signer=signer)
    ran: list[str] = []
    store._wconn.set_trace_callback(ran.append)
    await log.append(b"one")
    store._wconn.set_trace_callback(None)
    assert "BEGIN IMMEDIATE" in ran and "COMMIT" in ran
    assert not [sql for sql in ran if "busy_timeout" in sql]
    # Administration still waits up to the configured timeout for another writer.
    other = sqlite3.connect(tmp_path / "log.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    saving = asyncio.create_task(store.probe_space(16))
    await asyncio.sleep(0.3)
    assert not saving.done()
    other.execute("COMMIT")
    other.close()
    await asyncio.wait_for(saving, 10)
    assert store._wconn.execute("PRAGMA busy_timeout").fetchone()[0] == 0
    await log.close()


async def test_a_free_write_lock_is_taken_without_a_thread_trip(
        tmp_path: Path, signer: Ed25519Signer, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await SqliteStore.open(tmp_path / "log.db", create=True)
    log = await Log.open(store, signer=signer)
    waited: list[str] = []
    real_begin = store._begin

    def begin_in_thread() -> Any:
        waited.append("thread")
        return real_begin()

    monkeypatch.setattr(store, "_begin", begin_in_thread)
    await log.append(b"free")
    assert waited == []  # nobody else held the lock: taken at once, on the loop's thread

    # Another connection holds the write lock: the commit waits for it (in a worker thread,
    # within the busy timeout) instead of failing, and proceeds once it is released.
    other = sqlite3.connect(tmp_path / "log.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    appending = asyncio.create_task(log.append(b"after the other writer"))
    await asyncio.sleep(0.3)
    assert not appending.done()
    other.execute("COMMIT")
    other.close()
    appended = await asyncio.wait_for(appending, 10)
    assert waited == ["thread"] and appended.index == 1
    head = await log.head(0)
    assert head is not None and head.size == 2
    await log.close()


async def test_a_batch_of_one_has_its_proof_without_the_reader(
        stores: StoreFactory, signer: Ed25519Signer) -> None:
    # One request in flight makes every batch one entry; its proof is the compact range the
    # entry was appended to (ledger.core.proofs.newest_leaf_proof), no tile read or hash.
    log = await open_log(stores, signer)
    assert log.sequencer is not None
    real = log.reader.inclusion_proofs
    entries = [b"entry %d" % i for i in range(40)]
    for i, entry in enumerate(entries):
        async def refuse(indexes: Any, tree_size: int) -> Any:
            raise AssertionError("the reader was asked for a batch of one")

        log.reader.inclusion_proofs = refuse  # type: ignore[method-assign]
        r = await log.sequencer.append(entry, None, proof=True)
        log.reader.inclusion_proofs = real  # type: ignore[method-assign]
        assert r.proof is not None and r.index == i
        assert list(r.proof) == await log.reader.inclusion_proof(r.index, r.size)
        cp, _ = open_checkpoint(r.checkpoint, signer.verifier())
        verify_inclusion(r.index, r.size, leaf_hash(entry), r.proof, cp.root_hash)
    await log.close()


async def test_a_batch_s_proofs_need_no_tile_lookup(
        stores: StoreFactory, signer: Ed25519Signer) -> None:
    # The proofs of a batch follow from the compact range it was appended to and the leaf
    # hashes it wrote (ledger.core.proofs.newest_leaves_proofs): the reader is not asked.
    log = await open_log(stores, signer)
    assert log.sequencer is not None
    real = log.reader.inclusion_proofs

    async def refuse(indexes: Any, tree_size: int) -> Any:
        raise AssertionError("the reader was asked for a batch's proofs")

    entries = [b"b%d" % i for i in range(600)]
    log.reader.inclusion_proofs = refuse  # type: ignore[method-assign]
    got = []
    for at in range(0, 600, 75):  # batches across tile boundaries (256 leaves a tile)
        got += await asyncio.gather(*(log.sequencer.append(e, None, proof=True)
                                      for e in entries[at:at + 75]))
    log.reader.inclusion_proofs = real  # type: ignore[method-assign]
    assert len({r.size for r in got}) < 600, "concurrent appends were not grouped"
    for i, r in enumerate(got):
        assert r.proof is not None and r.index == i
        assert list(r.proof) == await log.reader.inclusion_proof(r.index, r.size)
        cp, _ = open_checkpoint(r.checkpoint, signer.verifier())
        verify_inclusion(r.index, r.size, leaf_hash(entries[i]), r.proof, cp.root_hash)
    await log.close()


async def test_the_hook_s_results_reach_each_caller_once_durable(
        signer: Ed25519Signer) -> None:
    """What the hook answers for each entry comes back to that entry's caller (in the batch's
    order, refused entries left out); a hook that does not answer once per entry fails its
    batch, which writes nothing."""

    async def hook(tx: WriteTx, items: Any) -> list[str]:
        return [f"{c}@{i}" for i, c in items]

    async def screen(tx: WriteTx, contexts: Any) -> list[Exception | bytes | None]:
        return [ValueError("no") if c == "refuse" else None for c in contexts]

    store = MemoryStore()
    seq: Sequencer[str, str] = Sequencer(store, signer, hook=hook, screen=screen)
    await seq.start()
    got = await asyncio.gather(seq.append(b"a", "x"), seq.append(b"b", "refuse"),
                               seq.append(b"c", "y"), return_exceptions=True)
    assert isinstance(got[1], ValueError)
    assert [(a.index, a.result) for a in (got[0], got[2]) if isinstance(a, Appended)] == [
        (0, "x@0"), (1, "y@1")]

    async def short(tx: WriteTx, items: Any) -> list[str]:
        return []

    seq.hook = short
    with pytest.raises(RuntimeError, match="once per entry"):
        await seq.append(b"d", "z")
    latest = await store.latest()
    assert latest is not None and latest.size == 2
    await seq.close()


async def test_a_failed_commit_of_a_batch_refused_whole_fails_no_later_batch(
        signer: Ed25519Signer) -> None:
    """A batch whose every entry the screen refused, whose transaction then fails: its
    callers get the error, and an append queued meanwhile is not failed with it (it was never
    in that transaction) but commits in the next batch."""
    failing: list[bool] = []
    later: list[asyncio.Task[Appended[None]]] = []

    class FailingStore(MemoryStore):
        @asynccontextmanager
        async def _transaction(self) -> AsyncIterator[MemoryWriteTx]:
            async with super()._transaction() as tx:
                yield tx
                if failing:
                    failing.clear()
                    raise OSError("the commit failed")

    async def screen(tx: WriteTx, contexts: Any) -> list[Exception | bytes | None]:
        if "refuse" in contexts:  # queued after this batch was taken: the next batch's
            later.append(asyncio.create_task(seq.append(b"y", "keep")))
            await asyncio.sleep(0)
            failing.append(True)
        return [ValueError("no") if c == "refuse" else None for c in contexts]

    store = FailingStore()
    seq: Sequencer[str, None] = Sequencer(store, signer, screen=screen)
    await seq.start()
    with pytest.raises(OSError, match="the commit failed"):
        await seq.append(b"x", "refuse")
    appended = await later[0]
    assert appended.index == 0
    latest = await store.latest()
    assert latest is not None and latest.size == 1
    await seq.close()
