"""The ``ledger`` command imports only the module of the command it runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("aiohttp", "ledger.cli.serve", "ledger.cli.witness", "ledger.cli.monitor",
         "ledger.http.run")


def _run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` in a fresh interpreter that prints, last on stderr, which of
    :data:`HEAVY` it imported."""
    probe = ("import sys; from ledger.cli.main import main; code = main(sys.argv[1:]); "
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr); "
             "sys.exit(code)")
    return subprocess.run([sys.executable, "-c", probe, *args], input=stdin.decode(),
                          capture_output=True, text=True, timeout=60, check=False)


def test_add_loads_only_what_appending_needs(tmp_path: Path) -> None:
    """``ledger add`` is often one step of a script: it does not import the HTTP stack or the
    other commands, and ``--help`` still lists every command."""
    log = str(tmp_path / "log")
    assert _run("init", log, "--origin", "example.com/loading").returncode == 0
    run = _run("add", log, stdin=b"a\nb\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "1"]
    assert run.stderr.splitlines()[-1] == "[]"
    listing = subprocess.run([sys.executable, "-m", "ledger.cli.main", "--help"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    for command in ("witness", "mirror", "monitor", "init", "add", "serve", "export", "verify"):
        assert f"    {command} " in listing
