"""What the gateway commits to in the ledger: the policy, the facts of a call, each decision.

Commitment: ``SHA-256(JCS({"policy": <the TOML document as JSON>, "salt": <hex salt>}))``:
comments and layout do not change it, any value does; the salt keeps a small policy from
being guessed from its digest until the operator reveals it. A decision is notarized as the
SHA-256 of the JCS of :func:`decision_record`, which names the facts by their digest only.

A decision record carries a fresh salt of its own: every other member is public or guessable
(the commitment is in the ledger, the facts of a call may be few, the time is one of a
thousand milliseconds a second), and a digest anyone can compute in advance is one another
tenant of the notary can log first, under its own name (the gateway's entry is then refused)
or under the gateway's (its receipt would pass for the gateway's). The salt is drawn by the
caller (nothing here draws randomness) and kept with the record, so an auditor rebuilds the
digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Literal, NotRequired, TypedDict

from notary.core.canonical import canonical_json

__all__ = ["DecisionRecord", "DecisionValue", "decision_record", "facts_sha256",
           "policy_commitment", "sha256_jcs"]

DecisionValue = Literal["allow", "deny"]


class DecisionRecord(TypedDict):
    """The record of one decision, as :func:`decision_record` builds it."""

    decision: DecisionValue
    tool: str
    facts_sha256: str
    policy_commitment: str
    time: str
    salt: str
    kind: NotRequired[str]
    """Absent for a tool (``prompt`` or ``resource`` otherwise)."""


def sha256_jcs(value: object) -> str:
    """Lower-case hex SHA-256 of the RFC 8785 canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def policy_commitment(document: Mapping[str, object], salt_hex: str) -> str:
    """The salted commitment to a policy document (see the module docstring)."""
    return sha256_jcs({"policy": dict(document), "salt": salt_hex})


def facts_sha256(facts: Mapping[str, object]) -> str:
    """The digest of a set of authorization facts (JCS, SHA-256, lower-case hex)."""
    return sha256_jcs(dict(facts))


def decision_record(decision: DecisionValue, tool: str, facts_digest: str,
                    commitment: str, when: str, salt: str, kind: str = "tool"
                    ) -> DecisionRecord:
    """The record notarized for one decision: its SHA-256 (JCS) is the entry's call_sha256.

    ``salt`` must be fresh for every record (see the module docstring). ``tool`` names what
    was decided on: a tool; with ``kind = "prompt"`` a prompt; with ``kind = "resource"`` the
    resource method (the URI is a fact). A tool's record has no ``kind`` member, exactly as
    before prompts and resources were judged.
    """
    record: DecisionRecord = {"decision": decision, "tool": tool, "facts_sha256": facts_digest,
              "policy_commitment": commitment, "time": when, "salt": salt}
    if kind != "tool":
        record["kind"] = kind
    return record
