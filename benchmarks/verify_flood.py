"""Notarization latency while unauthenticated clients flood POST /v1/tool-calls/verify.

Before verification had a worker of its own, 16 connections verifying a 62 KB record (100
verifies/s) pushed the p50 of notarization from 3.5 ms to 585 ms, because canonicalizing ran on
the event loop. The goal is a p50 within 2x of idle (benchmarks/docs/verify_flood.md). One
``notary serve`` with default settings; a measuring client notarizes sequentially (one
keep-alive connection) while nothing else runs, then while a flood process keeps 16 connections
verifying the record: once paced at 100 verifies/s in total (the report's load) and once as fast
as the connections go.

    .venv/bin/python -m benchmarks.verify_flood [--samples 300] [--rounds 3] [--quick] [--save]

The phases are interleaved over rounds (idle, paced, unpaced, again), after a warm-up, so that
drift in the machine's other load hits them alike; the figures are medians over the rounds.
"Reset unread" counts verifies of clients that sent again while told to wait (Retry-After):
their connection is closed without the body being read.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks._common import (
    REPO,
    command_line,
    latency_summary,
    machine_info,
    now_utc,
    result_path,
    start_notary,
    table,
    write_json,
)
from notary.core.records import CallRecord, new_salt

CONNECTIONS = 16
BUDGET_REFILL_S = 10.0  # a client address's verification budget refills within this (default)


def big_record(target: int = 62_000) -> dict[str, Any]:
    """A call record of about ``target`` bytes of JSON (many small values to canonicalize)."""
    rows: list[dict[str, Any]] = []
    while len(json.dumps(rows)) < target:
        i = len(rows)
        rows.append({"id": i, "name": f"item-{i}", "tags": ["a", "b", str(i)],
                     "score": i * 1.5, "ok": i % 2 == 0})
    rec = CallRecord(server="srv", tool="export", arguments={"query": "all"},
                     result={"content": [{"type": "text", "text": "done"}],
                             "structuredContent": {"rows": rows}}, salt=new_salt())
    return {"record": rec.to_json(), "call_sha256": rec.call_sha256()}


def _post(conn: http.client.HTTPConnection, path: str, body: bytes,
          headers: dict[str, str]) -> int:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    resp.read()
    return resp.status


def _connect(url: str) -> http.client.HTTPConnection:
    """A keep-alive connection to the notary at ``url`` (loopback)."""
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)


def notarize_latencies(url: str, key: str, samples: int) -> list[int]:
    conn = _connect(url)
    out = []
    for _ in range(samples):
        body = json.dumps({"server": "s", "tool": "t",
                           "call_sha256": hashlib.sha256(secrets.token_bytes(16)).hexdigest()})
        started = time.perf_counter_ns()
        status = _post(conn, "/v1/tool-calls", body.encode(), {"Authorization": f"Bearer {key}"})
        out.append(time.perf_counter_ns() - started)
        if status != 201:
            raise RuntimeError(f"notarization answered {status}")
    conn.close()
    return out


def flood_child(url: str, body_path: str, rate: float, stop_path: str) -> None:
    """Run in its own process: 16 connections verifying until ``stop_path`` exists; prints the
    status counts as JSON."""
    body = Path(body_path).read_bytes()
    counts: Counter[int] = Counter()
    lock = threading.Lock()
    per_connection = rate / CONNECTIONS if rate > 0 else 0.0
    started = time.monotonic()

    def run() -> None:
        conn = _connect(url)
        sent = 0
        while not os.path.exists(stop_path):
            if per_connection:
                due = started + sent / per_connection
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
            try:
                status = _post(conn, "/v1/tool-calls/verify", body, {})
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = _connect(url)
                status = 0
            sent += 1
            with lock:
                counts[status] += 1
        conn.close()

    threads = [threading.Thread(target=run) for _ in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    print(json.dumps({"statuses": {str(k): v for k, v in counts.items()},
                      "seconds": elapsed}))


def under_flood(url: str, key: str, body: Path, rate: float, samples: int,
                workdir: Path) -> dict[str, Any]:
    stop = workdir / f"stop-{secrets.token_hex(4)}"  # one per phase: the child stops on it
    child = subprocess.Popen([sys.executable, "-m", "benchmarks.verify_flood", "--flood-child",
                              url, str(body), str(rate), str(stop)],
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        time.sleep(2.0)  # the flood is established (and the verification worker started)
        latencies = notarize_latencies(url, key, samples)
    finally:
        stop.touch()
        out, _ = child.communicate(timeout=120)
    flood = json.loads(out.strip().splitlines()[-1])
    statuses = {int(k): v for k, v in flood["statuses"].items()}
    return {"rate_offered": rate or None, "latency": latency_summary(latencies),
            "verifies_200": statuses.get(200, 0), "verifies_429": statuses.get(429, 0),
            "verifies_other": sum(v for k, v in statuses.items() if k not in (200, 429)),
            "verifies_per_s_answered": sum(statuses.values()) / flood["seconds"],
            "valid_verifies_per_s": statuses.get(200, 0) / flood["seconds"]}


def _merge(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """One phase's figures over the rounds: medians of the per-round medians and p99s, sums of
    the verify counts."""
    out: dict[str, Any] = {
        "p50_ms": statistics.median(r["latency"]["median_us"] for r in phases) / 1000,
        "p99_ms": statistics.median(r["latency"]["p99_us"] for r in phases) / 1000,
        "rounds": phases,
    }
    for k in ("verifies_200", "verifies_429", "verifies_other"):
        out[k] = sum(r.get(k, 0) for r in phases)
    if "valid_verifies_per_s" in phases[0]:
        out["valid_verifies_per_s"] = statistics.median(r["valid_verifies_per_s"] for r in phases)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--samples", type=int, default=300, help="notarizations per phase and round")
    p.add_argument("--rounds", type=int, default=3,
                   help="idle / paced / unpaced phases interleaved this many times")
    p.add_argument("--quick", action="store_true", help="100 notarizations, one round")
    p.add_argument("--save", action="store_true",
                   help="write the tracked benchmarks/results/verify_flood.json")
    p.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    p.add_argument("--flood-child", nargs=4, metavar=("URL", "BODY", "RATE", "STOP"),
                   help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.flood_child:
        url, body, rate, stop = a.flood_child
        flood_child(url, body, float(rate), stop)
        return
    samples, rounds = (100, 1) if a.quick else (a.samples, a.rounds)
    phases: dict[str, list[dict[str, Any]]] = {"idle": [], "paced": [], "unpaced": []}
    with tempfile.TemporaryDirectory(prefix="bench-verify-flood-") as tmp:
        workdir = Path(tmp)
        proc, url, key = start_notary(workdir / "notary-data")
        try:
            rec = big_record()
            conn = _connect(url)
            conn.request("POST", "/v1/tool-calls", body=json.dumps(
                {"server": rec["record"]["server"], "tool": rec["record"]["tool"],
                 "call_sha256": rec["call_sha256"]}),
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
            receipt = json.loads(conn.getresponse().read())
            conn.close()
            body = workdir / "verify.json"
            body.write_text(json.dumps({"id": receipt["id"], "record": rec["record"]}))
            notarize_latencies(url, key, 50)  # warm-up
            for _ in range(rounds):
                phases["idle"].append(
                    {"latency": latency_summary(notarize_latencies(url, key, samples))})
                phases["paced"].append(under_flood(url, key, body, 100.0, samples, workdir))
                time.sleep(BUDGET_REFILL_S)  # the flood's address gets its budget back
                phases["unpaced"].append(under_flood(url, key, body, 0.0, samples, workdir))
                time.sleep(BUDGET_REFILL_S)
        finally:
            proc.terminate()
            proc.wait(30)
    idle, paced, unpaced = (_merge(phases[k]) for k in ("idle", "paced", "unpaced"))
    rows = [["idle", f"{idle['p50_ms']:.2f}", f"{idle['p99_ms']:.2f}", "1.00", "", "", "", ""]]
    for name, r in (("flood, 100 verifies/s offered", paced), ("flood, unpaced", unpaced)):
        rows.append([name, f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}",
                     f"{r['p50_ms'] / idle['p50_ms']:.2f}", r["verifies_200"],
                     r["verifies_429"], r["verifies_other"], f"{r['valid_verifies_per_s']:.1f}"])
    print(f"verify body: {body_size(rec)} bytes, {CONNECTIONS} connections, {rounds} round(s) "
          f"of {samples} notarizations per phase (medians over rounds)")
    print(table(["phase", "notarize p50 ms", "p99 ms", "p50 vs idle", "verifies 200",
                 "verifies 429", "reset unread", "valid verifies/s"], rows))
    result = {"benchmark": "verify_flood", "when": now_utc(), "command": command_line(),
              "machine": machine_info(), "load_average": os.getloadavg(), "samples": samples,
              "rounds": rounds, "connections": CONNECTIONS,
              "verify_body_bytes": body_size(rec), "idle": idle, "flood_paced": paced,
              "flood_unpaced": unpaced,
              "p50_vs_idle": {"paced": paced["p50_ms"] / idle["p50_ms"],
                              "unpaced": unpaced["p50_ms"] / idle["p50_ms"]},
              "target": "notarization p50 within 2x of idle"}
    path = write_json(result_path("verify_flood", save=a.save, out=a.out), result)
    print(f"wrote {path}")


def body_size(rec: dict[str, Any]) -> int:
    return len(json.dumps({"id": "tc_" + "A" * 22, "record": rec["record"]}))


if __name__ == "__main__":
    main()
