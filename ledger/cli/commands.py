"""A command-line tool whose commands are imported only when run.

A command is often one step of a script run thousands of times (``notary verify`` of each saved
call, ``ledger add`` of each file): it should not pay for the HTTP server, the event loop or the
logging stack that other commands need. So the top-level parser is built from a static table:
the command being run is imported and registers its real sub-parser; every other command gets a
stub that carries only its one-line help, which is all ``--help``, ``--version`` and a mistyped
command's message need. ``tests/ledger/cli/test_command_loading.py`` and its notary twin check
that the table's help is what each module registers.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ledger.process.version import package_version


class Command(NamedTuple):
    """Where a command lives (a module with ``register(subparsers)``) and its one-line help."""

    module: str
    help: str


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 commands: Mapping[str, Command], argv: Sequence[str] | None) -> None:
    """Add every command of ``commands`` to ``sub``, in order: the real sub-parser of the one
    ``argv`` runs (its module imported now), a help-only stub for each of the others; with
    ``argv`` None, every command's real sub-parser (for tests and generated documentation). A
    module that registers several commands (``backup`` and ``restore``) registers them once."""
    chosen = commands[argv[0]].module if argv and argv[0] in commands else None
    for name, command in commands.items():
        if name in sub.choices:
            continue
        if argv is None or command.module == chosen:
            importlib.import_module(command.module).register(sub)
        else:
            sub.add_parser(name, help=command.help)


class _Version(argparse.Action):
    """``--version``, which prints the version and exits before any command is imported."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"{parser.prog} {package_version()}", file=sys.stdout)
        parser.exit()


def add_version(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` a ``--version`` that prints ``PROG VERSION`` and exits."""
    parser.add_argument("--version", action=_Version)
