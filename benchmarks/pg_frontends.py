"""Several notary frontends on one PostgreSQL database against one SQLite process.

Figures and method: benchmarks/docs/pg_frontends.md.

In one run, with the same load generator (``benchmarks/_loadgen.py``: closed loop, keep-alive,
distinct digests; its connections spread evenly over the frontends' URLs) at ``--connections``
(default 64):

- one ``notary serve`` on its SQLite file (the default store, full durability);
- 1, 2 and 4 ``notary serve`` frontends on one PostgreSQL database (a throwaway cluster on
  loopback, ``synchronous_commit = on``), each with its own data directory and receipt key;

receipts/s, p50/p99, commit latency (``ledger_commit_duration_seconds``) and batch sizes
(``ledger_batch_size``), summed over the frontends' ``/metrics``. After each run the log must
hold at least as many entries as receipts were acknowledged.

Then the failover: a primary with a synchronous streaming standby, two frontends on the
multi-host URL under load, the primary SIGKILLed and the standby promoted; the unavailability
window is the time from the kill to the first receipt for a request sent after it, and every
receipt acknowledged before, during and after must be in the final log at its index.

    .venv/bin/python -m benchmarks.pg_frontends [--seconds 10] [--connections 64] [--save]

Results go to ``benchmarks/results/local/pg_frontends.json`` (``--save``: ``results/``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
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
    result_path,
    table,
    write_json,
)

TARGETS = {"pg2_vs_sqlite_at_64": 1.5, "p99_ms": 50.0, "failover_s": 10.0, "lost": 0}
_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


class Frontend:
    """One ``notary serve`` process (stdout/stderr to a log file beside its data directory)."""

    def __init__(self, data: Path, database: str) -> None:
        self.data, self.database = data, database
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = ["--database", self.database] if self.database else []
        log = (self.data.parent / f"{self.data.name}.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "notary.cli.main", "serve", "--data", str(self.data),
             "--listen", f"127.0.0.1:{self.port}", "--log-format", "json", *args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=_ENV, cwd=REPO)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"notary serve did not start: see {log.name}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def cli(self, *argv: str) -> str:
        extra = ["--database", self.database] if self.database else []
        return subprocess.run(
            [sys.executable, "-m", "notary.cli.main", *argv, "--data", str(self.data), *extra],
            capture_output=True, text=True, env=_ENV, cwd=REPO, check=True).stdout

    def metrics(self) -> dict[str, float]:
        names = ("ledger_batch_size_count", "ledger_batch_size_sum",
                 "ledger_commit_duration_seconds_count", "ledger_commit_duration_seconds_sum",
                 "ledger_tree_size")
        out = dict.fromkeys(names, 0.0)
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.partition(" ")
                if name in out:
                    out[name] = float(value)
        return out


def frontends(workdir: Path, database: str, n: int) -> list[Frontend]:
    """``n`` frontends of one log: the first creates it, the others copy its log key."""
    first = Frontend(workdir / "f0", database)
    first.start()
    out = [first]
    for i in range(1, n):
        data = workdir / f"f{i}"
        data.mkdir(mode=0o700)
        for name in ("log.key", "log.vkey"):
            shutil.copy2(first.data / name, data / name)
        f = Frontend(data, database)
        f.start()
        out.append(f)
    return out


def _sum(fronts: list[Frontend]) -> dict[str, float]:
    total: dict[str, float] = {}
    for f in fronts:
        for k, v in f.metrics().items():
            total[k] = total.get(k, 0.0) + v
    return total


def measure(name: str, fronts: list[Frontend], key: str, seconds: float, warmup: float,
            connections: int) -> dict[str, Any]:
    before = _sum(fronts)
    cmd = [sys.executable, "-m", "benchmarks._loadgen", *(f.url + "/v1/tool-calls" for f in fronts),
           "--key", key, "--seconds", str(seconds), "--warmup", str(warmup),
           "--concurrency", str(connections)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO, env=_ENV)
    res: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    time.sleep(0.5)  # past the frontends' head cache (0.2 s), so the sizes below are final
    after = _sum(fronts)
    batches = after["ledger_batch_size_count"] - before["ledger_batch_size_count"]
    entries = after["ledger_batch_size_sum"] - before["ledger_batch_size_sum"]
    commit_s = (after["ledger_commit_duration_seconds_sum"]
                - before["ledger_commit_duration_seconds_sum"])
    res.update(name=name, frontends=len(fronts), batches=batches,
               mean_batch=entries / batches if batches else None,
               mean_commit_ms=commit_s / batches * 1000 if batches else None)
    size = max(f.metrics()["ledger_tree_size"] for f in fronts)
    acked = res["completed"] - res.get("errors", 0)
    res["log_size"], res["acknowledged_upper_bound"] = size, acked
    res["lost"] = max(0, acked - int(size))  # every acknowledged receipt is an entry
    return res


def run_config(workdir: Path, name: str, database: str, n: int, seconds: float, warmup: float,
               connections: int) -> dict[str, Any]:
    fronts = frontends(workdir, database, n)
    try:
        key = fronts[0].cli("apikey", "create", "--account", "bench").strip().splitlines()[-1]
        return measure(name, fronts, key, seconds, warmup, connections)
    finally:
        for f in fronts:
            f.stop()


async def _failover(workdir: Path, url: str, primary: Any, standby: Any, connections: int
                    ) -> dict[str, Any]:
    import aiohttp

    from ledger.log.facade import Log
    from notary.core.entry import decode_entry
    from notary.store import open_store

    fronts = await asyncio.to_thread(frontends, workdir, url, 2)
    key = fronts[0].cli("apikey", "create", "--account", "ha").strip().splitlines()[-1]
    acked: list[tuple[str, int]] = []
    killed: list[float] = []
    first_after: list[float] = []
    stop = asyncio.Event()
    errors = {"503": 0, "500": 0, "connection": 0}

    async def client(n: int, http: aiohttp.ClientSession) -> None:
        front = fronts[n % len(fronts)]
        while not stop.is_set():
            started = time.monotonic()
            try:
                async with http.post(f"{front.url}/v1/tool-calls",
                                     json={"server": "s", "tool": "t",
                                           "call_sha256": os.urandom(32).hex()},
                                     headers={"Authorization": f"Bearer {key}"}) as r:
                    body = await r.json(content_type=None)
                    status = r.status
            except (TimeoutError, aiohttp.ClientError):
                errors["connection"] += 1
                await asyncio.sleep(0.02)
                continue
            if status == 201:
                acked.append((body["id"], body["ledger"]["index"]))
                if killed and started >= killed[0] and not first_after:
                    first_after.append(time.monotonic())
            elif str(status) in errors:
                errors[str(status)] += 1
                await asyncio.sleep(0.02)

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=90)) as http:
            tasks = [asyncio.create_task(client(n, http)) for n in range(connections)]
            await asyncio.sleep(3.0)
            before = len(acked)
            await asyncio.to_thread(primary.kill)
            killed.append(time.monotonic())
            await asyncio.to_thread(standby.promote)
            deadline = time.monotonic() + 60
            while not first_after and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.0)
            stop.set()
            await asyncio.gather(*tasks)
    finally:
        for f in fronts:
            await asyncio.to_thread(f.stop)
    verifier_key = (fronts[0].data / "log.vkey").read_text().strip()
    from ledger.core.note import Ed25519Verifier

    store = await open_store(url, workdir / "unused.sqlite")
    log = await Log.open(store, verifier=Ed25519Verifier.from_vkey(verifier_key))
    try:
        head = await log.head(0)
        size = head.size if head else 0
        entries = [decode_entry(e) for e in await log.reader.entries(0, size)]
        lost = sum(1 for rid, index in acked if index >= size or entries[index].id != rid)
    finally:
        await log.close()
    return {"frontends": 2, "connections": connections, "acknowledged_before_kill": before,
            "acknowledged": len(acked), "errors": errors, "lost": lost, "log_size": size,
            "unavailable_s": first_after[0] - killed[0] if first_after else None}


def failover(workdir: Path, connections: int) -> dict[str, Any]:
    from tests.pgcluster import primary_with_standby

    with primary_with_standby() as (primary, standby):
        url = (f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
               "/postgres?target_session_attrs=read-write")
        return asyncio.run(_failover(workdir, url, primary, standby, connections))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--failover-connections", type=int, default=16)
    p.add_argument("--save", action="store_true", help="write to benchmarks/results/")
    p.add_argument("--out", help="write the JSON here instead")
    a = p.parse_args()
    from tests.pgcluster import new_database, start_cluster

    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pg-frontends-") as tmp:
        root = Path(tmp)
        (root / "sqlite").mkdir()
        runs.append(run_config(root / "sqlite", "sqlite, 1 process", "", 1, a.seconds,
                               a.warmup, a.connections))
        with start_cluster() as cluster:
            for n in (1, 2, 4):
                work = root / f"pg{n}"
                work.mkdir()
                runs.append(run_config(work, f"postgresql, {n} frontend(s)",
                                       new_database(cluster), n, a.seconds, a.warmup,
                                       a.connections))
        (root / "failover").mkdir()
        fo = failover(root / "failover", a.failover_connections)
    sqlite = runs[0]["requests_per_s"]
    pg2 = next(r for r in runs if r["frontends"] == 2 and r["name"].startswith("postgres"))
    met = {
        "pg2_vs_sqlite_at_64": pg2["requests_per_s"] / sqlite >= TARGETS["pg2_vs_sqlite_at_64"],
        "p99_ms": pg2["p99_ms"] <= TARGETS["p99_ms"],
        "failover_s": fo["unavailable_s"] is not None
        and fo["unavailable_s"] <= TARGETS["failover_s"],
        "lost": all(r["lost"] == 0 for r in runs) and fo["lost"] == 0,
    }
    rows = [(r["name"], f"{r['requests_per_s']:.0f}", f"{r['requests_per_s'] / sqlite:.2f}",
             f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}", f"{r['mean_commit_ms'] or 0:.1f}",
             f"{r['mean_batch'] or 0:.1f}", r["errors"], r["lost"]) for r in runs]
    print(table(["configuration", "receipts/s", "vs SQLite", "p50 ms", "p99 ms", "commit ms",
                 "batch", "errors", "lost"], rows))
    print(f"failover: {fo['unavailable_s']}s from the primary's death to the first receipt "
          f"from the new primary; {fo['acknowledged']} acknowledged, {fo['lost']} lost, "
          f"errors {fo['errors']}")
    print(f"targets met: {met}")
    path = write_json(result_path("pg_frontends", save=a.save, out=a.out), {
        "benchmark": "pg_frontends", "when": now_utc(), "command": command_line(),
        "machine": machine_info(), "connections": a.connections, "seconds": a.seconds,
        "runs": runs, "failover": fo, "targets": TARGETS, "targets_met": met})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
