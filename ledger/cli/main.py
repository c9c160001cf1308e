"""``ledger``: create, append to, serve, export and audit a log kept in one directory (its
layout: :mod:`ledger.cli.logdir`), and run a witness, a mirror or a monitor.

Every expected failure ends with one ``ledger: error: …`` line on stderr and a non-zero exit:
users of a command-line tool need to know what to fix, not where in the code it was noticed.

Each command is a module with a ``register(subparsers)``. Only the module of the command being
run is imported (none for ``--help``, ``--version`` or a mistyped command, which list the
commands from :data:`COMMANDS`; :mod:`ledger.cli.commands`): a command is often one step of a
script, and ``ledger add`` should not pay for the HTTP stack that ``serve`` needs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ledger.cli.commands import Command, add_commands, add_version
from ledger.cli.pipe import STDOUT_CLOSED, stdout_reader_gone
from ledger.core.errors import LedgerError
from ledger.process.exitcodes import ExitCode

COMMANDS = {
    "witness": Command("ledger.cli.witness",
                       "run a C2SP tlog-witness that cosigns checkpoints of logs"),
    "mirror": Command("ledger.cli.mirror",
                      "run a C2SP tlog-mirror that stores and cosigns copies of logs"),
    "monitor": Command("ledger.cli.monitor",
                       "verify a log's checkpoints stay consistent; audit its tiles"),
    "init": Command("ledger.cli.init", "create a log and its signing key"),
    "add": Command("ledger.cli.add", "append files, or stdin lines, as entries"),
    "serve": Command("ledger.cli.serve", "serve the tlog-tiles and JSON read API"),
    "export": Command("ledger.cli.export",
                      "write the static tlog-tiles tree to a directory or an S3 bucket"),
    "verify": Command("ledger.cli.verify",
                      "check the database pages, recompute every tile from the entries and "
                      "compare (a notary's data directory too)"),
}
"""Each command's module and help, in the order ``--help`` lists them."""


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ledger", description="A tlog-tiles transparency log.")
    add_version(p)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_commands(sub, COMMANDS, argv)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser(argv).parse_args(argv)
    if getattr(args, "structured_logs", True):
        # Not for --help, nor for a command that writes no structured logs (`add`, `init`).
        # deferred: structlog (and rich, when installed: ~0.1 s) only for a command that logs
        from ledger.process.structured_logs import configure

        configure("json")  # structured logs on stderr; stdout carries only results
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # here, not at exit: a reader that went away is caught below
        return code
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Exception as e:
        # deferred: what only a failing command's message needs (the log's modules)
        import sqlite3

        from ledger.cli.logdir import database_of
        from ledger.storage.damage import corruption_in, damage_message

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
