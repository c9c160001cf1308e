"""C2SP tlog-tiles coordinates and paths: pure arithmetic, no storage.

A hash tile at level L holds tree-level 8·L hashes; the levels in between are recomputed from the
tile when needed. Only full subtrees are ever stored, so a stored hash never changes, and a partial
tile is always a prefix of the tile it will become.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT  # 256
MAX_LEVEL = 63
MAX_ENTRY_SIZE = 0xFFFF  # 65,535: an entry bundle prefixes each entry with a uint16 length
MAX_TREE_SIZE = (1 << 64) - 1  # tree sizes and indexes are uint64 across the tlog ecosystem


class TilePathError(LedgerError, ValueError):
    """A tile path that is not in the exact tlog-tiles form."""


@dataclass(frozen=True, order=True)
class Tile:
    """A hash tile (level >= 0) or an entry bundle (level == -1); width 1..256."""

    level: int
    index: int
    width: int = TILE_WIDTH

    @property
    def is_entries(self) -> bool:
        return self.level == ENTRIES_LEVEL

    @property
    def is_full(self) -> bool:
        return self.width == TILE_WIDTH

    def entries_end(self) -> int:
        """The end (exclusive) of the entries this tile covers: an entry bundle or level-0 tile
        covers one entry per hash, a level-L tile 256**L per hash, from ``index``'s first.
        tlog-tiles "Pruning" lets a log deny a tile once this is at most its minimum index."""
        per_hash = 1 << (TILE_HEIGHT * max(self.level, 0))
        return (self.index * TILE_WIDTH + self.width) * per_hash

    def path(self) -> str:
        head = "tile/entries/" if self.is_entries else f"tile/{self.level}/"
        tail = "" if self.is_full else f".p/{self.width}"
        return head + encode_index(self.index) + tail


ENTRIES_LEVEL = -1


def encode_index(n: int) -> str:
    """Write N in 3-digit groups, every group but the last prefixed with ``x``."""
    if n < 0:
        raise ValueError("tile index must be non-negative")
    groups = []
    while True:
        groups.append(f"{n % 1000:03d}")
        n //= 1000
        if n == 0:
            break
    groups.reverse()
    return "/".join(["x" + g for g in groups[:-1]] + [groups[-1]])


_INDEX_RE = re.compile(r"(?:x[0-9]{3}/)*[0-9]{3}")
# [0-9], not \d: \d also matches non-ASCII digits, which would give one tile several paths.
_TILE_RE = re.compile(
    r"tile/(entries|0|[1-9][0-9]?)/((?:x[0-9]{3}/)*[0-9]{3})(?:\.p/([1-9][0-9]{0,2}))?"
)


# A tile index is below any uint64 tree size, so it never needs more groups than that size.
# (Indexes past a given tree are for the caller to refuse, as "beyond the tree".)
_MAX_INDEX_CHARS = len(encode_index(MAX_TREE_SIZE))


def decode_index(text: str) -> int:
    """Inverse of :func:`encode_index`; refuses any non-canonical spelling.

    The length is bounded before anything is converted: a path is input from the network, and
    ``int()`` of thousands of digits is slow at best and a ``ValueError`` past 4,300 digits.
    """
    if len(text) > _MAX_INDEX_CHARS:
        raise TilePathError(f"tile index {text[:27]!r}… is longer than any uint64 tree needs")
    if not _INDEX_RE.fullmatch(text):
        raise TilePathError(f"malformed tile index {text!r}")
    n = int(text.replace("x", "").replace("/", ""))
    if encode_index(n) != text:
        raise TilePathError(f"non-canonical tile index {text!r}")
    return n


def parse_tile_path(path: str) -> Tile:
    """Parse ``tile/<L>/<N>[.p/<W>]`` or ``tile/entries/<N>[.p/<W>]`` strictly."""
    m = _TILE_RE.fullmatch(path)
    if m is None:
        raise TilePathError(f"malformed tile path {path!r}")
    level_s, index_s, width_s = m.groups()
    level = ENTRIES_LEVEL if level_s == "entries" else int(level_s)
    if level > MAX_LEVEL:
        raise TilePathError(f"tile level {level} is above {MAX_LEVEL}")
    width = TILE_WIDTH
    if width_s is not None:
        width = int(width_s)
        if width >= TILE_WIDTH:
            raise TilePathError(f"partial tile width {width} must be 1..{TILE_WIDTH - 1}")
    return Tile(level, decode_index(index_s), width)


def level_size(tree_size: int, level: int) -> int:
    """Number of complete hashes at tile level ``level`` (tree level 8·level) for a tree size."""
    return tree_size >> (TILE_HEIGHT * level)


def tiles_for_size(tree_size: int, *, entries: bool = False) -> list[Tile]:
    """Every tile (full and partial) that a tree of this size publishes, lowest level first."""
    out: list[Tile] = []
    levels = [ENTRIES_LEVEL] if entries else []
    level = 0
    while level_size(tree_size, level) > 0:
        levels.append(level)
        level += 1
    for lv in levels:
        count = tree_size if lv == ENTRIES_LEVEL else level_size(tree_size, lv)
        out.extend(Tile(lv, i) for i in range(count // TILE_WIDTH))
        if count % TILE_WIDTH:
            out.append(Tile(lv, count // TILE_WIDTH, count % TILE_WIDTH))
    return out


def tile_count(tree_size: int, level: int) -> int:
    """Hashes (or entries, for level -1) a tree of this size has at a tile level."""
    return tree_size if level == ENTRIES_LEVEL else level_size(tree_size, level)


def tiles_between(old_size: int, new_size: int, *, entries: bool = True) -> list[Tile]:
    """The tiles a tree of ``new_size`` publishes that one of ``old_size`` did not.

    Full tiles completed since ``old_size`` and the new partial tile of each level (when its
    width changed): what keeping a static mirror up to date needs to write, lowest level first.
    """
    if not 0 <= old_size <= new_size:
        raise ValueError(f"cannot go from tree size {old_size} to {new_size}")
    out: list[Tile] = []
    level = ENTRIES_LEVEL if entries else 0
    while True:
        new = tile_count(new_size, level)
        if new == 0 and level >= 0:
            break
        old = tile_count(old_size, level)
        out.extend(Tile(level, i) for i in range(old // TILE_WIDTH, new // TILE_WIDTH))
        if new % TILE_WIDTH and new != old:
            out.append(Tile(level, new // TILE_WIDTH, new % TILE_WIDTH))
        level += 1
    return out


def leaf_hashes_in(tiles: Mapping[tuple[int, int], bytes], start: int, end: int
                   ) -> list[bytes] | None:
    """The hashes of leaves [start, end) read from level-0 ``tiles`` (keyed (level, index),
    each tile's bytes from its first leaf on, as a writer's batch returns them), or None if
    one of them is missing or too short."""
    out: list[bytes] = []
    for n in range(start >> TILE_HEIGHT, ((end - 1) >> TILE_HEIGHT) + 1 if end > start else 0):
        row = tiles.get((0, n))
        base = n << TILE_HEIGHT
        lo, hi = max(start, base) - base, min(end, base + TILE_WIDTH) - base
        if row is None or len(row) < hi * HASH_SIZE:
            return None
        out += [row[at:at + HASH_SIZE]
                for at in range(lo * HASH_SIZE, hi * HASH_SIZE, HASH_SIZE)]
    return out
