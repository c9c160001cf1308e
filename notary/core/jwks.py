"""The receipt keys a verifier trusts: an RFC 8037 OKP/Ed25519 JWKS (pure, no I/O).

The notary publishes every receipt key it ever signed with at ``/.well-known/jwks.json``, each
under its RFC 7638 thumbprint as ``kid`` (so a JWKS cannot list a key under another key's name),
and old keys stay after rotation so old receipts still verify. :class:`Jwks` reads such a
document strictly and checks a receipt's signature against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import nacl.exceptions
import nacl.signing

from notary.core.canonical import CanonicalizationError
from notary.core.errors import NotaryBaseError
from notary.core.ids import b64url_decode, b64url_encode
from notary.core.receipts import (
    RECEIPT_ALG,
    SIGNATURE_KEYS,
    Receipt,
    ReceiptKey,
    ReceiptSignatureError,
    jwk_thumbprint,
    signed_bytes,
)

__all__ = ["Jwks", "JwksError"]


class JwksError(NotaryBaseError, ValueError):
    """A JWKS, or an Ed25519 key in it, is malformed."""



def _parse_ed25519_jwk(jwk: Mapping[str, object], where: str) -> tuple[str, bytes]:
    """(kid, public key) of an OKP/Ed25519 JWK, refusing anything malformed or private."""
    if "d" in jwk:
        raise JwksError(f"{where}: contains a private key ('d'); a JWKS must be public")
    x = jwk.get("x")
    if not isinstance(x, str):
        raise JwksError(f"{where}: 'x' must be a base64url string")
    try:
        public = b64url_decode(x)
    except ValueError as exc:
        raise JwksError(f"{where}: 'x' {exc}") from None
    if len(public) != 32:
        raise JwksError(f"{where}: 'x' must encode 32 bytes, got {len(public)}")
    thumbprint = jwk_thumbprint(x)
    kid = jwk.get("kid", thumbprint)
    if kid != thumbprint:
        raise JwksError(f"{where}: kid {kid!r} is not the key's RFC 7638 thumbprint {thumbprint!r}")
    alg = jwk.get("alg", RECEIPT_ALG)
    if alg not in (RECEIPT_ALG, "Ed25519"):
        raise JwksError(f"{where}: alg {alg!r} does not fit an Ed25519 key")
    if jwk.get("use", "sig") != "sig":
        raise JwksError(f"{where}: use {jwk.get('use')!r} is not 'sig'")
    key_ops = jwk.get("key_ops")
    if key_ops is not None and (not isinstance(key_ops, list) or "verify" not in key_ops):
        raise JwksError(f"{where}: key_ops does not allow 'verify'")
    return thumbprint, public


class Jwks:
    """The trusted receipt keys, by kid; verifies receipt signatures.

    Built from a JWKS document. Keys that are not OKP/Ed25519 (RSA, EC, X25519, Ed448)
    are skipped, since receipts are only ever signed with Ed25519; an Ed25519 key that is
    malformed, carries private material or whose kid is not its thumbprint is refused with
    :class:`JwksError` rather than skipped, because a broken trust anchor should be loud.
    """

    __slots__ = ("_keys",)

    def __init__(self, jwks: Mapping[str, object]) -> None:
        if not isinstance(jwks, Mapping):
            raise JwksError("a JWKS must be an object")
        keys = jwks.get("keys")
        if not isinstance(keys, list):
            raise JwksError("a JWKS needs a 'keys' array")
        self._keys: dict[str, bytes] = {}
        for i, jwk in enumerate(keys):
            where = f"keys[{i}]"
            if not isinstance(jwk, Mapping):
                raise JwksError(f"{where}: must be an object")
            if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
                continue
            kid, public = _parse_ed25519_jwk(jwk, where)
            self._keys[kid] = public

    @classmethod
    def from_keys(cls, keys: Iterable[ReceiptKey]) -> Jwks:
        """The JWKS publishing these keys (current and retired ones alike)."""
        return cls({"keys": [k.public_jwk() for k in keys]})

    @property
    def kids(self) -> list[str]:
        """Kids of the trusted keys, in JWKS order."""
        return list(self._keys)

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def to_json(self) -> dict[str, object]:
        """The JWKS document for ``/.well-known/jwks.json`` (Ed25519 keys only)."""
        return {
            "keys": [
                {
                    "kty": "OKP",
                    "crv": "Ed25519",
                    "x": b64url_encode(public),
                    "kid": kid,
                    "alg": RECEIPT_ALG,
                    "use": "sig",
                }
                for kid, public in self._keys.items()
            ]
        }

    def verify(self, receipt: Receipt | Mapping[str, object]) -> None:
        """Check the receipt's signature; raises :class:`ReceiptSignatureError`.

        Only the signature is checked here (over the receipt as given, minus
        ``signature`` and ``proof``); use :func:`validate_receipt_shape` (or parse it with
        :meth:`Receipt.from_json`) for the shape.
        """
        if isinstance(receipt, Receipt):
            if receipt.signature is None:
                raise ReceiptSignatureError("missing", "receipt has no signature")
            alg, kid, sig = receipt.signature.alg, receipt.signature.kid, receipt.signature.sig
        else:
            if not isinstance(receipt, Mapping):
                raise ReceiptSignatureError("malformed", "receipt must be an object")
            if "signature" not in receipt:
                raise ReceiptSignatureError("missing", "receipt has no signature")
            signature = receipt["signature"]
            if not isinstance(signature, Mapping) or set(signature) != SIGNATURE_KEYS:
                raise ReceiptSignatureError(
                    "malformed", "signature must be an object with exactly alg, kid and sig"
                )
            alg, kid, sig = signature["alg"], signature["kid"], signature["sig"]
        if alg != RECEIPT_ALG:
            raise ReceiptSignatureError("bad_alg", f"alg {alg!r} is not {RECEIPT_ALG!r}")
        if not isinstance(kid, str) or kid not in self._keys:
            raise ReceiptSignatureError("unknown_kid", f"no trusted receipt key has kid {kid!r}")
        if not isinstance(sig, str):
            raise ReceiptSignatureError("malformed", "sig must be a base64url string")
        try:
            raw_sig = b64url_decode(sig)
        except ValueError as exc:
            raise ReceiptSignatureError("malformed", f"sig: {exc}") from None
        if len(raw_sig) != 64:
            raise ReceiptSignatureError(
                "malformed", f"sig must encode 64 bytes, got {len(raw_sig)}"
            )
        try:
            message = signed_bytes(receipt)
        except CanonicalizationError as exc:
            raise ReceiptSignatureError(
                "malformed", f"receipt is not canonical JSON: {exc}"
            ) from exc
        try:
            nacl.signing.VerifyKey(self._keys[kid]).verify(message, raw_sig)
        except nacl.exceptions.CryptoError:
            raise ReceiptSignatureError(
                "bad_signature", f"Ed25519 signature does not verify under kid {kid!r}"
            ) from None
