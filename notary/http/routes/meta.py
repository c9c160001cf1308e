"""Keys, health, metrics and the API description."""

from __future__ import annotations

import json
from importlib import resources

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ledger.http.errors import STORAGE_RETRY_AFTER
from ledger.http.routes import LOG
from ledger.storage.base import StorageFullError
from notary.http.appkeys import METRICS, NOTARY


async def jwks(request: web.Request) -> web.Response:
    notary = request.app[NOTARY]
    await notary.refresh_keys()
    resp = web.json_response(notary.jwks.to_json())
    resp.headers["Cache-Control"] = "public, max-age=60"
    return resp


async def healthz(request: web.Request) -> web.Response:
    """200 while the notary can take writes; 503 while its disk is full.

    While the disk is full every check re-probes it with a one-row write, so the instance
    reports healthy again (and a load balancer routes to it again) as soon as space is freed,
    without waiting for a client write to succeed first.
    """
    log = request.app[LOG]
    head = await log.head()
    size = head.size if head else 0
    seq = log.sequencer
    if seq is not None and not await seq.probe_storage() and \
            isinstance(seq.commit_error, StorageFullError):
        resp = web.json_response({
            "status": "unhealthy", "size": size,
            "error": {"code": "storage_full",
                      "message": "the disk is full: writes are refused until space is freed"},
        }, status=503, headers={"Retry-After": str(STORAGE_RETRY_AFTER)})
        resp.headers["Cache-Control"] = "no-store"
        return resp
    return web.json_response({"status": "ok", "size": size})


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
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/openapi.json", openapi)
