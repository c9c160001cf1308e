"""Pruning a frozen log while ``notary serve`` runs (issue 33 item 5, tlog-tiles "Pruning"):
tiles and entry bundles wholly below the minimum index answer 404 under ``/logs/<n>/``, the
ones above are served, ``/v1/ledger`` shows it, a receipt below it is still served with its
proof and verifies offline, ``--min-index 0`` serves everything again, and a restart keeps it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from ledger.core.note import Ed25519Verifier
from notary.core.jwks import Jwks
from notary.core.records import CallRecord, new_salt
from notary.core.verification import verify_receipt
from notary.serving.config import Settings
from tests.notary_server import HOST, app_notary, capture_cli, start_app
from tests.waiting import eventually

SERVED = ["tile/entries/001.p/44", "tile/0/001.p/44", "logs/0/v1/ledger/entries/256"]
"""Log 0 holds 300 receipts and the successor record (301 entries): these end above 256."""
PRUNED_AT_256 = ["tile/entries/000", "tile/entries/000.p/7", "tile/0/000", "tile/1/000.p/1",
                 "logs/0/v1/ledger/entries/0", "logs/0/v1/ledger/entries/255"]
"""What ends at or below 256: entries [0, 256), and level 1's first hash (entries 0-255)."""


def call(n: int) -> dict[str, str]:
    rec = CallRecord(server="srv", tool="echo", arguments={"n": n},
                     result={"content": [{"type": "text", "text": str(n)}]}, salt=new_salt())
    return {"server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()}


def url_of(base: str, path: str) -> str:
    return f"{base}/{path}" if path.startswith("logs/") else f"{base}/logs/0/{path}"


async def statuses(http: aiohttp.ClientSession, base: str, paths: list[str]) -> set[int]:
    out = set()
    for path in paths:
        async with http.get(url_of(base, path)) as r:
            out.add(r.status)
    return out


async def min_index(http: aiohttp.ClientSession, base: str) -> int:
    async with http.get(base + "/v1/ledger") as r:
        return int((await r.json())["logs"][0]["min_index"])


async def test_pruning_a_frozen_log_while_serving(tmp_path: Path) -> None:
    data = tmp_path / "data"
    where = ["--data", str(data)]
    async with app_notary(data) as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        auth = {"Authorization": f"Bearer {key}"}
        receipts: list[dict[str, Any]] = []

        async def post(n: int) -> None:
            async with http.post(notary.url + "/v1/tool-calls", json=call(n), headers=auth) as r:
                assert r.status == 201
                receipts.append(await r.json())

        for start in range(0, 300, 50):
            await asyncio.gather(*(post(n) for n in range(start, start + 50)))
        origin0 = receipts[0]["ledger"]["origin"]
        code, _, err = await capture_cli("log", "roll", *where)
        assert code == 0, err
        assert await statuses(http, notary.url, SERVED + PRUNED_AT_256) == {200}
        # Refusals change nothing: the active log, and an index past the frozen log's size.
        code, out, err = await capture_cli("log", "list", "--json", *where)
        active = json.loads(out)["logs"][1]["origin"]
        code, _, err = await capture_cli("log", "prune", active, "--min-index", "0", *where)
        assert code != 0 and "only a frozen log" in err, err
        code, _, err = await capture_cli("log", "prune", origin0, "--min-index", "302", *where)
        assert code != 0 and "at most that, not 302" in err, err

        code, out, err = await capture_cli("log", "prune", origin0, "--min-index", "256", *where)
        assert code == 0 and "below index 256" in out, err

        async def pruned(n: int) -> bool | None:
            return True if await min_index(http, notary.url) == n else None

        await eventually(lambda: pruned(256), "the server to see the minimum index", timeout=6)
        assert await statuses(http, notary.url, PRUNED_AT_256) == {404}
        assert await statuses(http, notary.url, SERVED) == {200}
        # A receipt below the minimum index: served with its proof, and it verifies offline.
        jwks = Jwks(await (await http.get(notary.url + "/.well-known/jwks.json")).json())
        verifier = Ed25519Verifier.from_vkey(notary.vkey)
        low = min(receipts, key=lambda r: int(r["ledger"]["index"]))
        assert low["ledger"]["index"] < 256
        async with http.get(f"{notary.url}/v1/tool-calls/{low['id']}") as r:
            assert r.status == 200
            stored = await r.json()
        for receipt in (low, stored):
            verdict = verify_receipt(receipt, record=None, jwks=jwks, log_verifier=verifier)
            assert verdict.levels["inclusion"].status == "passed", verdict.to_json()
        # 0 serves everything again; then prune again, and restart.
        code, _, err = await capture_cli("log", "prune", origin0, "--min-index", "0", *where)
        assert code == 0, err
        await eventually(lambda: pruned(0), "the server to see the minimum index 0", timeout=6)
        assert await statuses(http, notary.url, SERVED + PRUNED_AT_256) == {200}
        code, _, err = await capture_cli("log", "prune", origin0, "--min-index", "256", *where)
        assert code == 0, err
        port = int(notary.url.rsplit(":", 1)[1])
    served = await start_app(Settings(data=data, listen=f"{HOST}:{port}"))
    try:
        async with aiohttp.ClientSession() as http:
            assert await min_index(http, served.url) == 256
            assert await statuses(http, served.url, PRUNED_AT_256) == {404}
            assert await statuses(http, served.url, SERVED) == {200}
    finally:
        await served.stop()
