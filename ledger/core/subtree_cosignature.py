"""C2SP tlog-cosignature, ML-DSA-44 ``subtree/v1`` (signature type 0x06): post-quantum signatures
on checkpoints and subtrees.

The signed message is not the note text but a binary ``cosigned_message`` (RFC 8446 §3
presentation language): the 12-byte label ``subtree/v1\\n\\0``, the cosigner's name and the log's
origin each with a one-byte length, and the timestamp, ``start`` and ``end`` as big-endian u64,
then the 32-byte subtree hash. A checkpoint is the subtree ``[0, size)``; extension lines are not
signed. The note signature field is the 8-byte timestamp followed by the 2,420-byte signature,
pure ML-DSA-44 (FIPS 204) with an empty context string. The key ID hashes type byte 0x06 and the
1,312-byte public key (https://c2sp.org/tlog-cosignature, C2SP/C2SP at 5ba5ee8).

The same key type serves three roles: a log signing its own checkpoints (name = origin), a
witness cosigning checkpoints (timestamped) and a witness signing subtrees (timestamp 0).
Private keys are written as ``PRIVATE+KEY+<name>+<hex id>+<base64(0x06 ‖ 32-byte seed)>``, the
FIPS 204 seed from which the key pair is derived. Pure code: timestamps are arguments.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Self

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PrivateKey, MLDSA44PublicKey

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import (
    KEY_TYPE_SUBTREE_V1,
    Ed25519Signer,
    NoteError,
    NoteSignature,
    _check_key_name,
    _NoteKey,
    key_id,
    parse_private_key_text,
    parse_vkey_text,
)
from ledger.core.subtree import is_valid_subtree

__all__ = [
    "MLDSA44_PUBLIC_KEY_SIZE",
    "MLDSA44_SIGNATURE_SIZE",
    "SUBTREE_SIGNATURE_SIZE",
    "SubtreeCosignatureSigner",
    "SubtreeCosignatureVerifier",
    "subtree_message",
]

MLDSA44_PUBLIC_KEY_SIZE = 1312
MLDSA44_SIGNATURE_SIZE = 2420
_SEED_SIZE = 32
_TIMESTAMP_SIZE = 8
_MAX_U64 = (1 << 64) - 1
_MAX_TIMESTAMP = (1 << 63) - 1
#: Length of a subtree/v1 signature field (after the 4-byte key ID): timestamp ‖ signature.
SUBTREE_SIGNATURE_SIZE = _TIMESTAMP_SIZE + MLDSA44_SIGNATURE_SIZE
_LABEL = b"subtree/v1\n\x00"
#: Domain separation of the log's ML-DSA-44 seed from its Ed25519 seed (see ``derived_from``).
_DERIVATION_LABEL = b"rs-notary log key: ML-DSA-44 subtree/v1 seed from the Ed25519 seed\n"


def _opaque8(what: str, text: str) -> bytes:
    raw = text.encode("utf-8")
    if not 1 <= len(raw) <= 0xFF:
        raise NoteError(f"{what} must be 1 to 255 bytes of UTF-8, not {len(raw)}")
    return bytes([len(raw)]) + raw


def subtree_message(
    cosigner_name: str, timestamp: int, origin: str, start: int, end: int, root: bytes
) -> bytes:
    """The ``cosigned_message`` bytes an ML-DSA-44 subtree/v1 signature covers.

    Refuses what the spec forbids rather than signing it: an invalid subtree, a timestamp above
    2^63 - 1, or a non-zero timestamp on a subtree that does not start at 0.
    """
    for what, value in (("timestamp", timestamp), ("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_U64:
            raise NoteError(f"{what} must be an integer in 0..2^64-1")
    if timestamp > _MAX_TIMESTAMP:
        raise NoteError(f"timestamp {timestamp} is above 2^63-1")
    if start != 0 and timestamp != 0:
        raise NoteError("a subtree that does not start at 0 is signed with timestamp 0")
    if not is_valid_subtree(start, end):
        raise NoteError(f"[{start}, {end}) is not a valid subtree")
    if not isinstance(root, bytes) or len(root) != 32:
        raise NoteError("subtree hash must be 32 bytes")
    return b"".join((
        _LABEL,
        _opaque8("cosigner name", cosigner_name),
        timestamp.to_bytes(8, "big"),
        _opaque8("log origin", origin),
        start.to_bytes(8, "big"),
        end.to_bytes(8, "big"),
        root,
    ))


def _checkpoint_fields(text: bytes | str) -> tuple[str, int, bytes]:
    cp = parse_checkpoint_text(text.decode("utf-8") if isinstance(text, bytes) else text)
    return cp.origin, cp.size, cp.root_hash


def _check_type(what: str, key_type: int) -> None:
    if key_type != KEY_TYPE_SUBTREE_V1:
        raise NoteError(f"{what} key type 0x{key_type:02x} is not an ML-DSA-44 subtree key "
                        "(0x06)")


class SubtreeCosignatureVerifier(_NoteKey):
    """An ML-DSA-44 subtree/v1 verifier key; a :class:`ledger.core.note.NoteVerifier`.

    As a note verifier it checks a checkpoint's line (the subtree ``[0, size)``); subtrees with
    another start have no note form and are checked with :meth:`verify_subtree`.
    """

    __slots__ = ("_key", "_public_key")
    KEY_TYPE = KEY_TYPE_SUBTREE_V1

    def __init__(self, name: str, public_key: bytes) -> None:
        _check_key_name(name)
        if not isinstance(public_key, bytes) or len(public_key) != MLDSA44_PUBLIC_KEY_SIZE:
            raise NoteError(f"ML-DSA-44 public key must be {MLDSA44_PUBLIC_KEY_SIZE} bytes")
        try:
            self._key = MLDSA44PublicKey.from_public_bytes(public_key)
        except ValueError as exc:
            raise NoteError(f"bad ML-DSA-44 public key: {exc}") from None
        self._name = name
        self._public_key = public_key
        self._key_id = key_id(name, KEY_TYPE_SUBTREE_V1, public_key)

    @classmethod
    def from_vkey(cls, text: str) -> Self:
        """Read ``<name>+<hex id>+<base64(0x06 ‖ 1,312-byte key)>``; the key ID must match."""
        name, _, key_type, material = parse_vkey_text(text)
        _check_type("verifier", key_type)
        return cls(name, material)

    @property
    def public_key(self) -> bytes:
        return self._public_key

    @property
    def vkey(self) -> str:
        """The verifier key text, the form operators publish and pin."""
        blob = bytes([KEY_TYPE_SUBTREE_V1]) + self._public_key
        return f"{self._name}+{self._key_id:08x}+{base64.b64encode(blob).decode('ascii')}"

    @staticmethod
    def timestamp(signature: bytes) -> int:
        """The timestamp a signature field claims (only meaningful once it has verified)."""
        if len(signature) != SUBTREE_SIGNATURE_SIZE:
            raise NoteError(f"subtree/v1 signature is {len(signature)} bytes, "
                            f"want {SUBTREE_SIGNATURE_SIZE}")
        return int.from_bytes(signature[:_TIMESTAMP_SIZE], "big")

    def verify_subtree(
        self, origin: str, start: int, end: int, root: bytes, signature: bytes
    ) -> bool:
        """Whether ``signature`` (timestamp ‖ ML-DSA-44 signature) signs this subtree.

        Any malformed part is a plain False: a verifier answers yes or no.
        """
        if len(signature) != SUBTREE_SIGNATURE_SIZE:
            return False
        timestamp = int.from_bytes(signature[:_TIMESTAMP_SIZE], "big")
        try:
            message = subtree_message(self._name, timestamp, origin, start, end, root)
            self._key.verify(signature[_TIMESTAMP_SIZE:], message)
        except (NoteError, InvalidSignature):
            return False
        return True

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` signs the checkpoint whose note text is ``message``."""
        try:
            origin, size, root = _checkpoint_fields(message)
        except (NoteError, UnicodeDecodeError, ValueError):
            return False
        return self.verify_subtree(origin, 0, size, root, signature)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SubtreeCosignatureVerifier):
            return NotImplemented
        return self._name == other._name and self._public_key == other._public_key

    def __hash__(self) -> int:
        return hash((KEY_TYPE_SUBTREE_V1, self._name, self._public_key))

    def __repr__(self) -> str:
        return f"SubtreeCosignatureVerifier({self._name}+{self._key_id:08x})"


