""":func:`ledger.core.compact.integrate` against a tree built from scratch, with and without
the batch's hashes computed beforehand (:func:`ledger.core.compact.batch_hashes`)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger.core.compact import TreeState, batch_hashes, decode_bundle, integrate
from ledger.core.hashing import leaf_hash, merkle_root, node_hash
from ledger.core.tiles import ENTRIES_LEVEL, TILE_HEIGHT, TILE_WIDTH


def _levels(entries: list[bytes]) -> list[list[bytes]]:
    """Every complete node of the tree of ``entries``, level by level, one pair at a time."""
    levels = [[leaf_hash(e) for e in entries]]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append([node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)])
    return levels


def _expected_tiles(entries: list[bytes], old: int) -> dict[tuple[int, int], bytes]:
    """The tiles and bundles that appending ``entries[old:]`` to ``entries[:old]`` touches,
    as they then stand."""
    size = len(entries)
    levels = _levels(entries)
    out = {}
    for n in range(old >> TILE_HEIGHT, ((size - 1) >> TILE_HEIGHT) + 1):
        out[(ENTRIES_LEVEL, n)] = b"".join(len(e).to_bytes(2, "big") + e
                                           for e in entries[n << 8 : (n + 1) << 8])
    for lv in range(0, len(levels), TILE_HEIGHT):
        first, end = old >> lv, size >> lv
        if first < end:
            for n in range(first >> TILE_HEIGHT, ((end - 1) >> TILE_HEIGHT) + 1):
                row = levels[lv][n * TILE_WIDTH : (n + 1) * TILE_WIDTH]
                out[(lv // TILE_HEIGHT, n)] = b"".join(row)
    return out


def _stack(entries: list[bytes]) -> tuple[bytes, ...]:
    """The compact range of [0, size): the roots of its perfect subtrees, largest first (at
    each level whose bit is set in the size, the last complete node)."""
    levels, size = _levels(entries), len(entries)
    return tuple(levels[lv][(size >> lv) - 1]
                 for lv in range(size.bit_length() - 1, -1, -1) if size >> lv & 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=70_000), st.integers(min_value=1, max_value=600),
       st.booleans(), st.booleans())
@example(65_535, 2, True, True)
@example(65_536 - 300, 600, False, True)
@example(256 * 255 + 3, 509, True, False)
@example(0, 1, True, True)
def test_a_batch_integrates_to_the_tree_built_from_scratch(
        old: int, n: int, same_length: bool, hashed_before: bool) -> None:
    """Any start (across tile and 256**2 boundaries), any batch size, lines of one length or
    of many, hashed inside ``integrate`` or before: the same tiles, bundles and compact range
    as the tree built from scratch, one pair of nodes at a time."""
    prior_n = old % 1500 if old > 2000 else old  # big starts: the prior state from scratch
    base = old - prior_n
    entries = [(b"%08d" % i if same_length else b"e" * (i % 5) + b"%d" % i)
               for i in range(old + n)]
    # The state before the batch: ``base`` entries as one batch then the rest, so that the
    # edge tiles and bundle are those a writer holds.
    state = integrate(TreeState(), entries[:base]).state
    state = integrate(state, entries[base:old]).state
    assert state.stack == _stack(entries[:old])
    hashes = batch_hashes(old, entries[old:]) if hashed_before else None
    done = integrate(state, entries[old:], hashes)
    assert done.state.size == old + n
    assert done.state.stack == _stack(entries)
    assert done.state.root() == merkle_root(_levels(entries)[0])
    expected = _expected_tiles(entries, old)
    assert done.tiles == expected
    bundle_key = (ENTRIES_LEVEL, (old + n) >> TILE_HEIGHT)
    assert decode_bundle(done.state.edge_bundle) == (
        decode_bundle(expected[bundle_key]) if (old + n) & 0xFF else [])


@given(st.integers(min_value=0, max_value=5000), st.integers(min_value=1, max_value=300))
def test_hashes_made_for_another_start_are_not_used(old: int, n: int) -> None:
    """Hashes computed for a start the batch did not get (another process appended first)
    are recomputed, not trusted: the tree is the one built from scratch."""
    entries = [b"%d" % i for i in range(old + n + 3)]
    state = integrate(TreeState(), entries[:old + 3]).state
    stale = batch_hashes(old, entries[old + 3:])
    done = integrate(state, entries[old + 3:], stale)
    assert done.state.root() == merkle_root([leaf_hash(e) for e in entries])
