"""Tests of ledger.core.note: the C2SP signed-note codec, key texts and Ed25519 signatures."""

from __future__ import annotations

import base64

import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.note import (
    _WHITE_SPACE,
    KEY_TYPE_ED25519,
    MAX_NOTE_SIZE,
    MAX_SIGNATURES,
    Ed25519Signer,
    Ed25519Verifier,
    InvalidSignatureError,
    Note,
    NoteError,
    NoteSignature,
    UnverifiedNoteError,
    _check_note_text,
    add_signatures,
    format_note,
    is_valid_key_name,
    key_id,
    merge_signatures,
    open_note,
    parse_note,
    sign_note,
)

# --- Vectors ----------------------------------------------------------------------------------

# The c2sp.org/signed-note example.
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_TEXT = "This is an example message.\n"
C2SP_SIG_LINE = (
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mF"
    "XmRKuwHjG1Yu72IneyaQM="
)
C2SP_NOTE = (C2SP_TEXT + "\n" + C2SP_SIG_LINE + "\n").encode()

# Key pair, text and signatures of the tests of Go's golang.org/x/mod/sumdb/note
# (note_test.go: TestNewVerifier, TestNewSigner, TestSign, TestOpen).
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpR"
    "Zb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33"
    "WWd1RvMc+QQ=\n"
)

# A type-0x01 verifier key whose base64 contains '+', from the tests of
# github.com/transparency-dev/formats (note/note_cosigv1_test.go, TestCoSigV1NewVerifier).
PLUS_VKEY = "TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6"


def peter() -> Ed25519Verifier:
    return Ed25519Verifier.from_vkey(PETER_VKEY)


def enoch() -> Ed25519Verifier:
    return Ed25519Verifier.from_vkey(ENOCH_VKEY)


# --- Strategies -------------------------------------------------------------------------------

_NAME_CHARS = st.characters(
    exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), exclude_characters="+"
)
names = st.text(_NAME_CHARS, min_size=1, max_size=40)
seeds = st.binary(min_size=32, max_size=32)
# Note text: any non-control character or newline, ending in a newline.
_TEXT_CHARS = st.one_of(st.characters(min_codepoint=0x20, codec="utf-8"), st.just("\n"))
note_texts = st.text(_TEXT_CHARS, max_size=300).map(lambda s: s + "\n")
note_sigs = st.builds(
    NoteSignature,
    name=names,
    key_id=st.integers(0, 0xFFFFFFFF),
    signature=st.binary(min_size=1, max_size=120),
)
notes = st.builds(
    Note, text=note_texts, signatures=st.lists(note_sigs, min_size=1, max_size=8).map(tuple)
)


# --- The signed-note test vector --------------------------------------------------------------


def test_c2sp_vector_verifies() -> None:
    v = Ed25519Verifier.from_vkey(C2SP_VKEY)
    assert v.name == "example.com/foo"
    assert v.key_id == 0x530D903A
    assert v.vkey == C2SP_VKEY
    note, verified = open_note(C2SP_NOTE, [v])
    assert note.text == C2SP_TEXT
    assert verified == list(note.signatures)
    assert verified[0].key_id == 0x530D903A
    assert len(verified[0].signature) == 64


def test_c2sp_key_id_derivation() -> None:
    v = Ed25519Verifier.from_vkey(C2SP_VKEY)
    assert key_id("example.com/foo", KEY_TYPE_ED25519, v.public_key) == 0x530D903A
    assert key_id("example.com/fo", KEY_TYPE_ED25519, v.public_key) != 0x530D903A
    assert key_id("example.com/foo", 0x04, v.public_key) != 0x530D903A


@pytest.mark.parametrize("bit", range(8))
def test_c2sp_vector_text_bit_flip_fails(bit: int) -> None:
    v = Ed25519Verifier.from_vkey(C2SP_VKEY)
    data = bytearray(C2SP_NOTE)
    data[3] ^= 1 << bit  # inside "This" : stays printable ASCII or becomes invalid
    with pytest.raises(NoteError):
        open_note(bytes(data), [v])


