"""pymerkle 7, the peer the ledger is compared with: optional, and GPL.

It is imported here only, and only when installed (``pip install -e '.[bench]'``); without it
the benchmark says so in one line and runs the rest. ``SqliteTree`` gets its connection switched
to WAL + synchronous=FULL, the durability the ledger has.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks._common import latency_summary, proc_status_kib, rate, si
from benchmarks.ledgerbench.proofs import proof_queries
from benchmarks.ledgerbench.workload import ENTRY_SEED, Config, EntryPool, generated_entries

INSTALL_HINT = "pip install -e '.[bench]'"


def available() -> bool:
    """Whether pymerkle can be imported (without importing it)."""
    return importlib.util.find_spec("pymerkle") is not None


def open_pymerkle(path: Path) -> Any:
    from pymerkle import SqliteTree  # deferred: optional (the bench extra), and GPL

    tree = SqliteTree(str(path))
    # SqliteTree commits each append_entries() call in one transaction (``with self.con``) on
    # SQLite's default rollback journal; give it the same durability as ours: WAL + FULL.
    tree.con.execute("PRAGMA journal_mode = WAL")
    tree.con.execute("PRAGMA synchronous = FULL")
    mode = tree.con.execute("PRAGMA journal_mode").fetchone()
    sync = tree.con.execute("PRAGMA synchronous").fetchone()
    assert (mode, sync) == ("wal", 2), (mode, sync)
    return tree


def pymerkle_appends(path: Path, batch: int, seconds: float, pool: EntryPool) -> dict[str, Any]:
    tree = open_pymerkle(path)
    try:
        for _ in range(2):
            tree.append_entries(pool.take(batch))
            tree.get_root()
        batches = 0
        start = time.perf_counter()
        while True:
            tree.append_entries(pool.take(batch))
            tree.get_root()  # the root published for this batch
            batches += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
    finally:
        tree.close()
    return {
        "system": "pymerkle 7 SqliteTree",
        "batch": batch,
        "entries": batches * batch,
        "batches": batches,
        "seconds": elapsed,
        "entries_per_s": batches * batch / elapsed,
        "batches_per_s": batches / elapsed,
    }


def grow_pymerkle(path: Path, size: int, batch: int, progress: bool) -> dict[str, Any]:
    rss_start = proc_status_kib("VmRSS")
    tree = open_pymerkle(path)
    start = time.perf_counter()
    with tqdm(total=size, unit="entry", unit_scale=True, desc=f"pymerkle {si(size)}",
              file=sys.stderr, disable=not progress, mininterval=1.0) as bar:
        for chunk in generated_entries(ENTRY_SEED, size, batch):
            tree.append_entries(chunk)
            bar.update(len(chunk))
    append_s = time.perf_counter() - start
    t = time.perf_counter()
    root = tree.get_root()
    root_s = time.perf_counter() - t
    assert tree.get_size() == size
    tree.close()
    return {
        "size": size,
        "batch": batch,
        "seconds": append_s,
        "entries_per_s": size / append_s,
        "first_root_seconds": root_s,
        "rss_start_kib": rss_start,
        "vmhwm_kib": proc_status_kib("VmHWM"),
        "root": root.hex(),
        "note": "append_entries per batch, no root per batch; one get_root() at the end",
    }


def pymerkle_proofs(path: Path, size: int, cfg: Config) -> dict[str, Any]:
    """pymerkle in this (warm) process: one get_root() to fill its subroot cache, then warm-up."""
    rss_before = proc_status_kib("VmRSS")
    tree = open_pymerkle(path)
    try:
        assert tree.get_size() == size
        t = time.perf_counter()
        root = tree.get_root()
        first_root_s = time.perf_counter() - t
        incl, cons = proof_queries(size, cfg.warmup + cfg.samples)
        timer = time.perf_counter_ns
        out: dict[str, Any] = {"system": "pymerkle", "size": size, "root": root.hex(),
                               "first_root_seconds": first_root_s}
        # Warm: one proof per 128 leaves (pymerkle caches every subroot of width >= 128 that it
        # computes, so this fills its cache with all it will hold), then the random warm-up.
        t = time.perf_counter()
        for i in range(0, size, 128):
            tree.prove_inclusion(i + 1, size)
        out["warm_sweep_seconds"] = time.perf_counter() - t
        out["rss_growth_mib"] = ((proc_status_kib("VmRSS") or 0) - (rss_before or 0)) / 1024
        for i in incl[: cfg.warmup]:
            tree.prove_inclusion(i + 1, size)
        samples = []
        for i in incl[cfg.warmup :]:
            t = timer()
            tree.prove_inclusion(i + 1, size)
            samples.append(timer() - t)
        out["inclusion"] = latency_summary(samples)
        for a, b in cons[: cfg.warmup]:
            tree.prove_consistency(a, b)
        samples = []
        for a, b in cons[cfg.warmup :]:
            t = timer()
            tree.prove_consistency(a, b)
            samples.append(timer() - t)
        out["consistency"] = latency_summary(samples)
        info = tree.get_cache_info()
        out["cache"] = {"entries": len(tree.cache), "bytes": info.size, "hits": info.hits,
                        "misses": info.misses}
        # pymerkle's verification rate, for comparison with ours.
        from pymerkle import verify_inclusion as pm_verify  # deferred: optional, see above

        proofs = [(tree.get_leaf(i + 1), tree.prove_inclusion(i + 1, size)) for i in incl[:1000]]

        def run() -> int:
            for base, proof in proofs:
                pm_verify(base, root, proof)
            return len(proofs)

        out["verify_inclusion_per_s"] = rate(run, cfg.verify_seconds)[0]
        return out
    finally:
        tree.close()
