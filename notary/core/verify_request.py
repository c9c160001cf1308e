"""The work of ``POST /v1/tool-calls/verify``, as plain functions a worker process can run.

Parsing a large record and canonicalizing it (RFC 8785, pure Python) takes milliseconds of CPU;
on the event loop that would stall every other request, notarization included. So the server
hands the raw body to a worker process in two steps: :func:`read_verify_request` finds which
receipt is asked about (the server then fetches it, with its proof), and :func:`verify_request`
checks the record against it. Both take and return only plain, picklable values, report bad
input as a :class:`Refusal` value rather than an exception, and say how much CPU they used, so
the server can charge each client address for its work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar, TypeVarTuple

from ledger.core.boundedjson import JsonError, JsonObject, JsonValue, parse_json
from ledger.core.note import Ed25519Verifier
from notary.core.canonical import MAX_DEPTH
from notary.core.ids import is_receipt_id
from notary.core.jwks import Jwks
from notary.core.verification import verify_receipt

__all__ = ["BODY_MAX_DEPTH", "VERIFY_FIELDS", "Refusal", "parse_body", "read_verify_request",
           "timed", "verify_request"]

VERIFY_FIELDS = ("id", "record")

BODY_MAX_DEPTH = MAX_DEPTH + 1
"""Nesting allowed in a request body: a record as deep as a receipt can commit to, inside the
request's object."""
T = TypeVar("T")
Args = TypeVarTuple("Args")


@dataclass(frozen=True)
class Refusal:
    """Why a verify request is refused: rendered as the HTTP error ``status``/``code``."""

    status: int
    code: str
    message: str


def parse_body(raw: bytes) -> JsonValue:
    """A request body as strict JSON (:func:`ledger.core.boundedjson.parse_json`: UTF-8 without
    a BOM, unique member names, no NaN, nested at most :data:`BODY_MAX_DEPTH` deep); its size
    is bounded by the server before it is read."""
    return parse_json(raw, max_bytes=len(raw), max_depth=BODY_MAX_DEPTH)


def body_object(raw: bytes, fields: tuple[str, ...]) -> JsonObject | Refusal:
    """A request body that must be a JSON object with exactly ``fields``: the object, or the
    precise 400 (every JSON route of the notary reads its body through this one check)."""
    try:
        body = parse_body(raw)
    except JsonError as e:
        return Refusal(400, "invalid_json", f"invalid request body: {e}")
    if not isinstance(body, dict):
        return Refusal(400, "invalid_json", "the request body must be a JSON object")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        return Refusal(400, "unknown_field",
                       f"unknown field(s) {unknown}; allowed: {list(fields)}")
    missing = [f for f in fields if f not in body]
    if missing:
        return Refusal(400, "missing_field", f"missing field(s) {missing}")
    return body


def _parse(raw: bytes) -> tuple[str, JsonObject] | Refusal:
    body = body_object(raw, VERIFY_FIELDS)
    if isinstance(body, Refusal):
        return body
    receipt_id = body["id"]
    if not is_receipt_id(receipt_id):
        return Refusal(400, "invalid_id", "id must be a receipt id of the form tc_…")
    assert isinstance(receipt_id, str)
    record = body["record"]
    if not isinstance(record, dict):
        return Refusal(400, "invalid_record", "record must be a JSON object")
    return receipt_id, record


def read_verify_request(raw: bytes) -> str | Refusal:
    """The receipt id a verify body asks about, once the whole body is known to be valid."""
    parsed = _parse(raw)
    return parsed if isinstance(parsed, Refusal) else parsed[0]


def verify_request(raw: bytes, receipt: Mapping[str, object], jwks: Mapping[str, object],
                   log_vkey: str) -> dict[str, object] | Refusal:
    """The per-level verdict (``valid`` and ``levels``) of the body's record and ``receipt``."""
    parsed = _parse(raw)
    if isinstance(parsed, Refusal):
        return parsed
    verdict = verify_receipt(receipt, record=parsed[1], jwks=Jwks(jwks),
                             log_verifier=Ed25519Verifier.from_vkey(log_vkey))
    return verdict.to_json()


def timed(fn: Callable[[*Args], T], *args: *Args) -> tuple[T, float]:
    """``fn(*args)`` and the CPU seconds it took in this process (what a client is charged)."""
    started = time.process_time()
    result = fn(*args)
    return result, time.process_time() - started