def test_c2sp_vector_signature_bit_flip_fails() -> None:
    v = Ed25519Verifier.from_vkey(C2SP_VKEY)
    note = parse_note(C2SP_NOTE)
    sig = note.signatures[0]
    for i in range(len(sig.signature)):
        for bit in (0, 7):
            bad = bytearray(sig.signature)
            bad[i] ^= 1 << bit
            assert not v.verify(C2SP_TEXT.encode(), bytes(bad))
            bad_sig = NoteSignature(sig.name, sig.key_id, bytes(bad))
            forged = format_note(Note(note.text, (bad_sig,)))
            with pytest.raises(InvalidSignatureError):
                open_note(forged, [v])
    assert v.verify(C2SP_TEXT.encode(), sig.signature)


def test_c2sp_vector_key_id_flip_makes_signature_unknown() -> None:
    v = Ed25519Verifier.from_vkey(C2SP_VKEY)
    sig = parse_note(C2SP_NOTE).signatures[0]
    other = NoteSignature(sig.name, sig.key_id ^ 1, sig.signature)
    with pytest.raises(UnverifiedNoteError) as err:
        open_note(format_note(Note(C2SP_TEXT, (other,))), [v])
    assert err.value.note.signatures == (other,)


def test_c2sp_vector_round_trips_exactly() -> None:
    assert format_note(parse_note(C2SP_NOTE)) == C2SP_NOTE


# --- Go sumdb/note vectors --------------------------------------------------------------------


def test_go_signer_vector() -> None:
    signer = Ed25519Signer.from_private_key(PETER_SKEY)
    assert signer.name == "PeterNeumann"
    assert signer.key_id == 0xC74F20A3
    assert signer.private_key_text() == PETER_SKEY
    assert signer.verifier_key_text() == PETER_VKEY
    assert signer.verifier() == peter()
    assert sign_note(GO_TEXT, signer) == (GO_TEXT + "\n" + PETER_SIG).encode()


