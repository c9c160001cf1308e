"""A tool call's RFC 9942 COSE receipt: the proof of its log entry under a root the log signed.

The default tree is the one the rs-tool-call/1 receipt's proof leads to
(:meth:`Notary.proof_target`: the newest witnessed or dual-signed checkpoint covering the
entry, else the head), so the JSON receipt and the COSE receipt fetched together prove the
same root, and the witnesses' cosignatures on that checkpoint (in the tlog-proof) apply to it.
``size`` asks for another tree: its root comes from the tiles and is checked against the
head's root with a consistency proof before the log signs it, so the log never signs a root
that is not its own. docs/scitt.md describes the format.

An entry of a frozen log (docs/lifecycle.md) is proven in that log's final checkpoint (or a
smaller tree of it), signed with that log's own keys, as its JSON receipt's proof is. Not for
a log whose keys a compromised roll retired: a signature by them proves nothing a holder of
the stolen key could not make, so none is made; the JSON receipt's proof to the witnessed
final checkpoint is what vouches for such an entry.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.cose_receipt import CoseSigner, encode_receipt
from ledger.core.errors import RefusedRequest
from ledger.core.hashing import fold_right
from ledger.core.note import Ed25519Signer, parse_note
from ledger.core.proofs import ProofError, range_coords, verify_consistency
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.log.cose_roots import CoseRoots
from ledger.log.facade import Head, Log
from notary.core.receipts import Receipt
from notary.serving.service import Notary

__all__ = ["cose_receipt"]


async def _root_at(log: Log, head: Head, size: int) -> bytes:
    """The root of the tree of ``size`` (at most the head's), proven consistent with the head."""
    if size == head.size:
        return head.checkpoint.root_hash
    reader = log.reader
    coords = range_coords(0, size)
    hashes = await reader.hashes(coords, head.size)
    root = fold_right([hashes[c] for c in coords])
    proof = await reader.consistency_proof(size, head.size)
    try:
        verify_consistency(size, head.size, root, head.checkpoint.root_hash, proof)
    except ProofError as e:  # the stored tiles disagree with the signed head: never sign them
        raise RuntimeError(f"the tree of size {size} read from the store is not consistent "
                           f"with the log's checkpoint: {e}") from e
    return root


def cose_signers(signer: Ed25519Signer) -> list[CoseSigner]:
    """A log's COSE signers: its Ed25519 key (EdDSA) and the ML-DSA-44 key derived from it."""
    return [CoseSigner.ed25519(signer),
            CoseSigner.ml_dsa_44(SubtreeCosignatureSigner.derived_from(signer))]


async def cose_receipt(notary: Notary, roots: CoseRoots, receipt_id: str, *,
                       size: int | None, alg: int) -> bytes:
    """The COSE receipt of a stored tool call (``size``: the tree to prove it in)."""
    receipt = await notary.stored(receipt_id)
    if receipt.origin != notary.log.origin:
        await notary.sequencer.follow()  # of a log another process rolled to: follow it
    if receipt.origin != notary.log.origin:
        return await _frozen_receipt(notary, roots, receipt, size=size, alg=alg)
    head, target, note = await notary.proof_target(receipt)
    if size is None:
        size = target
        root = parse_checkpoint_text(parse_note(note).text).root_hash
    else:
        _check_size(receipt, head, size)
        root = await _root_at(notary.log, head, size)
    path = await notary.log.reader.inclusion_proof(receipt.index, size)
    return encode_receipt(roots.sign(alg, size, root), receipt.index, path)


def _check_size(receipt: Receipt, head: Head, size: int) -> None:
    if size > head.size:
        raise RefusedRequest(404, "not_found", f"size {size} is beyond the current tree size "
                       f"{head.size}")
    if size <= receipt.index:
        raise RefusedRequest(400, "bad_parameter", f"the entry of {receipt.id} is at index "
                       f"{receipt.index}: a tree that holds it has a size above that")


_FROZEN: WeakKeyDictionary[Notary, dict[str, CoseRoots]] = WeakKeyDictionary()
"""Each notary's signers of its frozen logs' roots, by origin (made at the first request)."""


async def _frozen_receipt(notary: Notary, roots: CoseRoots, receipt: Receipt, *,
                          size: int | None, alg: int) -> bytes:
    """A frozen log's entry, proven in its final checkpoint (or ``size``) under its keys."""
    book = notary.logs
    log = await book.frozen(receipt.origin)
    n = book.number_of(receipt.origin)
    record = None if n is None else book.record(n)
    head = None if log is None else await log.head()
    if log is None or record is None or head is None:
        raise RefusedRequest(404, "not_found", f"{receipt.id} is in the log {receipt.origin!r}, "
                       "which this notary does not serve")
    signer = book.own_signer(record)
    if signer is None:
        raise RefusedRequest(404, "not_found", f"{receipt.id} is in the log {receipt.origin!r}, "
                       "whose keys a compromised roll retired: they sign no COSE receipt (the "
                       "JSON receipt's proof leads to the log's final checkpoint, signed at "
                       "the roll and witnessed)")
    size = head.size if size is None else size
    _check_size(receipt, head, size)
    root = await _root_at(log, head, size)
    frozen = _FROZEN.setdefault(notary, {})
    if receipt.origin not in frozen:
        algs = {k.alg for k in roots.keys}
        frozen[receipt.origin] = CoseRoots([s for s in cose_signers(signer) if s.key.alg in algs],
                                           receipt.origin)
    path = await log.reader.inclusion_proof(receipt.index, size)
    return encode_receipt(frozen[receipt.origin].sign(alg, size, root), receipt.index, path)
