"""Planning a commit's tile writes: what grows is appended as a part, the rest stored whole."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.compact import TreeState, encode_bundle_entry, integrate
from ledger.core.tileparts import TileKey, bundle_prefix, entries_from_parts, plan_writes, width
from ledger.core.tiles import ENTRIES_LEVEL, TILE_WIDTH


def _entry(i: int) -> bytes:
    return b"entry %d " % i + bytes(i % 50)


def _log(size: int) -> TreeState:
    return integrate(TreeState(), [_entry(i) for i in range(size)]).state


@settings(max_examples=30, deadline=None)  # up to 66k entries: edges at three tile levels
@given(before=st.integers(0, 66_000), grow=st.integers(1, 600))
def test_stored_then_planned_is_what_integrate_gives(before: int, grow: int) -> None:
    # Apply plans to a dictionary store the way a backend does, from any size to any size.
    prior = _log(before)
    stored: dict[TileKey, bytes] = {}
    for level, data in prior.edge_tiles.items():
        stored[(level, (before >> (8 * level)) // TILE_WIDTH)] = data
    if prior.edge_bundle:
        stored[(ENTRIES_LEVEL, before // TILE_WIDTH)] = prior.edge_bundle
    parts: dict[TileKey, list[tuple[int, bytes]]] = {}
    done = integrate(prior, [_entry(i) for i in range(before, before + grow)])
    plan = plan_writes(done.tiles, before, before + grow, None)
    for key in plan.cleared:
        parts.pop(key, None)
    stored.update(plan.whole)
    for key, start, data in plan.parts:
        assert key in stored  # a part always follows a whole row
        parts.setdefault(key, []).append((start, data))
    for key, data in done.tiles.items():
        assert stored[key] + b"".join(d for _, d in sorted(parts.get(key, []))) == data
    # Each part starts where the tile stood before.
    assert all(start == width(key, before) for key, start, _ in plan.parts)


def test_a_remembered_bundle_end_is_used_and_a_stale_one_ignored() -> None:
    done = integrate(_log(3), [_entry(3), _entry(4)])
    bundle = done.tiles[(ENTRIES_LEVEL, 0)]
    added = encode_bundle_entry(_entry(3)) + encode_bundle_entry(_entry(4))
    prefix = len(bundle) - len(added)
    assert bundle_prefix(bundle, 3) == prefix and bundle_prefix(bundle, 6) == -1
    for end in (None, (0, 3, prefix), (0, 2, 7), (1, 3, 7)):
        plan = plan_writes(done.tiles, 3, 5, end)
        assert ((ENTRIES_LEVEL, 0), 3, added) in plan.parts
        assert plan.bundle_end == (0, 5, len(bundle))
    # A remembered length is trusted as the log's own (entries never change): here, a wrong
    # one for the right width changes the cut, which is why only the store sets it.
    plan = plan_writes(done.tiles, 3, 5, (0, 3, prefix - 1))
    assert ((ENTRIES_LEVEL, 0), 3, bundle[prefix - 1:]) in plan.parts


def test_a_tile_that_does_not_simply_grow_is_stored_whole() -> None:
    tiles = integrate(_log(3), [_entry(3), _entry(4)]).tiles
    hashes = tiles[(0, 0)]
    # A hash tile whose length does not fit its width, or a bundle shorter than what was
    # stored, is written whole, and its parts go.
    odd = {(0, 0): hashes + b"x", (ENTRIES_LEVEL, 0): b"\x00\x05ab"}
    plan = plan_writes(odd, 3, 5, None)
    assert sorted(plan.whole) == sorted(odd.items())
    assert sorted(plan.cleared) == [(ENTRIES_LEVEL, 0), (0, 0)]
    assert plan.parts == []


@given(entries=st.lists(st.binary(max_size=40), min_size=1, max_size=60),
       cuts=st.sets(st.integers(1, 59)), offset=st.integers(1, 190), bundle=st.integers(0, 3),
       cut_end=st.integers(1, 70), data=st.data())
def test_a_bundles_parts_give_its_entries_from_where_they_begin(
        entries: list[bytes], cuts: set[int], offset: int, bundle: int, cut_end: int,
        data: st.DataObject) -> None:
    """``entries_from_parts`` over parts as commits append them (each the entries it added,
    keyed by the position of its first): the entries asked for, where whole bundles must still
    be read, and the stored end extended over the parts; nothing from parts that begin
    elsewhere or leave a gap."""
    start = (bundle << 8) + offset
    bounds = [0, *sorted(c for c in cuts if c < len(entries)), len(entries)]
    parts = [(offset + lo, b"".join(map(encode_bundle_entry, entries[lo:hi])))
             for lo, hi in itertools.pairwise(bounds)]
    size = sum(len(d) for _, d in parts)
    known = (bundle, offset, data.draw(st.integers(0, 10_000)))
    end = start + cut_end
    got, after, extended = entries_from_parts(parts, start, end, known)
    assert got == entries[:cut_end]
    stored_end = start + len(entries)
    assert after == (end if stored_end < end and stored_end & 0xFF else stored_end)
    assert extended == (bundle, offset + len(entries), known[2] + size)
    other = (bundle + 1, offset, 5)  # another bundle's end: left as it is
    assert entries_from_parts(parts, start, end, other)[2] == other
    assert entries_from_parts(parts, start + 1, end, known) == ([], start + 1, known)
    assert entries_from_parts([], start, end, known) == ([], start, known)
    if len(parts) > 2:  # a gap
        assert entries_from_parts(parts[:1] + parts[2:], start, end, known) == ([], start, known)
