"""Re-check past gateway decisions once the policy and its salt are revealed.

Inputs: the revealed policy file(s) and salt, and the decision evidence the gateway kept (its
state file, or JSON lines ``{record, facts, receipt}`` exported with ``notary gateway
decisions``). For every decision, four checks, each reported on its own:

- ``policy``: the record's ``policy_commitment`` is the commitment of one of the revealed
  policies under the salt (so the decision was made under a policy now in the open);
- ``facts``: the saved facts hash to the record's ``facts_sha256`` and name the record's tool;
- ``decision``: re-evaluating that policy on those facts gives the recorded decision;
- ``ledger``: the record hashes to the notary receipt's ``call_sha256``, the receipt is a
  ``policy.decision`` entry (of the expected gateway, when named), its signature verifies
  under the receipt keys and its entry is included in a checkpoint signed by the log key.

Each revealed policy's own ``policy.commit`` receipt (from the state file) is checked the
same way. Everything here is pure apart from reading the evidence; no network is needed when
the trust anchors are files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from ledger.core.cosignature import LogVerifier
from ledger.core.tlog_policy import TlogPolicy
from notary.core.jwks import Jwks
from notary.core.verification import LevelResult, failed, passed, skipped, verify_receipt
from notary.gateway import codes
from notary.gateway.policy import Kind, Policy, sha256_jcs
from notary.gateway.store import DecisionEvidence

__all__ = ["AUDIT_LEVELS", "AuditReport", "DecisionCheck", "PolicyCheck", "audit_decision",
           "check_policy", "parse_jsonl"]

AUDIT_LEVELS = ("policy", "facts", "decision", "ledger")


@dataclass
class DecisionCheck:
    """The audit of one decision."""

    number: int
    record: dict[str, object]
    levels: dict[str, LevelResult] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return all(self.levels.get(n, skipped("")).status == "passed" for n in AUDIT_LEVELS)

    def level(self, name: str) -> LevelResult:
        return self.levels.get(name, skipped("not checked"))

    def to_json(self) -> dict[str, object]:
        return {"number": self.number, "valid": self.valid, "record": self.record,
                "levels": {n: self.level(n).to_json() for n in AUDIT_LEVELS}}


@dataclass
class PolicyCheck:
    """Whether a revealed policy's commitment is in the ledger."""

    source: str
    commitment: str
    ledger: LevelResult

    def to_json(self) -> dict[str, object]:
        return {"source": self.source, "commitment": self.commitment,
                "ledger": self.ledger.to_json()}


@dataclass
class AuditReport:
    """The audit of a decision log: each decision, and each revealed policy's commitment."""

    decisions: list[DecisionCheck]
    policies: list[PolicyCheck]

    @property
    def valid(self) -> bool:
        """Some decision was checked, every one passed, and no policy's entry failed."""
        return (bool(self.decisions) and all(c.valid for c in self.decisions)
                and all(p.ledger.status != "failed" for p in self.policies))

    @property
    def valid_decisions(self) -> int:
        return sum(c.valid for c in self.decisions)

    def to_json(self) -> dict[str, object]:
        return {
            "valid": self.valid,
            "decisions": [c.to_json() for c in self.decisions],
            "policies": [p.to_json() for p in self.policies],
            "summary": {"decisions": len(self.decisions), "valid": self.valid_decisions},
        }


def _origin(receipt: Mapping[str, object]) -> object:
    ledger = receipt.get("ledger")
    return ledger.get("origin") if isinstance(ledger, Mapping) else None


def _log_key_for(receipt: Mapping[str, object], keys: Sequence[LogVerifier]
                 ) -> LogVerifier | None:
    origin = _origin(receipt)
    for key in keys:
        if key.name == origin:
            return key
    return None


