"""The tlog-policy parser's one nesting bound and one decoding rule (the JavaScript parser,
js/src/policy.js, shares both; the cross-language corpus checks them there too)."""

from __future__ import annotations

import pytest

from ledger.core.checkpoint import Checkpoint, sign_checkpoint
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, merge_signatures, parse_note
from ledger.core.tlog_policy import (
    MAX_GROUP_DEPTH,
    TlogPolicy,
    TlogPolicyError,
    TlogPolicyNotMet,
    parse_tlog_policy,
)

WITNESS = CosignatureSigner.generate("witness.example/a").verifier_key_text()


def nested(depth: int) -> str:
    lines = [f"witness A {WITNESS} https://w.example", "group G1 any A"]
    lines += [f"group G{i} any G{i - 1}" for i in range(2, depth + 1)]
    return "\n".join([*lines, f"quorum G{depth}", ""])


def test_groups_nest_at_most_the_bound() -> None:
    policy = parse_tlog_policy(nested(MAX_GROUP_DEPTH))
    assert policy.satisfied({"A"}) and not policy.satisfied(set())
    assert policy.describe().count("group G") == MAX_GROUP_DEPTH
    with pytest.raises(TlogPolicyError, match=f"nests {MAX_GROUP_DEPTH + 1} deep"):
        parse_tlog_policy(nested(MAX_GROUP_DEPTH + 1))


def test_deep_nesting_is_an_error_not_a_recursion() -> None:
    for depth in (400, 3000):
        with pytest.raises(TlogPolicyError, match="more than 32"):
            parse_tlog_policy(nested(depth))


def test_utf8_without_a_bom_only() -> None:
    text = nested(1)
    assert parse_tlog_policy(text.encode()).quorum == "G1"
    with pytest.raises(TlogPolicyError, match="byte order mark"):
        parse_tlog_policy(b"\xef\xbb\xbf" + text.encode())
    with pytest.raises(TlogPolicyError, match="not UTF-8"):
        parse_tlog_policy(
            text.replace("https://w.example", "https://w\xe9.example").encode("latin-1")
        )
    with pytest.raises(TlogPolicyError, match="not UTF-8"):
        parse_tlog_policy(text.replace("https://w.example", "https://w\udcff.example"))
    # a name in UTF-8 is fine
    renamed = text.replace("witness A", "witness Zürich").replace("any A", "any Zürich")
    assert "Zürich" in parse_tlog_policy(renamed.encode()).witnesses


def test_quorum_time_is_when_the_quorum_last_vouched_for_the_checkpoint() -> None:
    """2 of 3: the second-newest cosignature's time, whichever witness made it; an older third
    one does not hold it back, and one cosignature alone does not meet the quorum."""
    log = Ed25519Signer.generate("log.test")
    note = sign_checkpoint(Checkpoint("log.test", 5, bytes(32)), log)
    text = parse_note(note).text
    witnesses = [CosignatureSigner.generate(f"w{i}.test") for i in range(3)]
    policy = TlogPolicy.from_quorum([w.verifier() for w in witnesses], 2)
    cosigned = merge_signatures(note, [w.cosign(text, t) for w, t in
                                       zip(witnesses, (1000, 3000, 2000), strict=True)])
    cp, at = policy.quorum_time(cosigned, [log.verifier()])
    assert (cp.size, at) == (5, 2000)
    with pytest.raises(TlogPolicyNotMet):
        policy.quorum_time(merge_signatures(note, [witnesses[0].cosign(text, 1000)]),
                           [log.verifier()])
