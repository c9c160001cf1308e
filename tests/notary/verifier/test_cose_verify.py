"""``notary verify --cose``: an RFC 9942 COSE receipt checked beside a tool call, as the report's
own ``cose`` line (notary.core.cose_verification), against a real notary on loopback.

Receipts come from the notary's route; the bad ones are its receipts with a byte changed, the
receipt of another entry or of another log, and receipts signed by a key the verifier does not
trust (or by the log's key over another root of the same size: a fork).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ledger.core.cose_receipt import (
    CoseSigner,
    encode_receipt,
    parse_receipt,
    sign_root,
)
from ledger.core.hashing import leaf_hash, node_hash
from ledger.core.note import Ed25519Signer
from notary.core.cose_verification import check_cose
from notary.core.receipts import Receipt
from notary.verifier.trust import parse_log_keys
from tests.notary_server import Call, LiveNotary, capture_cli, live_notary
from tests.verifying import json_out

LEVELS_PASSED = {"record": "passed", "signature": "passed", "inclusion": "passed",
                 "witnesses": "skipped"}
"""Levels 1-4 of every call here, whatever its COSE receipt (level 5 depends on the network)."""


async def cose_of(notary: LiveNotary, call: Call, query: str = "") -> bytes:
    async with notary.http.get(f"{notary.url}/v1/tool-calls/{call.receipt['id']}/receipt.cose"
                               + query) as r:
        assert r.status == 200, await r.text()
        return await r.read()


async def vkeys(notary: LiveNotary) -> list[str]:
    """The log's verifier keys, Ed25519 first then ML-DSA-44 (``GET /v1/ledger``)."""
    async with notary.http.get(notary.url + "/v1/ledger") as r:
        keys: list[str] = (await r.json())["vkeys"]
    return keys


def write(tmp: Path, name: str, data: bytes | Any) -> str:
    path = tmp / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(json.dumps(data))
    return str(path)


async def verify_cli(tmp: Path, notary: LiveNotary, call: Call, cose: bytes, *extra: str
                     ) -> tuple[int, dict[str, Any]]:
    """``notary verify SAVED --cose FILE --json`` with the notary's keys and no state."""
    code, out, _ = await capture_cli(
        "verify", write(tmp, "call.json", call.saved), "--cose",
        write(tmp, "receipt.cose", cose), *notary.trust_args(), "--no-state", "--json", *extra)
    doc: dict[str, Any] = json_out(out)
    return code, doc


def leaf_of(call: Call) -> bytes:
    """The leaf hash of the call's log entry, rebuilt from its receipt."""
    return leaf_hash(Receipt.from_json(call.receipt).entry().encode())


def levels(doc: dict[str, Any]) -> dict[str, str]:
    return {name: level["status"] for name, level in doc["levels"].items()
            if name != "consistency"}


