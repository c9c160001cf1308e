"""How long the ``notary`` and ``ledger`` commands take to start: whole processes, wall time.

A script that verifies thousands of saved calls runs ``notary verify`` once per call, so what
it waits for is interpreter start-up plus imports, not the verification. Each command is run
as a user runs it (the console scripts next to this interpreter, stdout to /dev/null) and
compared with ``python -c pass`` run in the same round, just before it: the figure is the time
added to a bare interpreter, as the median of those per-round differences (and the best
round). Targets: a command that does no I/O adds at most 150 ms; ``notary verify`` of a saved
call offline at most 250 ms. The saved call is issued once, untimed, by a ``notary serve`` on
loopback; ``notary hash`` reads a small record file (I/O of one small file, counted with the
commands that do none). Every command's own ``--help`` is a row of its own, judged as a command
that does no I/O.
Method and figures: benchmarks/docs/cli_start.md.
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
    machine_info,
    now_utc,
    result_path,
    shown,
    start_notary,
    table,
    write_json,
)
from ledger.cli.main import COMMANDS as LEDGER_COMMANDS
from notary.cli.main import COMMANDS as NOTARY_COMMANDS

NO_IO_BUDGET_MS = 150.0
OFFLINE_VERIFY_BUDGET_MS = 250.0


async def _saved_call(url: str, key: str) -> dict[str, Any]:
    """One tool call notarized by the notary at ``url``, as ``notary verify`` reads it."""
    from notary.sdk import NotaryClient
    from notary.sdk.mcp import Notarizer

    arguments = {"a": 1, "b": 2}
    wire = {"content": [{"type": "text", "text": "3"}], "structuredContent": {"result": 3},
            "isError": False}
    async with NotaryClient(url, key) as client:
        result = await Notarizer(client, "bench").notarize_wire("add", arguments, wire)
    return {"tool": "add", "arguments": arguments, "result": result}


def _commands(work: Path, url: str, key: str) -> list[tuple[str, list[str], float | None]]:
    """(label, argv, budget in ms or None) of every command timed."""
    bin_dir = Path(sys.executable).parent
    notary, ledger = str(bin_dir / "notary"), str(bin_dir / "ledger")
    call = work / "call.json"
    call.write_text(json.dumps(asyncio.run(_saved_call(url, key))))
    jwks = work / "jwks.json"
    jwks.write_bytes(urllib.request.urlopen(url + "/.well-known/jwks.json").read())
    vkey = json.load(urllib.request.urlopen(url + "/v1/ledger"))["vkey"]
    record = work / "record.json"
    record.write_text(json.dumps({"spec": "rs-tool-call/1", "server": "bench", "tool": "add",
                                  "arguments": {"a": 1}, "result": {"content": []},
                                  "salt": "00" * 16}))
    return [
        ("notary --version", [notary, "--version"], NO_IO_BUDGET_MS),
        ("notary --help", [notary, "--help"], NO_IO_BUDGET_MS),
        ("ledger --version", [ledger, "--version"], NO_IO_BUDGET_MS),
        ("ledger --help", [ledger, "--help"], NO_IO_BUDGET_MS),
        ("notary hash RECORD", [notary, "hash", str(record)], NO_IO_BUDGET_MS),
        ("notary verify CALL --offline",
         [notary, "verify", str(call), "--jwks", str(jwks), "--log-key", vkey, "--offline",
          "--no-state"], OFFLINE_VERIFY_BUDGET_MS),
        *((f"{cli} {name} --help", [path, name, "--help"], NO_IO_BUDGET_MS)
          for cli, path, table in (("notary", notary, NOTARY_COMMANDS),
                                   ("ledger", ledger, LEDGER_COMMANDS))
          for name in table),
    ]


def _wall_ms(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env=env, cwd=REPO, check=False)
    elapsed = (time.perf_counter() - t0) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed


def measure(commands: list[tuple[str, list[str], float | None]], rounds: int
            ) -> dict[str, Any]:
    """Each command ``rounds`` times, interleaved, each run right after a ``python -c pass``
    so that both see the same moment of a shared machine."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bare = [sys.executable, "-c", "pass"]
    for argv in [bare, *(c[1] for c in commands)]:
        _wall_ms(argv, env)  # warm the page cache and .pyc files; not counted
    samples: dict[str, dict[str, list[float]]] = {
        label: {"bare": [], "command": []} for label, _, _ in commands}
    for _ in range(rounds):
        for label, argv, _ in commands:
            samples[label]["bare"].append(_wall_ms(bare, env))
            samples[label]["command"].append(_wall_ms(argv, env))
    out: dict[str, Any] = {}
    for label, argv, budget in commands:
        s = samples[label]
        added = [c - b for c, b in zip(s["command"], s["bare"], strict=True)]
        out[label] = {
            "argv": [Path(a).name if a.startswith("/") and i == 0 else a
                     for i, a in enumerate(argv)],
            "budget_added_ms": budget,
            "command_median_ms": statistics.median(s["command"]),
            "command_min_ms": min(s["command"]),
            "bare_median_ms": statistics.median(s["bare"]),
            "added_median_ms": statistics.median(added),
            "added_min_ms": min(s["command"]) - min(s["bare"]),
            "met": None if budget is None else statistics.median(added) <= budget,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="runs of each command")
    parser.add_argument("--save", action="store_true", help="write results/cli_start.json")
    parser.add_argument("--out", help="write the JSON here instead")
    args = parser.parse_args()

    started = now_utc()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cli-start-") as tmp:
        work = Path(tmp)
        proc, url, key = start_notary(work / "data")
        try:
            commands = _commands(work, url, key)
        finally:
            proc.terminate()
            proc.wait(15)
        rows = measure(commands, args.rounds)
    result = {
        "benchmark": "cli_start", "started": started, "finished": now_utc(),
        "command": command_line(), "machine": machine_info(), "rounds": args.rounds,
        "loadavg_start": load_start, "loadavg_end": os.getloadavg(), "commands": rows,
        "targets": {label: r["met"] for label, r in rows.items() if r["met"] is not None},
    }
    print(f"Start-up of whole commands, {args.rounds} rounds, ms "
          f"({result['machine']['cpu_model']}, load {load_start[0]:.1f}):")
    print(table(["command", "median", "best", "python -c pass", "added (median)",
                 "added (best)", "target"],
                [(label, f"{r['command_median_ms']:.0f}", f"{r['command_min_ms']:.0f}",
                  f"{r['bare_median_ms']:.0f}", f"{r['added_median_ms']:.0f}",
                  f"{r['added_min_ms']:.0f}",
                  "—" if r["met"] is None else
                  f"≤ {r['budget_added_ms']:.0f} {'met' if r['met'] else 'MISSED'}")
                 for label, r in rows.items()]))
    path = write_json(result_path("cli_start", save=args.save, out=args.out), result)
    print(f"wrote {shown(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
