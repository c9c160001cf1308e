"""C2SP signed-note: the text format that carries checkpoints and their signatures.

A signed note is a text ending in a newline, a blank line, then one or more signature lines
``— <key name> <base64(4-byte big-endian key ID ‖ signature)>``. It is the format of Go's
``golang.org/x/mod/sumdb/note`` and of every C2SP transparency-log spec, so the bytes produced
here must be the bytes those implementations produce and accept (https://c2sp.org/signed-note).

This module is the pure core: codecs, key text forms and Ed25519 signing/verification. It does no
I/O and reads no clock, so verifiers can use it offline and tests can pin every byte.

Where this code is stricter than Go's ``note.Open`` it says so: base64 must be canonical (the
re-encoding of the decoded bytes), so that :func:`format_note` is an exact inverse of
:func:`parse_note`; a verified note can therefore be re-served byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, Self

import nacl.bindings
import nacl.exceptions
import nacl.signing

from ledger.core.errors import LedgerError

__all__ = [
    "KEY_TYPE_COSIGNATURE_V1",
    "KEY_TYPE_ED25519",
    "KEY_TYPE_SUBTREE_V1",
    "MAX_NOTE_SIZE",
    "MAX_SIGNATURES",
    "Ed25519Signer",
    "Ed25519Verifier",
    "InvalidSignatureError",
    "Note",
    "NoteError",
    "NoteSignature",
    "NoteSigner",
    "NoteVerifier",
    "UnverifiedNoteError",
    "add_signatures",
    "format_note",
    "is_valid_key_name",
    "key_id",
    "merge_signatures",
    "open_note",
    "parse_note",
    "parse_private_key_text",
    "parse_vkey_text",
    "sign_note",
    "strict_b64decode",
]

#: Signature type byte of plain Ed25519 note signatures (c2sp.org/signed-note).
KEY_TYPE_ED25519 = 0x01
#: Signature type byte of timestamped Ed25519 cosignatures (c2sp.org/tlog-cosignature).
KEY_TYPE_COSIGNATURE_V1 = 0x04
#: Signature type byte of ML-DSA-44 subtree/v1 signatures (c2sp.org/tlog-cosignature): a log's
#: post-quantum checkpoint signature and witnesses' (ledger.core.subtree_cosignature).
KEY_TYPE_SUBTREE_V1 = 0x06

#: Largest signed note accepted, in bytes. The spec asks verifiers to bound notes; 1 MiB leaves
#: room for MAX_SIGNATURES post-quantum signatures (~5 kB each) and is far beyond any checkpoint.
MAX_NOTE_SIZE = 1 << 20
#: Largest number of signature lines accepted, as in Go's note.Open (the spec's floor is 16).
MAX_SIGNATURES = 100

_EM_DASH_PREFIX = "\u2014 "  # "— ", U+2014 then a space
_SEED_SIZE = 32
_PUBLIC_KEY_SIZE = 32
_ED25519_SIGNATURE_SIZE = 64
_HEX8 = re.compile(r"[0-9a-fA-F]{8}")

# Go's unicode.IsSpace (the Unicode White_Space property), which signed-note forbids in key names.
_WHITE_SPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)

# The character rules below as regular expressions: one scan in C instead of a Python loop per
# character (a checkpoint is parsed or written on every commit and every proof bundle).
_BAD_NAME_CHAR = re.compile(
    "[" + "".join(sorted(_WHITE_SPACE)) + "\x00-\x1f+\ud800-\udfff]")
_NOTE_CONTROL = re.compile("[\x00-\x09\x0b-\x1f]")
_BAD_TEXT_CHAR = re.compile("[\x00-\x09\x0b-\x1f\ud800-\udfff]")


class NoteError(LedgerError, ValueError):
    """A note, key or signature is malformed or does not verify.

    A ValueError so that callers treating any bad input uniformly (HTTP 4xx) can catch one type.
    """


class UnverifiedNoteError(NoteError):
    """The note is well formed but no signature by a known key is on it.

    The parsed note is attached so a caller can still inspect (never trust) what it carried.
    """

    def __init__(self, message: str, note: Note) -> None:
        super().__init__(message)
        self.note = note


class InvalidSignatureError(NoteError):
    """A signature line names a known key (name and key ID) but does not verify under it.

    The spec says such a note should be rejected whole: it is forged or corrupted.
    """

    def __init__(self, name: str, key_id_: int) -> None:
        super().__init__(f"invalid signature for key {name}+{key_id_:08x}")
        self.name = name
        self.key_id = key_id_


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key name, 32-bit key ID, and the signature bytes after the ID."""

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        """The signature line as written in a note, without its final newline."""
        _check_signature(self)
        blob = self.key_id.to_bytes(4, "big") + self.signature
        return f"{_EM_DASH_PREFIX}{self.name} {base64.b64encode(blob).decode('ascii')}"


