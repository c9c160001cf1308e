"""Pruning a frozen log (issue 33 item 5, tlog-tiles "Pruning"): ``prune`` sets the registry's
minimum index in one transaction on every backend, refuses the active log, an unknown origin
and an index past the log's size, and 0 undoes it; the data stays stored."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ledger.log.reader import LogReader
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import PruneRefused, prune, roll
from tests.notary_server import headless_notary, issue


async def test_prune_sets_the_min_index_of_a_frozen_log(backend: str, tmp_path: Path) -> None:
    async with headless_notary(tmp_path, backend) as notary:
        for i in range(300):
            await issue(notary, i)
        await notary.sequencer.close()
        store = notary.store
        rolled = await roll(store, load_log_key(Paths(tmp_path)))
        assert rolled.frozen.final_size == 301  # 300 receipts, the successor record
        pruned = await prune(store, rolled.frozen.origin, 256)
        assert pruned == replace(rolled.frozen, min_index=256)
        assert await store.logs() == [pruned, rolled.active]
        # The data stays stored: every entry of the pruned range is still read.
        assert len(await LogReader(store.for_log(0)).entries(0, 301)) == 301
        # The whole log, then 0 again: served whole.
        assert (await prune(store, rolled.frozen.origin, 301)).min_index == 301
        assert (await prune(store, rolled.frozen.origin, 0)).min_index == 0
        assert await store.logs() == [rolled.frozen, rolled.active]


async def test_prune_refuses_what_it_may_not_do(backend: str, tmp_path: Path) -> None:
    async with headless_notary(tmp_path, backend) as notary:
        await issue(notary, 1)
        await notary.sequencer.close()
        store = notary.store
        root = load_log_key(Paths(tmp_path))
        with pytest.raises(PruneRefused, match="not a frozen log"):
            await prune(store, root.name, 1)  # never rolled: log 0 is the active log
        rolled = await roll(store, root)
        before = await store.logs()
        with pytest.raises(PruneRefused, match="active log"):
            await prune(store, rolled.active.origin, 0)
        with pytest.raises(PruneRefused, match="not a frozen log of this notary"):
            await prune(store, "elsewhere.example", 1)
        with pytest.raises(PruneRefused, match="at most that, not 3"):
            await prune(store, rolled.frozen.origin, 3)  # 2 entries: a receipt, the successor
        with pytest.raises(PruneRefused, match="at least 0"):
            await prune(store, rolled.frozen.origin, -1)
        assert await store.logs() == before
