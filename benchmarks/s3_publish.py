"""Publishing to an S3 bucket (``notary serve --publish s3://…``): lag, cost, overhead, catch-up.

Against a real object store on loopback (SeaweedFS, ``weed server -s3``, as the tests start it):

1. **Lag and cost**, for each of ``--rates``: ``notary serve --publish s3://bucket/rate-R``
   while receipts are issued at R per second (open loop) for ``--seconds``; for each receipt,
   the time from its 201 to the first bucket checkpoint that covers it (polled every 20 ms,
   anonymous GET, as a reader would), p50/p99; then objects and bytes in the bucket per entry
   and the S3 requests per second the notary made (``ledger_publish_requests_total``).
2. **Overhead**: the closed-loop load generator (``benchmarks/_loadgen.py``) against a notary
   without ``--publish`` and one with ``--publish s3://``, ``--rounds`` times, the order
   alternating: the medians of receipts per second, of the notary's CPU a receipt and of the
   object store's, and their ratios.
3. **Catch-up**: the bucket is down (the SeaweedFS process killed) for ``--down`` seconds while
   receipts go on at ``--catchup-rate``; then it starts again, and the time until the bucket's
   checkpoint covers every receipt issued is reported.

    .venv/bin/python -m benchmarks.s3_publish [--rates 100,1000,5000] [--seconds 20]
        [--throughput-seconds 20] [--down 60] [--catchup-rate 100]
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
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks._common import (
    REPO,
    command_line,
    machine_info,
    now_utc,
    percentile,
    result_path,
    start_notary,
    table,
    write_json,
)
from benchmarks.http_notarize import cpu_seconds
from tests.seaweed import Seaweed

_IN_FLIGHT = 256  # open-loop requests outstanding at most (beyond that the notary is the limit)


def scrape(url: str, name: str) -> float:
    """The sum of a metric's series at ``url``/metrics (0 when absent)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def checkpoint_size(body: bytes) -> int:
    return int(body.split(b"\n")[1])


async def issue_at(http: aiohttp.ClientSession, url: str, key: str, rate: float,
                   seconds: float) -> list[tuple[int, float]]:
    """Receipts at ``rate`` per second for ``seconds``: (log index, time of its 201) each."""
    issued: list[tuple[int, float]] = []
    room = asyncio.Semaphore(_IN_FLIGHT)

    async def one() -> None:
        body = {"server": "bench", "tool": "t", "call_sha256": os.urandom(32).hex()}
        try:
            async with http.post(url + "/v1/tool-calls", json=body,
                                 headers={"Authorization": f"Bearer {key}"}) as r:
                if r.status == 201:
                    issued.append(((await r.json())["ledger"]["index"], time.perf_counter()))
        finally:
            room.release()

    tasks = []
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() < t0 + seconds:
        await room.acquire()
        tasks.append(asyncio.create_task(one()))
        n += 1
        await asyncio.sleep(max(0.0, t0 + n / rate - time.perf_counter()))
    await asyncio.gather(*tasks)
    return issued


async def watch(http: aiohttp.ClientSession, url: str, covered: dict[int, float],
                stop: asyncio.Event, until: list[int]) -> None:
    """Poll the bucket's checkpoint; ``covered[i]``: when entry i was first covered. Ends once
    ``stop`` is set and the checkpoint reaches ``until[0]``."""
    size = 0
    while not (stop.is_set() and size >= until[0]):
        try:
            async with http.get(url) as r:
                if r.status == 200:
                    new = checkpoint_size(await r.read())
                    now = time.perf_counter()
                    for i in range(size, new):
                        covered[i] = now
                    size = max(size, new)
        except aiohttp.ClientError:
            pass  # the bucket is down (catch-up phase)
        await asyncio.sleep(0.02)


