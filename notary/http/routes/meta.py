"""Keys, witnesses, health, metrics and the API description."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib import resources

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from ledger.http.errors import STORAGE_RETRY_AFTER
from ledger.http.routes import LOG
from ledger.log.sequencer import WriterState
from ledger.storage.base import StorageFullError, StoreUnavailableError, WriterBusyError
from notary.http.appkeys import METRICS, NOTARY, SCRUB, SETTINGS
from notary.http.witnessing import witness_policy


async def jwks(request: web.Request) -> web.Response:
    """Every receipt key the store holds, as of after the request arrived: a receipt another
    frontend just signed with a key new to this one verifies against this JWKS at once."""
    notary = request.app[NOTARY]
    await notary.reread_keys()
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


def _write_problem(error: Exception) -> str:
    """Why the last write failed, in words fit for a public page (never paths or hosts)."""
    if isinstance(error, WriterBusyError):
        return ("the last write failed: another process held the log's write lock longer than "
                "the busy timeout; writes fail until it lets go")
    if isinstance(error, StoreUnavailableError):
        return "the last write failed: the store cannot be reached"
    return f"the last write failed ({type(error).__name__})"


async def healthz(request: web.Request) -> web.Response:
    """Up, the tree size, what is known of writes, and the scrub's progress.

    ``writes`` says only what this process knows: ``untried`` (``status: ok``) until it has
    committed a write, ``accepted`` with ``last_commit`` (UTC) once it has and the last one
    succeeded.

    ``writes: refused`` (``status: failing``, still 200) while this process refuses writes:
    the store holds a tree older than, or not extending, the newest checkpoint it saw
    committed (a database restored or failed over), found as it started or at a write; or the
    log's latest ``issued_at`` is ahead of its clock (a frontend's clock is wrong).

    ``writes: failing`` (still 200, ``status: failing`` and the ``problem``) while the last
    write failed and none has succeeded since.

    Still 200 once damage stopped writes (``status: failing`` and the ``problem``): the process
    serves reads, and restarting it would not repair the store. Alert on ``status`` (or on the
    ``ledger_scrub_damage`` metric).

    503 (``status: unhealthy``, error ``storage_full``) while the disk is full: every check
    re-probes it with a batch-sized write, so the instance reports healthy again (and a load
    balancer routes to it again) as soon as space is freed, without waiting for a client write
    to succeed first.
    """
    log = request.app[LOG]
    head = await log.head()
    notary = request.app[NOTARY]
    seq = notary.sequencer
    state = seq.status.state
    body: dict[str, object] = {"status": "ok", "size": head.size if head else 0}
    status, headers = 200, {}
    clock = notary.clock_problem()
    if state is WriterState.HALTED:
        body.update(status="failing", writes="stopped", problem=seq.status.reason)
    elif state is WriterState.REFUSING:  # known at start, before any write was asked for
        body.update(status="failing", writes="refused", problem=seq.status.reason)
    elif clock is not None:  # writes refused, not a storage problem: still 200
        body.update(status="failing", writes="refused", problem=clock)
    elif not await seq.probe_storage() and isinstance(seq.status.error, StorageFullError):
        message = "the disk is full: writes are refused until space is freed"
        body.update(status="unhealthy", writes="stopped", problem=message,
                    error={"code": "storage_full", "message": message})
        status, headers = 503, {"Retry-After": str(STORAGE_RETRY_AFTER)}
    elif seq.status.error is not None:
        # The last write failed and none has succeeded since (a writer holding the lock too
        # long, the database away): say so until one succeeds. Still 200: reads are served,
        # and the next write that gets through clears it.
        body.update(status="failing", writes="failing", problem=_write_problem(seq.status.error))
    elif seq.committed_at is None:
        body["writes"] = "untried"
    else:
        body.update(writes="accepted", last_commit=datetime.fromtimestamp(
            seq.committed_at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z"))
    scrub = request.app.get(SCRUB)
    if scrub is not None:
        body["scrub"] = scrub.status.to_json()
    resp = web.json_response(body, status=status, headers=headers)
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def metrics(request: web.Request) -> web.Response:
    m = request.app[METRICS]
    head = await request.app[LOG].head()
    if head is not None:
        m.log_size.set(head.size)
    resp = web.Response(body=m.exposition())
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
