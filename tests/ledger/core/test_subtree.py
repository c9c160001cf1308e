"""Subtrees and subtree consistency proofs (ledger.core.subtree), against three references:

- the accumulated test vectors of draft-ietf-plants-merkle-tree-certs (appendix "Subtree Test
  Vectors"; hashes of every subtree, inclusion proof and consistency proof of trees up to 130);
- a second implementation written here from the draft's recursive definitions over lists of
  leaves, sharing no code with the module (it rehashes leaves; the module plans tree nodes);
- properties over random trees up to a few thousand leaves: every valid subtree's proof
  verifies, and every tampered, shortened or lengthened proof and every wrong hash fails. (A
  wrong tree size is not among them: trees of different sizes can share a root hash, which is
  why a checkpoint signs its size.)
"""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.hashing import EMPTY_ROOT, leaf_hash, merkle_root
from ledger.core.proofs import ProofError, assemble, plan_coords, range_coords
from ledger.core.subtree import (
    is_valid_subtree,
    root_from_subtree_inclusion_proof,
    subtree_consistency_plan,
    subtree_inclusion_plan,
    verify_subtree_consistency,
)

# ---------------------------------------------------------------------------------------------
# The reference: the draft's definitions, transcribed over lists of leaf hashes.


def ref_mth(leaves: list[bytes]) -> bytes:
    return merkle_root(leaves)


def ref_valid(start: int, end: int) -> bool:
    if not 0 <= start <= end:
        return False
    ceil = 1
    while ceil < end - start:
        ceil *= 2
    return start % ceil == 0


