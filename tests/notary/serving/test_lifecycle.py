"""Rolling a notary's log (issue 33): the frozen log ends with a successor record naming the
next log and its derived keys, in one transaction, on every store backend."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger.core.checkpoint import open_checkpoint
from ledger.core.tlog_proof import decode_proof_bundle
from ledger.jobs.scrub import Scrubber
from ledger.log.reader import LogReader
from ledger.storage.base import StoreError
from notary.core.logs import log_seed
from notary.core.successor import decode_successor
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import (
    FROZEN_CACHE_TILES,
    FROZEN_OPEN,
    LogBook,
    all_logs,
    log_signer,
    log_vkeys,
    roll,
)
from notary.store.sqlite import SqliteNotaryStore
from tests.notary_server import capture_cli, headless_notary, issue

NOON = datetime(2027, 1, 1, 12, tzinfo=UTC).timestamp()


async def test_a_roll_freezes_the_log_with_a_successor_record(backend: str,
                                                              tmp_path: Path) -> None:
    async with headless_notary(tmp_path, backend) as notary:
        for i in range(3):
            await issue(notary, i)
        await notary.sequencer.close()  # the server is stopped; its store stays open here
        store = notary.store
        root = load_log_key(Paths(tmp_path))
        assert all_logs(root, await store.logs())[0].origin == root.name
        rolled = await roll(store, root, clock=NOON)
        assert (rolled.frozen.n, rolled.frozen.state, rolled.frozen.final_size) == (0, "frozen", 4)
        assert rolled.active.origin == f"{root.name}/2027-01-01"
        signer1 = log_signer(root, rolled.active)
        assert signer1.seed == log_seed(root.seed, rolled.active.origin) != root.seed
        assert rolled.active.vkeys == log_vkeys(signer1)
        assert await store.logs() == [rolled.frozen, rolled.active]
        # Log 0's final checkpoint (log.key's) commits to the successor record, its last entry.
        view0 = store.for_log(0)
        final = await view0.latest()
        assert final is not None
        assert open_checkpoint(final.note, root.verifier())[0].size == 4
        (last,) = await LogReader(view0).entries(3, 4)
        successor = decode_successor(last)
        assert (successor.origin, successor.vkeys, successor.previous, successor.reason) == (
            rolled.active.origin, rolled.active.vkeys, root.name, "operator")
        assert successor.frozen_at == "2027-01-01T12:00:00.000Z"
        # Log 1 starts empty, signed with its own key.
        first = await store.latest()
        assert first is not None and first.size == 0
        assert open_checkpoint(first.note, signer1.verifier())[0].origin == rolled.active.origin
        # A second roll the same day: the next shard name, and log 1 frozen at its one entry.
        again = await roll(store, root, reason="scheduled", clock=NOON + 60)
        assert again.active.origin == f"{root.name}/2027-01-01-2"
        assert (again.frozen.n, again.frozen.final_size, again.frozen.reason) == (
            1, 1, "scheduled")
        (last,) = await LogReader(store.for_log(1)).entries(0, 1)
        assert decode_successor(last).previous == rolled.active.origin


async def test_log_roll_and_list_commands_with_the_server_stopped(tmp_path: Path) -> None:
    async with headless_notary(tmp_path, "sqlite") as notary:
        await issue(notary, 1)
    code, out, err = await capture_cli("log", "roll", "--data", str(tmp_path))
    assert code == 0, err
    assert "log 1" in out
    code, out, err = await capture_cli("log", "list", "--data", str(tmp_path), "--json")
    assert code == 0, err
    logs = json.loads(out)["logs"]
    assert [(g["n"], g["state"], g["final_size"]) for g in logs] == [
        (0, "frozen", 2), (1, "active", None)]
    root = load_log_key(Paths(tmp_path))
    assert logs[1]["origin"].startswith(root.name + "/")
    assert logs[0]["vkeys"] == list(log_vkeys(root))


async def test_two_writers_of_one_store_both_follow_a_roll(shared: str, tmp_path: Path) -> None:
    """Two notaries on one store (two processes, as far as the store can tell), a roll by a
    third handle: each moves to the new log at its next commit; every receipt is in the new
    log at its own index, none lost, and both find all of them."""
    async with headless_notary(tmp_path, shared) as a, headless_notary(tmp_path, shared) as b:
        await asyncio.gather(*(issue(x, i) for i, x in enumerate([a, b, a, b])))
        root = load_log_key(Paths(tmp_path))
        rolled = await roll(a.store, root)
        issued = await asyncio.gather(*(issue(x, 100 + i) for i, x in enumerate([a, b] * 10)))
        receipts = [r for r, new in issued if new]
        assert len(receipts) == 20
        assert {r.origin for r in receipts} == {rolled.active.origin}
        assert sorted(r.index for r in receipts) == list(range(20))
        for x in (a, b):
            assert x.log.origin == rolled.active.origin
            for r in receipts:
                assert (await x.get(r.id)).signature == r.signature
        final = await a.store.for_log(0).latest()
        assert final is not None and final.size == 5


async def test_a_switch_whose_commit_fails_is_made_again(tmp_path: Path) -> None:
    """The commit that moves a writer to the new log fails (rolled back): the next one moves
    it again, from the store as it is, and lands in the new log."""
    async with headless_notary(tmp_path, "sqlite") as notary:
        await issue(notary, 1)
        other = await SqliteNotaryStore.open(Paths(tmp_path).db)  # as `notary log roll` does
        rolled = await roll(other, load_log_key(Paths(tmp_path)))
        await other.close()
        hook = notary.sequencer.hook

        async def failing(tx: Any, items: Any) -> None:
            raise RuntimeError("the disk said no")

        notary.sequencer.hook = failing
        with pytest.raises(RuntimeError, match="disk"):
            await issue(notary, 2)
        notary.sequencer.hook = hook
        receipt, new = await issue(notary, 3)
        assert new and (receipt.origin, receipt.index) == (rolled.active.origin, 0)
        assert (await notary.get(receipt.id)).signature == receipt.signature


async def test_the_scrub_checks_one_log_a_pass_across_a_roll(tmp_path: Path) -> None:
    async with headless_notary(tmp_path, "sqlite") as notary:
        for i in range(3):
            await issue(notary, i)
        scrub = Scrubber(notary.log, rate=10_000)
        assert await scrub.scrub_once() and scrub.status.last_pass_size == 3
        other = await SqliteNotaryStore.open(Paths(tmp_path).db)
        await roll(other, load_log_key(Paths(tmp_path)))
        await other.close()
        pace, moved = scrub._pace, []

        async def move_midway(read: int) -> None:  # the writer moves to log 1 mid-pass
            if not moved:
                moved.append(await issue(notary, 10))
            await pace(read)

        scrub._pace = move_midway  # type: ignore[method-assign]
        assert await scrub.scrub_once()  # a pass across the switch: no damage claimed
        assert moved and scrub.status.damage is None
        assert notary.sequencer.status.state.value == "writing"
        assert await scrub.scrub_once() and scrub.status.last_pass_size == 1


@pytest.mark.parametrize("step", ["write", "put_log", "switch_log"])
async def test_a_roll_killed_midway_leaves_nothing(shared: str, step: str, tmp_path: Path
                                                   ) -> None:
    """SIGKILL inside the roll's transaction, after any of its steps: the store is as before
    (one active log 0, its checkpoint unchanged), a notary starts on it, and a roll works."""
    async with headless_notary(tmp_path, shared) as notary:
        await issue(notary, 1)
        before = await notary.store.latest()
    database = "" if shared == "sqlite" else shared
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.roll_child", str(tmp_path), database, step,
        stdout=asyncio.subprocess.PIPE, cwd=Path(__file__).parents[3])
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 60)
    assert line == b"paused\n", line
    child.kill()
    await child.wait()
    async with headless_notary(tmp_path, shared) as notary:
        assert await notary.store.logs() == []
        assert await notary.store.latest() == before
        assert await notary.store.for_log(1).latest() is None
        receipt, _ = await issue(notary, 2)
        assert receipt.index == 1 and receipt.origin == notary.log.origin
        rolled = await roll(notary.store, load_log_key(Paths(tmp_path)))
        assert (rolled.frozen.final_size, rolled.active.n) == (3, 1)


async def test_a_receipt_of_the_new_log_asked_of_a_writer_not_moved_yet(
        tmp_path: Path) -> None:
    """Another process issued in the new log; this one, idle since the roll, is asked for that
    receipt before it noticed: it follows at once and proves it in the new log."""
    async with headless_notary(tmp_path, "sqlite") as a, \
            headless_notary(tmp_path, "sqlite") as b:
        await issue(a, 1)
        other = await SqliteNotaryStore.open(Paths(tmp_path).db)
        rolled = await roll(other, load_log_key(Paths(tmp_path)))
        await other.close()
        receipt, _ = await issue(a, 2)
        assert b.log.origin != rolled.active.origin  # b has not moved yet
        got = await b.get(receipt.id)
        assert b.log.origin == rolled.active.origin and got.signature == receipt.signature
        verifier = log_signer(load_log_key(Paths(tmp_path)), rolled.active).verifier()
        note = decode_proof_bundle(got.proof.encode()).checkpoint  # type: ignore[union-attr]
        assert open_checkpoint(note, verifier)[0].size == 1


async def test_a_version_5_store_is_marked_version_6_and_a_newer_one_refused(
        tmp_path: Path) -> None:
    """Version 6 marks a file that may hold several logs: an older release refuses it (it
    would write to a frozen log), and a version 5 file opens as version 6, unchanged."""
    async with headless_notary(tmp_path, "sqlite") as notary:
        receipt, _ = await issue(notary, 1)
    db = Paths(tmp_path).db
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 5")
    store = await SqliteNotaryStore.open(db)
    try:
        assert store.migration is not None and store.migration.from_version == 5
        assert (await store.receipt_by_id(receipt.id)) is not None
    finally:
        await store.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (6,)
        conn.execute("PRAGMA user_version = 7")
    with pytest.raises(StoreError, match="version 7"):
        await SqliteNotaryStore.open(db)


async def test_the_frozen_logs_kept_open_are_few_and_small(tmp_path: Path) -> None:
    """A notary of many frozen logs keeps a bounded number of them open, each with a small
    tile cache: memory does not grow with the number of logs read (a reader's caches hold up
    to ~128 MiB at the active log's sizes)."""
    async with headless_notary(tmp_path, "sqlite") as notary:
        root = load_log_key(Paths(tmp_path))
        for i in range(FROZEN_OPEN + 2):
            await issue(notary, i)
            await roll(notary.store, root)
        book = LogBook(notary.store, root)
        frozen = [r for r in await book.refresh(force=True) if r.state == "frozen"]
        first = await book.frozen(frozen[0].origin)
        assert first is not None and await book.frozen(frozen[0].origin) is first
        assert first.reader.cache_info().tiles_max == FROZEN_CACHE_TILES
        opened = [await book.frozen(r.origin) for r in frozen[1:]]
        assert all(log is not None for log in opened)
        assert await book.frozen(frozen[-1].origin) is opened[-1]  # the newest read stays
        again = await book.frozen(frozen[0].origin)  # the oldest was closed, opens again
        assert again is not None and again is not first
        assert (await again.head()) == (await first.head())
