"""RFC 9162 §2.1.1 hashing: the only place that knows the domain-separation prefixes.

Leaves and interior nodes are hashed with different one-byte prefixes so that a leaf can never be
passed off as an interior node (second-preimage resistance of the tree).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
#: The domain-separation prefixes. Hot loops elsewhere (``tilehash``) inline the hashing for
#: speed, but take the prefix from here; batches are hashed by :func:`leaf_hashes` and
#: :func:`parent_hashes`.
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"

_sha256 = hashlib.sha256


def leaf_hash(entry: bytes) -> bytes:
    """MTH of a one-leaf tree: SHA-256(0x00 ‖ entry)."""
    return _sha256(LEAF_PREFIX + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Interior node: SHA-256(0x01 ‖ left ‖ right)."""
    return _sha256(NODE_PREFIX + left + right).digest()


_LEAF = hashlib.sha256(LEAF_PREFIX)
_NODE = hashlib.sha256(NODE_PREFIX)


def leaf_hashes(entries: Sequence[bytes]) -> list[bytes]:
    """:func:`leaf_hash` of each entry, for a batch.

    Copying a hash object that has taken the prefix costs ~8% less a hash than making one with
    the prefix prepended (OpenSSL sets up a new context; 0.34 against 0.37 µs, AMD EPYC)."""
    out: list[bytes] = []
    append, new = out.append, _LEAF.copy
    for e in entries:
        h = new()
        h.update(e)
        append(h.digest())
    return out


def parent_hashes(nodes: Sequence[bytes]) -> list[bytes]:
    """:func:`node_hash` of each pair of ``nodes`` in order (an odd last one is left out):
    one level of a tree built level by level."""
    out: list[bytes] = []
    append, new = out.append, _NODE.copy
    pairs = iter(nodes)
    for left, right in zip(pairs, pairs, strict=False):
        h = new()
        h.update(left)
        h.update(right)
        append(h.digest())
    return out


def fold_right(hashes: Sequence[bytes]) -> bytes:
    """Combine adjacent subtree roots, largest first, into the root of their union.

    The roots of the perfect subtrees that decompose a range (largest leftmost) combine
    right to left, which is how RFC 9162 builds the root of a tree whose size is not a power of two.
    """
    if not hashes:
        return EMPTY_ROOT
    acc = hashes[-1]
    for h in reversed(hashes[:-1]):
        acc = _sha256(NODE_PREFIX + h + acc).digest()
    return acc


def merkle_root(leaf_hashes: Sequence[bytes]) -> bytes:
    """Reference MTH over leaf hashes by the RFC's recursive definition (tests and audits only)."""
    n = len(leaf_hashes)
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return leaf_hashes[0]
    k = 1 << ((n - 1).bit_length() - 1)
    return node_hash(merkle_root(leaf_hashes[:k]), merkle_root(leaf_hashes[k:]))
