"""What a log's lifecycle costs a running notary (docs/lifecycle.md): the rate across a roll,
and the cost of serving many frozen logs.

1. **Across a roll.** ``notary serve`` (its own process, as an operator runs it) under a
   closed-loop load at fixed concurrency (``benchmarks._loadgen``, counting the answers in
   50 ms windows); halfway through, a roll (the library call ``notary log roll`` makes, in a
   process started and connected beforehand so that what is timed is the roll, not an
   interpreter starting on the same two cores). Reported per 100 ms and 250 ms window: the
   steady rate (median window before the roll), the dip (lowest window from the roll's start to
   2 s after its commit, over the steady rate), how long the rate stayed below 90% of steady
   (and when it was back for good, from the roll's start), and the same lowest-window ratio
   before the roll: the noise a dip must stand out from.
2. **N frozen logs.** One data directory rolled 1, 10 and 100 times (the library call, the
   server stopped; each frozen log holds its successor record): ``notary serve``'s start-up
   time (process start to ``/healthz``, median of ``--rounds``), its RSS and open files
   (``/proc/<pid>/fd``) once idle, then again after every log was read (each log's checkpoint
   and first entry under ``/logs/<n>/``), and ``GET /v1/ledger``'s median latency (it lists
   every log); each against the same directory before any roll.

``--postgres`` runs both on a throwaway PostgreSQL cluster too (tests/pgcluster.py).
``--workers N`` serves part 1 with N worker processes (SQLite).

    .venv/bin/python -m benchmarks.lifecycle_bench [--seconds 10] [--concurrency 32]
        [--logs 1,10,100] [--rounds 3] [--postgres] [--workers N] [--save]

Method and figures: benchmarks/docs/lifecycle_bench.md.
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

from benchmarks._common import (
    REPO,
    command_line,
    free_port,
    machine_info,
    now_utc,
    proc_status_kib,
    result_path,
    shown,
    start_notary,
    table,
    write_json,
)

BASE_MS = 50  # the load generator's window; the reported ones are multiples of it
WIDTHS_MS = (100, 250)
RECOVERY_S = 2.0  # after the roll's commit, how long a dip is looked for
_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


# --- 1. the rate across a roll -----------------------------------------------------------------


def roll_child(data: str, database: str) -> None:
    """``--roll-child``: open the store, say ``ready``, roll on a line of input, print when."""
    from notary.serving.keys import Paths, load_log_key
    from notary.serving.lifecycle import roll
    from notary.store import open_store

    async def go() -> dict[str, float]:
        paths = Paths(Path(data))
        root = load_log_key(paths)
        store = await open_store(database, paths.db)
        try:
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            start = time.time()
            await roll(store, root)
            return {"start_unix": start, "end_unix": time.time()}
        finally:
            await store.close()

    print(json.dumps(asyncio.run(go())), flush=True)


def dip(counts: list[int], width_ms: int, seconds: float, t0: float, t1: float
        ) -> dict[str, Any]:
    """The figures of one window width; ``t0``, ``t1``: the roll, from the measure's start."""
    k, w = width_ms // BASE_MS, width_ms / 1000
    n = int(seconds / w)
    counts = counts + [0] * (n * k - len(counts))
    rates = [sum(counts[i * k:(i + 1) * k]) / w for i in range(n)]
    before = [r for i, r in enumerate(rates) if (i + 1) * w <= t0]
    steady = statistics.median(before)
    span = [i for i in range(n) if (i + 1) * w > t0 and i * w < t1 + RECOVERY_S]
    low = [i for i in span if rates[i] < 0.9 * steady]
    return {"steady_per_s": steady, "noise": min(before) / steady,
            "min_per_s": min(rates[i] for i in span),
            "dip": min(rates[i] for i in span) / steady, "below_90_s": len(low) * w,
            "back_after_s": (max(low) + 1) * w - t0 if low else 0.0,
            "timeline": [round(r / steady, 2) for i, r in enumerate(rates)
                         if t0 - 0.5 <= i * w <= t1 + RECOVERY_S]}