@dataclass(frozen=True)
class Note:
    """A note text (ending in a newline) and every signature line on it, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]


class NoteVerifier(Protocol):
    """What ``open_note`` needs of a key: its name and ID, and a check of one signature.

    ``verify`` gets the note text as bytes and the signature bytes after the key ID, so key types
    that sign something derived from the text (cosignature/v1) fit the same interface.
    """

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def verify(self, message: bytes, signature: bytes) -> bool: ...


class NoteSigner(Protocol):
    """What ``sign_note`` needs of a key: its name and ID, and a signature over the note text."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def sign(self, message: bytes) -> bytes: ...


# ---------------------------------------------------------------------------------------------
# Small shared validators and codecs


def is_valid_key_name(name: str) -> bool:
    """Whether ``name`` may be a key name: non-empty, no Unicode space, no ``+``, no control chars.

    ``+`` separates the fields of key texts and a space separates name and signature in a note, so
    either would make the encoding ambiguous. Control characters can never appear in a note.
    """
    return bool(name) and _BAD_NAME_CHAR.search(name) is None


def _check_key_name(name: str) -> None:
    if not isinstance(name, str) or not is_valid_key_name(name):
        raise NoteError(f"invalid key name {name!r}: must be non-empty, without spaces or '+'")


def strict_b64decode(text: str, what: str = "base64") -> bytes:
    """Decode standard padded base64, accepting only the canonical encoding.

    Rejects characters outside the alphabet, missing or extra padding and non-zero padding bits,
    so that every byte string has exactly one accepted text form (encode is an exact inverse).
    """
    try:
        raw = binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error, ValueError) as exc:
        raise NoteError(f"bad {what}: {exc}") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise NoteError(f"bad {what}: not canonical base64")
    return raw


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def key_id(name: str, key_type: int, public_key: bytes) -> int:
    """The signed-note key ID: first 4 bytes, big-endian, of SHA-256(name ‖ 0x0A ‖ type ‖ key).

    Binding the name and the type byte means the same key material under another name or
    signature type has a different ID, so signatures cannot be confused across them.
    """
    if not 0 <= key_type <= 0xFF:
        raise NoteError(f"key type {key_type} is not a byte")
    digest = hashlib.sha256(
        name.encode("utf-8") + b"\n" + bytes([key_type]) + bytes(public_key)
    ).digest()
    return int.from_bytes(digest[:4], "big")


def _parse_hex_id(text: str) -> int:
    # Exactly 8 hex digits, as Go's NewVerifier requires (int(x, 16) alone would take "0x", "_").
    if not _HEX8.fullmatch(text):
        raise NoteError(f"bad key ID {text!r}: want 8 hex digits")
    return int(text, 16)


def parse_vkey_text(text: str) -> tuple[str, int, int, bytes]:
    """Split a verifier key ``<name>+<hex id>+<base64(type ‖ key)>`` into its checked parts.

    Returns (name, key ID, type byte, key material). The key ID must be the one derived from the
    name, type and key: a mismatch means a typo or a substituted key. Base64 may itself contain
    ``+``, so only the first two ``+`` separate fields.
    """
    if not isinstance(text, str):
        raise NoteError("verifier key must be text")
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise NoteError("malformed verifier key: want <name>+<hex key ID>+<base64 key>")
    name, hex_id, key64 = parts
    _check_key_name(name)
    kid = _parse_hex_id(hex_id)
    blob = strict_b64decode(key64, "verifier key base64")
    if len(blob) < 2:
        raise NoteError("malformed verifier key: key data too short")
    key_type, material = blob[0], blob[1:]
    if key_id(name, key_type, material) != kid:
        raise NoteError(f"verifier key ID {hex_id} does not match name and key")
    return name, kid, key_type, material


