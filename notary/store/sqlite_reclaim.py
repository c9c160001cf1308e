"""Reclaiming a pruned range's rows in a SQLite store (``notary log prune --reclaim``,
docs/lifecycle.md): the receipt rows (signature and names, which search reads) and the lookup
rows (``receipt_ids``, ``receipt_digests``: what ``GET /v1/tool-calls/{id}`` and
``?call_sha256=`` read) of receipts at positions in a range.

The lookup tables are keyed ``(k, idx)`` and have no index on ``idx``: deleting by range would
scan them whole. The caller gives each receipt's id and digest (read from its log entry, which
stays stored), so each row is deleted by its primary key. ``receipt_keys_recent`` is left as it
is: the merge of :mod:`notary.store.sqlite_lookup` counts positions in its rows. A key it still
holds (at most one generation's, for a log frozen just before) leads to no receipt row, so it
finds nothing, in that table or once merged.

Freed pages go to the file's freelist (the notary's files have ``auto_vacuum = NONE``), where
new rows reuse them before the file grows; a ``VACUUM`` returns them to the file system.
:func:`free_bytes` measures them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from notary.store.sqlite_schema import digest_key, id_key

__all__ = ["first_receipt", "free_bytes", "reclaim_rows"]


def first_receipt(conn: sqlite3.Connection, lo: int, hi: int) -> int | None:
    """The lowest position in ``[lo, hi)`` that still has a receipt row."""
    row = conn.execute("SELECT min(idx) FROM receipts WHERE idx >= ? AND idx < ?",
                       (lo, hi)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def reclaim_rows(conn: sqlite3.Connection, lo: int, hi: int,
                 keys: Sequence[tuple[int, str, str]], salt: bytes) -> int:
    """Delete the receipt rows at ``[lo, hi)`` and the lookup rows of ``keys`` (position,
    receipt id, call_sha256), in the caller's transaction; the receipt rows deleted."""
    conn.executemany("DELETE FROM receipt_ids WHERE k = ? AND idx = ?",
                     [(id_key(rid), pos) for pos, rid, _ in keys])
    conn.executemany("DELETE FROM receipt_digests WHERE k = ? AND idx = ?",
                     [(digest_key(digest, salt), pos) for pos, _, digest in keys])
    return conn.execute("DELETE FROM receipts WHERE idx >= ? AND idx < ?", (lo, hi)).rowcount


def free_bytes(conn: sqlite3.Connection) -> int:
    """Bytes of free pages in the file: the space deleted rows left for new ones."""
    pages = conn.execute("PRAGMA freelist_count").fetchone()[0]
    return int(pages) * int(conn.execute("PRAGMA page_size").fetchone()[0])
