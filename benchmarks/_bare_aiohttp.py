"""The framework's ceiling: an aiohttp app whose POST handler parses the JSON body and answers
with a receipt-sized JSON document, doing no other work. ``python _bare_aiohttp.py PORT``.

It runs on the event loop the notary runs on (:mod:`ledger.process.event_loop`: uvloop where
installed, ``LEDGER_EVENT_LOOP`` to force one), so a ratio compares the work, not two loops."""

from __future__ import annotations

import asyncio
import sys

from aiohttp import web

from ledger.process import event_loop

FILLER = "x" * 900  # about the size of a receipt with its proof


async def handle(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response({"echo": body.get("call_sha256"), "filler": FILLER}, status=201)


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


app = web.Application()
app.router.add_post("/v1/tool-calls", handle)
app.router.add_get("/healthz", health)



async def serve(port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()  # until the benchmark terminates the process


if __name__ == "__main__":
    event_loop.run(serve(int(sys.argv[1])))
