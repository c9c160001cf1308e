"""C2SP tlog-cosignature, Ed25519 ``cosignature/v1`` (signature type 0x04): witness cosignatures.

A witness that has checked a checkpoint is consistent with everything it saw before signs
``cosignature/v1\\ntime <ts>\\n`` followed by the checkpoint text, and adds to the checkpoint a
note signature line whose signature field is the 8-byte big-endian timestamp followed by the
64-byte Ed25519 signature (https://c2sp.org/tlog-cosignature). The key ID uses type byte 0x04, so
a witness key can never be mistaken for a plain Ed25519 note key.

Pure code: the timestamp is an argument, never read from a clock here.
"""

from __future__ import annotations

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import (
    KEY_TYPE_COSIGNATURE_V1,
    KEY_TYPE_ED25519,
    KEY_TYPE_SUBTREE_V1,
    Ed25519Verifier,
    NoteError,
    NoteSignature,
    NoteVerifier,
    _Ed25519PrivateKey,
    _Ed25519PublicKey,
    parse_vkey_text,
)
from ledger.core.subtree_cosignature import SubtreeCosignatureVerifier

__all__ = [
    "COSIGNATURE_SIZE",
    "MAX_TIMESTAMP",
    "CosignatureSigner",
    "CosignatureVerifier",
    "LogVerifier",
    "WitnessVerifier",
    "cosignature_timestamp",
    "cosigned_message",
    "parse_log_key",
    "parse_verifier_key",
    "parse_witness_key",
]

#: Timestamps are u64 on the wire but the spec caps them at 2^63 - 1 (a signed POSIX time).
MAX_TIMESTAMP = (1 << 63) - 1
_TIMESTAMP_SIZE = 8
_ED25519_SIGNATURE_SIZE = 64
#: Length of the signature field of a cosignature/v1 line (after the 4-byte key ID).
COSIGNATURE_SIZE = _TIMESTAMP_SIZE + _ED25519_SIGNATURE_SIZE


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


class CosignatureVerifier(_Ed25519PublicKey):
    """A witness's cosignature/v1 verifier key; a :class:`NoteVerifier` for ``open_note``."""

    __slots__ = ()
    KEY_TYPE = KEY_TYPE_COSIGNATURE_V1
    _TYPE_LABEL = "an Ed25519 cosignature key"
    _KIND = "cosignature"

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
        return self._verify_ed25519(signed, signature[_TIMESTAMP_SIZE:])


class CosignatureSigner(_Ed25519PrivateKey):
    """A witness's cosignature/v1 signing key (Ed25519 seed, key ID with type byte 0x04)."""

    __slots__ = ()
    KEY_TYPE = KEY_TYPE_COSIGNATURE_V1
    _TYPE_LABEL = "an Ed25519 cosignature key"
    _KIND = "cosignature"
    # A plain Ed25519 note key (type 0x01, key ID checked under type 0x01) is accepted by
    # from_private_key too, as transparency-dev/formats does, so a witness key made with Go's
    # ``note.GenerateKey`` can be used; the resulting cosigner still signs under the type-0x04
    # key ID.
    _ALSO_ACCEPTED_TYPES = (KEY_TYPE_ED25519,)

    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier(self._name, self.public_key)

    def cosign(self, checkpoint_text: str, timestamp: int) -> NoteSignature:
        """Cosign a checkpoint text at ``timestamp`` (POSIX seconds); returns the note line.

        The text must be a well-formed checkpoint: a witness vouches for tree heads, and signing
        anything else would let a caller obtain the witness's signature on arbitrary text.
        """
        parse_checkpoint_text(checkpoint_text)
        message = cosigned_message(checkpoint_text, timestamp)
        return NoteSignature(
            name=self._name,
            key_id=self._key_id,
            signature=timestamp.to_bytes(_TIMESTAMP_SIZE, "big") + self._sign_ed25519(message),
        )


def parse_verifier_key(text: str) -> NoteVerifier:
    """A verifier for a vkey of any supported type: 0x01 (Ed25519), 0x04 (cosignature/v1) or
    0x06 (ML-DSA-44 subtree/v1).

    Lets configuration list log and witness keys in one form and have the type byte decide.
    """
    _, _, key_type, _ = parse_vkey_text(text)
    if key_type == KEY_TYPE_ED25519:
        return Ed25519Verifier.from_vkey(text)
    if key_type == KEY_TYPE_COSIGNATURE_V1:
        return CosignatureVerifier.from_vkey(text)
    if key_type == KEY_TYPE_SUBTREE_V1:
        return SubtreeCosignatureVerifier.from_vkey(text)
    raise NoteError(f"unsupported verifier key type 0x{key_type:02x}")


#: A log's checkpoint key: Ed25519 (0x01) or ML-DSA-44 subtree/v1 (0x06).
LogVerifier = Ed25519Verifier | SubtreeCosignatureVerifier
#: A witness's (or mirror's) key: Ed25519 cosignature/v1 (0x04) or ML-DSA-44 subtree/v1 (0x06).
WitnessVerifier = CosignatureVerifier | SubtreeCosignatureVerifier


def _type_of(text: str) -> int:
    _, _, key_type, _ = parse_vkey_text(text)
    return key_type


def parse_log_key(text: str) -> LogVerifier:
    """A log verifier key: Ed25519 (0x01) or ML-DSA-44 (0x06); a witness key is refused."""
    key_type = _type_of(text)
    if key_type == KEY_TYPE_ED25519:
        return Ed25519Verifier.from_vkey(text)
    if key_type == KEY_TYPE_SUBTREE_V1:
        return SubtreeCosignatureVerifier.from_vkey(text)
    raise NoteError(f"key type 0x{key_type:02x} is not a log key (Ed25519 0x01 or "
                    "ML-DSA-44 0x06)")


def parse_witness_key(text: str) -> WitnessVerifier:
    """A witness (or mirror) verifier key: cosignature/v1 (0x04) or ML-DSA-44 (0x06)."""
    key_type = _type_of(text)
    if key_type == KEY_TYPE_COSIGNATURE_V1:
        return CosignatureVerifier.from_vkey(text)
    if key_type == KEY_TYPE_SUBTREE_V1:
        return SubtreeCosignatureVerifier.from_vkey(text)
    raise NoteError(f"key type 0x{key_type:02x} is not a witness key (cosignature/v1 0x04 or "
                    "ML-DSA-44 0x06)")