async def test_a_cose_receipt_from_the_route_verifies_beside_the_call(
        notary: LiveNotary, tmp_path: Path) -> None:
    c0, c1 = await notary.notarize(x=0), await notary.notarize(x=1)
    code, doc = await verify_cli(tmp_path, notary, c1, await cose_of(notary, c1))
    assert code == 0 and doc["valid"] is True, doc
    assert doc["cose"] == {"status": "passed", "required": True, "reason":
                           "EdDSA signature by the log key over the root of tree size 2, leaf 1"}
    assert levels(doc) == LEVELS_PASSED  # the five levels mean what they meant
    # In a given older tree too, and in the text report as its own line.
    code, out, _ = await capture_cli(
        "verify", write(tmp_path, "c0.json", c0.saved), "--cose",
        write(tmp_path, "c0.cose", await cose_of(notary, c0, "?size=1")),
        *notary.trust_args(), "--no-state")
    assert code == 0, out
    assert "     cose         PASSED   (required): EdDSA signature" in out
    assert "tree size 1, leaf 0" in out and "VALID: every required level passed." in out

    # ML-DSA-44, with the receipt and the record, under the log's ML-DSA-44 key.
    mldsa = await cose_of(notary, c1, "?alg=ML-DSA-44")
    ed_vkey, pq_vkey = await vkeys(notary)
    assert ed_vkey == notary.vkey
    code, out, _ = await capture_cli(
        "verify", "--receipt", write(tmp_path, "r.json", c1.receipt), "--record",
        write(tmp_path, "rec.json", c1.record.to_json()), "--cose",
        write(tmp_path, "m.cose", mldsa), "--jwks", str(notary.jwks_file),
        "--log-key", ed_vkey, "--log-key", pq_vkey, "--no-state", "--json")
    doc = json_out(out)
    assert code == 0 and doc["cose"]["status"] == "passed", out
    assert doc["cose"]["reason"].startswith("ML-DSA-44 signature")
    # Trusting the Ed25519 log key alone verifies no ML-DSA-44 receipt.
    code, doc = await verify_cli(tmp_path, notary, c1, mldsa)
    assert code == 1 and doc["valid"] is False and levels(doc) == LEVELS_PASSED
    assert doc["cose"]["status"] == "failed"
    assert "no trusted ML-DSA-44 key has kid" in doc["cose"]["reason"]


async def test_a_changed_byte_anywhere_fails(notary: LiveNotary, tmp_path: Path) -> None:
    await notary.notarize(x=0)
    call = await notary.notarize(x=1)
    good = await cose_of(notary, call)
    receipt = Receipt.from_json(call.receipt)
    keys = parse_log_keys([notary.vkey])
    assert check_cose(receipt, good, keys).status == "passed"
    for i in range(len(good)):
        bad = good[:i] + bytes([good[i] ^ 0x01]) + good[i + 1:]
        result = check_cose(receipt, bad, keys)
        assert result.status == "failed", (i, result)
    assert check_cose(receipt, good + b"\x00", keys).reason.startswith("malformed COSE receipt")
    # The command: the signature's last byte changed; exit 1 with the reason, levels untouched.
    code, doc = await verify_cli(tmp_path, notary, call, good[:-1] + bytes([good[-1] ^ 1]))
    assert code == 1 and levels(doc) == LEVELS_PASSED
    assert doc["cose"] == {"status": "failed", "required": True, "reason": (
        "the signature does not verify over the root the inclusion proof leads to: the "
        "receipt is not for this entry, or was altered")}
    code, out, _ = await capture_cli(
        "verify", write(tmp_path, "call.json", call.saved), "--cose",
        write(tmp_path, "empty.cose", b""), *notary.trust_args(), "--no-state")
    assert code == 1 and "NOT VALID: cose did not pass." in out, out


async def test_another_entrys_or_another_logs_receipt_fails(
        notary: LiveNotary, tmp_path: Path) -> None:
    c0, c1 = await notary.notarize(x=0), await notary.notarize(x=1)
    code, doc = await verify_cli(tmp_path, notary, c1, await cose_of(notary, c0))
    assert code == 1 and levels(doc) == LEVELS_PASSED
    assert doc["cose"]["reason"] == ("the COSE receipt proves leaf 0; this receipt's entry is at "
                                     "index 1 (a COSE receipt of another entry)")
    async with live_notary(tmp_path / "other") as other:
        o0 = await other.notarize(x=0)
        theirs = await cose_of(other, o0)
        code, doc = await verify_cli(tmp_path, notary, c0, theirs)
        assert code == 1 and levels(doc) == LEVELS_PASSED
        origin = c0.receipt["ledger"]["origin"]
        assert doc["cose"]["reason"] == (
            f"the COSE receipt is issued by {other.calls[0].receipt['ledger']['origin']!r} "
            f"(CWT claim 1); this receipt's log is {origin!r}")
        # The other log's key trusted instead: no key for this receipt's log.
        receipt = Receipt.from_json(c0.receipt)
        assert check_cose(receipt, await cose_of(notary, c0),
                          parse_log_keys([other.vkey])).reason == (
            f"no trusted log key for origin {origin!r} verifies COSE receipts (an Ed25519 or "
            "ML-DSA-44 log key)")


