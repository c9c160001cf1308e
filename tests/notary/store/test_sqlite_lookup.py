"""The SQLite store's lookup keys (``notary.store.sqlite_lookup``): appended by each commit,
merged into ``receipt_ids`` / ``receipt_digests`` a generation at a time.

Generations of a few receipts here (the default is 65,536), so that every test closes, merges
and deletes several: whatever the batches, restarts and second processes, every receipt is
found by its id and its digest, a logged digest is never logged again, and the store keeps the
module's invariant (each receipt's keys in a lookup table or among the recent rows, the merged
prefix of a generation exactly the first keys in key order).
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.storage.base import WriteTx
from notary.core.receipts import Receipt
from notary.serving.service import Notary
from notary.store import sqlite as notary_sqlite
from notary.store import sqlite_lookup
from notary.store.sqlite import SqliteNotaryStore
from notary.store.sqlite_lookup import MergeState
from tests.notary_server import UNLIMITED, headless_notary

GENERATION = 16


@pytest.fixture(autouse=True)
def small_generations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_lookup, "GENERATION", GENERATION)


def check_store(db: Path) -> MergeState:
    """The store's invariant (``notary.store.sqlite_lookup``); its merge state."""
    with sqlite3.connect(db) as conn:
        state = MergeState(*conn.execute(
            "SELECT merged_below, merging_below, ids_merged, digests_merged FROM lookup_merge"
        ).fetchone())
        logged = {idx for (idx,) in conn.execute("SELECT idx FROM receipts")}
        recent = {idx: (i, d) for idx, i, d in conn.execute(
            "SELECT idx, id_k, digest_k FROM receipt_keys_recent")}
        tables = [set(conn.execute(f"SELECT k, idx FROM {t}"))
                  for t in ("receipt_ids", "receipt_digests")]
    assert all(idx >= state.merged_below for idx in recent)
    for column, (table, merged) in enumerate(zip(tables, (state.ids_merged,
                                                          state.digests_merged), strict=True)):
        assert {idx for _, idx in table} | recent.keys() == logged
        generation = sorted((keys[column], idx) for idx, keys in recent.items()
                            if idx < state.merging_below)
        assert set(generation[:merged]) <= table
        assert not set(generation[merged:]) & table
        assert all(k == recent[idx][column] for k, idx in table if idx in recent)
    return state


async def found_everywhere(notary: Notary, issued: list[Receipt]) -> None:
    """Each receipt by id and by digest, and its digest not logged again."""
    for receipt in issued:
        assert await notary.store.receipt_by_id(receipt.id) == receipt.without_proof()
        assert await notary.store.receipt_by_digest(receipt.call_sha256) == \
            receipt.without_proof()
    again = await asyncio.gather(*(notary.notarize(UNLIMITED, r.server, r.tool, r.call_sha256)
                                   for r in issued))
    assert [(r.id, created) for r, created in again] == [(r.id, False) for r in issued]


async def issue_round(notary: Notary, in_flight: int, each: int) -> list[Receipt]:
    async def one() -> list[Receipt]:
        out = []
        for _ in range(each):
            receipt, created = await notary.notarize(UNLIMITED, "srv", "t", os.urandom(32).hex())
            assert created
            out.append(receipt)
        return out

    return [r for rs in await asyncio.gather(*(one() for _ in range(in_flight))) for r in rs]


@given(rows=st.lists(st.tuples(st.integers(-(1 << 47), (1 << 47) - 1), st.integers(0, 1 << 40)),
                     max_size=300),
       others=st.lists(st.integers(-(1 << 47), (1 << 47) - 1), max_size=50))
