"""RFC 9942 COSE receipts: served per second, bytes per receipt, and what the COSE signer costs
notarization (on against off, in one run).

Figures and method: benchmarks/docs/cose_receipts.md.

Two ``notary serve`` processes side by side, one with ``--cose-receipts on`` (the default) and
one with ``off``, each given the same ``--receipts`` first. Then, in ``--rounds`` alternating
turns, each is driven with notarizations (``benchmarks/_loadgen.py``, ``--connections``
keep-alive connections, ``--seconds``) while a reader asks each for a COSE receipt
``--reads-per-s`` times a second (the off one answers 404), so the "on" notary signs the roots
they ask for as a deployment would: the rates, p50s and server CPU per receipt of the two are
compared. Last, the "on" notary serves ``GET /v1/tool-calls/{id}/receipt.cose`` for the issued
receipts, round robin, on ``--connections`` connections for ``--seconds``: COSE receipts/s,
latency and server CPU per COSE receipt; and the bytes of a COSE receipt (EdDSA and ML-DSA-44)
beside the JSON receipt, and the roots signed (``notary_cose_roots_signed_total``).

    .venv/bin/python -m benchmarks.cose_receipts [--seconds 10] [--rounds 3] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks._common import (
    REPO,
    command_line,
    machine_info,
    now_utc,
    percentile,
    result_path,
    shown,
    start_notary,
    table,
    write_json,
)
from benchmarks.http_notarize import cpu_seconds
from notary.core.records import CallRecord, new_salt


def issue(url: str, key: str, n: int) -> list[str]:
    """``n`` receipts, one POST each: their ids."""
    ids = []
    for i in range(n):
        record = CallRecord(server="bench", tool="t", arguments={"i": i},
                            result={"content": []}, salt=new_salt())
        body = json.dumps({"server": "bench", "tool": "t",
                           "call_sha256": record.call_sha256()}).encode()
        req = urllib.request.Request(url + "/v1/tool-calls", data=body, method="POST", headers={
            "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            ids.append(json.loads(r.read())["id"])
    return ids


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def roots_signed(url: str) -> dict[str, float]:
    """``notary_cose_roots_signed_total`` by algorithm, from ``/metrics``."""
    _, text = fetch(url + "/metrics")
    out = {}
    for line in text.decode().splitlines():
        if line.startswith("notary_cose_roots_signed_total{"):
            name, value = line.rsplit(" ", 1)
            out[name.split('"')[1]] = float(value)
    return out


class Reader(threading.Thread):
    """Asks for a COSE receipt of one of ``ids`` ``per_s`` times a second until stopped."""

    def __init__(self, url: str, ids: list[str], per_s: float) -> None:
        super().__init__(daemon=True)
        self.url, self.ids, self.per_s = url, ids, per_s
        self.stop = threading.Event()
        self.statuses: dict[int, int] = {}

    def run(self) -> None:
        i = 0
        while not self.stop.wait(1 / self.per_s):
            status, _ = fetch(f"{self.url}/v1/tool-calls/{self.ids[i % len(self.ids)]}"
                              "/receipt.cose")
            self.statuses[status] = self.statuses.get(status, 0) + 1
            i += 1


def notarize_run(url: str, key: str, pid: int, ids: list[str], a: argparse.Namespace
                 ) -> dict[str, Any]:
    """One measured notarization run with the COSE reader beside it."""
    reader = Reader(url, ids, a.reads_per_s) if a.reads_per_s > 0 else None
    if reader is not None:
        reader.start()
    cpu0 = cpu_seconds(pid)
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks._loadgen", url + "/v1/tool-calls", "--key", key,
         "--seconds", str(a.seconds), "--warmup", str(a.warmup), "--concurrency",
         str(a.connections)], capture_output=True, text=True, check=True, cwd=REPO).stdout
    res: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    res["server_cpu_us_per_request"] = (cpu_seconds(pid) - cpu0) / max(res["completed"], 1) * 1e6
    if reader is not None:
        reader.stop.set()
        reader.join()
        res["cose_reads"] = reader.statuses
    return res


async def _get_loop(host: str, port: int, paths: list[str], offset: int, stop_at: float,
                    latencies: list[float], errors: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    i = offset
    try:
        while time.perf_counter() < stop_at:
            path = paths[i % len(paths)]
            i += 1
            start = time.perf_counter()
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
            if not head.startswith(b"HTTP/1.1 200"):
                errors.append(1)
    finally:
        writer.close()


def serve_run(url: str, pid: int, ids: list[str], a: argparse.Namespace) -> dict[str, Any]:
    """COSE receipts served per second: GETs of the issued receipts' ``receipt.cose``."""
    host, port = url.removeprefix("http://").split(":")
    paths = [f"/v1/tool-calls/{i}/receipt.cose" for i in ids]
    latencies: list[float] = []
    errors: list[int] = []

    async def drive(seconds: float) -> None:
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(*(_get_loop(host, int(port), paths, c * 7919, stop_at, latencies,
                                         errors) for c in range(a.connections)))

    asyncio.run(drive(a.warmup))
    latencies.clear()
    errors.clear()
    signed0 = roots_signed(url)
    cpu0, client0 = cpu_seconds(pid), time.process_time()
    asyncio.run(drive(a.seconds))
    served = max(len(latencies), 1)
    lat = sorted(latencies)
    signed1 = roots_signed(url)
    return {"cose_receipts_per_s": len(lat) / a.seconds, "requests": len(lat),
            "errors": len(errors), "p50_ms": percentile(lat, 50) * 1000,
            "p99_ms": percentile(lat, 99) * 1000,
            "server_cpu_us_per_receipt": (cpu_seconds(pid) - cpu0) / served * 1e6,
            "client_cpu_us_per_receipt": (time.process_time() - client0) / served * 1e6,
            "roots_signed": {k: signed1.get(k, 0) - signed0.get(k, 0) for k in signed1}}


