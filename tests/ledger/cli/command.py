"""The ``ledger`` command as the CLI tests run it: a real subprocess, and what a clean run or a
clean failure looks like (the exit status, one readable message, never a traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["ORIGIN", "Run", "fails", "ledger", "lines", "ok"]

ORIGIN = "example.com/cli-test"
Run = subprocess.CompletedProcess[bytes]


def ledger(*args: str | Path, stdin: bytes | None = None, timeout: float = 60) -> Run:
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", *map(str, args)],
        input=stdin, capture_output=True, timeout=timeout, check=False,
    )


def ok(run: Run) -> str:
    assert run.returncode == 0, run.stderr.decode()
    assert b"Traceback" not in run.stderr
    return run.stdout.decode()


def fails(run: Run) -> str:
    """A clean failure: non-zero exit, one readable message, no traceback."""
    err = run.stderr.decode()
    assert run.returncode != 0
    assert "Traceback" not in err
    assert err.startswith("ledger: "), err
    return err


def lines(prefix: str, n: int) -> bytes:
    """``n`` numbered lines, one entry each for ``ledger add``."""
    return b"".join(f"{prefix}-{i}\n".encode() for i in range(n))