def test_a_run_finds_exactly_its_keys_indexes(rows: list[tuple[int, int]],
                                              others: list[int]) -> None:
    """A run of the generation being merged answers every key, its own (signed, repeated,
    sharing low bits) and any other, as a scan of its rows would: the filter in front of its
    binary search never hides a key."""
    rows = sorted(set(rows))
    run = sqlite_lookup._Run(rows)
    near = [k ^ (1 << b) for k, _ in rows[:20] for b in (0, 7, 20)]  # same low bits, or next
    for key in [k for k, _ in rows] + others + near:
        assert run.find(key) == [idx for k, idx in rows if k == key]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 4), st.booleans()),
                       min_size=3, max_size=8))
def test_every_receipt_is_found_through_the_generations(
        rounds: list[tuple[int, int, bool]]) -> None:
    """Batches of any size (one entry to a few generations), restarts between them."""
    async def run(data: Path) -> None:
        issued: list[Receipt] = []
        notary_cm = headless_notary(data, "sqlite")
        notary = await notary_cm.__aenter__()
        try:
            for in_flight, each, restart in rounds:
                issued += await issue_round(notary, in_flight, each)
                if restart:
                    await notary_cm.__aexit__(None, None, None)
                    notary_cm = headless_notary(data, "sqlite")
                    notary = await notary_cm.__aenter__()
                check_store(data / "notary.store.sqlite")
                await found_everywhere(notary, random.sample(issued, min(len(issued), 60)))
            # Then lone receipts until a generation has been merged and deleted, if none was.
            for _ in range(400):
                if check_store(data / "notary.store.sqlite").merged_below > 0:
                    break
                issued += await issue_round(notary, 1, 1)
            await found_everywhere(notary, issued)
        finally:
            await notary_cm.__aexit__(None, None, None)
        assert check_store(data / "notary.store.sqlite").merged_below > 0

    with tempfile.TemporaryDirectory() as tmp:  # small_generations holds for every example
        asyncio.run(run(Path(tmp) / "d"))


async def test_two_processes_merge_each_others_generations(tmp_path: Path) -> None:
    """Two notaries on one file take turns: each one's lookups find the other's receipts
    (appended, merged, or half merged by either), and neither logs the other's digests."""
    data = tmp_path / "d"
    issued: list[Receipt] = []
    async with headless_notary(data, "sqlite") as a, headless_notary(data, "sqlite") as b:
        for turn in range(12):
            writer, other = (a, b) if turn % 3 else (b, a)
            issued += await issue_round(writer, 1 + turn * 3 % 17, 1 + turn % 3)
            check_store(data / "notary.store.sqlite")
            await found_everywhere(other, issued[-20:])  # the other's view is a batch old
            await found_everywhere(writer, random.sample(issued, min(len(issued), 20)))
        both = await asyncio.gather(issue_round(a, 20, 3), issue_round(b, 20, 3))
        issued += both[0] + both[1]
        await found_everywhere(a, issued)
        await found_everywhere(b, issued)
    state = check_store(data / "notary.store.sqlite")
    assert state.merged_below > 0


