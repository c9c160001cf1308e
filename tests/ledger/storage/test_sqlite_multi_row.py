"""A commit's ``INSERT`` of many rows as few statements (``ledger.storage.sqlite.multi_row``):
the same rows land as with ``executemany``, in a handful of statement texts."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.storage.sqlite import MAX_ROWS_PER_INSERT, multi_row

_UPSERT = ("INSERT INTO usage (account, month, count) VALUES (?, ?, ?) "
           "ON CONFLICT (account, month) DO UPDATE SET count = count + excluded.count")
_REPLACE = "INSERT OR REPLACE INTO tiles (id, data) VALUES (?, ?)"


def _tables() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE usage (account INTEGER, month TEXT, count INTEGER, "
                 "PRIMARY KEY (account, month))")
    conn.execute("CREATE TABLE tiles (id INTEGER PRIMARY KEY, data BLOB)")
    return conn


def _contents(conn: sqlite3.Connection) -> tuple[list[object], list[object]]:
    return (conn.execute("SELECT * FROM usage ORDER BY 1, 2").fetchall(),
            conn.execute("SELECT * FROM tiles ORDER BY 1").fetchall())


@settings(max_examples=60, deadline=None)
@given(usage=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["2026-11", "2026-12"]),
                                st.integers(1, 9)), max_size=300),
       tiles=st.lists(st.tuples(st.integers(0, 40), st.binary(max_size=8)), max_size=300))
def test_rows_land_as_with_executemany_in_few_statements(
        usage: list[tuple[int, str, int]], tiles: list[tuple[int, bytes]]) -> None:
    # Repeated keys included: an upsert adds up and a replace keeps the last row, as one row at
    # a time would, also when the repeats fall into one statement.
    one_by_one, together = _tables(), _tables()
    for sql, rows in ((_UPSERT, usage), (_REPLACE, tiles)):
        one_by_one.executemany(sql, rows)
        statements = multi_row(sql, rows) if rows else []
        for text, params in statements:
            together.executemany(text, params)
        if len(rows) > 1:
            assert all(len(params) == 1 for _, params in statements)  # one step each
            # Whole statements of the most rows, then the rest as a sum of powers of two.
            assert len(statements) <= len(rows) // MAX_ROWS_PER_INSERT + 6
            assert len({text for text, _ in statements}) <= 7
    assert _contents(together) == _contents(one_by_one)


def test_other_statements_run_once_per_row() -> None:
    delete = "DELETE FROM tile_parts WHERE id BETWEEN ? AND ?"
    assert multi_row(delete, [(1, 2), (3, 4)]) == [(delete, [(1, 2), (3, 4)])]
    select_insert = "INSERT INTO t (a) SELECT ? WHERE 1"
    assert multi_row(select_insert, [(1,), (2,)]) == [(select_insert, [(1,), (2,)])]