def sizes(url: str, ids: list[str]) -> dict[str, Any]:
    """Bytes of a COSE receipt (EdDSA, ML-DSA-44) and of the JSON receipt, over ``ids``."""
    sample = ids[:: max(1, len(ids) // 50)]
    out: dict[str, Any] = {}
    for name, suffix in (("cose_eddsa", "/receipt.cose"),
                         ("cose_ml_dsa_44", "/receipt.cose?alg=ML-DSA-44"),
                         ("json_receipt_with_proof", "")):
        lengths = []
        for i in sample:
            status, body = fetch(f"{url}/v1/tool-calls/{i}{suffix}")
            assert status == 200, (status, body[:200])
            lengths.append(len(body))
        out[name] = {"mean": statistics.fmean(lengths), "min": min(lengths),
                     "max": max(lengths)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=10.0, help="each measured run")
    p.add_argument("--warmup", type=float, default=2.0, help="before each measured run")
    p.add_argument("--rounds", type=int, default=3, help="alternating on/off notarization runs")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--receipts", type=int, default=1000,
                   help="receipts issued first; the COSE receipts are theirs")
    p.add_argument("--reads-per-s", type=float, default=5.0,
                   help="COSE receipts asked for while notarizing (0: none)")
    p.add_argument("--save", action="store_true",
                   help="write benchmarks/results/cose_receipts.json (else results/local/)")
    p.add_argument("--out", help="write the JSON here instead")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="cose-bench-") as tmp:
        notaries = {}
        for mode in ("on", "off"):
            proc, url, key = start_notary(Path(tmp) / mode, "--cose-receipts", mode)
            notaries[mode] = (proc, url, key)
        try:
            ids = {mode: issue(url, key, a.receipts) for mode, (_, url, key) in notaries.items()}
            runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
            for r in range(a.rounds):
                for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                    proc, url, key = notaries[mode]
                    runs[mode].append(notarize_run(url, key, proc.pid, ids[mode], a))
            proc, url, _ = notaries["on"]
            serve = serve_run(url, proc.pid, ids["on"], a)
            size = sizes(url, ids["on"])
            total_signed = roots_signed(url)
        finally:
            for proc, _, _ in notaries.values():
                proc.terminate()
                proc.wait(timeout=30)

    def median(mode: str, field: str) -> float:
        return float(statistics.median(float(run[field]) for run in runs[mode]))

    notarize: dict[str, dict[str, Any]] = {mode: {"receipts_per_s": median(mode, "requests_per_s"),
                       "p50_ms": median(mode, "p50_ms"), "p99_ms": median(mode, "p99_ms"),
                       "server_cpu_us_per_receipt": median(mode, "server_cpu_us_per_request"),
                       "runs": runs[mode]} for mode in ("on", "off")}
    ratio = median("on", "requests_per_s") / median("off", "requests_per_s")
    print(table(["notarization", "receipts/s", "p50 ms", "p99 ms", "server CPU µs/receipt"], [
        [f"COSE signer {mode}", f"{n['receipts_per_s']:,.0f}", f"{n['p50_ms']:.2f}",
         f"{n['p99_ms']:.2f}", f"{n['server_cpu_us_per_receipt']:.0f}"]
        for mode, n in notarize.items()]))
    print(f"on / off: {ratio:.3f} (median of {a.rounds} alternating runs each, "
          f"{a.connections} connections, {a.reads_per_s:g} COSE reads/s)\n")
    print(table(["serving receipt.cose", "value"], [
        ["COSE receipts/s", f"{serve['cose_receipts_per_s']:,.0f}"],
        ["p50 / p99 ms", f"{serve['p50_ms']:.2f} / {serve['p99_ms']:.2f}"],
        ["server CPU µs per COSE receipt", f"{serve['server_cpu_us_per_receipt']:.0f}"],
        ["roots signed while serving", json.dumps(serve["roots_signed"])],
        ["errors", serve["errors"]],
    ]))
    print()
    print(table(["bytes per receipt", "mean", "min", "max"], [
        [name, f"{s['mean']:.0f}", s["min"], s["max"]] for name, s in size.items()]))
    out = write_json(result_path("cose_receipts", save=a.save, out=a.out), {
        "benchmark": "cose_receipts", "date": now_utc(), "command": command_line(),
        "machine": machine_info(tmp), "load_average": list(os.getloadavg()),
        "settings": {"seconds": a.seconds, "warmup": a.warmup, "rounds": a.rounds,
                     "connections": a.connections, "receipts": a.receipts,
                     "reads_per_s": a.reads_per_s},
        "notarize": notarize, "on_over_off": ratio, "serve": serve, "bytes": size,
        "roots_signed_total": total_signed,
    })
    print(f"\nwrote {shown(out)}")


if __name__ == "__main__":
    main()
