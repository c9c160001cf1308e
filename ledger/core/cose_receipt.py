"""RFC 9942 COSE Receipts of inclusion for our RFC 9162 tree: build, parse strictly, verify.

A receipt is a COSE_Sign1 (RFC 9052 §4.2, tag 18) by the log over a tree root, with the
inclusion proof of one leaf in its unprotected header (RFC 9942 §5.2, VDS 1
``RFC9162_SHA256``)::

    18([ << {1: alg, 4: kid, 15: {1: issuer, 6: iat}, 395: 1} >>,     protected
         {396: {-1: [ << [tree_size, leaf_index, [path...]] >> ]}},    unprotected
         nil,                                                          payload: detached root
         signature ])                                                  over Sig_structure

The signature covers ``["Signature1", protected, h'', root]`` (RFC 9052 §4.4), so one
signature per root serves every leaf under it: the proof varies, the signed bytes do not
(:class:`SignedRoot` is that signature, made once; :func:`encode_receipt` attaches a proof).
A verifier rebuilds the root from the leaf and the path and checks the signature over it.

Choices (docs/scitt.md says them to users):

- Everything we emit is in RFC 8949 §4.2.1 core deterministic encoding. The parser requires
  well-formed, definite-length, minimal encoding without duplicate keys or trailing bytes
  (a receipt has one encoding), but not a key order: other encoders (scitt-cose) do not sort.
- A one-leaf tree's path is empty (its root is the leaf hash, RFC 9162 §2.1.3.1), which
  RFC 9942's CDDL ``[+ bstr]`` does not allow for. We emit and accept the empty path for
  ``tree_size == 1`` only: the path must always have exactly the length RFC 9162 gives it.
- Exactly one inclusion proof per receipt (the CDDL allows several; ours are for one leaf).
- ``kid`` is the RFC 9679 COSE Key Thumbprint (SHA-256) of the key, as SCRAPI recommends.
- Algorithms: EdDSA (-8, Ed25519) and ML-DSA-44 (-48, RFC 9964, pure, empty context).

Pure code: time (``iat``) is an argument.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cbor2
import nacl.exceptions
import nacl.signing
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PublicKey

from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE, leaf_hash
from ledger.core.note import Ed25519Signer
from ledger.core.proofs import ProofError, inclusion_plan, root_from_inclusion_proof
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner

__all__ = [
    "ALG_EDDSA",
    "ALG_ML_DSA_44",
    "MEDIA_TYPE",
    "CoseKey",
    "CoseReceipt",
    "CoseReceiptError",
    "CoseSigner",
    "SignedRoot",
    "cose_key_set",
    "encode_receipt",
    "parse_receipt",
    "sig_structure",
    "sign_root",
    "verify_receipt",
]

#: The registered media type of a COSE receipt (RFC 9943).
MEDIA_TYPE = "application/scitt-receipt+cose"

ALG_EDDSA = -8  # RFC 9053: EdDSA (here always Ed25519)
ALG_ML_DSA_44 = -48  # RFC 9964: ML-DSA-44

_TAG_SIGN1 = 18
_HDR_ALG, _HDR_CRIT, _HDR_KID, _HDR_CWT = 1, 2, 4, 15
_HDR_VDS, _HDR_VDP = 395, 396
_VDS_RFC9162_SHA256 = 1
_VDP_INCLUSION = -1
_CWT_ISS, _CWT_IAT = 1, 6
#: Protected labels we read, so a ``crit`` naming them is understood (RFC 9052 §3.1).
_UNDERSTOOD = frozenset({_HDR_ALG, _HDR_CRIT, _HDR_KID, _HDR_CWT, _HDR_VDS})

_SIGNATURE_SIZE = {ALG_EDDSA: 64, ALG_ML_DSA_44: 2420}
_PUBLIC_KEY_SIZE = {ALG_EDDSA: 32, ALG_ML_DSA_44: 1312}
_ALG_NAME = {ALG_EDDSA: "EdDSA", ALG_ML_DSA_44: "ML-DSA-44"}
#: Larger than any receipt of ours (an ML-DSA-44 signature and a 63-hash path are under 5 KiB).
MAX_RECEIPT_SIZE = 16 * 1024
_MAX_TREE_SIZE = (1 << 63) - 1
#: Nesting levels a receipt's CBOR may have (ours have 5; the JavaScript verifier shares it).
MAX_CBOR_DEPTH = 16


class CoseReceiptError(LedgerError, ValueError):
    """A COSE receipt that is malformed, or that does not verify."""


def _dumps(value: object) -> bytes:
    return cbor2.dumps(value, canonical=True)


def sig_structure(protected: bytes, payload: bytes) -> bytes:
    """RFC 9052 §4.4 ``Sig_structure`` of a COSE_Sign1 with empty external AAD."""
    return _dumps(["Signature1", protected, b"", payload])


# Keys -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoseKey:
    """A public key that verifies receipts: its algorithm and raw public key bytes."""

    alg: int
    public_key: bytes

    def __post_init__(self) -> None:
        if _PUBLIC_KEY_SIZE.get(self.alg) != len(self.public_key):
            raise CoseReceiptError(f"not a {_ALG_NAME.get(self.alg, self.alg)} public key")

    @property
    def alg_name(self) -> str:
        return _ALG_NAME[self.alg]

    def _thumbprint_params(self) -> dict[int, object]:
        if self.alg == ALG_EDDSA:  # RFC 9679 §4: OKP needs kty, crv, x
            return {1: 1, -1: 6, -2: self.public_key}
        return {1: 7, 3: ALG_ML_DSA_44, -1: self.public_key}  # RFC 9964: AKP kty, alg, pub

    @property
    def kid(self) -> bytes:
        """RFC 9679 COSE Key Thumbprint: SHA-256 of the required parameters, deterministic."""
        return hashlib.sha256(_dumps(self._thumbprint_params())).digest()

    def cose_key(self) -> dict[int, object]:
        """The COSE_Key map (RFC 9052 §7) with ``kid`` and ``alg``."""
        return {**self._thumbprint_params(), 2: self.kid, 3: self.alg}

    def verify(self, message: bytes, signature: bytes) -> bool:
        """EdDSA by libsodium's rules, as every Ed25519 signature our verifiers check (the
        JavaScript one follows them): OpenSSL's would accept, say, a small-order R."""
        if len(signature) != _SIGNATURE_SIZE[self.alg]:
            return False
        try:
            if self.alg == ALG_EDDSA:
                nacl.signing.VerifyKey(self.public_key).verify(message, signature)
            else:
                MLDSA44PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except (InvalidSignature, nacl.exceptions.BadSignatureError, ValueError):
            return False
        return True


