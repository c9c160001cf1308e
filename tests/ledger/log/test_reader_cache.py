"""LogReader's two caches: expanded tiles (small LRU) and tile tops behind them (large LRU).

A proof through a tile whose expansion was evicted but whose top is kept must give the same
hashes as a fresh read, reading the store only when a wanted hash lies below the top (then
one row, to hash one 16-leaf block), and fail loudly when that row is gone from the store.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core import tilehash
from ledger.core.hashing import HASH_SIZE, leaf_hash, merkle_root
from ledger.core.note import Ed25519Signer
from ledger.core.proofs import verify_inclusion
from ledger.core.tilehash import TOP_FROM, ExpandedTile
from ledger.core.tiles import TILE_WIDTH
from ledger.log.facade import Log
from ledger.log.reader import LogReader, MissingTileError
from ledger.storage.base import TileKey
from ledger.storage.memory import MemoryStore

TILES = 6
SIZE = TILES * TILE_WIDTH  # six full level-0 tiles (and one partial level-1 tile)


class CountingStore(MemoryStore):
    """A memory store that counts the tiles read and can be made to lose some."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[TileKey] = []
        self.lost: set[TileKey] = set()

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        self.reads.extend(keys)
        got = await super().read_tiles(keys)
        return {k: v for k, v in got.items() if k not in self.lost}


@pytest.fixture
async def grown() -> tuple[CountingStore, list[bytes]]:
    store = CountingStore()
    log = await Log.open(store, signer=Ed25519Signer.generate("cache.test/log"))
    entries = [os.urandom(16) for _ in range(SIZE)]
    await log.append_many(entries)
    await log.close()
    return store, entries


async def _evicted_reader(store: CountingStore) -> LogReader:
    """A reader that has expanded every level-0 tile once but holds only one of them now."""
    reader = LogReader(store, cache_tiles=1, cache_tops=64)
    for tile in range(TILES):
        await reader.hashes([(0, tile * TILE_WIDTH)], SIZE)
    info = reader.cache_info()
    assert (info.tiles, info.tops) == (1, TILES), info
    store.reads.clear()
    return reader


def _subtree(leaves: list[bytes], level: int, index: int) -> bytes:
    return merkle_root(leaves[index << level:(index + 1) << level])


async def test_hashes_in_a_top_come_from_the_top_without_reading_the_store(
        grown: tuple[CountingStore, list[bytes]]) -> None:
    store, entries = grown
    leaves = [leaf_hash(e) for e in entries]
    reader = await _evicted_reader(store)
    coords = [(level, i) for level in range(TOP_FROM, 8) for i in range(SIZE >> level)]
    got = await reader.hashes(coords, SIZE)
    assert got == {c: _subtree(leaves, *c) for c in coords}
    assert store.reads == []  # every tile's top answered; nothing was re-read or re-expanded


async def test_a_hash_below_the_top_reads_one_row_and_matches(
        grown: tuple[CountingStore, list[bytes]]) -> None:
    store, entries = grown
    leaves = [leaf_hash(e) for e in entries]
    reader = await _evicted_reader(store)
    index = 2 * TILE_WIDTH + 37  # in tile 2, evicted from the expanded LRU
    got = await reader.hashes([(0, index), (2, index >> 2), (TOP_FROM, index >> TOP_FROM)], SIZE)
    assert got[(0, index)] == leaves[index]
    assert got[(2, index >> 2)] == _subtree(leaves, 2, index >> 2)
    assert store.reads == [(0, 2)]  # one row, the top supplied the rest
    # Served through the top, not re-expanded: the LRU still holds the last tile expanded (5).
    store.reads.clear()
    await reader.hashes([(0, 5 * TILE_WIDTH + 1)], SIZE)
    assert store.reads == []

    root = merkle_root(leaves)
    for i in (0, TILE_WIDTH + 5, 3 * TILE_WIDTH + 200, SIZE - 1):
        verify_inclusion(i, SIZE, leaves[i], await reader.inclusion_proof(i, SIZE), root)


