"""Receipt verification, level by level, with no I/O (docs/formats.md, "Verification levels").

Each level is reported on its own, because a verifier with partial trust inputs (no record, say,
or no witness keys) can still learn something, and a failure should say exactly what broke.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ledger.core.checkpoint import Checkpoint, open_checkpoint
from ledger.core.hashing import leaf_hash
from ledger.core.note import NoteError, NoteVerifier
from ledger.core.proofs import ProofError, verify_inclusion
from ledger.core.tlog_policy import TlogPolicy, TlogPolicyError
from ledger.core.tlog_proof import ProofBundle, ProofBundleError, decode_proof_bundle
from notary.core.canonical import CanonicalizationError
from notary.core.entry import EntryError
from notary.core.jwks import Jwks
from notary.core.receipts import Receipt, ReceiptFormatError, ReceiptSignatureError
from notary.core.records import RecordError, record_from_json

Status = Literal["passed", "failed", "skipped"]
LEVELS = ("record", "signature", "inclusion", "witnesses", "consistency")


@dataclass(frozen=True)
class LevelResult:
    status: Status
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        out: dict[str, str] = {"status": self.status}
        if self.reason:
            out["reason"] = self.reason
        return out


def passed(reason: str = "") -> LevelResult:
    return LevelResult("passed", reason)


def failed(reason: str) -> LevelResult:
    return LevelResult("failed", reason)


def skipped(reason: str) -> LevelResult:
    return LevelResult("skipped", reason)


@dataclass
class Verdict:
    """Per-level results; ``valid`` only when every required level passed."""

    levels: dict[str, LevelResult] = field(default_factory=dict)
    required: tuple[str, ...] = ("record", "signature", "inclusion")
    checkpoint: Checkpoint | None = None

    @property
    def valid(self) -> bool:
        return all(self.levels.get(n, skipped("")).status == "passed" for n in self.required)

    def to_json(self) -> dict[str, object]:
        return {
            "valid": self.valid,
            "levels": {n: r.to_json() for n, r in self.levels.items()},
        }


def check_record(receipt: Receipt, record: Mapping[str, object] | None) -> LevelResult:
    """Level 1: the call record rebuilds the receipt's ``call_sha256``."""
    if record is None:
        return skipped("no call record given")
    try:
        rec = record_from_json(record, server=receipt.server)
        digest = rec.call_sha256()
    except (RecordError, CanonicalizationError) as e:
        return failed(f"the record is not a valid rs-tool-call/1 record: {e}")
    if rec.server != receipt.server or rec.tool != receipt.tool:
        return failed("the record's server or tool differs from the receipt's")
    if digest != receipt.call_sha256:
        return failed(f"the record hashes to {digest}, the receipt says {receipt.call_sha256}")
    return passed()


def check_signature(receipt: Receipt, jwks: Jwks | None) -> LevelResult:
    """Level 2: the receipt is signed by a trusted receipt key."""
    if jwks is None:
        return skipped("no receipt keys (JWKS) given")
    try:
        jwks.verify(receipt)
    except ReceiptSignatureError as e:
        return failed(str(e))
    assert receipt.signature is not None  # verify() refuses a receipt without one
    return passed(f"kid {receipt.signature.kid}")


def check_inclusion(
    receipt: Receipt,
    proof: str | bytes | None,
    log_verifier: NoteVerifier | None,
) -> tuple[LevelResult, ProofBundle | None, Checkpoint | None]:
    """Level 3: the entry rebuilt from the receipt is in a checkpoint the log key signed."""
    if proof is None:
        return skipped("no proof bundle given"), None, None
    if log_verifier is None:
        return skipped("no log verifier key given"), None, None
    try:
        bundle = decode_proof_bundle(proof.encode() if isinstance(proof, str) else proof)
    except ProofBundleError as e:
        return failed(f"malformed proof bundle: {e}"), None, None
    try:
        entry = receipt.entry()
    except EntryError as e:
        return failed(f"cannot rebuild the log entry from the receipt: {e}"), bundle, None
    if receipt.index != bundle.index:
        return failed("the proof is for another index than the receipt's"), bundle, None
    try:
        cp, _ = open_checkpoint(bundle.checkpoint, log_verifier)
    except (NoteError, ValueError) as e:
        return failed(f"checkpoint: {e}"), bundle, None
    if receipt.origin != cp.origin:
        return failed(f"the receipt names log {receipt.origin!r}, the checkpoint "
                      f"{cp.origin!r}"), bundle, cp
    try:
        verify_inclusion(bundle.index, cp.size, leaf_hash(entry.encode()), bundle.proof,
                         cp.root_hash)
    except ProofError as e:
        return failed(f"inclusion proof: {e}"), bundle, cp
    return passed(f"index {bundle.index} in {cp.origin} at size {cp.size}"), bundle, cp


