"""``ledger init``: a new log directory, its signing key (0600) and its empty tree's checkpoint."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.process.exitcodes import UsageError

if TYPE_CHECKING:
    from ledger.core.note import Ed25519Signer


async def _create_db(db: Path, signer: Ed25519Signer) -> None:
    # deferred: the log and SQLite, not for `--help`
    from ledger.log.facade import Log
    from ledger.storage.sqlite import SqliteStore

    store = await SqliteStore.open(db, create=True)
    try:
        log = await Log.open(store, signer=signer)  # signs the empty tree
    except BaseException:
        await store.close()
        raise
    await log.close()


def _write_public(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    os.chmod(path, 0o644)


def cmd_init(args: argparse.Namespace) -> int:
    # deferred: the key code and the event loop, not for `--help`
    from ledger.cli.logdir import DB, KEY, VKEY
    from ledger.core.note import Ed25519Signer
    from ledger.process import event_loop
    from ledger.process.keyfile import write_secret

    directory = Path(args.dir)
    origin: str = args.origin
    if args.key is None:
        signer = Ed25519Signer.generate(origin)
    else:
        text = sys.stdin.readline().strip() if args.key == "-" else args.key.strip()
        signer = Ed25519Signer.from_private_key(text)
        if signer.name != origin:
            raise UsageError(f"the key is named {signer.name!r}, but the origin is {origin!r}; "
                           "a log key's name must be its origin")
    directory.mkdir(parents=True, exist_ok=True)
    for name in (DB, KEY, VKEY):
        if (directory / name).exists():
            raise UsageError(f"{directory} already holds a log ({name} exists); refusing to "
                           "overwrite it")
    created: list[Path] = []
    try:
        write_secret(directory / KEY, signer.private_key_text())
        created.append(directory / KEY)
        created += [directory / (DB + s) for s in ("", "-wal", "-shm")]
        event_loop.run(_create_db(directory / DB, signer))
        _write_public(directory / VKEY, signer.verifier_key_text())
    except BaseException:
        for path in created:
            path.unlink(missing_ok=True)
        raise
    print(signer.verifier_key_text())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("init", help="create a log and its signing key")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--origin", required=True, help="the log's origin line and key name")
    s.add_argument("--key", help="existing PRIVATE+KEY+… to use ('-' reads it from stdin)")
    # nothing on its path logs (structlog is not even imported): no logging set-up
    s.set_defaults(func=cmd_init, structured_logs=False)
