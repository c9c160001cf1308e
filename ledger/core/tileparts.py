"""How a store keeps the right edge of a log: partial tiles and bundles grow by appended parts.

A right-edge tile or entry bundle grows a little with every commit. Rewriting it whole each
time (an entry bundle is up to ~40 KB) made it most of what a small commit wrote. A store that
follows :func:`plan_writes` stores a tile whole the first time it writes it and again once it
is full; in between, each commit only appends a *part*: the elements it adds, keyed by the
position of the first one. The stored tile is then its whole row followed by its parts in
order of position, and a full tile's parts are deleted in the commit that stores it whole.
Every part follows a whole row, so a store written before parts existed, which has its edge
tiles whole, simply gains parts after them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ledger.core.compact import decode_bundle
from ledger.core.hashing import HASH_SIZE
from ledger.core.tiles import ENTRIES_LEVEL, TILE_HEIGHT, TILE_WIDTH

TileKey = tuple[int, int]  # (tile level, or ENTRIES_LEVEL for entry bundles; tile index)

BundleEnd = tuple[int, int, int]
"""(bundle index, entries, bytes) of an edge bundle as a store last committed it: the entries
of a log never change, so it stays true while other processes append."""


@dataclass
class TileWrites:
    """What one commit stores for its tiles (see :func:`plan_writes`)."""

    whole: list[tuple[TileKey, bytes]] = field(default_factory=list)
    parts: list[tuple[TileKey, int, bytes]] = field(default_factory=list)  # (key, start, data)
    cleared: list[TileKey] = field(default_factory=list)  # stored whole now: drop their parts
    bundle_end: BundleEnd | None = None  # the edge bundle after this commit, if it wrote one


def width(key: TileKey, size: int) -> int:
    """How many elements tile ``key`` holds in a tree of ``size`` entries (0-256)."""
    level, index = key
    count = size >> (TILE_HEIGHT * max(level, 0))  # nodes at the tile level's base
    return min(max(count - index * TILE_WIDTH, 0), TILE_WIDTH)


def bundle_prefix(bundle: bytes, count: int) -> int:
    """The length in bytes of the first ``count`` entries of ``bundle`` (-1 if it is shorter)."""
    at = 0
    for _ in range(count):
        at += 2 + int.from_bytes(bundle[at : at + 2], "big")
    return at if at <= len(bundle) else -1


def plan_writes(tiles: Mapping[TileKey, bytes], before: int, after: int,
                bundle_end: BundleEnd | None) -> TileWrites:
    """The writes that store ``tiles`` (whole contents, as ``integrate`` gives them) for a tree
    grown from ``before`` to ``after`` entries.

    A tile that was partial and still is gains a part with what it adds; a bundle's stored
    length comes from ``bundle_end`` when it matches, else from skipping its entries. Any
    other tile, or one whose bytes do not extend what its width says was stored, is written
    whole, and loses the parts it had.
    """
    plan = TileWrites()
    for key, data in tiles.items():
        was, now = width(key, before), width(key, after)
        bundle = key[0] == ENTRIES_LEVEL
        if 0 < was < now < TILE_WIDTH:
            if not bundle:
                stored = was * HASH_SIZE if len(data) == now * HASH_SIZE else -1
            elif bundle_end is not None and bundle_end[:2] == (key[1], was):
                stored = bundle_end[2]
            else:
                stored = bundle_prefix(data, was)
            if 0 < stored < len(data):
                plan.parts.append((key, was, data[stored:]))
                if bundle:
                    plan.bundle_end = (key[1], now, len(data))
                continue
        plan.whole.append((key, data))
        if was:
            plan.cleared.append(key)
        if bundle and now < TILE_WIDTH:
            plan.bundle_end = (key[1], now, len(data))
    return plan


def entries_from_parts(parts: Sequence[tuple[int, bytes]], start: int, end: int,
                       known: BundleEnd | None) -> tuple[list[bytes], int, BundleEnd | None]:
    """What the parts of the bundle holding position ``start`` give of the entries at
    [start, end): a store that grows bundles by parts reads only those from ``start``'s
    position on, as (first position, data) in order, to catch up on another writer.

    Returns the entries, the position from which whole bundles must still be read (``end``
    when nothing is left to read: the bundle ends before it, and the caller gets fewer), and
    ``known``, the bundle's stored end as the store last committed it, extended over the
    parts so that its next commit appends without walking the bundle. Parts that do not begin
    at ``start`` or leave a gap (the bundle was stored whole since, or is damaged) give
    nothing: ``([], start, known)``, and the bundle is read whole. ValueError for a malformed
    part.
    """
    first, offset = start >> TILE_HEIGHT, start & (TILE_WIDTH - 1)
    at, grown = offset, 0
    out: list[bytes] = []
    for position, data in parts:
        if position != at:
            return [], start, known
        entries = decode_bundle(data)
        out.extend(entries)
        at += len(entries)
        grown += len(data)
    if not out:
        return [], start, known
    if known is not None and known[:2] == (first, offset):
        known = (first, at, known[2] + grown)
    after = (first << TILE_HEIGHT) + at
    return out[: end - start], end if after < end and after & (TILE_WIDTH - 1) else after, known
