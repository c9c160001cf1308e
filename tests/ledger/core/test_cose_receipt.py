"""RFC 9942 COSE receipts (ledger/core/cose_receipt.py): ours round-trip, independent verifiers
(scitt-cose, pycose) accept ours, ours accepts scitt-cose's, and a changed byte fails in all."""

from __future__ import annotations

import cbor2
import pytest
import scitt_cose
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pycose.keys import OKPKey
from pycose.keys.curves import Ed25519
from pycose.messages import Sign1Message
from scitt_cose import merkle as scitt_merkle

from ledger.core.cose_receipt import (
    ALG_EDDSA,
    ALG_ML_DSA_44,
    CoseKey,
    CoseReceiptError,
    CoseSigner,
    cose_key_set,
    encode_receipt,
    parse_receipt,
    sig_structure,
    sign_root,
    verify_receipt,
)
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.note import Ed25519Signer
from ledger.core.proofs import inclusion_plan
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner

ORIGIN = "notary.example/log"
SEED = bytes(range(32))
ENTRIES = [f"entry {i}".encode() for i in range(9)]
LOG = Ed25519Signer(ORIGIN, SEED)
SIGNER = CoseSigner.ed25519(LOG)


def _path(index: int, size: int) -> list[bytes]:
    leaves = [leaf_hash(e) for e in ENTRIES[:size]]
    return [merkle_root(leaves[a:b]) for a, b in inclusion_plan(index, size)]


def _root(size: int) -> bytes:
    return merkle_root([leaf_hash(e) for e in ENTRIES[:size]])


def _receipt(index: int, size: int, signer: CoseSigner = SIGNER) -> bytes:
    signed = sign_root(signer, issuer=ORIGIN, tree_size=size, root=_root(size), iat=1_800_000_000)
    return encode_receipt(signed, index, _path(index, size))


def _pem() -> bytes:
    key = Ed25519PrivateKey.from_private_bytes(SEED)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def _plain(value: object) -> object:
    """cbor2 ≥ 6 decodes arrays as tuples and maps as frozendicts; pycose 1.1 wants lists and
    dicts (its open bug: CoseMessage.decode refuses every message under cbor2 6)."""
    if isinstance(value, bytes | str):
        return value
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}  # type: ignore[attr-defined]
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def pycose_verifies(data: bytes, entry: bytes) -> bool:
    """pycose checks the COSE_Sign1 over the root that scitt-cose's Merkle code rebuilds from
    the receipt's proof: no line of ours between them."""
    try:
        tag = cbor2.loads(data)
        if tag.tag != 18:  # what CoseMessage.decode dispatches on
            return False
        message = Sign1Message.from_cose_obj(_plain(tag.value), True)
        size, index, path = cbor2.loads(message.uhdr[396][-1][0])
        root = scitt_merkle.root_from_inclusion_proof(entry.hex(), index, size,
                                                      [h.hex() for h in path])
        if root is None:
            return False
        message.key = OKPKey(crv=Ed25519, x=LOG.public_key)
        return bool(message.verify_signature(detached_payload=bytes.fromhex(root)))
    except Exception:  # pycose raises many types on malformed input: all mean "not verified"
        return False


def scitt_verifies(data: bytes, entry: bytes) -> bool:
    return scitt_cose.verify_receipt(data, leaf_entry_hex=entry.hex(),
                                     log_public_key_pem=_pem()).ok


def ours_verifies(data: bytes, entry: bytes) -> bool:
    try:
        verify_receipt(data, entry=entry, keys=[SIGNER.key])
    except CoseReceiptError:
        return False
    return True


@pytest.mark.parametrize("size", range(1, len(ENTRIES) + 1))
def test_every_leaf_of_every_size_verifies_in_all_three(size: int) -> None:
    for index in range(size):
        data = _receipt(index, size)
        receipt, root = verify_receipt(data, entry=ENTRIES[index], keys=[SIGNER.key])
        assert (receipt.tree_size, receipt.leaf_index, root) == (size, index, _root(size))
        assert receipt.issuer == ORIGIN and receipt.iat == 1_800_000_000
        assert receipt.kid == SIGNER.key.kid and receipt.alg == ALG_EDDSA
        assert scitt_verifies(data, ENTRIES[index])
        assert pycose_verifies(data, ENTRIES[index])
        # Another entry at that index does not verify.
        assert not ours_verifies(data, b"another entry")
        assert not scitt_verifies(data, b"another entry")


def test_one_leaf_tree_has_an_empty_path_and_verifies() -> None:
    receipt = parse_receipt(_receipt(0, 1))
    assert receipt.path == ()
    assert ours_verifies(_receipt(0, 1), ENTRIES[0])