async def test_a_key_the_verifier_does_not_trust_fails(notary: LiveNotary,
                                                      tmp_path: Path) -> None:
    await notary.notarize(x=0)
    call = await notary.notarize(x=1)
    genuine = parse_receipt(await cose_of(notary, call))
    origin = call.receipt["ledger"]["origin"]
    root = node_hash(genuine.path[0], leaf_of(call))
    log = CoseSigner.ed25519(notary.signer)

    def signed_by(signer: CoseSigner, root: bytes, path: list[bytes]) -> bytes:
        signed = sign_root(signer, issuer=origin, tree_size=2, root=root, iat=0)
        return encode_receipt(signed, 1, path)

    # Another key under this log's name, with its own kid, or with the log key's kid.
    impostor = CoseSigner.ed25519(Ed25519Signer.generate(origin))
    code, doc = await verify_cli(tmp_path, notary, call, signed_by(impostor, root,
                                                                   list(genuine.path)))
    assert code == 1 and doc["cose"]["reason"].startswith("no trusted EdDSA key has kid ")
    posing = CoseSigner(log.key, impostor.sign)
    code, doc = await verify_cli(tmp_path, notary, call, signed_by(posing, root,
                                                                   list(genuine.path)))
    assert code == 1 and doc["cose"]["reason"].startswith("the signature does not verify")
    # The log's own key over the same size as the receipt's checkpoint, another root: a fork.
    sibling = secrets.token_bytes(32)
    code, doc = await verify_cli(tmp_path, notary, call, signed_by(
        log, node_hash(sibling, leaf_of(call)), [sibling]))
    assert code == 1 and levels(doc) == LEVELS_PASSED
    assert doc["cose"]["reason"] == (
        "the log signed two different roots for tree size 2: the COSE receipt's and the "
        "checkpoint of the receipt's proof (a fork)")
    # The genuine receipt, for comparison, re-signed by the log: passes.
    code, doc = await verify_cli(tmp_path, notary, call, signed_by(log, root,
                                                                   list(genuine.path)))
    assert code == 0, doc


async def test_offline_needs_no_network(notary: LiveNotary, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    call = await notary.notarize(x=0)
    cose = await cose_of(notary, call)
    await notary.stop()
    port = int(notary.url.rsplit(":", 1)[1])
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", port, reuse_address=True)

    def no_sessions(*a: Any, **k: Any) -> None:
        raise AssertionError("offline verification opened an HTTP session")

    monkeypatch.setattr(aiohttp.ClientSession, "__init__", no_sessions)
    try:
        code, doc = await verify_cli(tmp_path, notary, call, cose, "--offline")
        assert code == 0 and doc["cose"]["status"] == "passed", doc
        tampered = cose[:-1] + bytes([cose[-1] ^ 1])
        code, doc = await verify_cli(tmp_path, notary, call, tampered, "--offline")
        assert code == 1 and doc["cose"]["status"] == "failed", doc
    finally:
        listener.close()
        await listener.wait_closed()
    assert accepted == []


async def test_usage_errors(notary: LiveNotary, tmp_path: Path) -> None:
    call = await notary.notarize(x=0)
    code, _, err = await capture_cli(
        "verify", write(tmp_path, "call.json", call.saved), "--cose",
        str(tmp_path / "missing.cose"), *notary.trust_args(), "--no-state")
    assert code == 2 and "cannot read the COSE receipt" in err
    store = tmp_path / "evidence"
    store.mkdir()
    write(store, "call.json", call.saved)
    code, _, err = await capture_cli("verify", str(store), "--cose",
                                     write(tmp_path, "r.cose", await cose_of(notary, call)),
                                     *notary.trust_args(), "--no-state")
    assert code == 2 and "--cose goes with one tool call" in err, err