def parse_private_key_text(text: str) -> tuple[str, int, int, bytes]:
    """Split ``PRIVATE+KEY+<name>+<hex id>+<base64(type ‖ key)>`` into its parts.

    Returns (name, key ID, type byte, private key material). The key ID is *not* checked here:
    it is derived from the public key, which only the key type's own code can compute.
    """
    if not isinstance(text, str):
        raise NoteError("private key must be text")
    parts = text.split("+", 4)
    if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
        raise NoteError("malformed private key: want PRIVATE+KEY+<name>+<hex key ID>+<base64>")
    _, _, name, hex_id, key64 = parts
    _check_key_name(name)
    kid = _parse_hex_id(hex_id)
    blob = strict_b64decode(key64, "private key base64")
    if len(blob) < 2:
        raise NoteError("malformed private key: key data too short")
    return name, kid, blob[0], blob[1:]


def _check_note_text(text: str) -> None:
    """Enforce the note-text rules: UTF-8 text ending in newline, no controls but newline."""
    if not isinstance(text, str):
        raise NoteError("note text must be str")
    if not text.endswith("\n"):
        raise NoteError("note text must end with a newline")
    bad = _BAD_TEXT_CHAR.search(text)
    if bad is not None:
        raise NoteError(f"note text contains forbidden character U+{ord(bad.group()):04X}")


def _check_signature(sig: NoteSignature) -> None:
    _check_key_name(sig.name)
    if not isinstance(sig.key_id, int) or not 0 <= sig.key_id <= 0xFFFFFFFF:
        raise NoteError(f"key ID {sig.key_id!r} is not a 32-bit unsigned integer")
    if not isinstance(sig.signature, bytes) or not sig.signature:
        raise NoteError("signature bytes must be non-empty")


# ---------------------------------------------------------------------------------------------
# Note codec


