"""Reading any stored subtree hash out of tiles: which tile holds it, and how to derive it.

A tile stores only its bottom row (tree level 8·L); the seven levels above it are recomputed
when the tile is first expanded. Expanded full tiles never change, so callers may cache them.

An expanded tile holds 511 hashes. Its *top* (heights 4 to 8: 31 hashes, 992 bytes) is an
eighth of that and is what makes a cold tile expensive (240 of its 255 hashes), so a reader can
keep the tops of many more tiles than whole expansions: a proof through a tile whose top is
known needs only the 16-leaf block under the path, 15 hashes.
"""

from __future__ import annotations

import hashlib

from ledger.core.hashing import HASH_SIZE, NODE_PREFIX
from ledger.core.proofs import Coord
from ledger.core.tiles import TILE_HEIGHT

_sha256 = hashlib.sha256
_PAIR = 2 * HASH_SIZE
TOP_FROM = 4  # a top starts at this height inside the tile
_BLOCK = 1 << TOP_FROM  # leaves under one node of the top's lowest row
# Offset of each height of a top, in hashes: 16, 8, 4, 2, 1 hashes for heights 4 to 8.
_TOP_OFFSETS = {h: sum(1 << (TILE_HEIGHT - k) for k in range(TOP_FROM, h))
                for h in range(TOP_FROM, TILE_HEIGHT + 1)}


def tile_of(coord: Coord) -> tuple[int, int, int]:
    """(tile level, tile index, hashes of the tile needed) for the subtree hash ``coord``."""
    level, index = coord
    tl = level // TILE_HEIGHT
    sub = level - tl * TILE_HEIGHT
    first = index << sub
    return tl, first >> TILE_HEIGHT, (first & 0xFF) + (1 << sub)


class ExpandedTile:
    """A tile's bottom row and every complete node above it inside the tile."""

    __slots__ = ("_data", "_offsets", "width")

    def __init__(self, row: bytes) -> None:
        if len(row) % HASH_SIZE or not row:
            raise ValueError(f"tile data of {len(row)} bytes is not a whole number of hashes")
        self.width = len(row) // HASH_SIZE
        parts = [row]
        offsets = [0]
        pos = len(row)
        cur = row
        for _ in range(TILE_HEIGHT):
            n = len(cur) // (2 * HASH_SIZE)
            if n == 0:
                break
            # Siblings are adjacent in the row, so each 64-byte slice is left ‖ right:
            # node_hash(left, right) = SHA-256(0x01 ‖ slice), with one copy fewer.
            nxt = b"".join([_sha256(NODE_PREFIX + cur[j : j + _PAIR]).digest()
                            for j in range(0, n * _PAIR, _PAIR)])
            offsets.append(pos)
            pos += len(nxt)
            parts.append(nxt)
            cur = nxt
        self._data = b"".join(parts)
        self._offsets = offsets

    def extended(self, row: bytes) -> ExpandedTile:
        """``ExpandedTile(row)`` for a wider ``row`` that starts with this tile's row, hashing
        only the nodes that are new.

        The right-edge tile of a growing log is replaced by a wider one after every commit; a
        full re-expansion would hash every node of it again (up to 255 hashes per level for
        the one or two entries a small batch adds). Any other ``row`` is expanded afresh.
        """
        width = self.width
        have = width * HASH_SIZE
        if len(row) < have or len(row) % HASH_SIZE or row[:have] != self._data[:have]:
            return ExpandedTile(row)
        out = ExpandedTile.__new__(ExpandedTile)
        out.width = len(row) // HASH_SIZE
        parts = [row]
        offsets = [0]
        pos = len(row)
        cur = row
        for height in range(1, TILE_HEIGHT + 1):
            n = len(cur) // _PAIR
            if n == 0:
                break
            old = width >> height  # nodes this tile already holds at this height
            kept = (self._data[self._offsets[height]:self._offsets[height] + old * HASH_SIZE]
                    if old else b"")
            nxt = kept + b"".join([_sha256(NODE_PREFIX + cur[j : j + _PAIR]).digest()
                                   for j in range(old * _PAIR, n * _PAIR, _PAIR)])
            offsets.append(pos)
            pos += len(nxt)
            parts.append(nxt)
            cur = nxt
        out._data = b"".join(parts)
        out._offsets = offsets
        return out

    def at(self, sub: int, pos: int) -> bytes:
        """Hash ``pos`` at height ``sub`` inside the tile, unchecked: the caller has made sure
        that the tile is wide enough, ``(pos + 1) << sub <= width`` (see :meth:`get`)."""
        start = self._offsets[sub] + pos * HASH_SIZE
        return self._data[start : start + HASH_SIZE]

    def top(self) -> bytes:
        """Heights ``TOP_FROM`` to 8 of a full tile, for :class:`TopTile`."""
        return self._data[self._offsets[TOP_FROM]:]

    def get(self, coord: Coord) -> bytes:
        level, index = coord
        sub = level % TILE_HEIGHT
        pos = index & ((1 << (TILE_HEIGHT - sub)) - 1)
        if sub >= len(self._offsets) or (pos + 1) << sub > self.width:
            raise KeyError(f"hash {coord} is not complete in a tile of width {self.width}")
        start = self._offsets[sub] + pos * HASH_SIZE
        return self._data[start : start + HASH_SIZE]


class TopTile:
    """A full tile read through its cached top, plus the bottom row when heights < 4 are needed.

    Heights ``TOP_FROM`` and up come from the top; a lower hash is recomputed from the 16-leaf
    block that holds it (15 hashes), which is all a proof path through the tile needs.
    """

    __slots__ = ("_blocks", "_row", "_top")

    def __init__(self, top: bytes, row: bytes | None) -> None:
        self._top = top
        self._row = row
        self._blocks: dict[int, ExpandedTile] = {}

    def at(self, sub: int, pos: int) -> bytes:
        if sub >= TOP_FROM:
            start = (_TOP_OFFSETS[sub] + pos) * HASH_SIZE
            return self._top[start : start + HASH_SIZE]
        if self._row is None:
            raise KeyError("this tile was read without its bottom row")
        block = (pos << sub) // _BLOCK
        tile = self._blocks.get(block)
        if tile is None:
            tile = self._blocks[block] = ExpandedTile(
                self._row[block * _BLOCK * HASH_SIZE : (block + 1) * _BLOCK * HASH_SIZE])
        return tile.at(sub, pos - (block << (TOP_FROM - sub)))
