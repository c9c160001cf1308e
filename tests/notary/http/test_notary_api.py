"""End to end: the notary app on a loopback socket, driven over HTTP with aiohttp's client.

Every test runs against each store backend (``database`` "" = SQLite, "memory:", a PostgreSQL
URL: a database of its own in this test process's throwaway cluster), and reaches the store only
through the typed contract (``notary.operator.admin``), as any backend's user would.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from ledger.core.note import Ed25519Verifier
from notary.core.accounts import month_of
from notary.core.jwks import Jwks
from notary.core.records import CallRecord, new_salt
from notary.core.server_names import server_name_problem
from notary.core.verification import verify_receipt
from notary.http.routes import tool_calls
from notary.store.memory import MemoryNotaryStore
from tests.notary_server import AppNotary, app_notary
from tests.pgcluster import pg_dump_tables

BACKENDS = ["sqlite", "memory", "postgres"]


@dataclass
class Server:
    url: str
    data: Path
    notary: AppNotary
    http: aiohttp.ClientSession
    vkey: str
    backend: str
    database: str = ""

    @property
    def app(self) -> web.Application:
        return self.notary.app

    async def new_key(self, account: str = "alice", allowance: int | None = None) -> str:
        return await self.notary.new_api_key(account, allowance)

    async def used_this_month(self, account: str) -> int:
        month = month_of(datetime.now(UTC))
        return sum(k.used_this_month for k in await self.notary.store.list_api_keys(month)
                   if k.account == account)

    async def stored_state(self) -> bytes:
        """Everything the store holds, as bytes (to compare, and to search for secrets)."""
        store = self.notary.store
        if self.backend == "postgres":
            return await pg_dump_tables(self.database)
        if isinstance(store, MemoryNotaryStore):
            return pickle.dumps({k: v for k, v in vars(store).items() if k != "_lock"})
        db = self.data / "notary.store.sqlite"
        with sqlite3.connect(db) as c:
            tables = [(t, c.execute(f"SELECT * FROM {t}").fetchall()) for (t,) in
                      c.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        wal = db.with_name("notary.store.sqlite-wal")
        return repr(tables).encode() + db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")

    async def post(self, path: str, body: Any, key: str | None = None,
                   raw: bytes | None = None) -> tuple[int, Any, aiohttp.ClientResponse]:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        data = raw if raw is not None else json.dumps(body).encode()
        async with self.http.post(self.url + path, data=data, headers=headers) as r:
            return r.status, await r.json(content_type=None), r

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.http.get(self.url + path) as r:
            return r.status, await r.json(content_type=None)


@pytest.fixture(params=BACKENDS)
async def server(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Server]:
    database = ("memory:" if request.param == "memory" else
                request.getfixturevalue("pg_url") if request.param == "postgres" else "")
    async with app_notary(tmp_path / "data", max_body=4096, database=database) as notary, \
            aiohttp.ClientSession() as http:
        if request.param == "postgres":  # the URL selected the PostgreSQL store, not a default
            assert type(notary.store).__name__ == "PgNotaryStore"
        yield Server(notary.url, notary.data, notary, http, notary.vkey, request.param, database)


def record(tool: str = "echo", **arguments: Any) -> CallRecord:
    return CallRecord(server="srv", tool=tool, arguments=arguments,
                      result={"content": [{"type": "text", "text": json.dumps(arguments)}]},
                      salt=new_salt())


def issue_body(rec: CallRecord) -> dict[str, str]:
    return {"server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()}


async def test_issue_fetch_lookup_and_verify_offline(server: Server) -> None:
    key = await server.new_key()
    rec = record(x=1)
    status, receipt, _ = await server.post("/v1/tool-calls", issue_body(rec), key)
    assert status == 201
    assert receipt["id"].startswith("tc_") and "proof" in receipt
    # Offline: only the JWKS and the log verifier key.
    _, jwks = await server.get("/.well-known/jwks.json")
    verdict = verify_receipt(receipt, record=rec.to_json(), jwks=Jwks(jwks),
                             log_verifier=Ed25519Verifier.from_vkey(server.vkey))
    assert verdict.valid, verdict.to_json()

    status, again, _ = await server.post("/v1/tool-calls", issue_body(rec), key)
    assert status == 200 and again["id"] == receipt["id"]
    assert again["signature"] == receipt["signature"]

    status, fetched = await server.get(f"/v1/tool-calls/{receipt['id']}")
    assert status == 200 and fetched["signature"] == receipt["signature"]
    status, found = await server.get(f"/v1/tool-calls?call_sha256={rec.call_sha256()}")
    assert status == 200 and found["id"] == receipt["id"]
    status, _ = await server.get("/v1/tool-calls/tc_AAAAAAAAAAAAAAAAAAAAAA")
    assert status == 404

    # The retry was not counted twice.
    assert await server.used_this_month("alice") == 1


async def test_verify_endpoint_levels_and_no_trace(server: Server) -> None:
    key = await server.new_key()
    rec = record(secret="hunter2-do-not-log")
    _, receipt, _ = await server.post("/v1/tool-calls", issue_body(rec), key)
    before = await server.stored_state()
    body = {"id": receipt["id"], "record": {k: v for k, v in rec.to_json().items()
                                             if k not in ("spec", "server")}}
    status, verdict, _ = await server.post("/v1/tool-calls/verify", body)
    assert status == 200 and verdict["valid"] is True
    assert {k: v["status"] for k, v in verdict["levels"].items()
            if k in ("record", "signature", "inclusion")} == dict.fromkeys(
        ("record", "signature", "inclusion"), "passed")
    body["record"]["arguments"] = {"secret": "changed"}
    status, verdict, _ = await server.post("/v1/tool-calls/verify", body)
    assert status == 200 and verdict["valid"] is False
    assert verdict["levels"]["record"]["status"] == "failed"
    assert verdict["levels"]["signature"]["status"] == "passed"
    after = await server.stored_state()
    assert after == before
    assert b"hunter2-do-not-log" not in after and b"changed" not in after


async def test_authentication(server: Server) -> None:
    body = issue_body(record())
    status, err, _ = await server.post("/v1/tool-calls", body)
    assert (status, err["error"]["code"]) == (401, "unauthorized")
    status, err, _ = await server.post("/v1/tool-calls", body, "nk_000000000000_" + "A" * 43)
    assert status == 401
    key = await server.new_key()
    wrong = key[:-1] + ("B" if key[-1] != "B" else "C")
    status, _, _ = await server.post("/v1/tool-calls", body, wrong)
    assert status == 401
    await server.notary.revoke_api_key(key)
    status, err, _ = await server.post("/v1/tool-calls", body, key)
    assert status == 401 and "revoked" in err["error"]["message"]


async def test_monthly_allowance(server: Server) -> None:
    key = await server.new_key("small", allowance=2)
    first = issue_body(record(n=1))
    for body in (first, issue_body(record(n=2))):
        status, _, _ = await server.post("/v1/tool-calls", body, key)
        assert status == 201
    status, err, resp = await server.post("/v1/tool-calls", issue_body(record(n=3)), key)
    assert (status, err["error"]["code"]) == (429, "quota_exceeded")
    assert int(resp.headers["Retry-After"]) > 0
    # A retried digest is still answered: it costs nothing.
    status, _, _ = await server.post("/v1/tool-calls", first, key)
    assert status == 200


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"[]", "invalid_json"),
        (b'{"server":"s","tool":"t"}', "missing_field"),
        (b'{"server":"s","tool":"t","call_sha256":"' + b"a" * 64 + b'","x":1}', "unknown_field"),
        (b'{"server":"","tool":"t","call_sha256":"' + b"a" * 64 + b'"}', "invalid_name"),
        (b'{"server":"' + b"s" * 257 + b'","tool":"t","call_sha256":"' + b"a" * 64 + b'"}',
         "invalid_name"),
        (b'{"server":"s\\n","tool":"t","call_sha256":"' + b"a" * 64 + b'"}', "invalid_name"),
        (b'{"server":"s","tool":7,"call_sha256":"' + b"a" * 64 + b'"}', "invalid_name"),
        (b'{"server":"s","tool":"t","call_sha256":"' + b"A" * 64 + b'"}', "invalid_call_sha256"),
        (b'{"server":"s","tool":"t","call_sha256":"' + b"a" * 63 + b'"}', "invalid_call_sha256"),
    ],
)
async def test_validation(server: Server, raw: bytes, code: str) -> None:
    key = await server.new_key()
    status, err, _ = await server.post("/v1/tool-calls", None, key, raw=raw)
    assert (status, err["error"]["code"]) == (400, code)
    _, ledger = await server.get("/v1/ledger")
    assert ledger["size"] == 0


async def test_a_server_name_is_judged_once(server: Server,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request's server name is judged by the same rules, but a name the notary saw
    already costs no second judgement (ICU's checks were a tenth of a receipt's work on the
    loop); a refused one stays refused, and a value that is not a string is never taken for
    an equal string's answer."""
    judged: list[object] = []
    real = server_name_problem

    def counting(value: object) -> str | None:
        judged.append(value)
        return real(value)

    monkeypatch.setattr(tool_calls, "server_name_problem", counting)
    key = await server.new_key()
    name = f"judged-once-{new_salt()[:8]}"
    for n in range(3):
        digest = hashlib.sha256(f"{name} {n}".encode()).hexdigest()
        status, _, _ = await server.post("/v1/tool-calls", {
            "server": name, "tool": "t", "call_sha256": digest}, key)
        assert status == 201
    assert judged == [name]
    blank = f"judged\u2800once-{new_salt()[:8]}"
    for _ in range(2):
        status, err, _ = await server.post("/v1/tool-calls", {
            "server": blank, "tool": "t", "call_sha256": "a" * 64}, key)
        assert (status, err["error"]["code"]) == (400, "invalid_name")
        assert "U+2800" in err["error"]["message"]
    assert judged == [name, blank]
    for odd in (1, True):
        status, err, _ = await server.post("/v1/tool-calls", {
            "server": odd, "tool": "t", "call_sha256": "a" * 64}, key)
        assert (status, err["error"]["code"]) == (400, "invalid_name")