def parse_note(data: bytes) -> Note:
    """Parse a signed note without verifying anything.

    Applies every syntactic rule of Go's ``note.Open``: at most MAX_NOTE_SIZE bytes, valid UTF-8,
    no control characters but newline, text separated from signatures by the *last* blank line,
    at least one signature line, each ``— <valid name> <base64 of ≥ 5 bytes>`` ending in newline,
    at most MAX_SIGNATURES lines. Every signature line is kept, in order, duplicates included, so
    that :func:`format_note` gives back the same bytes.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise NoteError("note must be bytes")
    data = bytes(data)
    if len(data) > MAX_NOTE_SIZE:
        raise NoteError(f"note is {len(data)} bytes, more than the limit of {MAX_NOTE_SIZE}")
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError("note is not valid UTF-8") from None
    bad = _NOTE_CONTROL.search(decoded)
    if bad is not None:
        raise NoteError(f"note contains control character U+{ord(bad.group()):04X}")
    split = decoded.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line before its signatures")
    text, block = decoded[: split + 1], decoded[split + 2 :]
    if not block:
        raise NoteError("note has no signature lines")
    if not block.endswith("\n"):
        raise NoteError("note does not end with a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"note has {len(lines)} signatures, more than {MAX_SIGNATURES}")
    return Note(text=text, signatures=tuple(_parse_signature_line(line) for line in lines))


def _parse_signature_line(line: str) -> NoteSignature:
    if not line.startswith(_EM_DASH_PREFIX):
        raise NoteError(f"signature line does not start with '— ': {line[:80]!r}")
    rest = line[len(_EM_DASH_PREFIX) :]
    name, sep, b64 = rest.partition(" ")
    if not sep or not b64:
        raise NoteError("signature line has no signature")
    if not is_valid_key_name(name):
        raise NoteError(f"signature line has invalid key name {name!r}")
    blob = strict_b64decode(b64, "signature base64")
    if len(blob) < 5:
        raise NoteError("signature is shorter than a key ID and one byte")
    return NoteSignature(name=name, key_id=int.from_bytes(blob[:4], "big"), signature=blob[4:])


def format_note(note: Note) -> bytes:
    """Encode a note: the text, a blank line, one line per signature. Inverse of parse_note.

    Refuses anything parse_note would refuse, so a note this writes can always be read back.
    """
    _check_note_text(note.text)
    if not note.signatures:
        raise NoteError("a signed note needs at least one signature")
    if len(note.signatures) > MAX_SIGNATURES:
        raise NoteError(f"note has more than {MAX_SIGNATURES} signatures")
    out = note.text + "\n" + "".join(sig.line() + "\n" for sig in note.signatures)
    encoded = out.encode("utf-8")
    if len(encoded) > MAX_NOTE_SIZE:
        raise NoteError(f"note would be {len(encoded)} bytes, more than {MAX_NOTE_SIZE}")
    return encoded


# ---------------------------------------------------------------------------------------------
# Ed25519 keys: the shared base of signature types 0x01 (here) and 0x04 (ledger.core.cosignature)


class _NoteKey:
    """What every note key holds, whatever its algorithm: a name and the key ID derived from it,
    its type byte and its public key."""

    __slots__ = ("_key_id", "_name")
    _key_id: int
    _name: str

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> int:
        return self._key_id


class _Ed25519Key(_NoteKey):
    """What every Ed25519-based note key holds: a name and the key ID derived under KEY_TYPE.

    Plain note keys (0x01) and cosignature/v1 keys (0x04) are the same Ed25519 key material read
    and written the same way; only the type byte, and so the key ID and text forms, differ. Each
    concrete class sets KEY_TYPE and the two labels its error messages use, which keeps every
    message what it was before the classes shared this code.
    """

    __slots__ = ()

    #: Signature type byte: part of the key ID and of the key texts.
    KEY_TYPE: ClassVar[int]
    #: What a key of another type "is not", e.g. "Ed25519" (the type byte is appended).
    _TYPE_LABEL: ClassVar[str]
    #: How messages about the key's length name it, e.g. "Ed25519" or "cosignature".
    _KIND: ClassVar[str]

    @classmethod
    def _check_type(cls, what: str, key_type: int, accepted: tuple[int, ...]) -> None:
        if key_type not in accepted:
            raise NoteError(
                f"{what} key type 0x{key_type:02x} is not {cls._TYPE_LABEL} (0x{cls.KEY_TYPE:02x})"
            )


class _Ed25519PublicKey(_Ed25519Key):
    """An Ed25519 verifier key of type KEY_TYPE; subclasses say what ``verify`` checks.

    Equality is per concrete class: the same name and key under another type is another key
    (another key ID), so an Ed25519Verifier never equals a CosignatureVerifier.
    """

    __slots__ = ("_public_key", "_verify_key")

    def __init__(self, name: str, public_key: bytes) -> None:
        _check_key_name(name)
        if not isinstance(public_key, bytes) or len(public_key) != _PUBLIC_KEY_SIZE:
            raise NoteError("Ed25519 public key must be 32 bytes")
        self._name = name
        self._public_key = public_key
        self._key_id = key_id(name, self.KEY_TYPE, public_key)
        self._verify_key = nacl.signing.VerifyKey(public_key)

    @classmethod
    def from_vkey(cls, text: str) -> Self:
        """Read ``<name>+<hex id>+<base64(KEY_TYPE ‖ 32-byte key)>``; the key ID must match."""
        name, _, key_type, material = parse_vkey_text(text)
        cls._check_type("verifier", key_type, (cls.KEY_TYPE,))
        if len(material) != _PUBLIC_KEY_SIZE:
            raise NoteError(f"{cls._KIND} verifier key must hold 32 bytes of key")
        return cls(name, material)

    @property
    def public_key(self) -> bytes:
        return self._public_key

    @property
    def vkey(self) -> str:
        """The verifier key text, the form operators publish and pin."""
        blob = bytes([self.KEY_TYPE]) + self._public_key
        return f"{self._name}+{self._key_id:08x}+{_b64(blob)}"

    def _verify_ed25519(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's raw Ed25519 signature of ``message``.

        Any failure, malformed input included, is a plain False: a verifier answers yes or no.
        """
        try:
            self._verify_key.verify(bytes(message), bytes(signature))
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError):
            return False
        return True

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self._name == other._name and self._public_key == other._public_key

    def __hash__(self) -> int:
        # KEY_TYPE rather than the class, so a subclass instance equal to its base hashes alike.
        return hash((self.KEY_TYPE, self._name, self._public_key))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.vkey!r})"


