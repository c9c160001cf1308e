"""``--profile``: where the time of an append and of a proof goes, without touching internals.

The append path is measured twice. First as the benchmark runs it (``Log.append`` at batch
1,000, the sequencer's public ``observer`` telling each commit's time), which splits wall time
into inside and outside the commit. Then each part of a commit is replayed alone on the same
batches through the public functions the sequencer calls (``integrate``, ``sign_checkpoint``,
a store transaction, ``LogReader.offer``), which splits the commit. Nothing is patched: a
phase table built by wrapping private methods breaks silently when they are renamed.

Both paths also run under cProfile, whose top functions are listed (main thread only: SQLite
runs in a worker thread, so it shows as the event loop's wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import io
import os
import pstats
import time
from pathlib import Path
from typing import Any

from benchmarks._common import REPO
from benchmarks.ledgerbench.proofs import proof_queries
from benchmarks.ledgerbench.workload import ORIGIN, Config, EntryPool, signer
from ledger.core.checkpoint import Checkpoint, sign_checkpoint
from ledger.core.compact import TreeState, integrate
from ledger.log.facade import Log
from ledger.log.reader import LogReader
from ledger.storage.base import CheckpointRecord
from ledger.storage.sqlite import SqliteStore


def top_functions(prof: cProfile.Profile, n: int = 15) -> list[dict[str, Any]]:
    st = pstats.Stats(prof, stream=io.StringIO())
    total = st.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_cc, ncalls, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        short = file
        for marker in ("/site-packages/", "/lib/python3"):
            if marker in file:
                short = file.split(marker, 1)[1]
                break
        else:
            with contextlib.suppress(ValueError):
                short = os.path.relpath(file, REPO)
        rows.append({"function": f"{short}:{line}({func})", "ncalls": ncalls,
                     "tottime_s": tt, "cumtime_s": ct, "tottime_pct": 100 * tt / total})
    rows.sort(key=lambda r: -r["tottime_s"])
    return rows[:n]


async def _replay_commit_parts(path: Path, batches: list[list[bytes]]) -> dict[str, float]:
    """Seconds spent in each part of a commit, each run alone on the same batches."""
    seconds = {"integrate (hashing, tiles, bundles)": 0.0,
               "sign checkpoint (Ed25519 + note)": 0.0,
               "store transaction (BEGIN, write tiles + checkpoint, COMMIT with fsync)": 0.0,
               "reader.offer (hand the new tiles to the read cache)": 0.0}
    names = list(seconds)
    key = signer()
    store = await SqliteStore.open(path, create=True)
    reader = LogReader(store)
    state = TreeState()
    try:
        for entries in batches:
            t0 = time.perf_counter()
            done = integrate(state, entries)
            t1 = time.perf_counter()
            note = sign_checkpoint(Checkpoint(ORIGIN, done.state.size, done.state.root()), key)
            record = CheckpointRecord(done.state.size, time.time(), note)
            t2 = time.perf_counter()
            async with store.transaction() as tx:
                await tx.latest()
                await tx.write(done.tiles, record)
            t3 = time.perf_counter()
            reader.offer(done.tiles)
            t4 = time.perf_counter()
            for name, (a, b) in zip(names, ((t0, t1), (t1, t2), (t2, t3), (t3, t4)), strict=True):
                seconds[name] += b - a
            state = done.state
    finally:
        await store.close()
    return seconds


async def profile_appends(path: Path, seconds: float, pool: EntryPool, batch: int = 1000
                          ) -> dict[str, Any]:
    """Where the time of Sequencer.append goes at a batch size: parts, then cProfile."""
    commit_s: list[float] = []
    lg = await Log.open(await SqliteStore.open(path, create=True), signer=signer(),
                        max_batch=batch, observer=lambda _n, s: commit_s.append(s))
    try:
        for _ in range(2):
            await asyncio.gather(*(lg.append(e) for e in pool.take(batch)))
        commit_s.clear()
        batches: list[list[bytes]] = []
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            batches.append(pool.take(batch))
            await asyncio.gather(*(lg.append(e) for e in batches[-1]))
        wall = time.perf_counter() - start
        commit = sum(commit_s)
        prof = cProfile.Profile()
        prof.enable()
        for _ in batches:
            await asyncio.gather(*(lg.append(e) for e in pool.take(batch)))
        prof.disable()
    finally:
        await lg.close()
    entries = len(batches) * batch
    parts = await _replay_commit_parts(path.with_name(path.name + ".replay"), batches)
    per_wall = wall / entries  # the phases below are scaled to the measured run's entries

    def row(name: str, s: float) -> dict[str, Any]:
        return {"phase": name, "seconds": s, "us_per_entry": s / entries * 1e6,
                "pct": 100 * s / wall}

    phases = [row(k, v) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])]
    phases.append(row("rest of the commit (catch-up check, futures, bookkeeping)",
                      max(commit - sum(parts.values()), 0.0)))
    phases.append(row("outside the commit (append(), tasks, gather, wake-ups)", wall - commit))
    return {"batch": batch, "entries": entries, "seconds": wall, "entries_per_s": 1 / per_wall,
            "phases": phases, "phase_method": "commit parts replayed alone on the same batches",
            "cprofile_top": top_functions(prof)}


# The functions of the proof path whose cumulative time (under cProfile) is a phase.
_PROOF_PHASES = {
    ("tilehash.py", "__init__"): "expand tile (255 node hashes)",
    ("proofs.py", "inclusion_plan"): "inclusion_plan (ranges)",
    ("sqlite.py", "read_tiles"): "store.read_tiles (aiosqlite)",
}


async def profile_proofs(path: Path, size: int, cfg: Config) -> dict[str, Any]:
    """Inclusion proofs at ``size``, warm: latency, then cProfile with phases read from it."""
    lg = await Log.open(await SqliteStore.open(path), verifier=signer().verifier())
    try:
        reader = lg.reader
        incl, _ = proof_queries(size, cfg.warmup + 2 * cfg.samples)
        for i in range(0, size, 256):  # warm as in ours_proofs
            await reader.inclusion_proof(i, size)
        for i in incl[: cfg.warmup]:
            await reader.inclusion_proof(i, size)
        timed = incl[cfg.warmup : cfg.warmup + cfg.samples]
        start = time.perf_counter()
        for i in timed:
            await reader.inclusion_proof(i, size)
        wall = time.perf_counter() - start
        prof = cProfile.Profile()
        prof.enable()
        profiled = incl[cfg.warmup + cfg.samples :]
        t = time.perf_counter()
        for i in profiled:
            await reader.inclusion_proof(i, size)
        profiled_wall = time.perf_counter() - t
        prof.disable()
    finally:
        await lg.close()
    n = len(timed)
    st = pstats.Stats(prof, stream=io.StringIO())
    phases = []
    for (file, _line, func), (_cc, ncalls, _tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        name = _PROOF_PHASES.get((os.path.basename(file), func))
        if name is not None and file.startswith(str(REPO)):
            phases.append({"phase": name, "seconds": ct, "us_per_proof": ct / len(profiled) * 1e6,
                           "calls": ncalls, "pct": 100 * ct / profiled_wall})
    phases.sort(key=lambda p: -p["seconds"])
    return {"size": size, "proofs": n, "seconds": wall, "mean_us": wall / n * 1e6,
            "phases": phases, "phase_method": "cumulative time under cProfile",
            "cprofile_top": top_functions(prof)}
