"""Phase 2: durable appends at batch sizes 1, 100 and 1,000, through the public API only.

``Sequencer.append`` with ``max_batch=N`` and N concurrent appends per round (each an awaiting
task, as a request handler would be), and ``Log.append_many`` (N entries, one waiter): the
same transaction, signature and tile writes, minus the per-caller task overhead.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from benchmarks.ledgerbench.workload import EntryPool, signer
from ledger.log.facade import Log
from ledger.storage.sqlite import SqliteStore


async def ours_append_api(path: Path, batch: int, seconds: float, pool: EntryPool
                          ) -> dict[str, Any]:
    """Sequencer.append, max_batch=N, N concurrent appends per round: every batch is exactly N."""
    sizes: list[int] = []
    commit_s: list[float] = []

    def observe(n: int, s: float) -> None:
        sizes.append(n)
        commit_s.append(s)

    lg = await Log.open(await SqliteStore.open(path, create=True), signer=signer(),
                        max_batch=batch, observer=observe)
    append = lg.append
    for _ in range(2):  # warm-up
        await asyncio.gather(*(append(e) for e in pool.take(batch)))
    sizes.clear()
    commit_s.clear()
    entries = 0
    start = time.perf_counter()
    while True:
        await asyncio.gather(*(append(e) for e in pool.take(batch)))
        entries += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    await lg.close()
    assert set(sizes) == {batch}, f"batches were not all of size {batch}: {sorted(set(sizes))}"
    commit_s.sort()
    return {
        "system": "ours: Sequencer.append",
        "batch": batch,
        "entries": entries,
        "batches": len(sizes),
        "seconds": elapsed,
        "entries_per_s": entries / elapsed,
        "batches_per_s": len(sizes) / elapsed,
        "commit_median_ms": commit_s[len(commit_s) // 2] * 1000,
    }


async def ours_commit_path(path: Path, batch: int, seconds: float, pool: EntryPool
                           ) -> dict[str, Any]:
    """Log.append_many with N entries: the public bulk API, one waiter per batch of N."""
    store = await SqliteStore.open(path, create=True)
    lg = await Log.open(store, signer=signer(), max_batch=batch)

    async def one() -> None:
        await lg.append_many(pool.take(batch))

    for _ in range(2):
        await one()
    batches = 0
    start = time.perf_counter()
    while True:
        await one()
        batches += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    await lg.close()
    return {
        "system": "ours: Log.append_many",
        "batch": batch,
        "entries": batches * batch,
        "batches": batches,
        "seconds": elapsed,
        "entries_per_s": batches * batch / elapsed,
        "batches_per_s": batches / elapsed,
    }


def combine_turns(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """One figure from several timed turns: totals over total time, plus each turn's rate."""
    first = turns[0]
    entries = sum(t["entries"] for t in turns)
    batches = sum(t["batches"] for t in turns)
    seconds = sum(t["seconds"] for t in turns)
    out = {"system": first["system"], "batch": first["batch"], "entries": entries,
           "batches": batches, "seconds": seconds, "entries_per_s": entries / seconds,
           "batches_per_s": batches / seconds,
           "turns_entries_per_s": [t["entries_per_s"] for t in turns]}
    if "commit_median_ms" in first:
        out["commit_median_ms_per_turn"] = [t["commit_median_ms"] for t in turns]
    return out
