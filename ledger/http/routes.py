"""The log's HTTP read API: C2SP tlog-tiles resources plus JSON conveniences under /v1/ledger.

The routes hold no state of their own: they find the :class:`~ledger.log.facade.Log` in the
application under :data:`LOG` at request time, so the notary can mount them on its own
application beside its other routes, and ``ledger serve`` can run them alone
(:func:`create_ledger_app`).

Every answer is computed against one :class:`~ledger.log.facade.Head`, read once per request,
so that a proof and the checkpoint served with it always agree even while another process appends.

With the log's ML-DSA-44 key (:data:`PQ_CHECKPOINTS`), ``/checkpoint`` serves the newest
dual-signed checkpoint (:mod:`ledger.log.pq_checkpoints`) and ``/v1/ledger`` lists both verifier
keys in ``vkeys``.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web

from ledger.core.hashing import leaf_hash
from ledger.core.paths import ENTRIES_PATH
from ledger.core.tiles import MAX_TREE_SIZE, TILE_WIDTH, TilePathError, parse_tile_path, tile_count
from ledger.core.timestamps import rfc3339
from ledger.http.errors import ApiError, error_middleware
from ledger.log.facade import Head, Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.storage.base import CheckpointRecord

__all__ = ["LOG", "LOGS", "LOG_LIST", "PQ_CHECKPOINTS", "PUBLISHED_CHECKPOINT", "PUBLISHED_FINAL",
           "ServedLog", "add_ledger_routes", "create_ledger_app", "published_note"]

LOG = web.AppKey("ledger.log.facade", Log)
#: Optional: the log's ML-DSA-44 line; set, every checkpoint served is dual-signed.
PQ_CHECKPOINTS = web.AppKey("ledger.log.pq_checkpoints", PostQuantumCheckpoints)

CheckpointProvider = Callable[[Head], tuple[bytes, Mapping[str, str]]]
#: Optional: chooses what /checkpoint serves given the log's head, as (note, extra headers), so
#: an application can publish e.g. the newest witness-cosigned checkpoint instead of the head.
PUBLISHED_CHECKPOINT: web.AppKey[CheckpointProvider] = web.AppKey("ledger.published_checkpoint")
#: Optional: what ``/logs/<n>/checkpoint`` serves of a frozen log, given its origin and its
#: final checkpoint as signed: e.g. the same checkpoint with the cosignatures collected for it.
PUBLISHED_FINAL: web.AppKey[Callable[[str, bytes], tuple[bytes, Mapping[str, str]]]] = (
    web.AppKey("ledger.published_final"))



@dataclass(frozen=True)
class ServedLog:
    """One log of a sequence of logs, as ``/logs/<n>/…`` serves it."""

    log: Log
    pq: PostQuantumCheckpoints | None
    active: bool  # the log ``LOG`` is (published as ``/checkpoint`` is); else frozen
    min_index: int = 0  # tlog-tiles "Pruning": tiles and entries wholly below it answer 404


LogLookup = Callable[[int], Awaitable[ServedLog | None]]
#: Optional: log ``n`` of the application's sequence of logs (docs/lifecycle.md), or None;
#: without it ``/logs/0/…`` is the one log.
LOGS: web.AppKey[LogLookup] = web.AppKey("ledger.logs")
#: Optional: ``/v1/ledger``'s ``logs``, every log of the sequence, oldest first.
LOG_LIST: web.AppKey[Callable[[Head], Awaitable[list[dict[str, object]]]]] = web.AppKey(
    "ledger.log_list")

MAX_SIZE = MAX_TREE_SIZE
MAX_HISTORY = 1000
DEFAULT_HISTORY = 100

_IMMUTABLE = "public, max-age=31536000, immutable"
"""Every tile path, full or partial (tlog-tiles: the endpoint is immutable): a partial tile is a
prefix of its tile, served only once the tree covers it, so its bytes never change."""
_SHORT = "public, max-age=2"  # mutable resources: a client sees a new checkpoint within seconds


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _uint(name: str, raw: str, *, maximum: int = MAX_SIZE) -> int:
    """Parse a canonical decimal (no sign, no leading zeros, no spaces) or raise a 400.

    Strictness keeps one spelling per value, which matters for cache keys and for logs that
    record what was asked, and refusing huge numbers early keeps them away from storage keys.
    """
    shown = raw if len(raw) <= 40 else raw[:40] + "…"
    if not raw or not raw.isascii() or not raw.isdigit():
        raise ApiError(400, "bad_parameter",
                       f"{name} must be a non-negative decimal integer, got {shown!r}")
    if len(raw) > 1 and raw[0] == "0":
        raise ApiError(400, "bad_parameter", f"{name} must not have leading zeros, got {shown!r}")
    if len(raw) > len(str(maximum)) or int(raw) > maximum:
        raise ApiError(400, "bad_parameter", f"{name} must be at most {maximum}, got {shown!r}")
    return int(raw)


def query_uint(request: web.Request, name: str, *, maximum: int = MAX_SIZE) -> int | None:
    values = request.query.getall(name, [])
    if not values:
        return None
    if len(values) > 1:
        raise ApiError(400, "bad_parameter", f"query parameter {name} is given more than once")
    return _uint(name, values[0], maximum=maximum)


def _required(request: web.Request, name: str) -> int:
    value = query_uint(request, name)
    if value is None:
        raise ApiError(400, "bad_parameter", f"query parameter {name} is required")
    return value


async def _served(request: web.Request) -> ServedLog:
    """The log a request is for: ``/logs/<n>/…``'s, else the active one."""
    raw = request.match_info.get("log")
    log = request.config_dict[LOG]
    if raw is None:
        return ServedLog(log, request.config_dict.get(PQ_CHECKPOINTS), True)
    n = _uint("log", raw, maximum=1 << 24)
    lookup = request.config_dict.get(LOGS)
    if lookup is None:
        if n == 0:
            return ServedLog(log, request.config_dict.get(PQ_CHECKPOINTS), True)
        served = None
    else:
        served = await lookup(n)
    if served is None:
        raise ApiError(404, "not_found", f"this server has no log {n}")
    return served