def test_our_receipts_are_deterministic_cbor() -> None:
    data = _receipt(3, 7)
    assert cbor2.dumps(cbor2.loads(data), canonical=True) == data
    assert data == _receipt(3, 7)  # Ed25519 is deterministic: the same receipt every time


@pytest.mark.parametrize("size", [1, 2, 5, 8])
def test_we_verify_receipts_built_by_scitt_cose(size: int) -> None:
    pem = Ed25519PrivateKey.from_private_bytes(SEED).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    for index in range(size):
        theirs = scitt_cose.build_receipt(
            leaf_entry_hex=ENTRIES[index].hex(), leaf_index=index,
            tree_entries_hex=[e.hex() for e in ENTRIES[:size]], alg="EdDSA",
            log_private_key_pem=pem, iss=ORIGIN, kid=SIGNER.key.kid, iat=1)
        receipt, root = verify_receipt(theirs, entry=ENTRIES[index], keys=[SIGNER.key])
        assert (receipt.tree_size, receipt.leaf_index, receipt.issuer) == (size, index, ORIGIN)
        assert root == _root(size)
        assert not ours_verifies(theirs, ENTRIES[(index + 1) % len(ENTRIES)])


def test_a_changed_byte_anywhere_fails_in_every_verifier() -> None:
    data = _receipt(5, 7)
    assert pycose_verifies(data, ENTRIES[5])
    for i in range(len(data)):
        for flip in (0x01, 0x80):
            bad = bytearray(data)
            bad[i] ^= flip
            tampered = bytes(bad)
            assert not ours_verifies(tampered, ENTRIES[5]), (i, flip)
            assert not scitt_verifies(tampered, ENTRIES[5]), (i, flip)
            assert not pycose_verifies(tampered, ENTRIES[5]), (i, flip)


def test_ml_dsa_44_receipts_verify() -> None:
    pq = CoseSigner.ml_dsa_44(SubtreeCosignatureSigner.derived_from(LOG))
    data = _receipt(2, 6, pq)
    receipt, root = verify_receipt(data, entry=ENTRIES[2], keys=[SIGNER.key, pq.key])
    assert receipt.alg == ALG_ML_DSA_44 and root == _root(6)
    with pytest.raises(CoseReceiptError, match="no trusted ML-DSA-44 key"):
        verify_receipt(data, entry=ENTRIES[2], keys=[SIGNER.key])


def test_kid_is_the_rfc9679_thumbprint() -> None:
    # RFC 9679 §4: OKP thumbprint input is {1: 1, -1: 6, -2: x} in deterministic encoding.
    import hashlib
    expected = hashlib.sha256(b"\xa3\x01\x01\x20\x06\x21\x58\x20" + LOG.public_key).digest()
    assert SIGNER.key.kid == expected
    keys = cbor2.loads(cose_key_set([SIGNER.key]))
    assert keys == [{1: 1, 2: expected, 3: -8, -1: 6, -2: LOG.public_key}]


def _rebuild(data: bytes, *, protected: object = None, unprotected: object = None,
             payload: object = None, signature: object = None) -> bytes:
    p, u, _, s = cbor2.loads(data).value
    return cbor2.dumps(cbor2.CBORTag(18, [p if protected is None else protected,
                                          _plain(u) if unprotected is None else unprotected,
                                          payload, s if signature is None else signature]))


@pytest.mark.parametrize("change, message", [
    (lambda d: d + b"\x00", "bytes after it"),
    (lambda d: _rebuild(d, payload=b"\x00" * 32), "detached"),
    (lambda d: _rebuild(d, unprotected={396: {-1: []}}), "exactly one inclusion proof"),
    (lambda d: _rebuild(d, unprotected={396: {-1: [cbor2.dumps([7, 5, []])]}}),
     "needs 3"),
    (lambda d: _rebuild(d, unprotected={396: {-1: [cbor2.dumps([5, 5, []])]}}),
     "below its tree_size"),
    (lambda d: _rebuild(d, protected=cbor2.dumps({1: -8, 395: 2})), "vds"),
    (lambda d: _rebuild(d, protected=cbor2.dumps({1: -7, 395: 1})), "alg"),
    (lambda d: _rebuild(d, protected=cbor2.dumps({1: -8, 2: [99], 99: 0, 395: 1})), "crit"),
    (lambda d: _rebuild(d, signature=b"\x00" * 63), "64 bytes"),
    (lambda d: cbor2.dumps(cbor2.CBORTag(17, list(cbor2.loads(d).value))), "tag 18"),
    (lambda d: b"\x9f" + d[1:], "well-formed"),
])
def test_malformed_receipts_are_refused_with_a_reason(change: object, message: str) -> None:
    assert callable(change)
    with pytest.raises(CoseReceiptError, match=message):
        parse_receipt(change(_receipt(5, 7)))


