"""RFC 9162 §2.1.3–2.1.4 inclusion and consistency proofs: planning, assembly and verification.

Generation is split sans-I/O style. :func:`inclusion_plan` / :func:`consistency_plan` say which
ranges of leaves the proof hashes summarise; :func:`range_coords` turns a range into the stored
subtree hashes that cover it; the caller fetches those (from tiles, say) and :func:`assemble`
folds them into the proof. Verification needs nothing but the proof.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE, fold_right, node_hash, parent_hashes

Coord = tuple[int, int]  # (tree level, index at that level): root of leaves [i·2^l, (i+1)·2^l)
Range = tuple[int, int]  # leaves [start, end)


class ProofError(LedgerError, ValueError):
    """A proof that does not verify, or a request for a proof that cannot exist."""


def _largest_pow2_below(n: int) -> int:
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_plan(index: int, size: int) -> list[Range]:
    """The leaf ranges whose roots form PATH(index, D[0:size]), bottom-up as RFC 9162 orders it.

    Bottom-up directly: at each height the sibling of the leaf's ancestor is a proof element if
    any of its leaves exist (cut at ``size`` on the right edge); a sibling wholly beyond the tree
    is skipped, since there the RFC's recursion promotes the ancestor unchanged.
    """
    if not 0 <= index < size:
        raise ProofError(f"index {index} is not in a tree of size {size}")
    out: list[Range] = []
    height = 0
    while (1 << height) < size:
        start = ((index >> height) ^ 1) << height
        if start < size:
            out.append((start, min(start + (1 << height), size)))
        height += 1
    return out


def shared_inclusion_plans(indexes: Sequence[int], size: int
                           ) -> tuple[list[list[Range]], list[Range]]:
    """(lower ranges per index, upper ranges shared by all) with
    ``inclusion_plan(indexes[k], size) == lower[k] + upper`` for every k.

    Above the height where the smallest and largest index have the same ancestor, every
    index has that ancestor, hence the same siblings: that part of the path is planned once.
    Below it each index gets only its few lowest levels (log2 of the span of ``indexes``).
    """
    for index in indexes:
        if not 0 <= index < size:
            raise ProofError(f"index {index} is not in a tree of size {size}")
    if not indexes:
        return [], []
    split = (min(indexes) ^ max(indexes)).bit_length()  # first height with one ancestor
    lower: list[list[Range]] = []
    for index in indexes:
        out: list[Range] = []
        for height in range(split):
            if (1 << height) >= size:
                break
            start = ((index >> height) ^ 1) << height
            if start < size:
                out.append((start, min(start + (1 << height), size)))
        lower.append(out)
    upper: list[Range] = []
    height, index = split, indexes[0]
    while (1 << height) < size:
        start = ((index >> height) ^ 1) << height
        if start < size:
            upper.append((start, min(start + (1 << height), size)))
        height += 1
    return lower, upper


def newest_leaf_proof(stack: Sequence[bytes]) -> list[bytes]:
    """The inclusion proof of the leaf appended to a tree whose compact range was ``stack``
    (the roots of the perfect subtrees that decompose [0, n), largest first), in the tree
    of size n + 1: those roots, smallest first.

    The path of the last leaf only has left siblings, and they are exactly those subtrees
    (RFC 9162 §2.1.3.1: PATH(n, D[0:n+1]) = PATH(n-k, D[k:n+1]) : MTH(D[0:k])). So a writer
    that appends one entry has its proof without reading or hashing anything: at one request in
    flight every batch is one entry, and its proof cost as much as its checkpoint's signature.
    """
    return list(reversed(stack))


def newest_leaves_proofs(stack: Sequence[bytes], old: int, leaves: Sequence[bytes]
                         ) -> list[list[bytes]]:
    """The inclusion proofs of the ``len(leaves)`` leaves appended to a tree of size ``old``
    whose compact range was ``stack`` (largest subtree first), in the tree of size
    ``old + len(leaves)``: ``[PATH(old + k, D[0:size]) for k ...]``, by hashing alone.

    A writer has exactly this after a batch: no stored hash is needed. Every sibling on such a
    path is a node of the new leaves' levels, or a node that starts before ``old``: that one is
    either a root of the compact range (a left sibling whose leaves all precede ``old``) or a
    node whose leaves are those roots' then new leaves, which the level by level pairing below
    builds (the compact range's root at a level goes first when ``old``'s bit there is set).
    About n node hashes for n leaves; above the height where the new leaves share an ancestor
    their siblings are the same, so that part is listed once and shared by every proof.
    """
    n = len(leaves)
    if not n:
        return []
    size = old + n
    if len(stack) != old.bit_count():
        raise ProofError(f"a compact range of size {old} has {old.bit_count()} roots, "
                         f"not {len(stack)}")
    carry = dict(zip([lv for lv in range(old.bit_length() - 1, -1, -1) if old >> lv & 1],
                     stack, strict=True))
    levels: list[tuple[int, list[bytes]]] = []  # (index of the first node, the nodes) by height
    nodes, first, height = list(leaves), old, 0
    while True:
        if first & 1:  # a right child first: its left sibling is the compact range's root
            nodes.insert(0, carry[height])
            first -= 1
        if first == 0 and len(nodes) == 1:  # the root
            break
        levels.append((first, nodes))
        paired = parent_hashes(nodes)
        if len(nodes) & 1:  # the right edge's node has no sibling: it is promoted
            paired.append(nodes[-1])
        nodes, first, height = paired, first >> 1, height + 1
    # Siblings from ``split`` up are the same for every new leaf (one ancestor there).
    split = min((old ^ (size - 1)).bit_length(), len(levels))
    upper: list[bytes] = []
    for h in range(split, len(levels)):
        at, row = levels[h]
        s = ((old >> h) ^ 1) - at
        if s < len(row):
            upper.append(row[s])
    out: list[list[bytes]] = []
    low = levels[:split]
    for index in range(old, size):
        path: list[bytes] = []
        for h, (at, row) in enumerate(low):
            s = ((index >> h) ^ 1) - at
            if s < len(row):
                path.append(row[s])
        path += upper
        out.append(path)
    return out


def consistency_plan(old: int, new: int) -> list[Range]:
    """The leaf ranges whose roots form PROOF(old, D[0:new]) (RFC 9162 §2.1.4.1 SUBPROOF)."""
    if not 0 < old <= new:
        raise ProofError(f"no consistency proof from size {old} to size {new}")
    out: list[Range] = []
    lo, hi, start_known = 0, new, True
    m = old
    while True:
        n = hi - lo
        if m == n:
            if not start_known:
                out.append((lo, hi))
            break
        k = _largest_pow2_below(n)
        if m <= k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo, m, start_known = lo + k, m - k, False
    out.reverse()
    return out


def range_coords(start: int, end: int) -> list[Coord]:
    """Decompose leaves [start, end) into maximal aligned perfect subtrees, left to right."""
    out: list[Coord] = []
    while start < end:
        level = (start & -start).bit_length() - 1 if start else (end - start).bit_length() - 1
        while start + (1 << level) > end:
            level -= 1
        out.append((level, start >> level))
        start += 1 << level
    return out


def plan_coords(ranges: Iterable[Range]) -> list[Coord]:
    """Every stored hash a proof needs, without repeats, in first-use order."""
    seen: dict[Coord, None] = {}
    for a, b in ranges:
        for c in range_coords(a, b):
            seen.setdefault(c)
    return list(seen)


def assemble(ranges: Sequence[Range], hashes: Mapping[Coord, bytes]) -> list[bytes]:
    """Fold fetched subtree hashes into the proof's hashes, one per planned range."""
    return [fold_right([hashes[c] for c in range_coords(a, b)]) for a, b in ranges]


