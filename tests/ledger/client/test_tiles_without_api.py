"""Reading a log that serves tiles only (a tlog-mirror's monitoring prefix): consistency proofs
come from the tiles, and after the proof API's first 404 it is not asked again."""

from __future__ import annotations

from aiohttp import ClientSession, web

from ledger.client.http import HttpClient
from ledger.client.tiles import LogSource
from ledger.core.note import Ed25519Signer
from ledger.core.tiles import parse_tile_path
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from tests.servers import serving


async def test_consistency_from_tiles_asks_the_missing_api_once() -> None:
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate("example.test/tiles"))
    await log.append_many([b"entry %d" % i for i in range(700)])
    head = await log.head(0)
    assert head is not None
    asked: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        path = request.match_info["path"]
        asked.append(path)
        if path == "checkpoint":
            return web.Response(body=head.note)
        try:
            tile = parse_tile_path(path)
        except ValueError:
            raise web.HTTPNotFound() from None
        return web.Response(body=await log.reader.tile(tile.level, tile.index, tile.width))

    app = web.Application()
    app.router.add_get("/{path:.*}", handle)
    async with serving(app) as served, ClientSession() as session:
        source = LogSource(served.url, HttpClient(session), pipeline=False)
        for old in (1, 300, 512):
            proof = await source.consistency_proof(old, 700)
            assert proof == await log.reader.consistency_proof(old, 700)
        await source.close()
    assert sum(p.startswith("v1/") for p in asked) == 1, asked
    await log.close()
