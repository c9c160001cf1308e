"""What ``--reclaim`` reports a SQLite file holds free (``sqlite_reclaim.free_bytes``): the
freelist's bytes, which new rows reuse before the file grows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from notary.store.sqlite_reclaim import free_bytes


def test_freed_pages_are_reported_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, b"x" * 200) for i in range(2000)])
    assert free_bytes(conn) == 0
    conn.execute("DELETE FROM t WHERE k < 1500")
    size = path.stat().st_size
    free = free_bytes(conn)
    assert free > 1500 * 200 * 0.8  # about the rows deleted, in whole pages
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, b"y" * 200) for i in range(1000)])
    assert free_bytes(conn) < free - 1000 * 200 * 0.8 and path.stat().st_size == size
