"""Phase 3: growing logs of the small and large sizes, and phase 6: their bytes on disk.

Each log grows in a child process that does nothing else, so its peak RSS (VmHWM) is the
build's own; the child is this module run as ``python -m benchmarks.ledgerbench.builds``.
A finished build found in the work directory (with its sidecar JSON) is reused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks._common import proc_status_kib, si
from benchmarks.ledgerbench import peer
from benchmarks.ledgerbench.workload import (
    BUILD_BATCH,
    ENTRY_SEED,
    ENTRY_SIZE,
    generated_entries,
    log,
    signer,
)
from ledger.log.reader import LogReader
from ledger.log.sequencer import Sequencer
from ledger.storage.sqlite import SqliteStore


async def grow_ours(path: Path, size: int, batch: int, progress: bool) -> dict[str, Any]:
    """Grow a fresh log through ``append_many``, one signed checkpoint per batch.

    ``Sequencer.append_many`` takes each batch: the same integrate, sign, transaction and tile
    hand-off to the reader as ``append``, without one awaiting task per entry (which costs more
    than the commit itself at this batch size).
    """
    rss_start = proc_status_kib("VmRSS")
    store = await SqliteStore.open(path, create=True)
    reader = LogReader(store)  # as Log.open wires it: committed tiles are offered to its cache
    seq: Sequencer[None, None] = Sequencer(store, signer(), reader=reader, max_batch=batch)
    await seq.start()
    assert seq.state.size == 0, "not an empty log"
    start = time.perf_counter()
    with tqdm(total=size, unit="entry", unit_scale=True, desc=f"ours {si(size)}",
              file=sys.stderr, disable=not progress, mininterval=1.0) as bar:
        for chunk in generated_entries(ENTRY_SEED, size, batch):
            await seq.append_many(chunk, [None] * len(chunk))
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


def build(kind: str, path: Path, size: int, progress: bool) -> dict[str, Any]:
    """Grow a log in a child process (reusing a finished one from an earlier run)."""
    sidecar = path.with_name(path.name + ".build.json")
    if path.exists() and sidecar.exists():
        info: dict[str, Any] = json.loads(sidecar.read_text())
        if info.get("size") == size:
            info["reused"] = True
            log(f"  reusing {path} ({si(size)} entries, built earlier)")
            return info
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "benchmarks.ledgerbench.builds", kind, str(path), str(size),
           str(BUILD_BATCH)]
    if not progress:
        cmd.append("--no-progress")
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True).stdout
    info = json.loads(out.strip().splitlines()[-1])
    assert isinstance(info, dict)
    sidecar.write_text(json.dumps(info))
    info["reused"] = False
    return info


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


def main(argv: list[str] | None = None) -> None:
    """The child: grow one log and print what it measured as one JSON line."""
    ap = argparse.ArgumentParser(description="grow one benchmark log (a child of ledger_bench)")
    ap.add_argument("kind", choices=("ours", "pymerkle"))
    ap.add_argument("path", type=Path)
    ap.add_argument("size", type=int)
    ap.add_argument("batch", type=int)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    progress = not args.no_progress
    if args.kind == "ours":
        info = asyncio.run(grow_ours(args.path, args.size, args.batch, progress))
    else:
        info = peer.grow_pymerkle(args.path, args.size, args.batch, progress)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