def cose_key_set(keys: Sequence[CoseKey]) -> bytes:
    """A COSE_KeySet (RFC 9052 §7): the body of SCRAPI's ``/.well-known/scitt-keys``."""
    return _dumps([k.cose_key() for k in keys])


@dataclass(frozen=True)
class CoseSigner:
    """A key that signs roots: its public half and a function making raw signatures."""

    key: CoseKey
    sign: Callable[[bytes], bytes]

    @classmethod
    def ed25519(cls, signer: Ed25519Signer) -> CoseSigner:
        """The log's Ed25519 key (the one that signs its checkpoints) as an EdDSA signer."""
        return cls(CoseKey(ALG_EDDSA, signer.public_key), signer.sign)

    @classmethod
    def ml_dsa_44(cls, signer: SubtreeCosignatureSigner) -> CoseSigner:
        """The log's ML-DSA-44 key (its second checkpoint signature) as an ML-DSA-44 signer."""
        return cls(CoseKey(ALG_ML_DSA_44, signer.public_key), signer.sign_message)


# Signing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignedRoot:
    """The log's COSE signature over the root of the tree of ``tree_size``: what every receipt
    for a leaf of that tree shares."""

    tree_size: int
    root: bytes
    protected: bytes
    signature: bytes


def protected_header(key: CoseKey, issuer: str, iat: int | None) -> bytes:
    claims: dict[int, object] = {_CWT_ISS: issuer}
    if iat is not None:
        claims[_CWT_IAT] = iat
    return _dumps({_HDR_ALG: key.alg, _HDR_KID: key.kid, _HDR_CWT: claims,
                   _HDR_VDS: _VDS_RFC9162_SHA256})


def sign_root(signer: CoseSigner, *, issuer: str, tree_size: int, root: bytes,
              iat: int | None) -> SignedRoot:
    """Sign the root of the tree of ``tree_size`` (the caller vouches it is the log's)."""
    if not 1 <= tree_size <= _MAX_TREE_SIZE or len(root) != HASH_SIZE:
        raise CoseReceiptError("a signed root needs a tree size of at least 1 and a 32-byte root")
    protected = protected_header(signer.key, issuer, iat)
    signature = signer.sign(sig_structure(protected, root))
    return SignedRoot(tree_size, root, protected, signature)


def encode_receipt(signed: SignedRoot, leaf_index: int, path: Sequence[bytes]) -> bytes:
    """The receipt of the leaf at ``leaf_index`` under ``signed`` (``path`` in RFC 9162 order)."""
    if not 0 <= leaf_index < signed.tree_size:
        raise CoseReceiptError(f"leaf {leaf_index} is not in a tree of size {signed.tree_size}")
    proof = _dumps([signed.tree_size, leaf_index, list(path)])
    return _dumps(cbor2.CBORTag(_TAG_SIGN1, [
        signed.protected, {_HDR_VDP: {_VDP_INCLUSION: [proof]}}, None, signed.signature]))


