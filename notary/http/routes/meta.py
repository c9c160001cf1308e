"""Keys, witnesses, health, metrics and the API description."""

from __future__ import annotations

import json
from importlib import resources

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ledger.http.routes import LOG
from notary.http.appkeys import METRICS, NOTARY, SETTINGS
from notary.http.witnessing import witness_policy


async def jwks(request: web.Request) -> web.Response:
    notary = request.app[NOTARY]
    await notary.refresh_keys()
    resp = web.json_response(notary.jwks.to_json())
    resp.headers["Cache-Control"] = "public, max-age=60"
    return resp


async def witnesses(request: web.Request) -> web.Response:
    """The witnesses whose cosignatures this notary collects, and the quorum it publishes at.

    Their verifier keys let a client (the explorer) check the cosignatures on ``/checkpoint``
    itself; submission URLs are the operator's business and are not shown.
    """
    quorum, endpoints = witness_policy(request.app[SETTINGS])
    resp = web.json_response({
        "quorum": quorum,
        "witnesses": [{"name": e.verifier.name, "vkey": e.vkey} for e in endpoints],
    })
    resp.headers["Cache-Control"] = "public, max-age=60"
    return resp


async def healthz(request: web.Request) -> web.Response:
    head = await request.app[LOG].head()
    return web.json_response({"status": "ok", "size": head.size if head else 0})


async def metrics(request: web.Request) -> web.Response:
    m = request.app[METRICS]
    head = await request.app[LOG].head()
    if head is not None:
        m.log_size.set(head.size)
    resp = web.Response(body=generate_latest(m.registry))
    resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return resp


def openapi_document() -> dict[str, object]:
    doc: dict[str, object] = json.loads(
        resources.files("notary").joinpath("openapi.json").read_text()
    )
    return doc


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


def add_meta_routes(app: web.Application) -> None:
    app.router.add_get("/.well-known/jwks.json", jwks)
    app.router.add_get("/v1/witnesses", witnesses)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/openapi.json", openapi)
