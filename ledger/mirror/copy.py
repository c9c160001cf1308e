"""The mirror's copy of one log: its entry bundles and hash tiles in a :class:`LogStore`.

The copy is the log's tree as far as the mirror has entries, built by the same arithmetic as
the log's own writer (:func:`ledger.core.compact.integrate`), so its tiles and bundles are the
origin log's byte for byte. Authenticated entry packages are committed here as soon as they are
verified, one store transaction each: tlog-mirror lets pending entries and the log share their
storage, since every entry stored is proven consistent with a pending checkpoint, and all
pending checkpoints are consistent with each other.

The store's checkpoint record holds the size the copy has reached (the mirror's *next entry*)
and, as its note, the unsigned tree head (origin, size, root) the mirror computed there: the
copy is never served by that record. What is served is the mirror checkpoint
(:mod:`ledger.mirror.state`), which is only ever set to a size the copy already holds durably,
so a crash between the two leaves the copy ahead, never behind.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Sequence

from ledger.core.compact import TreeState, integrate
from ledger.core.hashing import fold_right
from ledger.log.reader import LogReader, stack_coords
from ledger.log.tree_state import load_state
from ledger.storage.base import CheckpointRecord, LogStore

__all__ = ["LogCopy"]


class LogCopy:
    """One origin's copy. Open with :meth:`open`; appends are serialised by a lock."""

    def __init__(self, origin: str, store: LogStore, state: TreeState) -> None:
        self.origin = origin
        self.store = store
        self.reader = LogReader(store)
        self._state = state
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, origin: str, store: LogStore) -> LogCopy:
        latest = await store.latest()
        state = TreeState() if latest is None else await load_state(store.read_tiles,
                                                                    latest.size)
        return cls(origin, store, state)

    @property
    def size(self) -> int:
        """How many entries the copy holds durably: the mirror's next entry."""
        return self._state.size

    async def leaf_hashes(self, start: int, end: int) -> list[bytes]:
        """The stored leaf hashes of ``[start, end)`` (all below :attr:`size`)."""
        if start >= end:
            return []
        return await self.reader.leaf_hashes(start, end, self._state.size)

    async def root_at(self, size: int) -> bytes:
        """The root of the copy's first ``size`` entries (``size`` <= :attr:`size`)."""
        coords = stack_coords(size)
        got = await self.reader.hashes(coords, self._state.size)
        return fold_right([got[c] for c in coords])

    async def append(self, start: int, entries: Sequence[bytes]) -> int:
        """Store the entries at ``[start, start + len(entries))`` that the copy lacks, in one
        durable transaction; return the copy's size after it.

        Entries the copy already holds are skipped (another request stored them; both copies
        were proven against consistent checkpoints, so they are the same). Nothing is stored
        when ``start`` is past the copy's end: the copy never has holes.
        """
        async with self._lock:
            async with self.store.transaction() as tx:
                latest = await tx.latest()
                size = 0 if latest is None else latest.size
                state = self._state
                if size != state.size:  # written by another process (or a failed commit)
                    state = await load_state(tx.read_tiles, size)
                if start > size or start + len(entries) <= size:
                    self._state = state
                    return size
                done = integrate(state, entries[size - start:])
                note = _tree_head(self.origin, done.state.size, done.state.root())
                await tx.write(done.tiles, CheckpointRecord(done.state.size, time.time(), note))
            self._state = done.state
            self.reader.offer(done.tiles)
            return done.state.size

    async def tile(self, level: int, index: int, width: int) -> bytes | None:
        """Raw tile or bundle bytes of exactly ``width`` hashes or entries (as the log serves
        them), or None if the copy does not hold that many."""
        return await self.reader.tile(level, index, width)

    async def close(self) -> None:
        await self.store.close()


def _tree_head(origin: str, size: int, root: bytes) -> bytes:
    return f"{origin}\n{size}\n{base64.b64encode(root).decode('ascii')}\n".encode()
