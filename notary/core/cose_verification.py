"""The ``cose`` verdict: an RFC 9942 COSE receipt checked beside a tool call's rs-tool-call/1
receipt (docs/verifying.md, docs/scitt.md).

The COSE receipt is another view of the same commitment, so it is checked against what the
JSON receipt says, not on its own: its leaf is the log entry rebuilt from the JSON receipt (as
level 3 rebuilds it), its ``leaf_index`` is the receipt's ``ledger.index``, its issuer (CWT
claim 1) is the receipt's ``ledger.origin``, and its signature verifies under a log key trusted
for that origin (the Ed25519 log key as EdDSA, an ML-DSA-44 log key as ML-DSA-44) over the
root the inclusion path leads to. When the JSON receipt's checkpoint (level 3) has the same tree
size, the two roots must be equal: a log that signed two roots for one size forked.

It is reported as its own line beside the five levels, whose meaning it does not change. Pure:
no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.core.checkpoint import Checkpoint
from ledger.core.cose_receipt import (
    ALG_EDDSA,
    ALG_ML_DSA_44,
    CoseKey,
    CoseReceiptError,
    parse_receipt,
    verify_receipt,
)
from ledger.core.note import Ed25519Verifier, NoteVerifier
from ledger.core.subtree_cosignature import SubtreeCosignatureVerifier
from notary.core.entry import EntryError
from notary.core.receipts import Receipt
from notary.core.verification import LevelResult, failed, passed

__all__ = ["check_cose", "cose_keys"]


def cose_keys(log_keys: Sequence[NoteVerifier], origin: str) -> list[CoseKey]:
    """The COSE keys of the trusted log keys for ``origin`` (other key kinds have none)."""
    keys = []
    for k in log_keys:
        if k.name != origin:
            continue
        if isinstance(k, Ed25519Verifier):
            keys.append(CoseKey(ALG_EDDSA, k.public_key))
        elif isinstance(k, SubtreeCosignatureVerifier):
            keys.append(CoseKey(ALG_ML_DSA_44, k.public_key))
    return keys


def check_cose(receipt: Receipt, cose: bytes, log_keys: Sequence[NoteVerifier],
               checkpoint: Checkpoint | None = None) -> LevelResult:
    """The ``cose`` verdict on the COSE receipt ``cose`` of the tool call of ``receipt``.

    ``checkpoint`` is the one level 3 verified the receipt in (None if it did not pass).
    """
    try:
        parsed = parse_receipt(cose)
    except CoseReceiptError as e:
        return failed(f"malformed COSE receipt: {e}")
    if parsed.leaf_index != receipt.index:
        return failed(f"the COSE receipt proves leaf {parsed.leaf_index}; this receipt's entry "
                      f"is at index {receipt.index} (a COSE receipt of another entry)")
    if parsed.issuer != receipt.origin:
        named = "names no issuer" if parsed.issuer is None else f"is issued by {parsed.issuer!r}"
        return failed(f"the COSE receipt {named} (CWT claim 1); this receipt's log is "
                      f"{receipt.origin!r}")
    keys = cose_keys(log_keys, receipt.origin)
    if not keys:
        return failed(f"no trusted log key for origin {receipt.origin!r} verifies COSE "
                      "receipts (an Ed25519 or ML-DSA-44 log key)")
    try:
        entry = receipt.entry().encode()
    except EntryError as e:
        return failed(f"cannot rebuild the log entry from the receipt: {e}")
    try:
        _, root = verify_receipt(parsed, entry=entry, keys=keys)
    except CoseReceiptError as e:
        return failed(str(e))
    if (checkpoint is not None and checkpoint.size == parsed.tree_size
            and checkpoint.root_hash != root):
        return failed(f"the log signed two different roots for tree size {parsed.tree_size}: "
                      "the COSE receipt's and the checkpoint of the receipt's proof (a fork)")
    return passed(f"{parsed.alg_name} signature by the log key over the root of tree size "
                  f"{parsed.tree_size}, leaf {parsed.leaf_index}")
