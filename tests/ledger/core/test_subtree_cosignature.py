"""ML-DSA-44 subtree/v1 signatures (ledger.core.subtree_cosignature), cross-checked against
dilithium-py, an independent pure-Python FIPS 204 implementation: the same seed gives the same
public key, each side verifies the other's signatures over the same ``cosigned_message``, and the
message layout is rebuilt here field by field from the spec's struct."""

from __future__ import annotations

import base64
import hashlib

import pytest
from dilithium_py.ml_dsa import ML_DSA_44

from ledger.core.checkpoint import Checkpoint
from ledger.core.cosignature import parse_verifier_key
from ledger.core.note import (
    Ed25519Signer,
    InvalidSignatureError,
    NoteError,
    NoteSignature,
    add_signatures,
    merge_signatures,
    open_note,
    sign_note,
)
from ledger.core.subtree_cosignature import (
    SUBTREE_SIGNATURE_SIZE,
    SubtreeCosignatureSigner,
    SubtreeCosignatureVerifier,
    subtree_message,
)

SEED = bytes(range(32))
ROOT = hashlib.sha256(b"root").digest()


def spec_message(name: str, ts: int, origin: str, start: int, end: int, root: bytes) -> bytes:
    """cosigned_message written out from tlog-cosignature's struct, independently of the module."""
    return (b"subtree/v1\n\x00" + len(name).to_bytes(1, "big") + name.encode()
            + ts.to_bytes(8, "big") + len(origin).to_bytes(1, "big") + origin.encode()
            + start.to_bytes(8, "big") + end.to_bytes(8, "big") + root)


def checkpoint_text(origin: str = "example.com/log", size: int = 7) -> str:
    return Checkpoint(origin, size, ROOT).text()


def test_message_layout_is_the_specs_struct() -> None:
    assert subtree_message("w.example/1", 1700000000, "example.com/log", 0, 7, ROOT) == (
        spec_message("w.example/1", 1700000000, "example.com/log", 0, 7, ROOT))
    assert subtree_message("w", 0, "o", 4, 8, ROOT) == spec_message("w", 0, "o", 4, 8, ROOT)


