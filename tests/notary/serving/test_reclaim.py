"""Reclaiming a pruned range's rows (issue 33 item 5, ``notary log prune --reclaim``): the
receipt and lookup rows below a frozen log's minimum index go, on every backend; the entries
stay; receipts above it are still served; it is idempotent, refuses the active log, and a run
stopped between two batches leaves a consistent store that a rerun finishes."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from ledger.log.reader import LogReader
from notary.core.receipts import Receipt
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import PruneRefused, prune, roll
from notary.serving.reclaim import reclaim
from notary.serving.service import Notary
from notary.store.base import NotaryStore
from tests.notary_server import digest, headless_notary, issue

COUNT = 300


async def _rolled(notary: Notary, tmp_path: Path) -> tuple[list[Receipt], str]:
    receipts = [(await issue(notary, i, server=f"srv{i % 2}"))[0] for i in range(COUNT)]
    await notary.sequencer.close()
    rolled = await roll(notary.store, load_log_key(Paths(tmp_path)))
    return receipts, rolled.frozen.origin


async def _served(store: NotaryStore, receipts: list[Receipt]) -> list[int]:
    """The indexes of the receipts the store still finds, by id and by digest alike."""
    found = []
    for r in receipts:
        by_id = await store.receipt_by_id(r.id)
        by_digest = await store.receipt_by_digest(r.call_sha256)
        assert (by_id is None) == (by_digest is None), r.index
        if by_id is not None:
            assert by_id == by_digest and by_id.id == r.id
            found.append(r.index)
    return found


async def test_reclaim_deletes_the_rows_below_the_minimum_index(backend: str,
                                                                tmp_path: Path) -> None:
    async with headless_notary(tmp_path, backend) as notary:
        receipts, origin = await _rolled(notary, tmp_path)
        store = notary.store
        await prune(store, origin, 256)
        seen: list[tuple[int, int]] = []
        done = await reclaim(store, origin, batch=100, progress=lambda a, b: seen.append((a, b)))
        assert done.receipts == 256
        assert seen == [(100, 256), (200, 256), (256, 256)]
        assert await _served(store, receipts) == list(range(256, COUNT))
        # Search finds only what is left, on every filter.
        everything = await store.search_receipts(limit=1000)
        assert sorted(r.index for r in everything) == list(range(256, COUNT))
        odd = await store.search_receipts(server="srv1", limit=1000)
        assert sorted(r.index for r in odd) == list(range(257, COUNT, 2))
        # The log keeps every entry: the range stays verifiable from what the receipts hold.
        assert len(await LogReader(store.for_log(0)).entries(0, COUNT + 1)) == COUNT + 1
        if backend == "sqlite":
            assert done.free_bytes is not None and done.free_bytes > 0
        # Idempotent: nothing more to do, and a higher minimum index reclaims only the rest.
        assert (await reclaim(store, origin)).receipts == 0
        await prune(store, origin, COUNT + 1)
        assert (await reclaim(store, origin)).receipts == COUNT - 256
        assert await _served(store, receipts) == []
        if backend != "memory":  # (another process: a memory store is its own)
            # A reclaimed digest is no longer a duplicate: notarized again, it is a new
            # receipt, in the active log.
            again, new = await _again(tmp_path, backend, 3)
            assert new and again.id != receipts[3].id and again.origin != receipts[3].origin


async def _again(tmp_path: Path, backend: str, n: int) -> tuple[Receipt, bool]:
    async with headless_notary(tmp_path, backend) as notary:
        return await issue(notary, n)


async def test_reclaim_refuses_the_active_log_and_unknown_origins(tmp_path: Path) -> None:
    async with headless_notary(tmp_path, "sqlite") as notary:
        receipts, origin = await _rolled(notary, tmp_path)
        active = (await notary.store.logs())[-1].origin
        with pytest.raises(PruneRefused, match="the active log"):
            await reclaim(notary.store, active)
        with pytest.raises(PruneRefused, match="not a frozen log"):
            await reclaim(notary.store, "elsewhere.example")
        assert (await reclaim(notary.store, origin)).receipts == 0  # min index 0: nothing
        assert len(await _served(notary.store, receipts)) == COUNT


class Stop(Exception):
    pass


async def test_a_reclaim_stopped_midway_leaves_a_consistent_store(shared: str,
                                                                  tmp_path: Path) -> None:
    async with headless_notary(tmp_path, shared) as notary:
        receipts, origin = await _rolled(notary, tmp_path)
        await prune(notary.store, origin, 250)

        def die(done: int, total: int) -> None:
            if done >= 200:
                raise Stop  # the process dies between two transactions

        with pytest.raises(Stop):
            await reclaim(notary.store, origin, batch=100, progress=die)
    # Another process opens the store: whole batches are gone, the rest is served as before.
    async with headless_notary(tmp_path, shared) as notary:
        assert await _served(notary.store, receipts) == list(range(200, COUNT))
        assert (await notary.store.receipt_by_digest(digest(250))) is not None
        done = await reclaim(notary.store, origin, batch=100)
        assert done.receipts == 50
        assert await _served(notary.store, receipts) == list(range(250, COUNT))


async def test_a_reclaim_killed_between_batches_leaves_a_consistent_store(
        shared: str, tmp_path: Path) -> None:
    """SIGKILL once the second batch committed: two batches gone whole, every other receipt
    served as before, and a rerun finishes."""
    await _killed(tmp_path, shared, "after", left=200)


async def test_a_reclaim_killed_inside_a_batch_leaves_a_consistent_store(tmp_path: Path) -> None:
    """SIGKILL inside the second batch's SQLite transaction, its rows deleted but not
    committed: only the first batch is gone. (A PostgreSQL batch is one DELETE statement.)"""
    await _killed(tmp_path, "sqlite", "inside", left=100)


async def _killed(tmp_path: Path, backend: str, mode: str, left: int) -> None:
    async with headless_notary(tmp_path, backend) as notary:
        receipts, origin = await _rolled(notary, tmp_path)
        await prune(notary.store, origin, 250)
    database = "" if backend == "sqlite" else backend
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.reclaim_child", str(tmp_path), database, origin, mode,
        stdout=asyncio.subprocess.PIPE, cwd=Path(__file__).parents[3])
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 60)
    assert line == b"paused\n", line
    child.kill()
    await child.wait()
    async with headless_notary(tmp_path, backend) as notary:
        assert await _served(notary.store, receipts) == list(range(left, COUNT))
        search = await notary.store.search_receipts(limit=1000)
        assert sorted(r.index for r in search) == list(range(left, COUNT))
        assert (await reclaim(notary.store, origin, batch=100)).receipts == 250 - left
        assert await _served(notary.store, receipts) == list(range(250, COUNT))
