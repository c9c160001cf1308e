"""SCITT routes end to end: COSE receipts of tool calls (RFC 9942) verified by scitt-cose and by
our verifier against the keys the notary publishes (SCRAPI), and clear 4xx for bad input."""

from __future__ import annotations

import base64
from pathlib import Path

import cbor2
import scitt_cose
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.core.cose_receipt import (
    ALG_EDDSA,
    ALG_ML_DSA_44,
    MEDIA_TYPE,
    CoseKey,
    CoseReceiptError,
    parse_receipt,
    verify_receipt,
)
from notary.core.entry import LogEntry
from tests.notary_server import NotaryProcess, live_notary


def _keys(key_set: bytes) -> list[CoseKey]:
    keys = []
    for k in cbor2.loads(key_set):
        if k[1] == 1:
            keys.append(CoseKey(ALG_EDDSA, k[-2]))
        else:
            keys.append(CoseKey(ALG_ML_DSA_44, k[-1]))
    return keys


def _pem(public_key: bytes) -> bytes:
    return Ed25519PublicKey.from_public_bytes(public_key).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


async def test_cose_receipts_of_every_call_verify_for_growing_trees(tmp_path: Path) -> None:
    async with live_notary(tmp_path, pq_checkpoints="off") as n:
        async with n.http.get(n.url + "/.well-known/scitt-keys") as r:
            assert r.status == 200 and r.content_type == "application/cbor"
            keys = _keys(await r.read())
        ed = next(k for k in keys if k.alg == ALG_EDDSA)
        assert ed.public_key == n.log_key.public_key  # the log's own key signs the roots
        for size in range(1, 6):
            call = await n.notarize(n=size)
            entry = LogEntry.from_receipt(call.receipt).encode()
            url = f"{n.url}/v1/tool-calls/{call.receipt['id']}/receipt.cose"
            async with n.http.get(url) as r:
                assert r.status == 200, await r.text()
                assert r.headers["Content-Type"] == MEDIA_TYPE
                data = await r.read()
            receipt, _ = verify_receipt(data, entry=entry, keys=keys)
            assert receipt.leaf_index == call.receipt["ledger"]["index"]
            assert receipt.tree_size == size and receipt.issuer == call.receipt["ledger"]["origin"]
            assert scitt_cose.verify_receipt(data, leaf_entry_hex=entry.hex(),
                                             log_public_key_pem=_pem(ed.public_key)).ok
        # The first entry, proven in each tree size it belongs to, and with ML-DSA-44.
        first = n.calls[0]
        entry = LogEntry.from_receipt(first.receipt).encode()
        for size in range(1, 6):
            url = f"{n.url}/v1/tool-calls/{first.receipt['id']}/receipt.cose?size={size}"
            async with n.http.get(url) as r:
                assert r.status == 200, await r.text()
                receipt, _ = verify_receipt(await r.read(), entry=entry, keys=keys)
                assert receipt.tree_size == size
        async with n.http.get(f"{n.url}/v1/tool-calls/{first.receipt['id']}/receipt.cose"
                              "?alg=ML-DSA-44&size=3") as r:
            receipt, _ = verify_receipt(await r.read(), entry=entry, keys=keys)
            assert receipt.alg == ALG_ML_DSA_44
        # One signature per root: five sizes by EdDSA, one by ML-DSA-44 (size 5 twice).
        from notary.http.appkeys import COSE_ROOTS
        assert n.app.app[COSE_ROOTS].signed == 6
        async with n.http.get(n.url + "/metrics") as r:
            metrics = await r.text()
        assert 'notary_cose_roots_signed_total{alg="EdDSA"} 5.0' in metrics
        assert 'notary_cose_roots_signed_total{alg="ML-DSA-44"} 1.0' in metrics


async def test_bad_requests_get_clear_4xx(tmp_path: Path) -> None:
    async with live_notary(tmp_path) as n:
        call = await n.notarize()
        base = f"{n.url}/v1/tool-calls/{call.receipt['id']}/receipt.cose"
        for query, status, code in [
            ("?size=0", 400, "bad_parameter"), ("?size=2", 404, "not_found"),
            ("?size=01", 400, "bad_parameter"), ("?size=x", 400, "bad_parameter"),
            ("?alg=ES256", 400, "bad_parameter"), ("?alg=EdDSA&alg=EdDSA", 400, "bad_parameter"),
            ("?sise=1", 400, "unknown_field"),
        ]:
            async with n.http.get(base + query) as r:
                assert (r.status, (await r.json())["error"]["code"]) == (status, code), query
        async with n.http.get(f"{n.url}/v1/tool-calls/nope/receipt.cose") as r:
            assert r.status == 400
        async with n.http.get(f"{n.url}/v1/tool-calls/tc_AAAAAAAAAAAAAAAAAAAAAA/receipt.cose") as r:
            assert r.status in (400, 404)
        async with n.http.get(n.url + "/.well-known/scitt-keys/AAAA") as r:
            assert r.status == 404
    async with live_notary(tmp_path / "off", cose_receipts="off") as n:
        call = await n.notarize()
        async with n.http.get(f"{n.url}/v1/tool-calls/{call.receipt['id']}/receipt.cose") as r:
            assert (r.status, (await r.json())["error"]["code"]) == (404, "not_found")


async def test_keys_by_kid_and_the_transparency_configuration(tmp_path: Path) -> None:
    async with live_notary(tmp_path) as n:
        async with n.http.get(n.url + "/.well-known/scitt-keys") as r:
            keys = _keys(await r.read())
        for key in keys:
            kid = base64.urlsafe_b64encode(key.kid).rstrip(b"=").decode()
            async with n.http.get(f"{n.url}/.well-known/scitt-keys/{kid}") as r:
                assert r.status == 200 and cbor2.loads(await r.read()) == key.cose_key()
        async with n.http.get(n.url + "/.well-known/transparency-configuration") as r:
            config = cbor2.loads(await r.read())
        assert config["scitt_keys_uri"] == n.url + "/.well-known/scitt-keys"
        assert [k["kid"] for k in config["jwks"]["keys"]] == [
            base64.urlsafe_b64encode(k.kid).rstrip(b"=").decode() for k in keys]


def test_a_real_notary_serve_issues_cose_receipts_scitt_cose_verifies(
        notary_server: NotaryProcess, notary_api_key: str) -> None:
    import hashlib
    digest = hashlib.sha256(b"a call").hexdigest()
    issued = notary_server.post("/v1/tool-calls", json_body={
        "server": "srv", "tool": "t", "call_sha256": digest}, api_key=notary_api_key)
    assert issued.status == 201
    receipt = issued.json()
    got = notary_server.get(f"/v1/tool-calls/{receipt['id']}/receipt.cose")
    assert got.status == 200 and got.content_type == MEDIA_TYPE
    keys = _keys(notary_server.get("/.well-known/scitt-keys").body)
    entry = LogEntry.from_receipt(receipt).encode()
    verify_receipt(got.body, entry=entry, keys=keys)
    ed = next(k for k in keys if k.alg == ALG_EDDSA)
    assert scitt_cose.verify_receipt(got.body, leaf_entry_hex=entry.hex(),
                                     log_public_key_pem=_pem(ed.public_key)).ok
    tampered = bytearray(got.body)
    tampered[-1] ^= 1
    try:
        verify_receipt(bytes(tampered), entry=entry, keys=keys)
        raise AssertionError("a tampered receipt verified")
    except CoseReceiptError:
        pass
    assert parse_receipt(got.body).tree_size == 1
