"""Where a receipt id or a ``call_sha256`` leads in a SQLite store: the lookup tables, and the
keys appended since, not yet merged into them.

Why. ``receipt_ids`` and ``receipt_digests`` are B-trees on random keys: a commit that inserted
its receipts' keys there directly wrote about one leaf page of each table per receipt, 2 KiB to
the WAL (and again at the checkpoint) for a 14-byte entry. From a few tens of thousands of
receipts on, that was most of a commit's WAL, and its cost grew with the tables; at a million
receipts it was a quarter of a receipt's CPU (benchmarks/docs/notarize_cpu.md).

How. A commit appends its receipts' keys to ``receipt_keys_recent`` (``idx`` order: the table's
right edge, a page or two per commit), and keeps them in memory (:class:`LookupView`) so that
lookups and the duplicate screen find them. Once :data:`GENERATION` keys have piled up, they
are closed as one generation and merged into the lookup tables in key order, a slice per
commit (a quarter more keys than the commit appends): neighbouring keys share leaf pages, so a
whole generation writes each page of a table about once, where one insert per receipt wrote a
page each. When the generation is merged, its rows leave ``receipt_keys_recent``.

The state of the merge is one row (``lookup_merge``), changed in the commits that do the work:

- ``merged_below``: ``receipt_keys_recent`` holds no row below this index (every receipt
  below it has its keys in the lookup tables, or in both while a generation is merged);
- ``merging_below``: while greater, the rows in ``[merged_below, merging_below)`` are the
  generation being merged, and the first ``ids_merged`` (``digests_merged``) of its keys in
  ``(key, idx)`` order are in ``receipt_ids`` (``receipt_digests``).

Every receipt's keys are therefore in a lookup table or in ``receipt_keys_recent``, in every
committed state, whichever process committed it and wherever a crash stopped another: a
lookup reads the table and this process's view of the recent keys (read again from the store
when it finds nothing, since another process may have logged it). Keys only ever lead to
candidates: a hit is confirmed against the entry (a key is 4 or 6 bytes), and a key in both
places is one candidate.
"""

from __future__ import annotations

import sqlite3
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "GENERATION",
    "LOOKUP_SCHEMA",
    "LookupView",
    "MergeState",
    "Runs",
    "build_runs",
    "merge_statements",
    "read_since",
]

GENERATION = 65536
"""Recent keys closed as one generation. Larger merges a million-receipt log's tables with
fewer page writes per receipt (each generation writes each leaf page about once) and costs
memory: a process holds up to one open generation in dictionaries (~6.5 MB per table at 65,536
keys) and the one being merged in arrays (1.1 MB per table, its filter included); one that only
reads, both in dictionaries."""

LOOKUP_SCHEMA = """
CREATE TABLE IF NOT EXISTS receipt_keys_recent (
    idx INTEGER PRIMARY KEY, id_k INTEGER NOT NULL, digest_k INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS lookup_merge (
    one INTEGER PRIMARY KEY CHECK (one = 1), merged_below INTEGER NOT NULL,
    merging_below INTEGER NOT NULL, ids_merged INTEGER NOT NULL, digests_merged INTEGER NOT NULL);
INSERT OR IGNORE INTO lookup_merge (one, merged_below, merging_below, ids_merged, digests_merged)
    VALUES (1, 0, 0, 0, 0)
"""
"""Schema version 4: the recent keys and the state of their merge (see the module)."""

APPEND = "INSERT INTO receipt_keys_recent (idx, id_k, digest_k) VALUES (?, ?, ?)"
_STATE = ("SELECT merged_below, merging_below, ids_merged, digests_merged FROM lookup_merge "
          "WHERE one = 1")
_SINCE = "SELECT idx, id_k, digest_k FROM receipt_keys_recent WHERE idx >= ? ORDER BY idx"
_TABLES = ("receipt_ids", "receipt_digests")

Rows = Sequence[tuple[int, int, int]]
"""Rows of ``receipt_keys_recent``: (idx, id key, digest key)."""


@dataclass(frozen=True)
class MergeState:
    """The ``lookup_merge`` row (see the module)."""

    merged_below: int = 0
    merging_below: int = 0
    ids_merged: int = 0
    digests_merged: int = 0

    @property
    def merging(self) -> bool:
        return self.merging_below > self.merged_below


_BITS_PER_KEY = 16
"""Bits of a run's filter (:class:`_Run`) per key, at least (its size is a power of two): at
most about one key in sixteen that is not in the run passes it and is looked for (the ones
in the filter over its size)."""