def test_a_non_minimal_encoding_is_refused() -> None:
    data = _receipt(5, 7)
    # The signature's length head (0x58 0x40) written in two bytes instead of one.
    padded = data.replace(b"\x58\x40", b"\x59\x00\x40")
    with pytest.raises(CoseReceiptError, match="minimal"):
        parse_receipt(padded)


def test_no_kid_needs_exactly_one_key_of_the_algorithm() -> None:
    p = cbor2.dumps({1: -8, 395: 1}, canonical=True)
    signed = sign_root(SIGNER, issuer=ORIGIN, tree_size=3, root=_root(3), iat=None)
    data = _rebuild(encode_receipt(signed, 1, _path(1, 3)), protected=p,
                    signature=LOG.sign(sig_structure(p, _root(3))))
    assert ours_verifies(data, ENTRIES[1])
    other = CoseKey(ALG_EDDSA, Ed25519Signer.generate(ORIGIN).public_key)
    with pytest.raises(CoseReceiptError, match="names no kid"):
        verify_receipt(data, entry=ENTRIES[1], keys=[SIGNER.key, other])


def _nested(levels: int) -> object:
    """``levels`` arrays, one in another, around a 0."""
    value: object = 0
    for _ in range(levels):
        value = [value]
    return value


def _protected(extra: dict[object, object]) -> bytes:
    return cbor2.dumps({1: -8, 395: 1, **extra})


@pytest.mark.parametrize("protected, message", [
    (_protected({99: 1.5}), "float"),
    (_protected({99: cbor2.undefined}), "UndefinedType"),
    (_protected({99: cbor2.CBORSimpleValue(16)}), "CBORSimpleValue"),
    (_protected({99: cbor2.CBORTag(24, b"\x01")}), "CBORTag"),
    (_protected({99: 2**64}), "bignum"),  # cbor2 reads tag 2 as an int
    (_protected({99: -(2**64) - 1}), "bignum"),
    (_protected({99: {True: 0}}), "map key"),
    (_protected({99: {b"k": 0}}), "map key"),
    (_protected({2: [{}], 99: 0}), "crit"),  # an unhashable crit entry once raised TypeError
    (_protected({2: [True]}), "crit"),  # True is not the label 1
    (cbor2.dumps({1: {}, 395: 1}), "alg"),  # an unhashable alg raised TypeError
    (cbor2.dumps({1: [-8], 395: 1}), "alg"),
    (_protected({99: _nested(15)}), "deeper"),
])
def test_what_no_receipt_of_ours_holds_is_refused(protected: bytes, message: str) -> None:
    """One grammar for both verifiers (js/src/cose.js reads the same): plain types only."""
    with pytest.raises(CoseReceiptError, match=message):
        parse_receipt(_rebuild(_receipt(5, 7), protected=protected))


def test_the_deepest_nesting_allowed_is_read() -> None:
    # the header map is level 1, its value's 14 arrays levels 2 to 15, their 0 level 16
    data = _rebuild(_receipt(5, 7), protected=_protected({99: _nested(14)}))
    assert parse_receipt(data).tree_size == 7


def test_eddsa_follows_libsodium_as_every_verifier_of_ours() -> None:
    """A signature by the log's own key with the identity as R verifies under OpenSSL's rules,
    not libsodium's (nor the JavaScript verifier's): refused, so no receipt has two verdicts."""
    import hashlib
    order = 2**252 + 27742317777372353535851937790883648493
    digest = hashlib.sha512(SEED).digest()
    a = (int.from_bytes(digest[:32], "little") & ((1 << 254) - 8)) | (1 << 254)
    protected = cbor2.loads(_receipt(5, 7)).value[0]
    message = sig_structure(protected, _root(7))
    r_point = (1).to_bytes(32, "little")
    k = int.from_bytes(hashlib.sha512(r_point + LOG.public_key + message).digest(), "little")
    forged = r_point + (k * a % order).to_bytes(32, "little")
    Ed25519PrivateKey.from_private_bytes(SEED).public_key().verify(forged, message)  # OpenSSL: ok
    with pytest.raises(CoseReceiptError, match="signature does not verify"):
        verify_receipt(_rebuild(_receipt(5, 7), signature=forged), entry=ENTRIES[5],
                       keys=[SIGNER.key])
