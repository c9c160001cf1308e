"""The writer's tree state from stored tiles, and the root of a prefix of the tree.

What the writer (:mod:`ledger.log.sequencer`) reads to start, to catch up with another
process and to check that the stored tree extends a checkpoint it saw; what a mirror reads to
take over a copied log. Only complete subtrees and the right edge are read: O(log n) hashes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from ledger.core.compact import TreeState, decode_bundle
from ledger.core.hashing import HASH_SIZE, fold_right
from ledger.core.tilehash import ExpandedTile, tile_of
from ledger.core.tiles import ENTRIES_LEVEL
from ledger.log.errors import LogIntegrityError
from ledger.log.reader import edge_tiles_needed, stack_coords
from ledger.storage.base import TileKey

ReadTiles = Callable[[Sequence[TileKey]], Awaitable[dict[TileKey, bytes]]]


def root_tiles(size: int) -> list[TileKey]:
    """The tiles :func:`root_at` reads for ``size``."""
    return list(dict.fromkeys(tile_of(c)[:2] for c in stack_coords(size)))


def prefetching(read_tiles: ReadTiles, also: Sequence[TileKey]) -> ReadTiles:
    """``read_tiles`` that fetches ``also`` with its first read and remembers what it read,
    so tiles known to be needed next cost no read of their own."""
    cache: dict[TileKey, bytes] = {}
    extra = list(also)

    async def read(keys: Sequence[TileKey]) -> dict[TileKey, bytes]:
        nonlocal extra
        missing = [k for k in keys if k not in cache]
        if missing:
            cache.update(await read_tiles(list(dict.fromkeys([*missing, *extra]))))
            extra = []
        return {k: cache[k] for k in keys if k in cache}

    return read


def _missing(key: TileKey, size: int) -> LogIntegrityError:
    return LogIntegrityError(f"tile {key} needed at size {size} is missing from the store")


def _stack_at(got: Mapping[TileKey, bytes], size: int) -> list[bytes]:
    """The roots of the perfect subtrees that make up the first ``size`` leaves (the compact
    range, largest first), from the tiles :func:`root_tiles` names."""
    expanded: dict[TileKey, ExpandedTile] = {}
    stack = []
    for c in stack_coords(size):
        key = tile_of(c)[:2]
        if key not in got:
            raise _missing(key, size)
        tile = expanded.get(key) or expanded.setdefault(key, ExpandedTile(got[key]))
        try:
            stack.append(tile.get(c))
        except KeyError as e:
            raise LogIntegrityError(f"tile {key} is too short for size {size}") from e
    return stack


async def root_at(read_tiles: ReadTiles, size: int) -> bytes:
    """The root of the first ``size`` leaves, from tiles of a tree at least that large.

    Only complete subtrees are read, and those never change as the tree grows, so this is how
    a writer checks that the stored tree extends a checkpoint it saw before (a consistency
    check with the tiles as the proof).
    """
    return fold_right(_stack_at(await read_tiles(root_tiles(size)), size))


async def load_state(read_tiles: ReadTiles, size: int) -> TreeState:
    """Rebuild the writer's state at ``size`` from stored tiles (O(log n) hashes, few reads)."""
    edges = edge_tiles_needed(size)
    keys = list(dict.fromkeys([*root_tiles(size), *(k for k, _ in edges)]))
    got = await read_tiles(keys)
    for key in keys:
        if key not in got:
            raise _missing(key, size)
    stack = _stack_at(got, size)
    edge_tiles: dict[int, bytes] = {}
    bundle = b""
    for key, width in edges:
        data = got[key]
        if key[0] == ENTRIES_LEVEL:
            entries = decode_bundle(data)
            if len(entries) != width:
                raise LogIntegrityError(
                    f"entry bundle {key[1]} holds {len(entries)} entries, expected {width}"
                )
            bundle = data
        else:
            if len(data) != width * HASH_SIZE:
                raise LogIntegrityError(
                    f"tile {key} holds {len(data) // HASH_SIZE} hashes, expected {width}"
                )
            edge_tiles[key[0]] = data
    return TreeState(size, tuple(stack), edge_tiles, bundle)