class _Ed25519PrivateKey(_Ed25519Key):
    """An Ed25519 signing key (a 32-byte seed) of type KEY_TYPE, in ``PRIVATE+KEY+…`` text form.

    Subclasses give the matching verifier class and what they sign.
    """

    __slots__ = ("_secret", "_seed", "_signing_key")

    #: Further type bytes ``from_private_key`` accepts (the key ID is checked under the type
    #: written in the text, but the key still signs under KEY_TYPE).
    _ALSO_ACCEPTED_TYPES: ClassVar[tuple[int, ...]] = ()

    def __init__(self, name: str, seed: bytes) -> None:
        _check_key_name(name)
        if not isinstance(seed, bytes) or len(seed) != _SEED_SIZE:
            raise NoteError("Ed25519 seed must be 32 bytes")
        self._name = name
        self._seed = seed
        self._signing_key = nacl.signing.SigningKey(seed)
        # libsodium's 64-byte secret key, to sign through the binding (no SignedMessage).
        self._secret = nacl.bindings.crypto_sign_seed_keypair(seed)[1]
        self._key_id = key_id(name, self.KEY_TYPE, self.public_key)

    @classmethod
    def generate(cls, name: str) -> Self:
        """A fresh key from the operating system's CSPRNG."""
        return cls(name, secrets.token_bytes(_SEED_SIZE))

    @classmethod
    def from_private_key(cls, text: str) -> Self:
        """Read ``PRIVATE+KEY+<name>+<hex id>+<base64(KEY_TYPE ‖ seed)>``; the key ID must match."""
        name, kid, key_type, material = parse_private_key_text(text)
        cls._check_type("private", key_type, (cls.KEY_TYPE, *cls._ALSO_ACCEPTED_TYPES))
        if len(material) != _SEED_SIZE:
            raise NoteError(f"{cls._KIND} private key must hold a 32-byte seed")
        signer = cls(name, material)
        if key_id(name, key_type, signer.public_key) != kid:
            raise NoteError(f"private key ID {kid:08x} does not match name and key")
        return signer

    @property
    def public_key(self) -> bytes:
        return bytes(self._signing_key.verify_key)

    @property
    def seed(self) -> bytes:
        return self._seed

    def private_key_text(self) -> str:
        """The secret key text; whoever holds it can sign as this key."""
        blob = bytes([self.KEY_TYPE]) + self._seed
        return f"PRIVATE+KEY+{self._name}+{self._key_id:08x}+{_b64(blob)}"

    def verifier_key_text(self) -> str:
        return self.verifier().vkey

    def verifier(self) -> _Ed25519PublicKey:
        raise NotImplementedError  # each concrete signer returns its own verifier class

    def _sign_ed25519(self, message: bytes) -> bytes:
        """The raw 64-byte Ed25519 signature of ``message`` (deterministic, RFC 8032)."""
        return nacl.bindings.crypto_sign(bytes(message), self._secret)[:64]

    def __repr__(self) -> str:  # never print the seed
        return f"{type(self).__name__}(name={self._name!r}, key_id={self._key_id:08x})"


