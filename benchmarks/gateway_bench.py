"""Latency the authorization gateway adds to a tool call, a resource read and a prompt,
and where that time goes.

One ``mcp.Client`` calls a tool of an in-process upstream MCP server (``tests/gateway_upstream``)
directly, then the same tool through the gateway (in process, with the upstream in process
behind it), sequentially, one call at a time; the difference of the medians is the latency
the gateway adds. The notary is the real ``notary serve`` in its own process on loopback.

Per call the gateway does: the policy check, one notarization of the decision record (before
forwarding), one local SQLite write of the decision evidence, the upstream call, one
notarization of the final result, and the receipts (authorization block, rs-tool-call/1,
AER-1). A non-idempotent tool adds two fsync'ed SQLite writes (the key claimed before the
upstream call, the outcome recorded before the answer). Each part is timed separately.

Two storage settings, because the notary acknowledges a receipt only after its entry is
durable (fsync) and that dominates: ``disk`` (notary data and gateway state on the working
disk) and ``tmpfs`` (both on /dev/shm, where fsync costs nothing: the gateway's own CPU cost
plus loopback HTTP).

Resource reads (``resources/read``) and prompts (``prompts/get``) are decided and their
decisions notarized like tool calls, but their results are not notarized (only final tool
results are); they are measured against the conformance fixture (``tests/conformance_fixture``).

    .venv/bin/python benchmarks/gateway_bench.py [--calls 300] [--quick] [--no-tmpfs]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
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

TARGET_P50_MS = 5.0
POLICY = """\
version = 1
[gateway]
name = "bench-gateway"
agent = "BenchAgent"
[tools.echo]
[tools."payments.transfer"]
idempotent = false
facts.amount = { from = "amount", type = "integer" }
facts.approved = { from = "approval.approved", type = "boolean", default = false }
rules = [
  { fact = "amount", op = "<=", value = 5000 },
  { fact = "approved", op = "==", value = true },
  { fact = "agent", op = "in", value = ["BenchAgent"] },
]
"""


class Parts:
    """Time spent in each part of the current call (calls are sequential)."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.calls: list[dict[str, float]] = []

    def wrap(self, owner: Any, name: str, label: Callable[..., str] | str) -> None:
        original: Callable[..., Awaitable[Any]] = getattr(owner, name)

        @functools.wraps(original)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                key = label(*args, **kwargs) if callable(label) else label
                self.current[key] += time.perf_counter() - started

        setattr(owner, name, timed)

    def next_call(self, total: float) -> None:
        self.current["total"] = total
        self.calls.append(dict(self.current))
        self.current = defaultdict(float)


async def measure(client: Any, tool: str, args: dict[str, Any], calls: int, warmup: int,
                  meta: Callable[[int], dict[str, Any] | None], parts: Parts | None
                  ) -> list[float]:
    async def call(i: int) -> None:
        result = await client.call_tool(tool, args, meta=meta(i))
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result}")

    return await measure_op(call, calls, warmup, parts)


async def measure_op(op: Callable[[int], Awaitable[None]], calls: int, warmup: int,
                     parts: Parts | None) -> list[float]:
    """Time ``op(i)`` once per call, sequentially, after ``warmup`` untimed calls."""
    out: list[float] = []
    for i in range(warmup + calls):
        started = time.perf_counter()
        await op(i)
        elapsed = time.perf_counter() - started
        if i >= warmup:
            out.append(elapsed)
            if parts is not None:
                parts.next_call(elapsed)
        elif parts is not None:
            parts.current = defaultdict(float)
    return out


def ms(values: list[float], q: float) -> float:
    return percentile(sorted(values), q) * 1e3


