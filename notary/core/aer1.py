"""AER-1 live receipts (``result._receipt``) on top of rs-tool-call/1 notarizations.

AER-1 is a receipt format for clients that expect a self-describing object at
``result._receipt``: the exact bytes that were hashed (base64), their ``sha256:`` digest and
length, who produced the receipt (``provenance_class``) and an ``anchor`` naming where the
digest was committed. Its schema is ``notary/aer-1-receipt.schema.json`` (a copy of the
published schema, https://zambo.dev/aer-1/schema.json, shipped as package data so a fresh clone
and an installed wheel both have it).

Here the hashed bytes are the JCS bytes of the rs-tool-call/1 call record, so ``output_hash``
is ``sha256:`` + ``call_sha256`` and the anchor is the notary receipt of that digest: an AER-1
receipt is a second *view* of a notarization, not a second commitment, and everything in it can
be checked with the notary's existing proofs. The anchor carries ``origin``, ``index``,
``entry_url`` and ``checkpoint`` (the signed checkpoint note the proof leads to), plus the full
notary ``receipt`` with its ``proof`` so the AER-1 object verifies offline on its own.

Checks (:func:`verify_aer1`, pure; ``notary verify`` runs them on an AER-1 document):

- ``bytes``: ``canonical_bytes`` is strict base64 and decodes to ``canonical_byte_length`` bytes.
- ``hash``: SHA-256 of those bytes is ``output_hash`` (``hash_algorithm`` must be ``sha256``).
- ``anchor``: the anchor's notary receipt is for exactly this digest and tool, its ledger
  position and checkpoint are the anchor's, its signature verifies under a trusted receipt key
  and its entry is included in a checkpoint signed by the trusted log key (levels 2-3 of
  :func:`notary.core.verification.verify_receipt`; level 1 also runs, on the decoded bytes as the
  call
  record, and witnesses when a quorum is asked for).

The module is pure (no I/O, no asyncio) apart from :func:`verify_command`, the thin hook that
``notary verify`` calls.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal, TypedDict, TypeGuard

from ledger.core.boundedjson import JsonError, JsonObject, parse_json
from ledger.core.note import NoteVerifier
from ledger.core.tlog_proof import ProofBundleError, decode_proof_bundle
from notary.core.canonical import MAX_DEPTH, CanonicalizationError, canonical_json
from notary.core.ids import format_issued_at
from notary.core.jwks import Jwks
from notary.core.meta import AER1_AGENT_META_KEY, AER1_META_KEY
from notary.core.receipts import Receipt
from notary.core.records import CallRecord
from notary.core.verification import LevelResult, Verdict, failed, passed, skipped, verify_receipt

SCHEMA_VERSION = "0.3"


HASH_ALGORITHM = "sha256"


ProvenanceClass = Literal["EXECUTED BY ZAMBO", "OBSERVED VIA GATEWAY", "LOGGED BY AGENT"]


PROVENANCE_GATEWAY: Final[ProvenanceClass] = "OBSERVED VIA GATEWAY"


PROVENANCE_AGENT: Final[ProvenanceClass] = "LOGGED BY AGENT"


RESULT_KEY = "_receipt"
"""Where AER-1 puts the receipt: a top-level member of the tool result."""


AER1_LEVELS = ("bytes", "hash", "anchor")


_HEX64 = frozenset("0123456789abcdef")


class Aer1Anchor(TypedDict):
    """An AER-1 ``anchor`` as :func:`anchor_from_receipt` builds it."""

    type: str
    origin: str
    index: int
    entry_url: str
    checkpoint: str | None
    receipt_id: str
    receipt: dict[str, object]


class Aer1Receipt(TypedDict):
    """An AER-1 receipt as :func:`build_aer1` builds it (one read from elsewhere is only a
    ``Mapping[str, object]`` until :func:`verify_aer1` has checked it)."""

    id: str
    tool: str
    timestamp: str
    receipt_schema_version: str
    tool_context: dict[str, str]
    provenance_class: ProvenanceClass
    canonical_bytes: str
    output_hash: str
    canonical_byte_length: int
    hash_algorithm: str
    verification_status: str
    status: str
    anchor: Aer1Anchor | None


def anchor_from_receipt(receipt: Receipt) -> Aer1Anchor:
    """The AER-1 ``anchor`` for a notary receipt (which must carry its ``proof``).

    ``checkpoint`` is the signed checkpoint note from the proof, as text: the commitment a
    reader can compare with what witnesses and monitors saw. ``receipt`` is the whole notary
    receipt (proof included), without which the anchor could not be checked offline.
    """
    checkpoint: str | None = None
    if receipt.proof is not None:
        try:
            checkpoint = decode_proof_bundle(receipt.proof.encode()).checkpoint.decode("utf-8")
        except (ProofBundleError, UnicodeDecodeError):
            checkpoint = None
    return {
        "type": "rs-tool-call/1",
        "origin": receipt.origin,
        "index": receipt.index,
        "entry_url": receipt.entry_url,
        "checkpoint": checkpoint,
        "receipt_id": receipt.id,
        "receipt": receipt.to_json(),
    }


def build_aer1(
    *,
    record: CallRecord,
    provenance: ProvenanceClass,
    verification_status: str,
    status: str,
    tool_context: Mapping[str, str],
    notary_receipt: Receipt | None,
    timestamp: datetime | None = None,
    receipt_id: str | None = None,
) -> Aer1Receipt:
    """An AER-1 receipt for one rs-tool-call/1 call record.

    ``canonical_bytes`` are the record's JCS bytes, so ``output_hash`` equals the record's
    ``call_sha256`` and the notary receipt of that digest (``notary_receipt``, with its proof)
    is the anchor; without one (the notary was unreachable) the anchor is ``null``.
    ``tool_context`` needs non-empty ``name``, ``version`` and ``scope``.
    """
    data = record.canonical_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if notary_receipt is not None and notary_receipt.call_sha256 != digest:
        raise ValueError("the notary receipt is for another digest than this call record")
    for key in ("name", "version", "scope"):
        value = tool_context.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"tool_context.{key} must be a non-empty string")
    when = timestamp if timestamp is not None else datetime.now(UTC)
    # deferred: uuid (and the platform module it loads) only to make a receipt, not to verify
    import uuid

    return {
        "id": receipt_id if receipt_id is not None else str(uuid.uuid4()),
        "tool": record.tool,
        "timestamp": format_issued_at(when),
        "receipt_schema_version": SCHEMA_VERSION,
        "tool_context": dict(tool_context),
        "provenance_class": provenance,
        "canonical_bytes": base64.b64encode(data).decode("ascii"),
        "output_hash": f"sha256:{digest}",
        "canonical_byte_length": len(data),
        "hash_algorithm": HASH_ALGORITHM,
        "verification_status": verification_status,
        "status": status,
        "anchor": None if notary_receipt is None else anchor_from_receipt(notary_receipt),
    }


def is_aer1_receipt(value: object) -> TypeGuard[Mapping[str, object]]:
    """Whether ``value`` looks like an AER-1 receipt (has its hash and bytes members)."""
    return (isinstance(value, Mapping) and "output_hash" in value
            and "canonical_bytes" in value)


def extract_aer1(doc: object) -> dict[str, object] | None:
    """The AER-1 receipt in a document, or None.

    Accepts the receipt itself, a tool result (wire JSON) carrying it at ``_receipt`` or in
    ``_meta`` (:data:`AER1_META_KEY`, then :data:`AER1_AGENT_META_KEY`), or a JSON-RPC response
    whose
    ``result`` is such a result.
    """
    if not isinstance(doc, Mapping):
        return None
    if is_aer1_receipt(doc):
        return dict(doc)
    if "jsonrpc" in doc and isinstance(doc.get("result"), Mapping):
        return extract_aer1(doc["result"])
    direct = doc.get(RESULT_KEY)
    if is_aer1_receipt(direct):
        return dict(direct)
    meta = doc.get("_meta")
    if isinstance(meta, Mapping):
        for key in (AER1_META_KEY, AER1_AGENT_META_KEY):
            mirrored = meta.get(key)
            if is_aer1_receipt(mirrored):
                return dict(mirrored)
    return None


@dataclass
class Aer1Verdict:
    """Per-level results of an AER-1 receipt; ``anchor_verdict`` is the notary receipt's own.

    ``valid`` when bytes, hash and anchor all passed (a receipt without an anchor, or checked
    without trust anchors, is not valid: its bytes may be intact but nothing commits to them).
    """

    levels: dict[str, LevelResult] = field(default_factory=dict)
    anchor_verdict: Verdict | None = None
    record: JsonObject | None = None

    @property
    def valid(self) -> bool:
        return all(self.levels.get(n, skipped("")).status == "passed" for n in AER1_LEVELS)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "valid": self.valid,
            "levels": {n: self.levels.get(n, skipped("not checked")).to_json()
                       for n in AER1_LEVELS},
        }
        if self.anchor_verdict is not None:
            out["anchor_levels"] = self.anchor_verdict.to_json()["levels"]
        return out


def _decode_bytes(receipt: Mapping[str, object]) -> tuple[LevelResult, bytes | None]:
    text = receipt.get("canonical_bytes")
    if not isinstance(text, str):
        return failed("canonical_bytes must be a base64 string"), None
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as e:
        return failed(f"canonical_bytes is not strict base64: {e}"), None
    length = receipt.get("canonical_byte_length")
    if isinstance(length, bool) or not isinstance(length, int):
        return failed("canonical_byte_length must be an integer"), data
    if length != len(data):
        return failed(f"canonical_bytes decode to {len(data)} bytes, canonical_byte_length "
                      f"says {length}"), data
    return passed(f"{len(data)} bytes"), data


def _check_hash(receipt: Mapping[str, object], data: bytes | None
                ) -> tuple[LevelResult, str | None]:
    if receipt.get("hash_algorithm") != HASH_ALGORITHM:
        return failed(f"hash_algorithm {receipt.get('hash_algorithm')!r} is not "
                      f"{HASH_ALGORITHM!r}"), None
    claimed = receipt.get("output_hash")
    if (not isinstance(claimed, str) or not claimed.startswith("sha256:")
            or len(claimed) != 71 or not set(claimed[7:]) <= _HEX64):
        return failed("output_hash must be 'sha256:' and 64 lower-case hex characters"), None
    if data is None:
        return skipped("no bytes to hash"), claimed[7:]
    actual = hashlib.sha256(data).hexdigest()
    if actual != claimed[7:]:
        return failed(f"the bytes hash to sha256:{actual}, output_hash says {claimed}"), None
    return passed(claimed), actual


def _record_of(data: bytes | None) -> JsonObject | None:
    """The call record the bytes encode, when they are canonical JSON of an object."""
    if data is None:
        return None
    try:
        doc = parse_json(data, max_bytes=len(data), max_depth=MAX_DEPTH)
    except JsonError:
        return None
    if not isinstance(doc, dict):
        return None
    try:
        if canonical_json(doc) != data:
            return None
    except CanonicalizationError:
        return None
    return doc


def verify_aer1(
    receipt: Mapping[str, object],
    *,
    jwks: Jwks | None,
    log_verifier: NoteVerifier | None,
    witnesses: Sequence[NoteVerifier] = (),
    quorum: int = 0,
) -> Aer1Verdict:
    """Check an AER-1 receipt's bytes, hash and anchor (no I/O; see the module docstring).

    ``jwks`` and ``log_verifier`` are the trust anchors for the anchor's notary receipt
    (receipt keys, and the log key for its origin); without them the anchor level is skipped.
    """
    verdict = Aer1Verdict()
    if not isinstance(receipt, Mapping):
        for name in AER1_LEVELS:
            verdict.levels[name] = failed("an AER-1 receipt must be a JSON object")
        return verdict
    verdict.levels["bytes"], data = _decode_bytes(receipt)
    verdict.levels["hash"], digest = _check_hash(receipt, data)
    verdict.record = _record_of(data)
    verdict.levels["anchor"] = _check_anchor(receipt, digest, verdict, jwks, log_verifier,
                                             witnesses, quorum)
    return verdict


def _check_anchor(receipt: Mapping[str, object], digest: str | None, verdict: Aer1Verdict,
                  jwks: Jwks | None, log_verifier: NoteVerifier | None,
                  witnesses: Sequence[NoteVerifier], quorum: int) -> LevelResult:
    anchor = receipt.get("anchor")
    if anchor is None:
        return skipped("the receipt has no anchor (it was never committed to a log)")
    if not isinstance(anchor, Mapping):
        return failed("anchor must be an object or null")
    notary_receipt = anchor.get("receipt")
    if not isinstance(notary_receipt, Mapping):
        return failed("the anchor carries no notary receipt to check")
    problem = anchor_binding_problem(receipt, anchor, digest)
    if problem is not None:
        return failed(problem)
    inner = verify_receipt(notary_receipt, record=verdict.record, jwks=jwks,
                           log_verifier=log_verifier, witnesses=witnesses, quorum=quorum)
    verdict.anchor_verdict = inner
    return summarize_anchor(inner)


def anchor_binding_problem(receipt: Mapping[str, object], anchor: Mapping[str, object],
                           digest: str | None) -> str | None:
    """Why the anchor does not belong to this receipt, or None when it does.

    The AER-1 members outside the notary receipt (tool, output hash, anchor position and
    checkpoint) are not signed by anyone; they must agree with the signed receipt and its
    proof, or a valid anchor could be paired with other bytes.
    """
    notary_receipt = anchor.get("receipt")
    if not isinstance(notary_receipt, Mapping):
        return "the anchor carries no notary receipt to check"
    if digest is None:
        return "no valid output_hash to compare with the anchor"
    if notary_receipt.get("call_sha256") != digest:
        return (f"the anchor's receipt is for call_sha256 {notary_receipt.get('call_sha256')}, "
                f"not {digest}")
    if notary_receipt.get("tool") != receipt.get("tool"):
        return (f"the anchor's receipt is for tool {notary_receipt.get('tool')!r}, the AER-1 "
                f"receipt says {receipt.get('tool')!r}")
    ledger = notary_receipt.get("ledger")
    ledger = ledger if isinstance(ledger, Mapping) else {}
    for key in ("origin", "index", "entry_url"):
        if anchor.get(key) != ledger.get(key):
            return (f"anchor.{key} {anchor.get(key)!r} differs from the receipt's "
                    f"{ledger.get(key)!r}")
    checkpoint = anchor.get("checkpoint")
    proof = notary_receipt.get("proof")
    if checkpoint is not None:
        if not isinstance(checkpoint, str) or not isinstance(proof, str):
            return "anchor.checkpoint must be the text of the proof's checkpoint"
        try:
            bundled = decode_proof_bundle(proof.encode()).checkpoint.decode("utf-8")
        except (ProofBundleError, UnicodeDecodeError) as e:
            return f"the anchor's proof is malformed: {e}"
        if bundled != checkpoint:
            return "anchor.checkpoint is not the checkpoint the receipt's proof leads to"
    return None


def summarize_anchor(inner: Verdict) -> LevelResult:
    """One level result for the anchor from the notary receipt's verdict."""
    needed = [n for n in inner.required if n != "record"]
    statuses = {n: inner.levels.get(n, skipped("not checked")) for n in needed}
    bad = [f"{n}: {r.reason}" for n, r in statuses.items() if r.status == "failed"]
    if bad:
        return failed("; ".join(bad))
    missing = [f"{n}: {r.reason}" for n, r in statuses.items() if r.status != "passed"]
    if missing:
        return skipped("; ".join(missing))
    record = inner.levels.get("record")
    if record is not None and record.status == "failed":
        return failed(f"the bytes are not the call record the receipt commits to: {record.reason}")
    where = inner.levels["inclusion"].reason
    return passed(f"notary receipt signed and included ({where})")
