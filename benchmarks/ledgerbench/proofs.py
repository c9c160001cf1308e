"""Phases 4 and 5: proof latency (warm, random indexes and size pairs) and verification rate.

Latency goes through ``LogReader`` as ``Log.open`` wires it; verification through
``ledger.core.proofs``, with the leaf hash given.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from benchmarks._common import latency_summary, proc_status_kib, rate
from benchmarks.ledgerbench.workload import Config, signer
from ledger.core.hashing import fold_right, leaf_hash
from ledger.core.proofs import verify_consistency, verify_inclusion
from ledger.log.facade import Log
from ledger.log.reader import stack_coords
from ledger.storage.sqlite import SqliteStore


def proof_queries(size: int, n: int) -> tuple[list[int], list[tuple[int, int]]]:
    """Random leaf indexes, and random (old, new) size pairs with 0 < old < new <= size."""
    rng = random.Random(f"proofs {size}")
    incl = [rng.randrange(size) for _ in range(n)]
    cons = []
    for _ in range(n):
        old = rng.randrange(1, size)
        cons.append((old, rng.randrange(old + 1, size + 1)))
    return incl, cons


async def ours_proofs(path: Path, size: int, cfg: Config, cache_tiles: int | None = None
                      ) -> dict[str, Any]:
    """Proof latency through LogReader (Log.open's default cache unless ``cache_tiles``)."""
    rss_before = proc_status_kib("VmRSS")
    kwargs: dict[str, Any] = {} if cache_tiles is None else {"cache_tiles": cache_tiles}
    lg = await Log.open(await SqliteStore.open(path), verifier=signer().verifier(), **kwargs)
    try:
        head = await lg.head(0)
        assert head is not None and head.size == size, (head, size)
        reader = lg.reader
        incl, cons = proof_queries(size, cfg.warmup + cfg.samples)
        timer = time.perf_counter_ns
        system = "ours" if cache_tiles is None else "ours, every tile cached"
        out: dict[str, Any] = {"system": system, "size": size,
                               "cache_tiles": reader.cache_info().tiles_max}

        # Warm: one proof per level-0 tile (every tile has been read once, and the LRU holds as
        # many as it can), then the random warm-up proofs.
        t = time.perf_counter()
        for i in range(0, size, 256):
            await reader.inclusion_proof(i, size)
        out["warm_sweep_seconds"] = time.perf_counter() - t
        out["cached_tiles"] = reader.cache_info().tiles
        out["rss_growth_mib"] = ((proc_status_kib("VmRSS") or 0) - (rss_before or 0)) / 1024
        for i in incl[: cfg.warmup]:
            await reader.inclusion_proof(i, size)
        samples = []
        for i in incl[cfg.warmup :]:
            t = timer()
            await reader.inclusion_proof(i, size)
            samples.append(timer() - t)
        out["inclusion"] = latency_summary(samples)

        for a, b in cons[: cfg.warmup]:
            await reader.consistency_proof(a, b)
        samples = []
        for a, b in cons[cfg.warmup :]:
            t = timer()
            await reader.consistency_proof(a, b)
            samples.append(timer() - t)
        out["consistency"] = latency_summary(samples)

        # Proofs for recent entries (the notary's case: a receipt for a call just logged), whose
        # tiles the LRU holds: the newest cache_tiles/2 tiles' worth of entries.
        span = min(size, reader.cache_info().tiles_max // 2 * 256)
        rng = random.Random(f"recent {size}")
        recent = [size - 1 - rng.randrange(span) for _ in range(cfg.warmup + cfg.samples)]
        for i in range(size - span, size, 256):
            await reader.inclusion_proof(i, size)
        for i in recent[: cfg.warmup]:
            await reader.inclusion_proof(i, size)
        samples = []
        for i in recent[cfg.warmup :]:
            t = timer()
            await reader.inclusion_proof(i, size)
            samples.append(timer() - t)
        out["inclusion_recent"] = latency_summary(samples)
        out["inclusion_recent"]["span_entries"] = span

        # Correctness spot check (not timed): proofs verify against the signed root.
        root = head.checkpoint.root_hash
        for i in incl[:50]:
            [entry] = await reader.entries(i, i + 1)
            verify_inclusion(i, size, leaf_hash(entry), await reader.inclusion_proof(i, size), root)
        out["root"] = root.hex()
        return out
    finally:
        await lg.close()


async def verify_rates(path: Path, size: int, cfg: Config) -> dict[str, Any]:
    lg = await Log.open(await SqliteStore.open(path), verifier=signer().verifier())
    try:
        head = await lg.head(0)
        assert head is not None
        root = head.checkpoint.root_hash
        incl, cons = proof_queries(size, 1000)
        items = []
        for i in incl:
            [entry] = await lg.reader.entries(i, i + 1)
            items.append((i, leaf_hash(entry), await lg.reader.inclusion_proof(i, size)))
        # Consistency: an old root is the fold of the compact range's subtree hashes at that size.
        cons_items = []
        for a, _ in cons[:200]:
            old_root = fold_right(list((await lg.reader.hashes(stack_coords(a), size)).values()))
            cons_items.append((a, old_root, await lg.reader.consistency_proof(a, size)))
    finally:
        await lg.close()

    def run_incl() -> int:
        for i, leaf, proof in items:
            verify_inclusion(i, size, leaf, proof, root)
        return len(items)

    def run_cons() -> int:
        for a, old_root, proof in cons_items:
            verify_consistency(a, size, old_root, root, proof)
        return len(cons_items)

    return {
        "size": size,
        "inclusion_per_s": rate(run_incl, cfg.verify_seconds)[0],
        "consistency_per_s": rate(run_cons, cfg.verify_seconds)[0],
        "mean_inclusion_proof_hashes": sum(len(p) for _, _, p in items) / len(items),
        "note": "verify_inclusion(index, size, leaf_hash, proof, root) with the leaf hash given",
    }
