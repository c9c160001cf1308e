"""The corpus's RFC 9942 COSE receipt cases (kind ``cose``), beside tests/corpus/generate.py's.

A ``cose`` case holds a tool call's JSON receipt (``receipt``), the trusted log keys
(``trust.log_keys``) and COSE receipts (``cose_b64``, a list); ``expect`` is, per COSE receipt,
the verdict Python gives (:func:`python_cose`): ``{"valid": true, "tree_size", "leaf_index",
"root"}`` or ``{"valid": false}``. The receipts are the notary's own (``GET
/v1/tool-calls/{id}/receipt.cose``), and variants of them, most signed again with the log's key
so that only the rule under test can refuse them. Every verdict is also written by hand in the
tables here, and the generator stops when Python's differs.
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Any

import cbor2

from ledger.core.cose_receipt import (
    ALG_EDDSA,
    ALG_ML_DSA_44,
    CoseKey,
    CoseReceiptError,
    parse_receipt,
    sig_structure,
    verify_receipt,
)
from ledger.core.note import Ed25519Signer, Ed25519Verifier
from notary.core.cose_verification import check_cose
from notary.core.entry import EntryError, LogEntry
from notary.core.receipts import Receipt, ReceiptFormatError
from notary.verifier.trust import parse_log_keys

if TYPE_CHECKING:
    from tests.corpus.generate import Corpus

__all__ = ["add_cose_cases", "python_cose"]

Json = dict[str, Any]
INVALID: Json = {"valid": False}


def python_cose_one(receipt: Json, data: bytes, log_keys: list[str]) -> Json:
    """Python's verdict on one COSE receipt of ``receipt``'s entry: the codec's verify, and the
    receipt's log (issuer = ``ledger.origin``, leaf index = ``ledger.index``)."""
    ledger = receipt.get("ledger") if isinstance(receipt, dict) else None
    if not isinstance(ledger, dict):
        return INVALID
    origin, index = ledger.get("origin"), ledger.get("index")
    if not isinstance(origin, str) or isinstance(index, bool) or not isinstance(index, int):
        return INVALID
    try:
        entry = LogEntry.from_receipt(receipt).encode()
    except EntryError:
        return INVALID
    keys = [CoseKey(ALG_EDDSA if isinstance(k, Ed25519Verifier) else ALG_ML_DSA_44, k.public_key)
            for k in parse_log_keys(log_keys) if k.name == origin]
    try:
        cose, root = verify_receipt(data, entry=entry, keys=keys)
    except CoseReceiptError:
        return INVALID
    if cose.issuer != origin or cose.leaf_index != index:
        return INVALID
    return {"valid": True, "tree_size": cose.tree_size, "leaf_index": cose.leaf_index,
            "root": root.hex()}


def python_cose(case: Json) -> list[Json]:
    """Python's verdicts on a ``cose`` case, one per COSE receipt; each is also what `notary
    verify --cose` decides (:func:`notary.core.cose_verification.check_cose`), or generating
    the corpus fails: the JS verifier is held to one Python verdict, not two."""
    verdicts = []
    for b in case["cose_b64"]:
        data = base64.b64decode(b)
        verdict = python_cose_one(case["receipt"], data, case["trust"]["log_keys"])
        try:
            receipt = Receipt.from_json(case["receipt"])
        except ReceiptFormatError:
            verify_says = False
        else:
            verify_says = check_cose(receipt, data, parse_log_keys(
                case["trust"]["log_keys"])).status == "passed"
        if verify_says != verdict["valid"]:
            raise AssertionError(f"{case.get('name')}: notary verify --cose says "
                                 f"{verify_says}, the codec's check {verdict['valid']}")
        verdicts.append(verdict)
    return verdicts


