"""``notary migrate``: bring the store to the current layout, and recover receipts issued under
other base URLs.

Opening a store of an older layout migrates it (``notary serve`` does too); this command does
only that and reports it. A receipt signed under a base URL the store cannot tell is withheld
(never served) until ``--base-url`` names it.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING

from ledger.core.paths import ENTRIES_PATH
from ledger.process.dirlock import DirectoryInUseError, exclusive
from ledger.process.exitcodes import ExitCode, UsageError
from notary.cli import store_args
from notary.core.databases import is_postgres

if TYPE_CHECKING:
    from notary.store.base import NotaryStore
    from notary.store.sqlite_migrations import MigrationReport

__all__ = ["register"]


def _report_migration(report: MigrationReport | None) -> int:
    if report is None:
        return ExitCode.OK
    moved = f"{report.migrated} receipt(s) moved to the current layout"
    if report.prefixes:
        moved += " (signed under " + ", ".join(p.removesuffix(ENTRIES_PATH)
                                              for p in report.prefixes) + ")"
    print(f"Store was at schema version {report.from_version}; {moved}.")
    if not report.withheld:
        print("Every receipt is served exactly as it was signed.")
        return ExitCode.OK
    print(f"{len(report.withheld)} receipt(s) are withheld (never served) until the base URL "
          "they were issued under is given with --base-url:")
    for receipt_id, problem in report.withheld:
        print(f"  {receipt_id}: {problem}")
    return ExitCode.CHECK_FAILED


def cmd_migrate(args: argparse.Namespace) -> int:
    bases = tuple(args.base_urls or ())
    for url in bases:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--base-url {url!r} is not an http(s) URL")
    # deferred: the SQLite store, not for `--help` or a bad --base-url
    from notary.store.sqlite import SqliteNotaryStore

    async def report(store: NotaryStore) -> MigrationReport | None:
        return store.migration if isinstance(store, SqliteNotaryStore) else None

    settings = store_args.settings(args)
    if is_postgres(settings.database) or not settings.data.is_dir():
        return _report_migration(store_args.with_store(args, report, bases=bases))
    try:  # it rewrites receipts a running server reads and serves: not beside one
        with exclusive(settings.data, f"notary {shlex.join(args.argv)}"):  # as typed
            return _report_migration(store_args.with_store(args, report, bases=bases))
    except DirectoryInUseError as e:
        raise UsageError(str(e)) from None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary migrate``."""
    p = subparsers.add_parser("migrate", help="bring the store to the current layout; recover "
                              "receipts issued under other base URLs")
    store_args.add_store_flags(p)
    p.add_argument("--base-url", dest="base_urls", action="append", metavar="URL",
                   help="a public URL older receipts were issued under (repeatable)")
    p.set_defaults(func=cmd_migrate)
