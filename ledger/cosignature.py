"""C2SP tlog-cosignature, Ed25519 ``cosignature/v1`` (signature type 0x04): witness cosignatures.

A witness that has checked a checkpoint is consistent with everything it saw before signs
``cosignature/v1\\ntime <ts>\\n`` followed by the checkpoint text, and adds to the checkpoint a
note signature line whose signature field is the 8-byte big-endian timestamp followed by the
64-byte Ed25519 signature (https://c2sp.org/tlog-cosignature). The key ID uses type byte 0x04, so
a witness key can never be mistaken for a plain Ed25519 note key.

Pure code: the timestamp is an argument, never read from a clock here.
"""

from __future__ import annotations

import base64
import os

import nacl.exceptions
import nacl.signing

from ledger.checkpoint import parse_checkpoint_text
from ledger.note import (
    KEY_TYPE_COSIGNATURE_V1,
    KEY_TYPE_ED25519,
    Ed25519Verifier,
    NoteError,
    NoteSignature,
    NoteVerifier,
    is_valid_key_name,
    key_id,
    parse_private_key_text,
    parse_vkey_text,
)

__all__ = [
    "COSIGNATURE_SIZE",
    "MAX_TIMESTAMP",
    "CosignatureSigner",
    "CosignatureVerifier",
    "cosignature_timestamp",
    "cosigned_message",
    "parse_verifier_key",
]

#: Timestamps are u64 on the wire but the spec caps them at 2^63 - 1 (a signed POSIX time).
MAX_TIMESTAMP = (1 << 63) - 1
_TIMESTAMP_SIZE = 8
_ED25519_SIGNATURE_SIZE = 64
#: Length of the signature field of a cosignature/v1 line (after the 4-byte key ID).
COSIGNATURE_SIZE = _TIMESTAMP_SIZE + _ED25519_SIGNATURE_SIZE
_SEED_SIZE = 32
_PUBLIC_KEY_SIZE = 32


def _check_timestamp(timestamp: int) -> None:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise NoteError("cosignature timestamp must be an integer")
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise NoteError(f"cosignature timestamp {timestamp} is outside 0..2^63-1")


def cosigned_message(checkpoint_text: str | bytes, timestamp: int) -> bytes:
    """The bytes a cosignature/v1 signs: header line, time line, then the checkpoint text.

    The checkpoint text is the whole note text (extension lines included, signatures excluded).
    """
    _check_timestamp(timestamp)
    body = checkpoint_text.encode("utf-8") if isinstance(checkpoint_text, str) else checkpoint_text
    return b"cosignature/v1\ntime %d\n" % timestamp + bytes(body)


def _timestamp_of(signature: bytes) -> int:
    if len(signature) != COSIGNATURE_SIZE:
        raise NoteError(
            f"cosignature is {len(signature)} bytes, want {COSIGNATURE_SIZE} (timestamp ‖ sig)"
        )
    return int.from_bytes(signature[:_TIMESTAMP_SIZE], "big")


def cosignature_timestamp(sig: NoteSignature) -> int:
    """The timestamp a cosignature line claims (only meaningful once the line has verified)."""
    return _timestamp_of(sig.signature)


