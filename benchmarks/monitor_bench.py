"""Monitor audit rate: download and re-hash a served log of 1M entries (target ≥ 300,000/s).

1. Builds a log of N rs-tool-call/1 entries (default 1,000,000) through the real ledger
   (``Log``/``Sequencer`` over SQLite, big batches) in a directory ``ledger serve`` can read;
2. serves it with ``ledger serve`` in a subprocess on 127.0.0.1 (the tlog-tiles and JSON API
   a notary serves);
3. runs the monitor's first, full audit (``notary monitor --audit`` does the same) in this
   process: every entry bundle and hash tile is downloaded, every tile recomputed and compared,
   and the root matched against the signed checkpoint.

Side by side, for the machine's limits: the pure re-hashing rate of the same entries
(``ledger.core.compact.integrate``, no I/O), and the download rate of the same tiles without any
hashing. The table is printed and the figures written to benchmarks/results/monitor_bench.json.

    .venv/bin/python benchmarks/monitor_bench.py [--entries N] [--data DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks._common import (
    command_line,
    machine_info,
    now_utc,
    result_path,
    si,
    table,
    write_json,
)
from ledger.client.http import HttpClient
from ledger.client.tiles import LogSource, tile_at
from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.compact import TreeState, decode_bundle, integrate
from ledger.core.note import Ed25519Signer, parse_note
from ledger.core.tiles import ENTRIES_LEVEL, TILE_WIDTH
from ledger.log.facade import Log
from ledger.monitor.audit import audit_range
from ledger.process.keyfile import write_secret
from ledger.storage.sqlite import SqliteStore
from notary.core.entry import LogEntry
from notary.core.ids import format_issued_at, new_receipt_id

REPO = Path(__file__).resolve().parents[1]
TARGET = 300_000
ORIGIN = "bench.monitor/log"
SERVERS = ("weather", "search", "files", "mail")


def make_entries(n: int) -> list[bytes]:
    """N valid, distinct rs-tool-call/1 entries, fast: fixed fields spliced into templates."""
    now = format_issued_at(datetime.now(UTC))
    templates = []
    for server in SERVERS:
        e = LogEntry(id=new_receipt_id(), server=server, tool="call", call_sha256=b"\xab" * 32,
                     issued_at=now)
        enc = e.encode()
        templates.append((enc, enc.index(e.id.encode()), enc.index(b"\xab" * 32)))
    out = []
    rnd = os.urandom(32 * n)
    for i in range(n):
        enc, id_at, sha_at = templates[i % len(templates)]
        rid = b"tc_" + f"{i:019d}".encode() + b"AAA"  # 22 base64url characters after tc_
        digest = rnd[32 * i : 32 * i + 32]
        out.append(enc[:id_at] + rid + enc[id_at + 25 : sha_at] + digest + enc[sha_at + 32 :])
    return out


async def build(directory: Path, entries: list[bytes], batch: int = 65536) -> str:
    signer = Ed25519Signer.generate(ORIGIN)
    directory.mkdir(parents=True, exist_ok=True)
    write_secret(directory / "log.key", signer.private_key_text())
    (directory / "log.vkey").write_text(signer.verifier_key_text() + "\n")
    store = await SqliteStore.open(directory / "log.db", create=True)
    log = await Log.open(store, signer=signer, max_batch=batch)
    # Tens of thousands of waiting appends are live objects: without this, the cyclic garbage
    # collector rescans them all over and over, and the build takes minutes instead of seconds.
    gc.disable()
    try:
        for i in range(0, len(entries), batch):
            await asyncio.gather(*(log.append(e) for e in entries[i : i + batch]))
    finally:
        gc.enable()
        await log.close()
    return signer.verifier_key_text()


def serve(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "serve", str(directory), "--listen",
         "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit("ledger serve did not start")
    return proc, url


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def audit(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session:
        source = LogSource(url, HttpClient(session))
        note = await source.checkpoint()
        cp = parse_checkpoint_text(parse_note(note).text)
        seen = [0]

        def count(first: int, entries: Any) -> None:
            seen[0] += len(entries)

        cpu0 = time.process_time()
        try:
            result = await audit_range(source, TreeState(), cp, on_entries=count)
        finally:
            await source.close()
        cpu = time.process_time() - cpu0
    assert seen[0] == cp.size == result.entries
    return {"entries": result.entries, "seconds": result.seconds,
            "entries_per_s": result.entries / result.seconds, "tiles_compared": result.tiles,
            "requests": result.requests, "bytes": result.bytes,
            "hashing_seconds": result.stats["hashing_seconds"], "monitor_cpu_seconds": cpu}


async def download_only(url: str, size: int) -> dict[str, Any]:
    """The same bundles and level-0 tiles, fetched as the audit fetches them, with no hashing."""
    async with aiohttp.ClientSession() as session:
        source = LogSource(url, HttpClient(session))
        bundles = -(-size // TILE_WIDTH)
        t0 = time.perf_counter()
        total = 0
        try:
            for start in range(0, bundles, 32):
                ns = range(start, min(start + 32, bundles))
                got = await source.tiles([tile_at(ENTRIES_LEVEL, n, size) for n in ns] +
                                         [tile_at(0, n, size) for n in ns])
                total += sum(len(g) for g in got)
        finally:
            await source.close()
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "entries_per_s": size / seconds, "bytes": total,
            "requests": 2 * bundles}


def rehash_only(entries: list[bytes]) -> dict[str, Any]:
    """ledger.core.compact.integrate over the entries in 16,384-entry chunks, plus bundle
    decoding."""
    bundles = integrate(TreeState(), entries).tiles  # encoded bundles, to decode as the audit does
    blobs = [bundles[(ENTRIES_LEVEL, n)] for n in range(-(-len(entries) // TILE_WIDTH))]
    t0 = time.perf_counter()
    state = TreeState()
    for i in range(0, len(blobs), 64):
        chunk = [e for b in blobs[i : i + 64] for e in decode_bundle(b)]
        state = integrate(state, chunk).state
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "entries_per_s": len(entries) / seconds}


LOAD_BEFORE = os.getloadavg()  # the machine may be shared: record how busy it was


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=1_000_000)
    p.add_argument("--data", type=Path, help="keep the built log here (reused if present)")
    p.add_argument("--runs", type=int, default=3, help="audit runs (best and all reported)")
    p.add_argument("--save", action="store_true",
                   help="write the tracked benchmarks/results/monitor_bench.json")
    p.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    args = p.parse_args()
    tmp = None
    directory = args.data
    if directory is None:
        tmp = tempfile.mkdtemp(prefix="monitor-bench-")
        directory = Path(tmp) / "log"
    entries = make_entries(args.entries)
    built_in = None
    if not (directory / "log.db").exists():
        t0 = time.perf_counter()
        asyncio.run(build(directory, entries))
        built_in = time.perf_counter() - t0
        print(f"built {args.entries} entries in {built_in:.1f}s", file=sys.stderr)
    proc, url = serve(directory)
    try:
        runs = []
        for _ in range(args.runs):
            cpu0 = cpu_seconds(proc.pid)
            result = asyncio.run(audit(url))
            result["server_cpu_seconds"] = cpu_seconds(proc.pid) - cpu0
            runs.append(result)
        fetch = asyncio.run(download_only(url, args.entries))
    finally:
        proc.terminate()
        proc.wait()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    hashing = rehash_only(entries)
    best = max(runs, key=lambda r: r["entries_per_s"])
    rows = [
        ["monitor audit (download + recompute + compare)", si(best["entries_per_s"]),
         f"{best['seconds']:.2f} s", f"{best['requests']}", f"{best['bytes'] / 1e6:.0f} MB"],
        ["  download only (same tiles, no hashing)", si(fetch["entries_per_s"]),
         f"{fetch['seconds']:.2f} s", f"{fetch['requests']}", f"{fetch['bytes'] / 1e6:.0f} MB"],
        ["  re-hash only (integrate, no I/O)", si(hashing["entries_per_s"]),
         f"{hashing['seconds']:.2f} s", "-", "-"],
    ]
    print(table(["", "entries/s", "time", "requests", "bytes"], rows))
    verdict = "met" if best["entries_per_s"] >= TARGET else "NOT met"
    median = statistics.median(r["entries_per_s"] for r in runs)
    print(f"target ≥ {si(TARGET)} entries/s: {verdict} (best {si(best['entries_per_s'])}/s, "
          f"median {si(median)}/s; all runs: "
          f"{', '.join(si(r['entries_per_s']) for r in runs)})")
    write_json(result_path("monitor_bench", save=args.save, out=args.out), {
        "benchmark": "monitor_bench",
        "when": now_utc(),
        "command": command_line(),
        "loadavg_before": LOAD_BEFORE,
        "loadavg_after": os.getloadavg(),
        "machine": machine_info(directory.parent if directory.parent.exists() else "."),
        "entries": args.entries,
        "build_seconds": built_in,
        "audit_runs": runs,
        "audit_best": best,
        "audit_median_entries_per_s": median,
        "download_only": fetch,
        "rehash_only": hashing,
        "target_entries_per_s": TARGET,
        "target_met": best["entries_per_s"] >= TARGET,
    })


if __name__ == "__main__":
    main()