class _Run:
    """One table's keys of the generation being merged, in ``(key, idx)`` order: the order
    they are merged in, and searchable (16 bytes a key, and 2 to 4 of filter).

    The filter is a bitmap by the key's low bits (keys are random: the first bytes of a random
    id, or of a keyed hash). Nearly every key the screen looks for is a new digest's, absent
    from the run, and the filter answers those without a binary search, whose steps on an
    array each make an integer object: at a million receipts the search cost 4-6 µs a
    receipt on the event loop (cProfile, AMD EPYC), the filter a tenth of a µs."""

    __slots__ = ("filter", "idxs", "keys", "mask")

    def __init__(self, rows: Iterable[tuple[int, int]]) -> None:
        self.keys = array("q")
        self.idxs = array("q")
        for key, idx in rows:
            self.keys.append(key)
            self.idxs.append(idx)
        self.mask = (1 << max(6, (len(self.keys) * _BITS_PER_KEY - 1).bit_length())) - 1
        self.filter = bytearray((self.mask + 1) >> 3)
        for key in self.keys:
            bit = key & self.mask
            self.filter[bit >> 3] |= 1 << (bit & 7)

    def __len__(self) -> int:
        return len(self.keys)

    def find(self, key: int) -> list[int]:
        bit = key & self.mask
        if not self.filter[bit >> 3] >> (bit & 7) & 1:
            return []
        keys = self.keys
        at = bisect_left(keys, key)
        out = []
        while at < len(keys) and keys[at] == key:
            out.append(self.idxs[at])
            at += 1
        return out

    def rows(self, start: int, stop: int) -> list[tuple[int, int]]:
        return list(zip(self.keys[start:stop], self.idxs[start:stop], strict=True))


@dataclass(frozen=True)
class Runs:
    """Both tables' runs of the generation ``[lo, hi)``."""

    lo: int
    hi: int
    ids: _Run
    digests: _Run

    def covers(self, state: MergeState) -> bool:
        return (self.lo, self.hi) == (state.merged_below, state.merging_below)


def build_runs(conn: sqlite3.Connection, state: MergeState) -> Runs:
    """The runs of the generation ``state`` is merging, from its rows in the store (the same in
    every process: the merge's positions are counted in them)."""
    lo, hi = state.merged_below, state.merging_below

    def run(column: str) -> _Run:
        return _Run(conn.execute(
            f"SELECT {column}, idx FROM receipt_keys_recent WHERE idx >= ? AND idx < ? "
            f"ORDER BY {column}, idx", (lo, hi)))

    return Runs(lo, hi, run("id_k"), run("digest_k"))


_Keys = dict[int, "int | tuple[int, ...]"]


def _add(keys: _Keys, key: int, idx: int) -> None:
    have = keys.get(key)
    if have is None:
        keys[key] = idx
    elif isinstance(have, int):
        if have != idx:
            keys[key] = (have, idx)
    elif idx not in have:
        keys[key] = (*have, idx)


def _found(held: _Keys, keys: Iterable[int], run: _Run | None) -> set[int]:
    out: set[int] = set()
    for key in keys:
        have = held.get(key)
        if have is not None:
            out.update((have,) if isinstance(have, int) else have)
        if run is not None:
            out.update(run.find(key))
    return out


def _from(keys: _Keys, lowest: int) -> _Keys:
    """``keys`` without the indexes below ``lowest``."""
    out: _Keys = {}
    for key, have in keys.items():
        for idx in (have,) if isinstance(have, int) else have:
            if idx >= lowest:
                _add(out, key, idx)
    return out


