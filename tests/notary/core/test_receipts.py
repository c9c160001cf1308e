"""Receipts: RFC 7638/8037 key ids, signing, verification, tampering and rotation."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from datetime import UTC
from typing import Any

import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notary.core.entry import LogEntry
from notary.core.ids import b64url_decode, b64url_encode, format_issued_at
from notary.core.jwks import Jwks, JwksError
from notary.core.receipts import (
    Receipt,
    ReceiptFormatError,
    ReceiptKey,
    ReceiptSignature,
    ReceiptSignatureError,
    build_receipt,
    jwk_thumbprint,
    signed_bytes,
    validate_receipt_shape,
)
from notary.core.records import SPEC

# RFC 8037 Appendix A.1 (private key) and A.3 (its RFC 7638 thumbprint).
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_KID = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"

RFC_KEY = ReceiptKey.from_seed(b64url_decode(RFC8037_D))
OTHER_KEY = ReceiptKey.from_seed(bytes(range(32)))

DIGEST_HEX = "9eeca8904df68e8097bff48387f05837dbf685bb867034bbcc913ab0fa8f6b8a"


def unsigned(**changes: Any) -> dict[str, object]:
    fields: dict[str, Any] = {
        "id": "tc_AAECAwQFBgcICQoLDA0ODw",
        "server": "weather",
        "tool": "get_forecast",
        "call_sha256_hex": DIGEST_HEX,
        "issued_at": "2026-11-29T20:49:44.123Z",
        "origin": "notary.example/log",
        "index": 41,
        "entry_url": "https://notary.example/v1/ledger/entries/41",
    }
    fields.update(changes)
    return build_receipt(**fields)


# Written by hand: the receipt's members in JCS order.
EXPECTED_SIGNED = (
    b'{"call_sha256":"' + DIGEST_HEX.encode() + b'","id":"tc_AAECAwQFBgcICQoLDA0ODw",'
    b'"issued_at":"2026-11-29T20:49:44.123Z","ledger":{"entry_url":'
    b'"https://notary.example/v1/ledger/entries/41","index":41,"origin":"notary.example/log"},'
    b'"server":"weather","spec":"rs-tool-call/1","tool":"get_forecast"}'
)


# --- keys --------------------------------------------------------------------------------


def test_rfc8037_thumbprint() -> None:
    assert jwk_thumbprint(RFC8037_X) == RFC8037_KID
    # RFC 7638 §3: SHA-256 over the required members in lexicographic order, no spaces.
    members = b'{"crv":"Ed25519","kty":"OKP","x":"' + RFC8037_X.encode() + b'"}'
    assert b64url_encode(hashlib.sha256(members).digest()) == RFC8037_KID


def test_rfc8037_key_from_seed() -> None:
    assert RFC_KEY.public_key == b64url_decode(RFC8037_X)
    assert RFC_KEY.kid == RFC8037_KID
    assert RFC_KEY.seed == b64url_decode(RFC8037_D)
    assert RFC_KEY.public_jwk() == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": RFC8037_X,
        "kid": RFC8037_KID,
        "alg": "EdDSA",
        "use": "sig",
    }


def test_rfc8037_a4_signature_with_the_same_seed() -> None:
    # RFC 8037 A.4: Ed25519 is deterministic, so the seed interpretation is pinned by the
    # RFC's JWS signature over "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc".
    sk = nacl.signing.SigningKey(RFC_KEY.seed)
    sig = sk.sign(b"eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc").signature
    assert b64url_encode(sig) == (
        "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
    )


def test_generate_and_repr() -> None:
    key = ReceiptKey.generate()
    assert len(key.seed) == 32
    assert ReceiptKey.from_seed(key.seed).kid == key.kid
    assert key.kid != ReceiptKey.generate().kid
    assert key.seed.hex() not in repr(key)
    assert b64url_encode(key.seed) not in repr(key)
    assert key.kid in repr(key)


@pytest.mark.parametrize("seed", [b"", bytes(31), bytes(33), "0" * 32])
def test_from_seed_needs_32_bytes(seed: Any) -> None:
    with pytest.raises(ValueError):
        ReceiptKey.from_seed(seed)


# --- building and signing -----------------------------------------------------------------


def test_build_receipt_shape() -> None:
    receipt = unsigned()
    assert list(receipt) == [
        "spec",
        "id",
        "server",
        "tool",
        "call_sha256",
        "issued_at",
        "ledger",
    ]
    assert receipt["spec"] == SPEC
    assert receipt["ledger"] == {
        "origin": "notary.example/log",
        "index": 41,
        "entry_url": "https://notary.example/v1/ledger/entries/41",
    }
    assert signed_bytes(receipt) == EXPECTED_SIGNED


def test_sign_is_ed25519_over_the_jcs_bytes() -> None:
    receipt = unsigned()
    signed = RFC_KEY.sign(receipt)
    assert "signature" not in receipt  # input untouched
    assert set(signed) == set(receipt) | {"signature"}
    sig = signed["signature"]
    assert isinstance(sig, dict)
    assert sig["alg"] == "EdDSA"
    assert sig["kid"] == RFC8037_KID
    raw = b64url_decode(sig["sig"])
    assert len(raw) == 64
    # checked here without the module's verifier
    nacl.signing.VerifyKey(b64url_decode(RFC8037_X)).verify(EXPECTED_SIGNED, raw)
    validate_receipt_shape(signed)


def test_sign_keeps_proof_outside_the_signature() -> None:
    receipt = dict(unsigned(), proof="c2sp.org/tlog-proof@v1\nindex 41\n")
    signed = RFC_KEY.sign(receipt)
    assert signed["proof"] == receipt["proof"]
    jwks = Jwks.from_keys([RFC_KEY])
    jwks.verify(signed)
    signed["proof"] = "a newer proof to a later checkpoint"
    jwks.verify(signed)
    del signed["proof"]
    jwks.verify(signed)


def test_sign_refuses_signed_or_malformed_input() -> None:
    with pytest.raises(ReceiptFormatError):
        RFC_KEY.sign(RFC_KEY.sign(unsigned()))
    bad = unsigned()
    bad["extra"] = 1
    with pytest.raises(ReceiptFormatError):
        RFC_KEY.sign(bad)


def test_sign_returns_an_independent_copy() -> None:
    receipt = unsigned()
    signed = RFC_KEY.sign(receipt)
    ledger = receipt["ledger"]
    assert isinstance(ledger, dict)
    ledger["index"] = 99
    Jwks.from_keys([RFC_KEY]).verify(signed)


# --- verification ------------------------------------------------------------------------


def _signed() -> dict[str, Any]:
    return RFC_KEY.sign(unsigned())


def _reason(jwks: Jwks, receipt: Any) -> str:
    with pytest.raises(ReceiptSignatureError) as info:
        jwks.verify(receipt)
    return info.value.reason


TAMPERS = [
    ("spec", "rs-tool-call/2"),
    ("id", "tc_AAECAwQFBgcICQoLDA0OEA"),
    ("server", "weather2"),
    ("tool", "get_forecast2"),
    ("call_sha256", "0" + DIGEST_HEX[1:]),
    ("issued_at", "2026-11-29T20:49:44.124Z"),
    ("ledger.origin", "other.example/log"),
    ("ledger.index", 42),
    ("ledger.entry_url", "https://notary.example/v1/ledger/entries/42"),
]


@pytest.mark.parametrize(("field", "value"), TAMPERS)
def test_tampering_any_signed_field_fails(field: str, value: object) -> None:
    jwks = Jwks.from_keys([RFC_KEY])
    receipt = _signed()
    jwks.verify(receipt)
    target = receipt
    *parents, leaf = field.split(".")
    for p in parents:
        target = target[p]
    target[leaf] = value
    assert _reason(jwks, receipt) == "bad_signature"


def test_adding_or_removing_members_fails() -> None:
    jwks = Jwks.from_keys([RFC_KEY])
    added = _signed()
    added["note"] = "x"
    assert _reason(jwks, added) == "bad_signature"
    removed = _signed()
    del removed["tool"]
    assert _reason(jwks, removed) == "bad_signature"
    nested = _signed()
    nested["ledger"]["extra"] = 1
    assert _reason(jwks, nested) == "bad_signature"


def test_verify_reasons() -> None:
    jwks = Jwks.from_keys([RFC_KEY, OTHER_KEY])
    receipt = _signed()

    missing = copy.deepcopy(receipt)
    del missing["signature"]
    assert _reason(jwks, missing) == "missing"

    other_kid = copy.deepcopy(receipt)
    other_kid["signature"]["kid"] = OTHER_KEY.kid
    assert _reason(jwks, other_kid) == "bad_signature"

    unknown = copy.deepcopy(receipt)
    unknown["signature"]["kid"] = ReceiptKey.generate().kid
    assert _reason(jwks, unknown) == "unknown_kid"

    for alg in ("ES256", "none", "Ed25519", None):
        bad_alg = copy.deepcopy(receipt)
        bad_alg["signature"]["alg"] = alg
        assert _reason(jwks, bad_alg) == "bad_alg"

    sig = receipt["signature"]["sig"]
    for bad_sig in (sig + "=", sig[:-2], sig.replace("-", "+").replace("_", "/") + "A", 7, ""):
        malformed = copy.deepcopy(receipt)
        malformed["signature"]["sig"] = bad_sig
        assert _reason(jwks, malformed) == "malformed"

    flipped = copy.deepcopy(receipt)
    raw = bytearray(b64url_decode(sig))
    raw[10] ^= 1
    flipped["signature"]["sig"] = b64url_encode(bytes(raw))
    assert _reason(jwks, flipped) == "bad_signature"

    extra = copy.deepcopy(receipt)
    extra["signature"]["typ"] = "x"
    assert _reason(jwks, extra) == "malformed"

    not_canonical = copy.deepcopy(receipt)
    not_canonical["ledger"]["index"] = float("nan")
    assert _reason(jwks, not_canonical) == "malformed"

    assert _reason(jwks, "receipt") == "malformed"
    assert _reason(jwks, {**receipt, "signature": "sig"}) == "malformed"


def test_rotation_keeps_old_receipts_verifiable() -> None:
    old_key, new_key = RFC_KEY, ReceiptKey.generate()
    old_receipt = old_key.sign(unsigned())
    new_receipt = new_key.sign(unsigned(index=42))
    published = Jwks.from_keys([new_key, old_key])
    published.verify(old_receipt)
    published.verify(new_receipt)
    # the set as a client would fetch it: round trip through its JSON form
    fetched = Jwks(published.to_json())
    fetched.verify(old_receipt)
    fetched.verify(new_receipt)
    # a set that dropped the old key no longer vouches for the old receipt
    only_new = Jwks.from_keys([new_key])
    assert _reason(only_new, old_receipt) == "unknown_kid"
    only_new.verify(new_receipt)


# --- JWKS parsing ------------------------------------------------------------------------


def test_jwks_skips_other_key_types() -> None:
    jwks = Jwks(
        {
            "keys": [
                {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "rsa"},
                {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"},
                {"kty": "OKP", "crv": "X25519", "x": RFC8037_X},
                {"kty": "OKP", "crv": "Ed448", "x": "AA"},
                {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X, "kid": RFC8037_KID},
            ]
        }
    )
    assert jwks.kids == [RFC8037_KID]
    assert RFC8037_KID in jwks
    assert len(jwks) == 1
    assert jwks.to_json() == {"keys": [RFC_KEY.public_jwk()]}


def test_jwks_kid_optional_but_must_be_the_thumbprint() -> None:
    assert Jwks({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X}]}).kids == [RFC8037_KID]
    with pytest.raises(JwksError, match="thumbprint"):
        Jwks({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X, "kid": OTHER_KEY.kid}]})


@pytest.mark.parametrize(
    "jwk",
    [
        {"kty": "OKP", "crv": "Ed25519"},
        {"kty": "OKP", "crv": "Ed25519", "x": 5},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X + "="},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X[:-1]},
        {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(bytes(31))},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X, "d": RFC8037_D},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X, "alg": "ES256"},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X, "use": "enc"},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X, "key_ops": ["sign"]},
    ],
)
def test_jwks_refuses_malformed_ed25519_keys(jwk: dict[str, object]) -> None:
    with pytest.raises(JwksError):
        Jwks({"keys": [jwk]})


@pytest.mark.parametrize("doc", [{}, {"keys": {}}, {"keys": ["x"]}, [], None])
def test_jwks_refuses_malformed_documents(doc: Any) -> None:
    with pytest.raises(JwksError):
        Jwks(doc)


# --- shape ------------------------------------------------------------------------------


def test_validate_receipt_shape_accepts_full_receipts() -> None:
    receipt = _signed()
    validate_receipt_shape(receipt)
    validate_receipt_shape(dict(receipt, proof="text"))
    validate_receipt_shape(unsigned())


def _with(path: str, value: object) -> dict[str, Any]:
    receipt: dict[str, Any] = _signed()
    target = receipt
    *parents, leaf = path.split(".")
    for p in parents:
        target = target[p]
    if value is ...:
        del target[leaf]
    else:
        target[leaf] = value
    return receipt


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("extra", 1),
        ("spec", ...),
        ("ledger", ...),
        ("spec", "rs-tool-call/2"),
        ("id", "tc_nope"),
        ("id", "TC_AAECAwQFBgcICQoLDA0ODw"),
        ("server", ""),
        ("tool", None),
        ("call_sha256", DIGEST_HEX.upper()),
        ("call_sha256", DIGEST_HEX[:-1]),
        ("issued_at", "2026-11-29T20:49:44.123+00:00"),
        ("issued_at", 1764449384),
        ("ledger", []),
        ("ledger.extra", 1),
        ("ledger.origin", ...),
        ("ledger.origin", ""),
        ("ledger.entry_url", None),
        ("ledger.index", -1),
        ("ledger.index", True),
        ("ledger.index", 1.0),
        ("ledger.index", "41"),
        ("ledger.index", 2**53),
        ("proof", 5),
        ("signature", "sig"),
        ("signature.kid", ...),
        ("signature.extra", "x"),
        ("signature.sig", 5),
    ],
)
def test_validate_receipt_shape_refusals(path: str, value: object) -> None:
    with pytest.raises(ReceiptFormatError):
        validate_receipt_shape(_with(path, value))


def test_validate_receipt_shape_refuses_non_objects() -> None:
    with pytest.raises(ReceiptFormatError):
        validate_receipt_shape([])  # type: ignore[arg-type]


def test_build_receipt_refuses_bad_values() -> None:
    with pytest.raises(ReceiptFormatError):
        unsigned(call_sha256_hex="xyz")
    with pytest.raises(ReceiptFormatError):
        unsigned(index=-5)


# --- properties ----------------------------------------------------------------------------

_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=64)
receipts = st.builds(
    build_receipt,
    id=st.binary(min_size=16, max_size=16).map(lambda b: "tc_" + b64url_encode(b)),
    server=_names,
    tool=_names,
    call_sha256_hex=st.binary(min_size=32, max_size=32).map(bytes.hex),
    issued_at=st.datetimes(timezones=st.just(UTC)).map(format_issued_at),
    origin=_names,
    index=st.integers(0, 2**53 - 1),
    entry_url=_names,
)


KEYS = [RFC_KEY, OTHER_KEY]


@given(receipts, st.sampled_from(KEYS))
def test_sign_verify_round_trip(receipt: dict[str, object], key: ReceiptKey) -> None:
    signed = key.sign(receipt)
    validate_receipt_shape(signed)
    Jwks.from_keys(KEYS).verify(signed)
    # the leaf is rebuilt from the receipt alone
    entry = LogEntry.from_receipt(signed)
    assert entry.call_sha256.hex() == receipt["call_sha256"]
    assert entry.id == receipt["id"]


@given(receipts, st.sampled_from(["spec", "id", "server", "tool", "call_sha256", "issued_at"]))
def test_any_top_level_change_breaks_the_signature(receipt: dict[str, object], key: str) -> None:
    signed = RFC_KEY.sign(receipt)
    signed[key] = str(signed[key]) + "x"
    with pytest.raises(ReceiptSignatureError) as info:
        Jwks.from_keys(KEYS).verify(signed)
    assert info.value.reason == "bad_signature"


# --- the typed Receipt ---------------------------------------------------------------------


@given(receipts, st.sampled_from(KEYS), st.one_of(st.none(), st.text(max_size=40)))
def test_typed_receipt_round_trips_the_signed_json(receipt: dict[str, object], key: ReceiptKey,
                                                   proof: str | None) -> None:
    signed = key.sign(receipt)
    if proof is not None:
        signed["proof"] = proof
    typed = Receipt.from_json(signed)
    assert typed.to_json() == signed  # member for member, in the notary's order
    assert list(typed.to_json()) == list(signed)
    assert typed.signed_bytes() == signed_bytes(signed) == signed_bytes(typed)
    Jwks.from_keys(KEYS).verify(typed)
    # Signing the typed form gives the very same signature (Ed25519 is deterministic).
    again = key.sign_receipt(Receipt.from_json(receipt))
    assert again.signature == typed.signature
    assert typed.entry() == LogEntry.from_receipt(signed)
    assert typed.with_proof(None).without_proof() == typed.without_proof()


def test_typed_receipt_refuses_what_validate_refuses() -> None:
    good = _signed()
    Receipt.from_json(good)
    for path, value in (("ledger.index", -1), ("call_sha256", "A" * 64), ("extra", 1),
                        ("signature.alg", 5), ("ledger.entry_url", ...)):
        with pytest.raises(ReceiptFormatError):
            Receipt.from_json(_with(path, value))
    with pytest.raises(ReceiptFormatError):
        Receipt.from_json([good])


def test_typed_receipt_signature_checks() -> None:
    typed = Receipt.from_json(_signed())
    jwks = Jwks.from_keys([RFC_KEY])
    jwks.verify(typed)
    assert _reason(jwks, dataclasses.replace(typed, signature=None)) == "missing"
    tampered = Receipt.from_json({**_signed(), "tool": "other"})
    assert _reason(jwks, tampered) == "bad_signature"
    assert _reason(Jwks.from_keys([OTHER_KEY]), typed) == "unknown_kid"
    raw = typed.signature.raw if typed.signature else b""
    assert len(raw) == 64 and ReceiptSignature.from_raw(RFC8037_KID, raw) == typed.signature
    with pytest.raises(ReceiptFormatError):
        ReceiptSignature.from_raw(RFC8037_KID, raw[:63])


# --- the issuing fast paths ----------------------------------------------------------------

_any_text = st.text(min_size=1, max_size=40).filter(lambda s: not any(
    0xD800 <= ord(c) <= 0xDFFF for c in s))


@given(server=_any_text, tool=_any_text, origin=_any_text, url=_any_text,
       index=st.integers(0, 2**53 - 1), kid=_any_text, sig=_any_text,
       proof=st.none() | st.text(max_size=80), signed=st.booleans())
def test_to_json_bytes_is_json_dumps_of_to_json(server: str, tool: str, origin: str, url: str,
                                                index: int, kid: str, sig: str,
                                                proof: str | None, signed: bool) -> None:
    receipt = Receipt(id="tc_AAECAwQFBgcICQoLDA0ODw", server=server, tool=tool,
                      call_sha256="ab" * 32, issued_at="2026-11-29T20:49:44.123Z",
                      origin=origin, index=index, entry_url=url,
                      signature=ReceiptSignature(kid, sig) if signed else None, proof=proof)
    expected = json.dumps(receipt.to_json(), separators=(",", ":")).encode()
    assert receipt.to_json_bytes() == expected


def _entry() -> LogEntry:
    return LogEntry(id="tc_AAECAwQFBgcICQoLDA0ODw", server="srv", tool="tool",
                    call_sha256=bytes(32), issued_at="2026-11-29T20:49:44.123Z")


def test_for_entry_is_the_validated_receipt_of_the_entry() -> None:
    receipt = Receipt.for_entry(_entry(), origin="log.example", index=7,
                                entry_url="https://n.example/v1/ledger/entries/7")
    validate_receipt_shape(receipt.unsigned_json())
    assert receipt.unsigned_json() == build_receipt(
        id="tc_AAECAwQFBgcICQoLDA0ODw", server="srv", tool="tool", call_sha256_hex="00" * 32,
        issued_at="2026-11-29T20:49:44.123Z", origin="log.example", index=7,
        entry_url="https://n.example/v1/ledger/entries/7")
    assert receipt.entry() == _entry()


@pytest.mark.parametrize("ledger", [
    {"origin": "", "index": 0, "entry_url": "u"},
    {"origin": "o", "index": 0, "entry_url": ""},
    {"origin": 1, "index": 0, "entry_url": "u"},
    {"origin": "o", "index": -1, "entry_url": "u"},
    {"origin": "o", "index": 2**53, "entry_url": "u"},
    {"origin": "o", "index": True, "entry_url": "u"},
    {"origin": "o", "index": 1.0, "entry_url": "u"},
])
def test_for_entry_still_checks_the_ledger_members(ledger: dict[str, Any]) -> None:
    with pytest.raises(ReceiptFormatError):
        Receipt.for_entry(_entry(), **ledger)
    with pytest.raises(ReceiptFormatError):  # the same rules as the full shape check
        validate_receipt_shape({**_entry().to_map(), "call_sha256": "00" * 32,
                                "ledger": ledger})


def test_for_entry_needs_a_log_entry() -> None:
    with pytest.raises(ReceiptFormatError):
        Receipt.for_entry(_entry().to_map(), origin="o", index=0,  # type: ignore[arg-type]
                          entry_url="u")


def test_a_fresh_signature_keeps_its_bytes_and_a_parsed_one_decodes_them() -> None:
    key = ReceiptKey.generate()
    unsigned = Receipt.for_entry(_entry(), origin="o", index=1, entry_url="u/1")
    signed = key.sign_receipt(unsigned)
    assert signed.signature is not None
    parsed = Receipt.from_json(signed.to_json())
    assert parsed == signed  # the kept bytes are not part of the value
    assert parsed.signature is not None and parsed.signature.known_raw is None
    assert signed.signature.raw == parsed.signature.raw == b64url_decode(signed.signature.sig)
    Jwks.from_keys([key]).verify(parsed)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(max_size=600))
def test_receipt_keys_sign_exactly_as_pynacl(seed: bytes, message: bytes) -> None:
    """Receipt keys sign through libsodium's binding: exactly PyNaCl's detached signature."""
    assert ReceiptKey.from_seed(seed)._sign(message) == (
        nacl.signing.SigningKey(seed).sign(message).signature)


_entries = st.builds(
    LogEntry,
    id=st.binary(min_size=16, max_size=16).map(lambda b: "tc_" + b64url_encode(b)),
    server=_names, tool=_names,
    call_sha256=st.binary(min_size=32, max_size=32),
    issued_at=st.datetimes(timezones=st.just(UTC)).map(format_issued_at))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**53 - 1), _entries), max_size=6), _names,
       st.sampled_from(["https://n.example/v1/ledger/entries/", "", "u\"\\é/",
                        "https://n.example/log/1/v1/ledger/entries/"]),
       st.sampled_from(KEYS))
def test_sign_entries_is_for_entry_then_sign_receipt(
        entries: list[tuple[int, LogEntry]], origin: str, prefix: str, key: ReceiptKey) -> None:
    # The issuing hook's one pass (Notary.hook): the same receipts, signature bytes included,
    # as building each unsigned receipt and signing it, for names that need escaping too.
    got = key.sign_entries(entries, origin=origin, url_prefix=prefix)
    want = [key.sign_receipt(Receipt.for_entry(e, origin=origin, index=i,
                                               entry_url=f"{prefix}{i}")) for i, e in entries]
    assert got == want
    for g, w in zip(got, want, strict=True):
        assert g.signature is not None and w.signature is not None
        assert g.signature.known_raw == w.signature.known_raw == b64url_decode(g.signature.sig)
        assert g.proof is None
        Jwks.from_keys([key]).verify(g)
        assert g.to_json_bytes() == w.to_json_bytes()


@pytest.mark.parametrize(("entries", "ledger"), [
    ([(0, "not an entry")], {"origin": "o", "url_prefix": "u/"}),
    ([(-1, None)], {"origin": "o", "url_prefix": "u/"}),
    ([(2**53, None)], {"origin": "o", "url_prefix": "u/"}),
    ([(True, None)], {"origin": "o", "url_prefix": "u/"}),
    ([(0, None)], {"origin": "", "url_prefix": "u/"}),
    ([(0, None)], {"origin": 1, "url_prefix": "u/"}),
])
def test_sign_entries_checks_what_for_entry_checks(entries: list[tuple[Any, Any]],
                                                   ledger: dict[str, Any]) -> None:
    with pytest.raises(ReceiptFormatError):
        ReceiptKey.generate().sign_entries(
            [(i, _entry() if e is None else e) for i, e in entries], **ledger)
