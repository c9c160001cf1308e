"""Subtrees of a Merkle tree and their consistency proofs (draft-ietf-plants-merkle-tree-certs §4).

A subtree ``[start, end)`` is the Merkle tree over the leaves ``D[start:end]`` taken as a list of
their own, where ``start`` is a multiple of the smallest power of two at least ``end - start``
(§4.1). That alignment makes the subtree's hash a combination of nodes of the whole tree, so a
short proof shows that a subtree hash and a tree root were built from the same leaves (§4.4):
what a witness checks before it cosigns a subtree (tlog-witness ``sign-subtree``) and what a
mirror checks before it stores entries (tlog-mirror ``add-entries``).

Generation is sans-I/O as in :mod:`ledger.core.proofs`: :func:`subtree_consistency_plan` names
the leaf ranges whose hashes form the proof, and the caller fetches and folds them (with
:func:`ledger.core.proofs.assemble`). Verification needs nothing but the proof. Pure code.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.core.hashing import EMPTY_ROOT, HASH_SIZE, node_hash
from ledger.core.proofs import ProofError, Range, root_from_inclusion_proof

__all__ = [
    "is_valid_subtree",
    "root_from_subtree_inclusion_proof",
    "subtree_consistency_plan",
    "subtree_inclusion_plan",
    "verify_subtree_consistency",
]


def is_valid_subtree(start: int, end: int) -> bool:
    """Whether ``[start, end)`` is a subtree (§4.1): ``0 <= start <= end`` and ``start`` is a
    multiple of BIT_CEIL(end - start).

    Python's integers do not overflow, so the fixed-width caveat of the draft does not arise:
    ``[0, x)`` and ``[x, x)`` are valid for every x, as the draft says.
    """
    if start < 0 or start > end:
        return False
    size = end - start
    ceiling = 1 << (size - 1).bit_length() if size > 1 else 1
    return start % ceiling == 0


def _check_subtree(start: int, end: int, tree_size: int) -> None:
    if not is_valid_subtree(start, end):
        raise ProofError(f"[{start}, {end}) is not a valid subtree")
    if end > tree_size:
        raise ProofError(f"subtree [{start}, {end}) ends past the tree's size {tree_size}")


def _largest_pow2_below(n: int) -> int:
    return 1 << ((n - 1).bit_length() - 1)


def subtree_inclusion_plan(index: int, start: int, end: int) -> list[Range]:
    """The leaf ranges whose hashes form the inclusion proof of ``index`` in ``[start, end)``.

    A subtree is a Merkle tree of its own (§4.3), so this is RFC 9162's path for leaf
    ``index - start`` of a tree of ``end - start`` leaves, shifted by ``start``; the alignment of
    a valid subtree makes every range a node (or right edge) of the whole tree.
    """
    if not is_valid_subtree(start, end):
        raise ProofError(f"[{start}, {end}) is not a valid subtree")
    if not start <= index < end:
        raise ProofError(f"index {index} is not in the subtree [{start}, {end})")
    size, rel = end - start, index - start
    out: list[Range] = []
    height = 0
    while (1 << height) < size:
        sibling = ((rel >> height) ^ 1) << height
        if sibling < size:
            out.append((start + sibling, start + min(sibling + (1 << height), size)))
        height += 1
    return out


def root_from_subtree_inclusion_proof(
    index: int, start: int, end: int, leaf: bytes, proof: Sequence[bytes]
) -> bytes:
    """Evaluate a subtree inclusion proof (§4.3.2): the subtree hash it implies for ``leaf``."""
    if not is_valid_subtree(start, end):
        raise ProofError(f"[{start}, {end}) is not a valid subtree")
    if not start <= index < end:
        raise ProofError(f"index {index} is not in the subtree [{start}, {end})")
    return root_from_inclusion_proof(index - start, end - start, leaf, proof)


def subtree_consistency_plan(start: int, end: int, tree_size: int) -> list[Range]:
    """The leaf ranges whose hashes form SUBTREE_PROOF(start, end, D[0:tree_size]) (§4.4.1).

    The draft's recursion walked from the root down: at each step the subtree lies in the left
    child (the right child's hash is appended), in the right child (the left child's is
    appended), or straddles the split, which only a subtree starting at the node's first leaf
    can do; then its hash is no longer a node of the tree and the proof must carry the hash it
    reaches at the bottom (``known`` turns false). The recursion appends on the way back up, so
    the ranges collected top-down are returned reversed.
    """
    _check_subtree(start, end, tree_size)
    if start == end:
        return []
    out: list[Range] = []
    lo, hi, known = 0, tree_size, True
    while not (start == lo and end == hi):
        split = lo + _largest_pow2_below(hi - lo)
        if end <= split:
            out.append((split, hi))
            hi = split
        elif split <= start:
            out.append((lo, split))
            lo = split
        else:  # lo == start < split < end
            out.append((lo, split))
            lo, known = split, False
            start = split
    if not known:
        out.append((lo, hi))
    out.reverse()
    return out


def _check_hash(name: str, h: bytes) -> None:
    if len(h) != HASH_SIZE:
        raise ProofError(f"{name} is {len(h)} bytes, not {HASH_SIZE}")


def verify_subtree_consistency(
    start: int,
    end: int,
    tree_size: int,
    proof: Sequence[bytes],
    subtree_hash: bytes,
    root: bytes,
) -> None:
    """Raise :class:`ProofError` unless ``proof`` shows that the subtree ``[start, end)`` with
    hash ``subtree_hash`` is part of the tree of ``tree_size`` leaves with ``root`` (§4.4.3).

    The steps are the draft's: ``fn``/``sn``/``tn`` are the subtree's first and last leaf and the
    tree's last leaf, shifted up one level per proof hash; ``fr`` rebuilds the subtree hash and
    ``sr`` the root from the same hashes, so every leaf of the subtree is also under the root.
    """
    _check_subtree(start, end, tree_size)
    _check_hash("subtree hash", subtree_hash)
    _check_hash("root", root)
    for i, p in enumerate(proof):
        _check_hash(f"proof hash {i}", p)
    if start == end:
        if proof:
            raise ProofError("an empty subtree needs an empty proof")
        if subtree_hash != EMPTY_ROOT:
            raise ProofError("an empty subtree's hash must be the hash of the empty string")
        return
    fn, sn, tn = start, end - 1, tree_size - 1
    if sn == tn:
        while fn != sn:
            fn, sn, tn = fn >> 1, sn >> 1, tn >> 1
    else:
        while fn != sn and sn & 1:
            fn, sn, tn = fn >> 1, sn >> 1, tn >> 1
    path = list(proof)
    if fn == sn:
        fr = sr = subtree_hash
    else:
        if not path:
            raise ProofError("subtree consistency proof is empty")
        fr = sr = path.pop(0)
    for c in path:
        if tn == 0:
            raise ProofError("subtree consistency proof is too long")
        if sn & 1 or sn == tn:
            if fn < sn:
                fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not sn & 1:
                fn, sn, tn = fn >> 1, sn >> 1, tn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn, tn = fn >> 1, sn >> 1, tn >> 1
    if tn != 0:
        raise ProofError("subtree consistency proof is too short")
    if fr != subtree_hash:
        raise ProofError("subtree consistency proof does not lead to the subtree hash")
    if sr != root:
        raise ProofError("subtree consistency proof does not lead to the root")
