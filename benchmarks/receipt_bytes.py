"""Bytes on disk per receipt: the notary's whole SQLite file after N receipts.

    .venv/bin/python benchmarks/receipt_bytes.py                 # 100k and 1M receipts
    .venv/bin/python benchmarks/receipt_bytes.py --counts 20000  # a quick look

Receipts are written through the real write path, in process: ``notary.serving.startup.open_notary``
on a fresh data directory, then ``Notary.notarize`` (auth aside, exactly what ``POST
/v1/tool-calls`` runs: the entry through the sequencer, the screen and the hook signing and
storing the receipt in the batch transaction, the inclusion proof of the born-complete
receipt), with ``--concurrency`` calls in flight (bounded, so batches stay the sequencer's
size). Names are the HTTP benchmark's (server ``bench``, tool ``t``) and digests random.

The size is the whole file, log tiles, entry bundles, checkpoints and the notary's tables
included: after the notary is closed and the WAL checkpointed (``wal_checkpoint(TRUNCATE)``),
and again after ``VACUUM``. The per-table split comes from SQLite's ``dbstat``. Target (issue
13): at most 350 bytes per receipt at 100k and 1M; version 1 of the layout took 622.
Output: a table, and ``benchmarks/results/receipt_bytes.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, command_line, machine_info, now_utc, table, write_json
from notary.serving.config import Settings
from notary.serving.keys import Paths
from notary.serving.service import Account
from notary.serving.startup import init_data_dir, open_notary

TARGET = 350.0
# Schema version 1 (benchmarks/docs/receipt_bytes.md): 103,282 receipts in 64.3 MB.
V1_BYTES = 622.0


async def fill(data: Path, count: int, concurrency: int) -> dict[str, float]:
    """``count`` receipts through the real write path; timings of the fill."""
    config = Settings(data=data, public_url="http://127.0.0.1:8080")
    init_data_dir(config)
    notary = await open_notary(config)
    account = Account("bench", None)
    await notary.store.create_api_key("bench", None, "0000000000be", b"\0" * 32)
    started = time.perf_counter()
    done = 0
    try:
        while done < count:
            wave = min(concurrency, count - done)
            await asyncio.gather(*(notary.notarize(account, "bench", "t", os.urandom(32).hex())
                                   for _ in range(wave)))
            done += wave
            if sys.stderr.isatty():
                print(f"\r  {done:,}/{count:,}", end="", file=sys.stderr, flush=True)
    finally:
        assert notary.log is not None
        await notary.log.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    seconds = time.perf_counter() - started
    return {"fill_seconds": seconds, "receipts_per_second": count / seconds}


def sizes(db: Path) -> dict[str, Any]:
    """The file after a WAL checkpoint, then after VACUUM, and the split by table."""
    def per_table(conn: sqlite3.Connection) -> dict[str, int]:
        return {name: int(size) for name, size in conn.execute(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")}

    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        checkpointed = db.stat().st_size
        before = per_table(conn)
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        vacuumed = db.stat().st_size
        after = per_table(conn)
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    return {"checkpointed_bytes": checkpointed, "vacuumed_bytes": vacuumed,
            "tables_checkpointed": before, "tables_vacuumed": after, "page_size": page_size}


async def measure(count: int, concurrency: int, workdir: Path) -> dict[str, Any]:
    data = workdir / f"notary-{count}"
    timing = await fill(data, count, concurrency)
    out: dict[str, Any] = {"receipts": count, **timing, **sizes(Paths(data).db)}
    out["bytes_per_receipt"] = out["checkpointed_bytes"] / count
    out["bytes_per_receipt_vacuumed"] = out["vacuumed_bytes"] / count
    out["tables_bytes_per_receipt"] = {
        name: size / count for name, size in out["tables_vacuumed"].items()}
    out["meets_target"] = out["bytes_per_receipt"] <= TARGET
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--concurrency", type=int, default=2048,
                   help="notarize calls in flight at once (default 2048)")
    p.add_argument("--workdir", type=Path, help="keep the stores here (default: a temp dir)")
    p.add_argument("--out", type=Path, default=RESULTS / "receipt_bytes.json")
    args = p.parse_args()

    runs = []
    with tempfile.TemporaryDirectory(prefix="receipt-bytes-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for count in args.counts:
            print(f"filling {count:,} receipts ...", file=sys.stderr, flush=True)
            runs.append(asyncio.run(measure(count, args.concurrency, workdir)))
        machine = machine_info(workdir)

    rows = [[f"{r['receipts']:,}", f"{r['checkpointed_bytes'] / 1e6:.1f} MB",
             f"{r['bytes_per_receipt']:.0f}", f"{r['bytes_per_receipt_vacuumed']:.0f}",
             f"{TARGET:.0f}", "yes" if r["meets_target"] else "NO",
             f"{r['receipts_per_second']:,.0f}"] for r in runs]
    print(table(["receipts", "file", "B/receipt", "B/receipt (VACUUM)", "target", "met",
                 "fill receipts/s"], rows))
    for r in runs:
        split = ", ".join(f"{name} {b:.1f}" for name, b in r["tables_bytes_per_receipt"].items()
                          if b >= 0.5)
        print(f"  {r['receipts']:,}: bytes per receipt by table (after VACUUM): {split}")
    print(f"  schema version 1 took {V1_BYTES:.0f} B/receipt")
    write_json(args.out, {"benchmark": "receipt_bytes", "when": now_utc(),
                          "command": command_line(), "target_bytes_per_receipt": TARGET,
                          "v1_bytes_per_receipt": V1_BYTES, "concurrency": args.concurrency,
                          "runs": runs, "machine": machine})
    print(f"wrote {args.out}")
    return 0 if all(r["meets_target"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