def across_roll(work: Path, database: str, args: argparse.Namespace) -> dict[str, Any]:
    data = work / "roll"
    extra = [*(["--database", database] if database else []),
             *(["--workers", str(args.workers)] if args.workers > 1 else [])]
    server, url, key = start_notary(data, *extra)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.lifecycle_bench", "--roll-child", str(data),
             database], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_ENV,
            cwd=REPO)
        assert child.stdin is not None and child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the roll's process did not start")
        load = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._loadgen", url + "/v1/tool-calls", "--key", key,
             "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--concurrency",
             str(args.concurrency), "--windows", str(BASE_MS)],
            stdout=subprocess.PIPE, text=True, env=_ENV, cwd=REPO)
        deadline = time.monotonic() + 60  # the load has begun once the log grows
        while json.loads(_get(url + "/v1/ledger"))["size"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(args.warmup + args.seconds / 2)
        child.stdin.write("go\n")
        child.stdin.flush()
        rolled = json.loads(child.stdout.readline())
        child.wait(30)
        out = json.loads(load.communicate(timeout=args.seconds + args.warmup + 60)[0])
    finally:
        server.terminate()
        server.wait(30)
    t0 = rolled["start_unix"] - out["measure_start_unix"]
    t1 = rolled["end_unix"] - out["measure_start_unix"]
    return {"roll_ms": (t1 - t0) * 1000, "roll_at_s": t0, "requests_per_s":
            out["requests_per_s"], "errors": out["errors"], "p99_ms": out["p99_ms"],
            "windows": {str(w): dip(out["window_counts"], w, args.seconds, t0, t1)
                        for w in WIDTHS_MS}}


# --- 2. serving N frozen logs ------------------------------------------------------------------


def serve(data: Path, database: str) -> tuple[subprocess.Popen[bytes], str, float]:
    """``notary serve`` on ``data``: (process, URL, seconds from start to ``/healthz``)."""
    url = f"http://127.0.0.1:{free_port()}"
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "notary.cli.main", "serve", "--data", str(data), "--listen",
         url.removeprefix("http://"), "--log-format", "json",
         *(["--database", database] if database else [])],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=_ENV, cwd=REPO)
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as r:
                if r.status == 200:
                    return proc, url, time.perf_counter() - started
        except OSError:
            if proc.poll() is not None or time.perf_counter() - started > 60:
                proc.kill()
                raise RuntimeError("notary serve did not start") from None
            time.sleep(0.01)


async def make_rolls(data: Path, database: str, count: int) -> None:
    from notary.serving.keys import Paths, load_log_key
    from notary.serving.lifecycle import roll
    from notary.store import open_store

    paths = Paths(data)
    root = load_log_key(paths)
    store = await open_store(database, paths.db)
    try:
        for _ in range(count):
            await roll(store, root)
    finally:
        await store.close()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        body: bytes = r.read()
        return body


def _footprint(pid: int) -> tuple[float, int]:
    """RSS (MiB) and open files of process ``pid``."""
    return (proc_status_kib("VmRSS", pid) or 0) / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def frozen_logs(work: Path, database: str, counts: list[int], rounds: int
                ) -> list[dict[str, Any]]:
    data = work / "logs"
    proc, _, _ = serve(data, database)  # the data directory and log 0's first checkpoint
    proc.terminate()
    proc.wait(30)
    rows, made = [], 0
    for n in sorted({0, *counts}):
        asyncio.run(make_rolls(data, database, n - made))
        made = n
        starts = []
        for r in range(rounds):
            proc, url, took = serve(data, database)
            starts.append(took)
            if r < rounds - 1:
                proc.terminate()
                proc.wait(30)
        try:
            time.sleep(1.0)  # settled
            idle = _footprint(proc.pid)
            for i in range(n + 1):
                _get(f"{url}/logs/{i}/checkpoint")
                if i < n:  # a frozen log: its successor record at least
                    _get(f"{url}/logs/{i}/v1/ledger/entries/0")
            read = _footprint(proc.pid)
            listing = []
            for _ in range(20):
                t = time.perf_counter()
                assert len(json.loads(_get(url + "/v1/ledger"))["logs"]) == n + 1
                listing.append(time.perf_counter() - t)
        finally:
            proc.terminate()
            proc.wait(30)
        rows.append({"frozen_logs": n, "startup_s": statistics.median(starts),
                     "rss_idle_mib": idle[0], "fds_idle": idle[1], "rss_read_mib": read[0],
                     "fds_read": read[1], "ledger_ms": statistics.median(listing) * 1000})
    return rows


