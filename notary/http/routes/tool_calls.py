"""``/v1/tool-calls``: issue, fetch, look up and verify receipts."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from ledger.http.errors import ApiError
from ledger.http.server import close_unread
from notary.core.ids import is_receipt_id
from notary.core.strict_json import StrictJSONError, loads_strict
from notary.core.verify_request import Refusal, read_verify_request, verify_request
from notary.http.appkeys import METRICS, NOTARY, VERIFIER
from notary.http.verify_pool import Refused

MAX_NAME = 256
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
    raw = await _body(request)
    try:
        body = loads_strict(raw)
    except StrictJSONError as e:
        raise ApiError(400, "invalid_json", f"the request body is not valid JSON: {e}") from e
    except RecursionError:
        raise ApiError(400, "invalid_json", "the request body is nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "the request body must be a JSON object")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise ApiError(400, "unknown_field",
                       f"unknown field(s) {unknown}; allowed: {list(fields)}")
    missing = [f for f in fields if f not in body]
    if missing:
        raise ApiError(400, "missing_field", f"missing field(s) {missing}")
    return body


def _name(body: dict[str, Any], field: str) -> str:
    value = body[field]
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME or not value.isprintable():
        raise ApiError(400, "invalid_name",
                       f"{field} must be 1-{MAX_NAME} printable characters")
    return value


def _digest(value: object) -> str:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ApiError(400, "invalid_call_sha256",
                       "call_sha256 must be exactly 64 lowercase hex characters")
    return value


def _receipt_id(value: object) -> str:
    if not is_receipt_id(value):
        raise ApiError(400, "invalid_id", "id must be a receipt id of the form tc_…")
    assert isinstance(value, str)
    return value


async def issue(request: web.Request) -> web.Response:
    notary = request.app[NOTARY]
    account = await notary.authenticate(request.headers.get("Authorization"))
    body = await _json_object(request, ISSUE_FIELDS)
    server, tool, digest = _name(body, "server"), _name(body, "tool"), _digest(body["call_sha256"])
    receipt, created = await notary.notarize(account, server, tool, digest)
    if created:
        request.app[METRICS].receipts.inc()
    return web.json_response(receipt, status=201 if created else 200)


async def get_receipt(request: web.Request) -> web.Response:
    notary = request.app[NOTARY]
    receipt = await notary.get(_receipt_id(request.match_info["id"]))
    return web.json_response(receipt)


async def lookup(request: web.Request) -> web.Response:
    unknown = sorted(set(request.query) - {"call_sha256"})
    if unknown:
        raise ApiError(400, "unknown_field", f"unknown query parameter(s) {unknown}")
    if "call_sha256" not in request.query:
        raise ApiError(400, "missing_field", "query parameter call_sha256 is required")
    if len(request.query.getall("call_sha256")) > 1:
        raise ApiError(400, "invalid_call_sha256", "give call_sha256 once")
    receipt = await request.app[NOTARY].lookup(_digest(request.query["call_sha256"]))
    return web.json_response(receipt)


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
                receipt = await notary.get(receipt_id)
                await notary.refresh_keys()
                assert notary.log is not None
                verdict = await pool.run(client, verify_request, raw, receipt,
                                         notary.jwks.to_json(), notary.log.verifier.vkey)
                _refused(verdict)
    except Refused as e:
        if e.ignored_retry_after:
            close_unread(request)  # it was told to wait: its body is not worth reading
        raise
    assert isinstance(verdict, dict)
    return web.json_response({"id": receipt_id, **verdict, "receipt": receipt})


def add_tool_call_routes(app: web.Application) -> None:
    app.router.add_post("/v1/tool-calls", issue)
    app.router.add_get("/v1/tool-calls", lookup)
    app.router.add_post("/v1/tool-calls/verify", verify)
    # Not "verify": GET /v1/tool-calls/verify is a 405 (Allow: POST), not a malformed receipt id.
    app.router.add_get(r"/v1/tool-calls/{id:(?!verify$)[^/]+}", get_receipt)
