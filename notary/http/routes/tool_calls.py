"""``/v1/tool-calls``: issue, fetch, look up, search and verify receipts."""

from __future__ import annotations

import functools
import re
import time
from typing import Any

from aiohttp import web

from ledger.http.aiohttp_adapter import close_unread
from ledger.http.errors import ApiError, error_response
from ledger.http.http1 import RequestHead
from ledger.http.plain import PlainHandler, plain_from_response, plain_response
from ledger.http.tracing import server_span
from ledger.process import tracing
from notary.core.ids import is_receipt_id
from notary.core.paths import RECEIPT_ROUTE, TOOL_CALLS_PATH, VERIFY_PATH
from notary.core.receipts import Receipt
from notary.core.records import MAX_NAME_CHARS
from notary.core.search import (
    DEFAULT_LIMIT,
    Cursor,
    SearchParameterError,
    decode_cursor,
    encode_cursor,
    parse_limit,
    parse_time_bound,
)
from notary.core.server_names import is_valid_name, server_name_problem
from notary.core.verify_request import (
    Refusal,
    body_object,
    read_verify_request,
    verify_request,
)
from notary.http.appkeys import METRICS, NOTARY, VERIFIER
from notary.http.store_damage import damage_refusal
from notary.http.verify_pool import Refused
from notary.serving.service import Account

_HEX64 = re.compile(r"[0-9a-f]{64}")
ISSUE_FIELDS = ("server", "tool", "call_sha256")


