"""A tlog-mirror on loopback: how fast it ingests, what an entry costs it, how far it lags.

1. **Ingest**: a log of ``--entries`` entries (SQLite on disk, as ``ledger`` keeps it) is pushed
   to a fresh ``ledger mirror serve`` (a subprocess, its own SQLite copy) by the mirror client
   the notary uses (``ledger.client.mirror.MirrorClient``: gzip, 32 packages per request), from
   empty to cosigned. Reported: entries per second, the mirror process's CPU per entry and its
   disk per entry, beside the origin's (the CPU this process spent appending the entries, and
   the log's database size).
2. **Lag**: ``notary serve --mirror`` and a mirror, receipts issued at a steady ``--rate`` for
   ``--seconds``; for each receipt, the time from its 201 to the first mirror checkpoint (polled
   every 20 ms at ``<mirror>/<origin hash>/checkpoint``) that covers it.

With ``--publish s3://BUCKET/PREFIX`` (or a directory) both mirrors keep their copies there
too (the AWS_* environment says where the bucket is), and cosign only what it stores: the
figures then include the bucket's writes.

    .venv/bin/python -m benchmarks.mirror_bench [--entries N] [--rate R] [--seconds S]
        [--publish s3://BUCKET/PREFIX]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks._common import (
    REPO,
    command_line,
    free_port,
    machine_info,
    now_utc,
    percentile,
    result_path,
    start_notary,
    table,
    write_json,
)
from ledger.client.http import HttpClient
from ledger.client.mirror import LogReaderSource, MirrorClient
from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import Ed25519Signer, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.cosigner.cosigner import origin_hash
from ledger.log.facade import Log
from ledger.process.keyfile import write_secret
from ledger.storage.sqlite import SqliteStore

ORIGIN = "bench.mirror/log"
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def start_mirror(key: Path, data: Path, logs: list[str], publish: str | None = None
                 ) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    args = [sys.executable, "-m", "ledger.cli.main", "mirror", "serve", "--key", str(key),
            "--listen", f"127.0.0.1:{port}", "--data", str(data), "--log-format", "json",
            "--log-level", "warning"]
    if publish is not None:
        args += ["--publish", publish]
    for spec in logs:
        args += ["--log", spec]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise RuntimeError("ledger mirror serve did not start")
    return proc, url


def mirror_key(tmp: Path) -> tuple[Path, SubtreeCosignatureSigner]:
    signer = SubtreeCosignatureSigner.generate("bench.mirror/m")
    key = tmp / "mirror.key"
    write_secret(key, signer.private_key_text())
    return key, signer


async def ingest(tmp: Path, entries: int, publish: str | None) -> dict[str, Any]:
    signer = Ed25519Signer.generate(ORIGIN)
    db = tmp / "origin.db"
    log = await Log.open(await SqliteStore.open(db, create=True), signer=signer)
    cpu0 = time.process_time()
    for start in range(0, entries, 4096):
        await log.append_many([b"bench entry %08d " % i + b"x" * 200
                               for i in range(start, min(entries, start + 4096))])
    origin_cpu = time.process_time() - cpu0
    head = await log.head(0)
    assert head is not None and head.size == entries
    key, msigner = mirror_key(tmp)
    proc, url = start_mirror(key, tmp / "mirror-ingest",
                             [f"{ORIGIN}={signer.verifier_key_text()}"],
                             None if publish is None else f"{publish.rstrip('/')}/ingest")
    try:
        async with aiohttp.ClientSession() as session:
            client = MirrorClient(url, [msigner.verifier()], HttpClient(session))
            cpu_before = cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            await client.push(head.note, LogReaderSource(log.reader))
            wall = time.perf_counter() - t0
            mirror_cpu = cpu_seconds(proc.pid) - cpu_before
    finally:
        proc.kill()
        proc.wait(10)
        await log.close()
    return {
        "entries": entries,
        "seconds": wall,
        "entries_per_second": entries / wall,
        "mirror_cpu_us_per_entry": mirror_cpu / entries * 1e6,
        "origin_append_cpu_us_per_entry": origin_cpu / entries * 1e6,
        "mirror_disk_bytes_per_entry": disk_bytes(tmp / "mirror-ingest") / entries,
        "origin_disk_bytes_per_entry": sum(p.stat().st_size
                                           for p in db.parent.glob("origin.db*")) / entries,
    }


async def lag(tmp: Path, rate: float, seconds: float, publish: str | None) -> dict[str, Any]:
    key, msigner = mirror_key(tmp)
    data = tmp / "notary"
    # The notary makes its log key on first start; the mirror must know it, so: start once,
    # read the key, stop, start the mirror, start again with --mirror.
    proc, _, _ = start_notary(data)
    proc.terminate()
    proc.wait(15)
    vkey = (data / "log.vkey").read_text().strip()
    origin = vkey.split("+", 1)[0]
    mproc, murl = start_mirror(key, tmp / "mirror-lag", [f"{origin}={vkey}"],
                               None if publish is None else f"{publish.rstrip('/')}/lag")
    nproc, nurl, api_key = start_notary(
        data, "--mirror", f"{murl}={msigner.verifier_key_text()}", "--witness-interval", "0.05")
    issued: list[tuple[int, float]] = []
    covered: dict[int, float] = {}
    try:
        async with aiohttp.ClientSession() as http:
            stop = asyncio.Event()

            async def poll() -> None:
                size = 0
                while not stop.is_set() or (issued and size <= issued[-1][0]):
                    async with http.get(f"{murl}/{origin_hash(origin)}/checkpoint") as r:
                        if r.status == 200:
                            new = parse_checkpoint_text(parse_note(await r.read()).text).size
                            now = time.perf_counter()
                            for i in range(size, new):
                                covered[i] = now
                            size = max(size, new)
                    await asyncio.sleep(0.02)

            poller = asyncio.create_task(poll())
            t0 = time.perf_counter()
            n = 0
            while time.perf_counter() < t0 + seconds:
                body = {"server": "bench", "tool": "t", "call_sha256": os.urandom(32).hex()}
                async with http.post(nurl + "/v1/tool-calls", json=body,
                                     headers={"Authorization": f"Bearer {api_key}"}) as r:
                    assert r.status == 201, await r.text()
                    issued.append(((await r.json())["ledger"]["index"], time.perf_counter()))
                n += 1
                await asyncio.sleep(max(0.0, t0 + n / rate - time.perf_counter()))
            stop.set()
            await asyncio.wait_for(poller, 60)
    finally:
        for p in (nproc, mproc):
            p.terminate()
            p.wait(15)
    lags = sorted((covered[i] - t) * 1e3 for i, t in issued)
    return {"rate": rate, "seconds": seconds, "receipts": len(issued),
            "lag_ms": {"p50": percentile(lags, 50), "p90": percentile(lags, 90),
                       "p99": percentile(lags, 99), "max": lags[-1] if lags else float("nan")}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=200_000, help="entries pushed in the ingest")
    p.add_argument("--rate", type=float, default=50.0, help="receipts per second (lag)")
    p.add_argument("--seconds", type=float, default=20.0, help="how long the steady load runs")
    p.add_argument("--publish", metavar="s3://BUCKET/PREFIX|DIR",
                   help="the mirrors keep their copies there too (cosigning only what it "
                        "stores); each run under its own PREFIX/ingest and PREFIX/lag")
    p.add_argument("--save", action="store_true",
                   help="write benchmarks/results/mirror_bench.json (the tracked figures)")
    p.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as d:
        tmp = Path(d)
        (tmp / "a").mkdir()
        (tmp / "b").mkdir()
        got = asyncio.run(ingest(tmp / "a", args.entries, args.publish))
        lagged = asyncio.run(lag(tmp / "b", args.rate, args.seconds, args.publish))
    print(table(["ingest", "value"], [
        ["entries", got["entries"]],
        ["entries/s", f"{got['entries_per_second']:.0f}"],
        ["mirror CPU µs/entry", f"{got['mirror_cpu_us_per_entry']:.1f}"],
        ["origin append CPU µs/entry", f"{got['origin_append_cpu_us_per_entry']:.1f}"],
        ["mirror disk B/entry", f"{got['mirror_disk_bytes_per_entry']:.0f}"],
        ["origin disk B/entry", f"{got['origin_disk_bytes_per_entry']:.0f}"],
    ]))
    print(table(["lag ms", "p50", "p90", "p99", "max", "n"], [[
        f"{lagged['rate']:.0f}/s", *(f"{lagged['lag_ms'].get(k, 0):.0f}"
                                     for k in ("p50", "p90", "p99", "max")),
        lagged["receipts"]]]))
    out = write_json(result_path("mirror_bench", save=args.save, out=args.out), {
        "benchmark": "mirror_bench", "date": now_utc(), "command": command_line(),
        "machine": machine_info(), "publish": args.publish, "ingest": got, "lag": lagged})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