@pytest.mark.parametrize(("args", "match"), [
    (("w", 5, "o", 4, 8, ROOT), "timestamp 0"),
    (("w", 0, "o", 1, 3, ROOT), "not a valid subtree"),
    (("w", 1 << 63, "o", 0, 3, ROOT), "2\\^63"),
    (("", 0, "o", 0, 3, ROOT), "1 to 255"),
    (("w", 0, "o" * 256, 0, 3, ROOT), "1 to 255"),
    (("w", 0, "o", 0, 3, b"short"), "32 bytes"),
    (("w", 0, "o", 0, 1 << 64, ROOT), "0..2\\^64-1"),
])
def test_message_refuses_what_the_spec_forbids(args: tuple, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(NoteError, match=match):
        subtree_message(*args)


def test_same_seed_same_public_key_as_dilithium_py() -> None:
    signer = SubtreeCosignatureSigner("w.example/1", SEED)
    pk, _ = ML_DSA_44.key_derive(SEED)
    assert signer.public_key == pk


def test_each_implementation_verifies_the_others_signatures() -> None:
    signer = SubtreeCosignatureSigner("w.example/1", SEED)
    verifier = signer.verifier()
    pk, sk = ML_DSA_44.key_derive(SEED)
    text = checkpoint_text()
    ours = signer.cosign(text, 1700000000)
    message = spec_message("w.example/1", 1700000000, "example.com/log", 0, 7, ROOT)
    assert len(ours.signature) == SUBTREE_SIGNATURE_SIZE
    assert ours.signature[:8] == (1700000000).to_bytes(8, "big")
    assert ML_DSA_44.verify(pk, message, ours.signature[8:], ctx=b"")
    assert not ML_DSA_44.verify(pk, message, ours.signature[8:], ctx=b"x")  # empty context
    theirs = (1700000000).to_bytes(8, "big") + ML_DSA_44.sign(sk, message, ctx=b"")
    assert verifier.verify(text.encode(), theirs)
    assert verifier.verify_subtree("example.com/log", 0, 7, ROOT, theirs)
    sub = signer.sign_subtree("example.com/log", 4, 6, ROOT)
    assert sub.signature[:8] == bytes(8)
    assert ML_DSA_44.verify(pk, spec_message("w.example/1", 0, "example.com/log", 4, 6, ROOT),
                            sub.signature[8:])


def test_key_texts_round_trip_and_key_id_is_the_specs() -> None:
    signer = SubtreeCosignatureSigner("w.example/1", SEED)
    want_id = hashlib.sha256(b"w.example/1\n\x06" + signer.public_key).digest()[:4]
    assert signer.key_id == int.from_bytes(want_id, "big")
    vkey = signer.verifier_key_text()
    name, hex_id, b64 = vkey.split("+", 2)
    assert (name, hex_id) == ("w.example/1", want_id.hex())
    assert base64.b64decode(b64) == b"\x06" + signer.public_key
    assert vkey.endswith("=") or len(b64) % 4 == 0
    assert SubtreeCosignatureVerifier.from_vkey(vkey) == signer.verifier()
    assert parse_verifier_key(vkey) == signer.verifier()
    again = SubtreeCosignatureSigner.from_private_key(signer.private_key_text())
    assert again.public_key == signer.public_key and again.key_id == signer.key_id
    assert "PRIVATE" not in repr(signer) and SEED.hex() not in repr(signer)
    ed = Ed25519Signer("w.example/1", SEED)
    with pytest.raises(NoteError, match="not an ML-DSA-44"):
        SubtreeCosignatureSigner.from_private_key(ed.private_key_text())
    with pytest.raises(NoteError, match="not an ML-DSA-44"):
        SubtreeCosignatureVerifier.from_vkey(ed.verifier_key_text())


def test_a_dual_signed_checkpoint_opens_with_either_key() -> None:
    """The log's two lines: Ed25519 (0x01) and ML-DSA-44 (0x06), both named for the origin."""
    origin = "example.com/log"
    ed = Ed25519Signer(origin, SEED)
    pq = SubtreeCosignatureSigner(origin, SEED)
    text = checkpoint_text(origin)
    note = merge_signatures(sign_note(text, ed), [pq.cosign(text, 1700000000)])
    _, verified = open_note(note, [ed.verifier()])
    assert [s.key_id for s in verified] == [ed.key_id]
    _, verified = open_note(note, [pq.verifier()])
    assert [s.key_id for s in verified] == [pq.key_id]
    _, verified = open_note(note, [ed.verifier(), pq.verifier()])
    assert len(verified) == 2


def test_tampered_signatures_fail() -> None:
    signer = SubtreeCosignatureSigner("w.example/1", SEED)
    verifier = signer.verifier()
    text = checkpoint_text()
    good = signer.cosign(text, 1700000000)
    assert verifier.verify(text.encode(), good.signature)
    flipped = bytearray(good.signature)
    flipped[100] ^= 1
    later = (1700000001).to_bytes(8, "big") + good.signature[8:]
    for bad in (bytes(flipped), later, good.signature[:-1], good.signature + b"\0", b""):
        assert not verifier.verify(text.encode(), bad)
    assert not verifier.verify(checkpoint_text(size=8).encode(), good.signature)
    assert not verifier.verify(b"not a checkpoint", good.signature)
    other = SubtreeCosignatureSigner("w.example/2", SEED).verifier()
    assert not other.verify(text.encode(), good.signature)  # the name is signed
    forged = NoteSignature(good.name, good.key_id, bytes(flipped))
    with pytest.raises(InvalidSignatureError):
        open_note(merge_signatures(add_signatures(sign_note(text, Ed25519Signer("x", SEED))),
                                   [forged]), [verifier])


def test_signing_is_refused_for_a_non_checkpoint() -> None:
    with pytest.raises(NoteError):
        SubtreeCosignatureSigner("w", SEED).cosign("just text\n", 1)


def test_the_logs_key_is_derived_from_its_ed25519_seed() -> None:
    ed = Ed25519Signer("example.com/log", SEED)
    pq = SubtreeCosignatureSigner.derived_from(ed)
    again = SubtreeCosignatureSigner.derived_from(Ed25519Signer("example.com/log", SEED))
    assert pq.name == "example.com/log" and pq.public_key == again.public_key
    label = b"rs-notary log key: ML-DSA-44 subtree/v1 seed from the Ed25519 seed\n"
    want, _ = ML_DSA_44.key_derive(hashlib.sha256(label + SEED).digest())
    assert pq.public_key == want
    other = SubtreeCosignatureSigner.derived_from(Ed25519Signer("example.com/log", bytes(32)))
    assert other.public_key != pq.public_key
    assert pq.public_key != SubtreeCosignatureSigner("example.com/log", SEED).public_key
