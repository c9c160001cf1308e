"""Receipt keys across frontends: a receipt signed with a key another frontend registered a
moment ago verifies at once against this frontend's JWKS and its ``POST /v1/tool-calls/verify``
(not only once the periodic re-read comes round), and those re-reads are shared, so a flood of
requests does not each read the store."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import aiohttp

from ledger.core.note import Ed25519Verifier
from notary.core.jwks import Jwks
from notary.core.records import CallRecord, new_salt
from notary.core.verification import verify_receipt
from notary.store.base import ReceiptKeyRecord
from tests.notary_server import AppNotary, app_notary


def _frontend_dir(first: AppNotary, data: Path) -> Path:
    """A data directory for another frontend of ``first``'s log: its log key, no receipt key
    (the frontend makes its own on first start)."""
    data.mkdir(mode=0o700)
    for name in ("log.key", "log.vkey"):
        (data / name).write_bytes((first.data / name).read_bytes())
        (data / name).chmod(0o600)
    return data


async def test_a_new_frontends_receipt_verifies_at_once_on_the_others(tmp_path: Path,
                                                                     pg_url: str) -> None:
    async with contextlib.AsyncExitStack() as stack, aiohttp.ClientSession() as http:
        a = await stack.enter_async_context(app_notary(tmp_path / "a", database=pg_url))
        c = await stack.enter_async_context(
            app_notary(_frontend_dir(a, tmp_path / "c"), database=pg_url))
        # A and C have just read the keys (a JWKS request reads them if they are stale).
        for served in (a, c):
            async with http.get(f"{served.url}/.well-known/jwks.json") as r:
                assert r.status == 200
        b = await stack.enter_async_context(
            app_notary(_frontend_dir(a, tmp_path / "b"), database=pg_url))
        key = await b.new_api_key("alice")
        rec = CallRecord(server="srv", tool="echo", arguments={"n": 1},
                         result={"content": []}, salt=new_salt())
        async with http.post(f"{b.url}/v1/tool-calls", headers={"Authorization": f"Bearer {key}"},
                             json={"server": rec.server, "tool": rec.tool,
                                   "call_sha256": rec.call_sha256()}) as r:
            assert r.status == 201, await r.text()
            receipt = await r.json()
        kid = receipt["signature"]["kid"]
        assert kid == b.notary.current_key.kid and kid != a.notary.current_key.kid

        # At once, on A: the server-side check finds B's key.
        record = {k: v for k, v in rec.to_json().items() if k not in ("spec", "server")}
        async with http.post(f"{a.url}/v1/tool-calls/verify",
                             json={"id": receipt["id"], "record": record}) as r:
            verdict = await r.json()
        assert r.status == 200 and verdict["valid"] is True, verdict
        assert verdict["levels"]["signature"]["status"] == "passed"

        # At once, on C: its JWKS lists B's key, and the receipt verifies against it.
        async with http.get(f"{c.url}/.well-known/jwks.json") as r:
            jwks = Jwks(await r.json())
        assert kid in jwks
        offline = verify_receipt(receipt, record=rec.to_json(), jwks=jwks,
                                 log_verifier=Ed25519Verifier.from_vkey(a.vkey))
        assert offline.levels["signature"].status == "passed", offline.to_json()


async def test_concurrent_key_reads_are_shared(tmp_path: Path) -> None:
    """Reads of the keys are one at a time, and callers arriving while one runs share the
    next: 50 at once cost two reads (the one running, and one that started after them all),
    and a caller after that gets a read of its own, not an older answer."""
    async with app_notary(tmp_path / "a") as served:
        store = served.store
        real = store.receipt_keys
        reads = 0

        async def counted() -> list[ReceiptKeyRecord]:
            nonlocal reads
            reads += 1
            await asyncio.sleep(0.02)
            return await real()

        store.receipt_keys = counted  # type: ignore[method-assign]
        await asyncio.gather(*(served.notary.reread_keys() for _ in range(50)))
        assert reads == 2
        await served.notary.reread_keys()
        assert reads == 3
        # An unknown kid (a key registered since) reads again; a known one does not.
        await served.notary.jwks_with(served.notary.current_key.kid)
        assert reads == 3
        await served.notary.jwks_with("not-yet-known")
        assert reads == 4
