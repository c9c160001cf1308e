"""``notary check``: the full check of a notary's store, for after a crash, a restore, or an
alarm from the scrub.

In order: SQLite's own check of every page of the database file (PostgreSQL, ``--database URL``:
left to the server, whose pages carry their own checksums when the cluster has them); then every
entry bundle
re-hashed and every tile recomputed from the entries and compared with the stored one, byte for
byte; then the root against the signed checkpoint (:func:`ledger.jobs.check.audit_log`). It only
reads, so it can run beside ``notary serve``. Exit status: 0 the store is sound (a damage
finding recorded by the server is then cleared), 1 it is damaged (what and where is printed),
2 it cannot be checked (no data directory, no log key; with ``--database URL``, a ``--data``
whose key is not the log's: the key is a frontend's file, never read from the database).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.process.exitcodes import ExitCode, UsageError
from notary.cli import store_args
from notary.core.databases import is_postgres

if TYPE_CHECKING:
    from ledger.core.note import Ed25519Verifier
    from ledger.storage.base import LogStore
    from notary.serving.keys import Paths

__all__ = ["register"]


_GIVE_DATA = ("add --data DIR, the data directory of a frontend of the log in this database "
              "(its log.vkey is the log's key)")
"""With ``--database URL`` the log's key is not in the database but in a frontend's ``--data``,
which defaults to ./notary-data: what to do when that is not the log's."""


def _verifier(paths: Paths, database: str) -> Ed25519Verifier:
    # deferred: the note code (PyNaCl), not for `--help`
    from ledger.core.note import Ed25519Verifier, NoteError

    where = f"; with --database, {_GIVE_DATA}" if is_postgres(database) else ""
    try:
        return Ed25519Verifier.from_vkey(paths.log_vkey.read_text().strip())
    except FileNotFoundError:
        raise UsageError(f"{paths.log_vkey} is missing; it holds the log's public key"
                         f"{where}") from None
    except NoteError as e:
        raise UsageError(f"{paths.log_vkey}: {e}{where}") from None


def _signs(verifier: Ed25519Verifier, note: bytes) -> bool:
    """Whether ``note`` carries a signature line of ``verifier``'s key (name and key ID), valid
    or not: one that does not is another log's checkpoint, not damage. An unparsable note is
    left to the audit, which reports it."""
    # deferred: the note code (PyNaCl), not for `--help`
    from ledger.core.note import NoteError, parse_note

    try:
        lines = parse_note(note).signatures
    except NoteError:
        return True
    return any(s.name == verifier.name and s.key_id == verifier.key_id for s in lines)


async def _audit(paths: Paths, verifier: Ed25519Verifier, database: str = "") -> str:
    # deferred: the audit, the SQLite store and the progress bar, not for `--help`
    from ledger.jobs.check import audit_log
    from ledger.process.progress import progress_reporter
    from ledger.storage.sqlite import SqliteStore

    store: LogStore
    if is_postgres(database):
        # deferred: asyncpg is the optional `postgres` extra; the SQLite default never needs it
        from ledger.storage.postgres import PostgresStore

        store = await PostgresStore.open(database, retry_for=5.0)
    else:
        store = await SqliteStore.open(paths.db)
    update, close = progress_reporter("check", "entry")
    try:
        latest = await store.latest() if is_postgres(database) else None  # key beside it
        if latest is not None and not _signs(verifier, latest.note):
            origin = latest.note.split(b"\n", 1)[0].decode("utf-8", "replace")
            raise UsageError(f"{paths.log_vkey} is another log's key: the log {origin!r} in "
                             f"this database is not signed by it; {_GIVE_DATA}")
        report = await audit_log(store, verifier, progress=update)
    finally:
        close()
        await store.close()
    return (f"{report.tiles} tiles and bundles match the entries, and the root matches the "
            f"signed checkpoint of {report.origin} at size {report.size}")


def cmd_check(args: argparse.Namespace) -> int:
    # deferred: the audit, the event loop, SQLite and the key files, not for `--help`
    from ledger.jobs.check import AuditError
    from ledger.process import event_loop
    from ledger.storage.damage import corruption_in, describe_findings, integrity_errors
    from notary.serving.keys import Paths

    settings = store_args.settings(args)
    paths = Paths(settings.data)
    if is_postgres(settings.database):
        verifier = _verifier(paths, settings.database)
        print("checking the PostgreSQL store: every tile and bundle", file=sys.stderr)
        try:
            summary = event_loop.run(_audit(paths, verifier, settings.database))
        except AuditError as e:
            print(f"notary check: FAILED: {e}. Restore the newest backup and check it again.",
                  file=sys.stderr)
            return ExitCode.CHECK_FAILED
        print(f"ok: {summary}")
        _clear_recorded_damage(settings.data)
        return ExitCode.OK
    if not paths.db.is_file():
        raise UsageError(f"no notary database at {paths.db}")
    verifier = _verifier(paths, settings.database)
    print(f"checking {paths.db}: database pages, then every tile and bundle", file=sys.stderr)
    problems = integrity_errors(paths.db)
    if problems:
        print(f"notary check: FAILED: {paths.db} is damaged: {describe_findings(problems)}. "
              "Restore the newest backup and check it again.", file=sys.stderr)
        return ExitCode.CHECK_FAILED
    try:
        summary = event_loop.run(_audit(paths, verifier))
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
    _clear_recorded_damage(settings.data)
    return ExitCode.OK


def _clear_recorded_damage(data: Path) -> None:
    """After a passing check: the damage a server of this store recorded in ``data`` (with
    PostgreSQL, the frontend's own directory) no longer stops its writes."""
    # deferred: with the rest of the check, not for `--help`
    from notary.operator.damage_marker import clear_damage, read_damage

    recorded = read_damage(data)
    if recorded is not None and clear_damage(data):
        print(f"cleared the damage the server had recorded ({recorded}); `notary serve` "
              "accepts writes again", file=sys.stderr)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary check`` to the CLI."""
    p = subparsers.add_parser(
        "check", help="check the whole store: database pages, every tile, bundle and the "
                      "checkpoint", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    store_args.add_store_flags(p)
    p.set_defaults(func=cmd_check)
