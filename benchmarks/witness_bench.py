"""Witness add-checkpoint latency on loopback (target p99 ≤ 10 ms).

Starts ``notary witness serve`` in a subprocess (its SQLite store in WAL mode with
``synchronous = FULL``: every accepted checkpoint is fsynced before the cosignature leaves), then
submits a growing log's checkpoints one after another over one keep-alive connection, each with
its consistency proof from the previous one, as the notary's witnessing task does. Every answer
is checked (one cosignature that verifies). Latency is measured from sending the request to
having the whole answer.

Side by side: the same requests when nothing has to be written (the same checkpoint again,
so no fsync), and the raw fsync latency of the disk under the witness's data directory (the
machine's floor for a durable answer).

    .venv/bin/python benchmarks/witness_bench.py [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks._common import (
    command_line,
    machine_info,
    now_utc,
    percentile,
    result_path,
    table,
    write_json,
)
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, parse_note
from ledger.core.witness_protocol import format_add_checkpoint, verify_cosignatures
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore

REPO = Path(__file__).resolve().parents[1]
TARGET_P99_MS = 10.0
ORIGIN = "bench.witness/log"


async def checkpoints(n: int, per_step: int) -> tuple[str, list[tuple[int, list[bytes], bytes]]]:
    """(log vkey, [(old, proof, note)]) for n successive checkpoints of a growing log."""
    signer = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=signer)
    steps = []
    old = 0
    counter = 0
    for _ in range(n):
        await asyncio.gather(*(log.append(b"entry %d" % (counter + i)) for i in range(per_step)))
        counter += per_step
        head = await log.head(0)
        assert head is not None
        proof = await log.reader.consistency_proof(old, head.size) if old else []
        steps.append((old, proof, head.note))
        old = head.size
    await log.close()
    return signer.verifier_key_text(), steps


def start_witness(key: Path, data: Path, vkey: str) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "notary.cli.main", "witness", "serve", "--key", str(key), "--log",
         f"{ORIGIN}={vkey}", "--listen", "127.0.0.1:0", "--data", str(data),
         "--log-format", "json", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit("the witness did not start")
    return proc, url


async def submit_all(url: str, bodies: list[tuple[bytes, str]], verifier: Any
                     ) -> list[float]:
    latencies = []
    async with aiohttp.ClientSession() as http:
        for body, text in bodies:
            t0 = time.perf_counter()
            async with http.post(url + "/add-checkpoint", data=body) as r:
                answer = await r.read()
                status = r.status
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                raise SystemExit(f"witness answered {status}: {answer[:200]!r}")
            assert len(verify_cosignatures(text, answer, [verifier])) == 1
    return latencies


def fsync_latencies(directory: Path, n: int) -> list[float]:
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    out = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 512)
            t0 = time.perf_counter()
            os.fsync(fd)
            out.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    return out


def summary(latencies: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies)
    return {"n": len(ms), "p50_ms": percentile(ms, 50), "p90_ms": percentile(ms, 90),
            "p99_ms": percentile(ms, 99), "max_ms": ms[-1], "mean_ms": statistics.fmean(ms)}


LOAD_BEFORE = os.getloadavg()  # the machine may be shared: record how busy it was


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--per-step", type=int, default=7, help="entries appended per checkpoint")
    p.add_argument("--save", action="store_true",
                   help="write the tracked benchmarks/results/witness_bench.json")
    p.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    args = p.parse_args()
    vkey, steps = asyncio.run(checkpoints(args.requests, args.per_step))
    with tempfile.TemporaryDirectory(prefix="witness-bench-", dir=REPO / "benchmarks") as tmp:
        work = Path(tmp)
        signer = CosignatureSigner.generate("bench.witness/w1")
        key = work / "w.key"
        key.write_text(signer.private_key_text() + "\n")
        key.chmod(0o600)
        proc, url = start_witness(key, work / "data", vkey)
        try:
            texts = [parse_note(note).text for _, _, note in steps]
            growing = [(format_add_checkpoint(old, proof, note), text)
                       for (old, proof, note), text in zip(steps, texts, strict=True)]
            grow = asyncio.run(submit_all(url, growing, signer.verifier()))
            last = steps[-1][2]
            size = int(texts[-1].split("\n")[1])
            same = [(format_add_checkpoint(size, [], last), texts[-1])] * args.requests
            again = asyncio.run(submit_all(url, same, signer.verifier()))
        finally:
            proc.terminate()
            proc.wait()
        disk = fsync_latencies(work, 1000)
    rows = []
    results = {"growing": summary(grow), "same_checkpoint": summary(again),
               "raw_fsync": summary(disk)}
    labels = {"growing": "add-checkpoint, tree grew (durable write)",
              "same_checkpoint": "add-checkpoint, same checkpoint (no write)",
              "raw_fsync": "raw fsync of 512 bytes (disk floor)"}
    for name, s in results.items():
        rows.append([labels[name], f"{s['p50_ms']:.2f} ms", f"{s['p90_ms']:.2f} ms",
                     f"{s['p99_ms']:.2f} ms", f"{s['max_ms']:.2f} ms", str(s["n"])])
    print(table(["", "p50", "p90", "p99", "max", "n"], rows))
    p99 = results["growing"]["p99_ms"]
    print(f"target p99 ≤ {TARGET_P99_MS:.0f} ms: {'met' if p99 <= TARGET_P99_MS else 'NOT met'} "
          f"({p99:.2f} ms)")
    write_json(result_path("witness_bench", save=args.save, out=args.out), {
        "benchmark": "witness_bench",
        "when": now_utc(),
        "command": command_line(),
        "loadavg_before": LOAD_BEFORE,
        "loadavg_after": os.getloadavg(),
        "machine": machine_info(REPO / "benchmarks"),
        "requests": args.requests,
        "entries_per_checkpoint": args.per_step,
        "results": results,
        "target_p99_ms": TARGET_P99_MS,
        "target_met": p99 <= TARGET_P99_MS,
    })


if __name__ == "__main__":
    main()