class LookupView:
    """This process's view of ``receipt_keys_recent``: the keys of every row it has read or
    committed that is not merged yet, by key, and the merge's state as last seen.

    The rows of the generation being merged are held in :class:`Runs` once a commit that
    merges has built them (a process that merges needs them in that form), in dictionaries
    before. A view changes only through :meth:`apply`, with a committed state, and only on the
    event loop's thread: it adds keys in place, and drops them by replacing a dictionary
    whole, so a lookup on another thread (a large batch's screen) sees every key that is not
    in a lookup table.
    """

    def __init__(self, generation: int = GENERATION) -> None:
        self.generation = generation
        self.state = MergeState()
        self.seen = 0  # every row below this index has been read
        self._ids: _Keys = {}
        self._digests: _Keys = {}
        self._low = 0  # the dictionaries hold no index below this
        self.runs: Runs | None = None

    # Reading --------------------------------------------------------------------------------

    def ids(self, keys: Iterable[int]) -> set[int]:
        """The recent indexes whose receipt id has one of these lookup keys."""
        runs = self.runs
        return _found(self._ids, keys, runs.ids if runs is not None else None)

    def digests(self, keys: Iterable[int]) -> set[int]:
        """The recent indexes whose ``call_sha256`` has one of these lookup keys."""
        runs = self.runs
        return _found(self._digests, keys, runs.digests if runs is not None else None)

    # Changing -------------------------------------------------------------------------------

    def refresh(self, conn: sqlite3.Connection) -> bool:
        """Read, outside any transaction, what was committed since (by another process: a
        lookup that found nothing); whether there was anything new."""
        conn.execute("BEGIN")  # one snapshot for the state and the rows
        try:
            state, rows = read_since(conn, self.seen)
        finally:
            conn.execute("COMMIT")
        changed = bool(rows) or state != self.state
        self.apply(state, rows)
        return changed

    def apply(self, state: MergeState, rows: Rows, runs: Runs | None = None) -> None:
        """A committed state of the store: ``rows`` are recent rows from ``self.seen`` on (or
        a commit's own), ``state`` the merge's state with them; ``runs``: those of the
        generation that commit merged from, built under its lock (kept while they cover
        ``state``; the dictionaries keep their keys until then)."""
        self.state = state
        if runs is not None:
            self.runs = runs
        if self.runs is not None and not self.runs.covers(state):
            self.runs = None  # merged, or closed in a commit that failed
        self._drop_below(state.merged_below)  # merged: in the tables
        if self.runs is not None:
            self._drop_below(state.merging_below)  # being merged: in the runs
        ids, digests, low = self._ids, self._digests, self._low
        for idx, id_k, digest_k in rows:
            if idx >= low:
                _add(ids, id_k, idx)
                _add(digests, digest_k, idx)
            if idx >= self.seen:
                self.seen = idx + 1

    def _drop_below(self, lowest: int) -> None:
        if lowest <= self._low:
            return
        if self.seen <= lowest:  # all of them (the process that closed a generation)
            self._ids, self._digests = {}, {}
        else:
            self._ids, self._digests = _from(self._ids, lowest), _from(self._digests, lowest)
        self._low = lowest

    def closes(self) -> MergeState | None:
        """The state that closes the open rows as a generation, if it is time: no generation
        is being merged and :attr:`generation` indexes have been logged since the last one
        closed. Every row read so far goes."""
        state = self.state
        if state.merging or self.seen - state.merging_below < self.generation:
            return None
        return MergeState(state.merged_below, self.seen, 0, 0)


def read_since(conn: sqlite3.Connection, start: int
               ) -> tuple[MergeState, list[tuple[int, int, int]]]:
    """The merge's state and the recent rows from ``start`` on (inside the caller's
    transaction: one snapshot)."""
    row = conn.execute(_STATE).fetchone()
    state = MergeState(*row) if row is not None else MergeState()
    return state, conn.execute(_SINCE, (start,)).fetchall()


Statements = list[tuple[str, Sequence[Sequence[object]]]]


def merge_statements(state: MergeState, runs: Runs, count: int
                     ) -> tuple[Statements, MergeState]:
    """What merging the next ``count`` keys of each table writes, the state after it included:
    once the generation is merged, its rows leave ``receipt_keys_recent``."""
    out: Statements = []
    done = []
    for table, run, merged in zip(_TABLES, (runs.ids, runs.digests),
                                  (state.ids_merged, state.digests_merged), strict=True):
        stop = min(len(run), merged + count)
        if stop > merged:
            out.append((f"INSERT OR IGNORE INTO {table} (k, idx) VALUES (?, ?)",
                        run.rows(merged, stop)))
        done.append(stop)
    after = MergeState(state.merged_below, state.merging_below, done[0], done[1])
    if done[0] == len(runs.ids) and done[1] == len(runs.digests):
        out.append(("DELETE FROM receipt_keys_recent WHERE idx < ?",
                    [(state.merging_below,)]))
        after = MergeState(state.merging_below, state.merging_below, 0, 0)
    out.append(("UPDATE lookup_merge SET merged_below = ?, merging_below = ?, ids_merged = ?, "
                "digests_merged = ? WHERE one = 1",
                [(after.merged_below, after.merging_below, after.ids_merged,
                  after.digests_merged)]))
    return out, after