class _Cose:
    """A receipt's parts, to build variants of it."""

    def __init__(self, data: bytes, root: bytes, signer: Ed25519Signer) -> None:
        self.data, self.root, self.signer = data, root, signer
        p, u, payload, s = cbor2.loads(data).value
        self.protected, self.unprotected, self.payload, self.signature = p, u, payload, s
        self.header: dict[Any, Any] = cbor2.loads(p)

    def build(self, *, protected: bytes | None = None, unprotected: object = None,
              payload: object = None, signature: bytes | None = None, tag: int = 18,
              sign: bool = True) -> bytes:
        """The receipt with the parts given replaced; signed again over the (new) protected
        header unless ``sign`` is false or a signature is given."""
        p = self.protected if protected is None else protected
        if signature is None:
            signature = self.signer.sign(sig_structure(p, self.root)) if sign else self.signature
        u = self.unprotected if unprotected is None else unprotected
        return cbor2.dumps(cbor2.CBORTag(tag, [p, u, payload, signature]))

    def with_header(self, **changes: Any) -> bytes:
        """Signed again with the protected header changed: ``label_N=value`` sets label N
        (``m`` for minus), ``drop=[labels]`` removes some."""
        drop = changes.pop("drop", [])
        header = {k: v for k, v in self.header.items() if k not in drop}
        for name, value in changes.items():
            label = int(name.removeprefix("label_").replace("m", "-"))
            header[label] = value
        return self.build(protected=cbor2.dumps(header))

    def with_raw_header(self, raw: bytes) -> bytes:
        """Signed again with protected header bytes written by hand (CBOR cbor2 would not
        write)."""
        return self.build(protected=raw)

    def with_proof(self, proof: object) -> bytes:
        return self.build(unprotected={396: {-1: [cbor2.dumps(proof)]}}, sign=False)

    def proof(self) -> list[Any]:
        value: list[Any] = cbor2.loads(self.unprotected[396][-1][0])
        return value


def _nested(levels: int) -> object:
    value: object = 0
    for _ in range(levels):
        value = [value]
    return value


def _header_map(header: dict[Any, Any], extra: bytes, count: int) -> bytes:
    """The canonical encoding of ``header`` with ``count`` more (key, value) pairs appended
    raw (``extra``): a map cbor2 cannot be made to write."""
    body = cbor2.dumps(header, canonical=True)
    assert 0xa0 <= body[0] < 0xb7
    return bytes([body[0] + count]) + body[1:] + extra


def _identity_r(signer: Ed25519Signer, message: bytes) -> bytes:
    """An Ed25519 signature by ``signer`` whose R is the identity point: libsodium (and every
    verifier of ours) refuses it, a cofactorless check without a small-order rule accepts it."""
    order = 2**252 + 27742317777372353535851937790883648493
    digest = hashlib.sha512(signer.seed).digest()
    a = (int.from_bytes(digest[:32], "little") & ((1 << 254) - 8)) | (1 << 254)
    r_point = (1).to_bytes(32, "little")
    k = int.from_bytes(hashlib.sha512(r_point + signer.public_key + message).digest(), "little")
    return r_point + (k * a % order).to_bytes(32, "little")