async def _head(request: web.Request) -> tuple[Log, Head]:
    log = (await _served(request)).log
    head = await log.head()
    if head is None:
        raise ApiError(503, "unavailable", "the log has no signed checkpoint yet")
    return log, head


def _beyond(what: str, head: Head) -> ApiError:
    return ApiError(404, "not_found", f"{what} is beyond the current tree size {head.size}")


def _pruned(what: str, served: ServedLog) -> ApiError:
    return ApiError(404, "not_found", f"{what} is below the log's minimum index "
                    f"{served.min_index}: pruned (tlog-tiles \"Pruning\")")


def published_note(app: web.Application, head: Head) -> tuple[bytes, Mapping[str, str]]:
    """What ``/checkpoint`` serves at ``head``, with its extra headers: the application's
    choice (:data:`PUBLISHED_CHECKPOINT`), else the newest dual-signed checkpoint, else the
    head as stored."""
    provider = app.get(PUBLISHED_CHECKPOINT)
    if provider is not None:
        note, extra = provider(head)
        if note.split(b"\n", 1)[0] == head.note.split(b"\n", 1)[0]:
            return note, extra
        # Another log's (a job that has not followed a roll yet): never served as this one's.
    pq = app.get(PQ_CHECKPOINTS)
    return (pq.latest(head)[1] if pq is not None else head.note), {}


async def get_checkpoint(request: web.Request) -> web.Response:
    """The published checkpoint, bytes as signed, so cosignatures and clients see the same."""
    served = await _served(request)
    _, head = await _head(request)
    if served.active:
        note, extra = published_note(request.app, head)
    else:  # a frozen log: its final checkpoint, dual-signed when checkpoints are, cosigned
        note, extra = (served.pq.latest(head)[1] if served.pq else head.note), {}
        final = request.config_dict.get(PUBLISHED_FINAL)
        if final is not None:
            note, extra = final(served.log.origin, note)
    resp = web.Response(body=note, content_type="text/plain", charset="utf-8")
    resp.headers["Cache-Control"] = _SHORT
    resp.headers.update(extra)
    return resp


async def get_tile(request: web.Request) -> web.Response:
    """A hash tile or entry bundle, full or partial.

    A partial tile of width W is served whenever the tree has at least W hashes in that tile,
    even once the tile is full: clients that verified an older checkpoint ask for exactly that
    prefix, and a prefix of a stored tile never changes, so it is cached as long as a full one.
    """
    path = "tile/" + request.match_info["path"]
    try:
        tile = parse_tile_path(path)
    except TilePathError as e:
        raise ApiError(400, "bad_tile_path", str(e)) from None
    served = await _served(request)
    log, head = await _head(request)
    if tile.index * TILE_WIDTH + tile.width > tile_count(head.size, tile.level):
        raise _beyond(path, head)
    if tile.entries_end() <= served.min_index:
        raise _pruned(path, served)
    data = await log.reader.tile(tile.level, tile.index, tile.width)
    if data is None:
        raise RuntimeError(f"{path} is within tree size {head.size} but not in the store")
    resp = web.Response(body=data, content_type="application/octet-stream")
    resp.headers["Cache-Control"] = _IMMUTABLE
    if tile.is_entries:
        resp.enable_compression()  # tlog-tiles: entry bundles SHOULD be compressed
    return resp


async def get_ledger(request: web.Request) -> web.Response:
    """What a new client needs to start: the origin, the key to pin and the current head."""
    log, head = await _head(request)
    pq = request.config_dict.get(PQ_CHECKPOINTS)
    return web.json_response({
        "origin": log.origin,
        "vkey": log.verifier.vkey,
        "vkeys": [log.verifier.vkey, *([pq.vkey] if pq is not None else [])],
        "size": head.size,
        "root": _b64(head.checkpoint.root_hash),
        "checkpoint": head.note.decode("utf-8"),
        **({"logs": await listing(head)}
           if (listing := request.config_dict.get(LOG_LIST)) is not None else {}),
    })