class Ed25519Verifier(_Ed25519PublicKey):
    """An Ed25519 note verifier key (type 0x01), as Go's ``note.NewVerifier`` reads them."""

    __slots__ = ()
    KEY_TYPE = KEY_TYPE_ED25519
    _TYPE_LABEL = "Ed25519"
    _KIND = "Ed25519"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is a valid Ed25519 signature of ``message`` by this key."""
        if len(signature) != _ED25519_SIGNATURE_SIZE:
            return False
        return self._verify_ed25519(message, signature)


class Ed25519Signer(_Ed25519PrivateKey):
    """An Ed25519 note signing key (type 0x01), in Go's ``PRIVATE+KEY+…`` text form."""

    __slots__ = ()
    KEY_TYPE = KEY_TYPE_ED25519
    _TYPE_LABEL = "Ed25519"
    _KIND = "Ed25519"

    def verifier(self) -> Ed25519Verifier:
        return Ed25519Verifier(self._name, self.public_key)

    def sign(self, message: bytes) -> bytes:
        """The raw 64-byte Ed25519 signature of ``message`` (deterministic, RFC 8032)."""
        return self._sign_ed25519(message)


# ---------------------------------------------------------------------------------------------
# Signing and opening


def _signature_by(signer: NoteSigner, text: str) -> NoteSignature:
    _check_key_name(signer.name)
    sig = NoteSignature(signer.name, signer.key_id, signer.sign(text.encode("utf-8")))
    _check_signature(sig)
    return sig


def sign_note(text: str, *signers: NoteSigner) -> bytes:
    """Sign ``text`` with each signer, in order, and return the encoded signed note."""
    _check_note_text(text)
    if not signers:
        raise NoteError("sign_note needs at least one signer")
    return format_note(Note(text, tuple(_signature_by(s, text) for s in signers)))


def merge_signatures(note_bytes: bytes, signatures: Iterable[NoteSignature]) -> bytes:
    """Add ready-made signature lines (e.g. witness cosignatures) to a signed note.

    A new signature replaces any existing line with the same key name and ID, as Go's note.Sign
    does, so re-cosigning updates a witness's line rather than stacking stale ones. Nothing is
    verified here: callers verify new lines before merging them, and readers verify on open.
    """
    note = parse_note(note_bytes)
    new = tuple(signatures)
    for sig in new:
        _check_signature(sig)
    replaced = {(s.name, s.key_id) for s in new}
    kept = tuple(s for s in note.signatures if (s.name, s.key_id) not in replaced)
    return format_note(Note(note.text, kept + new))


def add_signatures(note_bytes: bytes, *signers: NoteSigner) -> bytes:
    """Sign an already signed note's text with more keys (existing lines by the same key go)."""
    note = parse_note(note_bytes)
    return merge_signatures(note_bytes, [_signature_by(s, note.text) for s in signers])


def open_note(data: bytes, verifiers: Sequence[NoteVerifier]) -> tuple[Note, list[NoteSignature]]:
    """Parse a signed note and verify the signatures made by known keys.

    A signature is by a known key when both its name and key ID match a verifier; others are
    ignored (kept in the returned note) as the spec requires, which is what allows key rotation
    and cosigning. Every signature by a known key must verify, or the whole note is rejected with
    :class:`InvalidSignatureError`. With no verified signature at all, raises
    :class:`UnverifiedNoteError`. The returned list holds the first verified signature per key.
    """
    note = parse_note(data)
    known: dict[tuple[str, int], list[NoteVerifier]] = {}
    for v in verifiers:
        candidates = known.setdefault((v.name, v.key_id), [])
        if not any(c is v or c == v for c in candidates):
            candidates.append(v)
    message = note.text.encode("utf-8")
    verified: list[NoteSignature] = []
    seen: set[tuple[str, int]] = set()
    for sig in note.signatures:
        ident = (sig.name, sig.key_id)
        matching = known.get(ident, [])
        if not matching:
            continue
        if len(matching) > 1:
            raise NoteError(f"ambiguous key {sig.name}+{sig.key_id:08x}: several verifiers")
        if not matching[0].verify(message, sig.signature):
            raise InvalidSignatureError(sig.name, sig.key_id)
        if ident not in seen:
            seen.add(ident)
            verified.append(sig)
    if not verified:
        raise UnverifiedNoteError("note has no verifiable signatures", note)
    return note, verified
