"""``notary check``: the full check of a notary's store, for after a crash, a restore, or an
alarm from the scrub.

In order: SQLite's own check of every page of the database file (PostgreSQL, ``--database URL``:
left to the server, whose pages carry their own checksums when the cluster has them); then every
entry bundle
re-hashed and every tile recomputed from the entries and compared with the stored one, byte for
byte; then the root against the signed checkpoint (:func:`ledger.jobs.check.audit_log`). It only
reads, so it can run beside ``notary serve``. Exit status: 0 the store is sound (a damage
finding recorded by the server is then cleared), 1 it is damaged (what and where is printed),
2 it cannot be checked (no data directory, no log key).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.core.note import Ed25519Verifier, NoteError
from ledger.jobs.check import AuditError, audit_log
from ledger.process import event_loop
from ledger.process.exitcodes import ExitCode, UsageError
from ledger.process.progress import progress_reporter
from ledger.storage.base import LogStore
from ledger.storage.damage import corruption_in, describe_findings, integrity_errors
from ledger.storage.sqlite import SqliteStore
from notary.cli import store_args
from notary.operator.damage_marker import clear_damage, read_damage
from notary.serving.keys import Paths
from notary.store import is_postgres

__all__ = ["register"]


def _verifier(paths: Paths) -> Ed25519Verifier:
    try:
        return Ed25519Verifier.from_vkey(paths.log_vkey.read_text().strip())
    except FileNotFoundError:
        raise UsageError(f"{paths.log_vkey} is missing; it holds the log's public key") from None
    except NoteError as e:
        raise UsageError(f"{paths.log_vkey}: {e}") from None


async def _audit(db: Path, verifier: Ed25519Verifier, database: str = "") -> str:
    store: LogStore
    if is_postgres(database):
        # deferred: asyncpg is the optional `postgres` extra; the SQLite default never needs it
        from ledger.storage.postgres import PostgresStore

        store = await PostgresStore.open(database, retry_for=5.0)
    else:
        store = await SqliteStore.open(db)
    update, close = progress_reporter("check", "entry")
    try:
        report = await audit_log(store, verifier, progress=update)
    finally:
        close()
        await store.close()
    return (f"{report.tiles} tiles and bundles match the entries, and the root matches the "
            f"signed checkpoint of {report.origin} at size {report.size}")


def cmd_check(args: argparse.Namespace) -> int:
    settings = store_args.settings(args)
    paths = Paths(settings.data)
    if is_postgres(settings.database):
        verifier = _verifier(paths)
        print("checking the PostgreSQL store: every tile and bundle", file=sys.stderr)
        try:
            summary = event_loop.run(_audit(paths.db, verifier, settings.database))
        except AuditError as e:
            print(f"notary check: FAILED: {e}. Restore the newest backup and check it again.",
                  file=sys.stderr)
            return ExitCode.CHECK_FAILED
        print(f"ok: {summary}")
        return ExitCode.OK
    if not paths.db.is_file():
        raise UsageError(f"no notary database at {paths.db}")
    verifier = _verifier(paths)
    print(f"checking {paths.db}: database pages, then every tile and bundle", file=sys.stderr)
    problems = integrity_errors(paths.db)
    if problems:
        print(f"notary check: FAILED: {paths.db} is damaged: {describe_findings(problems)}. "
              "Restore the newest backup and check it again.", file=sys.stderr)
        return ExitCode.CHECK_FAILED
    try:
        summary = event_loop.run(_audit(paths.db, verifier))
    except AuditError as e:
        print(f"notary check: FAILED: {e}. Restore the newest backup and check it again.",
              file=sys.stderr)
        return ExitCode.CHECK_FAILED
    except Exception as e:
        found = corruption_in(e)
        if found is None:
            raise
        print(f"notary check: FAILED: {paths.db} is damaged: {found}. Restore the newest "
              "backup and check it again.", file=sys.stderr)
        return ExitCode.CHECK_FAILED
    print(f"ok: database pages sound; {summary}")
    recorded = read_damage(settings.data)
    if recorded is not None and clear_damage(settings.data):
        print(f"cleared the damage the server had recorded ({recorded}); `notary serve` "
              "accepts writes again", file=sys.stderr)
    return ExitCode.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary check`` to the CLI."""
    p = subparsers.add_parser(
        "check", help="check the whole store: database pages, every tile, bundle and the "
                      "checkpoint", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    store_args.add_store_flags(p)
    p.set_defaults(func=cmd_check)