# --- the run -----------------------------------------------------------------------------------


def print_tables(runs: dict[str, dict[str, Any]]) -> None:
    rows = []
    for store, run in runs.items():
        a = run["across_roll"]
        for w, d in a["windows"].items():
            rows.append([store, f"{w} ms", f"{d['steady_per_s']:.0f}", f"{d['noise']:.2f}",
                         f"{d['min_per_s']:.0f}", f"{d['dip']:.2f}", f"{d['below_90_s']:.2f}",
                         f"{d['back_after_s']:.2f}", f"{a['roll_ms']:.0f}"])
    print("\nThe rate across a roll (receipts/s per window; ratios to the steady rate)")
    print(table(["store", "window", "steady/s", "noise (min before)", "min in roll/s", "dip",
                 "below 90% (s)", "back after (s)", "roll (ms)"], rows))
    for store, run in runs.items():
        print(f"{store}, 100 ms windows from 0.5 s before the roll (× steady): "
              f"{run['across_roll']['windows']['100']['timeline']}")
    rows = []
    for store, run in runs.items():
        base = run["frozen_logs"][0]
        for r in run["frozen_logs"]:
            rows.append([store, r["frozen_logs"], f"{r['startup_s']:.2f}",
                         f"{r['startup_s'] / base['startup_s']:.2f}",
                         f"{r['rss_idle_mib']:.0f}", r["fds_idle"], f"{r['rss_read_mib']:.0f}",
                         f"{r['rss_read_mib'] / base['rss_read_mib']:.2f}", r["fds_read"],
                         f"{r['ledger_ms']:.2f}"])
    print("\nServing N frozen logs (ratios to the same directory before any roll)")
    print(table(["store", "frozen logs", "start-up (s)", "×", "RSS idle (MiB)", "fds idle",
                 "RSS after reads (MiB)", "×", "fds after reads", "/v1/ledger p50 (ms)"], rows))


def main() -> None:
    if sys.argv[1:2] == ["--roll-child"]:
        roll_child(sys.argv[2], sys.argv[3])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=10.0, help="load measured (part 1)")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--workers", type=int, default=1, help="serve workers in part 1 (SQLite)")
    p.add_argument("--logs", default="1,10,100", help="frozen log counts (part 2)")
    p.add_argument("--rounds", type=int, default=3, help="start-ups timed per count")
    p.add_argument("--postgres", action="store_true", help="also on a throwaway cluster")
    p.add_argument("--save", action="store_true", help="write to benchmarks/results/")
    p.add_argument("--out", help="write the JSON here instead")
    args = p.parse_args()
    counts = sorted({int(c) for c in args.logs.split(",")})
    load_start = os.getloadavg()
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="lifecycle-bench-") as tmp:
        work = Path(tmp)
        (work / "sqlite").mkdir()
        runs["sqlite"] = {"across_roll": across_roll(work / "sqlite", "", args),
                          "frozen_logs": frozen_logs(work / "sqlite", "", counts, args.rounds)}
        if args.postgres:
            from tests.pgcluster import new_database, start_cluster

            (work / "postgres").mkdir()
            with start_cluster() as cluster:
                pg = work / "postgres"
                runs["postgresql"] = {
                    "across_roll": across_roll(pg, new_database(cluster), args),
                    "frozen_logs": frozen_logs(pg, new_database(cluster), counts, args.rounds)}
    print_tables(runs)
    path = write_json(result_path("lifecycle_bench", save=args.save, out=args.out), {
        "benchmark": "lifecycle_bench", "when": now_utc(), "command": command_line(),
        "machine": machine_info(), "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
        "seconds": args.seconds, "concurrency": args.concurrency, "workers": args.workers,
        "runs": runs})
    print(f"\nwrote {shown(path)}")


if __name__ == "__main__":
    main()