def check_ledger_entry(receipt: Mapping[str, object] | None, digest: str, tool: str,
                       server: str | None, jwks: Jwks | None,
                       log_keys: Sequence[LogVerifier],
                       witness_policy: TlogPolicy | None = None,
                       proofs: Mapping[str, str] | None = None) -> LevelResult:
    """A notary receipt commits to ``digest`` as ``tool`` (of ``server``), signed and included.

    With a ``witness_policy`` the checkpoint must also carry the cosignatures it requires.
    A receipt saved at call time ends in a checkpoint no witness had cosigned yet, so
    ``proofs`` (receipt id → a newer tlog-proof, fetched from the notary) supplies the
    upgraded proof to check instead; each is verified in full like the receipt's own.
    """
    if receipt is None:
        return failed("no notary receipt: the entry was never made (the notary was "
                      "unavailable) or the evidence lost it")
    if receipt.get("call_sha256") != digest:
        return failed(f"the receipt commits to {receipt.get('call_sha256')}, the record "
                      f"hashes to {digest}")
    if receipt.get("tool") != tool:
        return failed(f"the receipt is a {receipt.get('tool')!r} entry, not {tool!r}")
    if server is not None and receipt.get("server") != server:
        return failed(f"the receipt is from {receipt.get('server')!r}, not {server!r}")
    if jwks is None or not log_keys:
        return skipped("no trust anchors (--jwks/--log-key or --notary) to check the receipt")
    log_key = _log_key_for(receipt, log_keys)
    if log_key is None:
        return failed(f"no trusted log key for the receipt's origin "
                      f"{_origin(receipt)!r}")
    upgraded = (proofs or {}).get(str(receipt.get("id")))
    verdict = verify_receipt(receipt, record=None, jwks=jwks, log_verifier=log_key,
                             proof=upgraded, witness_policy=witness_policy)
    levels = ("signature", "inclusion", "witnesses") if witness_policy is not None and \
        witness_policy.requires_cosignatures else ("signature", "inclusion")
    for level in levels:
        result = verdict.levels.get(level, skipped("not checked"))
        if result.status != "passed":
            return LevelResult(result.status, f"{level}: {result.reason}")
    reason = verdict.levels["inclusion"].reason
    if "witnesses" in levels:
        reason += f"; {verdict.levels['witnesses'].reason}"
    return passed(f"receipt {receipt.get('id')}: {reason}")


def audit_decision(number: int, evidence: DecisionEvidence, policies: Mapping[str, Policy],
                   *, server: str | None, jwks: Jwks | None,
                   log_keys: Sequence[LogVerifier],
                   witness_policy: TlogPolicy | None = None,
                   proofs: Mapping[str, str] | None = None) -> DecisionCheck:
    """The four checks of one decision against the revealed ``policies`` (commitment → policy)."""
    record = evidence.record
    check = DecisionCheck(number, dict(record))
    tool, decision = record.get("tool"), record.get("decision")
    kind = record.get("kind", "tool")
    subject = {"tool": "tool", "prompt": "prompt", "resource": "method"}.get(str(kind))
    policy = policies.get(str(record.get("policy_commitment")))
    check.levels["policy"] = (
        passed(f"commitment {record.get('policy_commitment')}") if policy is not None
        else failed(f"commitment {record.get('policy_commitment')} is not the commitment of "
                    "any revealed policy under this salt"))
    facts = evidence.facts
    if sha256_jcs(facts) != record.get("facts_sha256"):
        check.levels["facts"] = failed("the saved facts do not hash to facts_sha256")
    elif subject is None:
        check.levels["facts"] = failed(f"the record's kind {kind!r} is not one the gateway "
                                       "decides")
    elif facts.get(subject) != tool:
        check.levels["facts"] = failed(f"the saved facts are for another {kind}")
    else:
        check.levels["facts"] = passed(f"{len(facts)} facts")
    if policy is None or not isinstance(tool, str):
        check.levels["decision"] = skipped("no revealed policy to re-evaluate")
    elif check.levels["facts"].status != "passed":
        check.levels["decision"] = skipped("the facts are not the ones decided on")
    else:
        allowed, reasons = policy.evaluate(tool, facts, cast(Kind, kind))
        expected = "allow" if allowed else "deny"
        check.levels["decision"] = (
            passed(expected if allowed else f"deny ({'; '.join(reasons)})")
            if expected == decision
            else failed(f"the policy gives {expected!r}, the gateway recorded {decision!r}"
                        + (f" ({'; '.join(reasons)})" if reasons else "")))
    check.levels["ledger"] = check_ledger_entry(
        evidence.receipt, sha256_jcs(record), codes.POLICY_DECISION_TOOL, server, jwks, log_keys,
        witness_policy, proofs)
    return check


def check_policy(source: str, commitment: str, receipt: Mapping[str, object] | None,
                 *, server: str | None, jwks: Jwks | None,
                 log_keys: Sequence[LogVerifier],
                 witness_policy: TlogPolicy | None = None,
                 proofs: Mapping[str, str] | None = None) -> PolicyCheck:
    """A revealed policy's ``policy.commit`` entry (its receipt from the state file)."""
    if receipt is None:
        return PolicyCheck(source, commitment, skipped(
            "no policy.commit receipt for it in the evidence (look it up by call_sha256 at "
            "the notary)"))
    return PolicyCheck(source, commitment, check_ledger_entry(
        receipt, commitment, codes.POLICY_COMMIT_TOOL, server, jwks, log_keys, witness_policy,
        proofs))


def parse_jsonl(text: str) -> list[DecisionEvidence]:
    """Decision evidence as JSON lines ``{record, facts, receipt}``; raises ValueError."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        doc = json.loads(line)
        if not isinstance(doc, dict) or not isinstance(doc.get("record"), dict) \
                or not isinstance(doc.get("facts"), dict):
            raise ValueError(f"line {n}: expected an object with 'record' and 'facts'")
        receipt = doc.get("receipt")
        out.append(DecisionEvidence(doc["record"], doc["facts"],
                                    receipt if isinstance(receipt, dict) else None))
    return out