async def test_a_row_lost_from_the_store_behind_a_top_is_reported(
        grown: tuple[CountingStore, list[bytes]]) -> None:
    store, _ = grown
    reader = await _evicted_reader(store)
    store.lost.add((0, 4))
    with pytest.raises(MissingTileError, match=r"tile \(0, 4\) is missing or too short"):
        await reader.hashes([(0, 4 * TILE_WIDTH + 1)], SIZE)
    # What the top holds is still served without the row.
    await reader.hashes([(TOP_FROM, (4 * TILE_WIDTH) >> TOP_FROM)], SIZE)


# --- the right edge: extended, not re-expanded, after each commit ---------------------------


@given(st.binary(min_size=0, max_size=TILE_WIDTH).map(len), st.data())
def test_an_extended_tile_equals_a_fresh_expansion(width: int, data: st.DataObject) -> None:
    """Whatever the widths (aligned or not, one entry more or a full tile), and for a row
    that does not extend the old one, ``extended`` gives exactly the fresh expansion."""
    row = os.urandom(HASH_SIZE * max(width, 1))
    wider = data.draw(st.integers(min_value=len(row) // HASH_SIZE, max_value=TILE_WIDTH))
    new = row + os.urandom(HASH_SIZE * (wider - len(row) // HASH_SIZE))
    if data.draw(st.booleans()):
        new = bytes([new[0] ^ 1]) + new[1:]  # not an extension: expanded afresh
    old = ExpandedTile(row)
    got, fresh = old.extended(new), ExpandedTile(new)
    assert got.width == fresh.width
    for sub in range(9):
        for pos in range(fresh.width >> sub):
            assert got.at(sub, pos) == fresh.at(sub, pos), (sub, pos)
    if fresh.width == TILE_WIDTH:
        assert got.top() == fresh.top()


async def test_the_edge_after_a_commit_hashes_only_its_new_nodes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    log = await Log.open(store, signer=Ed25519Signer.generate("edge.test/log"))
    entries = [os.urandom(16) for _ in range(TILE_WIDTH + 200)]
    leaves = [leaf_hash(e) for e in entries]
    await log.append_many(entries[:-1])
    size = len(entries) - 1
    await log.reader.inclusion_proof(size - 1, size)  # the edge tiles are expanded now

    hashed = [0]
    real = tilehash._sha256

    def counting(data: bytes) -> Any:
        hashed[0] += 1
        return real(data)

    monkeypatch.setattr(tilehash, "_sha256", counting)
    await log.append_many(entries[-1:])  # one more entry: the level-0 edge grows to 200
    size += 1
    proof = await log.reader.inclusion_proof(size - 1, size)
    verify_inclusion(size - 1, size, leaves[-1], proof, merkle_root(leaves))
    # A fresh expansion of the 200-wide tile hashes 196 nodes; extending the 199-wide one,
    # the new node at heights 1, 2 and 3 (100, 50, 25 nodes there, one more than before).
    assert hashed[0] == 3, hashed[0]
    await log.append_many([os.urandom(16)])  # 201: the new leaf pairs with nothing yet
    await log.reader.inclusion_proof(size, size + 1)
    assert hashed[0] == 3
    await log.close()


async def test_proofs_stay_right_while_the_edge_grows_into_full_tiles() -> None:
    """Small commits across level-0 tile boundaries (the edge extended, then promoted to a
    full tile), each followed by proofs through it; a fresh reader agrees on every proof."""
    store = MemoryStore()
    log = await Log.open(store, signer=Ed25519Signer.generate("edge.test/log"))
    leaves: list[bytes] = []
    for batch in (3, 250, 1, 2, 255, 1, 300, 5):
        entries = [os.urandom(8) for _ in range(batch)]
        await log.append_many(entries)
        leaves += [leaf_hash(e) for e in entries]
        size = len(leaves)
        root = merkle_root(leaves)
        for i in {0, size // 2, size - batch, size - 1}:
            verify_inclusion(i, size, leaves[i], await log.reader.inclusion_proof(i, size), root)
    fresh = LogReader(store)
    size = len(leaves)
    for i in range(0, size, 37):
        assert await fresh.inclusion_proof(i, size) == await log.reader.inclusion_proof(i, size)
    await log.close()
