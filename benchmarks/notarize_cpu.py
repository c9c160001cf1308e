"""CPU per receipt of the issuing path in process, without HTTP.

Figures and method: benchmarks/docs/notarize_cpu.md.

    .venv/bin/python -m benchmarks.notarize_cpu                      # 1 and 64 in flight
    .venv/bin/python -m benchmarks.notarize_cpu --in-flight 64 --receipts 20000
    .venv/bin/python -m benchmarks.notarize_cpu --authenticate --profile   # + top functions
    .venv/bin/python -m benchmarks.notarize_cpu --processes 2 --in-flight 2,8,32
    .venv/bin/python -m benchmarks.notarize_cpu --in-flight 64 --prefill 1000000

What ``POST /v1/tool-calls`` runs after authentication and parsing, through the real write path:
``notary.serving.startup.open_notary`` on a fresh SQLite data directory (WAL, ``synchronous=FULL``),
then ``--in-flight`` concurrent loops of ``Notary.notarize`` with random digests (the entry
through the sequencer's batch, the screen and the hook signing and storing each receipt, the
durable commit, the born-complete receipt with its inclusion proof). The process's CPU time
(all threads) and the event loop thread's over the measured receipts, after a warm-up.

HTTP rates on a shared machine follow the other jobs' load more than the code; this figure
moves much less, so it is the one to compare two versions of the service back to back.
``--authenticate`` also checks an API key per receipt (``Notary.authenticate``), as the HTTP
handler does. ``--profile`` runs one more pass per level under ``cProfile`` timed by the event
loop thread's CPU clock (so another job's load does not count; the database thread is not
profiled) and writes the top functions by self and inclusive CPU, in µs per receipt, into the
JSON: cProfile inflates small calls, so take the shares from it and the totals from the
unprofiled pass. ``--processes N`` runs each level in N processes on one store at once (as
``notary serve --workers N`` does, without HTTP), ``--in-flight`` calls in each: the cost of
several writers taking turns at one log. ``--prefill N`` first fills each level's log to N
receipts through the same ``Notary.notarize``, :data:`PREFILL_IN_FLIGHT` calls at once (batches
of about that many), then measures as usual on that log: what a receipt costs once the log is
large, beside the same command without it. The table then also gives the database's bytes per
receipt and the process's resident memory after the measured pass.
Output: a table, and a JSON file (``benchmarks/results/local/`` unless ``--save``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import multiprocessing
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    command_line,
    machine_info,
    now_utc,
    result_path,
    table,
    write_json,
)
from notary.serving.config import Settings
from notary.serving.keys import Paths
from notary.serving.service import Account
from notary.serving.startup import init_data_dir, open_notary

PREFILL_IN_FLIGHT = 2048
"""Calls at once while ``--prefill`` fills the log: batches that large cost a fraction of the
measured ones per receipt, so a million receipts take a few minutes."""

SECRET = "s" * 43
BEARER = f"Bearer nk_0000000000be_{SECRET}"


def top_functions(prof: cProfile.Profile, n: int, count: int) -> dict[str, list[list[Any]]]:
    """The ``count`` functions with most self and most inclusive time, in µs per receipt."""
    loaded: Any = pstats.Stats(prof)
    stats: Any = loaded.stats  # {(file, line, name): (cc, nc, tt, ct, callers)}

    def name(key: tuple[str, int, str]) -> str:
        file, line, func = key
        return f"{Path(file).name}:{line}:{func}" if line else func

    rows: list[tuple[str, int, float, float]] = [
        (name(k), v[1], v[2], v[3]) for k, v in stats.items()]

    def pick(col: int) -> list[list[Any]]:
        return [[r[0], r[1], round(float(r[col]) / n * 1e6, 1)]
                for r in sorted(rows, key=lambda r: -float(r[col]))[:count]]
    return {"self_us_per_receipt": pick(2), "inclusive_us_per_receipt": pick(3)}


def _settings(data: Path) -> Settings:
    return Settings(data=data, public_url="http://127.0.0.1:8080")


async def _create_store(data: Path) -> None:
    """A fresh data directory with the benchmark's API key."""
    init_data_dir(_settings(data))
    notary = await open_notary(_settings(data))
    try:
        await notary.store.create_api_key("bench", None, "0000000000be",
                                          hashlib.sha256(SECRET.encode()).digest())
    finally:
        assert notary.log is not None
        await notary.log.close()


