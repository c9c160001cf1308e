"""Receipts/s, latency and server CPU per born-complete receipt, over HTTP on loopback.

Figures and method: benchmarks/docs/http_notarize.md.

One run sweeps 1, 4, 16, 64 and 256 keep-alive connections. At each level, side by side and in
turn: a bare aiohttp handler (``benchmarks/_bare_aiohttp.py``: parse the JSON body, answer a
receipt-sized JSON; the framework's ceiling on this machine), then ``notary serve`` on SQLite
with durable group commit, where every answer is a signed receipt with its inclusion proof and
signed checkpoint. The load generator is ``wrk`` when installed (one thread), else
``benchmarks/_loadgen.py``, each in its own process on the same cores.

Server CPU per request is the process's user+system time (all threads, ``/proc/<pid>/stat``)
over the measured run divided by the requests it answered: a figure that other load on the
shared machine barely moves, unlike the rates. The load generator's own CPU per request is
recorded too, to see whether it, not the server, is the limit.

``--profile`` then samples the notary with ``py-spy`` (all threads: the event loop and the
database threads) under the same load at ``--profile-at`` connections, and puts the top
functions, as server µs per request, into the JSON.

``--pq-compare`` runs two notaries side by side at each level, one publishing dual-signed
checkpoints (Ed25519 and ML-DSA-44, the default) and one with ``--pq-checkpoints off``, while a
reader polls each one's ``/checkpoint`` five times a second (what makes the log sign with
ML-DSA-44: a monitor, the explorer, a witness round), so the cost of the post-quantum line shows
as a ratio in one run.

``--grow N`` measures instead how a receipt's cost moves as the log grows: one notary driven at
64 connections until its log holds N receipts, a row per 10 s run (rate, CPU per receipt, RSS,
bytes on disk per receipt, and the p50 of looking a logged receipt up with its proof).

``--tracing-compare`` runs two notaries side by side at each level, one untraced
(``OTEL_SDK_DISABLED=true``: what every notary without ``OTEL_*`` runs) and one exporting a span
per request, notarization and commit by OTLP to a sink on loopback (docs/tracing.md), and
prints the ratio and each one's CPU per receipt. What the untraced one pays for tracing being
possible at all is measured by the same command on the commit before tracing existed.

    .venv/bin/python -m benchmarks.http_notarize [--seconds 10] [--quick] [--profile]
    .venv/bin/python -m benchmarks.http_notarize --grow 1000000
    .venv/bin/python -m benchmarks.http_notarize --tracing-compare [--connections 1,16,64]
    .venv/bin/python -m benchmarks.http_notarize --scorecard [--grow 3000000] [--save]

``--scorecard`` measures every target of the page's table in one run (the sweep at 1, 16 and 64
connections, PostgreSQL beside SQLite, ``ledger add`` against pymerkle, growth to a million
receipts) and prints target, figure and verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import linecache
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import (
    REPO,
    command_line,
    cpu_model,
    free_port,
    machine_info,
    now_utc,
    result_path,
    start_notary,
    table,
    write_json,
)
from benchmarks._otlp_sink import otlp_sink

HERE = Path(__file__).resolve().parent
LEVELS = (1, 4, 16, 64, 256)
WRK_SCRIPT = HERE / "_wrk_notarize.lua"
TARGETS = {
    "vs_bare_at_16": 0.40,
    "p99_ms_at_16": 25.0,
    "receipts_per_s_at_64": 5000.0,
    "server_cpu_us_at_64": 150.0,
    "p50_ms_at_1": 1.5,
}


@dataclass
class Target:
    """A server under test: its process and the URL the load generator posts to."""

    name: str
    proc: subprocess.Popen[bytes]
    url: str
    key: str | None
    base: str  # for /metrics (notary only)
    processes: int = 1  # with several, /metrics is one worker's: batch figures are left out
    database_pid: int | None = None  # PostgreSQL's postmaster: its CPU is counted apart


def wait_healthy(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not become healthy")


def _stat_cpu(path: Path) -> float:
    fields = path.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``notary serve --workers N`` runs N worker processes)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its worker processes, all their threads
    (``/proc/<pid>/stat``)."""
    total = 0.0
    for p in process_tree(pid):
        try:
            total += _stat_cpu(Path(f"/proc/{p}/stat"))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the main threads (the event loops) and of all other threads together
    (database and executor threads), from ``/proc/<pid>/task/<tid>/stat``, over the process
    and its workers. A thread that ended during a run takes its CPU with it, so the two may
    sum to a little less than the processes."""
    out = {"event loop": 0.0, "other threads": 0.0}
    for p in process_tree(pid):
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except (FileNotFoundError, ProcessLookupError):
            continue
        for task in tasks:
            try:
                cpu = _stat_cpu(task / "stat")
            except (FileNotFoundError, ProcessLookupError):
                continue
            out["event loop" if task.name == str(p) else "other threads"] += cpu
    return out


def children_cpu() -> float:
    """CPU of reaped children: the difference around one load-generator run is its CPU."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _wrk(url: str, key: str | None, seconds: float, connections: int, nonce: str = ""
         ) -> dict[str, Any]:
    """One wrk run; its digests are ``nonce`` (48 hex digits, random by default) then a
    16-digit counter from 1, one thread, so ``digest(nonce, i)`` names the i-th request."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s",
           "-s", str(WRK_SCRIPT), url, "--", nonce or os.urandom(24).hex()]
    if key:
        cmd.append(key)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    raw = json.loads(out.strip().splitlines()[-1])
    secs = raw["duration_us"] / 1e6
    errors = sum(raw[k] for k in raw if k.startswith("errors_"))
    return {"requests_per_s": raw["requests"] / secs, "requests": raw["requests"],
            "completed": raw["requests"], "errors": errors, "p50_ms": raw["p50_us"] / 1000,
            "p90_ms": raw["p90_us"] / 1000, "p99_ms": raw["p99_us"] / 1000,
            "max_ms": raw["max_us"] / 1000, "concurrency": connections, "wrk": raw}


def _python(url: str, key: str | None, seconds: float, warmup: float, connections: int
            ) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks._loadgen", url, "--seconds", str(seconds),
           "--concurrency", str(connections), "--warmup", str(warmup)]
    if key:
        cmd += ["--key", key]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def drive(target: Target, loadgen: str, seconds: float, warmup: float, connections: int
          ) -> dict[str, Any]:
    """One measured run at ``connections``; CPU is counted over exactly that run."""
    if loadgen == "wrk" and warmup > 0:
        _wrk(target.url, target.key, warmup, connections)
    load_before = os.getloadavg()[0]
    metrics_before = _metrics(target)
    cpu0, child0 = cpu_seconds(target.proc.pid), children_cpu()
    db0 = cpu_seconds(target.database_pid) if target.database_pid else 0.0
    threads0 = thread_cpu(target.proc.pid)
    if loadgen == "wrk":
        res = _wrk(target.url, target.key, seconds, connections)
    else:
        res = _python(target.url, target.key, seconds, warmup, connections)
    served = max(res["completed"], 1)
    res["server_cpu_us_per_request"] = (cpu_seconds(target.proc.pid) - cpu0) / served * 1e6
    threads1 = thread_cpu(target.proc.pid)
    res["server_cpu_us_per_request_by_thread"] = {
        role: (threads1[role] - threads0[role]) / served * 1e6 for role in threads1}
    res["client_cpu_us_per_request"] = (children_cpu() - child0) / served * 1e6
    if target.database_pid:
        res["database_cpu_us_per_request"] = (cpu_seconds(target.database_pid) - db0
                                              ) / served * 1e6
    res["load_average"] = [load_before, os.getloadavg()[0]]
    if metrics_before and target.processes == 1:
        after = _metrics(target)
        batches = after["ledger_batch_size_count"] - metrics_before["ledger_batch_size_count"]
        entries = after["ledger_batch_size_sum"] - metrics_before["ledger_batch_size_sum"]
        res["batches"] = batches
        res["mean_batch"] = entries / batches if batches else None
        res["receipts_issued"] = (after["notary_receipts_issued_total"]
                                  - metrics_before["notary_receipts_issued_total"])
    return res


def _metrics(target: Target) -> dict[str, float]:
    if target.key is None:
        return {}
    with urllib.request.urlopen(target.base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    names = ("ledger_batch_size_count", "ledger_batch_size_sum", "notary_receipts_issued_total")
    out = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in out:
            out[name] = float(value)
    return out


def start_bare() -> Target:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "_bare_aiohttp.py"), str(port)])
    wait_healthy(port, proc)
    url = f"http://127.0.0.1:{port}"
    return Target("bare aiohttp", proc, url + "/v1/tool-calls", None, url)


def start_notary_target(workdir: Path, *extra: str, env: dict[str, str] | None = None
                        ) -> Target:
    proc, url, key = start_notary(workdir / "notary-data", *extra, env=env)
    processes = int(extra[extra.index("--workers") + 1]) if "--workers" in extra else 1
    return Target("notary", proc, url + "/v1/tool-calls", key, url, processes)


def start_postgres_target(workdir: Path, flags: list[str], postmaster: int | None) -> Target:
    target = start_notary_target(workdir, *flags)
    target.database_pid = postmaster
    return target


@contextlib.contextmanager
def store_flags(database: str) -> Iterator[list[str]]:
    """``serve`` flags for the store: none for SQLite; for ``postgres``, a throwaway cluster
    on loopback (:func:`postgres_cluster`)."""
    if database == "sqlite":
        yield []
        return
    with postgres_cluster() as (flags, _):
        yield flags


@contextlib.contextmanager
def postgres_cluster() -> Iterator[tuple[list[str], int | None]]:
    """A throwaway PostgreSQL cluster on loopback (the tests' helper: initdb and pg_ctl as the
    ``postgres`` user): the ``serve`` flags of a fresh database in it, and its postmaster's pid
    (its CPU and its backends' is the database's share of a receipt)."""
    from tests.pgcluster import new_database, start_cluster  # deferred: PostgreSQL runs only

    with start_cluster() as cluster:
        yield ["--database", new_database(cluster)], cluster.pid()


def stop(target: Target) -> None:
    target.proc.terminate()
    try:
        target.proc.wait(30)
    except subprocess.TimeoutExpired:
        target.proc.kill()
        target.proc.wait(10)


# --- profile -------------------------------------------------------------------------------


def _short(path: str) -> str:
    for marker in ("/site-packages/", "/lib/python3."):
        if marker in path:
            tail = path.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker == "/lib/python3." else tail
    try:
        return os.path.relpath(path, REPO)
    except ValueError:
        return path


def _frame(text: str) -> tuple[str, str, int]:
    """``function (file:line)`` as (``file:function``, file, line): a function is one row."""
    name, _, where = text.rpartition(" (")
    if not name:
        return text, "", 0
    file, _, line = where.rstrip(")").rpartition(":")
    return f"{_short(file)}:{name}", file, int(line) if line.isdigit() else 0


_WAITS = (".get(", ".poll(", ".select(", ".wait(", ".acquire(")


def _is_wait(file: str, line: int) -> bool:
    """A leaf frame at a blocking call (a queue get, epoll, a lock): the thread is waiting.

    py-spy leaves out threads the kernel shows sleeping, but on a loaded machine it catches
    threads just woken or runnable at such lines; they would otherwise show as CPU."""
    text = linecache.getline(file, line) if file else ""
    return any(w in text for w in _WAITS)


# Where a receipt's CPU goes, item by item: (item, functions whose inclusive time it adds,
# functions whose inclusive time it takes out). Event-loop items; "the rest" items take what
# the named ones leave of their frame, so the items add up to the measured CPU.
# On uvloop (the default) the socket's reads and writes are libuv's C, which py-spy does not see:
# reading counts in the loop's own time, writing in the request's task (its ``_serve`` frame);
# what stays named is recognizing the request (httptools, called from ``data_received``).
_READ = "ledger/http/server.py:Connection.data_received"
_WRITE = "asyncio/selector_events.py:_SelectorSocketTransport.write"  # asyncio's loop only
_SERVE = "ledger/http/server.py:Connection._serve"
_HANDLE = "notary/http/routes/tool_calls.py:plain_issue.<locals>.handle"
_ISSUE = "notary/http/routes/tool_calls.py:_issue"
_AUTH = "notary/serving/service.py:Notary.authenticate"
_NOTARIZE = "notary/serving/service.py:Notary.notarize"
_COMMIT = "ledger/log/sequencer.py:Sequencer._run"
_HOOK = "notary/serving/service.py:Notary.hook"
_SIGN = "notary/core/receipts.py:ReceiptKey.sign_entries"
_PROOFS = "ledger/log/sequencer.py:Sequencer._proofs"
_SCREEN = "ledger/log/sequencer.py:Sequencer._screened"
_CHECKPOINT = "ledger/core/checkpoint.py:sign_checkpoint"
_INTEGRATE = "ledger/core/compact.py:integrate"
_LONE_COMMIT = "ledger/storage/sqlite.py:SqliteStore._finish"
_COMMIT_PARTS = (_PROOFS, _SCREEN, _CHECKPOINT, _INTEGRATE, _LONE_COMMIT)
COST_ITEMS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("recognizing the request (httptools)", (_READ,), ()),
    ("the API key, from memory", (_AUTH,), ()),
    ("the body: strict JSON and field checks", (_ISSUE,), (_NOTARIZE,)),
    ("Notary.notarize on the loop: id, time, entry, queueing, proof text, receipt",
     (_NOTARIZE,), ()),
    ("the answer's bytes, metrics, the handler's frame", (_HANDLE,), (_ISSUE, _AUTH)),
    ("writing the answer (asyncio's loop; uvloop's is in the task)", (_WRITE,), ()),
    ("the request's task", (_SERVE,), (_HANDLE, _WRITE)),
    ("commit: signing the receipts (Ed25519)", (_SIGN,), ()),
    ("commit: the receipts' rows and usage", (_HOOK,), (_SIGN,)),
    ("commit: the batch's inclusion proofs", (_PROOFS,), ()),
    ("commit: the duplicate screen", (_SCREEN,), ()),
    ("commit: the checkpoint's signature", (_CHECKPOINT,), ()),
    ("commit: integrate", (_INTEGRATE,), ()),
    ("commit: SQLite statements and COMMIT on the loop (lone commits)", (_LONE_COMMIT,), ()),
    ("commit: the rest (transaction, tiles, store calls)", (_COMMIT,), (_HOOK, *_COMMIT_PARTS)),
)


def cost_items(inclusive: Counter[str], scale: float, loop_us: float,
               other_us: float) -> list[dict[str, Any]]:
    """:data:`COST_ITEMS` in µs per request, from the event loop's inclusive sample counts
    (``scale``: µs per request of one sample), plus what the named frames leave of the loop's
    measured CPU (scheduling, wake-ups) and the other threads' CPU (the database writer)."""
    out = []
    for name, plus, minus in COST_ITEMS:
        n = sum(inclusive[f] for f in plus) - sum(inclusive[f] for f in minus)
        out.append({"item": name, "us_per_request": round(n * scale, 1)})
    named = sum(inclusive[f] for f in (_READ, _SERVE, _COMMIT)) * scale
    out.append({"item": "event loop: scheduling, wake-ups and the rest",
                "us_per_request": round(loop_us - named, 1)})
    out.append({"item": "other threads: the database writer (statements, COMMIT, fsync)",
                "us_per_request": round(other_us, 1)})
    return out


