"""A store of a sequence of logs (issue 33): the registry, per-log tables, a roll written in
one transaction, and a second handle (another process) following it, on every backend."""

from __future__ import annotations

import asyncio

import pytest

from ledger.core.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.core.compact import TreeState
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.note import Ed25519Signer
from ledger.log.facade import Log
from ledger.log.tree_state import load_state
from ledger.storage.base import CheckpointRecord, LogRecord, RollingStore, RollingTx, StoreError
from tests.stores import StoreFactory

ORIGIN = "registry.test/log"


def empty_checkpoint(signer: Ed25519Signer) -> CheckpointRecord:
    note = sign_checkpoint(Checkpoint(signer.name, 0, TreeState().root()), signer)
    return CheckpointRecord(0, 1.0, note)


async def roll_to_1(store: RollingStore, first: Ed25519Signer, second: Ed25519Signer,
                    *, fail: bool = False) -> None:
    """Freeze log 0 at its size and start log 1 (no successor entry: the store's part)."""
    async with store.transaction() as tx:
        rtx: RollingTx = tx  # type: ignore[assignment]
        latest = await rtx.latest()
        assert latest is not None
        await rtx.put_log(LogRecord(0, first.name, "", "frozen", 0.0, (), frozen_at=2.0,
                                    final_size=latest.size))
        await rtx.put_log(LogRecord(1, second.name, "1970-01-01", "active", 2.0, ("k1",)))
        await rtx.switch_log(1, create=True)
        assert await rtx.latest() is None
        await rtx.write({}, empty_checkpoint(second))
        if fail:
            raise RuntimeError("killed mid-roll")


async def test_a_store_that_never_rolled_is_one_log_0(stores: StoreFactory) -> None:
    store: RollingStore = await stores.open()  # type: ignore[assignment]
    assert await store.logs() == []
    assert store.log_number == 0
    async with store.transaction() as tx:
        assert (tx.log_number, tx.active_log) == (0, 0)  # type: ignore[attr-defined]
        with pytest.raises(StoreError):
            await tx.switch_log(3)  # type: ignore[attr-defined]
    await store.close()


async def test_a_roll_freezes_log_0_and_the_next_log_has_its_own_tables(
        stores: StoreFactory) -> None:
    first, second = Ed25519Signer.generate(ORIGIN), Ed25519Signer.generate(ORIGIN + "/1")
    log0 = await Log.open(await stores.open(), signer=first)
    entries0 = [b"zero %d" % i for i in range(300)]
    await log0.append_many(entries0)
    store: RollingStore = log0.store  # type: ignore[assignment]
    assert log0.sequencer is not None
    await log0.sequencer.close()
    final0 = await store.latest()
    await roll_to_1(store, first, second)
    assert store.log_number == 1
    assert [(r.n, r.state, r.final_size) for r in await store.logs()] == [
        (0, "frozen", 300), (1, "active", None)]
    assert (await store.latest()) is not None and (await store.latest()).size == 0  # type: ignore[union-attr]
    # Log 1 grows in its own tables; log 0 stays as frozen, readable through its view.
    log1 = await Log.open(store, signer=second)
    entries1 = [b"one %d" % i for i in range(20)]
    await log1.append_many(entries1)
    view0, view1 = store.for_log(0), store.for_log(1)
    assert await view0.latest() == final0
    cp0, _ = open_checkpoint((await view0.latest()).note, first.verifier())  # type: ignore[union-attr]
    assert (await load_state(view0.read_tiles, 300)).root() == cp0.root_hash == merkle_root(
        [leaf_hash(e) for e in entries0])
    latest1 = await view1.latest()
    assert latest1 is not None and latest1.size == 20
    assert (await load_state(view1.read_tiles, 20)).root() == merkle_root(
        [leaf_hash(e) for e in entries1])
    assert await log1.reader.entries(0, 20) == entries1
    await log1.close()


async def test_a_roll_that_fails_leaves_nothing(stores: StoreFactory) -> None:
    first, second = Ed25519Signer.generate(ORIGIN), Ed25519Signer.generate(ORIGIN + "/1")
    log0 = await Log.open(await stores.open(), signer=first)
    await log0.append_many([b"a", b"b"])
    store: RollingStore = log0.store  # type: ignore[assignment]
    with pytest.raises(RuntimeError, match="mid-roll"):
        await roll_to_1(store, first, second, fail=True)
    assert store.log_number == 0 and await store.logs() == []
    assert await store.for_log(1).latest() is None
    async with store.transaction() as tx:
        assert tx.active_log == 0  # type: ignore[attr-defined]
        with pytest.raises(StoreError):
            await tx.switch_log(1)  # type: ignore[attr-defined]
    assert (await log0.append(b"c")).index == 2  # log 0 still takes entries
    await log0.close()


@pytest.mark.parametrize("stores", ["sqlite", "postgres"], indirect=True)  # shareable ones
async def test_another_handle_sees_the_roll_under_the_lock(stores: StoreFactory) -> None:
    first, second = Ed25519Signer.generate(ORIGIN), Ed25519Signer.generate(ORIGIN + "/1")
    other: RollingStore = await stores.open()  # type: ignore[assignment]
    log0 = await Log.open(await stores.open(), signer=first)
    await log0.append(b"x")
    async with other.transaction() as tx:
        assert tx.active_log == 0  # type: ignore[attr-defined]
    await roll_to_1(log0.store, first, second)  # type: ignore[arg-type]
    async with other.transaction() as tx:
        rtx: RollingTx = tx  # type: ignore[assignment]
        assert (rtx.log_number, rtx.active_log) == (0, 1)
        await rtx.switch_log(1)
        latest = await rtx.latest()
        assert latest is not None and latest.size == 0
    assert other.log_number == 1  # the store follows a committed switch
    assert (await other.latest()) == latest
    await asyncio.gather(log0.close(), other.close())


async def test_cosigned_final_checkpoints_are_kept_by_origin(stores: StoreFactory) -> None:
    """What the final-checkpoint job saves (ledger.jobs.final_checkpoint): one note per frozen
    origin, replaced as cosignatures join, read back by another handle; a view has none."""
    store: RollingStore = await stores.open()  # type: ignore[assignment]
    assert await store.witnessed_finals() == {}
    await store.save_witnessed_final("a.test/0", b"note a, one cosignature")
    await store.save_witnessed_final("a.test/1", b"note b")
    await store.save_witnessed_final("a.test/0", b"note a, two cosignatures")
    other = await stores.open()
    assert await other.witnessed_finals() == {"a.test/0": b"note a, two cosignatures",
                                              "a.test/1": b"note b"}
    assert await store.for_log(0).witnessed_finals() == {}
    with pytest.raises(StoreError):
        await store.for_log(0).save_witnessed_final("a.test/0", b"x")
    await store.close()
    if other is not store:
        await other.close()
