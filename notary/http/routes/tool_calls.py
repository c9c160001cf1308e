"""``/v1/tool-calls``: issue, fetch, look up and verify receipts."""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

from ledger.http.errors import ApiError
from notary.core.ids import is_receipt_id
from notary.http.appkeys import METRICS, NOTARY

MAX_NAME = 256
_HEX64 = re.compile(r"[0-9a-f]{64}")
ISSUE_FIELDS = ("server", "tool", "call_sha256")
VERIFY_FIELDS = ("id", "record")


def _no_constants(name: str) -> object:
    """NaN and Infinity are not JSON (RFC 8259), whatever Python's parser allows."""
    raise ValueError(f"{name} is not a JSON value")


async def _json_object(request: web.Request, fields: tuple[str, ...]) -> dict[str, Any]:
    """The body as an object with exactly ``fields``; anything else is a precise 400."""
    try:
        raw = await request.read()
    except web.RequestPayloadError as e:  # e.g. a Content-Encoding the body does not match
        raise ApiError(400, "invalid_body", "the request body cannot be read (does it match "
                       "its Content-Encoding?)") from e
    try:
        body = json.loads(raw, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError) as e:
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
    return web.json_response(receipt.to_json(), status=201 if created else 200)


async def get_receipt(request: web.Request) -> web.Response:
    notary = request.app[NOTARY]
    receipt = await notary.get(_receipt_id(request.match_info["id"]))
    return web.json_response(receipt.to_json())


async def lookup(request: web.Request) -> web.Response:
    unknown = sorted(set(request.query) - {"call_sha256"})
    if unknown:
        raise ApiError(400, "unknown_field", f"unknown query parameter(s) {unknown}")
    if "call_sha256" not in request.query:
        raise ApiError(400, "missing_field", "query parameter call_sha256 is required")
    if len(request.query.getall("call_sha256")) > 1:
        raise ApiError(400, "invalid_call_sha256", "give call_sha256 once")
    receipt = await request.app[NOTARY].lookup(_digest(request.query["call_sha256"]))
    return web.json_response(receipt.to_json())


async def verify(request: web.Request) -> web.Response:
    """Per-level verdicts. The record is hashed in memory, never stored or logged."""
    body = await _json_object(request, VERIFY_FIELDS)
    receipt_id = _receipt_id(body["id"])
    record = body["record"]
    if not isinstance(record, dict):
        raise ApiError(400, "invalid_record", "record must be a JSON object")
    verdict, receipt = await request.app[NOTARY].verify(receipt_id, record)
    return web.json_response({"id": receipt_id, **verdict.to_json(),
                              "receipt": receipt.to_json()})


def add_tool_call_routes(app: web.Application) -> None:
    app.router.add_post("/v1/tool-calls", issue)
    app.router.add_get("/v1/tool-calls", lookup)
    app.router.add_post("/v1/tool-calls/verify", verify)
    # Not "verify": GET /v1/tool-calls/verify is a 405 (Allow: POST), not a malformed receipt id.
    app.router.add_get(r"/v1/tool-calls/{id:(?!verify$)[^/]+}", get_receipt)
