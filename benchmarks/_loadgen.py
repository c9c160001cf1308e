"""Closed-loop HTTP load generator, run in its own process by the HTTP benchmarks.

``python benchmarks/_loadgen.py URL [URL …] --seconds S --concurrency C [--key K] [--warmup W]``
POSTs ``{server, tool, call_sha256}`` bodies with fresh random digests and prints one JSON line:
requests/s over the measured window, latency percentiles (ms) and errors (non-2xx or failures).
With several URLs (frontends of one log), the connections are spread over them evenly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

import aiohttp


async def run(urls: list[str], key: str | None, seconds: float, warmup: float,
              concurrency: int) -> dict[str, float | int]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    latencies: list[float] = []
    errors = 0
    count = 0
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    conn = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=conn) as http:
        async def worker(url: str) -> None:
            nonlocal errors, count
            while True:
                now = time.perf_counter()
                if now >= stop_at:
                    return
                body = json.dumps({"server": "bench", "tool": "t",
                                   "call_sha256": os.urandom(32).hex()})
                t0 = time.perf_counter()
                try:
                    async with http.post(url, data=body, headers=headers) as r:
                        await r.read()
                        ok = 200 <= r.status < 300
                except aiohttp.ClientError:
                    ok = False
                t1 = time.perf_counter()
                if t0 >= measure_from and t1 <= stop_at:
                    count += 1
                    latencies.append(t1 - t0)
                    if not ok:
                        errors += 1

        await asyncio.gather(*(worker(urls[i % len(urls)]) for i in range(concurrency)))
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q / 100 * len(latencies)))] * 1000 \
            if latencies else float("nan")

    return {"requests_per_s": count / seconds, "requests": count, "errors": errors,
            "p50_ms": pct(50), "p99_ms": pct(99), "max_ms": latencies[-1] * 1000
            if latencies else float("nan"), "concurrency": concurrency}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("url", nargs="+")
    p.add_argument("--key")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=2)
    p.add_argument("--concurrency", type=int, default=64)
    a = p.parse_args()
    print(json.dumps(asyncio.run(run(a.url, a.key, a.seconds, a.warmup, a.concurrency))))


if __name__ == "__main__":
    main()