def _variants(c: _Cose, size: int) -> list[tuple[str, bytes, bool]]:
    """(what, COSE receipt, valid by hand)."""
    h = c.header
    proof = c.proof()
    return [
        ("as served", c.data, True),
        ("no kid (one trusted key of the algorithm)", c.with_header(drop=[4]), True),
        ("kid null", c.with_header(label_4=None), True),
        ("an unknown protected label", c.with_header(label_99="x"), True),
        ("crit naming kid", c.with_header(label_2=[4]), True),
        ("crit naming an unknown label", c.with_header(label_2=[99], label_99=0), False),
        ("crit naming true (not the label 1)", c.with_header(label_2=[True]), False),
        ("crit holding a map", c.with_header(label_2=[{}], label_99=0), False),
        ("crit empty", c.with_header(label_2=[]), False),
        ("the largest unsigned integer", c.with_header(label_99=2**64 - 1), True),
        ("the smallest negative integer", c.with_header(label_99=-(2**64)), True),
        ("iat beyond 2^53", c.with_header(label_15={1: h[15][1], 6: 2**60}), True),
        ("iat negative", c.with_header(label_15={1: h[15][1], 6: -1}), False),
        ("iat a boolean", c.with_header(label_15={1: h[15][1], 6: True}), False),
        ("no CWT claims (no issuer)", c.with_header(drop=[15]), False),
        ("another issuer", c.with_header(label_15={1: h[15][1] + "x"}), False),
        ("issuer as bytes", c.with_header(label_15={1: h[15][1].encode()}), False),
        ("alg ES256", c.with_header(label_1=-7), False),
        ("alg in an array", c.with_header(label_1=[-8]), False),
        ("alg true", c.with_header(label_1=True), False),
        ("vds 2", c.with_header(label_395=2), False),
        ("vds true", c.with_header(label_395=True), False),
        ("kid as text", c.with_header(label_4="k"), False),
        ("a float", c.with_header(label_99=1.5), False),
        ("undefined", c.with_header(label_99=cbor2.undefined), False),
        ("a simple value", c.with_header(label_99=cbor2.CBORSimpleValue(16)), False),
        ("an inner tag", c.with_header(label_99=cbor2.CBORTag(24, b"\x01")), False),
        ("a bignum (tag 2)", c.with_header(label_99=2**64), False),
        ("a negative bignum (tag 3)", c.with_header(label_99=-(2**64) - 1), False),
        ("a map keyed by bytes", c.with_header(label_99={b"k": 0}), False),
        ("a map keyed by a boolean", c.with_header(label_99={True: 0}), False),
        ("15 levels deep, and a 0", c.with_header(label_99=_nested(14)), True),
        ("16 levels deep, and a 0", c.with_header(label_99=_nested(15)), False),
        ("a duplicate protected label",
         c.with_raw_header(_header_map(h, b"\x18\x63\x00\x18\x63\x00", 2)), False),
        ("text that is not UTF-8", c.with_raw_header(_header_map(h, b"\x18\x63\x62\xc3\x28", 1)),
         False),
        ("text with a BOM", c.with_raw_header(_header_map(h, b"\x18\x63\x63\xef\xbb\xbf", 1)),
         True),
        ("a non-minimal integer head",
         c.with_raw_header(_header_map(h, b"\x18\x63\x18\x05", 1)), False),
        ("an indefinite-length text",
         c.with_raw_header(_header_map(h, b"\x18\x63\x7f\x61\x61\xff", 1)), False),
        ("an empty protected header", c.build(protected=b""), False),
        ("a protected header that is an array", c.build(protected=cbor2.dumps([1])), False),
        ("a byte after it", c.data + b"\x00", False),
        ("the signature's length head in two bytes", c.data.replace(b"\x58\x40", b"\x59\x00\x40"),
         False),
        ("the tag's head in two bytes", b"\xd8\x12" + c.data[1:], False),
        ("an indefinite-length outer array", b"\xd2\x9f" + c.data[2:] + b"\xff", False),
        ("tag 17", c.build(tag=17, sign=False), False),
        ("the payload attached", c.build(payload=c.root, sign=False), False),
        ("two inclusion proofs", c.build(unprotected={396: {-1: [cbor2.dumps(proof)] * 2}},
                                         sign=False), False),
        ("no inclusion proof", c.build(unprotected={396: {-1: []}}, sign=False), False),
        ("a consistency proof too", c.build(unprotected={396: {-1: [cbor2.dumps(proof)],
                                                               -2: []}}, sign=False), False),
        ("an unknown unprotected label", c.build(unprotected={**c.unprotected, 99: 0},
                                                 sign=False), True),
        ("the path one hash short", c.with_proof([proof[0], proof[1], proof[2][:-1]]), False),
        ("the path one hash long",
         c.with_proof([proof[0], proof[1], [*proof[2], b"\x00" * 32]]), False),
        ("a 31-byte hash", c.with_proof([proof[0], proof[1], [x[:31] for x in proof[2]]]), False),
        ("leaf_index = tree_size", c.with_proof([size, size, proof[2]]), False),
        ("tree_size beyond 2^63-1", c.with_proof([2**63, proof[1], proof[2]]), False),
        ("a proof with a fourth member", c.with_proof([*proof, 0]), False),
        ("a 63-byte signature", c.build(signature=c.signature[:63]), False),
        ("another signature", c.build(signature=bytes(64)), False),
        ("the log's signature with the identity as R (OpenSSL's rules would accept it)",
         c.build(signature=_identity_r(c.signer, sig_structure(c.protected, c.root))), False),
    ]


async def _cose_of(corpus: Corpus, index: int, query: str) -> tuple[Json, bytes]:
    """The JSON receipt of the entry at ``index`` and its COSE receipt (``query``)."""
    async with corpus.http.get(f"{corpus.url}/v1/ledger/entries/{index}") as r:
        assert r.status == 200
        entry = cbor2.loads(base64.b64decode((await r.json())["entry"]))
    receipt = await corpus.fetch_receipt(entry["id"])
    async with corpus.http.get(f"{corpus.url}/v1/tool-calls/{entry['id']}/receipt.cose{query}"
                               ) as r:
        assert r.status == 200, await r.text()
        assert r.content_type == "application/scitt-receipt+cose"
        return receipt, await r.read()


