"""The log's COSE signatures over its tree roots (RFC 9942 receipts), off the write path.

A COSE receipt is a signature over a root plus an inclusion proof; the signature is the same
for every leaf under that root (:class:`ledger.core.cose_receipt.SignedRoot`). So a root is
signed once, when the first receipt against it is asked for, and kept: never inside the commit
(the sequencer signs only the checkpoint's Ed25519 line), as the ML-DSA-44 checkpoint line is
added when a checkpoint is published (:mod:`ledger.log.pq_checkpoints`). Receipts default to the
checkpoint the JSON receipt's proof leads to, which changes at most once per published
checkpoint, so signatures are few whatever the read rate.

The caller vouches for the root: the notary takes it from a checkpoint the log signed, or
computes it from the tiles and checks it against the head's root with a consistency proof.
Nothing is persisted: signing again after a restart signs the same root (EdDSA is
deterministic; ML-DSA-44 signatures differ but sign the same bytes).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from ledger.core.cose_receipt import CoseKey, CoseSigner, SignedRoot, sign_root

__all__ = ["CoseRoots"]

#: Signed roots kept per algorithm (the newest few sizes; older ones are signed again on demand).
DEFAULT_CACHE = 256


class CoseRoots:
    """Signs tree roots for COSE receipts with the log's keys, once per (algorithm, size)."""

    def __init__(self, signers: Sequence[CoseSigner], issuer: str, *,
                 cache: int = DEFAULT_CACHE, clock: Callable[[], float] = time.time) -> None:
        if not signers:
            raise ValueError("COSE receipts need at least one signing key")
        self.issuer = issuer
        self._signers = {s.key.alg: s for s in signers}
        self._cache: OrderedDict[tuple[int, int], SignedRoot] = OrderedDict()
        self._limit = cache
        self._clock = clock
        #: How many roots this process signed (the benchmark's count).
        self.signed = 0
        #: Told the algorithm's name at each signature (the notary counts them in a metric).
        self.on_signed: Callable[[str], None] = lambda alg_name: None

    def switch(self, signers: Sequence[CoseSigner], issuer: str) -> None:
        """Sign another log's roots from now on (a roll to the next log): its keys and origin.
        The old log's signed roots are dropped, so none is ever served as the new log's."""
        if not signers:
            raise ValueError("COSE receipts need at least one signing key")
        self.issuer = issuer
        self._signers = {s.key.alg: s for s in signers}
        self._cache.clear()

    @property
    def keys(self) -> list[CoseKey]:
        return [s.key for s in self._signers.values()]

    def key(self, alg: int) -> CoseKey | None:
        signer = self._signers.get(alg)
        return None if signer is None else signer.key

    def sign(self, alg: int, tree_size: int, root: bytes) -> SignedRoot:
        """The signature over the root of the tree of ``tree_size`` (made now unless kept)."""
        kept = self._cache.get((alg, tree_size))
        if kept is not None and kept.root == root:
            self._cache.move_to_end((alg, tree_size))
            return kept
        signed = sign_root(self._signers[alg], issuer=self.issuer, tree_size=tree_size,
                           root=root, iat=int(self._clock()))
        self.signed += 1
        self.on_signed(self._signers[alg].key.alg_name)
        self._cache[(alg, tree_size)] = signed
        while len(self._cache) > self._limit:
            self._cache.popitem(last=False)
        return signed