def summarize_pyspy(raw: str, rate: int, requests: int, measured: dict[str, float],
                    top: int = 40) -> dict[str, Any]:
    """Self and inclusive server µs per request by function, per thread role, from py-spy's
    raw (collapsed-stack) output.

    Samples say where a thread is, not how much CPU it had (on a loaded machine a runnable
    thread waiting for a core is sampled too), so each role's samples are scaled to the CPU
    that role measurably used per request (``measured``, from /proc): the shares come from
    the sampler, the totals from the kernel. Leaf frames at a blocking wait are left out."""
    per_role: dict[str, dict[str, Counter[str]]] = defaultdict(
        lambda: {"self": Counter(), "inclusive": Counter()})
    role_samples: Counter[str] = Counter()
    waits: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        role = "event loop" if frames[0].endswith(": MainThread") else "other threads"
        funcs = [_frame(f) for f in frames[1:]]
        if not funcs:
            continue
        n = int(count)
        if _is_wait(funcs[-1][1], funcs[-1][2]):
            waits[role] += n
            continue
        role_samples[role] += n
        per_role[role]["self"][funcs[-1][0]] += n
        for f in {f[0] for f in funcs}:
            per_role[role]["inclusive"][f] += n
    out: dict[str, Any] = {
        "sampler": "py-spy", "rate_hz": rate, "requests": requests,
        "samples": dict(role_samples), "wait_samples_left_out": dict(waits),
        "sampled_us_per_request": {r: n * 1e6 / rate / max(requests, 1)
                                   for r, n in role_samples.items()},
        "us_per_request": {r: measured.get(r, 0.0) for r in role_samples}, "roles": {}}
    for role, tables in per_role.items():
        scale = measured.get(role, 0.0) / role_samples[role]
        out["roles"][role] = {
            kind: [{"function": f, "us_per_request": round(n * scale, 2),
                    "share": round(n / role_samples[role], 4)}
                   for f, n in counter.most_common(top)]
            for kind, counter in tables.items()}
    if "event loop" in per_role:
        out["items"] = cost_items(per_role["event loop"]["inclusive"],
                                  measured.get("event loop", 0.0) / role_samples["event loop"],
                                  measured.get("event loop", 0.0),
                                  measured.get("other threads", 0.0))
    return out