async def add_cose_cases(corpus: Corpus) -> None:
    """Add the ``cose`` cases (the log holds at least 7 entries)."""
    async with corpus.http.get(corpus.url + "/v1/ledger") as r:
        pq_vkey: str = (await r.json())["vkeys"][1]
    ed_keys, pq_keys = [corpus.vkey], [pq_vkey]

    def add(name: str, description: str, receipt: Json, datas: list[bytes], valid: list[bool],
            log_keys: list[str], whats: list[str] | None = None) -> None:
        case: Json = {"name": name, "kind": "cose", "description": description,
                      "receipt": receipt, "trust": {"log_keys": log_keys},
                      "cose_b64": [base64.b64encode(d).decode() for d in datas]}
        if whats is not None:
            case["variants"] = whats
        case["expect"] = python_cose(case)
        got = [e["valid"] for e in case["expect"]]
        wrong = [whats[i] if whats else i for i, (g, v) in enumerate(zip(got, valid, strict=True))
                 if g != v]
        assert not wrong, f"{name}: Python's verdict differs from the table for {wrong}"
        corpus.cases.append(case)

    served: dict[tuple[int, int], tuple[Json, bytes]] = {}
    for index, size in ((0, 1), (1, 2), (4, 7), (6, 7)):
        receipt, data = await _cose_of(corpus, index, f"?size={size}")
        served[index, size] = receipt, data
        assert parse_receipt(data).tree_size == size
        add(f"cose-valid-size-{size}-leaf-{index}",
            f"the notary's COSE receipt of entry {index} in the tree of size {size}"
            + (" (an empty path)" if size == 1 else ""), receipt, [data], [True], ed_keys)
    receipt, data = await _cose_of(corpus, 2, "")
    add("cose-valid-default-tree", "the COSE receipt of the tree the JSON receipt's proof leads "
        "to", receipt, [data], [True], ed_keys)
    add("cose-valid-both-keys", "the Ed25519 and ML-DSA-44 log keys both trusted", receipt,
        [data], [True], ed_keys + pq_keys)

    receipt7, data7 = served[4, 7]
    receipt2, _ = served[1, 2]
    add("cose-another-entry", "the COSE receipt of entry 4 beside the JSON receipt of entry 1",
        receipt2, [data7], [False], ed_keys)
    other = Ed25519Signer.generate(receipt7["ledger"]["origin"])
    add("cose-untrusted-key", "another Ed25519 key of the same origin trusted, not the log's",
        receipt7, [data7], [False], [other.verifier_key_text()])
    add("cose-ml-dsa-key-only", "an EdDSA receipt, only the log's ML-DSA-44 key trusted",
        receipt7, [data7], [False], pq_keys)
    add("cose-tamper-every-byte", "every byte of a COSE receipt flipped (XOR 1), one at a time",
        receipt7, [data7[:i] + bytes([data7[i] ^ 1]) + data7[i + 1:] for i in range(len(data7))],
        [False] * len(data7), ed_keys)

    signer = corpus.signer
    _, root = verify_receipt(data7, entry=LogEntry.from_receipt(receipt7).encode(),
                             keys=[CoseKey(ALG_EDDSA, signer.public_key)])
    variants = _variants(_Cose(data7, root, signer), 7)
    add("cose-variants", "variants of a COSE receipt, most signed again by the log's key so "
        "that only the rule under test refuses them", receipt7, [v[1] for v in variants],
        [v[2] for v in variants], ed_keys, [v[0] for v in variants])
    receipt1, data1 = served[0, 1]
    add("cose-size-1-with-a-path", "a one-leaf tree's receipt given a one-hash path",
        receipt1, [_Cose(data1, b"", signer).with_proof([1, 0, [b"\x00" * 32]])], [False],
        ed_keys)

    pq_receipt, pq_data = await _cose_of(corpus, 4, "?size=7&alg=ML-DSA-44")

    def flip(i: int) -> bytes:
        return pq_data[:i] + bytes([pq_data[i] ^ 1]) + pq_data[i + 1:]

    add("cose-ml-dsa-44", "an ML-DSA-44 COSE receipt (alg -48), the log's ML-DSA-44 key trusted",
        pq_receipt, [pq_data], [True], pq_keys)
    add("cose-ml-dsa-44-both-keys", "an ML-DSA-44 COSE receipt, both log keys trusted",
        pq_receipt, [pq_data], [True], ed_keys + pq_keys)
    add("cose-ml-dsa-44-ed25519-key-only", "an ML-DSA-44 COSE receipt, only the Ed25519 key "
        "trusted", pq_receipt, [pq_data], [False], ed_keys)
    add("cose-ml-dsa-44-tampered", "an ML-DSA-44 COSE receipt with a byte flipped in its "
        "signature, in its path and in its protected header", pq_receipt,
        [flip(len(pq_data) - 100), flip(len(pq_data) - 2420 - 10), flip(8)], [False] * 3,
        pq_keys)
