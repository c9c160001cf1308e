"""``notary log prune ORIGIN --min-index N --reclaim`` while ``notary serve`` runs (issue 33):
receipts below N answer 404 by id and by digest (the message says their rows may have been
reclaimed) and leave search, receipts above N are served as before, a reclaimed receipt still
verifies offline, the command shows its progress on stderr, and it refuses the active log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from ledger.core.note import Ed25519Verifier
from notary.core.jwks import Jwks
from notary.core.verification import verify_receipt
from tests.notary_server import app_notary, capture_cli
from tests.waiting import eventually


async def test_reclaiming_a_pruned_range_while_serving(tmp_path: Path) -> None:
    data = tmp_path / "data"
    where = ["--data", str(data)]
    async with app_notary(data) as notary, aiohttp.ClientSession() as http:
        auth = {"Authorization": f"Bearer {await notary.new_api_key('a')}"}
        receipts: list[dict[str, Any]] = []

        async def post(n: int) -> None:
            body = {"server": "srv", "tool": "t", "call_sha256": f"{n:064x}"}
            async with http.post(notary.url + "/v1/tool-calls", json=body, headers=auth) as r:
                assert r.status == 201
                receipts.append(await r.json())

        for start in range(0, 300, 50):
            await asyncio.gather(*(post(n) for n in range(start, start + 50)))
        origin0 = receipts[0]["ledger"]["origin"]
        code, _, err = await capture_cli("log", "roll", *where)
        assert code == 0, err
        code, out, _ = await capture_cli("log", "list", "--json", *where)
        active = json.loads(out)["logs"][1]["origin"]
        code, _, err = await capture_cli("log", "prune", active, "--min-index", "0",
                                         "--reclaim", *where)
        assert code != 0 and "only a frozen log" in err, err

        code, out, err = await capture_cli("log", "prune", origin0, "--min-index", "256",
                                           "--reclaim", *where)
        assert code == 0, err
        assert "Reclaimed the rows of 256 receipts below index 256" in out, out
        assert "bytes free for new rows" in out, out
        assert f"reclaiming {origin0}: entries 256 of 256 (100%)" in err, err

        async def followed() -> bool | None:  # the server's copy of the registry: within 2 s
            async with http.get(notary.url + "/v1/ledger") as r:
                return True if (await r.json())["logs"][0]["min_index"] == 256 else None

        await eventually(followed, "the server to see the minimum index", timeout=6)
        low = [r for r in receipts if r["ledger"]["index"] < 256]
        high = [r for r in receipts if r["ledger"]["index"] >= 256]

        async def status(path: str) -> tuple[int, dict[str, Any]]:
            async with http.get(notary.url + path) as r:
                return r.status, await r.json()

        for r in (low[0], low[-1]):
            code, body = await status(f"/v1/tool-calls/{r['id']}")
            assert code == 404 and "reclaimed" in json.dumps(body), body
            code, body = await status(f"/v1/tool-calls?call_sha256={r['call_sha256']}")
            assert code == 404 and "reclaimed" in json.dumps(body), body
        for r in (high[0], high[-1]):
            code, body = await status(f"/v1/tool-calls/{r['id']}")
            assert code == 200 and body["id"] == r["id"]
        code, body = await status("/v1/tool-calls?server=srv&limit=100")
        assert code == 200
        listed = {r["id"] for r in body["tool_calls"]}
        assert listed <= {r["id"] for r in high} and len(listed) == len(high)
        # Born complete: a reclaimed receipt verifies offline with what it carries.
        jwks = Jwks(await (await http.get(notary.url + "/.well-known/jwks.json")).json())
        verdict = verify_receipt(low[0], record=None, jwks=jwks,
                                 log_verifier=Ed25519Verifier.from_vkey(notary.vkey))
        assert verdict.levels["inclusion"].status == "passed", verdict.to_json()
        # Again: nothing left to do.
        code, out, err = await capture_cli("log", "prune", origin0, "--min-index", "256",
                                           "--reclaim", *where)
        assert code == 0 and "rows of 0 receipts" in out, (out, err)