def profile(target: Target, loadgen: str, seconds: float, warmup: float, connections: int,
            rate: int) -> dict[str, Any]:
    """Sample the notary with py-spy during one more run at ``connections``."""
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(pyspy).exists():
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install -e '.[bench]'")
    if loadgen == "wrk" and warmup > 0:
        _wrk(target.url, target.key, warmup, connections)
    with tempfile.TemporaryDirectory(prefix="bench-pyspy-") as tmp:
        out = Path(tmp) / "raw.txt"
        spy = subprocess.Popen([pyspy, "record", "--pid", str(target.proc.pid), "--rate",
                                str(rate), "--format", "raw", "--threads", "--output", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # attached
        res = drive(target, loadgen, seconds, 0 if loadgen == "wrk" else warmup, connections)
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        spy.wait(60)
        summary = summarize_pyspy(out.read_text(), rate, res["completed"],
                                  res["server_cpu_us_per_request_by_thread"])
    summary["connections"] = connections
    summary["run"] = res
    return summary


def unprofiled_items(p: dict[str, Any], run: dict[str, Any]) -> None:
    """Add to each of the profile's items its share of the unprofiled run's CPU per request at
    the same level: the sampler itself costs the process 15-25% more CPU, in every item."""
    total = sum(i["us_per_request"] for i in p.get("items", ()))
    for i in p.get("items", ()):
        i["unprofiled_us_per_request"] = round(
            i["us_per_request"] * run["server_cpu_us_per_request"] / total, 1) if total else 0.0


def print_profile(p: dict[str, Any], n: int = 15) -> None:
    print(f"\nprofile at {p['connections']} connections (py-spy {p['rate_hz']} Hz, scaled to "
          "the measured CPU per request: "
          + ", ".join(f"{r} {v:.0f} µs" for r, v in p["us_per_request"].items()) + ")")
    for role, tables in sorted(p["roles"].items()):
        for kind in ("self", "inclusive"):
            # Frames under which every sample lies (the loop, the thread bootstrap) say nothing.
            rows = [[r["function"], f"{r['us_per_request']:.1f}", f"{r['share']:.0%}"]
                    for r in tables[kind] if r["share"] < 0.99][:n]
            print(f"\n{role}, {kind} time:")
            print(table(["function", "µs/req", "share"], rows))
    if "items" in p:
        print("\nitem by item (µs per request):")
        print(table(["item", "µs/req", "unprofiled run"],
                    [[i["item"], f"{i['us_per_request']:.1f}",
                      f"{i.get('unprofiled_us_per_request', 0.0):.1f}"] for i in p["items"]]))


# --- main ----------------------------------------------------------------------------------


def targets_met(sweep: dict[int, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if 16 in sweep:
        out["vs_bare_at_16"] = sweep[16]["vs_bare"] >= TARGETS["vs_bare_at_16"]
        out["p99_ms_at_16"] = sweep[16]["notary"]["p99_ms"] <= TARGETS["p99_ms_at_16"]
    if 64 in sweep:
        n = sweep[64]["notary"]
        out["receipts_per_s_at_64"] = n["requests_per_s"] >= TARGETS["receipts_per_s_at_64"]
        out["server_cpu_us_at_64"] = (n["server_cpu_us_per_request"]
                                      <= TARGETS["server_cpu_us_at_64"])
    if 1 in sweep:
        out["p50_ms_at_1"] = sweep[1]["notary"]["p50_ms"] <= TARGETS["p50_ms_at_1"]
    return out


def render(sweep: dict[int, dict[str, Any]], *, markdown: bool = False) -> str:
    rows = []
    for c, r in sorted(sweep.items()):
        n, b = r["notary"], r["bare"]
        rows.append([c, f"{n['requests_per_s']:,.0f}", f"{n['p50_ms']:.1f} ms",
                     f"{n['p99_ms']:.1f} ms", f"{b['requests_per_s']:,.0f}/s",
                     f"{r['vs_bare']:.0%}", f"{n['server_cpu_us_per_request']:.0f} µs",
                     f"{b['server_cpu_us_per_request']:.0f} µs",
                     f"{n['client_cpu_us_per_request']:.0f} µs",
                     f"{n['mean_batch']:.1f}" if n.get("mean_batch") else "",
                     n["errors"] + b["errors"], f"{n['load_average'][0]:.1f}"])
    return table(["connections", "notary receipts/s", "p50", "p99", "bare aiohttp", "ratio",
                  "notary CPU/req", "bare CPU/req", "loadgen CPU/req", "mean batch", "errors",
                  "load avg"], rows, markdown=markdown)


def render_pq(sweep: dict[int, dict[str, Any]], *, markdown: bool = False) -> str:
    """Dual-signed checkpoints against Ed25519-only ones, level by level, in one run."""
    rows = []
    for c, r in sorted(sweep.items()):
        n, e = r["notary"], r["notary_ed25519_only"]
        rows.append([c, f"{n['requests_per_s']:,.0f}", f"{e['requests_per_s']:,.0f}",
                     f"{r['pq_vs_ed25519_only']:.0%}", f"{n['p50_ms']:.2f} ms",
                     f"{e['p50_ms']:.2f} ms", f"{n['p99_ms']:.1f} ms", f"{e['p99_ms']:.1f} ms",
                     f"{n['server_cpu_us_per_request']:.0f} µs",
                     f"{e['server_cpu_us_per_request']:.0f} µs"])
    return table(["connections", "dual-signed receipts/s", "Ed25519-only receipts/s", "ratio",
                  "p50 dual", "p50 Ed25519", "p99 dual", "p99 Ed25519", "CPU/req dual",
                  "CPU/req Ed25519"], rows, markdown=markdown)


def render_tracing(sweep: dict[int, dict[str, Any]], *, markdown: bool = False) -> str:
    """A notary exporting its spans against one without ``OTEL_*``, level by level."""
    rows = []
    for c, r in sorted(sweep.items()):
        n, t = r["notary"], r["notary_traced"]
        rows.append([c, f"{n['requests_per_s']:,.0f}", f"{t['requests_per_s']:,.0f}",
                     f"{r['traced_vs_untraced']:.0%}", f"{n['p99_ms']:.1f} ms",
                     f"{t['p99_ms']:.1f} ms", f"{n['server_cpu_us_per_request']:.0f} µs",
                     f"{t['server_cpu_us_per_request']:.0f} µs"])
    return table(["connections", "untraced receipts/s", "traced receipts/s", "ratio",
                  "p99 untraced", "p99 traced", "CPU/req untraced", "CPU/req traced"], rows,
                 markdown=markdown)


@contextlib.contextmanager
def polling(targets: list[Target], interval: float = 0.2) -> Iterator[None]:
    """A reader fetching each target's ``/checkpoint`` every ``interval`` seconds meanwhile."""
    done = threading.Event()

    def poll() -> None:
        while not done.wait(interval):
            for t in targets:
                with contextlib.suppress(OSError):
                    urllib.request.urlopen(f"{t.base}/checkpoint", timeout=2).read()

    thread = threading.Thread(target=poll, daemon=True)
    if targets:
        thread.start()
    try:
        yield
    finally:
        done.set()
        if targets:
            thread.join(5)


# --- growth ------------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its children (workers, verify pool), from /proc."""
    total = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def log_size(base: str) -> int:
    with urllib.request.urlopen(base + "/v1/ledger", timeout=10) as r:
        return int(json.loads(r.read())["size"])


def lookup_p50_ms(base: str, digests: list[str]) -> float:
    """Median time of ``GET /v1/tool-calls?call_sha256=`` (a receipt with its proof to the latest
    checkpoint) over one keep-alive connection, for digests logged earlier in the run."""
    import http.client  # deferred: only the growth mode reads receipts back

    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    times = []
    try:
        for d in digests:
            t0 = time.perf_counter()
            conn.request("GET", f"/v1/tool-calls?call_sha256={d}")
            resp = conn.getresponse()
            resp.read()
            times.append(time.perf_counter() - t0)
            if resp.status != 200:
                raise RuntimeError(f"lookup of a logged digest answered {resp.status}")
    finally:
        conn.close()
    times.sort()
    return times[len(times) // 2] * 1000


def grow(target: Target, data: Path, until: int, chunk: float, connections: int,
         lookups: int = 300) -> list[dict[str, Any]]:
    """Drive ``target`` with wrk in ``chunk``-second runs until its log holds ``until``
    receipts; after each run record the rate, latency and CPU of that run and the log's size,
    the server's RSS, the data directory's bytes and the lookup p50 for digests of earlier
    runs. One row a run: the rate against the log's size is the curve."""
    rows: list[dict[str, Any]] = []
    logged: list[tuple[str, int]] = []  # (nonce, requests completed) per run
    size = log_size(target.base)
    t_start = time.monotonic()
    rng = random.Random(0)
    while size < until:
        nonce = os.urandom(24).hex()
        cpu0 = cpu_seconds(target.proc.pid)
        res = _wrk(target.url, target.key, chunk, connections, nonce)
        served = max(res["completed"], 1)
        cpu_us = (cpu_seconds(target.proc.pid) - cpu0) / served * 1e6
        if res["errors"]:
            raise RuntimeError(f"{res['errors']} errors in a growth run: {res['wrk']}")
        logged.append((nonce, res["completed"]))
        size = log_size(target.base)
        sample = [rng.choice(logged) for _ in range(lookups)]
        digests = [n + f"{rng.randint(1, max(1, int(c * 0.9))):016x}" for n, c in sample]
        row = {"size": size, "receipts_per_s": res["requests_per_s"], "p50_ms": res["p50_ms"],
               "p99_ms": res["p99_ms"], "server_cpu_us_per_request": cpu_us,
               "rss_bytes": rss_bytes(target.proc.pid), "disk_bytes": tree_bytes(data),
               "lookup_p50_ms": lookup_p50_ms(target.base, digests),
               "elapsed_s": time.monotonic() - t_start,
               "load_average": os.getloadavg()[0]}
        rows.append(row)
        print(f"{size:>10,} receipts: {row['receipts_per_s']:,.0f}/s, p99 "
              f"{row['p99_ms']:.1f} ms, {cpu_us:.0f} µs CPU, RSS "
              f"{row['rss_bytes'] / 2**20:.0f} MiB, {row['disk_bytes'] / max(size, 1):.0f} "
              f"B/receipt on disk, lookup p50 {row['lookup_p50_ms']:.2f} ms", flush=True)
    return rows


def grow_summary(rows: list[dict[str, Any]], window: int = 3) -> dict[str, Any]:
    """The rate of the last ``window`` runs over the first ``window`` (the first run starts on
    an empty log), and the figures of the last run."""
    first = rows[:window]
    last = rows[-window:]

    def mean(rs: list[dict[str, Any]], k: str) -> float:
        return float(sum(r[k] for r in rs)) / len(rs)

    return {"rate_first": mean(first, "receipts_per_s"), "rate_last": mean(last, "receipts_per_s"),
            "last_vs_first": mean(last, "receipts_per_s") / mean(first, "receipts_per_s"),
            "cpu_first": mean(first, "server_cpu_us_per_request"),
            "cpu_last": mean(last, "server_cpu_us_per_request"),
            "size": rows[-1]["size"], "rss_first": rows[0]["rss_bytes"],
            "rss_last": rows[-1]["rss_bytes"],
            "bytes_per_receipt": rows[-1]["disk_bytes"] / max(rows[-1]["size"], 1),
            "lookup_p50_ms_last": rows[-1]["lookup_p50_ms"]}


def beside_an_empty_log(grown: Target, workdir: Path, chunk: float, connections: int,
                        pairs: int = 3) -> dict[str, Any]:
    """The grown notary and a fresh one (its log empty at the start) driven in turn, ``pairs``
    times each, which first alternating: growth's cost as the ratio of their median rates in
    one window of time. The rows' first against last compares runs minutes apart, and on a
    shared VM the rate moves ±15% from one 10 s row to the next whatever the log's size
    (benchmarks/docs/http_notarize.md), so that ratio says as much about the machine."""
    fresh = start_notary_target(workdir)
    runs: dict[str, list[dict[str, Any]]] = {"grown": [], "fresh": []}
    try:
        for i in range(pairs):
            for name in (("fresh", "grown") if i % 2 == 0 else ("grown", "fresh")):
                target = grown if name == "grown" else fresh
                runs[name].append(drive(target, "wrk", chunk, 1, connections))
        sizes = {"grown": log_size(grown.base), "fresh": log_size(fresh.base)}
    finally:
        stop(fresh)

    def median(name: str, key: str) -> float:
        return float(statistics.median(r[key] for r in runs[name]))

    rate = {name: median(name, "requests_per_s") for name in runs}
    return {"pairs": pairs, "seconds": chunk, "sizes_after": sizes, "runs": runs,
            "rate_grown": rate["grown"], "rate_fresh": rate["fresh"],
            "grown_vs_fresh": rate["grown"] / rate["fresh"],
            "cpu_grown": median("grown", "server_cpu_us_per_request"),
            "cpu_fresh": median("fresh", "server_cpu_us_per_request")}


def describe_beside(b: dict[str, Any]) -> str:
    """One line for :func:`beside_an_empty_log`'s result."""
    return (f"{b['grown_vs_fresh']:.0%} ({b['rate_fresh']:,.0f} → {b['rate_grown']:,.0f}/s, "
            f"CPU {b['cpu_fresh']:.0f} → {b['cpu_grown']:.0f} µs a receipt; medians of "
            f"{b['pairs']} alternating runs, the logs at {b['sizes_after']['fresh']:,} and "
            f"{b['sizes_after']['grown']:,} after them)")


def render_grow(rows: list[dict[str, Any]], *, markdown: bool = False, marks: int = 10) -> str:
    """About ``marks`` rows spread evenly over the log's sizes, the first and last always."""
    step = max(1, len(rows) // marks)
    picked = rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else [])
    return table(["receipts in the log", "receipts/s", "p50", "p99", "CPU/receipt", "RSS",
                  "disk/receipt", "lookup p50"],
                 [[f"{r['size']:,}", f"{r['receipts_per_s']:,.0f}", f"{r['p50_ms']:.1f} ms",
                   f"{r['p99_ms']:.1f} ms", f"{r['server_cpu_us_per_request']:.0f} µs",
                   f"{r['rss_bytes'] / 2**20:.0f} MiB",
                   f"{r['disk_bytes'] / max(r['size'], 1):.0f} B",
                   f"{r['lookup_p50_ms']:.2f} ms"] for r in picked], markdown=markdown)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=10, help="per run (default 10)")
    p.add_argument("--warmup", type=float, default=1, help="untimed seconds before each run")
    p.add_argument("--connections", default=",".join(map(str, LEVELS)),
                   help="comma-separated levels (default 1,4,16,64,256)")
    p.add_argument("--quick", action="store_true", help="3 s per run")
    p.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto",
                   help="wrk if installed (auto), or benchmarks/_loadgen.py")
    p.add_argument("--profile", action="store_true",
                   default=os.environ.get("BENCH_PROFILE", "") not in ("", "0"),
                   help="sample the notary with py-spy (also BENCH_PROFILE=1)")
    p.add_argument("--profile-at", default="64", help="levels to profile (default 64)")
    p.add_argument("--profile-rate", type=int, default=200, help="py-spy samples/s")
    p.add_argument("--workers", type=int, default=1,
                   help="notary serve --workers N (CPU counted over all the processes)")
    p.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite",
                   help="the store: SQLite in --data (default), or a throwaway PostgreSQL "
                        "cluster on loopback")
    p.add_argument("--pq-compare", action="store_true",
                   help="also run a notary with --pq-checkpoints off, side by side, with a "
                        "reader polling /checkpoint on both")
    p.add_argument("--tracing-compare", action="store_true",
                   help="a second notary beside the first, exporting its spans by OTLP to a "
                        "sink on loopback: the cost of tracing, level by level")
    p.add_argument("--save", action="store_true",
                   help="write the tracked benchmarks/results/http_notarize[-…].json")
    p.add_argument("--out", type=Path, help="JSON output (default: results/local/)")
    p.add_argument("--grow", type=int, metavar="N",
                   help="instead of the sweep: drive one notary at --grow-connections until "
                        "its log holds N receipts, a row per --grow-chunk seconds (rate, CPU, "
                        "RSS, bytes on disk, lookup p50 against the log's size); needs wrk")
    p.add_argument("--grow-chunk", type=float, default=10, help="seconds a growth row (10)")
    p.add_argument("--grow-connections", type=int, default=64, help="(default 64)")
    p.add_argument("--scorecard", action="store_true",
                   help="every target of the round in one run: the sweep at 1, 16 and 64, "
                        "PostgreSQL beside SQLite at 64, `ledger add` vs pymerkle, growth to "
                        "--grow N (default 1M); a table of target, figure and verdict")
    a = p.parse_args()
    if a.scorecard:
        main_scorecard(a)
        return
    if a.grow:
        main_grow(a)
        return
    seconds = 3 if a.quick else a.seconds
    levels = [int(x) for x in a.connections.split(",") if x]
    loadgen = a.loadgen
    if loadgen == "auto":
        loadgen = "wrk" if shutil.which("wrk") else "python"
    print(f"load generator: {loadgen}; {seconds:g} s per run; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    sweep: dict[int, dict[str, Any]] = {}
    profiles: list[dict[str, Any]] = []
    load_start = os.getloadavg()
    variant = ([f"workers{a.workers}"] if a.workers != 1 else []) + (
        [a.database] if a.database != "sqlite" else []) + (["pq"] if a.pq_compare else []) + (
        ["tracing"] if a.tracing_compare else [])
    name = "-".join(["http_notarize", *variant])
    print(f"notary serve: {a.workers} process(es) on {a.database}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp, \
            store_flags(a.database) as flags, otlp_sink() as sink:
        bare = start_bare()
        try:
            workers = ["--workers", str(a.workers)] if a.workers != 1 else []
            untraced = {"OTEL_SDK_DISABLED": "true"} if a.tracing_compare else None
            notary = start_notary_target(Path(tmp), *workers, *flags, env=untraced)
            ed_only = (start_notary_target(Path(tmp) / "ed25519-only", *workers, *flags,
                                           "--pq-checkpoints", "off")
                       if a.pq_compare else None)
            traced = (start_notary_target(Path(tmp) / "traced", *workers, *flags, env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
                "OTEL_SERVICE_NAME": "bench-notary"}) if a.tracing_compare else None)
            try:
                with polling([notary, ed_only] if ed_only is not None else []):
                    for c in levels:
                        b = drive(bare, loadgen, seconds, a.warmup, c)
                        n = drive(notary, loadgen, seconds, a.warmup, c)
                        sweep[c] = {"bare": b, "notary": n,
                                    "vs_bare": n["requests_per_s"] / b["requests_per_s"]}
                        if ed_only is not None:
                            e = drive(ed_only, loadgen, seconds, a.warmup, c)
                            sweep[c]["notary_ed25519_only"] = e
                            sweep[c]["pq_vs_ed25519_only"] = (n["requests_per_s"]
                                                              / e["requests_per_s"])
                        if traced is not None:
                            t = drive(traced, loadgen, seconds, a.warmup, c)
                            sweep[c]["notary_traced"] = t
                            sweep[c]["traced_vs_untraced"] = (t["requests_per_s"]
                                                              / n["requests_per_s"])
                        print(f"{c:>4} connections: notary {n['requests_per_s']:,.0f}/s "
                              f"(p99 {n['p99_ms']:.1f} ms, "
                              f"{n['server_cpu_us_per_request']:.0f} µs CPU), bare "
                              f"{b['requests_per_s']:,.0f}/s", flush=True)
                if a.profile:
                    for c in (int(x) for x in a.profile_at.split(",") if x):
                        profiles.append(profile(notary, loadgen, seconds, a.warmup, c,
                                                a.profile_rate))
            finally:
                stop(notary)
                if ed_only is not None:
                    stop(ed_only)
                if traced is not None:
                    stop(traced)
        finally:
            stop(bare)
    print()
    print(render(sweep))
    if a.pq_compare:
        print()
        print(render_pq(sweep))
    if a.tracing_compare:
        print()
        print(render_tracing(sweep))
        print(f"OTLP exports received: {sink.exports} ({sink.bytes:,} bytes)")
    met = targets_met(sweep)
    print("targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in met.items()))
    for prof in profiles:
        if prof["connections"] in sweep:
            unprofiled_items(prof, sweep[prof["connections"]]["notary"])
        print_profile(prof)
    result = {"benchmark": name, "when": now_utc(), "command": command_line(),
              "workers": a.workers, "database": a.database,
              "machine": machine_info(), "loadgen": loadgen, "seconds": seconds,
              "warmup": a.warmup, "load_average_start": load_start,
              "load_average_end": os.getloadavg(),
              "sweep": {str(c): r for c, r in sweep.items()},
              "table_markdown": render(sweep, markdown=True),
              "pq_table_markdown": render_pq(sweep, markdown=True) if a.pq_compare else None,
              "tracing_table_markdown": (render_tracing(sweep, markdown=True)
                                         if a.tracing_compare else None),
              "otlp_exports": sink.exports if a.tracing_compare else None,
              "targets": TARGETS, "targets_met": met, "profiles": profiles}
    path = write_json(result_path(name, save=a.save, out=a.out), result)
    print(f"wrote {path}")


# --- the scorecard: every target of the round in one run --------------------------------------


@dataclass(frozen=True)
class Score:
    """One row of the scorecard: what is measured, the target, and how the run is judged."""

    measure: str
    target: str
    figure: str
    met: bool


SCORECARD_ROUNDS = 3
"""Runs of the bare handler and of the notary at each of the scorecard's levels, in turn."""


def in_turn(bare: Target, notary: Target, connections: int, rounds: int, seconds: float,
            warmup: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bare handler and the notary driven in turn ``rounds`` times (which goes first
    alternates): each one's run of median rate, with the median of its runs' CPU per request
    and every run's rate and CPU (``rounds``). One pair moved ±10% from the next on this
    shared VM; the medians of alternating runs are what a ratio between the two should use."""
    runs: dict[str, list[dict[str, Any]]] = {"bare": [], "notary": []}
    for i in range(rounds):
        for name in (("bare", "notary") if i % 2 == 0 else ("notary", "bare")):
            runs[name].append(drive(bare if name == "bare" else notary, "wrk", seconds, warmup,
                                    connections))
    picked = []
    for name in ("bare", "notary"):
        by_rate = sorted(runs[name], key=lambda r: r["requests_per_s"])
        run = dict(by_rate[len(by_rate) // 2])
        run["server_cpu_us_per_request"] = statistics.median(
            r["server_cpu_us_per_request"] for r in runs[name])
        run["rounds"] = [{"requests_per_s": r["requests_per_s"],
                          "server_cpu_us_per_request": r["server_cpu_us_per_request"]}
                         for r in runs[name]]
        picked.append(run)
    return picked[0], picked[1]


def scorecard(a: argparse.Namespace) -> dict[str, Any]:
    """One run, in turn on the same machine: the sweep at 1, 16 and 64 connections against
    the bare handler (:func:`in_turn`, :data:`SCORECARD_ROUNDS` runs of each; a reader polling
    ``/checkpoint`` five times a second, so the log signs dual checkpoints meanwhile), one
    PostgreSQL frontend against SQLite at 64 connections (side by side, twice each), ``ledger
    add`` against pymerkle, then a fresh SQLite notary grown to ``--grow`` receipts (1M by
    default) and that one beside an empty log (:func:`beside_an_empty_log`)."""
    from benchmarks.ledgerbench.cli_add import whole_command  # deferred: only the scorecard

    seconds = 3 if a.quick else a.seconds
    out: dict[str, Any] = {"sweep": {}, "postgres": [], "sqlite_beside_postgres": []}
    with tempfile.TemporaryDirectory(prefix="bench-score-") as tmp:
        work = Path(tmp)
        bare = start_bare()
        notary = start_notary_target(work / "sqlite")
        try:
            with polling([notary]):
                for c in (1, 16, 64):
                    b, n = in_turn(bare, notary, c, 1 if a.quick else SCORECARD_ROUNDS,
                                   seconds, a.warmup)
                    out["sweep"][c] = {"bare": b, "notary": n,
                                       "vs_bare": n["requests_per_s"] / b["requests_per_s"]}
                    print(f"{c:>4} connections: notary {n['requests_per_s']:,.0f}/s, bare "
                          f"{b['requests_per_s']:,.0f}/s", flush=True)
            stop(bare)
            with postgres_cluster() as (flags, postmaster):
                pg = start_postgres_target(work / "postgres", flags, postmaster)
                try:
                    for _ in range(2):
                        out["postgres"].append(drive(pg, "wrk", seconds, a.warmup, 64))
                        out["sqlite_beside_postgres"].append(
                            drive(notary, "wrk", seconds, a.warmup, 64))
                finally:
                    stop(pg)
            print("PostgreSQL: " + ", ".join(f"{r['requests_per_s']:,.0f}/s" for r in
                                             out["postgres"]), flush=True)
        finally:
            stop(notary)
            if bare.proc.poll() is None:
                stop(bare)
        out["ledger_add"] = whole_command()
        print(f"ledger add: {out['ledger_add']}", flush=True)
        grower = start_notary_target(work / "grow")
        try:
            out["growth"] = grow(grower, work / "grow", a.grow or 1_000_000, a.grow_chunk,
                                 a.grow_connections)
            out["growth_beside_empty"] = beside_an_empty_log(
                grower, work / "empty", a.grow_chunk, a.grow_connections)
        finally:
            stop(grower)
    out["growth_summary"] = grow_summary(out["growth"])
    return out


def judge(run: dict[str, Any]) -> list[Score]:
    """The round's targets against one scorecard run."""
    s = run["sweep"]
    n1, n16, n64 = s[1]["notary"], s[16]["notary"], s[64]["notary"]
    pg, lite = run["postgres"], run["sqlite_beside_postgres"]

    def mean(rs: list[dict[str, Any]], k: str) -> float:
        return float(sum(r[k] for r in rs)) / len(rs)

    pg_rate, lite_rate = mean(pg, "requests_per_s"), mean(lite, "requests_per_s")
    pg_cpu = mean(pg, "server_cpu_us_per_request") + mean(pg, "database_cpu_us_per_request")
    lite_cpu = mean(lite, "server_cpu_us_per_request")
    add = run["ledger_add"]
    g = run["growth_summary"]
    b16, b64 = s[16]["bare"], s[64]["bare"]
    cpu_x = n64["server_cpu_us_per_request"] / b64["server_cpu_us_per_request"]
    rows = [
        Score("the bare handler on this CPU, for scale (not judged)", "—",
              f"{b64['requests_per_s']:,.0f}/s at 64, {b64['server_cpu_us_per_request']:.0f}"
              f" µs CPU a request; {b16['requests_per_s']:,.0f}/s at 16", True),
        Score("server CPU per receipt at 64 vs the bare handler's per request",
              "≤ 2.5×", f"{cpu_x:.2f}× ({n64['server_cpu_us_per_request']:.0f} vs "
              f"{b64['server_cpu_us_per_request']:.0f} µs)", cpu_x <= 2.5),
        Score("receipts/s at 16 vs the bare handler, same run", "≥ 40%, p99 ≤ 25 ms",
              f"{s[16]['vs_bare']:.0%} ({n16['requests_per_s']:,.0f} vs "
              f"{b16['requests_per_s']:,.0f}/s), p99 {n16['p99_ms']:.1f} ms",
              s[16]["vs_bare"] >= 0.40 and n16["p99_ms"] <= 25),
        Score("receipts/s at 64 vs the bare handler (not judged)", "—",
              f"{s[64]['vs_bare']:.0%} ({n64['requests_per_s']:,.0f}/s, p99 "
              f"{n64['p99_ms']:.1f} ms)", True),
        Score("p50 at 1 connection, dual signatures", "≤ 1.5 ms", f"{n1['p50_ms']:.2f} ms",
              n1["p50_ms"] <= 1.5),
        Score("`ledger add` of 100k lines vs pymerkle, whole command", "≥ 2×",
              f"{add.get('vs_pymerkle', 0):.2f}× ({add['ledger_add_lines_per_s'] / 1000:,.0f}k"
              f"/s vs {add.get('pymerkle_lines_per_s', 0) / 1000:,.0f}k/s)",
              add.get("vs_pymerkle", 0) >= 2),
        Score("PostgreSQL, one frontend, at 64: rate; CPU (notary + PostgreSQL)",
              "≥ SQLite's; ≤ SQLite's",
              f"{pg_rate / lite_rate:.2f}× ({pg_rate:,.0f} vs {lite_rate:,.0f}/s); "
              f"{mean(pg, 'server_cpu_us_per_request'):.0f}"
              f" + {mean(pg, 'database_cpu_us_per_request'):.0f} vs {lite_cpu:.0f} µs",
              pg_rate >= lite_rate and pg_cpu <= lite_cpu),
    ]
    rows.append(
        Score(f"growth's rows: the last at {g['size']:,} receipts vs the first (not judged: "
              "minutes apart)", "—",
              f"{g['last_vs_first']:.0%} ({g['rate_first']:,.0f} → {g['rate_last']:,.0f}/s; "
              f"RSS {g['rss_first'] / 2**20:.0f} → {g['rss_last'] / 2**20:.0f} MiB; "
              f"{g['bytes_per_receipt']:.0f} B/receipt; lookup p50 "
              f"{g['lookup_p50_ms_last']:.2f} ms)", True))
    beside = run.get("growth_beside_empty")
    if beside is not None:  # scorecards before 2026-12-07 10:00Z judged the rows
        rows.append(Score(f"receipts/s at 64 with {g['size']:,} receipts vs an empty log, "
                          "in turn", "≥ 90%", describe_beside(beside),
                          beside["grown_vs_fresh"] >= 0.90))
    return rows


def render_scores(scores: list[Score], *, markdown: bool = False) -> str:
    return table(["measure", "target", "measured", "met"],
                 [[x.measure, x.target, x.figure, "yes" if x.met else "no"] for x in scores],
                 markdown=markdown)


def main_scorecard(a: argparse.Namespace) -> None:
    if not shutil.which("wrk"):
        raise SystemExit("--scorecard needs wrk (Debian: apt-get install wrk)")
    print(f"scorecard on {cpu_model()}, {os.cpu_count()} CPUs: load average "
          f"{os.getloadavg()[0]:.1f}; targets are ratios to the bare handler, SQLite or "
          "pymerkle measured in this run", flush=True)
    load_start = os.getloadavg()
    run = scorecard(a)
    scores = judge(run)
    print()
    print(f"CPU: {cpu_model()}")
    print(render_scores(scores))
    result = {"benchmark": "http_notarize-scorecard", "when": now_utc(),
              "command": command_line(), "machine": machine_info(), "loadgen": "wrk",
              "load_average_start": load_start, "load_average_end": os.getloadavg(),
              "run": {**run, "sweep": {str(c): r for c, r in run["sweep"].items()}},
              "scores": [vars(x) for x in scores],
              "table_markdown": render_scores(scores, markdown=True),
              "growth_markdown": render_grow(run["growth"], markdown=True)}
    path = write_json(result_path("http_notarize-scorecard", save=a.save, out=a.out), result)
    print(f"wrote {path}")


def main_grow(a: argparse.Namespace) -> None:
    if not shutil.which("wrk"):
        raise SystemExit("--grow needs wrk (Debian: apt-get install wrk)")
    print(f"growing a notary on {a.database} to {a.grow:,} receipts at {a.grow_connections} "
          f"connections, {a.grow_chunk:g} s a row; load average {os.getloadavg()[0]:.1f}",
          flush=True)
    load_start = os.getloadavg()
    name = "-".join(["http_notarize-grow", *([a.database] if a.database != "sqlite" else [])])
    with tempfile.TemporaryDirectory(prefix="bench-grow-") as tmp, \
            store_flags(a.database) as flags:
        notary = start_notary_target(Path(tmp), *flags)
        try:
            rows = grow(notary, Path(tmp), a.grow, a.grow_chunk, a.grow_connections)
            beside = None if a.database != "sqlite" else beside_an_empty_log(
                notary, Path(tmp) / "empty", a.grow_chunk, a.grow_connections)
        finally:
            stop(notary)
    summary = grow_summary(rows)
    print()
    print(render_grow(rows))
    print(f"rate at {summary['size']:,} vs an empty log: {summary['last_vs_first']:.0%} "
          f"({summary['rate_first']:,.0f} -> {summary['rate_last']:,.0f}/s); RSS "
          f"{summary['rss_first'] / 2**20:.0f} -> {summary['rss_last'] / 2**20:.0f} MiB; "
          f"{summary['bytes_per_receipt']:.0f} B/receipt on disk")
    if beside is not None:
        print(f"beside an empty log, in turn: {describe_beside(beside)}")
    result = {"benchmark": name, "when": now_utc(), "command": command_line(),
              "database": a.database, "machine": machine_info(), "loadgen": "wrk",
              "chunk_seconds": a.grow_chunk, "connections": a.grow_connections,
              "load_average_start": load_start, "load_average_end": os.getloadavg(),
              "rows": rows, "summary": summary, "beside_empty": beside,
              "table_markdown": render_grow(rows, markdown=True)}
    path = write_json(result_path(name, save=a.save, out=a.out), result)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
