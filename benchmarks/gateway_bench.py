"""Latency the authorization gateway adds to a tool call, a resource read and a prompt,
and where that time goes.

Two ``mcp.Client`` sessions call a tool of an in-process upstream MCP server
(``tests/gateway_upstream``): one directly, one through the gateway (in process, with the
upstream in process behind it), alternately, one call at a time, so that whatever else the
machine does falls on both series alike; the difference of the medians is the latency the
gateway adds. The notary is the real ``notary serve`` in its own process on loopback.

Per call the gateway does: the policy evaluation, the decision record hashed and notarized
(before forwarding), one local SQLite write of the decision evidence, the upstream call, the
final result's record hashed and notarized, and the receipts (authorization block,
rs-tool-call/1, AER-1). A non-idempotent tool adds the request's hash, a lookup of its key,
and two fsync'ed SQLite writes: the decision evidence written with the key claimed in one
transaction before the upstream call, the outcome recorded before the answer.
Each part is timed separately and printed; what is left is split in two: the gateway's own
CPU inside its request handler (what no part covers), and the in-process MCP plumbing between
the client and the gateway (the SDK's request and result handling outside the handler). The
operator log is written as ``notary gateway`` writes it under an MCP client (JSON lines),
to /dev/null.

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

TARGET_P50_MS = 5.0  # a tool call
TARGET_READ_P50_MS = 3.0  # a resource read or a prompt
HANDLER = "handler"  # the gateway's whole handling of one request (not a part of its own)
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
    """Time spent in each part of the current call (calls are sequential).

    Synchronous parts are exclusive: one that runs inside another (the result record hashed
    while the AER-1 receipt is built) counts for itself only.
    """

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.calls: list[dict[str, float]] = []
        self._inner: list[float] = []  # time taken by nested synchronous parts, per level

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

    def wrap_sync(self, owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._inner.append(0.0)
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                self.current[label] += spent - self._inner.pop()
                if self._inner:
                    self._inner[-1] += spent

        setattr(owner, name, timed)

    def next_call(self, total: float) -> None:
        self.current["total"] = total
        self.calls.append(dict(self.current))
        self.current = defaultdict(float)


async def measure(direct: Any, gw: Any, tool: str, args: dict[str, Any], calls: int,
                  warmup: int, meta: Callable[[int], dict[str, Any] | None], parts: Parts
                  ) -> tuple[list[float], list[float]]:
    """A tool called directly and through the gateway, alternately (``meta`` goes to the
    gateway only: the idempotency key)."""
    def op(client: Any, gateway: bool) -> Callable[[int], Awaitable[None]]:
        async def call(i: int) -> None:
            result = await client.call_tool(tool, args, meta=meta(i) if gateway else None)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result}")
        return call

    return await measure_pair(op(direct, False), op(gw, True), calls, warmup, parts)


async def measure_pair(direct: Callable[[int], Awaitable[None]],
                       gw: Callable[[int], Awaitable[None]], calls: int, warmup: int,
                       parts: Parts) -> tuple[list[float], list[float]]:
    """Time ``direct(i)`` and ``gw(i)`` alternately, one call at a time, after ``warmup``
    untimed pairs: what else the machine does falls on both series alike."""
    plain: list[float] = []
    through: list[float] = []
    parts.calls.clear()
    for i in range(warmup + calls):
        started = time.perf_counter()
        await direct(i)
        direct_elapsed = time.perf_counter() - started
        parts.current = defaultdict(float)
        started = time.perf_counter()
        await gw(i)
        elapsed = time.perf_counter() - started
        if i >= warmup:
            plain.append(direct_elapsed)
            through.append(elapsed)
            parts.next_call(elapsed)
    return plain, through


def ms(values: list[float], q: float) -> float:
    return percentile(sorted(values), q) * 1e3


async def run_setting(name: str, base: Path, calls: int, warmup: int) -> dict[str, Any]:
    import structlog
    from mcp import Client

    from ledger.process.structured_logs import configure
    from notary.core.records import CallRecord
    from notary.gateway import GatewayConfig, authorization, build_gateway, server, toolcalls
    from notary.gateway.runtime import GatewayRuntime
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

        def save_label(_self: Any, _evidence: Any, claim: Any = None) -> str:
            return ("save decision (SQLite, no fsync)" if claim is None
                    else "save decision + claim key (SQLite fsync)")

        parts.wrap(NotaryClient, "notarize", notary_label)
        parts.wrap(GatewayStore, "save_decision", save_label)
        parts.wrap(GatewayStore, "finish", "record outcome (SQLite fsync)")
        parts.wrap(GatewayRuntime, "send_upstream", "upstream call")
        parts.wrap(authorization, "decide", "policy evaluation")
        parts.wrap_sync(authorization, "sha256_jcs", "hash decision record")
        parts.wrap_sync(CallRecord, "call_sha256", "hash result record")
        parts.wrap_sync(toolcalls, "request_digest", "hash request (idempotency key)")
        parts.wrap_sync(toolcalls, "_aer1", "AER-1 receipt")
        # The whole of the gateway's handling of a request (inside the SDK's shaping of it):
        # the rest of a call is the in-process MCP plumbing between client and gateway.
        parts.wrap(server, "aer1_result_middleware", HANDLER)
        # The operator log as `notary gateway` writes it (JSON lines: stderr is no terminal
        # under an MCP client), formatted but not shown.
        configure("json", "info")
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(
            open(os.devnull, "w")))  # noqa: SIM115

        echo = {"text": "hello"}
        transfer = {"amount": 100, "recipient": "acct", "approval": {"approved": True}}
        async with Client(upstream, mode="auto") as direct, \
                Client(build_gateway(config), mode="auto") as gw:
            direct_echo, gw_echo = await measure(direct, gw, "echo", echo, calls, warmup,
                                                 lambda i: None, parts)
            echo_parts = parts.calls[:]
            direct_transfer, gw_transfer = await measure(
                direct, gw, "payments.transfer", transfer, calls, warmup,
                lambda i: {"io.zkmcp/idempotency-key": f"{name}-{i}"}, parts)
            transfer_parts = parts.calls[:]
        reads = await measure_reads(config, base, calls, warmup, parts)
    finally:
        notary.terminate()
        notary.wait(15)

    def summarize(direct: list[float], through: list[float], per_call: list[dict[str, float]]
                  ) -> dict[str, Any]:
        labels = sorted({k for c in per_call for k in c if k not in ("total", HANDLER)})
        medians = {k: ms([c.get(k, 0.0) for c in per_call], 50) for k in labels}
        rest = [c["total"] - sum(c.get(k, 0.0) for k in labels) for c in per_call]
        in_handler = [c.get(HANDLER, 0.0) - sum(c.get(k, 0.0) for k in labels)
                      for c in per_call]
        plumbing = [c["total"] - c.get(HANDLER, 0.0) for c in per_call]
        return {
            "direct_p50_ms": ms(direct, 50), "direct_p99_ms": ms(direct, 99),
            "gateway_p50_ms": ms(through, 50), "gateway_p99_ms": ms(through, 99),
            "added_p50_ms": ms(through, 50) - ms(direct, 50),
            "added_p99_ms": ms(through, 99) - ms(direct, 99),
            "parts_p50_ms": medians,
            "gateway_cpu_and_client_p50_ms": ms(rest, 50),
            "gateway_cpu_in_handler_p50_ms": ms(in_handler, 50),
            "mcp_plumbing_p50_ms": ms(plumbing, 50),
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
            plain, through = await measure_pair(op(direct), op(gw), calls, warmup, parts)
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
                  f"in-process MCP plumbing {s['gateway_cpu_and_client_p50_ms']:.2f} (the "
                  f"gateway's own CPU in its handler {s['gateway_cpu_in_handler_p50_ms']:.2f}, "
                  f"client-gateway MCP plumbing {s['mcp_plumbing_p50_ms']:.2f})")
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
        "target": {"added_p50_ms": TARGET_P50_MS, "read_added_p50_ms": TARGET_READ_P50_MS},
        "results": results,
    }
    path = write_json(result_path("gateway_bench", save=args.save, out=args.out), out)
    print(f"wrote {shown(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
