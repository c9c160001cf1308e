"""The ``notary`` command imports only the module of the command it runs, and what that command
needs: ``notary verify`` of a saved call offline loads no HTTP stack and no logging stack.

Scripts verify thousands of saved calls one process each; start-up is what they wait for
(timed in benchmarks/docs/cli_start.md). What is asserted here is which modules load, which
does not depend on how busy the machine is.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from notary.cli.log import OPERATOR_REASONS
from notary.cli.main import COMMANDS
from notary.cli.trust_args import DEFAULT_STATE_TEXT
from notary.core.successor import REASONS
from notary.verifier.state import DEFAULT_STATE_PATH
from tests.notary_server import LiveNotary

COMMAND_MODULES = sorted({c.module for c in COMMANDS.values()})
HEAVY = ("aiohttp", "structlog", "rich", "uvicorn", "mcp", "prometheus_client", "asyncio",
         "notary.verifier", "notary.serving.config", "notary.store", "notary.http.app",
         *COMMAND_MODULES)
NOT_FOR_HELP = (
    # what cost 0.1-1.8 s of `notary serve|apikey|verify|... --help` before it was deferred
    "aiohttp", "asyncpg", "aiosqlite", "sqlite3", "asyncio", "structlog", "rich", "tqdm",
    "prometheus_client", "mcp", "mcp_types", "pydantic", "opentelemetry", "uvicorn",
    "starlette", "cryptography", "nacl", "cbor2", "icu", "re2",
    "ledger.log", "ledger.storage.sqlite", "ledger.jobs", "ledger.http", "ledger.client.http",
    "notary.store", "notary.http", "notary.verifier", "notary.gateway", "notary.operator",
    "notary.serving.keys", "notary.mcp_server",
)
"""Modules a command's ``--help`` (or a usage error, which argparse reports as early) must not
import: the store backends, the HTTP and logging stacks, the mcp SDK, the key code and the
verifier are for running a command."""


def _run(*args: str, watch: tuple[str, ...] = HEAVY
         ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``notary ARGS`` in a fresh interpreter, and which of ``watch`` it imported."""
    probe = ("import sys, atexit; "
             f"atexit.register(lambda: print(sorted(m for m in {watch!r} if m in sys.modules), "
             "file=sys.stderr)); "
             "from notary.cli.main import main; sys.exit(main(sys.argv[1:]))")
    run = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True,
                         timeout=60, check=False)
    loaded = ast.literal_eval(run.stderr.splitlines()[-1])
    return run, loaded


def test_version_help_and_a_mistyped_command_import_no_command() -> None:
    run, loaded = _run("--version")
    assert run.returncode == 0 and run.stdout.startswith("notary "), run.stderr
    assert loaded == []
    run, loaded = _run("--help")
    assert run.returncode == 0, run.stderr
    for name in COMMANDS:
        assert f"    {name} " in run.stdout or f"    {name}\n" in run.stdout, name
    assert loaded == []
    run, loaded = _run("verfiy")
    assert run.returncode == 2 and "invalid choice: 'verfiy'" in run.stderr
    assert loaded == []


def test_hash_loads_only_the_record_code(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"spec": "rs-tool-call/1", "server": "s", "tool": "t",
                                  "arguments": {}, "result": {"content": []},
                                  "salt": "00" * 16}))
    run, loaded = _run("hash", str(record))
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.strip()) == 64
    assert loaded == ["notary.cli.hash"]


async def test_offline_verify_of_a_saved_call_loads_no_http_or_logging(
        notary: LiveNotary, tmp_path: Path) -> None:
    call = await notary.notarize(x=1)
    saved = tmp_path / "call.json"
    saved.write_text(json.dumps(call.saved))
    run, loaded = _run("verify", str(saved), *notary.trust_args(), "--offline", "--no-state")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "VALID: every required level passed." in run.stdout, run.stdout
    # asyncio runs the verifier's coroutines; the verifier itself is what the command is
    assert loaded == ["asyncio", "notary.cli.verify", "notary.verifier"]


def test_the_static_table_says_what_each_module_registers() -> None:
    """``--help`` lists the commands from :data:`COMMANDS` without importing them: each
    entry's help must be what its module registers, and each module must register its names."""
    for name, command in COMMANDS.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(command.module).register(sub)
        helps = {a.dest: a.help for a in sub._choices_actions}
        assert helps.get(name) == command.help, name


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_commands_help_imports_nothing_that_runs_it(command: str) -> None:
    """``notary COMMAND --help`` builds only that command's parser: a script or a person asking
    for the flags does not wait for the store, the HTTP server or the verifier."""
    run, loaded = _run(command, "--help", watch=NOT_FOR_HELP)
    assert run.returncode == 0, run.stderr
    assert "usage: notary " + command in run.stdout
    assert loaded == []


def test_a_usage_error_imports_nothing_that_runs_the_command() -> None:
    run, loaded = _run("apikey", "create", watch=NOT_FOR_HELP)  # --account is required
    assert run.returncode == 2 and "--account" in run.stderr
    assert loaded == []
    run, loaded = _run("serve", "--max-body", "many", watch=NOT_FOR_HELP)
    assert run.returncode == 2 and "--max-body" in run.stderr
    assert loaded == []


def test_the_help_shows_the_verifiers_default_state_file() -> None:
    """``--state``'s help names the default as text, so as not to import the verifier."""
    assert str(DEFAULT_STATE_PATH) == DEFAULT_STATE_TEXT


def test_the_roll_reasons_an_operator_gives_are_the_successor_records_but_scheduled() -> None:
    """`notary log roll --reason` lists them without loading the record's CBOR codec."""
    assert {*OPERATOR_REASONS, "scheduled"} == set(REASONS)
    assert len(OPERATOR_REASONS) == len(REASONS) - 1