async def test_receipts_added_in_two_steps_of_one_transaction(tmp_path: Path) -> None:
    """A hook that adds a batch's receipts in two calls: both halves' keys are appended, the
    merge goes on from where the first call left it, and every receipt is found."""
    data = tmp_path / "d"
    async with headless_notary(data, "sqlite") as notary:
        assert notary.log is not None and notary.log.sequencer is not None
        one_call = notary.hook

        async def two_calls(tx: WriteTx, items: Sequence[tuple[int, Any]]) -> list[Any]:
            return [*await one_call(tx, items[: len(items) // 2]),
                    *await one_call(tx, items[len(items) // 2 :])]

        notary.log.sequencer.hook = two_calls
        issued: list[Receipt] = []
        for in_flight in (5, 20, 1, 33, 12, 40):
            issued += await issue_round(notary, in_flight, 2)
            check_store(data / "notary.store.sqlite")
        await found_everywhere(notary, issued)
    assert check_store(data / "notary.store.sqlite").merged_below > 0


async def test_a_lone_writer_reads_no_recent_keys_back(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Its view holds what it committed: under the lock it reads the recent keys only when the
    stored checkpoint is not the one it wrote last (another process logged since)."""
    reads: list[int] = []
    real = sqlite_lookup.read_since

    def counted(conn: sqlite3.Connection, start: int
                ) -> tuple[MergeState, list[tuple[int, int, int]]]:
        reads.append(start)
        return real(conn, start)

    monkeypatch.setattr(notary_sqlite, "read_since", counted)
    data = tmp_path / "d"
    async with headless_notary(data, "sqlite") as a:
        await issue_round(a, 1, 3)
        assert reads == []  # the log is as it left it (its start wrote the empty tree)
        async with headless_notary(data, "sqlite") as b:
            await issue_round(b, 1, 1)
            reads.clear()
            await issue_round(a, 1, 2)
            assert len(reads) == 1  # b logged since a's last commit


async def test_a_version_3_store_is_migrated(tmp_path: Path) -> None:
    """Before version 4 every key went into the lookup tables at once: such a store gets the
    two new tables, its receipts are found, and its digests are not logged again."""
    data = tmp_path / "d"
    db = data / "notary.store.sqlite"
    async with headless_notary(data, "sqlite") as notary:
        old = await issue_round(notary, 10, 3)
    with sqlite3.connect(db) as conn:  # back to the version-3 layout
        for table, column in (("receipt_ids", "id_k"), ("receipt_digests", "digest_k")):
            conn.execute(f"INSERT OR IGNORE INTO {table} SELECT {column}, idx "
                         "FROM receipt_keys_recent")
        conn.execute("DROP TABLE receipt_keys_recent")
        conn.execute("DROP TABLE lookup_merge")
        conn.execute("PRAGMA user_version = 3")
    store = await SqliteNotaryStore.open(db)
    try:
        assert store.migration is not None and store.migration.from_version == 3
        assert store.migration.changed
    finally:
        await store.close()
    async with headless_notary(data, "sqlite") as notary:
        await found_everywhere(notary, old)
        new = await issue_round(notary, 10, 4)  # past two generations
        await found_everywhere(notary, old + new)
    assert check_store(db).merged_below > 0


# --- kill -9 ----------------------------------------------------------------------------------


def _acknowledged(out: str) -> Iterator[tuple[str, str, int]]:
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "R":
            yield parts[1], parts[2], int(parts[3])


async def test_sigkill_at_any_point_loses_no_lookup(tmp_path: Path,
                                                    seeded_rng: random.Random) -> None:
    """A notary killed while it appends and merges keys (generations of 16): after every
    restart, each receipt it acknowledged is found by id and digest, and the store keeps its
    invariant."""
    data = tmp_path / "d"
    async with headless_notary(data, "sqlite"):
        pass  # initialised, with its API key
    acknowledged: list[tuple[str, str, int]] = []
    for _ in range(5):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.notary_crash_child", str(data), str(GENERATION)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        # The kill falls at a random moment after the first acknowledgement, not after a fixed
        # time from the start: a loaded machine may take seconds to import and open the store.
        assert child.stdout is not None
        first = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 120)
        await asyncio.sleep(seeded_rng.uniform(0.3, 1.5))
        child.kill()
        out, _ = child.communicate()
        acknowledged += _acknowledged(first + out)
        check_store(data / "notary.store.sqlite")
    assert len(acknowledged) > 4 * GENERATION, "too few receipts to mean anything"
    async with headless_notary(data, "sqlite") as notary:
        for receipt_id, call_sha256, index in acknowledged:
            by_id = await notary.store.receipt_by_id(receipt_id)
            by_digest = await notary.store.receipt_by_digest(call_sha256)
            assert by_id is not None and by_id.index == index
            assert by_digest is not None and by_digest.id == receipt_id
    assert check_store(data / "notary.store.sqlite").merged_below > 0
