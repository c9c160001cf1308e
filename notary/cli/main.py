"""``notary``: serve the notary, manage API keys and receipt keys, hash call records."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ledger.cli import main as ledger_main
from ledger.cli.commands import Command, add_commands, add_version
from ledger.cli.pipe import STDOUT_CLOSED, stdout_reader_gone
from ledger.process.exitcodes import ExitCode, UsageError

COMMANDS = {
    "serve": Command("notary.cli.serve", "run the notary HTTP service"),
    "hash": Command("notary.cli.hash", "print the call_sha256 of a call record file ('-': stdin)"),
    "apikey": Command("notary.cli.apikey", "manage API keys"),
    "migrate": Command("notary.cli.migrate", "bring the store to the current layout; recover "
                       "receipts issued under other base URLs"),
    "keys": Command("notary.cli.keys", "manage receipt signing keys"),
    "log": Command("notary.cli.log", "the notary's sequence of logs"),
    "backup": Command("notary.cli.backup", "copy the data directory while the notary runs "
                      "(SQLite online backup, keys included, modes kept)"),
    "restore": Command("notary.cli.backup", "restore a backup into the data directory, refusing "
                       "one older than the log has become (that would fork the log)"),
    "verify": Command("notary.cli.verify", "verify a notarized tool call (five levels)"),
    "check": Command("notary.cli.check", "check the whole store: database pages, every tile, "
                     "bundle and the checkpoint"),
    "mcp": Command("notary.cli.mcp", "run the verifier as an MCP server (stdio, or --http)"),
    "witness": ledger_main.COMMANDS["witness"],
    "mirror": ledger_main.COMMANDS["mirror"],
    "gateway": Command("notary.cli.gateway",
                       "run the authorization gateway in front of an MCP server"),
    "account": Command("notary.cli.account", "manage accounts"),
    "names": Command("notary.cli.names", "which account holds which server name"),
    "monitor": Command("notary.cli.monitor", ledger_main.COMMANDS["monitor"].help),
}
"""Each command's module and help, in the order ``--help`` lists them. Only the module of the
command being run is imported (:mod:`ledger.cli.commands`): ``notary verify`` of each of
thousands of saved calls should not pay for the HTTP server that ``serve`` needs."""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: the sub-parser of the command it runs, a help-only stub for
    each of the others; every command's real sub-parser when ``argv`` is None."""
    parser = argparse.ArgumentParser(prog="notary", description=__doc__)
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub, COMMANDS, argv)
    return parser


def _database(args: argparse.Namespace) -> tuple[Path | None, str | None]:
    """The notary database a command uses, and the command that checks it (for messages)."""
    # deferred: the settings and store modules, which only a failing command's message needs
    from notary.cli import store_args
    from notary.serving.commands import store_command
    from notary.serving.config import ConfigError
    from notary.serving.keys import Paths

    if not hasattr(args, "data"):
        return None, None
    try:
        chosen = store_args.settings(args)
    except (ConfigError, UsageError):
        return None, None
    return Paths(chosen.data).db, store_command(chosen, "check")


def _uses_postgres(args: argparse.Namespace) -> bool:
    # deferred: the settings and store modules, which only a failing command's message needs
    from notary.cli import store_args
    from notary.core.databases import is_postgres
    from notary.serving.config import ConfigError

    try:
        return hasattr(args, "data") and is_postgres(store_args.settings(args).database)
    except (ConfigError, UsageError):
        return False


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    args.argv = argv  # what --workers passes on
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, not at exit: a reader that went away is caught below
        return code
    except BrokenPipeError as e:
        if stdout_reader_gone(e):  # `notary backup | head -1`: no traceback
            return STDOUT_CLOSED
        raise
    except Exception as e:
        return _failed(args, e)


def _failed(args: argparse.Namespace, e: Exception) -> int:
    """The exit code of a command that raised ``e``, after one ``notary: error:`` line; ``e``
    again when it is a bug, whose traceback is worth seeing."""
    # deferred: a command that succeeds does not pay for the damage checks
    from ledger.storage.damage import corruption_in, damage_message

    if isinstance(e, UsageError) and corruption_in(e) is None:  # the common mistake: quick
        print(f"notary: error: {e}", file=sys.stderr)
        return ExitCode.USAGE
    # (already loaded by a command that raised one of their errors; the settings are not)
    # deferred: the modules of the other errors a command may raise
    from ledger.log.errors import LogIntegrityError
    from ledger.process.keyfile import KeyFileError
    from ledger.storage.base import StoreError
    from notary.serving.config import ConfigError

    if isinstance(e, UsageError | ConfigError | KeyFileError | StoreError):
        if corruption_in(e) is None:
            print(f"notary: error: {e}", file=sys.stderr)
            return ExitCode.USAGE
        db, check_command = _database(args)
        print(f"notary: error: {damage_message(db, e, check_command)}", file=sys.stderr)
        return ExitCode.USAGE
    # A damaged store: not a bug to show as a traceback, nor worth retrying.
    db, check_command = _database(args)
    if isinstance(e, LogIntegrityError):
        where = "the PostgreSQL store" if _uses_postgres(args) else db
        print(f"notary: error: the log in {where} does not match its signed checkpoint "
              f"({e}). Restore the newest backup and run `{check_command}` before serving "
              "it.", file=sys.stderr)
        return ExitCode.USAGE
    if corruption_in(e) is None:
        raise e
    print(f"notary: error: {damage_message(db, e, check_command)}", file=sys.stderr)
    return ExitCode.USAGE


if __name__ == "__main__":
    raise SystemExit(main())
