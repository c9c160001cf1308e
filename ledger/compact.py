"""Incremental append state (a compact range over [0, size)) and batch integration.

:func:`integrate` is the whole write path's arithmetic, with no I/O: given the state after the last
commit and a batch of entries, it returns the next state and exactly the tiles and entry bundles
to write. Appending n leaves costs about 2n hashes in total: one leaf hash each, and one node
hash per merge of two equal perfect subtrees (n − popcount merges overall).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from .hashing import HASH_SIZE, fold_right
from .tiles import ENTRIES_LEVEL, MAX_ENTRY_SIZE, TILE_HEIGHT, TILE_WIDTH, level_size

_sha256 = hashlib.sha256
_FULL_TILE_BYTES = TILE_WIDTH * HASH_SIZE
_LEVEL_MASK = TILE_HEIGHT - 1


class EntryTooLargeError(ValueError):
    """An entry that cannot be stored: bundles prefix each entry with a uint16 length."""


@dataclass(frozen=True)
class TreeState:
    """Everything the writer needs to append: the size, the compact range and the right edge.

    ``stack`` holds the roots of the perfect subtrees that decompose [0, size), largest first.
    ``edge_tiles`` maps each tile level to the bytes of its rightmost, not yet full tile, and
    ``edge_bundle`` is the rightmost partial entry bundle; both are empty when the edge is aligned.
    """

    size: int = 0
    stack: tuple[bytes, ...] = ()
    edge_tiles: dict[int, bytes] = field(default_factory=dict)
    edge_bundle: bytes = b""

    def root(self) -> bytes:
        return fold_right(self.stack)


@dataclass(frozen=True)
class Integrated:
    """The outcome of one batch: the next state and the tiles to store, keyed (level, index).

    Level :data:`~ledger.tiles.ENTRIES_LEVEL` keys are entry bundles. Values are whole tiles as
    they now stand, full or partial, so a store can simply overwrite.
    """

    state: TreeState
    tiles: dict[tuple[int, int], bytes]


def encode_bundle_entry(entry: bytes) -> bytes:
    if len(entry) > MAX_ENTRY_SIZE:
        raise EntryTooLargeError(
            f"entry is {len(entry)} bytes; the limit is {MAX_ENTRY_SIZE} (uint16 length prefix)"
        )
    return len(entry).to_bytes(2, "big") + entry


def decode_bundle(data: bytes) -> list[bytes]:
    """Split an entry bundle into its entries; raise ValueError if it is not well formed."""
    out = []
    pos, end = 0, len(data)
    while pos < end:
        if pos + 2 > end:
            raise ValueError("entry bundle ends inside a length prefix")
        n = int.from_bytes(data[pos : pos + 2], "big")
        pos += 2
        if pos + n > end:
            raise ValueError("entry bundle ends inside an entry")
        out.append(data[pos : pos + n])
        pos += n
    if len(out) > TILE_WIDTH:
        raise ValueError(f"entry bundle holds {len(out)} entries, more than {TILE_WIDTH}")
    return out


def integrate(state: TreeState, entries: Sequence[bytes]) -> Integrated:
    """Append ``entries`` after ``state``; pure and all-or-nothing (bad input raises first)."""
    encoded = [encode_bundle_entry(e) for e in entries]
    size = state.size
    stack = list(state.stack)
    bufs: dict[int, bytearray] = {lv: bytearray(b) for lv, b in state.edge_tiles.items()}
    out: dict[tuple[int, int], bytes] = {}
    dirty: set[int] = set()
    level0 = bufs.setdefault(0, bytearray())
    bundle = bytearray(state.edge_bundle)

    for enc in encoded:
        h = _sha256(b"\x00" + enc[2:]).digest()
        level0 += h
        bundle += enc
        index = size
        size += 1
        if not size & 0xFF:  # the leaf completed a tile and a bundle
            n = index >> TILE_HEIGHT
            out[(0, n)] = bytes(level0)
            out[(ENTRIES_LEVEL, n)] = bytes(bundle)
            level0.clear()
            bundle.clear()
        m, height = index, 0
        while m & 1:
            h = _sha256(b"\x01" + stack.pop() + h).digest()
            height += 1
            m >>= 1
            if not height & _LEVEL_MASK:
                lv = height >> 3
                buf = bufs.setdefault(lv, bytearray())
                buf += h
                dirty.add(lv)
                if len(buf) == _FULL_TILE_BYTES:
                    out[(lv, index >> (height + TILE_HEIGHT))] = bytes(buf)
                    buf.clear()
        stack.append(h)

    if encoded:
        dirty.add(0)
        if bundle:
            out[(ENTRIES_LEVEL, size >> TILE_HEIGHT)] = bytes(bundle)
    for lv in dirty:
        buf = bufs[lv]
        if buf:
            out[(lv, level_size(size, lv) >> TILE_HEIGHT)] = bytes(buf)
    edge = {lv: bytes(b) for lv, b in bufs.items() if b}
    return Integrated(TreeState(size, tuple(stack), edge, bytes(bundle)), out)


