"""``notary backup`` and ``notary restore``: copy the data directory while the notary runs, and
put a copy back, refusing one older than the log has become (serving it would fork the log).

Both work on the SQLite file in ``--data`` and the key files beside it; a PostgreSQL store is
backed up with PostgreSQL's own tools, which these commands say instead of copying half of it.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ledger.process.exitcodes import UsageError
from notary.cli import store_args
from notary.core.databases import is_postgres
from notary.serving.config import Settings

__all__ = ["register"]


def _refuse_postgres(settings: Settings, command: str) -> None:
    if is_postgres(settings.database):
        raise UsageError(
            f"`notary {command}` copies the SQLite file in --data; a PostgreSQL store is backed "
            "up and restored with PostgreSQL's own tools (pg_dump / pg_restore, or "
            "pg_basebackup with WAL archiving for point-in-time recovery), and the key files "
            f"in {settings.data}/ (log.key, receipt-keys/) copied beside it")


def cmd_backup(args: argparse.Namespace) -> int:
    settings = store_args.settings(args)
    _refuse_postgres(settings, "backup")
    # deferred: the store and key code, not for `--help`
    from notary.operator.backup import BackupError, backup

    try:
        info = backup(settings.data, Path(args.dest))
    except BackupError as e:
        raise UsageError(str(e)) from e
    print(f"Backed up {settings.data}/ to {args.dest}/: {info.describe()}.")
    print("Keys and database are 0600, directories 0700. Keep the backup as private as the "
          "data directory: log.key is the log's identity.")
    return 0


def _checkpoint_arg(value: str) -> tuple[str, bytes]:
    """A signed checkpoint from a file, or fetched from an http(s) URL (``.../checkpoint``)."""
    if value.startswith(("http://", "https://")):
        # deferred: aiohttp and the event loop, only for a checkpoint to fetch
        from ledger.client.http import FetchError, HttpClient
        from ledger.client.tiles import MAX_CHECKPOINT_BYTES
        from ledger.process import event_loop

        async def fetch() -> bytes:
            async with HttpClient(timeout=10.0) as http:
                return await http.get(value, limit=MAX_CHECKPOINT_BYTES)

        try:
            return value, event_loop.run(fetch())
        except FetchError as e:
            raise UsageError(f"cannot fetch --checkpoint {value}: {e}") from e
    try:
        return value, Path(value).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read --checkpoint {value}: {e}") from e


def cmd_restore(args: argparse.Namespace) -> int:
    settings = store_args.settings(args)
    _refuse_postgres(settings, "restore")
    # deferred: the store and key code, not for `--help`
    from notary.operator.backup import BackupError, restore

    extra = [_checkpoint_arg(v) for v in args.checkpoint]
    try:
        info, moved = restore(Path(args.backup), settings.data, extra,
                              command=f"notary {shlex.join(args.argv)}")
    except BackupError as e:
        raise UsageError(str(e)) from e
    if moved is not None:
        print(f"Moved the replaced data directory to {moved}/ (delete it once the restore is "
              "verified).")
    print(f"Restored {args.backup}/ into {settings.data}/: {info.describe()}. Start the notary "
          "again; it checks the tiles against the signed checkpoint on start.")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary backup`` and ``notary restore``."""
    p = subparsers.add_parser("backup", help="copy the data directory while the notary runs "
                              "(SQLite online backup, keys included, modes kept)")
    store_args.add_store_flags(p)
    p.add_argument("dest", help="a new (or empty) directory for the backup")
    p.set_defaults(func=cmd_backup)
    p = subparsers.add_parser("restore", help="restore a backup into the data directory, "
                              "refusing one older than the log has become (that would fork "
                              "the log)")
    store_args.add_store_flags(p)
    p.add_argument("backup", help="a directory made by notary backup")
    p.add_argument("--checkpoint", action="append", default=[], metavar="FILE|URL",
                   help="a newer signed checkpoint seen elsewhere (a saved /checkpoint, a "
                        "monitor's or a witness's); the restore is refused if the backup is "
                        "older than it (repeatable)")
    p.set_defaults(func=cmd_restore)
