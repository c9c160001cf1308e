"""Sustained receipts/s and latency to a born-complete receipt, over HTTP on loopback.

In one run, side by side: ``notary serve`` (SQLite, durable group commit, every response a signed
receipt with its inclusion proof and checkpoint) and a bare aiohttp handler (the framework's
ceiling on this machine), each driven by the same load generator in its own process.

    .venv/bin/python benchmarks/http_notarize.py [--seconds 10] [--concurrency 64] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks._common import (
    command_line,
    free_port,
    machine_info,
    now_utc,
    result_path,
    start_notary,
    table,
    write_json,
)

HERE = Path(__file__).resolve().parent


def wait_healthy(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not become healthy")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process: a figure that other load on the machine barely moves."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadgen(url: str, key: str | None, seconds: float, concurrency: int, server_pid: int
            ) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "_loadgen.py"), url, "--seconds", str(seconds),
           "--concurrency", str(concurrency), "--warmup", "0"]
    if key:
        cmd += ["--key", key]
    before = cpu_seconds(server_pid)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    res = dict(json.loads(out.strip().splitlines()[-1]))
    used = cpu_seconds(server_pid) - before
    res["server_cpu_us_per_request"] = used / max(res["requests"], 1) * 1e6
    return res


def bench_bare(seconds: float, concurrency: int) -> dict[str, Any]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "_bare_aiohttp.py"), str(port)])
    try:
        wait_healthy(port, proc)
        return loadgen(f"http://127.0.0.1:{port}/v1/tool-calls", None, seconds, concurrency,
                       proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def bench_notary(seconds: float, concurrency: int, workdir: Path) -> dict[str, Any]:
    proc, url, key = start_notary(workdir / "notary-data")
    try:
        res = loadgen(url + "/v1/tool-calls", key, seconds, concurrency, proc.pid)
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            metrics = r.read().decode()
        res["batches"] = _metric(metrics, "ledger_batch_size_count")
        res["entries"] = _metric(metrics, "ledger_batch_size_sum")
        return res
    finally:
        proc.terminate()
        proc.wait(30)


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--quick", action="store_true", help="3 s per target")
    p.add_argument("--save", action="store_true",
                   help="write the tracked benchmarks/results/http_notarize.json")
    p.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    a = p.parse_args()
    seconds = 3 if a.quick else a.seconds
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        bare = bench_bare(seconds, a.concurrency)
        notary = bench_notary(seconds, a.concurrency, Path(tmp))
    ratio = notary["requests_per_s"] / bare["requests_per_s"]
    rows = [
        [name, f"{r['requests_per_s']:.0f}", f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}",
         f"{r['max_ms']:.1f}", r["errors"], f"{r['server_cpu_us_per_request']:.0f}",
         f"{r['requests_per_s'] / bare['requests_per_s']:.2f}"]
        for name, r in (("bare aiohttp handler", bare), ("notary: born-complete receipt", notary))
    ]
    print(table(["target", "req/s", "p50 ms", "p99 ms", "max ms", "errors", "server CPU µs/req",
                 "vs bare"], rows))
    if notary.get("batches"):
        print(f"notary batches: {notary['batches']:.0f}, mean batch "
              f"{notary['entries'] / notary['batches']:.1f} entries")
    result = {"benchmark": "http_notarize", "when": now_utc(), "command": command_line(),
              "machine": machine_info(), "seconds": seconds, "concurrency": a.concurrency,
              "bare_aiohttp": bare, "notary": notary, "notary_vs_bare": ratio,
              "targets": {"receipts_per_s": 3000, "p99_ms": 50, "errors": 0, "vs_bare": 0.4}}
    path = write_json(result_path("http_notarize", save=a.save, out=a.out), result)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
