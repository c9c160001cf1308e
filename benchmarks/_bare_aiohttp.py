"""The framework's ceiling: an aiohttp app whose POST handler parses the JSON body and answers
with a receipt-sized JSON document, doing no other work. ``python _bare_aiohttp.py PORT``."""

from __future__ import annotations

import sys

from aiohttp import web

FILLER = "x" * 900  # about the size of a receipt with its proof


async def handle(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response({"echo": body.get("call_sha256"), "filler": FILLER}, status=201)


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


app = web.Application()
app.router.add_post("/v1/tool-calls", handle)
app.router.add_get("/healthz", health)

if __name__ == "__main__":
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
