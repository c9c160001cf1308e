"""Signed receipts and the receipt keys that sign them (pure, no I/O); the published key set
that verifies them is :mod:`notary.core.jwks`.

A receipt is JSON: ``spec``, ``id``, ``server``, ``tool``, ``call_sha256``, ``issued_at``,
``ledger`` (``origin``, ``index``, ``entry_url``), then ``signature`` (``alg`` EdDSA,
``kid``, ``sig``) over the RFC 8785 bytes of everything except ``signature`` and ``proof``.
``proof`` (the tlog-proof text) rides along unsigned because it is refreshed as the log
grows and verifies on its own against the signed checkpoint it contains.

Receipt keys are Ed25519, published as an RFC 8037 OKP JWKS whose ``kid`` is the RFC 7638
thumbprint. A thumbprint ties the kid to the key bytes, so a JWKS cannot list a key under
another key's name; old keys stay in the set after rotation so old receipts still verify.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final

import nacl.bindings
import nacl.exceptions
import nacl.signing

from notary.core.canonical import canonical_json
from notary.core.entry import LogEntry
from notary.core.errors import NotaryBaseError
from notary.core.ids import b64url_decode, b64url_encode, is_receipt_id, parse_issued_at
from notary.core.receipt_jcs import receipt_jcs, unsigned_receipt_jcs
from notary.core.records import SPEC, name_problem

__all__ = [
    "RECEIPT_ALG",
    "SIGNATURE_KEYS",
    "Receipt",
    "ReceiptFormatError",
    "ReceiptKey",
    "ReceiptSignature",
    "ReceiptSignatureError",
    "build_receipt",
    "jwk_thumbprint",
    "signed_bytes",
    "validate_receipt_shape",
]

RECEIPT_ALG: Final = "EdDSA"

_SIGNED_KEYS = frozenset({"spec", "id", "server", "tool", "call_sha256", "issued_at", "ledger"})
_OPTIONAL_KEYS = frozenset({"proof", "signature"})
_LEDGER_KEYS = frozenset({"origin", "index", "entry_url"})
SIGNATURE_KEYS = frozenset({"alg", "kid", "sig"})
"""The members of a receipt's ``signature`` object, exactly."""
_HEX64_RE = re.compile(r"[0-9a-f]{64}")
_PLAIN_JSON = re.compile(r'[ !#-\[\]-~]*')
"""Printable ASCII but ``"`` and ``\\``: the characters ``json.dumps`` writes unescaped."""
_MAX_INDEX = 2**53 - 1  # JSON number a JavaScript verifier reads exactly


class ReceiptFormatError(NotaryBaseError, ValueError):
    """A receipt does not have the rs-tool-call/1 shape."""