def test_go_open_one_known_one_unknown() -> None:
    data = (GO_TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    note, verified = open_note(data, [peter()])
    assert note.text == GO_TEXT
    assert [s.name for s in verified] == ["PeterNeumann"]
    assert [s.name for s in note.signatures] == ["PeterNeumann", "EnochRoot"]
    assert note.signatures[1].key_id == 0xAF0CFE78


def test_go_open_both_known() -> None:
    data = (GO_TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    _, verified = open_note(data, [peter(), enoch()])
    assert [(s.name, s.key_id) for s in verified] == [
        ("PeterNeumann", 0xC74F20A3),
        ("EnochRoot", 0xAF0CFE78),
    ]


def test_go_open_none_known() -> None:
    data = (GO_TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    with pytest.raises(UnverifiedNoteError, match="no verifiable signatures") as err:
        open_note(data, [])
    assert len(err.value.note.signatures) == 2


def test_go_invalid_signature_rejects_note() -> None:
    bad = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(InvalidSignatureError, match="PeterNeumann\\+c74f20a3"):
        open_note((GO_TEXT + "\n" + bad).encode(), [peter()])


def test_go_duplicates_kept_in_note_and_counted_once() -> None:
    enoch_abcd = ENOCH_SIG[:60] + "ABCD" + ENOCH_SIG[60:]
    data = (GO_TEXT + "\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + ENOCH_SIG + enoch_abcd).encode()
    note, verified = open_note(data, [peter()])
    assert len(verified) == 1
    assert len(note.signatures) == 5
    assert format_note(note) == data


def test_bad_duplicate_by_known_key_rejects_note() -> None:
    # Stricter than Go (which skips repeats of a verified key): every line by a known key must
    # verify, as c2sp.org/signed-note asks.
    bad = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(InvalidSignatureError):
        open_note((GO_TEXT + "\n" + PETER_SIG + bad).encode(), [peter()])


def test_signature_known_name_other_id_is_ignored() -> None:
    forged = PETER_SIG.replace("x08g", "xxxx")
    with pytest.raises(UnverifiedNoteError):
        open_note((GO_TEXT + "\n" + forged).encode(), [peter()])


def _mangled(text: str) -> list[str]:
    """Every proper substring, and every single-character increment, of ``text`` (as Go tests)."""
    out = [text[i:j] for i in range(len(text) + 1) for j in range(i + 1, len(text) + 1)]
    out = [s for s in out if s != text]
    out += [text[:i] + chr(ord(text[i]) + 1) + text[i + 1 :] for i in range(len(text))]
    return out


def test_go_verifier_manglings_rejected() -> None:
    assert Ed25519Verifier.from_vkey(PETER_VKEY).vkey == PETER_VKEY
    for bad in _mangled(PETER_VKEY):
        with pytest.raises(NoteError):
            Ed25519Verifier.from_vkey(bad)


def test_go_signer_manglings_rejected() -> None:
    for bad in _mangled(PETER_SKEY):
        with pytest.raises(NoteError):
            Ed25519Signer.from_private_key(bad)


@pytest.mark.parametrize(
    "vkey",
    [
        # From Go's TestNewVerifier: wrong key length and unknown algorithm, each with the key
        # ID adjusted so that only the key check can catch them.
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3",
        "PeterNeumann+c74f20a3+",
        "+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+0xc74f20+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq_LDE4izWy10TW",
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW=",
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+00000000+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ],
)
def test_bad_verifier_keys(vkey: str) -> None:
    with pytest.raises(NoteError):
        Ed25519Verifier.from_vkey(vkey)


def test_verifier_key_with_plus_in_base64() -> None:
    v = Ed25519Verifier.from_vkey(PLUS_VKEY)
    assert v.name == "TEST"
    assert v.key_id == 0x7997405C
    assert v.vkey == PLUS_VKEY


def test_uppercase_hex_key_id_accepted_lowercase_written() -> None:
    v = Ed25519Verifier.from_vkey(PETER_VKEY.replace("c74f20a3", "C74F20A3"))
    assert v.vkey == PETER_VKEY


def test_private_key_wrong_key_id() -> None:
    with pytest.raises(NoteError, match="does not match"):
        Ed25519Signer.from_private_key(PETER_SKEY.replace("c74f20a3", "c74f20a4"))


def test_private_key_wrong_type() -> None:
    blob = base64.b64decode(PETER_SKEY.split("+", 4)[4])
    other = "PRIVATE+KEY+PeterNeumann+c74f20a3+" + base64.b64encode(b"\x04" + blob[1:]).decode()
    with pytest.raises(NoteError, match="not Ed25519"):
        Ed25519Signer.from_private_key(other)


# --- Names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["", "a b", "a+b", "a\tb", "a\nb", "a\u00a0b", "a\u2028b", "a\u3000b", "a\x85b", "a\x00b"],
)
def test_invalid_names(name: str) -> None:
    assert not is_valid_key_name(name)
    with pytest.raises(NoteError):
        Ed25519Signer.generate(name)
    with pytest.raises(NoteError):
        Ed25519Verifier(name, bytes(32))


@pytest.mark.parametrize("name", ["example.com/log", "a", "é/ü", "oid/1.3.6.1", "a\u200bb"])
def test_valid_names(name: str) -> None:
    assert is_valid_key_name(name)


# --- Malformed notes --------------------------------------------------------------------------


GOOD = (GO_TEXT + "\n" + PETER_SIG).encode()


@pytest.mark.parametrize(
    "data",
    [
        # Go's TestOpen bad messages.
        GO_TEXT.encode(),
        (GO_TEXT + "\n").encode(),
        (GO_TEXT + "\n" + PETER_SIG[:-1]).encode(),
        b"\x01" + GOOD,
        b"\xff" + GOOD,
        (GO_TEXT + "\n" + "— Bad Name " + PETER_SIG.split(" ", 2)[2]).encode(),
        (GO_TEXT + "\n" + PETER_SIG + "Unexpected line.\n").encode(),
        # More.
        b"",
        b"\n",
        b"\n\n",
        GOOD.replace(b"\xe2\x80\x94", b"-"),
        GOOD.replace(b"PeterNeumann ", b"PeterNeumann  "),
        GOOD.replace(b"PeterNeumann x08", b"PeterNeumann+x x08"),
        GOOD.replace(b"\n\n", b"\n\r\n"),
        GOOD.replace(b"cryptography", b"crypto\x00graphy"),
        GOOD.replace(b"cryptography", b"crypto\x1bgraphy"),  # ESC
        GOOD.replace(b"cryptography", b"crypto\x1fgraphy"),
        GOOD.replace(b"cryptography", b"crypto\tgraphy"),
        GOOD.replace(b"cryptography", b"crypto\x7f\xed\xa0\x80graphy"),  # surrogate in UTF-8
        GOOD.replace(b"x08go", b"x08g!"),  # not base64
        GOOD.replace(b"AM=\n", b"AM\n"),  # missing padding
        GOOD.replace(b"AM=\n", b"AN=\n"),  # non-canonical padding bits
        GOOD.replace(b"AM=\n", b"AM==\n"),  # extra padding
        (GO_TEXT + "\n\u2014 PeterNeumann AAAAAA==\n").encode(),  # 4 bytes: no signature
        (GO_TEXT + "\n\u2014 PeterNeumann \n").encode(),
        (GO_TEXT + "\n\u2014 PeterNeumann\n").encode(),
        (GO_TEXT + "\n\u2014 \n").encode(),
        (GO_TEXT + "\n" + PETER_SIG + "\n").encode(),  # blank line at the end
    ],
)
def test_malformed_notes(data: bytes) -> None:
    with pytest.raises(NoteError):
        parse_note(data)
    with pytest.raises(NoteError):
        open_note(data, [peter()])


def test_too_many_signatures() -> None:
    ok = (GO_TEXT + "\n" + PETER_SIG * MAX_SIGNATURES).encode()
    assert len(parse_note(ok).signatures) == MAX_SIGNATURES
    with pytest.raises(NoteError, match="signatures"):
        parse_note((GO_TEXT + "\n" + PETER_SIG * (MAX_SIGNATURES + 1)).encode())


def test_oversize_note() -> None:
    filler = "x" * 1000 + "\n"
    text = filler * (MAX_NOTE_SIZE // len(filler) + 1)
    data = (text + "\n" + PETER_SIG).encode()
    assert len(data) > MAX_NOTE_SIZE
    with pytest.raises(NoteError, match="limit"):
        parse_note(data)


def test_text_may_contain_blank_lines() -> None:
    signer = Ed25519Signer.from_private_key(PETER_SKEY)
    for text in ["a\n\nb\n", "\n", "Note\n\n", "a\n\n\n"]:
        data = sign_note(text, signer)
        note, _ = open_note(data, [peter()])
        assert note.text == text


@pytest.mark.parametrize("text", ["", "abc", "abc\n\x00\n", "a\rb\n", "\ud800\n"])
def test_sign_rejects_bad_text(text: str) -> None:
    with pytest.raises(NoteError):
        sign_note(text, Ed25519Signer.from_private_key(PETER_SKEY))


def test_format_rejects_bad_notes() -> None:
    with pytest.raises(NoteError):
        format_note(Note("a\n", ()))
    with pytest.raises(NoteError):
        format_note(Note("a", (NoteSignature("n", 1, b"x"),)))
    with pytest.raises(NoteError):
        format_note(Note("a\n", (NoteSignature("n m", 1, b"x"),)))
    with pytest.raises(NoteError):
        format_note(Note("a\n", (NoteSignature("n", 1 << 32, b"x"),)))
    with pytest.raises(NoteError):
        format_note(Note("a\n", (NoteSignature("n", 1, b""),)))


# --- Signing, adding signatures, ambiguity ----------------------------------------------------


def test_add_signatures_and_replace() -> None:
    a = Ed25519Signer.generate("a.example/log")
    b = Ed25519Signer.generate("b.example/witness")
    one = sign_note("hello\n", a)
    two = add_signatures(one, b)
    note, verified = open_note(two, [a.verifier(), b.verifier()])
    assert note.text == "hello\n"
    assert [s.name for s in verified] == ["a.example/log", "b.example/witness"]
    assert two.startswith(one)
    # Signing again with a key already present replaces its line instead of stacking.
    again = add_signatures(two, a)
    assert len(parse_note(again).signatures) == 2
    open_note(again, [a.verifier(), b.verifier()])


def test_merge_signatures_replaces_same_key() -> None:
    a = Ed25519Signer.generate("a")
    data = sign_note("x\n", a)
    stale = NoteSignature("w", 7, b"old")
    with_stale = merge_signatures(data, [stale])
    fresh = NoteSignature("w", 7, b"new")
    merged = parse_note(merge_signatures(with_stale, [fresh]))
    assert merged.signatures[1:] == (fresh,)
    with pytest.raises(NoteError):
        merge_signatures(data, [NoteSignature("bad name", 1, b"x")])


class _FakeVerifier:
    def __init__(self, name: str, kid: int) -> None:
        self._name, self._kid = name, kid

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> int:
        return self._kid

    def verify(self, message: bytes, signature: bytes) -> bool:
        return True


def test_ambiguous_verifiers() -> None:
    v = peter()
    fake = _FakeVerifier(v.name, v.key_id)
    with pytest.raises(NoteError, match="ambiguous"):
        open_note(GOOD, [v, fake])
    # The same key listed twice is not ambiguous, nor is an unused clash.
    open_note(GOOD, [v, peter()])
    open_note(GOOD, [v, enoch(), _FakeVerifier(enoch().name, enoch().key_id)])


def test_generate_is_random_and_repr_hides_seed() -> None:
    a, b = Ed25519Signer.generate("n"), Ed25519Signer.generate("n")
    assert a.seed != b.seed and a.key_id != b.key_id
    assert a.seed.hex() not in repr(a)
    assert base64.b64encode(a.seed).decode() not in repr(a)


def test_verify_rejects_wrong_lengths() -> None:
    s = Ed25519Signer.generate("n")
    sig = s.sign(b"m")
    assert len(sig) == 64
    v = s.verifier()
    assert v.verify(b"m", sig)
    assert not v.verify(b"m", sig[:-1])
    assert not v.verify(b"m", sig + b"\x00")
    assert not v.verify(b"n", sig)


# --- Properties -------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(name=names, seed=seeds)
def test_key_texts_round_trip(name: str, seed: bytes) -> None:
    s = Ed25519Signer(name, seed)
    s2 = Ed25519Signer.from_private_key(s.private_key_text())
    assert (s2.name, s2.seed, s2.key_id, s2.public_key) == (name, seed, s.key_id, s.public_key)
    v = Ed25519Verifier.from_vkey(s.verifier_key_text())
    assert v == s.verifier()
    assert v.vkey == s.verifier_key_text()
    assert v.key_id == key_id(name, KEY_TYPE_ED25519, s.public_key)
    hex_id = s.verifier_key_text().split("+")[1]
    assert hex_id == f"{s.key_id:08x}"


@settings(max_examples=200, deadline=None)
@given(note=notes)
def test_note_round_trip(note: Note) -> None:
    data = format_note(note)
    assert parse_note(data) == note
    assert format_note(parse_note(data)) == data


@settings(max_examples=40, deadline=None)
@given(text=note_texts, name=names, seed=seeds)
def test_sign_open_round_trip(text: str, name: str, seed: bytes) -> None:
    s = Ed25519Signer(name, seed)
    data = sign_note(text, s)
    note, verified = open_note(data, [s.verifier()])
    assert note.text == text
    assert verified == [NoteSignature(name, s.key_id, s.sign(text.encode()))]


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=400))
def test_parse_arbitrary_bytes_only_raises_note_error(data: bytes) -> None:
    try:
        note = parse_note(data)
    except NoteError:
        return
    assert format_note(note) == data


def test_character_rules_hold_for_every_code_point() -> None:
    """Key names, note texts and notes are checked with regular expressions: the same rules
    as written out character by character, for every code point."""
    for c in range(0x110000):
        ch = chr(c)
        control = c < 0x20 and ch != "\n"
        surrogate = 0xD800 <= c <= 0xDFFF
        name_ok = not (ch == "+" or ch in _WHITE_SPACE or c < 0x20 or surrogate)
        assert is_valid_key_name("a" + ch + "b") is name_ok, hex(c)
        text_ok = not (control or surrogate)
        try:
            _check_note_text("x" + ch + "\n")
        except NoteError:
            assert not text_ok, hex(c)
        else:
            assert text_ok, hex(c)
        if not surrogate:
            data = ("x" + ch + "\n\n— k AAAAAAA=\n").encode()
            if control:
                with pytest.raises(NoteError, match="control character"):
                    parse_note(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(max_size=600))
def test_signing_through_the_binding_is_pynacls_signature(seed: bytes, message: bytes) -> None:
    """The signer signs through libsodium's binding (no SignedMessage object): the bytes must
    be exactly PyNaCl's detached signature."""
    want = nacl.signing.SigningKey(seed).sign(message).signature
    assert Ed25519Signer("example.com/log", seed)._sign_ed25519(message) == want
