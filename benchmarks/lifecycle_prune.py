"""Disk reclaimed by ``notary log prune --reclaim``: a log of N receipts, rolled, pruned whole,
and its receipt and search rows reclaimed.

    .venv/bin/python -m benchmarks.lifecycle_prune                      # 1M receipts, SQLite
    .venv/bin/python -m benchmarks.lifecycle_prune --count 10000        # a quick look
    .venv/bin/python -m benchmarks.lifecycle_prune --database postgresql://…/db

Receipts are written through the real write path in process (as ``receipt_bytes``: the
sequencer, the screen, the receipt rows and their lookup keys), then the log is rolled
(``notary.serving.lifecycle.roll``), its minimum index set to its size (``prune``) and its rows
reclaimed (``notary.serving.reclaim.reclaim``, what ``--reclaim`` runs), timed.

SQLite: the size of each of the notary's receipt tables (``dbstat``) before and after, the
bytes the file then holds free for new rows (its freelist: what the next receipts reuse before
the file grows), and the file before and after a ``VACUUM`` (what returning them to the file
system would give). PostgreSQL: ``notary_receipts`` with its indexes
(``pg_total_relation_size``) before, after the delete, after ``VACUUM`` (space reusable, the
size unchanged) and after ``VACUUM FULL`` (returned). Output: a table, and JSON in
``benchmarks/results/local/lifecycle_prune.json`` (``--save``: ``benchmarks/results/``).
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

from benchmarks._common import command_line, machine_info, now_utc, result_path, table, write_json
from notary.serving.config import Settings
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import prune, roll
from notary.serving.reclaim import reclaim
from notary.serving.service import Account, Notary
from notary.serving.startup import init_data_dir, open_notary

TABLES = ("receipts", "receipt_ids", "receipt_digests", "receipt_keys_recent",
          "receipts_by_server", "receipts_by_tool", "receipts_by_server_tool")
"""The SQLite tables and indexes that hold receipt and search rows."""


async def fill(notary: Notary, count: int, concurrency: int) -> float:
    """``count`` receipts through the real write path; seconds taken."""
    account = Account("bench", None)
    await notary.store.create_api_key("bench", None, "0000000000be", b"\0" * 32)
    started = time.perf_counter()
    done = 0
    while done < count:
        wave = min(concurrency, count - done)
        await asyncio.gather(*(notary.notarize(account, "bench", "t", os.urandom(32).hex())
                               for _ in range(wave)))
        done += wave
        if sys.stderr.isatty():
            print(f"\r  {done:,}/{count:,}", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return time.perf_counter() - started


def sqlite_sizes(db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        tables = {name: int(size) for name, size in conn.execute(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name") if name in TABLES}
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0]) * page
    return {"file_bytes": db.stat().st_size, "free_bytes": free, "tables": tables,
            "rows_bytes": sum(tables.values())}


def sqlite_vacuumed(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db.stat().st_size


async def pg_size(url: str, statement: str | None = None) -> int:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        if statement is not None:
            await conn.execute(statement)
        return int(await conn.fetchval("SELECT pg_total_relation_size('notary_receipts')"))
    finally:
        await conn.close()


async def measure(count: int, concurrency: int, data: Path, database: str) -> dict[str, Any]:
    config = Settings(data=data, database=database, public_url="http://127.0.0.1:8080")
    init_data_dir(config)
    notary = await open_notary(config)
    try:
        fill_seconds = await fill(notary, count, concurrency)
        await notary.sequencer.close()
        rolled = await roll(notary.store, load_log_key(Paths(data)))
        out: dict[str, Any] = {"receipts": count, "fill_seconds": fill_seconds,
                               "store": "postgresql" if database else "sqlite"}
        db = Paths(data).db
        if database:
            out["pg_before_bytes"] = await pg_size(database)
        else:
            out["before"] = sqlite_sizes(db)
        assert rolled.frozen.final_size is not None
        await prune(notary.store, rolled.frozen.origin, rolled.frozen.final_size)
        started = time.perf_counter()
        done = await reclaim(notary.store, rolled.frozen.origin)
        out["reclaim_seconds"] = time.perf_counter() - started
        out["reclaimed_receipts"] = done.receipts
    finally:
        assert notary.log is not None
        await notary.log.close()
    if database:
        out["pg_after_delete_bytes"] = await pg_size(database)
        out["pg_after_vacuum_bytes"] = await pg_size(database, "VACUUM notary_receipts")
        out["pg_after_vacuum_full_bytes"] = await pg_size(database, "VACUUM FULL notary_receipts")
        out["reclaimed_bytes"] = out["pg_before_bytes"] - out["pg_after_vacuum_full_bytes"]
    else:
        out["after"] = sqlite_sizes(db)
        out["reclaimed_bytes"] = out["before"]["rows_bytes"] - out["after"]["rows_bytes"]
        out["vacuumed_file_bytes"] = sqlite_vacuumed(db)
    out["reclaimed_bytes_per_receipt"] = out["reclaimed_bytes"] / count
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=1_000_000, help="receipts (default 1M)")
    p.add_argument("--concurrency", type=int, default=2048,
                   help="notarize calls in flight at once (default 2048)")
    p.add_argument("--database", default="",
                   help="a PostgreSQL URL (an empty database) instead of the SQLite file")
    p.add_argument("--workdir", type=Path, help="keep the data directory here (default: temp)")
    p.add_argument("--save", action="store_true", help="write to benchmarks/results/")
    p.add_argument("--out", help="write the JSON here instead")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="lifecycle-prune-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        print(f"filling {args.count:,} receipts ...", file=sys.stderr, flush=True)
        run = asyncio.run(measure(args.count, args.concurrency, workdir / "data",
                                  args.database))
        machine = machine_info(workdir)

    mb = 1e6
    if run["store"] == "sqlite":
        before, after = run["before"], run["after"]
        rows = [[name, f"{before['tables'].get(name, 0) / mb:.1f}",
                 f"{after['tables'].get(name, 0) / mb:.1f}"] for name in TABLES]
        rows.append(["(file)", f"{before['file_bytes'] / mb:.1f}",
                     f"{after['file_bytes'] / mb:.1f} ({after['free_bytes'] / mb:.1f} free); "
                     f"{run['vacuumed_file_bytes'] / mb:.1f} after VACUUM"])
    else:
        rows = [["notary_receipts", f"{run['pg_before_bytes'] / mb:.1f}",
                 f"{run['pg_after_delete_bytes'] / mb:.1f}; {run['pg_after_vacuum_bytes'] / mb:.1f}"
                 f" after VACUUM; {run['pg_after_vacuum_full_bytes'] / mb:.1f} after VACUUM FULL"]]
    print(table(["table (MB)", "before", "after --reclaim"], rows))
    print(f"  {run['reclaimed_receipts']:,} receipts reclaimed in {run['reclaim_seconds']:.1f} s: "
          f"{run['reclaimed_bytes'] / mb:.1f} MB, {run['reclaimed_bytes_per_receipt']:.0f} B "
          "per receipt")
    path = write_json(result_path("lifecycle_prune", save=args.save, out=args.out), {
        "benchmark": "lifecycle_prune", "when": now_utc(), "command": command_line(),
        "concurrency": args.concurrency, "run": run, "machine": machine})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
