"""Helpers shared by the benchmarks: machine facts, timing statistics, tables and JSON output.

Nothing here imports ``ledger`` or ``notary``, nor any benchmark-only (GPL) peer, so every
benchmark script can use it whatever it compares against.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import shlex
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
"""The tracked figures the README quotes: written only when a run is asked to ``--save``."""
LOCAL_RESULTS = RESULTS / "local"
"""Where every other run writes (gitignored), so trying a benchmark leaves the tree clean."""


def result_path(name: str, *, save: bool = False, out: str | os.PathLike[str] | None = None
                ) -> Path:
    """Where a run's JSON goes: ``out`` if given, else ``results/NAME.json`` with ``save``,
    else ``results/local/NAME.json``."""
    if out is not None:
        return Path(out)
    return (RESULTS if save else LOCAL_RESULTS) / f"{name}.json"


# --- machine -------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def filesystem_of(path: str | os.PathLike[str]) -> str:
    """``device fstype`` of the mount holding ``path`` (Linux), for the record."""
    target = os.path.realpath(path)
    best = ("", "unknown")
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fstype, *_ = line.split()
            if (target == mnt or target.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(
                best[0]
            ):
                best = (mnt, f"{dev} {fstype} on {mnt}")
    except OSError:
        pass
    return best[1]


def machine_info(workdir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model(),
        "mem_total_bytes": mem_total_bytes(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
    }
    if workdir is not None:
        info["workdir_fs"] = filesystem_of(workdir)
    return info


def proc_status_kib(field: str, pid: int | str = "self") -> int | None:
    """A ``/proc/<pid>/status`` memory field such as ``VmHWM`` or ``VmRSS``, in KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


# --- timing ----------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of already sorted values."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


def latency_summary(samples_ns: Iterable[int]) -> dict[str, float]:
    """median / p99 / mean / min / max in microseconds, and the sample count."""
    s = sorted(samples_ns)
    us = [v / 1000 for v in s]
    return {
        "n": len(us),
        "median_us": statistics.median(us) if us else float("nan"),
        "p99_us": percentile(us, 99),
        "mean_us": statistics.fmean(us) if us else float("nan"),
        "min_us": us[0] if us else float("nan"),
        "max_us": us[-1] if us else float("nan"),
    }


def rate(fn: Callable[[], int], min_seconds: float) -> tuple[float, int, float]:
    """Call ``fn`` (which returns how many operations it did) until ``min_seconds`` have passed.

    Returns (operations per second, operations, seconds).
    """
    ops = 0
    start = time.perf_counter()
    while True:
        ops += fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return ops / elapsed, ops, elapsed


# --- formatting ------------------------------------------------------------------------------


def si(x: float | None, digits: int = 3) -> str:
    """Compact human number: 1234567 -> '1.23 M'."""
    if x is None or x != x:
        return "n/a"
    ax = abs(x)
    for div, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if ax >= div:
            return f"{x / div:.{digits}g}{suffix}"
    return f"{x:.{digits}g}"


def fmt_us(x: float | None) -> str:
    if x is None or x != x:
        return "n/a"
    if x >= 10_000:
        return f"{x / 1000:.1f} ms"
    if x >= 100:
        return f"{x:.0f} µs"
    return f"{x:.1f} µs"


def fmt_ratio(x: float | None) -> str:
    if x is None or x != x:
        return "n/a"
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, markdown: bool = False) -> str:
    """A plain-text (aligned) or GitHub-markdown table of the given rows."""
    body = [[str(c) for c in r] for r in rows]
    cols = len(headers)
    widths = [len(h) for h in headers]
    for r in body:
        for i in range(cols):
            widths[i] = max(widths[i], len(r[i]) if i < len(r) else 0)
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(out)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            (c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])) for i, c in enumerate(cells)
        ).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in body)])


def command_line() -> str:
    """The command that is running, as a user would type it (relative to the repository)."""
    exe = sys.executable
    if exe.startswith(str(REPO) + os.sep):
        exe = os.path.relpath(exe, REPO)
    return " ".join(shlex.quote(a) for a in [exe, *sys.argv])


def now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shown(path: Path) -> str:
    """``path`` as a message names it: relative to the checkout when inside it."""
    return str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


def write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as pretty JSON atomically (a ``.tmp`` sibling, then rename)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, out)
    return out


# --- a notary to measure against -----------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_notary(data: Path, *extra: str, env: dict[str, str] | None = None
                 ) -> tuple[subprocess.Popen[bytes], str, str]:
    """``notary serve`` on a fresh data directory and loopback port: (process, URL, API key).

    Run as its own process, as an operator would, so that its CPU is its own. ``extra`` are
    more ``serve`` flags (``--workers 2``, ``--database URL``); the API key is made with the
    same ``--database``; ``env``, more environment variables (``OTEL_*``).
    """
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    database = list(extra[extra.index("--database"):][:2]) if "--database" in extra else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "notary.cli.main", "serve", "--data", str(data), "--listen",
         f"127.0.0.1:{port}", "--log-format", "json", *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("notary serve did not start") from None
            time.sleep(0.05)
    key = subprocess.run(
        [sys.executable, "-m", "notary.cli.main", "apikey", "create", "--data", str(data),
         *database, "--account", "bench"],
        capture_output=True, text=True, env=env, cwd=REPO, check=True,
    ).stdout.strip().splitlines()[-1]
    return proc, url, key
