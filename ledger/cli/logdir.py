"""A log directory as the ``ledger`` commands find it: ``log.db`` (SQLite: tiles, bundles,
checkpoints), ``log.key`` (the private signing key, mode 0600) and ``log.vkey`` (the public
verifier key). Only ``init`` and ``add`` read the private key; ``serve``, ``export`` and
``verify`` need the public key alone, so they can run where the signing key is not. Those three
also read a directory whose log lives in another SQLite file beside ``log.vkey`` (a notary's data
directory): the one file there that holds a log's tables.

Each helper imports what it uses (the log, the store, the post-quantum signer): ``init`` and
``add`` want only the file names and :func:`db_path`, and should not pay for the rest.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.process.exitcodes import UsageError
from ledger.storage.damage import corruption_in

if TYPE_CHECKING:
    from ledger.core.note import Ed25519Verifier
    from ledger.log.facade import Log
    from ledger.log.pq_checkpoints import PostQuantumCheckpoints

DB, KEY, VKEY = "log.db", "log.key", "log.vkey"

_SQLITE_MAGIC = b"SQLite format 3\x00"


def db_path(directory: Path) -> Path:
    """``log.db`` in ``directory``, or a usage error saying how to create one."""
    db = directory / DB
    if not db.is_file():
        raise UsageError(f"no log in {directory} (create one with: ledger init {directory} "
                       "--origin ORIGIN)")
    return db


def holds_log(path: Path) -> bool:
    """Whether ``path`` is an SQLite file with a log's tables (a damaged one counts: opening it
    then says what is wrong)."""
    try:
        with path.open("rb") as f:
            if f.read(16) != _SQLITE_MAGIC:
                return False
    except OSError:
        return False
    try:
        conn = sqlite3.connect(path)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return corruption_in(e) is not None
    return {"tiles", "log_state"} <= names


def find_db(directory: Path) -> Path:
    """``log.db``, or the one SQLite file in ``directory`` that holds a log (a notary keeps its
    log in its own database file), for the commands that only read."""
    if (directory / DB).is_file() or not directory.is_dir():
        return db_path(directory)
    found = [p for p in sorted(directory.iterdir()) if p.is_file() and holds_log(p)]
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"{directory} holds several log databases "
                         f"({', '.join(p.name for p in found)}); keep one per directory")
    return db_path(directory)


def verifier_of(directory: Path) -> Ed25519Verifier:
    """The log's public key, from ``log.vkey``."""
    # deferred: the key code, not for `init` and `add` (which import their own)
    from ledger.core.note import Ed25519Verifier, NoteError

    try:
        text = (directory / VKEY).read_text().strip()
    except FileNotFoundError:
        raise UsageError(f"{directory / VKEY} is missing; it holds the log's public key") from None
    try:
        return Ed25519Verifier.from_vkey(text)
    except NoteError as e:
        raise UsageError(f"{directory / VKEY}: {e}") from None


async def open_readonly(directory: Path) -> Log:
    """The log in ``directory`` opened for reading with its public key, checked against the
    stored checkpoint now rather than on the first request."""
    # deferred: the log and the store, for the commands that read
    from ledger.log.facade import Log
    from ledger.storage.sqlite import SqliteStore

    verifier = verifier_of(directory)
    store = await SqliteStore.open(find_db(directory))
    try:
        log = await Log.open(store, verifier=verifier)
        await log.head()  # fail now, not on the first request, if the key does not match
    except BaseException:
        await store.close()
        raise
    return log


def post_quantum(directory: Path) -> PostQuantumCheckpoints | None:
    """The log's ML-DSA-44 line, when its key file is in ``directory`` (the ML-DSA-44 key is
    derived from it); a directory holding only the verifier key serves Ed25519 checkpoints."""
    # deferred: ML-DSA-44 (cryptography), only to serve or export post-quantum checkpoints
    from ledger.core.note import Ed25519Signer, NoteError
    from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
    from ledger.log.pq_checkpoints import PostQuantumCheckpoints
    from ledger.process.keyfile import read_secret

    if not (directory / KEY).exists():
        return None
    try:
        signer = Ed25519Signer.from_private_key(read_secret(directory / KEY))
    except NoteError as e:
        raise UsageError(f"{directory / KEY}: not a log private key: {e}") from None
    return PostQuantumCheckpoints(SubtreeCosignatureSigner.derived_from(signer), signer.name)


def database_of(directory: str | None) -> Path | None:
    """The log database a command used, for messages about it (None: the command has none)."""
    if directory is None:
        return None
    try:
        return find_db(Path(directory))
    except UsageError:
        return Path(directory) / DB