async def test_conflict_and_body_limit(server: Server) -> None:
    key = await server.new_key()
    rec = record()
    await server.post("/v1/tool-calls", issue_body(rec), key)
    status, err, _ = await server.post(
        "/v1/tool-calls", {**issue_body(rec), "tool": "other"}, key)
    assert (status, err["error"]["code"]) == (409, "digest_conflict")
    status, err, _ = await server.post("/v1/tool-calls", None, key, raw=b" " * 5000)
    assert (status, err["error"]["code"]) == (413, "payload_too_large")
    assert "4096" in err["error"]["message"]


async def test_key_rotation_keeps_old_receipts_valid(server: Server) -> None:
    key = await server.new_key()
    rec1 = record(a=1)
    _, old, _ = await server.post("/v1/tool-calls", issue_body(rec1), key)
    await server.notary.rotate_receipt_key()
    rec2 = record(a=2)
    _, new, _ = await server.post("/v1/tool-calls", issue_body(rec2), key)
    assert new["signature"]["kid"] != old["signature"]["kid"]
    _, jwks = await server.get("/.well-known/jwks.json")
    assert {k["kid"] for k in jwks["keys"]} == {old["signature"]["kid"], new["signature"]["kid"]}
    vkey = Ed25519Verifier.from_vkey(server.vkey)
    _, old_now = await server.get(f"/v1/tool-calls/{old['id']}")
    for receipt, rec in ((old, rec1), (new, rec2), (old_now, rec1)):
        v = verify_receipt(receipt, record=rec.to_json(), jwks=Jwks(jwks), log_verifier=vkey)
        assert v.valid, v.to_json()


