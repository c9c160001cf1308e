#!/usr/bin/env python3
"""The transparency log side by side with the machine's limits and with pymerkle 7.

    .venv/bin/python benchmarks/ledger_bench.py [--quick] [--profile] [--out results.json]

One run measures, in this order:

1. machine limits: hashlib SHA-256 on 65-byte messages, pynacl Ed25519 signatures, and the rate of
   fsync'd SQLite commits (WAL, synchronous=FULL) on the disk that holds the work directory;
2. durable appends at batch sizes 1, 100 and 1,000 of 64-byte random entries:
   - ours through the public API: ``Sequencer.append`` with ``max_batch=N`` and N concurrent
     appends per round (each append is an awaiting task, as a request handler would be);
   - ours through the public bulk API ``Log.append_many`` (N entries, one waiter): the same
     transaction, checkpoint signature and tile writes, minus the per-caller task overhead;
   - pymerkle 7 ``SqliteTree`` with its connection switched to WAL + synchronous=FULL,
     ``append_entries(batch)`` (one transaction) then ``get_root()`` per batch;
3. building logs of the "small" and "large" sizes (1M and 10M; 100k and 300k with ``--quick``)
   in child processes that only grow the log (their peak RSS is VmHWM), through the real sequencer
   with batches of 16,384; pymerkle trees of the same entries the same way (no root per batch);
4. inclusion and consistency proof latency, warm, random indexes and size pairs, both systems;
5. inclusion (and consistency) proof verification rate with ``ledger.core.proofs``;
6. bytes on disk per entry beyond the 64-byte entry (db + wal after a TRUNCATE checkpoint).

``--profile`` adds a phase breakdown and a cProfile of the append path at batch 1,000 and of the
proof path at the large size. pymerkle is GPL: it is only ever imported here, never by ledger/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import hashlib
import io
import json
import os
import pstats
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if str(HERE.parent) not in sys.path:  # appended, so PYTHONPATH can point at another ledger/
    sys.path.append(str(HERE.parent))

from _common import (  # noqa: E402
    command_line,
    fmt_ratio,
    fmt_us,
    latency_summary,
    machine_info,
    now_utc,
    proc_status_kib,
    rate,
    si,
    table,
    write_json,
)

import ledger.reader as ledger_reader  # noqa: E402
import ledger.sequencer as ledger_sequencer  # noqa: E402
from ledger.core.hashing import fold_right, leaf_hash  # noqa: E402
from ledger.core.note import Ed25519Signer  # noqa: E402
from ledger.core.proofs import verify_consistency, verify_inclusion  # noqa: E402
from ledger.log import Log  # noqa: E402
from ledger.reader import LogReader, stack_coords  # noqa: E402
from ledger.sequencer import Sequencer  # noqa: E402
from ledger.storage.sqlite import SqliteStore, SqliteWriteTx  # noqa: E402

ENTRY_SIZE = 64
BATCHES = (1, 100, 1000)
BUILD_BATCH = 16384
ORIGIN = "bench.example/ledger"
SIGNER_SEED = hashlib.sha256(b"ledger_bench signer").digest()
ENTRY_SEED = 20240601
DEFAULT_OUT = HERE / "results" / "ledger.json"


@dataclass(frozen=True)
class Config:
    mode: str
    append_seconds: float  # per system and batch size, split over append_turns turns
    append_turns: int
    limit_seconds: float
    small: int  # the "1M" size
    large: int  # the "10M" size
    warmup: int  # proofs run before timing, per kind
    samples: int  # proofs timed, per kind
    verify_seconds: float
    profile_seconds: float


FULL = Config("full", 6.0, 3, 2.0, 1_000_000, 10_000_000, 5000, 5000, 2.0, 4.0)
QUICK = Config("quick", 0.7, 1, 0.4, 100_000, 300_000, 1000, 1000, 0.4, 1.0)


def signer() -> Ed25519Signer:
    return Ed25519Signer(ORIGIN, SIGNER_SEED)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class EntryPool:
    """A fixed pool of 65,536 random 64-byte entries handed out in order, wrapping around.

    Both systems get the identical sequence, and no time is spent making entries while timing.
    """

    SIZE = 1 << 16

    def __init__(self, seed: int = ENTRY_SEED) -> None:
        blob = random.Random(seed).randbytes(ENTRY_SIZE * self.SIZE)
        self.entries = [blob[i : i + ENTRY_SIZE] for i in range(0, len(blob), ENTRY_SIZE)]
        self.pos = 0

    def take(self, n: int) -> list[bytes]:
        if self.pos + n > self.SIZE:
            self.pos = 0
        out = self.entries[self.pos : self.pos + n]
        self.pos += n
        return out


def generated_entries(seed: int, count: int, chunk: int):  # type: ignore[no-untyped-def]
    """Deterministic unique random entries in chunks (both systems build the same trees)."""
    rng = random.Random(seed)
    done = 0
    while done < count:
        n = min(chunk, count - done)
        blob = rng.randbytes(ENTRY_SIZE * n)
        yield [blob[i : i + ENTRY_SIZE] for i in range(0, len(blob), ENTRY_SIZE)]
        done += n


# --- 1. machine limits ------------------------------------------------------------------------


def limit_sha256(seconds: float) -> float:
    msgs = [os.urandom(65) for _ in range(1000)]
    h = hashlib.sha256

    def run() -> int:
        for m in msgs:
            h(m).digest()
        return len(msgs)

    return rate(run, seconds)[0]


def limit_ed25519(seconds: float) -> float:
    import nacl.signing

    key = nacl.signing.SigningKey(SIGNER_SEED)
    msg = f"{ORIGIN}\n1000000\n{'A' * 43}=\n".encode()

    def run() -> int:
        for _ in range(100):
            key.sign(msg)
        return 100

    return rate(run, seconds)[0]


def limit_sqlite_commits(path: Path, seconds: float) -> float:
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = FULL")
        con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        row = os.urandom(64)

        def run() -> int:
            con.execute("BEGIN IMMEDIATE")
            con.execute("INSERT INTO t (v) VALUES (?)", (row,))
            con.execute("COMMIT")
            return 1

        run()
        return rate(run, seconds)[0]
    finally:
        con.close()
        for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            p.unlink(missing_ok=True)


# --- 2. appends -------------------------------------------------------------------------------


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


def open_pymerkle(path: Path) -> Any:
    from pymerkle import SqliteTree  # benchmark-only, GPL: never imported by ledger/ or notary/

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


# --- 3. building big logs (child processes) ----------------------------------------------------


async def _grow_ours(path: Path, size: int, batch: int, progress: bool) -> dict[str, Any]:
    """Grow a fresh log through ``append_many``, one signed checkpoint per batch.

    ``Sequencer.append_many`` takes each batch: the same integrate, sign, transaction and tile
    hand-off to the reader as ``append``, without one awaiting task per entry (which costs more
    than the commit itself at this batch size).
    """
    from tqdm import tqdm

    rss_start = proc_status_kib("VmRSS")
    store = await SqliteStore.open(path, create=True)
    reader = LogReader(store)  # as Log.open wires it: committed tiles are offered to its cache
    seq = Sequencer(store, signer(), reader=reader, max_batch=batch)
    await seq.start()
    assert seq.state.size == 0, "not an empty log"
    start = time.perf_counter()
    with tqdm(total=size, unit="entry", unit_scale=True, desc=f"ours {si(size)}",
              file=sys.stderr, disable=not progress, mininterval=1.0) as bar:
        for chunk in generated_entries(ENTRY_SEED, size, batch):
            await seq.append_many(chunk)
            bar.update(len(chunk))
    elapsed = time.perf_counter() - start
    assert seq.checkpoint is not None and seq.checkpoint.size == size
    root = seq.state.root()
    await seq.close()
    await store.close()
    return {
        "size": size,
        "batch": batch,
        "path": "Sequencer.append_many (integrate, sign, one transaction, reader.offer)",
        "seconds": elapsed,
        "entries_per_s": size / elapsed,
        "rss_start_kib": rss_start,
        "vmhwm_kib": proc_status_kib("VmHWM"),
        "root": root.hex(),
    }


def _grow_pymerkle(path: Path, size: int, batch: int, progress: bool) -> dict[str, Any]:
    from tqdm import tqdm

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


def build(kind: str, path: Path, size: int, progress: bool) -> dict[str, Any]:
    """Grow a log in a child process (reusing a finished one from an earlier run)."""
    sidecar = path.with_name(path.name + ".build.json")
    if path.exists() and sidecar.exists():
        info = json.loads(sidecar.read_text())
        if info.get("size") == size:
            info["reused"] = True
            log(f"  reusing {path} ({si(size)} entries, built earlier)")
            return info
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_grow", kind, str(path), str(size),
           str(BUILD_BATCH)]
    if not progress:
        cmd.append("--_no-progress")
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True).stdout
    info = json.loads(out.strip().splitlines()[-1])
    sidecar.write_text(json.dumps(info))
    info["reused"] = False
    return info


# --- 4. proofs ---------------------------------------------------------------------------------


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
    kwargs = {} if cache_tiles is None else {"cache_tiles": cache_tiles}
    lg = await Log.open(await SqliteStore.open(path), verifier=signer().verifier(), **kwargs)
    try:
        head = await lg.head(0)
        assert head is not None and head.size == size, (head, size)
        reader = lg.reader
        incl, cons = proof_queries(size, cfg.warmup + cfg.samples)
        timer = time.perf_counter_ns
        system = "ours" if cache_tiles is None else "ours, every tile cached"
        out: dict[str, Any] = {"system": system, "size": size, "cache_tiles": reader._cache_max}

        # Warm: one proof per level-0 tile (every tile has been read once, and the LRU holds as
        # many as it can), then the random warm-up proofs.
        t = time.perf_counter()
        for i in range(0, size, 256):
            await reader.inclusion_proof(i, size)
        out["warm_sweep_seconds"] = time.perf_counter() - t
        out["cached_tiles"] = len(reader._cache)
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
        span = min(size, reader._cache_max // 2 * 256)
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
        from pymerkle import verify_inclusion as pm_verify

        proofs = [(tree.get_leaf(i + 1), tree.prove_inclusion(i + 1, size)) for i in incl[:1000]]

        def run() -> int:
            for base, proof in proofs:
                pm_verify(base, root, proof)
            return len(proofs)

        out["verify_inclusion_per_s"] = rate(run, cfg.verify_seconds)[0]
        return out
    finally:
        tree.close()


# --- 5. verification ----------------------------------------------------------------------------


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


# --- 6. disk -----------------------------------------------------------------------------------


def disk_usage(path: Path, entries: int) -> dict[str, Any]:
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        con.close()
    db = path.stat().st_size
    wal_path = path.with_name(path.name + "-wal")
    wal = wal_path.stat().st_size if wal_path.exists() else 0
    total = db + wal
    return {
        "entries": entries,
        "db_bytes": db,
        "wal_bytes": wal,
        "page_size": page_size,
        "pages": pages,
        "freelist_pages": free,
        "bytes_per_entry": total / entries,
        "overhead_bytes_per_entry": (total - ENTRY_SIZE * entries) / entries,
    }


# --- profiling ------------------------------------------------------------------------------------


class Phases:
    """Wall time spent inside wrapped functions, by phase name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def sync(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t
                self.calls[name] += 1

        return wrapper

    def coro(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t
                self.calls[name] += 1

        return wrapper


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
                short = os.path.relpath(file, HERE.parent)
        rows.append({"function": f"{short}:{line}({func})", "ncalls": ncalls,
                     "tottime_s": tt, "cumtime_s": ct, "tottime_pct": 100 * tt / total})
    rows.sort(key=lambda r: -r["tottime_s"])
    return rows[:n]


async def profile_appends(path: Path, seconds: float, pool: EntryPool, batch: int = 1000
                          ) -> dict[str, Any]:
    """Where the time of Sequencer.append goes at a batch size: phases, then cProfile."""
    ph = Phases()
    saved = (ledger_sequencer.integrate, SqliteWriteTx.write, SqliteWriteTx.latest)
    ledger_sequencer.integrate = ph.sync("integrate (hashing, tiles, bundles)", saved[0])
    SqliteWriteTx.write = ph.coro("tx.write (INSERT tiles + checkpoint)", saved[1])  # type: ignore[method-assign]
    SqliteWriteTx.latest = ph.coro("tx.latest (SELECT checkpoint)", saved[2])  # type: ignore[method-assign]
    try:
        lg = await Log.open(await SqliteStore.open(path, create=True), signer=signer(),
                            max_batch=batch)
        seq = lg.sequencer
        assert seq is not None
        seq._sign = ph.sync("sign checkpoint (Ed25519 + note)", seq._sign)  # type: ignore[method-assign]
        seq._commit = ph.coro("_commit total", seq._commit)  # type: ignore[method-assign]
        lg.reader.offer = ph.sync("reader.offer (expand new tiles)", lg.reader.offer)  # type: ignore[method-assign]
        store = lg.store
        store._begin = ph.sync("BEGIN IMMEDIATE + read checkpoint",  # type: ignore[attr-defined]
                               store._begin)  # type: ignore[attr-defined]
        store._finish = ph.sync("statements + COMMIT (fsync)",  # type: ignore[attr-defined]
                                store._finish)  # type: ignore[attr-defined]
        for _ in range(2):
            await asyncio.gather(*(lg.append(e) for e in pool.take(batch)))
        ph.seconds.clear()
        ph.calls.clear()
        rounds = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            await asyncio.gather(*(lg.append(e) for e in pool.take(batch)))
            rounds += 1
        wall = time.perf_counter() - start
        entries = rounds * batch
        seconds_by_phase = dict(ph.seconds)

        prof = cProfile.Profile()
        prof.enable()
        for _ in range(rounds):
            await asyncio.gather(*(lg.append(e) for e in pool.take(batch)))
        prof.disable()
        await lg.close()
    finally:
        ledger_sequencer.integrate, SqliteWriteTx.write, SqliteWriteTx.latest = saved  # type: ignore[method-assign]

    s = seconds_by_phase
    commit = s.pop("_commit total")
    inner = sum(s.values())
    phases = [{"phase": k, "seconds": v, "us_per_entry": v / entries * 1e6,
               "pct": 100 * v / wall} for k, v in sorted(s.items(), key=lambda kv: -kv[1])]
    rest = commit - inner
    phases.append({"phase": "rest of _commit (resolve futures, bookkeeping)", "seconds": rest,
                   "us_per_entry": rest / entries * 1e6, "pct": 100 * rest / wall})
    outside = wall - commit
    phases.append({"phase": "outside _commit (append(), tasks, gather, wake-ups)",
                   "seconds": outside, "us_per_entry": outside / entries * 1e6,
                   "pct": 100 * outside / wall})
    return {"batch": batch, "entries": entries, "seconds": wall, "entries_per_s": entries / wall,
            "phases": phases, "cprofile_top": top_functions(prof)}


async def profile_proofs(path: Path, size: int, cfg: Config) -> dict[str, Any]:
    ph = Phases()
    # Coarse phases only: wrapping the small per-coordinate helpers would distort the timing
    # (the cProfile below shows them).
    names = {"ExpandedTile": "expand tile (255 node hashes)",
             "inclusion_plan": "inclusion_plan (ranges)"}
    saved = {k: getattr(ledger_reader, k) for k in names if hasattr(ledger_reader, k)}
    for k, fn in saved.items():
        setattr(ledger_reader, k, ph.sync(names[k], fn))
    try:
        lg = await Log.open(await SqliteStore.open(path), verifier=signer().verifier())
        store = lg.store
        store.read_tiles = ph.coro("store.read_tiles (aiosqlite)", store.read_tiles)  # type: ignore[method-assign]
        reader = lg.reader
        incl, _ = proof_queries(size, cfg.warmup + 2 * cfg.samples)
        for i in range(0, size, 256):  # warm as in ours_proofs
            await reader.inclusion_proof(i, size)
        for i in incl[: cfg.warmup]:
            await reader.inclusion_proof(i, size)
        ph.seconds.clear()
        ph.calls.clear()
        timed = incl[cfg.warmup : cfg.warmup + cfg.samples]
        start = time.perf_counter()
        for i in timed:
            await reader.inclusion_proof(i, size)
        wall = time.perf_counter() - start
        calls = dict(ph.calls)
        seconds_by_phase = dict(ph.seconds)
        prof = cProfile.Profile()
        prof.enable()
        for i in incl[cfg.warmup + cfg.samples :]:
            await reader.inclusion_proof(i, size)
        prof.disable()
        await lg.close()
    finally:
        for k, fn in saved.items():
            setattr(ledger_reader, k, fn)
    n = len(timed)
    phases = [{"phase": k, "seconds": v, "us_per_proof": v / n * 1e6, "calls": calls[k],
               "pct": 100 * v / wall}
              for k, v in sorted(seconds_by_phase.items(), key=lambda kv: -kv[1])]
    rest = wall - sum(seconds_by_phase.values())
    phases.append({"phase": "rest (range_coords, hashes(): tile_of, cache, tile.get, fold)",
                   "seconds": rest, "us_per_proof": rest / n * 1e6, "calls": n,
                   "pct": 100 * rest / wall})
    return {"size": size, "proofs": n, "seconds": wall, "mean_us": wall / n * 1e6,
            "phases": phases, "cprofile_top": top_functions(prof)}


# --- report ---------------------------------------------------------------------------------------


def target(name: str, measured: float | None, goal: float, *, higher: bool, unit: str,
           fmt: Callable[[float], str] = lambda x: f"{x:,.1f}") -> dict[str, Any]:
    if measured is None or measured != measured:
        return {"target": name, "measured": None, "goal": goal, "met": None, "margin": "n/a"}
    met = measured >= goal if higher else measured <= goal
    if higher:
        margin = f"{measured / goal:.2f}× the goal" if met else \
            f"missed by {100 * (1 - measured / goal):.0f}% ({fmt(measured)} of {fmt(goal)} {unit})"
    else:
        margin = f"{goal / measured:.2f}× under" if met else \
            f"missed by {100 * (measured / goal - 1):.0f}% ({fmt(measured)} vs {fmt(goal)} {unit})"
    return {"target": name, "measured": measured, "unit": unit, "goal": goal, "met": met,
            "margin": margin}


def analyse(res: dict[str, Any]) -> None:
    by = {(a["system"], a["batch"]): a for a in res["appends"]}
    sha_limit = res["limits"]["sha256_65B_hashes_per_s"] / 2
    ratios: dict[str, Any] = {"appends": {}, "proofs_small": {}, "appends_vs_sha256_limit": {}}
    for b in BATCHES:
        api = by.get(("ours: Sequencer.append", b))
        cp = by.get(("ours: Log.append_many", b))
        pm = by.get(("pymerkle 7 SqliteTree", b))
        r: dict[str, Any] = {}
        if api and pm:
            r["api_over_pymerkle"] = api["entries_per_s"] / pm["entries_per_s"]
        if cp and pm:
            r["commit_path_over_pymerkle"] = cp["entries_per_s"] / pm["entries_per_s"]
        ratios["appends"][str(b)] = r
        ratios["appends_vs_sha256_limit"][str(b)] = {
            "api": api["entries_per_s"] / sha_limit if api else None,
            "commit_path": cp["entries_per_s"] / sha_limit if cp else None,
        }
    ratios["sha256_limit_appends_per_s"] = sha_limit
    small = res["sizes"]["small"]
    ours_s = next((p for p in res["proofs"] if p["system"] == "ours" and p["size"] == small), None)
    pm_s = next((p for p in res["proofs"] if p["system"] == "pymerkle" and p["size"] == small),
                None)
    if ours_s and pm_s:
        for kind in ("inclusion", "consistency"):
            ratios["proofs_small"][kind] = {
                "median": pm_s[kind]["median_us"] / ours_s[kind]["median_us"],
                "p99": pm_s[kind]["p99_us"] / ours_s[kind]["p99_us"],
            }
    res["ratios"] = ratios

    large = res["sizes"]["large"]
    ours_l = next((p for p in res["proofs"] if p["system"] == "ours" and p["size"] == large), None)
    t = []
    api1000 = by.get(("ours: Sequencer.append", 1000))
    cp1000 = by.get(("ours: Log.append_many", 1000))
    t.append(target("appends/s, durable batches of 1,000, signed checkpoint per batch "
                    "(Sequencer.append)", api1000 and api1000["entries_per_s"], 200_000,
                    higher=True, unit="entries/s", fmt=lambda x: f"{x:,.0f}"))
    t.append(target("  same, Log.append_many (one waiter per batch)",
                    cp1000 and cp1000["entries_per_s"], 200_000, higher=True, unit="entries/s",
                    fmt=lambda x: f"{x:,.0f}"))
    for b in BATCHES:
        t.append(target(f"appends ≥ 2× pymerkle, batch {b} (Sequencer.append)",
                        ratios["appends"][str(b)].get("api_over_pymerkle"), 2.0, higher=True,
                        unit="×", fmt=lambda x: f"{x:.2f}"))
        t.append(target(f"  same, batch {b} (Log.append_many)",
                        ratios["appends"][str(b)].get("commit_path_over_pymerkle"), 2.0,
                        higher=True, unit="×", fmt=lambda x: f"{x:.2f}"))
    for kind in ("inclusion", "consistency"):
        t.append(target(f"{kind} proofs ≥ 10× pymerkle at {si(small)} (median)",
                        ratios["proofs_small"].get(kind, {}).get("median"), 10.0, higher=True,
                        unit="×", fmt=lambda x: f"{x:.1f}"))
    for kind in ("inclusion", "consistency"):
        t.append(target(f"{kind} proof median at {si(large)}, warm, random ≤ 100 µs",
                        ours_l and ours_l[kind]["median_us"], 100.0, higher=False, unit="µs"))
    big = next((p for p in res["proofs"] if p["system"] == "ours, every tile cached"
                and p["size"] == large), None)
    for kind in ("inclusion", "consistency"):
        if big:
            t.append(target(f"  {kind}, every tile cached ({big['cached_tiles']:,} tiles, "
                            f"+{big['rss_growth_mib']:.0f} MiB RSS)", big[kind]["median_us"],
                            100.0, higher=False, unit="µs"))
    v = res.get("verify")
    t.append(target("inclusion-proof verifications/s ≥ 50,000", v and v["inclusion_per_s"],
                    50_000, higher=True, unit="/s", fmt=lambda x: f"{x:,.0f}"))
    d = res["disk"].get("ours_large")
    t.append(target(f"bytes on disk per entry beyond the entry ≤ 40 (at {si(large)})",
                    d and d["overhead_bytes_per_entry"], 40.0, higher=False, unit="B"))
    rss = res["builds"].get("ours_large")
    t.append(target(f"peak RSS growing to {si(large)} ≤ 200 MB",
                    rss and rss["vmhwm_kib"] * 1024 / 1e6, 200.0, higher=False, unit="MB"))
    res["targets"] = t


def render(res: dict[str, Any], *, markdown: bool = False) -> str:
    hd = "##### " if markdown else ""
    out = []
    lim = res["limits"]
    out.append(hd + "Machine limits")
    out.append(table(["limit", "rate"], [
        ["SHA-256, 65-byte messages (hashlib)", f"{si(lim['sha256_65B_hashes_per_s'])} hashes/s"],
        ["  → appends at 2 hashes per leaf",
         f"{si(res['ratios']['sha256_limit_appends_per_s'])}/s"],
        ["Ed25519 sign (pynacl)", f"{si(lim['ed25519_signs_per_s'])} signs/s"],
        ["SQLite commit, WAL + synchronous=FULL (start / end of run)",
         f"{si(lim['sqlite_fsync_commits_per_s'])} / "
         f"{si(lim.get('sqlite_fsync_commits_per_s_at_end'))} commits/s"],
    ], markdown=markdown))
    out.append("")
    out.append(hd + f"Durable appends, {ENTRY_SIZE}-byte entries "
               "(entries/s; batches/s in brackets)")
    by = {(a["system"], a["batch"]): a for a in res["appends"]}
    rows = []
    for b in BATCHES:
        api = by.get(("ours: Sequencer.append", b))
        cp = by.get(("ours: Log.append_many", b))
        pm = by.get(("pymerkle 7 SqliteTree", b))
        r = res["ratios"]["appends"][str(b)]
        lim_r = res["ratios"]["appends_vs_sha256_limit"][str(b)]

        def cell(a: dict[str, Any] | None) -> str:
            return f"{si(a['entries_per_s'])} ({si(a['batches_per_s'])})" if a else "n/a"

        rows.append([f"{b:,}", cell(api), cell(cp), cell(pm),
                     fmt_ratio(r.get("api_over_pymerkle")),
                     fmt_ratio(r.get("commit_path_over_pymerkle")),
                     f"{100 * lim_r['api']:.1f}% / {100 * lim_r['commit_path']:.1f}%"
                     if lim_r["api"] else "n/a"])
    out.append(table(["batch", "ours append()", "ours append_many()", "pymerkle",
                      "append()/pm", "commit/pm", "of SHA-256 limit"], rows, markdown=markdown))
    out.append("")
    out.append(hd + "Proof latency, warm process, random indexes / (old, new) size pairs "
               "(median / p99)")
    rows = []
    order = {"ours": 0, "ours, every tile cached": 1, "pymerkle": 2}
    for p in sorted(res["proofs"], key=lambda p: (p["size"], order.get(p["system"], 3))):
        for kind in ("inclusion", "consistency", "inclusion_recent"):
            if kind not in p:
                continue
            s = p[kind]
            label = {"inclusion": "inclusion", "consistency": "consistency",
                     "inclusion_recent": f"inclusion, newest {si(s.get('span_entries'))}"}[kind]
            pm = next((q for q in res["proofs"] if q["size"] == p["size"]
                       and q["system"] == "pymerkle" and kind in q), None)
            ratio = ""
            if p["system"].startswith("ours") and pm:
                ratio = fmt_ratio(pm[kind]["median_us"] / s["median_us"])
            growth = p.get("rss_growth_mib")
            rows.append([si(p["size"]), p["system"], label, fmt_us(s["median_us"]),
                         fmt_us(s["p99_us"]), ratio,
                         "" if growth is None else f"+{growth:.0f} MiB"])
    out.append(table(["size", "system", "proof", "median", "p99", "pm/ours (median)",
                      "RSS after warm-up"], rows, markdown=markdown))
    out.append("")
    v = res.get("verify") or {}
    d = res["disk"]
    b = res["builds"]
    rows = [
        ["inclusion proofs verified/s (ledger.core.proofs)", f"{si(v.get('inclusion_per_s'))}/s"],
        ["consistency proofs verified/s (ledger.core.proofs)",
         f"{si(v.get('consistency_per_s'))}/s"],
    ]
    pm_small = next((p for p in res["proofs"] if p["system"] == "pymerkle"
                     and p["size"] == res["sizes"]["small"]), None)
    if pm_small:
        rows.append(["inclusion proofs verified/s (pymerkle)",
                     f"{si(pm_small['verify_inclusion_per_s'])}/s"])
    for key, label in (("ours_small", "ours"), ("ours_large", "ours"),
                       ("pymerkle_small", "pymerkle"), ("pymerkle_large", "pymerkle")):
        if key in d:
            rows.append([f"disk beyond the entry, {label} at {si(d[key]['entries'])}",
                         f"{d[key]['overhead_bytes_per_entry']:.1f} B/entry "
                         f"({d[key]['bytes_per_entry']:.1f} B total)"])
    for key, label in (("ours_small", "ours"), ("ours_large", "ours"),
                       ("pymerkle_small", "pymerkle"), ("pymerkle_large", "pymerkle")):
        if key in b:
            x = b[key]
            extra = f", first root {x['first_root_seconds']:.1f} s" if "first_root_seconds" in x \
                else ""
            rows.append([f"build {si(x['size'])} ({label}, batches of {x['batch']:,})",
                         f"{si(x['entries_per_s'])}/s, {x['seconds']:.0f} s{extra}, "
                         f"peak RSS {x['vmhwm_kib'] / 1024:.0f} MiB"])
    out.append(table(["other", "value"], rows, markdown=markdown))
    out.append("")
    out.append(hd + "Targets")
    out.append(table(["target", "measured", "met", "margin"], [
        [t["target"], "n/a" if t["measured"] is None else f"{t['measured']:,.2f} {t['unit']}",
         {True: "yes", False: "NO", None: "n/a"}[t["met"]], t["margin"]]
        for t in res["targets"]], markdown=markdown))
    return "\n".join(out)


def render_profile(prof: dict[str, Any], *, markdown: bool = False) -> str:
    hd = "##### " if markdown else ""
    out = []
    if "appends" in prof:
        a = prof["appends"]
        out.append(hd + f"Append path, Sequencer.append at batch {a['batch']:,}: {a['entries']:,} "
                   f"entries in {a['seconds']:.2f} s ({si(a['entries_per_s'])}/s), wall time "
                   f"by phase (not profiled)")
        out.append(table(["phase", "µs/entry", "% of wall"], [
            [p["phase"], f"{p['us_per_entry']:.2f}", f"{p['pct']:.1f}"] for p in a["phases"]
        ], markdown=markdown))
        out.append("")
        out.append(hd + "cProfile, top functions by own time (main thread; SQLite runs in "
                   "aiosqlite's thread, so it shows as the event loop's epoll wait)")
        out.append(table(["function", "calls", "own s", "own %"], [
            [r["function"], f"{r['ncalls']:,}", f"{r['tottime_s']:.3f}",
             f"{r['tottime_pct']:.1f}"] for r in a["cprofile_top"]], markdown=markdown))
        out.append("")
    if "proofs" in prof:
        p = prof["proofs"]
        out.append(hd + f"Proof path, inclusion proofs at {si(p['size'])} (random indexes, warm): "
                   f"{p['proofs']:,} proofs, mean {p['mean_us']:.1f} µs, wall time by phase")
        out.append(table(["phase", "µs/proof", "calls", "% of wall"], [
            [x["phase"], f"{x['us_per_proof']:.1f}", f"{x['calls']:,}", f"{x['pct']:.1f}"]
            for x in p["phases"]], markdown=markdown))
        out.append("")
        out.append(hd + "cProfile, top functions by own time")
        out.append(table(["function", "calls", "own s", "own %"], [
            [r["function"], f"{r['ncalls']:,}", f"{r['tottime_s']:.3f}",
             f"{r['tottime_pct']:.1f}"] for r in p["cprofile_top"]], markdown=markdown))
    return "\n".join(out)


# --- main -----------------------------------------------------------------------------------------


async def run(cfg: Config, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {
        "benchmark": "ledger",
        "command": command_line(),
        "started": now_utc(),
        "mode": cfg.mode,
        "config": asdict(cfg),
        "entry_size": ENTRY_SIZE,
        "build_batch": BUILD_BATCH,
        "machine": machine_info(work),
        "loadavg_start": os.getloadavg(),
        "sizes": {"small": cfg.small, "large": cfg.large},
    }
    t0 = time.perf_counter()

    log("machine limits …")
    res["limits"] = {
        "sha256_65B_hashes_per_s": limit_sha256(cfg.limit_seconds),
        "ed25519_signs_per_s": limit_ed25519(cfg.limit_seconds),
        "sqlite_fsync_commits_per_s": limit_sqlite_commits(work / "fsync.db", cfg.limit_seconds),
    }
    log(f"  SHA-256 {si(res['limits']['sha256_65B_hashes_per_s'])}/s, Ed25519 "
        f"{si(res['limits']['ed25519_signs_per_s'])}/s, SQLite commits "
        f"{si(res['limits']['sqlite_fsync_commits_per_s'])}/s")

    pool = EntryPool()
    res["appends"] = []
    for b in BATCHES:
        log(f"appends, batch {b} …")
        # The systems take turns (A B C A B C …), each turn on a fresh database, so that drift in
        # the machine's load or the disk's fsync latency hits them all alike.
        runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for rep in range(cfg.append_turns):
            for name, fn in (("api", ours_append_api), ("commit", ours_commit_path)):
                p = work / f"append-{name}-{b}-{rep}.db"
                runs[name].append(await fn(p, b, cfg.append_seconds / cfg.append_turns, pool))
            if not args.no_pymerkle:
                p = work / f"append-pymerkle-{b}-{rep}.db"
                runs["pymerkle"].append(
                    pymerkle_appends(p, b, cfg.append_seconds / cfg.append_turns, pool))
            for p in work.glob("append-*"):
                p.unlink()
        res["appends"].extend(combine_turns(turns) for turns in runs.values())

    res["builds"] = {}
    res["proofs"] = []
    res["disk"] = {}
    progress = not args.no_progress
    for label, size in (("small", cfg.small), ("large", cfg.large)):
        path = work / f"ours-{size}.db"
        log(f"building ours at {si(size)} …")
        res["builds"][f"ours_{label}"] = build("ours", path, size, progress)
        res["disk"][f"ours_{label}"] = disk_usage(path, size)
        log(f"proofs, ours at {si(size)} …")
        res["proofs"].append(await ours_proofs(path, size, cfg))
        if label == "large":
            # The same at a cache big enough for every level-0 tile: the memory-for-speed knob
            # (Log.open(cache_tiles=…)), at about the memory pymerkle's subroot cache takes.
            log(f"proofs, ours at {si(size)} with every tile cached …")
            res["proofs"].append(await ours_proofs(path, size, cfg,
                                                   cache_tiles=size // 256 + 1024))
        if not args.no_pymerkle and (label == "small" or not args.no_pymerkle_large):
            ppath = work / f"pymerkle-{size}.db"
            log(f"building pymerkle at {si(size)} …")
            res["builds"][f"pymerkle_{label}"] = build("pymerkle", ppath, size, progress)
            res["disk"][f"pymerkle_{label}"] = disk_usage(ppath, size)
            log(f"proofs, pymerkle at {si(size)} …")
            pm = pymerkle_proofs(ppath, size, cfg)
            ours_root = res["proofs"][-1]["root"]
            if pm["root"] != ours_root:
                raise SystemExit(f"roots differ at {size}: pymerkle {pm['root']} ours {ours_root}")
            res["proofs"].append(pm)
        if label == "large":
            log("verification rate …")
            res["verify"] = await verify_rates(path, size, cfg)

    if args.profile:
        log("profiling the append path at batch 1,000 …")
        prof = {"appends": await profile_appends(work / "profile-append.db",
                                                 cfg.profile_seconds, pool)}
        log(f"profiling the proof path at {si(cfg.large)} …")
        prof["proofs"] = await profile_proofs(work / f"ours-{cfg.large}.db", cfg.large, cfg)
        res["profile"] = prof
    # The disk's fsync latency drifts on a shared machine: measure it again at the end.
    res["limits"]["sqlite_fsync_commits_per_s_at_end"] = limit_sqlite_commits(
        work / "fsync.db", cfg.limit_seconds)
    res["seconds"] = time.perf_counter() - t0
    res["loadavg_end"] = os.getloadavg()
    analyse(res)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes; runs in under a minute")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"JSON output (default {DEFAULT_OUT.relative_to(HERE.parent)}, or "
                    "ledger-quick.json with --quick)")
    ap.add_argument("--profile", action="store_true",
                    help="also profile the append path (batch 1,000) and the proof path")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where the databases go (default: a fresh temporary directory, removed "
                    "afterwards); a finished build found there is reused")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--no-pymerkle", action="store_true", help="skip pymerkle entirely")
    ap.add_argument("--no-pymerkle-large", action="store_true",
                    help="skip pymerkle at the large size (10M)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--render", type=Path, metavar="JSON",
                    help="print the tables of an earlier run's JSON instead of running")
    ap.add_argument("--_grow", nargs=4, metavar=("KIND", "PATH", "SIZE", "BATCH"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--_no-progress", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args._grow:
        kind, path, size, batch = args._grow
        progress = not args._no_progress
        if kind == "ours":
            info = asyncio.run(_grow_ours(Path(path), int(size), int(batch), progress))
        else:
            info = _grow_pymerkle(Path(path), int(size), int(batch), progress)
        print(json.dumps(info))
        return

    if args.render:
        res = json.loads(args.render.read_text())
        print(render(res, markdown=args.markdown))
        if "profile" in res:
            print()
            print(render_profile(res["profile"], markdown=args.markdown))
        return

    cfg = QUICK if args.quick else FULL
    out = args.out or (DEFAULT_OUT.with_name("ledger-quick.json") if args.quick else DEFAULT_OUT)
    if args.workdir:
        work = args.workdir
        work.mkdir(parents=True, exist_ok=True)
        keep = True
    else:
        work = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
        keep = args.keep
    log(f"work directory: {work}")
    try:
        res = asyncio.run(run(cfg, work, args))
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    write_json(out, res)
    print(render(res, markdown=args.markdown))
    if "profile" in res:
        print()
        print(render_profile(res["profile"], markdown=args.markdown))
    print(f"\n{res['mode']} run, {res['seconds']:.0f} s; JSON written to {out}")


if __name__ == "__main__":
    main()
