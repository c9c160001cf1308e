"""AER-1 receipts: the schema copy, building, the pure checks, and ``notary verify`` on them."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from notary.cli.main import main as notary_cli
from notary.core import aer1
from notary.core.canonical import canonical_json
from notary.core.meta import AER1_META_KEY
from notary.core.records import CallRecord, new_salt
from notary.sdk import NotaryClient
from tests.notary_server import LiveNotary

REPO = Path(__file__).resolve().parents[3]
PACKAGED_SCHEMA = REPO / "notary" / "aer-1-receipt.schema.json"


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(PACKAGED_SCHEMA.read_text())
    return schema


VALIDATOR = Draft202012Validator(load_schema(),
                                 format_checker=Draft202012Validator.FORMAT_CHECKER)


# SHA-256 of the RFC 8785 bytes of the published AER-1 schema (draft -12,
# receipt_schema_version 0.3, $id https://zambo.dev/aer-1/schema.json): pinned here, so the
# check needs nothing outside the clone.
PUBLISHED_SCHEMA_JCS_SHA256 = "5ed5cb5134ecd11294adf62e77c0460dc970872bd5541a3cf3dbfa0c78f4ee04"


def test_schema_copy_matches_the_spec() -> None:
    packaged = load_schema()
    assert packaged.pop("x-source").startswith("Copied verbatim")
    assert packaged["$id"] == "https://zambo.dev/aer-1/schema.json"
    digest = hashlib.sha256(canonical_json(packaged)).hexdigest()
    assert digest == PUBLISHED_SCHEMA_JCS_SHA256


def record() -> CallRecord:
    return CallRecord(server="srv", tool="weather.forecast", arguments={"city": "Oslo"},
                      result={"content": [{"type": "text", "text": "rain, 7 °C"}],
                              "isError": False}, salt=new_salt())


async def anchored(notary: LiveNotary) -> tuple[CallRecord, dict[str, Any]]:
    rec = record()
    async with NotaryClient(notary.url, notary.key) as c:
        receipt = await c.notarize(rec.server, rec.tool, rec.call_sha256())
    built = aer1.build_aer1(
        record=rec, provenance=aer1.PROVENANCE_GATEWAY, verification_status="execution_observed",
        status="success", tool_context={"name": rec.tool, "version": "1", "scope": "mcp:srv"},
        notary_receipt=receipt)
    return rec, built


def statuses(verdict: aer1.Aer1Verdict) -> dict[str, str]:
    return {n: verdict.levels[n].status for n in aer1.AER1_LEVELS}


async def test_build_and_verify(notary: LiveNotary) -> None:
    rec, receipt = await anchored(notary)
    VALIDATOR.validate(receipt)
    data = base64.b64decode(receipt["canonical_bytes"])
    assert data == rec.canonical_bytes() and receipt["canonical_byte_length"] == len(data)
    assert receipt["output_hash"] == "sha256:" + rec.call_sha256()
    assert receipt["anchor"]["index"] == receipt["anchor"]["receipt"]["ledger"]["index"]
    assert receipt["anchor"]["checkpoint"].startswith(receipt["anchor"]["origin"] + "\n")
    verdict = aer1.verify_aer1(receipt, jwks=notary.jwks, log_verifier=notary.log_key)
    assert verdict.valid and statuses(verdict) == dict.fromkeys(aer1.AER1_LEVELS, "passed")
    assert verdict.record == rec.to_json()
    # Without trust anchors the bytes and hash still check, the anchor cannot.
    verdict = aer1.verify_aer1(receipt, jwks=None, log_verifier=None)
    assert statuses(verdict) == {"bytes": "passed", "hash": "passed", "anchor": "skipped"}
    assert not verdict.valid


async def test_every_kind_of_tampering_is_caught(notary: LiveNotary) -> None:
    _, good = await anchored(notary)
    _, other = await anchored(notary)

    def check(change: Any, expect: dict[str, str]) -> None:
        receipt = copy.deepcopy(good)
        change(receipt)
        verdict = aer1.verify_aer1(receipt, jwks=notary.jwks, log_verifier=notary.log_key)
        assert not verdict.valid
        for level, status in expect.items():
            assert verdict.levels[level].status == status, (level, verdict.to_json())

    def other_bytes(r: dict[str, Any]) -> None:
        data = base64.b64decode(r["canonical_bytes"]).replace(b"rain", b"snow")
        r["canonical_bytes"] = base64.b64encode(data).decode()

    def rehashed(r: dict[str, Any]) -> None:
        other_bytes(r)
        r["output_hash"] = "sha256:" + hashlib.sha256(
            base64.b64decode(r["canonical_bytes"])).hexdigest()

    check(other_bytes, {"bytes": "passed", "hash": "failed"})
    check(rehashed, {"hash": "passed", "anchor": "failed"})  # the anchor is for other bytes
    check(lambda r: r.update(canonical_bytes="not base64!"), {"bytes": "failed"})
    check(lambda r: r.update(canonical_byte_length=3), {"bytes": "failed"})
    check(lambda r: r.update(hash_algorithm="md5"), {"hash": "failed"})
    check(lambda r: r.update(tool="other.tool"), {"anchor": "failed"})
    check(lambda r: r["anchor"].update(index=r["anchor"]["index"] + 1), {"anchor": "failed"})
    check(lambda r: r["anchor"].update(checkpoint=other["anchor"]["checkpoint"] + " "),
          {"anchor": "failed"})
    check(lambda r: r["anchor"]["receipt"].update(issued_at="2020-01-01T00:00:00.000Z"),
          {"anchor": "failed"})  # the signature no longer covers it
    check(lambda r: r.update(anchor=None), {"bytes": "passed", "hash": "passed",
                                           "anchor": "skipped"})


def test_extract() -> None:
    receipt = {"canonical_bytes": "", "output_hash": "sha256:" + "0" * 64}
    result = {"content": [], "_receipt": receipt}
    assert aer1.extract_aer1(receipt) == receipt
    assert aer1.extract_aer1(result) == receipt
    assert aer1.extract_aer1({"jsonrpc": "2.0", "id": 1, "result": result}) == receipt
    assert aer1.extract_aer1({"content": [], "_meta": {AER1_META_KEY: receipt}}) == receipt
    assert aer1.extract_aer1({"content": [], "_meta": {}}) is None


async def test_notary_verify_accepts_aer1(notary: LiveNotary, tmp_path: Path) -> None:
    _, receipt = await anchored(notary)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(notary.jwks.to_json()))
    trust = ["--jwks", str(jwks), "--log-key", notary.vkey, "--no-state", "--offline"]

    def verify(doc: Any, *extra: str) -> tuple[int, str]:
        path = tmp_path / "doc.json"
        path.write_text(json.dumps(doc))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = notary_cli(["verify", str(path), *trust, *extra])
        return code, out.getvalue()

    code, out = await asyncio.to_thread(verify, receipt)
    assert code == 0 and "VALID" in out and "OBSERVED VIA GATEWAY" in out, out
    # A wire result carrying it at result._receipt, and a JSON-RPC response around one.
    wire = {"content": [{"type": "text", "text": "rain, 7 °C"}], "_receipt": receipt}
    code, out = await asyncio.to_thread(verify, {"jsonrpc": "2.0", "id": 7, "result": wire},
                                        "--json")
    report = json.loads(out)
    assert code == 0 and report["valid"]
    assert {k: v["status"] for k, v in report["levels"].items()} == dict.fromkeys(
        aer1.AER1_LEVELS, "passed")
    tampered = copy.deepcopy(receipt)
    tampered["output_hash"] = "sha256:" + "1" * 64
    code, out = await asyncio.to_thread(verify, tampered)
    assert code == 1 and "NOT VALID" in out
