"""Rolling to a new log while ``notary serve`` runs (issue 33, phase A): the next commit lands
in the new log, every receipt of either log is found and verifies (each log under its own
key, a frozen log's to its final checkpoint), each log is served under ``/logs/<n>``, an idle
server follows the roll within seconds, and a restart keeps it all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import scitt_cose
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.core.checkpoint import open_checkpoint
from ledger.core.cose_receipt import ALG_EDDSA, CoseKey
from ledger.core.cose_receipt import verify_receipt as verify_receipt_cose
from ledger.core.note import Ed25519Signer, Ed25519Verifier
from ledger.core.tlog_proof import decode_proof_bundle
from ledger.storage.base import LogRecord
from notary.core.jwks import Jwks
from notary.core.receipts import Receipt
from notary.core.records import CallRecord, new_salt
from notary.core.verification import verify_receipt
from notary.serving.config import Settings
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import log_signer
from tests.notary_server import HOST, app_notary, bound_socket, capture_cli, start_app
from tests.waiting import eventually

RECORDS: dict[str, CallRecord] = {}


def call(n: int) -> dict[str, str]:
    rec = CallRecord(server="srv", tool="echo", arguments={"n": n},
                     result={"content": [{"type": "text", "text": str(n)}]}, salt=new_salt())
    RECORDS[rec.call_sha256()] = rec
    return {"server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()}


async def post(http: aiohttp.ClientSession, url: str, key: str, body: dict[str, str]
               ) -> tuple[int, dict[str, Any]]:
    async with http.post(url + "/v1/tool-calls", json=body,
                         headers={"Authorization": f"Bearer {key}"}) as r:
        return r.status, await r.json()


async def get_json(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url) as r:
        assert r.status == 200, (url, r.status, await r.text())
        got: dict[str, Any] = await r.json()
        return got


def checkpoint_of(receipt: dict[str, Any], vkey: str) -> tuple[str, int]:
    note = decode_proof_bundle(receipt["proof"].encode()).checkpoint
    cp, _ = open_checkpoint(note, Ed25519Verifier.from_vkey(vkey))
    return cp.origin, cp.size


def database(shared: str) -> dict[str, str]:
    return {} if shared == "sqlite" else {"database": shared}



async def receipts_around_a_roll(http: aiohttp.ClientSession, url: str, key: str, data: Path
                                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A receipt, then `notary log roll`, then another: (the frozen log's, the new log's)."""
    _, old = await post(http, url, key, call(1))
    code, _, err = await capture_cli("log", "roll", "--data", str(data))
    assert code == 0, err
    status, new = await post(http, url, key, call(2))
    assert status == 201, new
    return old, new

