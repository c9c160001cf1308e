"""Level 3 (notary.core.verification.check_inclusion): every way it can fail, each for its reason.

A receipt that passes is built once, from a real log; each case breaks one thing about it and
checks that the level fails (or is skipped) with the reason that names that thing.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

from ledger.core.note import Ed25519Signer
from ledger.core.tlog_proof import ProofBundle, decode_proof_bundle
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from notary.core.entry import LogEntry
from notary.core.ids import new_receipt_id, now_issued_at
from notary.core.receipts import Receipt, ReceiptFormatError, build_receipt
from notary.core.verification import check_inclusion

ORIGIN = "inclusion.test/log"
SIGNER = Ed25519Signer.generate(ORIGIN)


async def _receipt_and_proof() -> tuple[dict[str, Any], str]:
    """A receipt at index 2 of a 5-entry log, and its tlog-proof into the log's head."""
    log = await Log.open(MemoryStore(), signer=SIGNER)
    receipt: dict[str, Any] = {}
    for index in range(5):
        r = build_receipt(id=new_receipt_id(), server="srv", tool="t",
                          call_sha256_hex=os.urandom(32).hex(), issued_at=now_issued_at(),
                          origin=ORIGIN, index=index, entry_url=f"https://n.test/e/{index}")
        appended = await log.append(LogEntry.from_receipt(r).encode())
        assert appended.index == index
        if index == 2:
            receipt = dict(r)
    head = await log.head(0)
    assert head is not None
    bundle = await log.proof_bundle(2, head)
    await log.close()
    return receipt, bundle.encode().decode()


@pytest.fixture
async def good() -> tuple[dict[str, Any], str]:
    receipt, proof = await _receipt_and_proof()
    result, _, cp = check_inclusion(Receipt.from_json(receipt), proof, SIGNER.verifier())
    assert result.status == "passed" and cp is not None and cp.size == 5, result
    return receipt, proof


def _reencode(text: str, **changes: Any) -> str:
    bundle = decode_proof_bundle(text.encode())
    fields = {"index": bundle.index, "proof": bundle.proof, "checkpoint": bundle.checkpoint,
              **changes}
    return ProofBundle(**fields).encode().decode()


async def test_missing_inputs_skip_the_level(good: tuple[dict[str, Any], str]) -> None:
    receipt, proof = good
    result, _, _ = check_inclusion(Receipt.from_json(receipt), None, SIGNER.verifier())
    assert (result.status, result.reason) == ("skipped", "no proof bundle given")
    result, _, _ = check_inclusion(Receipt.from_json(receipt), proof, None)
    assert (result.status, result.reason) == ("skipped", "no log verifier key given")


def _failed_with(receipt: Any, proof: str | bytes, reason: str, verifier: Any = None) -> None:
    result, _, _ = check_inclusion(Receipt.from_json(receipt), proof, verifier or SIGNER.verifier())
    assert result.status == "failed", result
    assert result.reason is not None and result.reason.startswith(reason), result.reason


async def test_a_malformed_bundle_fails(good: tuple[dict[str, Any], str]) -> None:
    receipt, proof = good
    _failed_with(receipt, proof.replace("index", "indx", 1), "malformed proof bundle:")
    _failed_with(receipt, b"\xff not a bundle", "malformed proof bundle:")


async def test_a_receipt_the_entry_cannot_be_rebuilt_from_fails(
        good: tuple[dict[str, Any], str]) -> None:
    receipt, _ = good
    broken = {k: v for k, v in receipt.items() if k != "call_sha256"}
    # A typed Receipt always holds what the entry is rebuilt from: such a receipt is refused
    # when it is parsed, before inclusion is checked.
    with pytest.raises(ReceiptFormatError, match="call_sha256"):
        Receipt.from_json(broken)


async def test_a_proof_for_another_index_fails(good: tuple[dict[str, Any], str]) -> None:
    receipt, proof = good
    _failed_with(receipt, _reencode(proof, index=3), "the proof is for another index")
    no_ledger = {k: v for k, v in receipt.items() if k != "ledger"}
    with pytest.raises(ReceiptFormatError, match="ledger"):  # refused when parsed (typed)
        Receipt.from_json(no_ledger)


async def test_a_checkpoint_the_log_key_did_not_sign_fails(
        good: tuple[dict[str, Any], str]) -> None:
    receipt, proof = good
    _failed_with(receipt, proof, "checkpoint:",
                 verifier=Ed25519Signer.generate(ORIGIN).verifier())


async def test_a_receipt_naming_another_log_fails(good: tuple[dict[str, Any], str]) -> None:
    receipt, proof = good
    other = copy.deepcopy(receipt)
    other["ledger"]["origin"] = "elsewhere.test/log"
    _failed_with(other, proof, "the receipt names log 'elsewhere.test/log'")


async def test_a_proof_that_does_not_lead_to_the_root_fails(
        good: tuple[dict[str, Any], str]) -> None:
    receipt, proof = good
    hashes = decode_proof_bundle(proof.encode()).proof
    flipped = (bytes([hashes[0][0] ^ 1]) + hashes[0][1:], *hashes[1:])
    _failed_with(receipt, _reencode(proof, proof=flipped), "inclusion proof:")
    _failed_with(receipt, _reencode(proof, proof=hashes[:-1]), "inclusion proof:")
    # The entry itself changed: the same proof no longer leads to the signed root.
    changed = {**receipt, "tool": "other"}
    _failed_with(changed, proof, "inclusion proof:")