async def run_setting(name: str, base: Path, calls: int, warmup: int) -> dict[str, Any]:
    import structlog
    from mcp import Client

    from notary.gateway import GatewayConfig, build_gateway, toolcalls
    from notary.gateway.salt import ensure_salt
    from notary.gateway.store import GatewayStore
    from notary.sdk import NotaryClient
    from tests.gateway_upstream import build_server

    base.mkdir(parents=True, exist_ok=True)
    notary, url, key = start_notary(base / "notary-data")
    try:
        policy = base / "policy.toml"
        policy.write_text(POLICY)
        ensure_salt(base / "policy.salt")
        upstream = build_server(None)
        config = GatewayConfig(upstream=upstream, policy_path=policy,
                               salt_path=base / "policy.salt", state_path=base / "gateway.db",
                               notary_url=url, api_key=key)
        parts = Parts()

        def notary_label(_self: Any, server: str, tool: str, digest: str) -> str:
            return "notarize decision" if tool == "policy.decision" else "notarize result"

        parts.wrap(NotaryClient, "notarize", notary_label)
        parts.wrap(GatewayStore, "save_decision", "save decision (SQLite, no fsync)")
        parts.wrap(GatewayStore, "begin", "claim key (SQLite fsync)")
        parts.wrap(GatewayStore, "finish", "record outcome (SQLite fsync)")
        parts.wrap(toolcalls, "forward", "upstream call")
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(
            open(os.devnull, "w")))  # noqa: SIM115 - the operator log is formatted, not shown

        echo = {"text": "hello"}
        transfer = {"amount": 100, "recipient": "acct", "approval": {"approved": True}}
        async with Client(upstream, mode="auto") as direct:
            direct_echo = await measure(direct, "echo", echo, calls, warmup, lambda i: None,
                                        None)
            direct_transfer = await measure(direct, "payments.transfer", transfer, calls,
                                            warmup, lambda i: None, None)
        async with Client(build_gateway(config), mode="auto") as gw:
            parts.calls.clear()
            gw_echo = await measure(gw, "echo", echo, calls, warmup, lambda i: None, parts)
            echo_parts = parts.calls[:]
            parts.calls.clear()
            gw_transfer = await measure(
                gw, "payments.transfer", transfer, calls, warmup,
                lambda i: {"io.zkmcp/idempotency-key": f"{name}-{i}"}, parts)
            transfer_parts = parts.calls[:]
        reads = await measure_reads(config, base, calls, warmup, parts)
    finally:
        notary.terminate()
        notary.wait(15)

    def summarize(direct: list[float], through: list[float], per_call: list[dict[str, float]]
                  ) -> dict[str, Any]:
        labels = sorted({k for c in per_call for k in c if k != "total"})
        medians = {k: ms([c.get(k, 0.0) for c in per_call], 50) for k in labels}
        rest = [c["total"] - sum(c.get(k, 0.0) for k in labels) for c in per_call]
        return {
            "direct_p50_ms": ms(direct, 50), "direct_p99_ms": ms(direct, 99),
            "gateway_p50_ms": ms(through, 50), "gateway_p99_ms": ms(through, 99),
            "added_p50_ms": ms(through, 50) - ms(direct, 50),
            "added_p99_ms": ms(through, 99) - ms(direct, 99),
            "parts_p50_ms": medians,
            "gateway_cpu_and_client_p50_ms": ms(rest, 50),
        }

    return {
        "setting": name,
        "storage": machine_info(base)["workdir_fs"],
        "idempotent_tool": summarize(direct_echo, gw_echo, echo_parts),
        "non_idempotent_tool": summarize(direct_transfer, gw_transfer, transfer_parts),
        **{kind: summarize(*timings) for kind, timings in reads.items()},
    }


READS_POLICY = """\
version = 1
[gateway]
name = "bench-gateway"
agent = "BenchAgent"
[prompts.test_simple_prompt]
[resources]
rules = [{ fact = "uri", op = "prefix", value = "test://static-text" }]
"""
KINDS = ("idempotent_tool", "non_idempotent_tool", "resource_read", "prompt_get")