async def test_a_roll_while_serving(shared: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    where = ["--data", str(data), *(["--database", shared] if shared != "sqlite" else [])]
    async with app_notary(data, **database(shared)) as notary, \
            aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        bodies = [call(i) for i in range(4)]
        before = [(await post(http, notary.url, key, b))[1] for b in bodies[:3]]
        origin0 = before[0]["ledger"]["origin"]
        code, _, err = await capture_cli("log", "roll", *where)
        assert code == 0, err
        # The next commit lands in log 1, under its own key, at index 0.
        status, after = await post(http, notary.url, key, bodies[3])
        assert status == 201, after
        origin1 = after["ledger"]["origin"]
        assert origin1.startswith(origin0 + "/") and after["ledger"]["index"] == 0
        assert after["ledger"]["entry_url"] == f"{notary.url}/logs/1/v1/ledger/entries/0"
        root = load_log_key(Paths(data))
        ledger = await get_json(http, notary.url + "/v1/ledger")
        assert ledger["origin"] == origin1 and ledger["size"] == 1
        logs = ledger["logs"]
        assert [(g["origin"], g["state"], g["size"]) for g in logs] == [
            (origin0, "frozen", 4), (origin1, "active", 1)]
        assert logs[0]["successor"] == origin1 and logs[1]["successor"] is None
        assert logs[0]["url"] == notary.url + "/logs/0"
        vkey0, vkey1 = logs[0]["vkeys"][0], logs[1]["vkeys"][0]
        assert vkey0 == notary.vkey
        assert vkey1 == ledger["vkey"] == log_signer(root, _record(logs, 1)).verifier_key_text()
        # Every receipt is found again and verifies under its own log's key; log 0's now prove
        # against its final checkpoint (size 4: the successor record is its last entry).
        jwks = Jwks(await get_json(http, notary.url + "/.well-known/jwks.json"))
        for receipt, vkey in [*((r, vkey0) for r in before), (after, vkey1)]:
            stored = await get_json(http, f"{notary.url}/v1/tool-calls/{receipt['id']}")
            assert stored["signature"] == receipt["signature"]
            assert stored["ledger"] == receipt["ledger"]
            verdict = verify_receipt(stored, record=None, jwks=jwks,
                                     log_verifier=Ed25519Verifier.from_vkey(vkey))
            assert verdict.levels["inclusion"].status == "passed", verdict.to_json()
        assert checkpoint_of(await get_json(
            http, f"{notary.url}/v1/tool-calls/{before[0]['id']}"), vkey0) == (origin0, 4)
        # A digest logged in log 0 is still a duplicate: its receipt comes back.
        status, again = await post(http, notary.url, key, bodies[0])
        assert status == 200 and again["id"] == before[0]["id"], again
        # Search spans both logs, newest first, its cursor across the roll; so do time bounds.
        page = await get_json(http, notary.url + "/v1/tool-calls?limit=2")
        assert [t["id"] for t in page["tool_calls"]] == [after["id"], before[2]["id"]]
        page = await get_json(http, f"{notary.url}/v1/tool-calls?limit=2&cursor="
                                    f"{page['next_cursor']}")
        assert [t["id"] for t in page["tool_calls"]] == [before[1]["id"], before[0]["id"]]
        since = before[1]["issued_at"].replace(":", "%3A")
        page = await get_json(http, f"{notary.url}/v1/tool-calls?since={since}")
        assert [t["id"] for t in page["tool_calls"]] == [
            after["id"], before[2]["id"], before[1]["id"]]
        # Each log under /logs/<n>; the active one at today's paths too.
        async with http.get(notary.url + "/logs/0/checkpoint") as r:
            final0 = await r.read()
        assert open_checkpoint(final0, Ed25519Verifier.from_vkey(vkey0))[0].size == 4
        async with http.get(notary.url + "/logs/1/checkpoint") as r:
            assert open_checkpoint(await r.read(), Ed25519Verifier.from_vkey(vkey1))[0].size == 1
        async with http.get(notary.url + "/logs/1/v1/ledger/entries/0") as r:
            assert r.status == 200
        async with http.get(notary.url + "/logs/2/checkpoint") as r:
            assert r.status == 404
    # A restart keeps the active log and finds receipts of both.
    sock = bound_socket()
    served = await start_app(Settings(data=data, listen=f"{HOST}:{sock.getsockname()[1]}",
                                      **database(shared)), sock)
    try:
        async with aiohttp.ClientSession() as http:
            ledger = await get_json(http, served.url + "/v1/ledger")
            assert ledger["origin"] == origin1
            for receipt in [*before, after]:
                await get_json(http, f"{served.url}/v1/tool-calls/{receipt['id']}")
    finally:
        await served.stop()


def _record(logs: list[dict[str, Any]], n: int) -> LogRecord:
    g = logs[n]
    return LogRecord(n, g["origin"], g["origin"].rsplit("/", 1)[-1], g["state"], 0.0,
                     tuple(g["vkeys"]))


async def test_an_idle_server_follows_a_roll_within_seconds(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with app_notary(data) as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        await post(http, notary.url, key, call(1))
        code, _, err = await capture_cli("log", "roll", "--data", str(data))
        assert code == 0, err

        async def switched() -> dict[str, Any] | None:
            ledger = await get_json(http, notary.url + "/v1/ledger")
            logs = ledger["logs"]
            return ledger if len(logs) == 2 and logs[1]["origin"] == ledger["origin"] else None

        ledger = await eventually(switched, "the idle notary to follow the roll", timeout=6)
        assert ledger["size"] == 0, ledger


async def test_notary_verify_checks_receipts_of_a_frozen_log_and_the_next(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with app_notary(data) as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        old, new = await receipts_around_a_roll(http, notary.url, key, data)
        ledger = await get_json(http, notary.url + "/v1/ledger")
        vkey1 = ledger["logs"][1]["vkeys"][0]
        for receipt, trust in [
                (old, ["--notary", notary.url]),  # the log list names the frozen log's key
                (new, ["--notary", notary.url]),
                (new, ["--jwks", notary.url + "/.well-known/jwks.json", "--log-key", vkey1])]:
            saved, record = tmp_path / f"{receipt['id']}.json", tmp_path / "record.json"
            saved.write_text(json.dumps(receipt))
            record.write_text(json.dumps(RECORDS[receipt["call_sha256"]].to_json()))
            code, out, err = await capture_cli("verify", "--receipt", str(saved),
                                               "--record", str(record), *trust,
                                               "--no-state", "--upgrade", "--json")
            doc = json.loads(out)
            levels = {k: v["status"] for k, v in doc["levels"].items()}
            assert levels["signature"] == levels["inclusion"] == "passed", (out, err)
            assert levels["consistency"] == "passed", doc["levels"]["consistency"]
        # A frozen log's receipt under the next log's key alone: no trusted key for its origin.
        saved = tmp_path / "old.json"
        saved.write_text(json.dumps(old))
        record.write_text(json.dumps(RECORDS[old["call_sha256"]].to_json()))
        code, out, _ = await capture_cli(
            "verify", "--receipt", str(saved), "--record", str(record),
            "--jwks", notary.url + "/.well-known/jwks.json",
            "--log-key", vkey1, "--no-state", "--json")
        assert code != 0 and json.loads(out)["levels"]["inclusion"]["status"] == "failed"


async def test_cose_receipts_follow_the_roll(tmp_path: Path) -> None:
    """After a roll, the next log's COSE receipts are signed by its key under its origin, and
    a frozen log's entry gets one proving it in that log's final checkpoint (or a smaller tree)
    under the frozen log's own key, checked here by scitt-cose too; after a compromised roll,
    the logs whose keys it retired give none (404 saying why), never one signed with another
    log's key."""
    data = tmp_path / "data"
    async with app_notary(data) as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        before, after = await receipts_around_a_roll(http, notary.url, key, data)
        logs = (await get_json(http, notary.url + "/v1/ledger"))["logs"]
        for got, log in ((after, logs[1]), (before, logs[0])):
            verifier = Ed25519Verifier.from_vkey(log["vkeys"][0])
            async with http.get(f"{notary.url}/v1/tool-calls/{got['id']}/receipt.cose") as r:
                assert r.status == 200, await r.text()
                data_cose = await r.read()
            entry = Receipt.from_json(got).entry().encode()
            parsed, _ = verify_receipt_cose(data_cose, entry=entry,
                                            keys=[CoseKey(ALG_EDDSA, verifier.public_key)])
            assert parsed.issuer == got["ledger"]["origin"] == log["origin"]
            assert parsed.leaf_index == got["ledger"]["index"]
            assert parsed.tree_size == log["size"]  # log 0: its final size (the successor too)
            assert scitt_cose.verify_receipt(data_cose, leaf_entry_hex=entry.hex(),
                                             log_public_key_pem=_pem(verifier.public_key)).ok
        url = f"{notary.url}/v1/tool-calls/{before['id']}/receipt.cose"
        async with http.get(url + "?size=1") as r:  # a smaller tree of the frozen log
            assert r.status == 200, await r.text()
            assert verify_receipt_cose(await r.read(), entry=Receipt.from_json(before).entry()
                                       .encode(), keys=[CoseKey(ALG_EDDSA, Ed25519Verifier
                                                        .from_vkey(logs[0]["vkeys"][0])
                                                        .public_key)])[0].tree_size == 1
        async with http.get(url + f"?size={logs[0]['size'] + 1}") as r:
            assert r.status == 404
        code, _, err = await capture_cli("log", "roll", "--data", str(data), "--reason",
                                         "compromised")
        assert code == 0, err
        for got in (before, after):
            async with http.get(f"{notary.url}/v1/tool-calls/{got['id']}/receipt.cose") as r:
                assert r.status == 404
                assert "retired" in (await r.json())["error"]["message"]


def _pem(public_key: bytes) -> bytes:
    return Ed25519PublicKey.from_public_bytes(public_key).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)



async def test_a_policy_naming_both_logs_is_their_log_keys(tmp_path: Path) -> None:
    """``--witness-policy`` with a ``log`` line per log (log 0's key, log 1's) verifies the
    receipts of each, offline and online, with no --log-key; one naming log 1 alone fails a
    receipt of log 0 at level 3 naming its origin, --notary beside it too (the policy's keys are
    pinned: the notary's list adds none)."""
    data = tmp_path / "data"
    async with app_notary(data) as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        old, new = await receipts_around_a_roll(http, notary.url, key, data)
        logs = (await get_json(http, notary.url + "/v1/ledger"))["logs"]
        jwks = tmp_path / "jwks.json"
        jwks.write_text(json.dumps(await get_json(http, notary.url + "/.well-known/jwks.json")))
        both, second = tmp_path / "both.policy", tmp_path / "second.policy"
        both.write_text(f"log {logs[0]['vkeys'][0]}\nlog {logs[1]['vkeys'][0]}\nquorum none\n")
        second.write_text(f"log {logs[1]['vkeys'][0]}\nquorum none\n")

        async def verify(receipt: dict[str, Any], *trust: str) -> tuple[int, dict[str, Any]]:
            saved, record = tmp_path / "receipt.json", tmp_path / "record.json"
            saved.write_text(json.dumps(receipt))
            record.write_text(json.dumps(RECORDS[receipt["call_sha256"]].to_json()))
            code, out, err = await capture_cli("verify", "--receipt", str(saved), "--record",
                                               str(record), *trust, "--no-state", "--json")
            assert out, err
            return code, json.loads(out)

        for receipt in (old, new):
            for offline in ([], ["--offline"]):
                code, doc = await verify(receipt, "--jwks", str(jwks), "--witness-policy",
                                         str(both), *offline)
                assert code == 0, doc
                assert doc["levels"]["consistency"]["status"] == (
                    "skipped" if offline else "passed"), doc
        for trust in (["--jwks", str(jwks), "--offline"], ["--notary", notary.url]):
            code, doc = await verify(old, *trust, "--witness-policy", str(second))
            inclusion = doc["levels"]["inclusion"]
            assert code == 1 and inclusion["status"] == "failed", doc
            assert f"no trusted log key for origin {logs[0]['origin']!r}" in inclusion["reason"]


async def test_notary_verify_follows_the_chain_from_log_0s_key(tmp_path: Path) -> None:
    """With only log 0's key pinned, a receipt of log 2 verifies online: its key is followed
    through the successor records ending logs 0 and 1 (each proven under its final checkpoint).
    A pinned key that is not log 0's breaks the chain at its first link, and says so."""
    data = tmp_path / "data"
    async with app_notary(data) as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        await post(http, notary.url, key, call(1))
        for _ in range(2):
            code, _, err = await capture_cli("log", "roll", "--data", str(data))
            assert code == 0, err
        _, new = await post(http, notary.url, key, call(2))
        logs = (await get_json(http, notary.url + "/v1/ledger"))["logs"]
        assert new["ledger"]["origin"] == logs[2]["origin"]
        saved, record = tmp_path / "new.json", tmp_path / "record.json"
        saved.write_text(json.dumps(new))
        record.write_text(json.dumps(RECORDS[new["call_sha256"]].to_json()))
        stranger = Ed25519Signer.generate(logs[0]["origin"]).verifier_key_text()
        for pinned, valid in ((logs[0]["vkeys"][0], True), (stranger, False)):
            code, out, err = await capture_cli(
                "verify", "--receipt", str(saved), "--record", str(record),
                "--jwks", notary.url + "/.well-known/jwks.json", "--log-key", pinned,
                "--no-state", "--json")
            doc = json.loads(out)
            inclusion = doc["levels"]["inclusion"]
            if valid:
                assert code == 0 and inclusion["status"] == "passed", (out, err)
                assert doc["levels"]["consistency"]["status"] == "passed", out
                assert any("through 2 successor record(s)" in n for n in doc["notes"]), out
            else:
                assert code == 1 and inclusion["status"] == "failed", out
                assert "following the chain of logs" in inclusion["reason"], out


async def test_receipt_key_rotations_compose_with_a_roll(tmp_path: Path) -> None:
    """Receipt keys rotate independently of the log: a rotation before a roll and one after it
    leave receipts of log 0 under keys A and B and of log 1 under B and C, and every one
    verifies (its receipt signature under the JWKS, which keeps old keys; its inclusion under
    its own log's key)."""
    data = tmp_path / "data"
    async with app_notary(data) as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        receipts: list[dict[str, Any]] = []

        async def issue(n: int) -> dict[str, Any]:
            status, got = await post(http, notary.url, key, call(n))
            assert status == 201, got
            receipts.append(got)
            return got

        async def rotate(start: int) -> None:
            before = receipts[-1]["signature"]["kid"]
            code, _, err = await capture_cli("keys", "rotate", "--data", str(data))
            assert code == 0, err
            await notary.notary.refresh_keys(force=True)
            got = await issue(start)
            assert got["signature"]["kid"] != before

        await issue(1)
        await rotate(2)
        code, _, err = await capture_cli("log", "roll", "--data", str(data))
        assert code == 0, err
        await issue(3)
        await rotate(4)
        kids = [(r["ledger"]["origin"], r["signature"]["kid"]) for r in receipts]
        origins = sorted({o for o, _ in kids}, key=len)
        a, b, c = dict.fromkeys(k for _, k in kids)
        assert kids == [(origins[0], a), (origins[0], b), (origins[1], b), (origins[1], c)]
        record = tmp_path / "record.json"
        for receipt in receipts:
            saved = tmp_path / f"{receipt['id']}.json"
            saved.write_text(json.dumps(receipt))
            record.write_text(json.dumps(RECORDS[receipt["call_sha256"]].to_json()))
            code, out, err = await capture_cli("verify", "--receipt", str(saved), "--record",
                                               str(record), "--notary", notary.url,
                                               "--no-state", "--json")
            doc = json.loads(out)
            assert code == 0 and doc["valid"], (out, err)
            assert doc["levels"]["signature"]["status"] == "passed"
            assert doc["levels"]["consistency"]["status"] == "passed"