def ref_path(m: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 9162 PATH(m, D_n)."""
    n = len(leaves)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return [*ref_path(m, leaves[:k]), ref_mth(leaves[k:])]
    return [*ref_path(m - k, leaves[k:]), ref_mth(leaves[:k])]


def ref_subproof(start: int, end: int, leaves: list[bytes], known: bool) -> list[bytes]:
    n = len(leaves)
    if start == 0 and end == n:
        return [] if known else [ref_mth(leaves)]
    k = 1
    while k * 2 < n:
        k *= 2
    if end <= k:
        return [*ref_subproof(start, end, leaves[:k], known), ref_mth(leaves[k:])]
    if k <= start:
        return [*ref_subproof(start - k, end - k, leaves[k:], known), ref_mth(leaves[:k])]
    return [*ref_subproof(0, end - k, leaves[k:], False), ref_mth(leaves[:k])]


def ref_subtree_proof(start: int, end: int, leaves: list[bytes]) -> list[bytes]:
    return [] if start == end else ref_subproof(start, end, leaves, True)


# ---------------------------------------------------------------------------------------------
# The module under test, over a table of every node of a tree (as tiles would hold them).


class Tree:
    def __init__(self, leaves: list[bytes]) -> None:
        self.leaves = leaves
        self.nodes: dict[tuple[int, int], bytes] = {}
        level = list(leaves)
        height = 0
        while level:
            for i, h in enumerate(level):
                self.nodes[(height, i)] = h
            level = [
                hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest()
                for i in range(0, len(level) - 1, 2)
            ]
            height += 1

    def hash(self, start: int, end: int) -> bytes:
        if start == end:
            return EMPTY_ROOT
        return assemble([(start, end)], {c: self.nodes[c] for c in range_coords(start, end)})[0]

    def fold(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        return assemble(ranges, {c: self.nodes[c] for c in plan_coords(ranges)})

    def consistency(self, start: int, end: int, size: int) -> list[bytes]:
        return self.fold(subtree_consistency_plan(start, end, size))

    def inclusion(self, index: int, start: int, end: int) -> list[bytes]:
        return self.fold(subtree_inclusion_plan(index, start, end))


def leaves_of(n: int) -> list[bytes]:
    return [leaf_hash(bytes([i % 256])) for i in range(n)]


# ---------------------------------------------------------------------------------------------
# The draft's accumulated vectors.

VECTOR_TREE = Tree([leaf_hash(bytes([i])) for i in range(130)])


def test_accumulated_subtree_hashes() -> None:
    h = hashlib.sha256()
    for end in range(131):
        for start in range(end + 1):
            if is_valid_subtree(start, end):
                h.update(f"[{start}, {end}) {VECTOR_TREE.hash(start, end).hex()}\n".encode())
    assert h.hexdigest() == "b82806ad4265bb151c1119c0f4db437bb4d1a1f887b3a7fba1cd4ebf552e3e81"


def test_accumulated_subtree_inclusion_proofs() -> None:
    h = hashlib.sha256()
    for end in range(131):
        for start in range(end + 1):
            if not is_valid_subtree(start, end):
                continue
            for index in range(start, end):
                proof = VECTOR_TREE.inclusion(index, start, end)
                line = f"{index} [{start}, {end})" + "".join(f" {p.hex()}" for p in proof)
                h.update(f"{line}\n".encode())
                got = root_from_subtree_inclusion_proof(
                    index, start, end, VECTOR_TREE.leaves[index], proof)
                assert got == VECTOR_TREE.hash(start, end)
    assert h.hexdigest() == "ac2a8f989e44d99e399db448050ff5f19757df53cfb716aa81015d3955d8163f"


def test_accumulated_subtree_consistency_proofs() -> None:
    h = hashlib.sha256()
    for n in range(131):
        root = VECTOR_TREE.hash(0, n)
        for end in range(n + 1):
            for start in range(end + 1):
                if not is_valid_subtree(start, end):
                    continue
                proof = VECTOR_TREE.consistency(start, end, n)
                line = f"[{start}, {end}) {n}" + "".join(f" {p.hex()}" for p in proof)
                h.update(f"{line}\n".encode())
                verify_subtree_consistency(
                    start, end, n, proof, VECTOR_TREE.hash(start, end), root)
    assert h.hexdigest() == "10fa99b37bf9bf9ffa26b412fbd98bd75363256d0b75d61bc4538b9c9c5a0a74"


# ---------------------------------------------------------------------------------------------
# The second implementation.


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 31, 64, 100])
def test_plans_match_the_drafts_recursion(n: int) -> None:
    leaves = leaves_of(n)
    tree = Tree(leaves)
    for end in range(n + 1):
        for start in range(end + 1):
            assert is_valid_subtree(start, end) == ref_valid(start, end)
            if not ref_valid(start, end):
                continue
            assert tree.consistency(start, end, n) == ref_subtree_proof(start, end, leaves)
            assert tree.hash(start, end) == ref_mth(leaves[start:end])
            for index in range(start, end):
                assert tree.inclusion(index, start, end) == ref_path(
                    index - start, leaves[start:end])


def test_drafts_examples() -> None:
    """§4.4.2: [4, 8) in a tree of 14 is MTH(D[0:4]), MTH(D[8:14]); [8, 13) is d[12], d[13],
    MTH(D[8:12]), MTH(D[0:8])."""
    assert subtree_consistency_plan(4, 8, 14) == [(0, 4), (8, 14)]
    assert subtree_consistency_plan(8, 13, 14) == [(12, 13), (13, 14), (8, 12), (0, 8)]
    assert subtree_inclusion_plan(10, 8, 13) == [(11, 12), (8, 10), (12, 13)]


# ---------------------------------------------------------------------------------------------
# Properties over larger random trees.


def all_valid_subtrees(n: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for size in range(0, n + 1):
        step = 1 << (size - 1).bit_length() if size > 1 else 1
        out.extend((start, start + size) for start in range(0, n - size + 1, step))
    return out


@pytest.mark.parametrize("n", [255, 256, 257, 1000, 2049])
def test_every_valid_subtree_of_a_tree_verifies(n: int) -> None:
    tree = Tree(leaves_of(n))
    root = tree.hash(0, n)
    subtrees = all_valid_subtrees(n)
    assert all(is_valid_subtree(s, e) for s, e in subtrees)
    for start, end in subtrees:
        verify_subtree_consistency(
            start, end, n, tree.consistency(start, end, n), tree.hash(start, end), root)


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=1, max_value=3000), st.randoms(use_true_random=False))
def test_tampering_is_caught(n: int, rnd: random.Random) -> None:
    tree = Tree(leaves_of(n))
    root = tree.hash(0, n)
    subtrees = [(s, e) for s, e in all_valid_subtrees(n) if s < e]
    for start, end in rnd.sample(subtrees, min(len(subtrees), 12)):
        proof = tree.consistency(start, end, n)
        node = tree.hash(start, end)
        verify_subtree_consistency(start, end, n, proof, node, root)
        bad: list[tuple[int, int, int, list[bytes], bytes, bytes]] = []
        for i in range(len(proof)):
            flipped = bytearray(proof[i])
            flipped[rnd.randrange(32)] ^= 1 << rnd.randrange(8)
            bad.append((start, end, n, [*proof[:i], bytes(flipped), *proof[i + 1:]], node, root))
            bad.append((start, end, n, proof[:i] + proof[i + 1:], node, root))
        bad.append((start, end, n, [*proof, root], node, root))
        bad.append((start, end, n, proof, root if root != node else EMPTY_ROOT, root))
        bad.append((start, end, n, proof, node, EMPTY_ROOT))
        for case in bad:
            with pytest.raises(ProofError):
                verify_subtree_consistency(*case)


def test_range_and_shape_errors() -> None:
    h = bytes(32)
    with pytest.raises(ProofError, match="not a valid subtree"):
        verify_subtree_consistency(1, 3, 4, [], h, h)
    with pytest.raises(ProofError, match="ends past"):
        verify_subtree_consistency(0, 5, 4, [], h, h)
    with pytest.raises(ProofError, match="not a valid subtree"):
        subtree_consistency_plan(3, 2, 4)
    with pytest.raises(ProofError, match="32"):
        verify_subtree_consistency(0, 1, 2, [b"x"], h, h)
    verify_subtree_consistency(2, 2, 4, [], EMPTY_ROOT, h)
    with pytest.raises(ProofError, match="empty subtree"):
        verify_subtree_consistency(2, 2, 4, [h], EMPTY_ROOT, h)
    with pytest.raises(ProofError, match="empty string"):
        verify_subtree_consistency(2, 2, 4, [], h, h)
    assert not is_valid_subtree(-1, 0)
    assert is_valid_subtree(0, (1 << 63) + 1) and is_valid_subtree(1 << 64, 1 << 64)