class CosignatureVerifier:
    """A witness's cosignature/v1 verifier key; a :class:`NoteVerifier` for ``open_note``."""

    __slots__ = ("_key_id", "_name", "_public_key", "_verify_key")

    def __init__(self, name: str, public_key: bytes) -> None:
        if not is_valid_key_name(name):
            raise NoteError(f"invalid key name {name!r}")
        if not isinstance(public_key, bytes) or len(public_key) != _PUBLIC_KEY_SIZE:
            raise NoteError("Ed25519 public key must be 32 bytes")
        self._name = name
        self._public_key = public_key
        self._key_id = key_id(name, KEY_TYPE_COSIGNATURE_V1, public_key)
        self._verify_key = nacl.signing.VerifyKey(public_key)

    @classmethod
    def from_vkey(cls, text: str) -> CosignatureVerifier:
        """Read ``<name>+<hex id>+<base64(0x04 ‖ 32-byte key)>``; the key ID must match."""
        name, _, key_type, material = parse_vkey_text(text)
        if key_type != KEY_TYPE_COSIGNATURE_V1:
            raise NoteError(
                f"verifier key type 0x{key_type:02x} is not an Ed25519 cosignature key (0x04)"
            )
        if len(material) != _PUBLIC_KEY_SIZE:
            raise NoteError("cosignature verifier key must hold 32 bytes of key")
        return cls(name, material)

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> int:
        return self._key_id

    @property
    def public_key(self) -> bytes:
        return self._public_key

    @property
    def vkey(self) -> str:
        blob = bytes([KEY_TYPE_COSIGNATURE_V1]) + self._public_key
        return f"{self._name}+{self._key_id:08x}+{base64.b64encode(blob).decode('ascii')}"

    @staticmethod
    def timestamp(signature: bytes) -> int:
        """The timestamp in a cosignature field (8-byte big-endian prefix of ``signature``)."""
        return _timestamp_of(signature)

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` (timestamp ‖ Ed25519 sig) cosigns the note text ``message``."""
        if len(signature) != COSIGNATURE_SIZE:
            return False
        timestamp = int.from_bytes(signature[:_TIMESTAMP_SIZE], "big")
        if timestamp > MAX_TIMESTAMP:
            return False
        signed = cosigned_message(bytes(message), timestamp)
        try:
            self._verify_key.verify(signed, bytes(signature[_TIMESTAMP_SIZE:]))
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError):
            return False
        return True

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CosignatureVerifier):
            return NotImplemented
        return self._name == other._name and self._public_key == other._public_key

    def __hash__(self) -> int:
        return hash((CosignatureVerifier, self._name, self._public_key))

    def __repr__(self) -> str:
        return f"CosignatureVerifier({self.vkey!r})"


class CosignatureSigner:
    """A witness's cosignature/v1 signing key (Ed25519 seed, key ID with type byte 0x04)."""

    __slots__ = ("_key_id", "_name", "_seed", "_signing_key")

    def __init__(self, name: str, seed: bytes) -> None:
        if not is_valid_key_name(name):
            raise NoteError(f"invalid key name {name!r}")
        if not isinstance(seed, bytes) or len(seed) != _SEED_SIZE:
            raise NoteError("Ed25519 seed must be 32 bytes")
        self._name = name
        self._seed = seed
        self._signing_key = nacl.signing.SigningKey(seed)
        self._key_id = key_id(name, KEY_TYPE_COSIGNATURE_V1, self.public_key)

    @classmethod
    def generate(cls, name: str) -> CosignatureSigner:
        """A fresh witness key from the operating system's CSPRNG."""
        return cls(name, os.urandom(_SEED_SIZE))

    @classmethod
    def from_private_key(cls, text: str) -> CosignatureSigner:
        """Read ``PRIVATE+KEY+<name>+<hex id>+<base64(0x04 ‖ seed)>``; the key ID must match.

        A plain Ed25519 note key (type 0x01, key ID checked under type 0x01) is accepted too, as
        transparency-dev/formats does, so a witness key made with Go's ``note.GenerateKey`` can
        be used; the resulting cosigner still signs under the type-0x04 key ID.
        """
        name, kid, key_type, material = parse_private_key_text(text)
        if key_type not in (KEY_TYPE_COSIGNATURE_V1, KEY_TYPE_ED25519):
            raise NoteError(
                f"private key type 0x{key_type:02x} is not an Ed25519 cosignature key (0x04)"
            )
        if len(material) != _SEED_SIZE:
            raise NoteError("cosignature private key must hold a 32-byte seed")
        signer = cls(name, material)
        if key_id(name, key_type, signer.public_key) != kid:
            raise NoteError(f"private key ID {kid:08x} does not match name and key")
        return signer

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> int:
        return self._key_id

    @property
    def public_key(self) -> bytes:
        return bytes(self._signing_key.verify_key)

    @property
    def seed(self) -> bytes:
        return self._seed

    def private_key_text(self) -> str:
        blob = bytes([KEY_TYPE_COSIGNATURE_V1]) + self._seed
        encoded = base64.b64encode(blob).decode("ascii")
        return f"PRIVATE+KEY+{self._name}+{self._key_id:08x}+{encoded}"

    def verifier_key_text(self) -> str:
        return self.verifier().vkey

    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier(self._name, self.public_key)

    def cosign(self, checkpoint_text: str, timestamp: int) -> NoteSignature:
        """Cosign a checkpoint text at ``timestamp`` (POSIX seconds); returns the note line.

        The text must be a well-formed checkpoint: a witness vouches for tree heads, and signing
        anything else would let a caller obtain the witness's signature on arbitrary text.
        """
        parse_checkpoint_text(checkpoint_text)
        message = cosigned_message(checkpoint_text, timestamp)
        sig = bytes(self._signing_key.sign(message).signature)
        return NoteSignature(
            name=self._name,
            key_id=self._key_id,
            signature=timestamp.to_bytes(_TIMESTAMP_SIZE, "big") + sig,
        )

    def __repr__(self) -> str:  # never print the seed
        return f"CosignatureSigner(name={self._name!r}, key_id={self._key_id:08x})"


def parse_verifier_key(text: str) -> NoteVerifier:
    """A verifier for a vkey of any supported type: 0x01 (Ed25519) or 0x04 (cosignature/v1).

    Lets configuration list log and witness keys in one form and have the type byte decide.
    """
    _, _, key_type, _ = parse_vkey_text(text)
    if key_type == KEY_TYPE_ED25519:
        return Ed25519Verifier.from_vkey(text)
    if key_type == KEY_TYPE_COSIGNATURE_V1:
        return CosignatureVerifier.from_vkey(text)
    raise NoteError(f"unsupported verifier key type 0x{key_type:02x}")