async def lag_and_cost(tmp: Path, weed: Seaweed, rate: float, seconds: float) -> dict[str, Any]:
    prefix = f"rate-{rate:g}"
    proc, url, key = start_notary(tmp / f"notary-{prefix}", "--publish",
                                  f"s3://{weed.bucket}/{prefix}", env=weed.env())
    try:
        requests0 = scrape(url, "ledger_publish_requests_total")
        covered: dict[int, float] = {}
        async with aiohttp.ClientSession() as http:
            stop, until = asyncio.Event(), [0]
            poller = asyncio.create_task(
                watch(http, f"{weed.public_url}/{prefix}/checkpoint", covered, stop, until))
            t0 = time.perf_counter()
            issued = await issue_at(http, url, key, rate, seconds)
            until[0] = max((i for i, _ in issued), default=-1) + 1
            stop.set()
            await asyncio.wait_for(poller, 300)
            elapsed = time.perf_counter() - t0
        requests = scrape(url, "ledger_publish_requests_total") - requests0
    finally:
        proc.terminate()
        proc.wait(30)
    lags = sorted((covered[i] - t) * 1e3 for i, t in issued)
    objects = await asyncio.to_thread(weed.objects, prefix + "/")
    entries = max(len(issued), 1)
    return {"rate": rate, "seconds": seconds, "receipts": len(issued),
            "receipts_per_second": len(issued) / seconds,
            "lag_ms": {"p50": percentile(lags, 50), "p99": percentile(lags, 99),
                       "max": lags[-1] if lags else float("nan")},
            "objects": len(objects), "objects_per_entry": len(objects) / entries,
            "bytes_per_entry": sum(objects.values()) / entries,
            "s3_requests": requests, "s3_requests_per_second": requests / elapsed}


def loadgen(url: str, key: str, seconds: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks._loadgen", url, "--seconds", str(seconds),
           "--concurrency", "32", "--warmup", "1", "--key", key]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def overhead(tmp: Path, weed: Seaweed, seconds: float, rounds: int) -> dict[str, Any]:
    """Receipts/s without and with ``--publish s3://``, in ``rounds`` rounds whose order
    alternates (this VM's speed drifts within minutes), medians reported; and what each
    receipt cost in CPU: the notary's own (its publishing included) and the object store's
    (which shares the cores here), from ``/proc``: figures other load barely moves."""
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    for n in range(rounds):
        kinds = {"without": (), "with": ("--publish", f"s3://{weed.bucket}/load-{n}")}
        for name in (("without", "with") if n % 2 == 0 else ("with", "without")):
            runs[name].append(_one_load(tmp / f"notary-load-{name}-{n}", weed, kinds[name],
                                        seconds))
    out: dict[str, Any] = {"rounds": runs}
    for name, got in runs.items():
        out[name] = {k: statistics.median(r[k] for r in got) for k in (
            "requests_per_s", "notary_cpu_us_per_receipt", "store_cpu_us_per_receipt")}
    out["ratio"] = out["with"]["requests_per_s"] / max(out["without"]["requests_per_s"], 1e-9)
    out["notary_cpu_ratio"] = (out["with"]["notary_cpu_us_per_receipt"]
                               / max(out["without"]["notary_cpu_us_per_receipt"], 1e-9))
    return out


def _one_load(data: Path, weed: Seaweed, extra: tuple[str, ...], seconds: float
              ) -> dict[str, Any]:
    proc, url, key = start_notary(data, *extra, env=weed.env())
    store_pid = weed.proc.pid if weed.proc is not None else None
    try:
        notary_cpu, store_cpu = cpu_seconds(proc.pid), _store_cpu(store_pid)
        got = loadgen(url, key, seconds)
        done = max(got["completed"], 1)
        got["notary_cpu_us_per_receipt"] = (cpu_seconds(proc.pid) - notary_cpu) / done * 1e6
        got["store_cpu_us_per_receipt"] = (_store_cpu(store_pid) - store_cpu) / done * 1e6
        return got
    finally:
        proc.terminate()
        proc.wait(30)


def _store_cpu(pid: int | None) -> float:
    return 0.0 if pid is None else cpu_seconds(pid)