async def measure_reads(config: Any, base: Path, calls: int, warmup: int, parts: Parts
                        ) -> dict[str, tuple[list[float], list[float], list[dict[str, float]]]]:
    """``resources/read`` and ``prompts/get``, direct and through a gateway (same notary)."""
    import dataclasses

    from mcp import Client

    from notary.gateway import build_gateway
    from tests.conformance_fixture import build

    policy = base / "reads-policy.toml"
    policy.write_text(READS_POLICY)
    upstream = build()
    gw_config = dataclasses.replace(config, upstream=upstream, policy_path=policy,
                                    state_path=base / "gateway-reads.db")
    out: dict[str, tuple[list[float], list[float], list[dict[str, float]]]] = {}
    ops: dict[str, Callable[[Any], Callable[[int], Awaitable[None]]]] = {
        "resource_read": lambda c: lambda i: c.read_resource("test://static-text"),
        "prompt_get": lambda c: lambda i: c.get_prompt("test_simple_prompt"),
    }
    async with Client(upstream, mode="auto") as direct, \
            Client(build_gateway(gw_config), mode="auto") as gw:
        for kind, op in ops.items():
            plain = await measure_op(op(direct), calls, warmup, None)
            parts.calls.clear()
            through = await measure_op(op(gw), calls, warmup, parts)
            out[kind] = (plain, through, parts.calls[:])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="60 calls, 10 warm-up")
    parser.add_argument("--no-tmpfs", action="store_true", help="only the disk setting")
    parser.add_argument("--save", action="store_true",
                        help="write the tracked benchmarks/results/gateway_bench.json")
    parser.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    args = parser.parse_args()
    calls, warmup = (60, 10) if args.quick else (args.calls, args.warmup)

    settings: list[tuple[str, Path]] = []
    disk = Path(tempfile.mkdtemp(prefix="gateway-bench-", dir=REPO / "benchmarks"))
    settings.append(("disk", disk))
    shm = Path("/dev/shm")
    tmpfs = (Path(tempfile.mkdtemp(prefix="gateway-bench-", dir=shm))
             if shm.is_dir() and not args.no_tmpfs else None)
    if tmpfs is not None:
        settings.append(("tmpfs", tmpfs))
    results = []
    load_before = os.getloadavg()
    try:
        for name, base in settings:
            results.append(asyncio.run(run_setting(name, base, calls, warmup)))
    finally:
        for _, base in settings:
            shutil.rmtree(base, ignore_errors=True)

    rows = []
    for r in results:
        for kind in KINDS:
            s = r[kind]
            rows.append([f"{r['setting']} / {kind.replace('_', ' ')}",
                         f"{s['direct_p50_ms']:.2f}", f"{s['gateway_p50_ms']:.2f}",
                         f"{s['added_p50_ms']:.2f}", f"{s['direct_p99_ms']:.2f}",
                         f"{s['gateway_p99_ms']:.2f}", f"{s['added_p99_ms']:.2f}"])
    print(table(["setting / tool", "direct p50", "gateway p50", "added p50", "direct p99",
                 "gateway p99", "added p99"], rows))
    print("(milliseconds per call, sequential, in-process mcp.Client, protocol 2026-07-28)")
    for r in results:
        for kind in KINDS:
            s = r[kind]
            parts = ", ".join(f"{k} {v:.2f}" for k, v in s["parts_p50_ms"].items())
            print(f"{r['setting']} / {kind}: median parts (ms): {parts}; gateway CPU + "
                  f"in-process MCP plumbing {s['gateway_cpu_and_client_p50_ms']:.2f}")
    load_after = os.getloadavg()
    print(f"load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f} on "
          f"{os.cpu_count()} CPUs (other work on the machine shows up in the notary parts)")
    out = {
        "benchmark": "gateway_bench",
        "loadavg_1min": {"before": load_before[0], "after": load_after[0]},
        "when": now_utc(),
        "command": command_line(),
        "machine": machine_info(REPO),
        "calls": calls,
        "warmup": warmup,
        "target": {"added_p50_ms": TARGET_P50_MS},
        "results": results,
    }
    path = write_json(result_path("gateway_bench", save=args.save, out=args.out), out)
    print(f"wrote {shown(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
