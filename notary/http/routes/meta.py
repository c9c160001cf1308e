"""Keys, witnesses, health, metrics and the API description."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from importlib import resources

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from ledger.http.errors import STORAGE_RETRY_AFTER, ApiError
from ledger.http.routes import LOG
from ledger.log.sequencer import WriterState
from ledger.storage.base import StorageFullError, StoreUnavailableError, WriterBusyError
from notary.http.appkeys import METRICS, NOTARY, SCRUB, SETTINGS
from notary.http.checkpoint_health import default_max_age, freshness
from notary.http.publishing import PUBLISHING
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


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


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

    ``publish`` (in the process that publishes, ``--publish``): ``state`` ``ok``, ``lagging``
    (the directory or bucket fails and is retried; ``behind`` entries not yet published) or
    ``stopped`` (a tile already there with other bytes: ``status: failing``, an alarm).

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
        body.update(writes="accepted", last_commit=_utc(seq.committed_at))
    scrub = request.app.get(SCRUB)
    if scrub is not None:
        body["scrub"] = scrub.status.to_json()
    publisher = request.app.get(PUBLISHING)
    if publisher is not None and publisher.running:  # this process publishes
        body["publish"] = publisher.status.to_json()
        if publisher.status.state == "stopped" and body["status"] == "ok":
            body.update(status="failing", problem="publishing stopped: the published tree "
                        "holds another log's objects or other bytes (see the notary's log)")
    resp = web.json_response(body, status=status, headers=headers)
    resp.headers["Cache-Control"] = "no-store"
    return resp


def _max_age(request: web.Request) -> float:
    unknown = sorted(set(request.query) - {"max_age"})
    if unknown:
        raise ApiError(400, "unknown_field", f"unknown query parameter(s) {unknown}; allowed: "
                       "max_age")
    values = request.query.getall("max_age", [])
    if not values:
        return default_max_age(request.app[SETTINGS])
    try:
        if len(values) > 1:
            raise ValueError
        max_age = float(values[0])
    except ValueError:
        max_age = math.nan
    if not 0 <= max_age <= 10 ** 9:  # NaN and infinities fail too
        raise ApiError(400, "invalid_max_age", "max_age must be given once, as seconds "
                       "between 0 and 1000000000")
    return max_age


async def checkpoint_health(request: web.Request) -> web.Response:
    """200 while the log has produced a validly signed checkpoint within ``max_age`` seconds,
    else 503 ``checkpoint_stale`` (:mod:`notary.http.checkpoint_health` says what the time
    of a checkpoint is, with and without witnesses)."""
    max_age = _max_age(request)
    fresh = await freshness(request.app)
    body: dict[str, object] = {"status": "ok", "size": fresh.size,
                               "witnessed": fresh.witnessed, "max_age": max_age}
    problem = fresh.problem
    if fresh.at is not None:
        age = time.time() - fresh.at
        body.update(signed_at=_utc(fresh.at), age=round(age, 3))
        if problem is None and age > max_age:
            what = "cosigned by a witness quorum" if fresh.witnessed else "committed"
            problem = (f"the newest checkpoint was last {what} {age:.0f} s ago, more than "
                       f"max_age {max_age:g} s")
    status = 200
    if problem is not None:
        status = 503
        body.update(status="stale", problem=problem,
                    error={"code": "checkpoint_stale", "message": problem})
    resp = web.json_response(body, status=status)
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def metrics(request: web.Request) -> web.Response:
    m = request.app[METRICS]
    head = await request.app[LOG].head()
    if head is not None:
        m.log_size.set(head.size)
    fresh = await freshness(request.app)
    if fresh.at is not None:
        m.checkpoint_time.set(fresh.at)
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
    app.router.add_get("/healthz/checkpoint", checkpoint_health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/openapi.json", openapi)
