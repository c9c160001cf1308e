"""The JavaScript package against the Python one: offline verification rate, and the latency a
notarized tool call adds in a TypeScript MCP server.

    .venv/bin/python -m benchmarks.js_verify           # ~1 min; results/local/js_verify.json
    .venv/bin/python -m benchmarks.js_verify --save    # the tracked results/js_verify.json

1. **Offline verifications/s, same receipts, same run.** A real ``notary serve`` (its own
   process, SQLite on disk) issues 2,000 receipts for 2,000 call records, 64 requests at a time
   (so receipts share checkpoints the way group commit makes them). Python's
   ``notary.core.verification.verify_receipt(receipt, record=…, jwks=…, log_verifier=…)`` and
   the npm package's ``verifyLevels`` with the same arguments check levels 1-3 of every
   receipt; each timed pass starts with the checkpoint memos emptied. The two take turns
   (Python, Node, Python, Node) so that drift on a shared machine hits both. Node is measured
   one verification at a time and with 64 in flight (WebCrypto runs Ed25519 on libuv's thread
   pool, so concurrent verifications use both cores), then one at a time with Node's own
   synchronous crypto (``nodeEd25519`` of ``mcp-notary/node``, what the CLI uses) and with
   @noble/curves (pure JavaScript, the fallback of browsers without Ed25519 in WebCrypto); CPU
   seconds are the whole process's.
2. **Added latency per tool call.** ``js/test/fixtures/server.ts`` over stdio, once plain
   (``FIXTURE_NOTARIZE=0``) and once notarized by ``notarizeServer``, called by the TypeScript
   client one call at a time, plain and notarized calls interleaved (order alternating), 400
   measured calls after 30 warm-up ones, on ``@modelcontextprotocol/sdk`` 1.x (2025-11-25) and
   ``@modelcontextprotocol/server`` 2.x (2026-07-28). "Added" is notarized p50 − plain p50 (same
   for p99). The bare ``POST /v1/tool-calls`` round trip from Node is interleaved for reference.

Targets: JS verification rate ≥ Python's; ≤ 5 ms p50 added per call. Figures and method:
benchmarks/docs/js_verify.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    REPO,
    command_line,
    machine_info,
    now_utc,
    result_path,
    shown,
    start_notary,
    table,
    write_json,
)

JS = REPO / "js"


def clear_verify_caches() -> None:
    """Empty every memo on the Python verification path."""
    import ledger.core.checkpoint
    import ledger.core.tlog_proof

    for module in (ledger.core.checkpoint, ledger.core.tlog_proof):
        for value in vars(module).values():
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()


async def issue(url: str, key: str, count: int) -> list[dict[str, Any]]:
    """``count`` receipts with their records, 64 requests at a time."""
    from notary.core.records import CallRecord, new_salt
    from notary.sdk import NotaryClient

    out: list[dict[str, Any]] = []
    async with NotaryClient(url, key) as client:
        for start in range(0, count, 64):
            records = [
                CallRecord(server="bench", tool="add", arguments={"a": i, "b": 1},
                           result={"content": [{"type": "text", "text": str(i + 1)}],
                                   "structuredContent": {"result": i + 1}, "isError": False},
                           salt=new_salt())
                for i in range(start, min(start + 64, count))
            ]
            receipts = await asyncio.gather(*(client.notarize("bench", "add", r.call_sha256())
                                              for r in records))
            out += [{"receipt": rc.to_json(), "record": {k: v for k, v in r.to_json().items()
                                                        if k != "server"}}
                    for r, rc in zip(records, receipts, strict=True)]
    return out


def python_rate(cases: list[dict[str, Any]], jwks: Any, log_key: Any, seconds: float
                ) -> dict[str, Any]:
    from notary.core.verification import verify_receipt

    for c in cases:
        v = verify_receipt(c["receipt"], record=c["record"], jwks=jwks, log_verifier=log_key)
        assert v.valid, v.to_json()
    done, spent, cpu, passes, best = 0, 0.0, 0.0, 0, float("inf")
    gc.collect()
    while spent < seconds or passes < 3:
        clear_verify_caches()
        t0, c0 = time.perf_counter(), time.process_time()
        for c in cases:
            verify_receipt(c["receipt"], record=c["record"], jwks=jwks, log_verifier=log_key)
        elapsed = time.perf_counter() - t0
        cpu += time.process_time() - c0
        spent += elapsed
        best = min(best, elapsed)
        done += len(cases)
        passes += 1
    return {"receipts": len(cases), "passes": passes, "verifications": done, "seconds": spent,
            "cpu_seconds": cpu, "per_s": done / spent, "best_pass_per_s": len(cases) / best,
            "per_cpu_s": done / cpu, "cpu_us_per_verification": cpu / done * 1e6}


def node(*args: str, timeout: float = 600) -> dict[str, Any]:
    node_bin = shutil.which("node")
    if node_bin is None or not (JS / "node_modules" / "esbuild").exists():
        raise SystemExit("js_verify: needs node and js/node_modules (npm ci in js/)")
    out = subprocess.run([node_bin, "bench/verify.mjs", *args], cwd=JS, capture_output=True,
                         text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        raise SystemExit(f"js_verify: node bench/verify.mjs {args[0]} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Two turns of one system as one figure: totals summed, the best pass kept."""
    done = sum(r["verifications"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    cpu = sum(r["cpu_seconds"] for r in runs)
    return {**runs[0], "passes": sum(r["passes"] for r in runs), "verifications": done,
            "seconds": seconds, "cpu_seconds": cpu, "per_s": done / seconds,
            "best_pass_per_s": max(r["best_pass_per_s"] for r in runs),
            "per_cpu_s": done / cpu, "cpu_us_per_verification": cpu / done * 1e6, "turns": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--receipts", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=3.0, help="per turn and system")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--save", action="store_true", help="write results/js_verify.json")
    parser.add_argument("--out", help="write the JSON here instead")
    args = parser.parse_args()

    from ledger.core.note import Ed25519Verifier
    from notary.core.jwks import Jwks

    started = now_utc()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="js-verify-") as tmp:
        proc, url, key = start_notary(Path(tmp) / "data")
        try:
            import urllib.request

            jwks_doc = json.load(urllib.request.urlopen(url + "/.well-known/jwks.json"))
            vkey = json.load(urllib.request.urlopen(url + "/v1/ledger"))["vkey"]
            cases = asyncio.run(issue(url, key, args.receipts))
            cases_file = Path(tmp) / "cases.json"
            cases_file.write_text(json.dumps({"jwks": jwks_doc, "vkey": vkey, "cases": cases}))
            checkpoints = len({c["receipt"]["proof"].split("\n\n", 1)[1] for c in cases})
            jwks, log_key = Jwks(jwks_doc), Ed25519Verifier.from_vkey(vkey)
            py_runs, js_runs = [], []
            for _ in range(2):
                py_runs.append(python_rate(cases, jwks, log_key, args.seconds))
                js_runs.append(node("verify", str(cases_file), "--seconds", str(args.seconds)))
            latency = node("latency", "--notary", url, "--key", key, "--calls", str(args.calls))
        finally:
            proc.terminate()
            proc.wait(15)

    py = merge(py_runs)
    js_seq = merge([r["sequential"] for r in js_runs])
    js_par = merge([r["in_flight_64"] for r in js_runs])
    node_crypto = merge([r["node_crypto_sequential"] for r in js_runs])
    noble = merge([r["noble_sequential"] for r in js_runs])
    result = {
        "benchmark": "js_verify", "started": started, "finished": now_utc(),
        "command": command_line(), "machine": machine_info(), "node": js_runs[0]["node"],
        "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
        "ed25519_backend": js_runs[0]["backend"], "receipts": len(cases),
        "distinct_checkpoints": checkpoints,
        "verify": {"python": py, "node_sequential": js_seq, "node_64_in_flight": js_par,
                   "node_crypto_sequential": node_crypto, "node_noble_sequential": noble},
        "latency": latency,
        "targets": {
            "js_rate_ge_python": js_seq["per_s"] >= py["per_s"],
            "js_rate_ge_python_64_in_flight": js_par["per_s"] >= py["per_s"],
            "js_rate_ge_python_node_crypto": node_crypto["per_s"] >= py["per_s"],
            "added_p50_le_5ms": all(v["added_p50_ms"] <= 5.0 for v in latency.values()),
        },
    }
    rows = [
        ("Python verify_receipt", py),
        ("Node verifyLevels, one at a time", js_seq),
        ("Node verifyLevels, 64 in flight", js_par),
        ("Node verifyLevels, Node's crypto (mcp-notary/node)", node_crypto),
        ("Node, @noble/curves instead of WebCrypto (200 receipts)", noble),
    ]
    print(f"Offline verification, levels 1-3, {len(cases)} receipts ({checkpoints} checkpoints):")
    print(table(["verifier", "per s", "best pass /s", "per CPU-s", "CPU µs each", "vs Python"],
                [(name, f"{r['per_s']:,.0f}", f"{r['best_pass_per_s']:,.0f}",
                  f"{r['per_cpu_s']:,.0f}", f"{r['cpu_us_per_verification']:.1f}",
                  f"{r['per_s'] / py['per_s']:.2f}×") for name, r in rows]))
    print()
    print("Latency of one tool call over stdio, ms (TypeScript client and server):")
    print(table(["server SDK / protocol", "plain p50", "notarized p50", "added p50", "plain p99",
                 "notarized p99", "added p99", "bare POST p50"],
                [(v["protocol"], f"{v['plain']['p50_ms']:.2f}", f"{v['notarized']['p50_ms']:.2f}",
                  f"{v['added_p50_ms']:.2f}", f"{v['plain']['p99_ms']:.2f}",
                  f"{v['notarized']['p99_ms']:.2f}", f"{v['added_p99_ms']:.2f}",
                  f"{v['bare_post']['p50_ms']:.2f}") for v in latency.values()]))
    print()
    print("targets:", ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in
                                result["targets"].items()))
    path = write_json(result_path("js_verify", save=args.save, out=args.out), result)
    print(f"wrote {shown(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
