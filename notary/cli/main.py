"""``notary``: serve the notary, manage API keys and receipt keys, hash call records."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.cli import mirror, monitor, witness
from ledger.cli.pipe import STDOUT_CLOSED, stdout_reader_gone
from ledger.log.sequencer import LogIntegrityError
from ledger.process.exitcodes import ExitCode, UsageError
from ledger.process.keyfile import KeyFileError
from ledger.process.version import package_version
from ledger.storage.base import StoreError
from ledger.storage.damage import corruption_in, damage_message
from notary.cli import (
    account,
    apikey,
    backup,
    check,
    gateway,
    hash,
    keys,
    log,
    mcp,
    migrate,
    names,
    serve,
    store_args,
    verify,
)
from notary.operator.chain_monitor import follow_chain
from notary.operator.watch_server import server_filter
from notary.serving.commands import store_command
from notary.serving.config import ConfigError
from notary.serving.keys import Paths
from notary.store import is_postgres


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="notary", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (serve, hash, apikey, migrate, keys, log, backup, verify, check, mcp,
                   witness, mirror, gateway, account, names):
        module.register(sub)
    monitor.register(sub, watch=server_filter, driver=follow_chain,
                     log_help="the notary's base URL: every log it lists in /v1/ledger is "
                              "audited, from the log of --vkey on, each next log under the "
                              "key its predecessor's successor record names")
    return parser


def _database(args: argparse.Namespace) -> tuple[Path | None, str | None]:
    """The notary database a command uses, and the command that checks it (for messages)."""
    if not hasattr(args, "data"):
        return None, None
    try:
        chosen = store_args.settings(args)
    except (ConfigError, UsageError):
        return None, None
    return Paths(chosen.data).db, store_command(chosen, "check")


def _uses_postgres(args: argparse.Namespace) -> bool:
    try:
        return hasattr(args, "data") and is_postgres(store_args.settings(args).database)
    except (ConfigError, UsageError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what --workers passes on
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, not at exit: a reader that went away is caught below
        return code
    except BrokenPipeError as e:
        if stdout_reader_gone(e):  # `notary backup | head -1`: no traceback
            return STDOUT_CLOSED
        raise
    except (UsageError, ConfigError, KeyFileError, StoreError) as e:
        if corruption_in(e) is None:
            print(f"notary: error: {e}", file=sys.stderr)
            return ExitCode.USAGE
        db, check_command = _database(args)
        print(f"notary: error: {damage_message(db, e, check_command)}", file=sys.stderr)
        return ExitCode.USAGE
    except Exception as e:
        # A damaged store: not a bug to show as a traceback, nor worth retrying.
        db, check_command = _database(args)
        if isinstance(e, LogIntegrityError):
            where = "the PostgreSQL store" if _uses_postgres(args) else db
            print(f"notary: error: the log in {where} does not match its signed checkpoint "
                  f"({e}). Restore the newest backup and run `{check_command}` before serving "
                  "it.", file=sys.stderr)
            return ExitCode.USAGE
        if corruption_in(e) is None:
            raise
        print(f"notary: error: {damage_message(db, e, check_command)}", file=sys.stderr)
        return ExitCode.USAGE


if __name__ == "__main__":
    raise SystemExit(main())
