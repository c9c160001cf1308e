"""``ledger add`` of a file of lines, the whole command, against the same work in pymerkle 7.

A user who has 100,000 lines to log runs one command and waits for it: the figure that matters
is the wall time of the whole process, interpreter start-up and imports included. Ours is
``ledger init`` once (untimed) then ``ledger add DIR < lines`` (durable: WAL, synchronous=FULL,
a signed checkpoint, each entry's index printed). pymerkle has no command, so its side is the
smallest script doing the same: read the lines from stdin, ``SqliteTree.append_entries`` them
in one transaction on WAL + synchronous=FULL (:func:`benchmarks.ledgerbench.peer.open_pymerkle`)
and print the root. Both read the same file from stdin with their stdout sent to /dev/null, in
turn, best of ``rounds`` fresh directories each, so one slow moment of a shared machine does not
decide the ratio.

Both run from compiled bytecode, as an installed command does: pymerkle's ``.pyc`` files were
written when pip installed it, ours are written first (``compileall``), and the children run
without ``PYTHONDONTWRITEBYTECODE``. Otherwise, in an environment that sets it, every module of
ours changed since its last ``.pyc`` would be compiled again in each timed run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import REPO
from benchmarks.ledgerbench import peer

_PYMERKLE_ADD = """
import sys
from pathlib import Path
from benchmarks.ledgerbench.peer import open_pymerkle
lines = sys.stdin.buffer.read().split(b"\\n")
if lines and lines[-1] == b"":
    lines.pop()
tree = open_pymerkle(Path(sys.argv[1]))
tree.append_entries(lines)
print(tree.get_size(), tree.get_root().hex())
"""


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(cmd: list[str], stdin: Path) -> float:
    with stdin.open("rb") as f:
        t0 = time.perf_counter()
        subprocess.run(cmd, stdin=f, stdout=subprocess.DEVNULL, check=True, cwd=REPO, env=_ENV)
        return time.perf_counter() - t0


def whole_command(lines: int = 100_000, rounds: int = 3) -> dict[str, Any]:
    """Best-of-``rounds`` wall seconds of ``ledger add`` and of the pymerkle script on
    ``lines`` random 64-hex-digit lines, and their rates (lines per second of wall time)."""
    ledger = str(Path(sys.executable).with_name("ledger"))
    out: dict[str, Any] = {"lines": lines, "rounds": rounds}
    subprocess.run([sys.executable, "-m", "compileall", "-q", "ledger", "benchmarks"],
                   cwd=REPO, env=_ENV, stdout=subprocess.DEVNULL, check=True)
    with tempfile.TemporaryDirectory(prefix="bench-add-") as tmp:
        work = Path(tmp)
        source = work / "lines.txt"
        source.write_bytes(b"".join(os.urandom(32).hex().encode() + b"\n"
                                    for _ in range(lines)))
        ours: list[float] = []
        theirs: list[float] = []
        for r in range(rounds):
            log = work / f"log{r}"
            subprocess.run([ledger, "init", str(log), "--origin", "example.com/bench-add"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            ours.append(_timed([ledger, "add", str(log)], source))
            if peer.available():
                theirs.append(_timed([sys.executable, "-c", _PYMERKLE_ADD,
                                      str(work / f"pymerkle{r}.db")], source))
    out["ledger_add_s"] = min(ours)
    out["ledger_add_lines_per_s"] = lines / min(ours)
    if theirs:
        out["pymerkle_s"] = min(theirs)
        out["pymerkle_lines_per_s"] = lines / min(theirs)
        out["vs_pymerkle"] = min(theirs) / min(ours)
    else:
        out["pymerkle"] = f"not installed ({peer.INSTALL_HINT})"
    return out


if __name__ == "__main__":
    # Just this comparison, outside the scorecard: python -m benchmarks.ledgerbench.cli_add
    import argparse
    import json

    from benchmarks._common import cpu_model

    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--lines", type=int, default=100_000, help="lines to add (default 100,000)")
    p.add_argument("--rounds", type=int, default=3, help="best of (default 3)")
    a = p.parse_args()
    print(json.dumps({"cpu": cpu_model(), **whole_command(a.lines, a.rounds)}, indent=2))
