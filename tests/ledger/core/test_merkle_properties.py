"""Hypothesis properties of the append path and of proofs served from tiles."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.compact import TreeState, decode_bundle, integrate
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.proofs import (
    ProofError,
    inclusion_plan,
    newest_leaves_proofs,
    shared_inclusion_plans,
    verify_consistency,
    verify_inclusion,
)
from ledger.core.tiles import ENTRIES_LEVEL, leaf_hashes_in
from ledger.log.reader import LogReader
from ledger.storage.memory import MemoryStore

entries_st = st.lists(st.binary(max_size=24), min_size=1, max_size=700)


def build(entries: list[bytes], cuts: list[int]) -> tuple[TreeState, MemoryStore]:
    store = MemoryStore()
    state = TreeState()
    bounds = sorted({c % (len(entries) + 1) for c in cuts} | {0, len(entries)})
    for a, b in itertools.pairwise(bounds):
        done = integrate(state, entries[a:b])
        state = done.state
        store.tiles.update(done.tiles)
    return state, store


@settings(max_examples=60, deadline=None)
@given(entries_st, st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
       st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_root_and_tiles_do_not_depend_on_batches(
    entries: list[bytes], cuts_a: list[int], cuts_b: list[int]
) -> None:
    state_a, store_a = build(entries, cuts_a)
    state_b, store_b = build(entries, cuts_b)
    assert state_a.root() == state_b.root() == merkle_root([leaf_hash(e) for e in entries])
    assert store_a.tiles == store_b.tiles
    bundles = [store_a.tiles[k] for k in sorted(store_a.tiles) if k[0] == ENTRIES_LEVEL]
    assert [e for b in bundles for e in decode_bundle(b)] == entries


@settings(max_examples=60, deadline=None)
@given(entries_st, st.lists(st.integers(min_value=0, max_value=10_000), max_size=6),
       st.data())
def test_proofs_from_tiles_verify(entries: list[bytes], cuts: list[int], data: st.DataObject
                                  ) -> None:
    _, store = build(entries, cuts)
    reader = LogReader(store, cache_tiles=4)
    leaves = [leaf_hash(e) for e in entries]
    size = data.draw(st.integers(min_value=1, max_value=len(entries)))
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    old = data.draw(st.integers(min_value=1, max_value=size))
    root, old_root = merkle_root(leaves[:size]), merkle_root(leaves[:old])
    inc = asyncio.run(reader.inclusion_proof(index, size))
    verify_inclusion(index, size, leaves[index], inc, root)
    con = asyncio.run(reader.consistency_proof(old, size))
    verify_consistency(old, size, old_root, root, con)


def _flip(b: bytes, bit: int) -> bytes:
    arr = bytearray(b)
    arr[bit // 8] ^= 1 << (bit % 8)
    return bytes(arr)


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=2, max_value=300), st.data())
def test_any_bit_flip_breaks_proofs(n: int, data: st.DataObject) -> None:
    entries = [i.to_bytes(4, "big") for i in range(n)]
    _, store = build(entries, [])
    reader = LogReader(store)
    leaves = [leaf_hash(e) for e in entries]
    index = data.draw(st.integers(min_value=0, max_value=n - 1))
    root = merkle_root(leaves)
    proof = asyncio.run(reader.inclusion_proof(index, n))
    bit = data.draw(st.integers(min_value=0, max_value=255))
    if proof:
        k = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        bad = [*proof[:k], _flip(proof[k], bit), *proof[k + 1:]]
        try:
            verify_inclusion(index, n, leaves[index], bad, root)
            raise AssertionError("a flipped proof hash verified")
        except ProofError:
            pass
    variants = [
        (index, n, leaves[index], proof, _flip(root, bit)),
        (index, n, _flip(leaves[index], bit), proof, root),
        (index ^ (1 << data.draw(st.integers(0, 9))), n, leaves[index], proof, root),
    ]
    # RFC 9162 binds the size through the path's shape only: a size whose path for this index has
    # another length must fail here; the signed checkpoint binds the exact size (see test_note).
    bad_size = n ^ (1 << data.draw(st.integers(0, 9)))
    if not 0 <= index < bad_size or len(inclusion_plan(index, bad_size)) != len(proof):
        variants.append((index, bad_size, leaves[index], proof, root))
    for args in variants:
        try:
            verify_inclusion(*args)
        except ProofError:
            continue
        raise AssertionError(f"tampered inclusion verified: {args[:2]}")

    old = data.draw(st.integers(min_value=1, max_value=n - 1))
    old_root = merkle_root(leaves[:old])
    con = asyncio.run(reader.consistency_proof(old, n))
    variants = [
        (old, n, _flip(old_root, bit), root, con),
        (old, n, old_root, _flip(root, bit), con),
    ]
    for k in range(len(con)):
        variants.append((old, n, old_root, root, [*con[:k], _flip(con[k], bit), *con[k + 1:]]))
    for args in variants:
        try:
            verify_consistency(*args)
        except ProofError:
            continue
        raise AssertionError("tampered consistency proof verified")


def _path_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """RFC 9162 §2.1.3.1 PATH(m, D[n]) as its recursive definition, top-down, then reversed."""
    out = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = 1 << ((hi - lo - 1).bit_length() - 1)
        if index < lo + k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo = lo + k
    return out[::-1]


@given(st.integers(min_value=1, max_value=2**62), st.data())
def test_inclusion_plan_is_the_rfc_path(size: int, data: st.DataObject) -> None:
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    assert inclusion_plan(index, size) == _path_ranges(index, size)


@given(st.integers(min_value=1, max_value=2**62), st.data())
def test_shared_inclusion_plans_split_each_rfc_path(size: int, data: st.DataObject) -> None:
    """lower[k] + upper is PATH(indexes[k]) for any set of indexes, neighbours or not."""
    first = data.draw(st.integers(min_value=0, max_value=size - 1))
    span = data.draw(st.sampled_from([1, 2, 3, 32, 257, 4096, size]))
    indexes = data.draw(st.lists(
        st.integers(min_value=first, max_value=min(size - 1, first + span - 1)),
        min_size=1, max_size=40))
    lower, upper = shared_inclusion_plans(indexes, size)
    assert len(lower) == len(indexes)
    for index, low in zip(indexes, lower, strict=True):
        assert low + upper == _path_ranges(index, size)
    assert shared_inclusion_plans([], size) == ([], [])


def test_shared_inclusion_plans_refuse_an_index_outside_the_tree() -> None:
    for indexes, size in (([0, 5], 5), ([-1], 3), ([2, 0, 9], 9)):
        try:
            shared_inclusion_plans(indexes, size)
        except ProofError:
            continue
        raise AssertionError(f"{indexes} at size {size} was planned")


@settings(max_examples=60, deadline=None)
@given(entries_st, st.lists(st.integers(min_value=0, max_value=10_000), max_size=6),
       st.data())
def test_batch_inclusion_proofs_equal_one_at_a_time(
        entries: list[bytes], cuts: list[int], data: st.DataObject) -> None:
    _, store = build(entries, cuts)
    leaves = [leaf_hash(e) for e in entries]
    size = data.draw(st.integers(min_value=1, max_value=len(entries)))
    first = data.draw(st.integers(min_value=0, max_value=size - 1))
    indexes = data.draw(st.lists(st.integers(min_value=first, max_value=size - 1),
                                 min_size=1, max_size=64))

    async def both() -> tuple[list[list[bytes]], list[list[bytes]]]:
        batch = await LogReader(store, cache_tiles=4).inclusion_proofs(indexes, size)
        one = LogReader(store, cache_tiles=4)
        return batch, [await one.inclusion_proof(i, size) for i in indexes]

    batch, singles = asyncio.run(both())
    assert batch == singles
    root = merkle_root(leaves[:size])
    for index, proof in zip(indexes, batch, strict=True):
        verify_inclusion(index, size, leaves[index], proof, root)


def test_the_newest_leafs_proof_is_the_compact_range_before_it() -> None:
    # What a writer answers a batch of one entry with, without reading a tile
    # (benchmarks/docs/notarize_cpu.md).
    from ledger.core.proofs import newest_leaf_proof

    entries = [b"leaf %d" % i for i in range(600)]
    store = MemoryStore()
    state = TreeState()
    reader = LogReader(store, cache_tiles=4)
    for n, entry in enumerate(entries):
        done = integrate(state, [entry])
        store.tiles.update(done.tiles)
        proof = newest_leaf_proof(state.stack)
        verify_inclusion(n, n + 1, leaf_hash(entry), proof, done.state.root())
        assert proof == asyncio.run(reader.inclusion_proof(n, n + 1))
        state = done.state


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=700), st.integers(min_value=1, max_value=300))
def test_a_batch_s_proofs_by_hashing_equal_the_per_leaf_proofs(old: int, n: int) -> None:
    # What a writer answers a batch with (ledger.log.sequencer): from the compact range the
    # batch was appended to and its leaves only, equal to each leaf's proof read from tiles.
    entries = [b"leaf %d" % i for i in range(old + n)]
    prior, store = build(entries[:old], [])
    done = integrate(prior, entries[old:])
    store.tiles.update(done.tiles)
    leaves = [leaf_hash(e) for e in entries]
    assert leaf_hashes_in(done.tiles, old, old + n) == leaves[old:]  # the batch's own tiles
    got = newest_leaves_proofs(prior.stack, old, leaves[old:])
    reader = LogReader(store, cache_tiles=4)
    assert got == [asyncio.run(reader.inclusion_proof(i, old + n)) for i in range(old, old + n)]
    root = done.state.root()
    for i, proof in zip(range(old, old + n), got, strict=True):
        verify_inclusion(i, old + n, leaves[i], proof, root)


def test_leaf_hashes_in_tiles_missing_or_short_are_none() -> None:
    done = integrate(TreeState(), [b"e%d" % i for i in range(300)])
    assert leaf_hashes_in(done.tiles, 250, 300) == [
        leaf_hash(b"e%d" % i) for i in range(250, 300)]
    assert leaf_hashes_in(done.tiles, 5, 5) == []
    assert leaf_hashes_in({**done.tiles, (0, 1): done.tiles[(0, 1)][:32]}, 250, 300) is None
    assert leaf_hashes_in({k: v for k, v in done.tiles.items() if k != (0, 0)}, 250, 300) is None


def test_a_batch_s_proofs_need_the_compact_range_of_its_start() -> None:
    assert newest_leaves_proofs([], 0, []) == []
    assert newest_leaves_proofs([], 0, [leaf_hash(b"a")]) == [[]]
    for stack, old in (([], 1), ([b"\0" * 32], 3), ([b"\0" * 32] * 2, 4)):
        try:
            newest_leaves_proofs(stack, old, [leaf_hash(b"a")])
        except ProofError:
            continue
        raise AssertionError(f"{len(stack)} roots taken for size {old}")