class SubtreeCosignatureSigner(_NoteKey):
    """An ML-DSA-44 subtree/v1 signing key: a log's second checkpoint signature, or a witness's
    post-quantum cosigning key."""

    __slots__ = ("_key", "_seed")
    KEY_TYPE = KEY_TYPE_SUBTREE_V1

    def __init__(self, name: str, seed: bytes) -> None:
        _check_key_name(name)
        if not isinstance(seed, bytes) or len(seed) != _SEED_SIZE:
            raise NoteError("ML-DSA-44 seed must be 32 bytes")
        self._name = name
        self._seed = seed
        self._key = MLDSA44PrivateKey.from_seed_bytes(seed)
        self._key_id = key_id(name, KEY_TYPE_SUBTREE_V1, self.public_key)

    @classmethod
    def generate(cls, name: str) -> Self:
        """A fresh key from the operating system's CSPRNG."""
        return cls(name, secrets.token_bytes(_SEED_SIZE))

    @classmethod
    def derived_from(cls, log_signer: Ed25519Signer) -> Self:
        """The log's ML-DSA-44 key, derived from its Ed25519 key: same name (the origin), seed
        SHA-256(label ‖ Ed25519 seed).

        Deriving it means every process holding ``log.key`` signs with the same ML-DSA-44 key
        (frontends cannot drift apart, an existing data directory needs no new file), and it
        keeps the post-quantum promise: an attacker who breaks Ed25519 recovers the secret
        scalar from the public key, and the scalar is SHA-512 of the seed, which does not lead
        back to the seed. Only a stolen key file gives both keys away, as it would if both
        files sat side by side.
        """
        seed = hashlib.sha256(_DERIVATION_LABEL + log_signer.seed).digest()
        return cls(log_signer.name, seed)

    @classmethod
    def from_private_key(cls, text: str) -> Self:
        """Read ``PRIVATE+KEY+<name>+<hex id>+<base64(0x06 ‖ seed)>``; the key ID must match."""
        name, kid, key_type, material = parse_private_key_text(text)
        _check_type("private", key_type)
        if len(material) != _SEED_SIZE:
            raise NoteError("ML-DSA-44 private key must hold a 32-byte seed")
        signer = cls(name, material)
        if signer.key_id != kid:
            raise NoteError(f"private key ID {kid:08x} does not match name and key")
        return signer

    @property
    def public_key(self) -> bytes:
        return self._key.public_key().public_bytes_raw()

    def private_key_text(self) -> str:
        """The secret key text; whoever holds it can sign as this key."""
        blob = bytes([KEY_TYPE_SUBTREE_V1]) + self._seed
        return (f"PRIVATE+KEY+{self._name}+{self._key_id:08x}+"
                f"{base64.b64encode(blob).decode('ascii')}")

    def verifier(self) -> SubtreeCosignatureVerifier:
        return SubtreeCosignatureVerifier(self._name, self.public_key)

    def verifier_key_text(self) -> str:
        return self.verifier().vkey

    def sign_subtree(
        self, origin: str, start: int, end: int, root: bytes, timestamp: int = 0
    ) -> NoteSignature:
        """Sign a subtree; the result is a note signature line's parts (name, ID, field)."""
        message = subtree_message(self._name, timestamp, origin, start, end, root)
        field = timestamp.to_bytes(_TIMESTAMP_SIZE, "big") + self._key.sign(message)
        return NoteSignature(name=self._name, key_id=self._key_id, signature=field)

    def sign_message(self, message: bytes) -> bytes:
        """A bare pure ML-DSA-44 signature (empty context) of ``message``: what COSE's
        ML-DSA-44 (-48, RFC 9964) signs a COSE receipt's ``Sig_structure`` with."""
        return self._key.sign(message)

    def cosign(self, checkpoint_text: str, timestamp: int) -> NoteSignature:
        """Sign a checkpoint (the subtree ``[0, size)``) at ``timestamp`` (POSIX seconds)."""
        origin, size, root = _checkpoint_fields(checkpoint_text)
        return self.sign_subtree(origin, 0, size, root, timestamp)

    def __repr__(self) -> str:  # never print the seed
        return f"SubtreeCosignatureSigner(name={self._name!r}, key_id={self._key_id:08x})"