async def test_health_and_metrics(server: Server) -> None:
    key = await server.new_key()
    await server.post("/v1/tool-calls", issue_body(record()), key)
    status, health = await server.get("/healthz")
    assert status == 200 and health["size"] == 1
    async with server.http.get(server.url + "/metrics") as r:
        text = await r.text()
    assert 'notary_http_requests_total{method="POST",route="/v1/tool-calls",status="201"} 1.0' \
        in text
    assert "ledger_batch_size_count 1.0" in text
    assert "ledger_tree_size 1.0" in text
    assert "notary_receipts_issued_total 1.0" in text


async def test_concurrent_retries_share_one_entry(server: Server) -> None:
    import asyncio

    key = await server.new_key()
    body = issue_body(record(same=True))
    answers = await asyncio.gather(*(server.post("/v1/tool-calls", body, key) for _ in range(8)))
    assert sorted(a[0] for a in answers) == [200] * 7 + [201]
    assert len({a[1]["id"] for a in answers}) == 1
    _, ledger = await server.get("/v1/ledger")
    assert ledger["size"] == 1


async def test_non_json_constants_and_repeated_lookup_are_refused(server: Server) -> None:
    key = await server.new_key()
    status, err, _ = await server.post(
        "/v1/tool-calls/verify", None, raw=b'{"id":"tc_AAAAAAAAAAAAAAAAAAAAAA","record":NaN}')
    assert (status, err["error"]["code"]) == (400, "invalid_json")
    status, err, _ = await server.post("/v1/tool-calls", None, key, raw=b'{"server":Infinity}')
    assert (status, err["error"]["code"]) == (400, "invalid_json")
    status, err = await server.get("/v1/tool-calls?call_sha256=" + "a" * 64 + "&call_sha256=" +
                                   "b" * 64)
    assert (status, err["error"]["code"]) == (400, "invalid_call_sha256")