async def get_entry(request: web.Request) -> web.Response:
    """One entry with a tlog-proof against the latest checkpoint: checkable with no other call."""
    index = _uint("index", request.match_info["index"])
    served = await _served(request)
    log, head = await _head(request)
    if index >= head.size:
        raise _beyond(f"entry {index}", head)
    if index < served.min_index:
        raise _pruned(f"entry {index}", served)
    (entry,) = await log.reader.entries(index, index + 1)
    bundle = await log.proof_bundle(index, head)
    return web.json_response({
        "index": index,
        "entry": _b64(entry),
        "leaf_hash": leaf_hash(entry).hex(),
        "size": head.size,
        "proof": bundle.encode().decode("utf-8"),
        "checkpoint": head.note.decode("utf-8"),
    })


async def get_inclusion(request: web.Request) -> web.Response:
    """RFC 9162 inclusion proof for ``index`` in the tree of ``size`` (default: current)."""
    index = _required(request, "index")
    size = query_uint(request, "size")
    log, head = await _head(request)
    if size is None:
        if index >= head.size:
            raise _beyond(f"entry {index}", head)
        size = head.size
    elif size > head.size:
        raise _beyond(f"size {size}", head)
    elif index >= size:
        raise ApiError(400, "bad_parameter", f"index {index} is not below size {size}")
    leaf = (await log.reader.hashes([(0, index)], size))[(0, index)]
    proof = await log.reader.inclusion_proof(index, size)
    return web.json_response({
        "index": index, "size": size, "leaf_hash": leaf.hex(), "proof": [_b64(h) for h in proof],
    })


async def get_consistency(request: web.Request) -> web.Response:
    """RFC 9162 consistency proof from ``old`` to ``new`` (default: current), for monitors."""
    old = _required(request, "old")
    new = query_uint(request, "new")
    if old == 0:
        raise ApiError(400, "bad_parameter", "old must be at least 1: size 0 has nothing to prove")
    log, head = await _head(request)
    if new is None:
        new = head.size
    elif new > head.size:
        raise _beyond(f"size {new}", head)
    if old > new:
        raise ApiError(400, "bad_parameter", f"old size {old} is larger than new size {new}")
    proof = await log.reader.consistency_proof(old, new)
    return web.json_response({"old": old, "new": new, "proof": [_b64(h) for h in proof]})


def _history(head: Head, stored: Sequence[CheckpointRecord], limit: int) -> list[CheckpointRecord]:
    """Newest first, the current head always first, nothing newer than the head (to agree with
    /checkpoint), one record per size."""
    out = [head.record]
    out.extend(r for r in stored if r.size < head.size)
    return out[:limit]


async def get_checkpoints(request: web.Request) -> web.Response:
    """Recent checkpoints (``time`` in RFC 3339), so an auditor can check old ones too."""
    limit = query_uint(request, "limit", maximum=MAX_HISTORY)
    if limit is None:
        limit = DEFAULT_HISTORY
    if limit == 0:
        raise ApiError(400, "bad_parameter", f"limit must be 1..{MAX_HISTORY}")
    log, head = await _head(request)
    records = _history(head, await log.store.history(limit + 1), limit)
    return web.json_response({"checkpoints": [
        {"size": r.size, "time": rfc3339(r.time), "checkpoint": r.note.decode("utf-8")}
        for r in records
    ]})


def add_ledger_routes(app: web.Application) -> None:
    """Register the read API on ``app``; ``app[LOG]`` (or a parent's) must hold the log."""
    r = app.router
    r.add_get("/checkpoint", get_checkpoint)
    r.add_get("/tile/{path:.+}", get_tile)
    r.add_get("/v1/ledger", get_ledger)
    r.add_get(ENTRIES_PATH + "{index}", get_entry)
    r.add_get("/v1/ledger/proofs/inclusion", get_inclusion)
    r.add_get("/v1/ledger/proofs/consistency", get_consistency)
    r.add_get("/v1/ledger/checkpoints", get_checkpoints)
    # Every log of a sequence of logs (docs/lifecycle.md), the active one included.
    r.add_get("/logs/{log}/checkpoint", get_checkpoint)
    r.add_get("/logs/{log}/tile/{path:.+}", get_tile)
    r.add_get("/logs/{log}" + ENTRIES_PATH + "{index}", get_entry)
    r.add_get("/logs/{log}/v1/ledger/proofs/inclusion", get_inclusion)
    r.add_get("/logs/{log}/v1/ledger/proofs/consistency", get_consistency)
    r.add_get("/logs/{log}/v1/ledger/checkpoints", get_checkpoints)


def create_ledger_app(log: Log, pq: PostQuantumCheckpoints | None = None) -> web.Application:
    """A standalone application serving one log (what ``ledger serve`` runs)."""
    app = web.Application(middlewares=[error_middleware], client_max_size=64 * 1024)
    app[LOG] = log
    if pq is not None:
        app[PQ_CHECKPOINTS] = pq
    add_ledger_routes(app)
    return app
