"""Serving reads from tiles: subtree hashes, proofs, entries, with a cache of expanded tiles.

Full tiles never change, so they are cached in an LRU, expanded (every node inside the tile) on
first use; a proof then costs a handful of dictionary lookups and at most one tile read per level
that is not cached yet. Behind that LRU, a much larger one keeps only the *tops* of tiles (see
:mod:`ledger.core.tilehash`): a proof through such a tile reads its row and hashes one 16-leaf block
instead of re-expanding the tile. Partial tiles at the right edge are re-read when a wider one
is needed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ledger.core.compact import decode_bundle
from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE, fold_right
from ledger.core.proofs import (
    Coord,
    ProofError,
    Range,
    consistency_plan,
    inclusion_plan,
    range_coords,
    shared_inclusion_plans,
)
from ledger.core.tilehash import TOP_FROM, ExpandedTile, TopTile
from ledger.core.tiles import ENTRIES_LEVEL, TILE_HEIGHT, TILE_WIDTH, level_size
from ledger.storage.base import LogStore, TileKey

_TILE_MASK = TILE_WIDTH - 1

_Tile = ExpandedTile | bytes | tuple[ExpandedTile, bytes]
"""A cached tile: expanded; raw bytes (expanded on first use); or raw bytes that extend an
expanded predecessor (the right edge after a commit), expanded by extending it."""


class MissingTileError(LedgerError, RuntimeError):
    """The store lacks a tile that a committed checkpoint needs: the store is damaged."""


@dataclass(frozen=True)
class CacheInfo:
    """How full the reader's two caches are: for operators sizing ``cache_tiles``, benchmarks
    and tests, which must not reach into the reader to find out."""

    tiles: int  # full tiles held (raw or expanded)
    tiles_max: int
    tops: int  # tile tops held
    tops_max: int


class LogReader:
    """Read side of one log store; safe to share between many concurrent requests."""

    def __init__(self, store: LogStore, *, cache_tiles: int = 4096, cache_tops: int = 65536
                 ) -> None:
        self.store = store
        # A store may offer a synchronous point read (SQLite does): cheaper than a thread hop.
        self._read_now: Callable[[Sequence[TileKey]], dict[TileKey, bytes]] | None = getattr(
            store, "read_tiles_now", None)
        self._tops: OrderedDict[TileKey, bytes] = OrderedDict()  # ~1 KiB each
        self._tops_max = cache_tops
        # Values are expanded on first use: tiles offered by the writer stay raw bytes until a
        # read needs them, so appends that nobody reads never pay for expanding them.
        self._cache: OrderedDict[TileKey, _Tile] = OrderedDict()
        self._cache_max = cache_tiles
        self._edge: dict[TileKey, _Tile] = {}

    def cache_info(self) -> CacheInfo:
        return CacheInfo(len(self._cache), self._cache_max, len(self._tops), self._tops_max)

    def offer(self, tiles: Mapping[TileKey, bytes]) -> None:
        """Accept tiles just committed by an in-process writer so proofs need no store read.

        A right-edge tile that was expanded already is kept with its successor, which is
        then expanded by extending it (:meth:`ExpandedTile.extended`: only the new nodes are
        hashed) when a read first needs it.
        """
        for key, data in tiles.items():
            if key[0] == ENTRIES_LEVEL:
                continue
            prev = self._edge.get(key)
            base = prev if isinstance(prev, ExpandedTile) else (
                prev[0] if isinstance(prev, tuple) else None)
            value: _Tile = data if base is None else (base, data)
            if len(data) == TILE_WIDTH * HASH_SIZE:
                self._edge.pop(key, None)
                self._remember(key, value)
            else:
                self._edge[key] = value

    def _remember(self, key: TileKey, tile: _Tile) -> None:
        self._cache[key] = tile
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_max:
            self._cache.popitem(last=False)

    def _cached(self, key: TileKey, need: int) -> ExpandedTile | None:
        tile = self._cache.get(key)
        if tile is not None:
            self._cache.move_to_end(key)
            if not isinstance(tile, ExpandedTile):
                tile = self._cache[key] = self._expand_full(key, tile)
            return tile
        edge = self._edge.get(key)
        if edge is None:
            return None
        if not isinstance(edge, ExpandedTile):
            base, row = edge if isinstance(edge, tuple) else (None, edge)
            if len(row) < need * HASH_SIZE:
                return None
            edge = self._edge[key] = ExpandedTile(row) if base is None else base.extended(row)
        return edge if edge.width >= need else None

    def _expand_full(self, key: TileKey, raw: bytes | tuple[ExpandedTile, bytes]
                     ) -> ExpandedTile:
        tile = ExpandedTile(raw) if isinstance(raw, bytes) else raw[0].extended(raw[1])
        self._tops[key] = tile.top()
        self._tops.move_to_end(key)
        while len(self._tops) > self._tops_max:
            self._tops.popitem(last=False)
        return tile

    async def _read(self, keys: list[TileKey]) -> dict[TileKey, bytes]:
        if self._read_now is not None and len(keys) <= 16:
            return self._read_now(keys)
        return await self.store.read_tiles(keys)

    async def hashes(self, coords: Iterable[Coord], tree_size: int) -> dict[Coord, bytes]:
        """The stored subtree hashes at ``coords``, each of which must be complete in the tree."""
        wanted = list(coords)
        return dict(zip(wanted, await self._lookup(wanted, tree_size), strict=True))

    async def _lookup(self, wanted: list[Coord], tree_size: int) -> list[bytes]:
        """The hashes at ``wanted``, in order (what :meth:`hashes` maps them to)."""
        height, mask = TILE_HEIGHT, _TILE_MASK
        needs: dict[TileKey, int] = {}
        low: set[TileKey] = set()  # tiles some wanted hash of which lies below a top
        spots: list[tuple[TileKey, int, int]] = []  # (tile, height in the tile, position there)
        for level, index in wanted:
            if (index + 1) << level > tree_size:
                raise ProofError(f"subtree {(level, index)} is not complete at size {tree_size}")
            # tile_of((level, index)), inlined: this loop runs for every hash of every proof.
            sub = level % height
            first = index << sub
            key = (level // height, first >> height)
            need = (first & mask) + (1 << sub)
            spots.append((key, sub, index & (mask >> sub)))
            if needs.get(key, 0) < need:
                needs[key] = need
            if sub < TOP_FROM:
                low.add(key)
        tiles: dict[TileKey, ExpandedTile | TopTile] = {}
        missing = []
        rows_for_tops = []
        for key, need in needs.items():
            tile = self._cached(key, need)
            if tile is not None:
                tiles[key] = tile
            elif key in self._tops:
                self._tops.move_to_end(key)
                if key in low:
                    rows_for_tops.append(key)
                else:
                    tiles[key] = TopTile(self._tops[key], None)
            else:
                missing.append(key)
        if missing or rows_for_tops:
            got = await self._read(missing + rows_for_tops)
            for key in rows_for_tops:
                row = got.get(key)
                if row is None or len(row) != TILE_WIDTH * HASH_SIZE:
                    raise MissingTileError(f"tile {key} is missing or too short in the store")
                tiles[key] = TopTile(self._tops[key], row)
            for key in missing:
                data = got.get(key)
                if data is None or len(data) < needs[key] * HASH_SIZE:
                    raise MissingTileError(f"tile {key} is missing or too short in the store")
                if len(data) == TILE_WIDTH * HASH_SIZE:
                    self._edge.pop(key, None)  # the tile is full now: drop its partial copy
                    tile = self._expand_full(key, data)
                    self._remember(key, tile)
                else:
                    tile = self._edge[key] = ExpandedTile(data)
                tiles[key] = tile
        # Every tile is at least as wide as its widest need, so each spot is a complete node.
        return [tiles[key].at(sub, pos) for key, sub, pos in spots]

    async def _proof(self, plan: list[Range], tree_size: int) -> list[bytes]:
        """What ``assemble(plan, await self.hashes(plan_coords(plan)))`` gives, decomposing
        each range into stored subtrees once instead of twice."""
        flat: list[Coord] = []
        spans: list[int] = []  # how many of ``flat`` each range of the plan folds
        for a, b in plan:
            width = b - a
            if width > 0 and not width & (width - 1) and not a & (width - 1):
                level = width.bit_length() - 1  # one aligned perfect subtree: the common case
                flat.append((level, a >> level))
                spans.append(1)
            else:
                coords = range_coords(a, b)
                flat.extend(coords)
                spans.append(len(coords))
        got = await self._lookup(flat, tree_size)
        out = []
        at = 0
        for n in spans:
            out.append(got[at] if n == 1 else fold_right(got[at : at + n]))
            at += n
        return out

    async def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        return await self._proof(inclusion_plan(index, tree_size), tree_size)

    async def inclusion_proofs(self, indexes: Sequence[int], tree_size: int
                               ) -> list[list[bytes]]:
        """``[await inclusion_proof(i, tree_size) for i in indexes]``, computed together.

        The entries of one batch are neighbours, so their proofs share all but their lowest
        levels (:func:`~ledger.core.proofs.shared_inclusion_plans`): the shared part is
        looked up (and its right-edge ranges folded) once, and each distinct lower range once,
        about 2n + log(size) ranges for n neighbours instead of n·log(size).
        """
        lower, upper = shared_inclusion_plans(indexes, tree_size)
        unique: dict[Range, int] = {}
        for plan in lower:
            for r in plan:
                unique.setdefault(r, len(unique))
        hashes = await self._proof([*unique, *upper], tree_size)
        top = hashes[len(unique):]
        return [[hashes[unique[r]] for r in plan] + top for plan in lower]

    async def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        if old_size == new_size:
            return []
        return await self._proof(consistency_plan(old_size, new_size), new_size)

    async def leaf_hashes(self, start: int, end: int, tree_size: int) -> list[bytes]:
        return list((await self.hashes([(0, i) for i in range(start, end)], tree_size)).values())

    async def tile(self, level: int, index: int, width: int) -> bytes | None:
        """Raw tile (or bundle) bytes of exactly ``width`` hashes/entries, or None if not stored."""
        got = (await self.store.read_tiles([(level, index)])).get((level, index))
        if got is None:
            return None
        if level == ENTRIES_LEVEL:
            entries = decode_bundle(got)
            if len(entries) < width:
                return None
            if len(entries) == width:
                return got
            return b"".join(len(e).to_bytes(2, "big") + e for e in entries[:width])
        if len(got) < width * HASH_SIZE:
            return None
        return got[: width * HASH_SIZE]

    async def entries(self, start: int, end: int) -> list[bytes]:
        """Entries [start, end) from their bundles (the caller checks ``end`` <= tree size)."""
        keys = [(ENTRIES_LEVEL, n) for n in range(start // TILE_WIDTH, (end - 1) // TILE_WIDTH + 1)]
        got = await self.store.read_tiles(keys) if end > start else {}
        out: list[bytes] = []
        for key in keys:
            if key not in got:
                raise MissingTileError(f"entry bundle {key[1]} is missing from the store")
            bundle = decode_bundle(got[key])
            base = key[1] * TILE_WIDTH
            lo, hi = max(start - base, 0), min(end - base, len(bundle))
            if hi < min(end - base, TILE_WIDTH):
                raise MissingTileError(f"entry bundle {key[1]} is shorter than expected")
            out.extend(bundle[lo:hi])
        return out


def stack_coords(size: int) -> list[Coord]:
    """Coordinates of the perfect subtrees that decompose [0, size): the compact range."""
    out: list[Coord] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            out.append((level, start >> level))
            start += 1 << level
    return out


def edge_tiles_needed(size: int) -> list[tuple[TileKey, int]]:
    """(key, width) of each partial tile a writer must hold at this size, bundle included."""
    out: list[tuple[TileKey, int]] = []
    if size % TILE_WIDTH:
        out.append(((ENTRIES_LEVEL, size // TILE_WIDTH), size % TILE_WIDTH))
    level = 0
    while level_size(size, level):
        count = level_size(size, level)
        if count % TILE_WIDTH:
            out.append(((level, count // TILE_WIDTH), count % TILE_WIDTH))
        level += 1
    return out


