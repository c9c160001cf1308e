"""``ledger``: create, append to, serve, export and audit a log kept in one directory (its
layout: :mod:`ledger.cli.logdir`), and run a witness, a mirror or a monitor.

Every expected failure ends with one ``ledger: error: …`` line on stderr and a non-zero exit:
users of a command-line tool need to know what to fix, not where in the code it was noticed.

Each command is a module with a ``register(subparsers)``. Only the module of the command being
run is imported (all of them for ``--help`` or a mistyped command): a command is often one
step of a script, and ``ledger add`` should not pay for the HTTP stack that ``serve`` needs.
"""

from __future__ import annotations

import argparse
import importlib
import sqlite3
import sys
from collections.abc import Sequence

from ledger.cli.logdir import database_of
from ledger.cli.pipe import STDOUT_CLOSED, stdout_reader_gone
from ledger.core.errors import LedgerError
from ledger.process.exitcodes import ExitCode
from ledger.process.structured_logs import configure
from ledger.process.version import package_version
from ledger.storage.damage import corruption_in, damage_message

COMMANDS = {
    "witness": "ledger.cli.witness",
    "mirror": "ledger.cli.mirror",
    "monitor": "ledger.cli.monitor",
    "init": "ledger.cli.init",
    "add": "ledger.cli.add",
    "serve": "ledger.cli.serve",
    "export": "ledger.cli.export",
    "verify": "ledger.cli.verify",
}
"""Each command's module, in the order ``--help`` lists them."""


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ledger", description="A tlog-tiles transparency log.")
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = [argv[0]] if argv and argv[0] in COMMANDS else list(COMMANDS)
    for name in chosen:
        importlib.import_module(COMMANDS[name]).register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser(argv).parse_args(argv)
    configure("json")  # structured logs on stderr; stdout carries only results
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # here, not at exit: a reader that went away is caught below
        return code
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Exception as e:
        if stdout_reader_gone(e):
            return STDOUT_CLOSED
        if corruption_in(e) is not None:  # a damaged file: no traceback, no retry
            db = database_of(getattr(args, "dir", None))
            message = damage_message(db, e, f"ledger verify {args.dir}" if db else None)
        elif isinstance(e, LedgerError):
            message = str(e)
        elif isinstance(e, sqlite3.Error):
            message = f"cannot use the log database: {e}"
        elif isinstance(e, OSError):
            message = f"{e.filename}: {e.strerror or e}" if e.filename else str(e)
        else:
            raise
    print(f"ledger: error: {message}", file=sys.stderr)
    return ExitCode.USAGE


if __name__ == "__main__":
    raise SystemExit(main())