def _rss_bytes() -> int:
    """This process's resident memory now (``/proc/self/statm``), 0 where there is none."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _disk_bytes(data: Path) -> int:
    """The store's bytes on disk: the database, its WAL and shared memory."""
    db = Paths(data).db
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


async def prefill(notary: Any, count: int) -> None:
    """Notarize ``count`` receipts, :data:`PREFILL_IN_FLIGHT` at once, reporting progress."""
    fixed = Account("bench", None, "0000000000be")
    left, done = count, 0
    started = time.perf_counter()

    async def loop() -> None:
        nonlocal left, done
        while left > 0:
            left -= 1
            await notary.notarize(fixed, "bench", "t", os.urandom(32).hex())
            done += 1
            if done % 100_000 == 0:
                print(f"prefill: {done:,} receipts in {time.perf_counter() - started:.0f} s",
                      file=sys.stderr, flush=True)

    await asyncio.gather(*(loop() for _ in range(min(PREFILL_IN_FLIGHT, count))))


async def measure(data: Path, receipts: int, in_flight: int, *, authenticate: bool,
                  profile: bool, start: Any = None, prefilled: int = 0) -> dict[str, Any]:
    """CPU per receipt with ``in_flight`` calls at once, on the store at ``data`` (first filled
    to ``prefilled`` receipts); ``start`` (a barrier) holds the measured receipts until every
    process of the level is warm."""
    batches = [0]

    def observe(size: int, seconds: float) -> None:
        batches[0] += 1

    notary = await open_notary(_settings(data), observer=observe)
    fixed = Account("bench", None, "0000000000be")

    async def loop(count: int) -> None:
        for _ in range(count):
            account = await notary.authenticate(BEARER) if authenticate else fixed
            await notary.notarize(account, "bench", "t", os.urandom(32).hex())

    out: dict[str, Any] = {"in_flight": in_flight, "authenticate": authenticate}
    try:
        if prefilled:
            await prefill(notary, prefilled)
            out["prefilled"] = prefilled
        await asyncio.gather(*(loop(max(1, 200 // in_flight)) for _ in range(in_flight)))
        per_loop = max(1, receipts // in_flight)
        if start is not None:
            start.wait()
        batches[0] = 0
        cpu0, main0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
        await asyncio.gather(*(loop(per_loop) for _ in range(in_flight)))
        cpu1, main1, wall1 = time.process_time(), time.thread_time(), time.perf_counter()
        commits = batches[0]
        n = per_loop * in_flight
        assert notary.log is not None
        head = await notary.log.head()
        size = head.size if head is not None else 0
        out.update({"receipts": n, "cpu_us_per_receipt": (cpu1 - cpu0) / n * 1e6,
                    "event_loop_cpu_us_per_receipt": (main1 - main0) / n * 1e6,
                    "receipts_per_s": n / (wall1 - wall0),
                    "load_average": os.getloadavg()[0], "mean_batch": n / max(1, commits),
                    "log_size": size,
                    "rss_bytes": _rss_bytes(),
                    "disk_bytes_per_receipt": _disk_bytes(data) / max(1, size)})
        if profile:
            prof = cProfile.Profile(time.thread_time)  # CPU, not wall: a busy machine
            prof.enable()
            await asyncio.gather(*(loop(per_loop) for _ in range(in_flight)))
            prof.disable()
            out["profile"] = top_functions(prof, n, 40)
    finally:
        assert notary.log is not None
        await notary.log.close()
    return out


def _process(data: Path, receipts: int, in_flight: int, authenticate: bool, start: Any,
             results: Any) -> None:
    """One of ``--processes``: its own notary on the shared store, as a worker of
    ``notary serve --workers`` is."""
    results.put(asyncio.run(measure(data, receipts, in_flight, authenticate=authenticate,
                                    profile=False, start=start)))


def measure_processes(data: Path, receipts: int, in_flight: int, processes: int, *,
                      authenticate: bool) -> dict[str, Any]:
    """:func:`measure` in ``processes`` processes on one store at once, ``in_flight`` calls in
    each: receipts/s over the slowest one's time, CPU per receipt over all of them."""
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(processes), ctx.Queue()
    each = max(1, receipts // processes)
    procs = [ctx.Process(target=_process, args=(data, each, in_flight, authenticate, start,
                                                results)) for _ in range(processes)]
    for proc in procs:
        proc.start()
    runs = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    n: int = sum(r["receipts"] for r in runs)
    wall = max(r["receipts"] / r["receipts_per_s"] for r in runs)

    def per_receipt(key: str) -> float:  # over all the processes' receipts
        total: float = sum(r[key] * r["receipts"] for r in runs)
        return total / n

    last = max(runs, key=lambda r: r["log_size"])  # the one that looked at the log last
    return {"in_flight": in_flight, "processes": processes, "authenticate": authenticate,
            "receipts": n, "receipts_per_s": n / wall,
            "cpu_us_per_receipt": per_receipt("cpu_us_per_receipt"),
            "event_loop_cpu_us_per_receipt": per_receipt("event_loop_cpu_us_per_receipt"),
            "load_average": os.getloadavg()[0],
            "mean_batch": n / sum(r["receipts"] / r["mean_batch"] for r in runs),
            "log_size": last["log_size"], "rss_bytes": max(r["rss_bytes"] for r in runs),
            "disk_bytes_per_receipt": last["disk_bytes_per_receipt"], "each": runs}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--in-flight", default="1,64", help="comma-separated levels (default 1,64)")
    p.add_argument("--receipts", type=int, default=8000, help="measured per level (default 8000)")
    p.add_argument("--authenticate", action="store_true",
                   help="check an API key per receipt, as the HTTP handler does")
    p.add_argument("--profile", action="store_true",
                   help="one more pass under cProfile: top functions into the JSON")
    p.add_argument("--processes", type=int, default=1,
                   help="processes on one store, each with --in-flight calls (as --workers)")
    p.add_argument("--prefill", type=int, default=0, metavar="N",
                   help="fill each level's log to N receipts first (big batches), then measure")
    p.add_argument("--save", action="store_true",
                   help="write the tracked benchmarks/results/notarize_cpu.json")
    p.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    a = p.parse_args()
    if a.processes < 1:
        p.error("--processes must be 1 or more")
    if a.processes > 1 and a.profile:
        p.error("--profile profiles one process: leave out --processes")
    if a.prefill < 0 or (a.prefill and a.processes > 1):
        p.error("--prefill takes a count of 0 or more, with one process")
    runs = []
    with tempfile.TemporaryDirectory(prefix="notarize-cpu-") as tmp:
        for level in (int(x) for x in a.in_flight.split(",") if x):
            receipts = a.receipts if level > 1 else min(a.receipts, 1500)
            data = Path(tmp) / f"d{level}"
            asyncio.run(_create_store(data))
            if a.processes > 1:
                runs.append(measure_processes(data, receipts, level, a.processes,
                                              authenticate=a.authenticate))
            else:
                runs.append(asyncio.run(measure(data, receipts, level,
                                                authenticate=a.authenticate, profile=a.profile,
                                                prefilled=a.prefill)))
        machine = machine_info(Path(tmp))
    print(table(["in flight", "processes", "receipts", "CPU/receipt", "event loop CPU/receipt",
                 "other threads", "receipts/s", "mean batch", "load avg", "log size",
                 "bytes/receipt", "RSS"],
                [[r["in_flight"], r.get("processes", 1), f"{r['receipts']:,}",
                  f"{r['cpu_us_per_receipt']:.0f} µs",
                  f"{r['event_loop_cpu_us_per_receipt']:.0f} µs",
                  f"{r['cpu_us_per_receipt'] - r['event_loop_cpu_us_per_receipt']:.0f} µs",
                  f"{r['receipts_per_s']:,.0f}", f"{r.get('mean_batch', 0):.1f}",
                  f"{r['load_average']:.1f}", f"{r.get('log_size', 0):,}",
                  f"{r.get('disk_bytes_per_receipt', 0):.0f}",
                  f"{r.get('rss_bytes', 0) / 2**20:.0f} MB"] for r in runs]))
    path = write_json(result_path("notarize_cpu", save=a.save, out=a.out),
                      {"benchmark": "notarize_cpu", "when": now_utc(),
                       "command": command_line(), "runs": runs, "machine": machine})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
