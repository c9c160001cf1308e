"""How one log is laid out in a SQLite file, and the reads of it (``ledger.storage.sqlite``).

``tiles`` holds each tile and entry bundle whole by :func:`tile_id`; a right-edge tile grows by
appended rows of ``tile_parts`` (:mod:`ledger.core.tileparts`), keyed by :func:`part_id`.
Every read takes the two tables in one statement (:func:`read_tiles_sync`), hence one
snapshot. Log 0's tables have the original names, log n's carry ``_n`` (:class:`Tables`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from ledger.core.compact import bundle_keys, entries_between
from ledger.core.tileparts import BundleEnd, entries_from_parts
from ledger.core.tiles import ENTRIES_LEVEL, TILE_HEIGHT, TILE_WIDTH
from ledger.storage.base import CheckpointRecord, TileKey, log_suffix


@dataclass(frozen=True)
class Tables:
    """The names of one log's tables: log 0's are the original ones, log n's carry ``_n``
    (DESIGN-33: no migration of an existing log, ever)."""

    tiles: str
    parts: str
    state: str
    checkpoints: str

    @classmethod
    def of(cls, n: int) -> Tables:
        suffix = log_suffix(n)
        return cls(f"tiles{suffix}", f"tile_parts{suffix}", f"log_state{suffix}",
                   f"checkpoints{suffix}")

    def schema(self) -> list[str]:
        """The statements that create these tables (log 0's exist from the start)."""
        return [
            f"CREATE TABLE IF NOT EXISTS {self.tiles} (id INTEGER PRIMARY KEY, data BLOB NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {self.parts} (id INTEGER PRIMARY KEY, data BLOB NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {self.state} (one INTEGER PRIMARY KEY CHECK (one = 1), "
            "size INTEGER NOT NULL, time REAL NOT NULL, note BLOB NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {self.checkpoints} (size INTEGER PRIMARY KEY, "
            "time REAL NOT NULL, note BLOB NOT NULL)",
        ]


LOG0 = Tables.of(0)


def tile_id(key: TileKey) -> int:
    level, index = key
    return ((level + 1) << 48) | index


def _tile_key(rowid: int) -> TileKey:
    return (rowid >> 48) - 1, rowid & ((1 << 48) - 1)


def part_id(tile_id: int, start: int) -> int:
    """The ``tile_parts`` id of a tile's part whose first element is at ``start`` (0-255)."""
    return tile_id << TILE_HEIGHT | start


def _tiles_query(keys: Sequence[TileKey], t: Tables = LOG0) -> tuple[str, list[int]]:
    """One statement for these tiles' rows and every part between the first and the last.

    Parts exist only for right-edge tiles (one per level at most), so the range holds few
    rows beyond the ones asked for; they are dropped by :func:`_assemble`.
    """
    ids = [tile_id(k) for k in keys]
    marks = ",".join("?" * len(ids))
    sql = (f"SELECT id, NULL, data FROM {t.tiles} WHERE id IN ({marks}) UNION ALL "
           f"SELECT id >> 8, id, data FROM {t.parts} WHERE id BETWEEN ? AND ?")
    return sql, [*ids, part_id(min(ids), 0), part_id(max(ids), TILE_WIDTH - 1)]


def _assemble(rows: Iterable[Any], keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
    """Each tile's row followed by its parts in order (``tiles`` rows come first in a
    ``UNION ALL``); tiles that were not asked for are dropped."""
    wanted = {tile_id(k) for k in keys}
    whole: dict[int, bytes] = {}
    parts: list[tuple[int, int, bytes]] = []
    for tid, pid, data in rows:
        if pid is None:
            whole[tid] = bytes(data)
        elif tid in wanted:
            parts.append((tid, pid, bytes(data)))
    if parts:
        parts.sort()
        grown: dict[int, list[bytes]] = {}
        for tid, _, data in parts:
            grown.setdefault(tid, [whole.get(tid, b"")]).append(data)
        whole.update((tid, b"".join(pieces)) for tid, pieces in grown.items())
    return {_tile_key(tid): data for tid, data in whole.items()}


async def read_tiles_async(conn: aiosqlite.Connection, keys: Sequence[TileKey], t: Tables
                      ) -> dict[TileKey, bytes]:
    out: dict[TileKey, bytes] = {}
    keys = list(dict.fromkeys(keys))
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        # One round trip to aiosqlite's thread (iterating a cursor costs one per chunk and close).
        sql, params = _tiles_query(chunk, t)
        out.update(_assemble(await conn.execute_fetchall(sql, params), chunk))
    return out


async def latest_async(conn: aiosqlite.Connection, t: Tables) -> CheckpointRecord | None:
    try:
        rows = list(await conn.execute_fetchall(
            f"SELECT size, time, note FROM {t.state} WHERE one = 1"))
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):  # a log whose roll has not committed yet
            return None
        raise
    if not rows:
        return None
    row = rows[0]
    return CheckpointRecord(row[0], row[1], bytes(row[2]))


def read_tiles_sync(conn: sqlite3.Connection, keys: Sequence[TileKey], t: Tables = LOG0
                    ) -> dict[TileKey, bytes]:
    """Stored tiles and bundles by key, on any connection to a log's file (the notary reads
    its receipts' entries with it); keys not stored are left out. ``t``: which log's."""
    out: dict[TileKey, bytes] = {}
    keys = list(dict.fromkeys(keys))
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        sql, params = _tiles_query(chunk, t)
        out.update(_assemble(conn.execute(sql, params), chunk))
    return out


def read_entries_sync(conn: sqlite3.Connection, start: int, end: int,
                       known: BundleEnd | None, t: Tables = LOG0
                       ) -> tuple[list[bytes], BundleEnd | None]:
    """The entries at [start, end) and what is now known of the edge bundle's stored length.

    When ``start`` falls inside a bundle that grows by parts, only its parts from ``start`` on
    are read (the caller has the entries before): a part or two where the whole bundle is up
    to ~40 KB and a part per commit. Anything else, a bundle stored whole or parts that do not
    start there, is read whole. ``known`` is the edge bundle as this store last committed it;
    when the parts extend it, the returned one says where they end, so that the next commit
    appends its own part without walking the bundle (:func:`plan_writes`).
    """
    out: list[bytes] = []
    if start & (TILE_WIDTH - 1) and start < end:
        tid = tile_id((ENTRIES_LEVEL, start >> TILE_HEIGHT))
        rows = conn.execute(f"SELECT id & 255, data FROM {t.parts} WHERE id BETWEEN ? AND ? "
                            "ORDER BY id", (part_id(tid, start & (TILE_WIDTH - 1)),
                                            part_id(tid, TILE_WIDTH - 1))).fetchall()
        out, start, known = entries_from_parts(rows, start, end, known)
    if start < end:
        out.extend(entries_between(read_tiles_sync(conn, bundle_keys(start, end), t),
                                   start, end))
    return out, known


def latest_sync(conn: sqlite3.Connection, t: Tables = LOG0) -> CheckpointRecord | None:
    if t is not LOG0 and not has_table(conn, t.state):
        return None
    row = conn.execute(f"SELECT size, time, note FROM {t.state} WHERE one = 1").fetchone()
    return None if row is None else CheckpointRecord(row[0], row[1], bytes(row[2]))


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


async def history_async(conn: aiosqlite.Connection, t: Tables, limit: int
                        ) -> list[CheckpointRecord]:
    try:
        rows = await conn.execute_fetchall(
            f"SELECT size, time, note FROM {t.checkpoints} ORDER BY size DESC LIMIT ?", (limit,))
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return []
        raise
    return [CheckpointRecord(r[0], r[1], bytes(r[2])) for r in rows]
