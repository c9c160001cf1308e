"""The ``ledger`` command imports only the module of the command it runs."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli.main import COMMANDS

HEAVY = ("aiohttp", "ledger.cli.serve", "ledger.cli.witness", "ledger.cli.monitor",
         "ledger.http.run", "structlog", "rich", "cryptography", "ledger.cli.add",
         "ledger.log.facade")
NOT_FOR_HELP = ("aiohttp", "asyncpg", "aiosqlite", "sqlite3", "asyncio", "structlog", "rich",
                "tqdm", "prometheus_client", "cryptography", "nacl", "ledger.log",
                "ledger.storage.sqlite", "ledger.jobs", "ledger.http", "ledger.client",
                "ledger.cosigner", "ledger.witness", "ledger.mirror", "ledger.monitor")
"""Modules a command's ``--help`` must not import: they are for running it."""


def _run(*args: str, stdin: bytes = b"", watch: tuple[str, ...] = HEAVY
         ) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` in a fresh interpreter that prints, last on stderr (at exit, so after
    ``--version`` too), which of ``watch`` it imported."""
    probe = ("import sys, atexit; "
             f"atexit.register(lambda: print(sorted(m for m in {watch!r} if m in sys.modules), "
             "file=sys.stderr)); "
             "from ledger.cli.main import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", probe, *args], input=stdin.decode(),
                          capture_output=True, text=True, timeout=60, check=False)


def test_add_loads_only_what_appending_needs(tmp_path: Path) -> None:
    """``ledger add`` is often one step of a script: it does not import the HTTP stack, the
    other commands, the logging stack (structlog and rich: about 0.1 s of a 0.3 s ``add``; it
    logs nothing) or the post-quantum signer, and ``--help`` still lists every command."""
    log = str(tmp_path / "log")
    init = _run("init", log, "--origin", "example.com/loading")
    assert init.returncode == 0, init.stderr
    assert init.stderr.splitlines()[-1] == "['ledger.log.facade']"  # no logging stack either
    run = _run("add", log, stdin=b"a\nb\n", watch=(*HEAVY, "uvloop"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "1"]
    # its own module and the log; no HTTP, no structlog, no rich, no ML-DSA, no uvloop (~5 ms
    # to import, for a loop that only waits for two threads here)
    assert run.stderr.splitlines()[-1] == "['ledger.cli.add', 'ledger.log.facade']"
    listing = subprocess.run([sys.executable, "-m", "ledger.cli.main", "--help"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    for command in ("witness", "mirror", "monitor", "init", "add", "serve", "export", "verify"):
        assert f"    {command} " in listing


def test_version_and_help_import_no_command() -> None:
    """``--version`` and ``--help`` list from :data:`COMMANDS`: no command module, no log code
    and no logging stack are imported for them."""
    for flag in ("--version", "--help"):
        run = _run(flag)
        assert run.returncode == 0, run.stderr
        assert run.stderr.splitlines()[-1] == "[]"
    assert _run("--version").stdout.startswith("ledger ")


def test_the_static_table_says_what_each_module_registers() -> None:
    for name, command in COMMANDS.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(command.module).register(sub)
        assert {a.dest: a.help for a in sub._choices_actions}.get(name) == command.help, name


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_commands_help_imports_nothing_that_runs_it(command: str) -> None:
    """``ledger add --help`` is as quick as ``ledger --help``: no log, store or HTTP code."""
    run = _run(command, "--help", watch=NOT_FOR_HELP)
    assert run.returncode == 0, run.stderr
    assert "usage: ledger " + command in run.stdout
    assert run.stderr.splitlines()[-1] == "[]"