# Parsing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoseReceipt:
    """A well-formed receipt of inclusion, not yet verified."""

    protected: bytes
    alg: int
    kid: bytes | None
    issuer: str | None
    iat: int | None
    tree_size: int
    leaf_index: int
    path: tuple[bytes, ...]
    signature: bytes

    @property
    def alg_name(self) -> str:
        return _ALG_NAME[self.alg]


def _plain(value: object, depth: int, what: str) -> None:
    """Refuse what our receipts never hold, so that every verifier (the JavaScript one too,
    js/src/cose.js) reads exactly the same inputs: floats, simple values, tags (but the
    COSE_Sign1's own, and bignums, which cbor2 reads as integers), map keys other than integers
    and text (COSE labels), deep nesting."""
    if depth > MAX_CBOR_DEPTH:
        raise CoseReceiptError(f"{what} nests deeper than {MAX_CBOR_DEPTH} levels")
    if isinstance(value, int) and not -(1 << 64) <= value < 1 << 64:
        raise CoseReceiptError(f"{what} holds a bignum (tag 2 or 3)")
    if value is None or isinstance(value, bool | int | bytes | str):
        return
    if isinstance(value, list | tuple):
        for item in value:
            _plain(item, depth + 1, what)
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, bool) or not isinstance(k, int | str):
                raise CoseReceiptError(f"{what} has a map key that is not an integer or text")
            _plain(v, depth + 1, what)
        return
    raise CoseReceiptError(f"{what} holds a {type(value).__name__}: only integers, byte and "
                           "text strings, arrays, maps, booleans and null are read")


def _strict(data: bytes, what: str, *, tagged: bool = False) -> Any:
    """One CBOR item in a single encoding: definite lengths, minimal heads, no duplicate keys,
    nothing after it (re-encoding in the order read gives back exactly ``data``), of the plain
    types :func:`_plain` allows; ``tagged``: the outermost item may be a tag (the caller checks
    which)."""
    try:
        value = cbor2.loads(data)
        again = cbor2.dumps(value)
    except Exception as e:  # cbor2 raises several types (and RecursionError) on bad input
        raise CoseReceiptError(f"{what} is not well-formed CBOR ({type(e).__name__})") from None
    if again != data:
        raise CoseReceiptError(f"{what} is not in a single, minimal, definite-length encoding "
                               "(or has bytes after it)")
    if tagged and isinstance(value, cbor2.CBORTag):
        _plain(value.value, 2, what)
    else:
        _plain(value, 1, what)
    return value