def _check_hash(name: str, h: bytes) -> None:
    if len(h) != HASH_SIZE:
        raise ProofError(f"{name} is {len(h)} bytes, not {HASH_SIZE}")


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2: the root that ``proof`` implies for ``leaf`` at ``index``."""
    if not 0 <= index < size:
        raise ProofError(f"index {index} is not in a tree of size {size}")
    _check_hash("leaf hash", leaf)
    fn, sn = index, size - 1
    r = leaf
    for i, p in enumerate(proof):
        _check_hash(f"proof hash {i}", p)
        if sn == 0:
            raise ProofError("inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is too short")
    return r


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Raise :class:`ProofError` unless ``proof`` shows ``leaf`` at ``index`` under ``root``."""
    _check_hash("root", root)
    if root_from_inclusion_proof(index, size, leaf, proof) != root:
        raise ProofError("inclusion proof does not lead to the expected root")


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """RFC 9162 §2.1.4.2, with the edge rules of docs/formats.md (size 0 is an error here).

    Equal sizes compare the roots as given: transparency-dev's vectors (which the tests run)
    accept two identical non-32-byte roots there, as Go's verifier does.
    """
    if new_size < old_size:
        raise ProofError(f"new size {new_size} is smaller than old size {old_size}")
    if old_size == 0:
        raise ProofError("a consistency proof from size 0 proves nothing")
    if old_size == new_size:
        if proof:
            raise ProofError("equal sizes need an empty proof")
        if old_root != new_root:
            raise ProofError("equal sizes but different roots")
        return
    _check_hash("old root", old_root)
    _check_hash("new root", new_root)
    for i, p in enumerate(proof):
        _check_hash(f"proof hash {i}", p)
    if not proof:
        raise ProofError("empty consistency proof for different sizes")
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is the first node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("consistency proof is too short")
    if fr != old_root:
        raise ProofError("consistency proof does not lead to the old root")
    if sr != new_root:
        raise ProofError("consistency proof does not lead to the new root")
