"""What a SQLite notary store shares with its write transactions: one :class:`NotaryState`,
which the store creates (:class:`~notary.store.sqlite.SqliteNotaryStore`) and each transaction
receives (:class:`~notary.store.sqlite.SqliteNotaryWriteTx`).

It holds the store's caches of committed data: the lookup salt, the ids of the small tables a
receipt row refers to (:class:`~notary.store.sqlite_schema.Refs`), this process's view of the
recent lookup keys (:class:`~notary.store.sqlite_lookup.LookupView`) and the API keys
(:class:`KeyCache`). A transaction reads them under the log's lock and updates them only once it
has committed (``committed``), so they never hold what a rolled-back batch wrote.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from notary.store.base import ApiKeyRecord
from notary.store.sqlite_lookup import LookupView
from notary.store.sqlite_schema import Refs

__all__ = ["KEYS_RECHECK_SECONDS", "KeyCache", "KeySignal", "NotaryState"]

KEYS_RECHECK_SECONDS = 1.0
"""How stale the API-key cache may get when no change was signalled (a writer that died between
its commit and its signal, or one that does not signal, such as the ``sqlite3`` shell): it is
re-read at least this often. Issuing never depends on it: the screen re-checks under the lock."""


class KeySignal:
    """Eight bytes in ``<database>-keys`` (0600), shared by every process through ``mmap``:
    each administrative write of the store sets them to fresh random bytes once it has
    committed, so a frontend learns that API keys may have changed without reading the
    database on every request (a read of shared memory, the same whatever key is asked for).

    Random rather than counted: two writers racing on a counter could set it back to a value a
    reader holds, and that reader would miss the later change.
    """

    SIZE = 8

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + "-keys")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if os.fstat(fd).st_size < self.SIZE:
                os.ftruncate(fd, self.SIZE)
            self._map = mmap.mmap(fd, self.SIZE)
        finally:
            os.close(fd)

    def read(self) -> bytes:
        return self._map[: self.SIZE]

    def bump(self) -> None:
        self._map[: self.SIZE] = os.urandom(self.SIZE)

    def close(self) -> None:
        self._map.close()


class KeyCache:
    """Every API key, as of ``key_version`` :attr:`version` (see :meth:`get`)."""

    def __init__(self, database: Path) -> None:
        self.records: dict[str, ApiKeyRecord] = {}
        self.version: int | None = None
        try:
            self.signal: KeySignal | None = KeySignal(database)
        except OSError:  # e.g. a read-only directory: every lookup reads key_version
            self.signal = None
        self.signal_seen = b""  # the signal's bytes when the keys were last checked
        self.checked = float("-inf")  # time.monotonic() of that check

    def get(self, conn: sqlite3.Connection, key_id: str) -> ApiKeyRecord | None:
        """The key, or None; the work is the same either way.

        A lookup of one key costs measurably more when the row exists (it is read and joined),
        which would let a client learn which key ids exist. So every key is cached, and a call
        re-reads the one-row ``key_version`` (which triggers bump on any change to keys or
        accounts from any process) only when the shared signal moved (:class:`KeySignal`:
        another process, or this one, changed keys) or at least every
        :data:`KEYS_RECHECK_SECONDS`; it reloads all keys when the version moved (a cost
        unrelated to the key asked for) and ends in a dict lookup. A key created or revoked
        by any store is signalled once committed, so it takes effect at once; the batch
        screen re-checks the version under the log's lock (:meth:`screen`), so a revoked key
        issues nothing after its revocation committed, signalled or not.
        """
        signal = self.signal.read() if self.signal is not None else None
        now = time.monotonic()
        if (signal is None or signal != self.signal_seen
                or now - self.checked >= KEYS_RECHECK_SECONDS):
            self.signal_seen = signal or b""  # read before the version: a change reloads
            self.checked = now
            (version,) = conn.execute("SELECT n FROM key_version WHERE one = 1").fetchone()
            self.screen(conn, version)
        return self.records.get(key_id)

    def screen(self, conn: sqlite3.Connection, version: int) -> bool:
        """Reload every key if ``version`` (read before, on ``conn``) is not the cache's;
        whether it was not."""
        if version == self.version:
            return False
        rows = conn.execute(
            "SELECT k.key_id, a.name, k.secret_sha256, k.revoked, a.monthly_allowance "
            "FROM api_keys k JOIN accounts a ON a.id = k.account").fetchall()
        self.records = {r[0]: ApiKeyRecord(r[0], r[1], bytes(r[2]), r[3], r[4]) for r in rows}
        self.version = version
        return True

    def changed(self) -> None:
        """Tell every process that keys may have changed (after a write ended)."""
        if self.signal is not None:
            self.signal.bump()

    def close(self) -> None:
        if self.signal is not None:
            self.signal.close()
            self.signal = None


@dataclass
class NotaryState:
    """The caches a SQLite notary store shares with its transactions (see the module)."""

    keys: KeyCache
    lookup: LookupView
    salt: bytes = b""  # the store's lookup salt, read at open
    refs: Refs = field(default_factory=Refs)
    # Only a migration withholds receipts, and only when it opens a version-1 store (before
    # any current server runs on it); so "none withheld at open" stays true.
    may_withhold: bool = True
