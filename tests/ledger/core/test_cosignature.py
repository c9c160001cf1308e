"""Tests of ledger.core.cosignature: Ed25519 cosignature/v1 (tlog-cosignature, key type 0x04)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.cosignature import (
    COSIGNATURE_SIZE,
    MAX_TIMESTAMP,
    CosignatureSigner,
    CosignatureVerifier,
    cosignature_timestamp,
    cosigned_message,
    parse_verifier_key,
)
from ledger.core.note import (
    KEY_TYPE_COSIGNATURE_V1,
    KEY_TYPE_ED25519,
    Ed25519Signer,
    Ed25519Verifier,
    Note,
    NoteError,
    NoteSignature,
    UnverifiedNoteError,
    format_note,
    key_id,
    open_note,
    parse_note,
)

# The checkpoint text of the c2sp.org/tlog-cosignature example.
SPEC_TEXT = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"

# A real checkpoint of the public log arche2025h1.staging.ct.transparency.dev and the
# cosignature on it by the public witness remora.n621.de, with that witness's published key.
REAL_TEXT = (
    "arche2025h1.staging.ct.transparency.dev\n1432088532\n"
    "U7WM79jrzyhGZ5/GUBTpM7NzwdyfFx61t3RovgcC4Ro=\n"
)
REMORA_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
REMORA_LINE = (
    "— remora.n621.de 2net5wAAAABqEiEgPlfF3V06o0Y+fHM+J5J9s27wgxxcOVSpZ/2g/KSiXCg9DEZI+aVCIobWX9"
    "sXTynk5XeU/zZ0WBxtqB0DrAWfBw==\n"
)
REMORA_TIMESTAMP = 1779573024

# A cosignature/v1 signature field and its timestamp, and a plain Ed25519 signature, from the
# tests of github.com/transparency-dev/formats (note/note_cosigv1_test.go, TestCoSigV1Timestamp).
FORMATS_COSIG_B64 = (
    "ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFiEBY"
    "JXORmnFBOBA=="
)
FORMATS_COSIG_TIME = 1727964367
FORMATS_PLAIN_B64 = (
    "eQjRQm6eSKzFoiYalgwCPXu2y3ijtg68is9M46JKxuZB+dRfTmeQeDBoXnvxZx2ugnkyV+MUMLXpWs1hPb/W/4xkNQY="
)

# Go's golang.org/x/mod/sumdb/note test key (note_test.go), a plain Ed25519 (0x01) key.
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"

TS = 1_700_000_000

_NAME_CHARS = st.characters(
    exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), exclude_characters="+"
)
names = st.text(_NAME_CHARS, min_size=1, max_size=40)


def _sig_from_line(line: str) -> NoteSignature:
    return parse_note(("x\n\n" + line).encode()).signatures[0]


# --- Message format ---------------------------------------------------------------------------


def test_signed_message_matches_spec_example() -> None:
    assert cosigned_message(SPEC_TEXT, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
        b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )
    assert cosigned_message(SPEC_TEXT.encode(), 0).startswith(b"cosignature/v1\ntime 0\n")


@pytest.mark.parametrize("ts", [-1, MAX_TIMESTAMP + 1, 1 << 64])
def test_timestamp_out_of_range(ts: int) -> None:
    with pytest.raises(NoteError):
        cosigned_message(SPEC_TEXT, ts)
    with pytest.raises(NoteError):
        CosignatureSigner.generate("w").cosign(SPEC_TEXT, ts)


# --- Real vectors -----------------------------------------------------------------------------


def test_real_cosignature_verifies() -> None:
    v = CosignatureVerifier.from_vkey(REMORA_VKEY)
    assert v.key_id == 0xDA77ADE7
    assert v.vkey == REMORA_VKEY
    sig = _sig_from_line(REMORA_LINE)
    assert (sig.name, sig.key_id) == (v.name, v.key_id)
    assert len(sig.signature) == COSIGNATURE_SIZE
    assert v.timestamp(sig.signature) == REMORA_TIMESTAMP
    assert cosignature_timestamp(sig) == REMORA_TIMESTAMP
    assert v.verify(REAL_TEXT.encode(), sig.signature)
    _, verified = open_note((REAL_TEXT + "\n" + REMORA_LINE).encode(), [v])
    assert verified == [sig]


def test_real_cosignature_fails_when_anything_changes() -> None:
    v = CosignatureVerifier.from_vkey(REMORA_VKEY)
    sig = _sig_from_line(REMORA_LINE).signature
    assert not v.verify(REAL_TEXT.replace("1432088532", "1432088533").encode(), sig)
    assert not v.verify((REAL_TEXT + "extension\n").encode(), sig)
    later = (REMORA_TIMESTAMP + 1).to_bytes(8, "big") + sig[8:]
    assert not v.verify(REAL_TEXT.encode(), later)
    for i in (0, 7, 8, 40, 71):
        bad = bytearray(sig)
        bad[i] ^= 0x01
        assert not v.verify(REAL_TEXT.encode(), bytes(bad))


def test_formats_timestamp_vector() -> None:
    blob = base64.b64decode(FORMATS_COSIG_B64)
    assert CosignatureVerifier.timestamp(blob[4:]) == FORMATS_COSIG_TIME
    sig = _sig_from_line("— w " + FORMATS_COSIG_B64 + "\n")
    assert cosignature_timestamp(sig) == FORMATS_COSIG_TIME
    plain = _sig_from_line("— w " + FORMATS_PLAIN_B64 + "\n")
    with pytest.raises(NoteError):
        cosignature_timestamp(plain)


# --- Keys -------------------------------------------------------------------------------------


def test_key_texts() -> None:
    s = CosignatureSigner.generate("witness.example/w1")
    assert s.private_key_text().startswith("PRIVATE+KEY+witness.example/w1+")
    blob = base64.b64decode(s.private_key_text().split("+", 4)[4])
    assert blob[0] == KEY_TYPE_COSIGNATURE_V1 and blob[1:] == s.seed
    vblob = base64.b64decode(s.verifier_key_text().split("+", 2)[2])
    assert vblob[0] == KEY_TYPE_COSIGNATURE_V1 and vblob[1:] == s.public_key
    assert s.key_id == key_id(s.name, KEY_TYPE_COSIGNATURE_V1, s.public_key)
    assert s.verifier_key_text().split("+")[1] == f"{s.key_id:08x}"


@settings(max_examples=60, deadline=None)
@given(name=names, seed=st.binary(min_size=32, max_size=32))
def test_key_texts_round_trip(name: str, seed: bytes) -> None:
    s = CosignatureSigner(name, seed)
    s2 = CosignatureSigner.from_private_key(s.private_key_text())
    assert (s2.name, s2.seed, s2.key_id) == (name, seed, s.key_id)
    assert s2.private_key_text() == s.private_key_text()
    v = CosignatureVerifier.from_vkey(s.verifier_key_text())
    assert v == s.verifier()
    assert parse_verifier_key(s.verifier_key_text()) == v


def test_private_key_wrong_id() -> None:
    s = CosignatureSigner.generate("w")
    bad = s.private_key_text().replace(f"+{s.key_id:08x}+", f"+{s.key_id ^ 1:08x}+")
    with pytest.raises(NoteError, match="does not match"):
        CosignatureSigner.from_private_key(bad)


def test_plain_ed25519_private_key_accepted_as_cosigner() -> None:
    # A type-0x01 key (as Go's note.GenerateKey makes) can cosign; the cosigner's key ID is the
    # type-0x04 derivation, not the one in the private key text.
    s = CosignatureSigner.from_private_key(PETER_SKEY)
    plain = Ed25519Signer.from_private_key(PETER_SKEY)
    assert s.public_key == plain.public_key
    assert s.key_id == key_id("PeterNeumann", KEY_TYPE_COSIGNATURE_V1, s.public_key)
    assert s.key_id != 0xC74F20A3
    with pytest.raises(NoteError):  # the 0x01 key ID is checked under type 0x01
        CosignatureSigner.from_private_key(PETER_SKEY.replace("c74f20a3", "c74f20a4"))


def test_key_types_are_not_interchangeable() -> None:
    w = CosignatureSigner.generate("w")
    with pytest.raises(NoteError, match="not Ed25519"):
        Ed25519Verifier.from_vkey(w.verifier_key_text())
    with pytest.raises(NoteError, match="0x04"):
        CosignatureVerifier.from_vkey(PETER_VKEY)
    with pytest.raises(NoteError, match="0x01"):
        Ed25519Signer.from_private_key(w.private_key_text())


def test_parse_verifier_key_dispatch() -> None:
    assert isinstance(parse_verifier_key(PETER_VKEY), Ed25519Verifier)
    assert isinstance(parse_verifier_key(REMORA_VKEY), CosignatureVerifier)
    # An unsupported type byte (0x02, RFC 6962 STH keys) with a correct key ID.
    material = bytes(range(32))
    kid = key_id("n", 0x02, material)
    text = f"n+{kid:08x}+" + base64.b64encode(b"\x02" + material).decode()
    with pytest.raises(NoteError, match="unsupported"):
        parse_verifier_key(text)
    # ML-DSA-44 (0x06) is supported, and its key must be 1,312 bytes.
    kid = key_id("n", 0x06, material)
    text = f"n+{kid:08x}+" + base64.b64encode(b"\x06" + material).decode()
    with pytest.raises(NoteError, match="1312 bytes"):
        parse_verifier_key(text)
    with pytest.raises(NoteError):
        parse_verifier_key("n+00000000+" + base64.b64encode(b"\x04" + material).decode())
    assert KEY_TYPE_ED25519 == 1


# --- Signing and verifying --------------------------------------------------------------------


def test_cosign_and_verify() -> None:
    w = CosignatureSigner.generate("witness.example")
    sig = w.cosign(SPEC_TEXT, TS)
    assert (sig.name, sig.key_id) == (w.name, w.key_id)
    assert len(sig.signature) == COSIGNATURE_SIZE
    assert sig.signature[:8] == TS.to_bytes(8, "big")
    v = w.verifier()
    assert v.verify(SPEC_TEXT.encode(), sig.signature)
    assert v.timestamp(sig.signature) == TS
    assert not v.verify(SPEC_TEXT.replace("20852163", "20852164").encode(), sig.signature)
    assert not v.verify(SPEC_TEXT.encode(), sig.signature[:-1])
    data = format_note(Note(SPEC_TEXT, (sig,)))
    _, verified = open_note(data, [v])
    assert verified == [sig]


@pytest.mark.parametrize("ts", [0, 1, MAX_TIMESTAMP])
def test_cosign_timestamp_bounds(ts: int) -> None:
    w = CosignatureSigner.generate("w")
    sig = w.cosign(SPEC_TEXT, ts)
    assert w.verifier().verify(SPEC_TEXT.encode(), sig.signature)
    assert cosignature_timestamp(sig) == ts


def test_timestamp_above_2_63_never_verifies() -> None:
    w = CosignatureSigner.generate("w")
    sig = w.cosign(SPEC_TEXT, TS).signature
    forged = (MAX_TIMESTAMP + 1).to_bytes(8, "big") + sig[8:]
    assert not w.verifier().verify(SPEC_TEXT.encode(), forged)


def test_cosignature_covers_extension_lines() -> None:
    w = CosignatureSigner.generate("w")
    text = SPEC_TEXT + "Extendo\n"
    sig = w.cosign(text, TS)
    assert w.verifier().verify(text.encode(), sig.signature)
    assert not w.verifier().verify((SPEC_TEXT + "Extendo@\n").encode(), sig.signature)


@pytest.mark.parametrize("text", ["not a checkpoint\n", SPEC_TEXT[:-1], "a\nb\nc\n", ""])
def test_cosign_refuses_non_checkpoints(text: str) -> None:
    with pytest.raises(NoteError):
        CosignatureSigner.generate("w").cosign(text, TS)


def test_plain_and_cosignature_keys_do_not_cross_verify() -> None:
    seed = bytes(range(32))
    plain = Ed25519Signer("same", seed)
    cosigner = CosignatureSigner("same", seed)
    assert plain.key_id != cosigner.key_id
    sig = cosigner.cosign(SPEC_TEXT, TS)
    # The plain verifier does not know the 0x04 key ID: the line is ignored, not accepted.
    with pytest.raises(UnverifiedNoteError):
        open_note(format_note(Note(SPEC_TEXT, (sig,))), [plain.verifier()])
    assert not plain.verifier().verify(SPEC_TEXT.encode(), sig.signature)
    assert not cosigner.verifier().verify(SPEC_TEXT.encode(), plain.sign(SPEC_TEXT.encode()))


def test_repr_hides_seed() -> None:
    w = CosignatureSigner.generate("w")
    assert w.seed.hex() not in repr(w)
    assert base64.b64encode(w.seed).decode() not in repr(w)