async def catch_up(tmp: Path, weed: Seaweed, down: float, rate: float) -> dict[str, Any]:
    proc, url, key = start_notary(tmp / "notary-down", "--publish",
                                  f"s3://{weed.bucket}/down", env=weed.env())
    try:
        async with aiohttp.ClientSession() as http:
            await issue_at(http, url, key, rate, 1.0)
            await asyncio.to_thread(weed.stop)
            issued = await issue_at(http, url, key, rate, down)
            lag_entries = scrape(url, "ledger_publish_lag_entries")
            total = max(i for i, _ in issued) + 1
            t0 = time.perf_counter()
            await asyncio.to_thread(weed.start)
            restarted = time.perf_counter() - t0
            covered: dict[int, float] = {}
            stop = asyncio.Event()
            stop.set()
            await asyncio.wait_for(
                watch(http, f"{weed.public_url}/down/checkpoint", covered, stop, [total]), 600)
            caught_up = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)
    return {"down_seconds": down, "rate": rate, "receipts_while_down": len(issued),
            "lag_entries_while_down": lag_entries, "store_restart_seconds": restarted,
            "catch_up_seconds": caught_up,
            "catch_up_after_store_ready_seconds": caught_up - restarted}


async def run(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    weed = Seaweed(tmp / "seaweed")
    await asyncio.to_thread(weed.start)
    try:
        lags = [await lag_and_cost(tmp, weed, r, args.seconds) for r in args.rates]
        over = await asyncio.to_thread(overhead, tmp, weed, args.throughput_seconds,
                                       args.rounds)
        caught = await catch_up(tmp, weed, args.down, args.catchup_rate)
    finally:
        await asyncio.to_thread(weed.stop)
    return {"lag": lags, "overhead": over, "catch_up": caught}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rates", type=lambda v: [float(x) for x in v.split(",")],
                   default=[100.0, 1000.0, 5000.0], help="receipts per second, comma-separated")
    p.add_argument("--seconds", type=float, default=20.0, help="how long each rate runs")
    p.add_argument("--throughput-seconds", type=float, default=20.0,
                   help="how long each closed-loop run (with and without --publish) lasts")
    p.add_argument("--rounds", type=int, default=3,
                   help="closed-loop rounds, the order alternating (medians reported)")
    p.add_argument("--down", type=float, default=60.0, help="seconds the bucket is down")
    p.add_argument("--catchup-rate", type=float, default=100.0,
                   help="receipts per second while the bucket is down")
    p.add_argument("--save", action="store_true",
                   help="write benchmarks/results/s3_publish.json (the tracked figures)")
    p.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="s3-publish-") as d:
        got = asyncio.run(run(Path(d), args))
    print(table(["rate/s", "achieved/s", "lag p50 ms", "lag p99 ms", "objects/entry",
                 "bytes/entry", "S3 req/s"], [[
        f"{g['rate']:g}", f"{g['receipts_per_second']:.0f}", f"{g['lag_ms']['p50']:.0f}",
        f"{g['lag_ms']['p99']:.0f}", f"{g['objects_per_entry']:.3f}",
        f"{g['bytes_per_entry']:.0f}", f"{g['s3_requests_per_second']:.1f}"]
        for g in got["lag"]]))
    over = got["overhead"]
    print(table(["closed loop, 32 connections", "without --publish", "with --publish s3://",
                 "ratio"], [
        ["receipts/s", f"{over['without']['requests_per_s']:.0f}",
         f"{over['with']['requests_per_s']:.0f}", f"{over['ratio']:.3f}"],
        ["notary CPU µs a receipt", f"{over['without']['notary_cpu_us_per_receipt']:.0f}",
         f"{over['with']['notary_cpu_us_per_receipt']:.0f}", f"{over['notary_cpu_ratio']:.3f}"],
        ["object store CPU µs a receipt", f"{over['without']['store_cpu_us_per_receipt']:.0f}",
         f"{over['with']['store_cpu_us_per_receipt']:.0f}", ""]]))
    c = got["catch_up"]
    print(table(["catch-up", "value"], [
        ["bucket down (s)", f"{c['down_seconds']:g}"],
        ["receipts issued while down", c["receipts_while_down"]],
        ["ledger_publish_lag_entries before it came back", f"{c['lag_entries_while_down']:.0f}"],
        ["store restart (s)", f"{c['store_restart_seconds']:.1f}"],
        ["caught up after the store was ready (s)",
         f"{c['catch_up_after_store_ready_seconds']:.1f}"],
    ]))
    out = write_json(result_path("s3_publish", save=args.save, out=args.out), {
        "benchmark": "s3_publish", "date": now_utc(), "command": command_line(),
        "machine": machine_info(), **got})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
