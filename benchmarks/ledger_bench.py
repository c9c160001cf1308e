"""The transparency log side by side with the machine's limits and with pymerkle 7.

    .venv/bin/python -m benchmarks.ledger_bench [--quick] [--profile] [--save] [--out FILE]

One run measures, in this order (each phase is a module of :mod:`benchmarks.ledgerbench`):

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
proof path at the large size. pymerkle is GPL and optional (``pip install -e '.[bench]'``): it is
only ever imported by :mod:`benchmarks.ledgerbench.peer`, never by ledger/; without it the run
says so in one line and skips the peer. Results go to ``benchmarks/results/local/`` (untracked)
unless ``--save`` asks for the tracked ``benchmarks/results/`` file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks._common import command_line, machine_info, now_utc, result_path, si, write_json
from benchmarks.ledgerbench import peer
from benchmarks.ledgerbench.appends import combine_turns, ours_append_api, ours_commit_path
from benchmarks.ledgerbench.builds import build, disk_usage
from benchmarks.ledgerbench.limits import limit_ed25519, limit_sha256, limit_sqlite_commits
from benchmarks.ledgerbench.profiling import profile_appends, profile_proofs
from benchmarks.ledgerbench.proofs import ours_proofs, verify_rates
from benchmarks.ledgerbench.report import analyse, render, render_profile
from benchmarks.ledgerbench.workload import (
    BATCHES,
    BUILD_BATCH,
    ENTRY_SIZE,
    FULL,
    QUICK,
    Config,
    EntryPool,
    log,
)


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
    with_peer = not args.no_pymerkle
    if with_peer and not peer.available():
        log(f"pymerkle is not installed: the peer is skipped ({peer.INSTALL_HINT} to compare)")
        with_peer = False
    res["peer"] = "pymerkle 7" if with_peer else None

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
            if with_peer:
                p = work / f"append-pymerkle-{b}-{rep}.db"
                runs["pymerkle"].append(
                    peer.pymerkle_appends(p, b, cfg.append_seconds / cfg.append_turns, pool))
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
        if with_peer and (label == "small" or not args.no_pymerkle_large):
            ppath = work / f"pymerkle-{size}.db"
            log(f"building pymerkle at {si(size)} …")
            res["builds"][f"pymerkle_{label}"] = build("pymerkle", ppath, size, progress)
            res["disk"][f"pymerkle_{label}"] = disk_usage(ppath, size)
            log(f"proofs, pymerkle at {si(size)} …")
            pm = peer.pymerkle_proofs(ppath, size, cfg)
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
                    help="JSON output (default: benchmarks/results/local/ledger.json, or "
                    "ledger-quick.json with --quick; git does not track that folder)")
    ap.add_argument("--save", action="store_true",
                    help="write the tracked benchmarks/results/ledger[-quick].json instead")
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
    args = ap.parse_args()

    if args.render:
        res = json.loads(args.render.read_text())
        print(render(res, markdown=args.markdown))
        if "profile" in res:
            print()
            print(render_profile(res["profile"], markdown=args.markdown))
        return

    cfg = QUICK if args.quick else FULL
    out = result_path("ledger-quick" if args.quick else "ledger", save=args.save, out=args.out)
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