class ReceiptSignatureError(NotaryBaseError, ValueError):
    """A receipt signature does not verify; ``reason`` is a stable machine-readable code.

    Reasons: ``missing`` (no signature member), ``malformed`` (signature or receipt cannot
    be read), ``bad_alg`` (not EdDSA), ``unknown_kid`` (no such key in the trusted set),
    ``bad_signature`` (the Ed25519 check failed: the receipt or signature was altered).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


def jwk_thumbprint(x: str) -> str:
    """RFC 7638 SHA-256 thumbprint of the Ed25519 OKP public key whose ``x`` is given.

    The required members of an OKP key (RFC 8037 §2) are ``crv``, ``kty`` and ``x``; the
    thumbprint input is them in lexicographic order without whitespace, which is exactly
    their JCS form.
    """
    members = {"crv": "Ed25519", "kty": "OKP", "x": x}
    return b64url_encode(hashlib.sha256(canonical_json(members)).digest())


def signed_bytes(receipt: Receipt | Mapping[str, object]) -> bytes:
    """The bytes a receipt signature covers: JCS of the receipt minus signature and proof."""
    if isinstance(receipt, Receipt):
        return receipt.signed_bytes()
    body = {k: v for k, v in receipt.items() if k not in ("signature", "proof")}
    return canonical_json(body)


def _check_keys(
    obj: Mapping[str, object], required: frozenset[str], optional: frozenset[str], where: str
) -> None:
    keys = set(obj)
    missing = sorted(required - keys)
    extra = sorted(repr(k) for k in keys - required - optional)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"unexpected {extra}")
        raise ReceiptFormatError(f"{where}: " + ", ".join(parts))


def _nonempty_str(obj: Mapping[str, object], key: str, where: str) -> str:
    value = obj[key]
    if not isinstance(value, str) or not value:
        raise ReceiptFormatError(f"{where}.{key} must be a non-empty string")
    return value


def validate_receipt_shape(receipt: Mapping[str, object]) -> None:
    """Check a receipt's shape strictly; raises :class:`ReceiptFormatError`.

    Exactly the signed members plus optional ``proof`` (a string) and ``signature``
    (exactly ``alg``, ``kid``, ``sig``, all strings); ``spec`` is rs-tool-call/1; ``id``
    a receipt id; ``server``/``tool`` valid names; ``call_sha256`` 64 lower-case hex;
    ``issued_at`` the one RFC 3339 spelling; ``ledger`` exactly ``origin``, ``index`` (an
    integer from 0 to 2^53−1) and ``entry_url``. Signature *validity* is
    :meth:`Jwks.verify`'s job.
    """
    if not isinstance(receipt, Mapping):
        raise ReceiptFormatError(f"receipt must be an object, not {type(receipt).__name__}")
    _check_keys(receipt, _SIGNED_KEYS, _OPTIONAL_KEYS, "$")
    if receipt["spec"] != SPEC:
        raise ReceiptFormatError(f"$.spec must be {SPEC!r}, got {receipt['spec']!r}")
    if not is_receipt_id(receipt["id"]):
        raise ReceiptFormatError(f"$.id {receipt['id']!r} is not a receipt id (tc_ + 22 base64url)")
    for key in ("server", "tool"):
        problem = name_problem(receipt[key])
        if problem is not None:
            raise ReceiptFormatError(f"$.{key} {problem}")
    digest = receipt["call_sha256"]
    if not isinstance(digest, str) or _HEX64_RE.fullmatch(digest) is None:
        raise ReceiptFormatError("$.call_sha256 must be 64 lower-case hex characters")
    issued_at = receipt["issued_at"]
    if not isinstance(issued_at, str):
        raise ReceiptFormatError("$.issued_at must be a string")
    try:
        parse_issued_at(issued_at)
    except ValueError as exc:
        raise ReceiptFormatError(f"$.issued_at: {exc}") from None
    ledger = receipt["ledger"]
    if not isinstance(ledger, Mapping):
        raise ReceiptFormatError("$.ledger must be an object")
    _check_keys(ledger, _LEDGER_KEYS, frozenset(), "$.ledger")
    _nonempty_str(ledger, "origin", "$.ledger")
    _nonempty_str(ledger, "entry_url", "$.ledger")
    index = ledger["index"]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= _MAX_INDEX:
        raise ReceiptFormatError("$.ledger.index must be an integer from 0 to 2^53-1")
    if "proof" in receipt and not isinstance(receipt["proof"], str):
        raise ReceiptFormatError("$.proof must be a string (tlog-proof text)")
    if "signature" in receipt:
        signature = receipt["signature"]
        if not isinstance(signature, Mapping):
            raise ReceiptFormatError("$.signature must be an object")
        _check_keys(signature, SIGNATURE_KEYS, frozenset(), "$.signature")
        for key in sorted(SIGNATURE_KEYS):
            _nonempty_str(signature, key, "$.signature")


def build_receipt(
    *,
    id: str,
    server: str,
    tool: str,
    call_sha256_hex: str,
    issued_at: str,
    origin: str,
    index: int,
    entry_url: str,
    check: bool = True,
) -> dict[str, object]:
    """The unsigned receipt, shape-checked (so the notary never signs a malformed one).

    ``check=False`` is for rebuilding a receipt from values that were checked when it was
    signed (the notary's stored rows); it skips only the shape check.
    """
    receipt: dict[str, object] = {
        "spec": SPEC,
        "id": id,
        "server": server,
        "tool": tool,
        "call_sha256": call_sha256_hex,
        "issued_at": issued_at,
        "ledger": {"origin": origin, "index": index, "entry_url": entry_url},
    }
    if check:
        validate_receipt_shape(receipt)
    return receipt


@dataclass(frozen=True, slots=True)
class ReceiptSignature:
    """The ``signature`` member: Ed25519 (``alg`` EdDSA) by the key ``kid``; ``sig`` is
    base64url without padding of the 64 signature bytes."""

    kid: str
    sig: str
    alg: str = RECEIPT_ALG
    #: The bytes ``sig`` spells, when the signature was made from them (:meth:`from_raw`):
    #: storing a fresh receipt then needs no decoding. Not part of the value.
    known_raw: bytes | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_raw(cls, kid: str, raw: bytes) -> ReceiptSignature:
        """The signature member for 64 raw signature bytes (the canonical base64url spelling)."""
        if len(raw) != 64:
            raise ReceiptFormatError(f"an Ed25519 signature is 64 bytes, not {len(raw)}")
        return cls(kid, b64url_encode(raw), RECEIPT_ALG, bytes(raw))

    @property
    def raw(self) -> bytes:
        """The 64 signature bytes (raises ValueError for a sig that is not strict base64url)."""
        return self.known_raw if self.known_raw is not None else b64url_decode(self.sig)

    def to_json(self) -> dict[str, str]:
        return {"alg": self.alg, "kid": self.kid, "sig": self.sig}


@dataclass(frozen=True, slots=True)
class Receipt:
    """One rs-tool-call/1 receipt as a value: what was signed, its signature, and its proof.

    Parsed and validated once where it enters (:meth:`from_json`: an HTTP answer, a verifier's
    input, a stored row) and passed around typed afterwards. Every signed member is a field, so
    :meth:`signed_bytes` is the exact JCS the signature covers and :meth:`to_json` gives the
    receipt back member for member: a receipt that went in as JSON comes out as the same JSON,
    and a stored one is served byte for byte as signed. ``proof`` (the tlog-proof text) is not
    signed: it is refreshed as the log grows (:meth:`with_proof`).

    The constructor does not check its values (rebuilding a receipt the notary signed must not
    cost a validation per read); :meth:`from_json` and :meth:`for_entry` do.
    """

    spec: ClassVar[str] = SPEC

    id: str
    server: str
    tool: str
    call_sha256: str
    issued_at: str
    origin: str
    index: int
    entry_url: str
    signature: ReceiptSignature | None = None
    proof: str | None = None

    @classmethod
    def from_json(cls, obj: object) -> Receipt:
        """Parse a receipt object strictly (:func:`validate_receipt_shape`); raises
        :class:`ReceiptFormatError`."""
        if not isinstance(obj, Mapping):
            raise ReceiptFormatError(f"receipt must be an object, not {type(obj).__name__}")
        validate_receipt_shape(obj)
        ledger = obj["ledger"]
        signature = obj.get("signature")
        proof = obj.get("proof")
        return cls(
            id=obj["id"], server=obj["server"], tool=obj["tool"],
            call_sha256=obj["call_sha256"], issued_at=obj["issued_at"],
            origin=ledger["origin"], index=ledger["index"], entry_url=ledger["entry_url"],
            signature=None if signature is None else ReceiptSignature(
                signature["kid"], signature["sig"], signature["alg"]),
            proof=proof,
        )

    @classmethod
    def for_entry(cls, entry: LogEntry, *, origin: str, index: int, entry_url: str) -> Receipt:
        """The unsigned receipt of a log entry at ``index``, shape-checked (so the notary never
        signs a malformed one). Its members are the entry's, so the entry rebuilt from the
        receipt (:meth:`entry`) is the very leaf that was logged."""
        if not isinstance(entry, LogEntry):
            raise ReceiptFormatError(f"a receipt is for a LogEntry, not {type(entry).__name__}")
        # The entry checked its own members when it was made (and cannot change since): the
        # same rules validate_receipt_shape applies to them. Only the ledger part is new.
        ledger = {"origin": origin, "index": index, "entry_url": entry_url}
        _nonempty_str(ledger, "origin", "$.ledger")
        _nonempty_str(ledger, "entry_url", "$.ledger")
        if type(index) is not int or not 0 <= index <= _MAX_INDEX:
            raise ReceiptFormatError("$.ledger.index must be an integer from 0 to 2^53-1")
        return cls(id=entry.id, server=entry.server, tool=entry.tool,
                   call_sha256=entry.call_sha256_hex, issued_at=entry.issued_at,
                   origin=origin, index=index, entry_url=entry_url)

    def unsigned_json(self) -> dict[str, object]:
        """The signed members, in the order the notary writes them."""
        return {
            "spec": SPEC,
            "id": self.id,
            "server": self.server,
            "tool": self.tool,
            "call_sha256": self.call_sha256,
            "issued_at": self.issued_at,
            "ledger": {"origin": self.origin, "index": self.index, "entry_url": self.entry_url},
        }

    def signed_bytes(self) -> bytes:
        """The RFC 8785 bytes the signature covers (everything but ``signature`` and ``proof``)."""
        return canonical_json(self.unsigned_json())

    def to_json(self) -> dict[str, object]:
        """The receipt as JSON: the signed members, then ``signature`` and ``proof`` if set."""
        out = self.unsigned_json()
        if self.signature is not None:
            out["signature"] = self.signature.to_json()
        if self.proof is not None:
            out["proof"] = self.proof
        return out

    def to_json_bytes(self) -> bytes:
        """``json.dumps(self.to_json(), separators=(",", ":"))`` as bytes, written directly
        when every string is printable ASCII without ``"`` or ``\\`` (which JSON writes as
        it is): the answer of every issue and lookup, where the general encoder cost more than
        the rest of the response. ``tests/notary/core/test_receipts.py`` checks the two agree."""
        sig = self.signature
        texts = (self.id, self.server, self.tool, self.call_sha256, self.issued_at,
                 self.origin, self.entry_url, *(() if sig is None else (sig.alg, sig.kid,
                                                                         sig.sig)))
        if (type(self.index) is not int or not all(type(t) is str for t in texts)
                or (self.proof is not None and type(self.proof) is not str)
                or _PLAIN_JSON.fullmatch("".join(texts)) is None):
            return json.dumps(self.to_json(), separators=(",", ":")).encode()
        out = (f'{{"spec":"{SPEC}","id":"{self.id}","server":"{self.server}",'
               f'"tool":"{self.tool}","call_sha256":"{self.call_sha256}",'
               f'"issued_at":"{self.issued_at}","ledger":{{"origin":"{self.origin}",'
               f'"index":{self.index},"entry_url":"{self.entry_url}"}}')
        if sig is not None:
            out += f',"signature":{{"alg":"{sig.alg}","kid":"{sig.kid}","sig":"{sig.sig}"}}'
        if self.proof is not None:
            out += ',"proof":' + json.dumps(self.proof)  # newlines and the note's em dash
        return (out + "}").encode("ascii")

    def entry(self) -> LogEntry:
        """The log entry this receipt commits to (raises ``EntryError`` if it cannot be one)."""
        return LogEntry(id=self.id, server=self.server, tool=self.tool,
                        call_sha256=bytes.fromhex(self.call_sha256), issued_at=self.issued_at)

    def with_proof(self, proof: str | None) -> Receipt:
        """The same signed receipt with another (or no) proof."""
        # Built directly: dataclasses.replace re-reads every field by name, several times the
        # cost, on the path of every answer.
        return Receipt(self.id, self.server, self.tool, self.call_sha256, self.issued_at,
                       self.origin, self.index, self.entry_url, self.signature, proof)

    def without_proof(self) -> Receipt:
        return self if self.proof is None else dataclasses.replace(self, proof=None)


class ReceiptKey:
    """An Ed25519 key that signs receipts.

    The 32-byte seed is the whole secret; ``repr`` shows only the kid so the seed does not
    end up in logs or tracebacks.
    """

    __slots__ = ("_kid", "_secret", "_signing_key")

    def __init__(self, signing_key: nacl.signing.SigningKey) -> None:
        self._signing_key = signing_key
        # libsodium's 64-byte secret key: signing through the binding skips PyNaCl's
        # SignedMessage wrapper, ~5 µs of a ~40 µs signature (one per receipt).
        self._secret = nacl.bindings.crypto_sign_seed_keypair(bytes(signing_key))[1]
        self._kid = jwk_thumbprint(b64url_encode(self.public_key))

    def _sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature (libsodium's signed message starts with it)."""
        return nacl.bindings.crypto_sign(message, self._secret)[:64]

    @classmethod
    def generate(cls) -> ReceiptKey:
        """A new key from the operating system's CSPRNG."""
        return cls(nacl.signing.SigningKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> ReceiptKey:
        """The key for a stored 32-byte seed (RFC 8032 private key, JWK ``d``)."""
        if not isinstance(seed, bytes) or len(seed) != 32:
            raise ValueError("an Ed25519 seed is exactly 32 bytes")
        return cls(nacl.signing.SigningKey(seed))

    @property
    def seed(self) -> bytes:
        """The 32-byte secret seed (store it; never publish it)."""
        return bytes(self._signing_key)

    @property
    def public_key(self) -> bytes:
        """The raw 32-byte Ed25519 public key."""
        return bytes(self._signing_key.verify_key)

    @property
    def kid(self) -> str:
        """RFC 7638 thumbprint of the public JWK (base64url SHA-256)."""
        return self._kid

    def public_jwk(self) -> dict[str, str]:
        """The public key as published in the JWKS (RFC 8037 OKP)."""
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": b64url_encode(self.public_key),
            "kid": self.kid,
            "alg": RECEIPT_ALG,
            "use": "sig",
        }

    def sign(self, receipt_without_signature: Mapping[str, object]) -> dict[str, object]:
        """A new receipt dict: a deep copy of the input plus ``signature``.

        The input must already be a well-formed receipt without ``signature`` (a present
        ``proof`` is kept but not signed). The signature is Ed25519 over
        :func:`signed_bytes`, encoded base64url without padding.
        """
        if "signature" in receipt_without_signature:
            raise ReceiptFormatError("receipt already has a signature; sign the unsigned form")
        validate_receipt_shape(receipt_without_signature)
        signed = copy.deepcopy(dict(receipt_without_signature))
        sig = self._sign(signed_bytes(signed))
        signed["signature"] = {"alg": RECEIPT_ALG, "kid": self.kid, "sig": b64url_encode(sig)}
        return signed

    def signature_for(self, receipt: Mapping[str, object]) -> str:
        """The ``sig`` value alone, for a receipt the caller built and checked already.

        The issuing hot path uses this: :meth:`sign`'s copy and re-validation cost more than
        the signature itself. The bytes are :func:`~notary.core.receipt_jcs.receipt_jcs`'s,
        which equal ``rfc8785.dumps`` (property-tested) at a twentieth of its cost.
        """
        body = {k: v for k, v in receipt.items() if k not in ("signature", "proof")}
        message = receipt_jcs(body)
        return b64url_encode(self._sign(message))

    def sign_receipt(self, receipt: Receipt) -> Receipt:
        """``receipt`` signed by this key (its ``proof``, if any, is kept and not signed).

        The receipt must be well formed already (:meth:`Receipt.for_entry` checks it), so
        this costs one JCS and one signature.
        """
        # The fast JCS: a checked receipt holds only strings and a safe integer, the shape
        # receipt_jcs is property-tested to spell exactly as rfc8785 does.
        r = receipt
        message = unsigned_receipt_jcs(
            spec=SPEC, id=r.id, server=r.server, tool=r.tool, call_sha256=r.call_sha256,
            issued_at=r.issued_at, origin=r.origin, index=r.index, entry_url=r.entry_url)
        raw = self._sign(message)
        return Receipt(r.id, r.server, r.tool, r.call_sha256, r.issued_at, r.origin, r.index,
                       r.entry_url, ReceiptSignature.from_raw(self.kid, raw), r.proof)

    def sign_entries(self, entries: Sequence[tuple[int, LogEntry]], *, origin: str,
                     url_prefix: str) -> list[Receipt]:
        """The signed receipts of a batch's entries, each at its index in the log ``origin``
        with ``entry_url`` = ``url_prefix`` + its index: what :meth:`Receipt.for_entry` then
        :meth:`sign_receipt` give for each, made directly.

        The issuing hook signs every receipt so (on a worker thread for a large batch): the
        ledger part is checked once for the batch, and each receipt costs its JCS, written
        in one format when its names need no escaping (the entry's id, digest and time never
        do), its signature, and one :class:`Receipt`, with no unsigned receipt or signature
        object in between.
        """
        kid, sign, secret = self._kid, nacl.bindings.crypto_sign, self._secret
        if not isinstance(origin, str) or not origin or not isinstance(url_prefix, str):
            raise ReceiptFormatError("$.ledger: origin must be a non-empty string, and the "
                                     "entry_url prefix a string")
        plain = _PLAIN_JSON.fullmatch(origin + url_prefix) is not None
        out: list[Receipt] = []
        for index, entry in entries:
            if not isinstance(entry, LogEntry):
                raise ReceiptFormatError(
                    f"a receipt is for a LogEntry, not {type(entry).__name__}")
            if type(index) is not int or not 0 <= index <= _MAX_INDEX:
                raise ReceiptFormatError("$.ledger.index must be an integer from 0 to 2^53-1")
            i, server, tool, digest, at = (entry.id, entry.server, entry.tool,
                                           entry.call_sha256.hex(), entry.issued_at)
            url = f"{url_prefix}{index}"
            if plain and _PLAIN_JSON.fullmatch(server + tool) is not None:
                message = (f'{{"call_sha256":"{digest}","id":"{i}","issued_at":"{at}",'
                           f'"ledger":{{"entry_url":"{url}","index":{index},'
                           f'"origin":"{origin}"}},"server":"{server}","spec":"{SPEC}",'
                           f'"tool":"{tool}"}}').encode("ascii")
            else:
                message = unsigned_receipt_jcs(
                    spec=SPEC, id=i, server=server, tool=tool, call_sha256=digest,
                    issued_at=at, origin=origin, index=index, entry_url=url)
            raw = sign(message, secret)[:64]
            out.append(Receipt(i, server, tool, digest, at, origin, index, url,
                               ReceiptSignature(kid, b64url_encode(raw), RECEIPT_ALG, raw)))
        return out

    def __repr__(self) -> str:
        return f"ReceiptKey(kid={self.kid!r})"