async def _body(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.RequestPayloadError as e:  # e.g. a Content-Encoding the body does not match
        raise ApiError(400, "invalid_body", "the request body cannot be read (does it match "
                       "its Content-Encoding?)") from e


async def _json_object(request: web.Request, fields: tuple[str, ...]) -> dict[str, Any]:
    """The body as an object with exactly ``fields``; anything else is a precise 400."""
    return _object_from(await _body(request), fields)


def _object_from(raw: bytes, fields: tuple[str, ...]) -> dict[str, Any]:
    body = body_object(raw, fields)
    if isinstance(body, Refusal):
        raise ApiError(body.status, body.code, body.message)
    return body


def _name(body: dict[str, Any], field: str) -> str:
    value = body[field]
    if not is_valid_name(value):
        raise ApiError(400, "invalid_name",
                       f"{field} must be 1-{MAX_NAME_CHARS} printable characters")
    return value


def _server_name(body: dict[str, Any]) -> str:
    """The server name a request would notarize under (and may claim): a name, and one that
    reads as what it is (no blanks at the ends or in runs, no invisible characters, no word
    mixing scripts; :func:`notary.core.server_names.server_name_problem`)."""
    value = body["server"]
    problem = _name_problem(value) if type(value) is str else server_name_problem(value)
    if problem is not None:
        raise ApiError(400, "invalid_name", f"server {problem}")
    assert isinstance(value, str)
    return value


@functools.lru_cache(maxsize=1024)
def _name_problem(name: str) -> str | None:
    """:func:`server_name_problem` of a string, remembered: a notary's requests carry a few
    server names over and over, and checking one (ICU's script checks, character by
    character) cost more than a tenth of a receipt's work on the loop. Only exact strings
    are cached (``type(value) is str`` at the caller), so equal non-strings never share an
    answer."""
    return server_name_problem(name)


def _digest(value: object) -> str:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ApiError(400, "invalid_call_sha256",
                       "call_sha256 must be exactly 64 lowercase hex characters")
    return value


def receipt_id_of(value: object) -> str:
    if not is_receipt_id(value):
        raise ApiError(400, "invalid_id", "id must be a receipt id of the form tc_…")
    assert isinstance(value, str)
    return value


async def issue(request: web.Request) -> web.Response:
    notary = request.app[NOTARY]
    account = await notary.authenticate(request.headers.get("Authorization"))
    receipt, status = await _issue(request.app, account, await _body(request))
    return receipt_response(receipt, status=status)


async def _issue(app: web.Application, account: Account, raw: bytes) -> tuple[Receipt, int]:
    """The receipt for an authenticated request's body, and its status (201: new)."""
    body = _object_from(raw, ISSUE_FIELDS)
    server, tool = _server_name(body), _name(body, "tool")
    digest = _digest(body["call_sha256"])
    receipt, created = await app[NOTARY].notarize(account, server, tool, digest)
    if created:
        app[METRICS].receipts.inc()
    return receipt, 201 if created else 200


def plain_issue(app: web.Application) -> PlainHandler:
    """``POST /v1/tool-calls`` on the server's plain path (ledger/http/server.py): what
    :func:`issue` and the application's middlewares do for it, without aiohttp's request and
    response objects, which cost more than the rest of a receipt. Errors are rendered by the
    same code as the middlewares' (``error_response``, ``damage_refusal``)."""
    async def handle(head: RequestHead, raw: bytes) -> bytes:
        started = time.perf_counter()
        try:
            notary = app[NOTARY]
            account = await notary.authenticate(head.headers.get("authorization"))
            receipt, status = await _issue(app, account, raw)
            answer = plain_response(status, receipt.to_json_bytes())
        except Exception as e:
            resp = error_response(damage_refusal(app, e) or e, method="POST", path=TOOL_CALLS_PATH)
            status = resp.status
            answer = plain_from_response(resp)
        app[METRICS].observe_request(TOOL_CALLS_PATH, "POST", status, time.perf_counter() - started)
        return answer

    async def traced(head: RequestHead, raw: bytes) -> bytes:
        with server_span("POST", TOOL_CALLS_PATH, head.headers) as span:
            answer = await handle(head, raw)
            span.set_attribute("http.response.status_code", int(answer[9:12]))  # HTTP/1.1 NNN
            return answer

    # Chosen once: untraced, the hot path pays not even a check.
    return handle if tracing.TRACER is None else traced


def receipt_response(receipt: Receipt, *, status: int = 200) -> web.Response:
    """A receipt as the JSON answer (the bytes written directly: see Receipt.to_json_bytes)."""
    return web.Response(body=receipt.to_json_bytes(), status=status,
                        content_type="application/json", charset="utf-8")


async def get_receipt(request: web.Request) -> web.Response:
    notary = request.app[NOTARY]
    receipt = await notary.get(receipt_id_of(request.match_info["id"]))
    return receipt_response(receipt)


SEARCH_PARAMETERS = ("server", "tool", "since", "until", "cursor", "limit")


def _single(request: web.Request, name: str) -> str | None:
    values = request.query.getall(name, [])
    if len(values) > 1:
        raise ApiError(400, "repeated_parameter", f"give query parameter {name} at most once")
    return values[0] if values else None


def _query_name(request: web.Request, field: str) -> str | None:
    value = _single(request, field)
    return None if value is None else _name({field: value}, field)


async def lookup_or_search(request: web.Request) -> web.Response:
    """``?call_sha256=`` is the lookup of one receipt; anything else is the search."""
    unknown = sorted(set(request.query) - {"call_sha256", *SEARCH_PARAMETERS})
    if unknown:
        raise ApiError(400, "unknown_field", f"unknown query parameter(s) {unknown}; allowed: "
                       f"call_sha256, or {', '.join(SEARCH_PARAMETERS)}")
    if "call_sha256" in request.query:
        if len(request.query.getall("call_sha256")) > 1:
            raise ApiError(400, "invalid_call_sha256", "give call_sha256 once")
        mixed = sorted(set(request.query) & set(SEARCH_PARAMETERS))
        if mixed:
            raise ApiError(400, "invalid_query", f"call_sha256 finds one receipt and takes no "
                           f"search parameters; drop {mixed}")
        receipt = await request.app[NOTARY].lookup(_digest(request.query["call_sha256"]))
        return receipt_response(receipt)
    return await _search(request)


async def _search(request: web.Request) -> web.Response:
    """Receipts newest first, one bounded page, with a cursor to the next one."""
    server, tool = _query_name(request, "server"), _query_name(request, "tool")
    try:
        raw = {name: _single(request, name) for name in ("since", "until", "cursor", "limit")}
        since = None if raw["since"] is None else parse_time_bound("since", raw["since"])
        until = None if raw["until"] is None else parse_time_bound("until", raw["until"])
        cursor = None if raw["cursor"] is None else decode_cursor(raw["cursor"])
        limit = DEFAULT_LIMIT if raw["limit"] is None else parse_limit(raw["limit"])
    except SearchParameterError as e:
        raise ApiError(400, e.code, str(e)) from None
    if since is not None and until is not None and since >= until:
        raise ApiError(400, "invalid_time", f"since ({raw['since']}) must be earlier than "
                       f"until ({raw['until']})")
    receipts, last = await request.app[NOTARY].search(
        server=server, tool=tool, since=since, until=until,
        before=None if cursor is None else cursor.key(), limit=limit)
    next_cursor = None if last is None else encode_cursor(Cursor(*last))
    resp = web.json_response({"tool_calls": [r.to_json() for r in receipts],
                              "next_cursor": next_cursor})
    resp.headers["Cache-Control"] = "no-cache"
    return resp


def _refused(result: object) -> None:
    if isinstance(result, Refusal):
        raise ApiError(result.status, result.code, result.message)


async def verify(request: web.Request) -> web.Response:
    """Per-level verdicts. The record is hashed in memory, never stored or logged.

    Parsing and hashing run in the verification pool, within its per-client and global limits
    (notary/http/verify_pool.py); a request over them gets 429.
    """
    pool, notary = request.app[VERIFIER], request.app[NOTARY]
    client = request.remote or "unknown"
    try:
        with pool.admit(client):
            raw = await _body(request)
            with pool.working():
                receipt_id = await pool.run(client, read_verify_request, raw)
                _refused(receipt_id)
                assert isinstance(receipt_id, str)
                stored = await notary.get(receipt_id)
                receipt = stored.to_json()
                jwks = notary.jwks if stored.signature is None else \
                    await notary.jwks_with(stored.signature.kid)
                verdict = await pool.run(client, verify_request, raw, receipt,
                                         jwks.to_json(), notary.log.verifier.vkey)
                _refused(verdict)
    except Refused as e:
        if e.ignored_retry_after:
            close_unread(request)  # it was told to wait: its body is not worth reading
        raise
    assert isinstance(verdict, dict)
    return web.json_response({"id": receipt_id, **verdict, "receipt": receipt})


def add_tool_call_routes(app: web.Application) -> None:
    app.router.add_post(TOOL_CALLS_PATH, issue)
    app.router.add_get(TOOL_CALLS_PATH, lookup_or_search)
    app.router.add_post(VERIFY_PATH, verify)
    # Not "verify": GET /v1/tool-calls/verify is a 405 (Allow: POST), not a malformed receipt id.
    app.router.add_get(RECEIPT_ROUTE.replace("{id}", r"{id:(?!verify$)[^/]+}"), get_receipt)