def check_witnesses(checkpoint: bytes, log_verifier: NoteVerifier, policy: TlogPolicy
                    ) -> LevelResult:
    """Level 4: the checkpoint's cosignatures meet the witness policy (C2SP tlog-policy).

    Reports the number of valid cosignatures truthfully (all of them, not just the quorum).
    """
    try:
        cosigned = policy.cosigners(checkpoint, [log_verifier])
    except NoteError as e:
        return failed(f"a witness cosignature does not verify: {e}")
    total = len(policy.witnesses)
    names = ", ".join(sorted(cosigned)) or "none"
    counted = f"{len(cosigned)} of {total} witness{'es' if total != 1 else ''} cosigned ({names})"
    if policy.satisfied(cosigned):
        return passed(f"{counted}; quorum {policy.describe()} met")
    return failed(f"{counted}; quorum {policy.describe()} not met")


def malformed_verdict(problem: ReceiptFormatError) -> Verdict:
    """The verdict on a receipt that cannot be parsed: levels 1-3 failed with the reason."""
    verdict = Verdict()
    for name in LEVELS[:3]:
        verdict.levels[name] = failed(f"malformed receipt: {problem}")
    return verdict


def verify_receipt(
    receipt: Receipt | Mapping[str, object],
    *,
    record: Mapping[str, object] | None,
    jwks: Jwks | None,
    log_verifier: NoteVerifier | None,
    proof: str | bytes | None = None,
    witnesses: Sequence[NoteVerifier] = (),
    quorum: int = 0,
    witness_policy: TlogPolicy | None = None,
) -> Verdict:
    """Check levels 1–4 of one receipt; ``proof`` defaults to the receipt's own ``proof``.

    Witnesses are trusted through ``witness_policy`` (a C2SP tlog-policy), or in the simple
    form ``witnesses`` with ``quorum`` (k of them); level 4 is required when the policy needs
    any cosignature.

    A receipt given as JSON is parsed first (:meth:`Receipt.from_json`); a malformed one
    fails levels 1-3 with the reason.
    """
    verdict = Verdict()
    try:
        if not isinstance(receipt, Receipt):
            receipt = Receipt.from_json(receipt)
    except ReceiptFormatError as e:
        return malformed_verdict(e)
    if proof is None:
        proof = receipt.proof
    if witness_policy is None and (witnesses or quorum):
        try:
            witness_policy = TlogPolicy.from_quorum(witnesses, quorum)
        except TlogPolicyError as e:
            raise ValueError(str(e)) from None
    verdict.levels["record"] = check_record(receipt, record)
    verdict.levels["signature"] = check_signature(receipt, jwks)
    inclusion, bundle, cp = check_inclusion(receipt, proof, log_verifier)
    verdict.levels["inclusion"] = inclusion
    verdict.checkpoint = cp if inclusion.status == "passed" else None
    if witness_policy is None or not witness_policy.requires_cosignatures:
        verdict.levels["witnesses"] = skipped("no witness quorum required")
    elif bundle is None or log_verifier is None or inclusion.status != "passed":
        verdict.levels["witnesses"] = skipped("no verified checkpoint to check cosignatures on")
        verdict.required = (*verdict.required, "witnesses")
    else:
        verdict.levels["witnesses"] = check_witnesses(bundle.checkpoint, log_verifier,
                                                      witness_policy)
        verdict.required = (*verdict.required, "witnesses")
    return verdict