def _is_uint(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_map(value: object) -> bool:
    return isinstance(value, Mapping)


def _is_array(value: object) -> bool:
    return isinstance(value, list | tuple)


def _protected(raw: object) -> tuple[int, bytes | None, str | None, int | None]:
    if not isinstance(raw, bytes) or not raw:
        raise CoseReceiptError("the protected header must be a non-empty byte string")
    header = _strict(raw, "the protected header")
    if not _is_map(header):
        raise CoseReceiptError("the protected header is not a map")
    alg = header.get(_HDR_ALG)
    if isinstance(alg, bool) or not isinstance(alg, int) or alg not in _SIGNATURE_SIZE:
        raise CoseReceiptError("alg (1) must be EdDSA (-8) or ML-DSA-44 (-48)")
    if header.get(_HDR_VDS) != _VDS_RFC9162_SHA256 or isinstance(header.get(_HDR_VDS), bool):
        raise CoseReceiptError("vds (395) must be 1, RFC9162_SHA256")
    if _HDR_CRIT in header:
        crit = header[_HDR_CRIT]
        if not _is_array(crit) or not crit or any(
                isinstance(c, bool) or not isinstance(c, int | str) or c not in header
                or c not in _UNDERSTOOD for c in crit):
            raise CoseReceiptError("crit (2) names a header this verifier does not understand")
    kid = header.get(_HDR_KID)
    if kid is not None and not isinstance(kid, bytes):
        raise CoseReceiptError("kid (4) must be a byte string")
    issuer: str | None = None
    iat: int | None = None
    if _HDR_CWT in header:
        claims = header[_HDR_CWT]
        if not _is_map(claims):
            raise CoseReceiptError("the CWT claims (15) are not a map")
        issuer, iat = claims.get(_CWT_ISS), claims.get(_CWT_IAT)
        if issuer is not None and not isinstance(issuer, str):
            raise CoseReceiptError("the issuer claim (1) must be text")
        if iat is not None and not _is_uint(iat):
            raise CoseReceiptError("the iat claim (6) must be an unsigned integer")
    return alg, kid, issuer, iat


def _inclusion(unprotected: object) -> tuple[int, int, tuple[bytes, ...]]:
    if not _is_map(unprotected):
        raise CoseReceiptError("the unprotected header is not a map")
    assert isinstance(unprotected, Mapping)
    vdp = unprotected.get(_HDR_VDP)
    if not isinstance(vdp, Mapping) or set(vdp) != {_VDP_INCLUSION}:
        raise CoseReceiptError("vdp (396) must be a map holding only inclusion proofs (-1)")
    proofs = vdp[_VDP_INCLUSION]
    if not _is_array(proofs) or len(proofs) != 1 or not isinstance(proofs[0], bytes):
        raise CoseReceiptError("a receipt must carry exactly one inclusion proof (a bstr)")
    proof = _strict(proofs[0], "the inclusion proof")
    if not _is_array(proof) or len(proof) != 3:
        raise CoseReceiptError("the inclusion proof must be [tree_size, leaf_index, path]")
    size, index, path = proof
    if not _is_uint(size) or not _is_uint(index) or not 0 <= index < size <= _MAX_TREE_SIZE:
        raise CoseReceiptError("the inclusion proof's leaf_index must be below its tree_size")
    if not _is_array(path) or any(not isinstance(h, bytes) or len(h) != HASH_SIZE
                                  for h in path):
        raise CoseReceiptError("the inclusion path must be an array of 32-byte hashes")
    if len(path) != len(inclusion_plan(index, size)):
        raise CoseReceiptError(f"the inclusion path has {len(path)} hashes; leaf {index} of a "
                               f"tree of size {size} needs {len(inclusion_plan(index, size))}")
    return size, index, tuple(path)


def parse_receipt(data: bytes) -> CoseReceipt:
    """A receipt's fields, or :class:`CoseReceiptError` saying what is wrong with it."""
    if not isinstance(data, bytes) or not data:
        raise CoseReceiptError("a COSE receipt must be non-empty bytes")
    if len(data) > MAX_RECEIPT_SIZE:
        raise CoseReceiptError(f"a COSE receipt is at most {MAX_RECEIPT_SIZE} bytes")
    outer = _strict(data, "the receipt", tagged=True)
    if not isinstance(outer, cbor2.CBORTag) or outer.tag != _TAG_SIGN1:
        raise CoseReceiptError("not a COSE_Sign1 (tag 18)")
    if not _is_array(outer.value) or len(outer.value) != 4:
        raise CoseReceiptError("a COSE_Sign1 is [protected, unprotected, payload, signature]")
    protected, unprotected, payload, signature = outer.value
    alg, kid, issuer, iat = _protected(protected)
    size, index, path = _inclusion(unprotected)
    if payload is not None:
        raise CoseReceiptError("the payload must be detached (nil): it is the root the proof "
                               "leads to")
    if not isinstance(signature, bytes) or len(signature) != _SIGNATURE_SIZE[alg]:
        raise CoseReceiptError(f"an {_ALG_NAME[alg]} signature is {_SIGNATURE_SIZE[alg]} bytes")
    return CoseReceipt(protected, alg, kid, issuer, iat, size, index, path, signature)


# Verifying --------------------------------------------------------------------------------------


def _key_for(receipt: CoseReceipt, keys: Sequence[CoseKey]) -> CoseKey:
    same_alg = [k for k in keys if k.alg == receipt.alg]
    if receipt.kid is not None:
        for k in same_alg:
            if k.kid == receipt.kid:
                return k
        raise CoseReceiptError(f"no trusted {receipt.alg_name} key has kid "
                               f"{receipt.kid.hex()}")
    if len(same_alg) != 1:
        raise CoseReceiptError(f"the receipt names no kid and {len(same_alg)} trusted "
                               f"{receipt.alg_name} keys could have signed it")
    return same_alg[0]


def verify_receipt(data: bytes | CoseReceipt, *, entry: bytes, keys: Sequence[CoseKey]
                   ) -> tuple[CoseReceipt, bytes]:
    """The receipt and the root it proves ``entry`` (the leaf's bytes) to be in, signed by one
    of ``keys``; :class:`CoseReceiptError` otherwise."""
    receipt = data if isinstance(data, CoseReceipt) else parse_receipt(data)
    key = _key_for(receipt, keys)
    try:
        root = root_from_inclusion_proof(receipt.leaf_index, receipt.tree_size,
                                         leaf_hash(entry), receipt.path)
    except ProofError as e:
        raise CoseReceiptError(f"the inclusion proof does not evaluate: {e}") from None
    if not key.verify(sig_structure(receipt.protected, root), receipt.signature):
        raise CoseReceiptError("the signature does not verify over the root the inclusion "
                               "proof leads to: the receipt is not for this entry, or was "
                               "altered")
    return receipt, root
