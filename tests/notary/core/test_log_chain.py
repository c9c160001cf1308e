"""The chain checks of ``notary monitor`` (pure): the list of logs read strictly, the successor
record compared with the next listed log, the next key taken from the record."""

from __future__ import annotations

import pytest

from ledger.core.note import Ed25519Signer, Ed25519Verifier
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner, SubtreeCosignatureVerifier
from notary.core.log_chain import ChainError, ListedLog, next_key, parse_log_list, successor_of
from notary.core.successor import SuccessorRecord

SIGNER0 = Ed25519Signer.generate("n.example")
SIGNER1 = Ed25519Signer.generate("n.example/2027-01-01")
PQ1 = SubtreeCosignatureSigner.derived_from(SIGNER1)
VKEYS1 = (SIGNER1.verifier_key_text(), PQ1.verifier_key_text())
LOG0 = ListedLog("n.example", (SIGNER0.verifier_key_text(),), "frozen", 3, "http://h/logs/0")
LOG1 = ListedLog("n.example/2027-01-01", VKEYS1, "active", 0, "http://h/logs/1")


def record(**change: object) -> SuccessorRecord:
    fields: dict[str, object] = {"origin": LOG1.origin, "vkeys": VKEYS1,
                                 "previous": LOG0.origin,
                                 "frozen_at": "2027-01-01T00:00:00.000Z", "reason": "scheduled"}
    return SuccessorRecord(**{**fields, **change})  # type: ignore[arg-type]


def test_a_record_matching_the_next_log_gives_its_key_of_the_trusted_algorithm() -> None:
    rec = successor_of(record().encode(), LOG0, LOG1)
    verifier, vkey = next_key(rec, Ed25519Verifier.from_vkey(LOG0.vkeys[0]))
    assert vkey == VKEYS1[0] and verifier.name == LOG1.origin
    pq = SubtreeCosignatureSigner.derived_from(SIGNER0)
    verifier, vkey = next_key(rec, SubtreeCosignatureVerifier.from_vkey(pq.verifier_key_text()))
    assert vkey == VKEYS1[1] and isinstance(verifier, SubtreeCosignatureVerifier)


@pytest.mark.parametrize(("entry", "says"), [
    (b"\xa0", "not a successor record"),
    (record(previous="n.example/other").encode(), "names n.example/other as its log"),
    (record(vkeys=(SIGNER0.verifier_key_text(),)).encode(), "but the notary lists"),
    (record(origin="n.example/2027-07-01").encode(), "but the notary lists"),
])
def test_a_record_that_does_not_match_is_refused(entry: bytes, says: str) -> None:
    with pytest.raises(ChainError, match=says):
        successor_of(entry, LOG0, LOG1)


def test_a_record_naming_a_log_that_is_not_listed_is_refused() -> None:
    with pytest.raises(ChainError, match="does not list"):
        successor_of(record().encode(), LOG0, None)


def test_a_record_naming_a_key_of_another_log_is_refused() -> None:
    other = Ed25519Signer.generate("elsewhere").verifier_key_text()
    with pytest.raises(ChainError, match="names a key of elsewhere"):
        next_key(record(vkeys=(other,)), Ed25519Verifier.from_vkey(LOG0.vkeys[0]))


def item(**change: object) -> dict[str, object]:
    return {"origin": "o", "vkeys": ["k"], "state": "active", "size": 0, "url": "/logs/0",
            **change}


def test_the_list_is_read_strictly_and_urls_made_absolute() -> None:
    [log] = parse_log_list([item()], "http://h:1/base")
    assert log.url == "http://h:1/logs/0"
    for bad in ([], [item(size=-1)], [item(size=True)], [item(vkeys=[])], [item(origin="")],
                [item(state="frozen")], [item(), item()], "logs"):
        with pytest.raises(ChainError):
            parse_log_list(bad, "http://h")
