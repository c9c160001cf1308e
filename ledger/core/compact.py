"""Incremental append state (a compact range over [0, size)) and batch integration.

:func:`integrate` is the whole write path's arithmetic, with no I/O: given the state after the last
commit and a batch of entries, it returns the next state and exactly the tiles and entry bundles
to write. Appending n leaves costs about 2n hashes in total: one leaf hash each, and one node
hash per merge of two equal perfect subtrees (n − popcount merges overall).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ledger.core.errors import LedgerError
from ledger.core.hashing import (
    HASH_SIZE,
    fold_right,
    leaf_hashes,
    node_hash,
    parent_hashes,
)
from ledger.core.tiles import ENTRIES_LEVEL, MAX_ENTRY_SIZE, TILE_HEIGHT, TILE_WIDTH

_FULL_TILE_BYTES = TILE_WIDTH * HASH_SIZE
_LEVEL_MASK = TILE_HEIGHT - 1


class EntryTooLargeError(LedgerError, ValueError):
    """An entry that cannot be stored: bundles prefix each entry with a uint16 length."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size

    def __str__(self) -> str:
        return f"entry is {self.size} bytes; the limit is {MAX_ENTRY_SIZE} (uint16 length prefix)"


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

    Level :data:`~ledger.core.tiles.ENTRIES_LEVEL` keys are entry bundles. Values are whole tiles as
    they now stand, full or partial, so a store can simply overwrite.
    """

    state: TreeState
    tiles: dict[tuple[int, int], bytes]


def encode_bundle_entry(entry: bytes) -> bytes:
    if len(entry) > MAX_ENTRY_SIZE:
        raise EntryTooLargeError(len(entry))
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


def bundle_keys(start: int, end: int) -> list[tuple[int, int]]:
    """The keys of the entry bundles that hold the entries at positions [start, end)."""
    if start >= end:
        return []
    return [(ENTRIES_LEVEL, n) for n in range(start >> TILE_HEIGHT, ((end - 1) >> TILE_HEIGHT) + 1)]


def entries_between(bundles: Mapping[tuple[int, int], bytes], start: int, end: int
                    ) -> list[bytes]:
    """The entries at positions [start, end) out of the whole bundles that hold them (keyed as
    :func:`bundle_keys` names them): fewer when a bundle is missing or short, so that a caller
    checks the count; ValueError when one is malformed."""
    out: list[bytes] = []
    for key in bundle_keys(start, end):
        data = bundles.get(key)
        if data is None:
            break
        base = key[1] << TILE_HEIGHT
        entries = decode_bundle(data)
        out.extend(entries[max(start - base, 0) : end - base])
        if len(entries) < TILE_WIDTH:
            break  # a partial bundle is the log's last one
    return out


def bundle_entry(data: bytes, position: int) -> bytes:
    """Entry ``position`` (0-255) of an entry bundle, found by skipping length prefixes only.

    For point reads of one entry (a stored receipt rebuilt from its leaf): no list of the other
    entries is built. Raises ValueError if the bundle is malformed or shorter than that.
    """
    if not 0 <= position < TILE_WIDTH:
        raise ValueError(f"a bundle position is 0-{TILE_WIDTH - 1}, not {position}")
    pos, end = 0, len(data)
    try:
        for _ in range(position):
            pos += 2 + (data[pos] << 8 | data[pos + 1])  # indexing: cheaper than from_bytes
        n = data[pos] << 8 | data[pos + 1]
    except IndexError:
        raise ValueError(f"entry bundle holds fewer than {position + 1} entries") from None
    if pos + 2 + n > end:
        raise ValueError("entry bundle ends inside an entry")
    return data[pos + 2 : pos + 2 + n]


@dataclass(frozen=True)
class BatchHashes:
    """The hashes of a batch appended at ``start`` that do not depend on the tree before it:
    ``levels[L]`` holds, in order, every level-L node whose leaves all lie in the batch
    (indexes ``ceil(start / 2**L)`` onwards); ``levels[0]`` the leaf hashes. That is all of the
    batch's hashing but the ~log2 nodes along its left edge, which need the compact range:
    a writer can compute it before it knows that state (:func:`batch_hashes`), e.g. while
    the batch before commits, and :func:`integrate` adds the edge."""

    start: int
    levels: list[list[bytes]]


def batch_hashes(start: int, entries: Sequence[bytes]) -> BatchHashes:
    """:class:`BatchHashes` of ``entries`` appended at index ``start`` (pure)."""
    for hashes in batch_hashes_in_steps(start, entries, len(entries) or 1):
        if hashes is not None:
            return hashes
    raise AssertionError("batch_hashes_in_steps ends with its result")  # pragma: no cover


def batch_hashes_in_steps(start: int, entries: Sequence[bytes], step: int
                          ) -> Iterator[BatchHashes | None]:
    """:func:`batch_hashes`, yielding None after each ``step`` hashes or so, then the result:
    for a caller that has other work to let through meanwhile (an event loop)."""
    nodes = leaf_hashes(entries[:step])
    for at in range(step, len(entries), step):
        yield None
        nodes += leaf_hashes(entries[at : at + step])
    levels = [nodes]
    first = start  # the index of nodes[0] at this level
    while len(nodes) > 1:
        skip = first & 1  # nodes[0] is a right child: its sibling lies before the batch
        below, nodes = nodes, []
        for at in range(skip, len(below) - 1, 2 * step):
            yield None
            nodes += parent_hashes(below[at : at + 2 * step])
        if not nodes:
            break
        levels.append(nodes)
        first = (first + skip) >> 1
    yield BatchHashes(start, levels)


def _bundle(state: TreeState, entries: Sequence[bytes], same: int | None,
            out: dict[tuple[int, int], bytes]) -> bytearray:
    """The entry bundles ``entries`` fill or start after ``state``, into ``out``: each entry
    prefixed by its uint16 length, cut every 256 entries; the new partial one returned.
    ``same``: the length of every entry, when they are all alike (lines): one join a bundle."""
    bundle = bytearray(state.edge_bundle)
    prefix = (same or 0).to_bytes(2, "big")
    pos, count, index = 0, len(entries), state.size
    while pos < count:
        take = min(count - pos, TILE_WIDTH - (index & 0xFF))
        if same is not None:
            bundle += prefix
            bundle += prefix.join(entries[pos : pos + take])
        else:
            bundle += b"".join([len(e).to_bytes(2, "big") + e for e in entries[pos : pos + take]])
        pos += take
        index += take
        if not index & 0xFF:
            out[(ENTRIES_LEVEL, (index - 1) >> TILE_HEIGHT)] = bytes(bundle)
            bundle.clear()
    if bundle:
        out[(ENTRIES_LEVEL, index >> TILE_HEIGHT)] = bytes(bundle)
    return bundle


def integrate(state: TreeState, entries: Sequence[bytes],
              hashes: BatchHashes | None = None) -> Integrated:
    """Append ``entries`` after ``state``; pure and all-or-nothing (bad input raises first).

    The batch is hashed level by level rather than leaf by leaf (:func:`batch_hashes`: each
    level's pairs in one loop, which does the same ~2n hashes with far less interpreter work per
    leaf), then joined to the compact range along its left edge; every eighth level's new nodes
    extend that level's tiles. ``hashes``: the batch's :func:`batch_hashes`, computed before
    (by a caller that guarantees they are of these ``entries``); used only if made for this
    start and this many entries, else computed here.
    """
    lengths = set(map(len, entries))  # one pass: the longest, and whether all are alike
    longest = max(lengths, default=0)
    if longest > MAX_ENTRY_SIZE:
        for e in entries:
            encode_bundle_entry(e)  # raises EntryTooLargeError for the first one too large
    old = state.size
    edge: dict[int, bytes] = {}
    if not entries:
        edge = {lv: bytes(b) for lv, b in state.edge_tiles.items() if b}
        return Integrated(TreeState(old, tuple(state.stack), edge, bytes(state.edge_bundle)), {})
    size, count = old + len(entries), len(entries)
    out: dict[tuple[int, int], bytes] = {}
    bundle = _bundle(state, entries, longest if len(lengths) == 1 else None, out)
    if hashes is None or hashes.start != old or len(hashes.levels[0]) != count:
        hashes = batch_hashes(old, entries)
    levels = hashes.levels
    # The compact range as left siblings waiting for a right one, keyed by tree level.
    carry = dict(zip([lv for lv in range(old.bit_length() - 1, -1, -1) if old >> lv & 1],
                     state.stack, strict=True))
    # At each level, the new complete nodes are indexes [old >> level, size >> level): the
    # batch's own (levels[level]), after at most one node whose leaves begin before the batch.
    straddle: bytes | None = None
    level = 0
    while old >> level < size >> level:
        first = old >> level
        own = levels[level] if level < len(levels) else []
        if not level & _LEVEL_MASK:  # a tile level: the new nodes extend its right edge
            lv = level >> 3
            row = b"".join([state.edge_tiles.get(lv, b""), straddle or b"", *own])
            n = first >> TILE_HEIGHT
            full = len(row) - len(row) % _FULL_TILE_BYTES
            for at in range(0, full, _FULL_TILE_BYTES):
                out[(lv, n)] = row[at : at + _FULL_TILE_BYTES]
                n += 1
            if full < len(row):
                out[(lv, n)] = edge[lv] = row[full:]
        head = straddle if straddle is not None else own[0]
        last = own[-1] if own else head
        if first & 1:  # the first new node is a right child: its left sibling is waiting
            straddle = node_hash(carry.pop(level), head)
        elif straddle is not None:  # its right sibling is the batch's first node, if any
            straddle = node_hash(straddle, own[0]) if own else None
        if size >> level & 1:  # the last node has no right sibling yet
            carry[level] = last
        level += 1
    for lv, b in state.edge_tiles.items():  # tile levels this batch did not reach
        if b and lv << 3 >= level:
            edge[lv] = b
    stack = tuple(carry[lv] for lv in sorted(carry, reverse=True))
    return Integrated(TreeState(size, stack, edge, bytes(bundle)), out)
