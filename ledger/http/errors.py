"""One JSON error shape for every HTTP failure: ``{"error": {"code": ..., "message": ...}}``.

Clients (SDKs, monitors, the verifier) branch on ``code``, which is stable, and show ``message``
to people. aiohttp's own errors (unknown route, wrong method, body too large) would otherwise come
back as ``text/plain`` with an ad-hoc body, so the middleware rewrites them into the same shape,
and turns anything unexpected into a 500 that says nothing about the server's internals.

Three failures are not the server's fault and are not logged as errors: a client that went away
in the middle of its request (counted with nginx's status 499, "client closed request", which
nobody receives), a body that did not arrive within the body timeout (408), and a full disk
(503 with ``Retry-After``: the write is refused whole, nothing acknowledged is lost, and it
works again by itself once space is freed), logged at most once per interval.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from ledger.core.errors import LedgerError, RefusedRequest
from ledger.log.errors import LogRollbackError
from ledger.process.structured_logs import LogThrottle, safe_traceback
from ledger.storage.base import StorageFullError, StoreUnavailableError, WriterBusyError

__all__ = ["CLIENT_CLOSED", "STORAGE_RETRY_AFTER", "ApiError", "RequestBodyTimeout",
           "error_middleware", "error_response", "json_error"]

_log = structlog.get_logger("ledger.http.routes")
_throttle = LogThrottle(30.0)

CLIENT_CLOSED = 499
"""Status recorded (never sent: nobody is listening) when the client disconnected mid-request."""

STORAGE_RETRY_AFTER = 10
"""Seconds a client is asked to wait when the disk is full."""


class RequestBodyTimeout(LedgerError, asyncio.TimeoutError):
    """The request body did not arrive within the server's body timeout (answered 408).

    A ``TimeoutError`` so that aiohttp's own draining of an unread body ends quietly instead of
    logging an unhandled exception.
    """

#: Stable machine-readable codes for the statuses aiohttp raises by itself.
_CODES: Mapping[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    408: "request_timeout",
    409: "conflict",
    410: "gone",
    411: "length_required",
    413: "payload_too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    416: "range_not_satisfiable",
    422: "unprocessable_entity",
    429: "too_many_requests",
    431: "headers_too_large",
    500: "internal",
    501: "not_implemented",
    503: "unavailable",
}

# Headers of an aiohttp HTTPException that still mean something on the JSON replacement.
_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate", "Location")


class ApiError(RefusedRequest):
    """Raise from a handler to answer with a JSON error; the middleware renders it."""

    def response(self) -> web.Response:
        return json_error(self.status, self.code, self.message, headers=self.headers)


def json_error(
    status: int, code: str, message: str, *, headers: Mapping[str, str] | None = None
) -> web.Response:
    """The JSON error response; errors are never cached, so a retry sees the fixed state."""
    body = json.dumps({"error": {"code": code, "message": message}})
    reason = "Client Closed Request" if status == CLIENT_CLOSED else None
    resp = web.Response(status=status, text=body, content_type="application/json", reason=reason)
    resp.headers["Cache-Control"] = "no-store"
    if headers:
        resp.headers.update(headers)
    return resp


def _message(request: web.Request, exc: web.HTTPException) -> str:
    """A useful message for an aiohttp exception, naming limits rather than echoing input."""
    status = exc.status
    if status == 404:
        return "no such resource"
    if status == 405:
        allowed = exc.headers.get("Allow", "")
        return f"method {request.method} is not allowed here" + (
            f"; allowed: {allowed.replace(',', ', ')}" if allowed else ""
        )
    if status == 413:
        text = exc.text or ""
        if text.startswith("Maximum number of form fields"):
            return text
        return f"request body is larger than the limit of {request.client_max_size} bytes"
    text = (exc.text or "").strip()
    default = f"{status}: {exc.reason}"
    if text and text != default:
        return text[:500]
    return exc.reason.lower()


def _from_http_exception(request: web.Request, exc: web.HTTPException) -> web.Response:
    code = _CODES.get(exc.status, "client_error" if exc.status < 500 else "server_error")
    headers = {h: exc.headers[h] for h in _KEPT_HEADERS if h in exc.headers}
    return json_error(exc.status, code, _message(request, exc), headers=headers)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Render refusals (:class:`~ledger.core.errors.RefusedRequest`, :class:`ApiError`),
    aiohttp errors and crashes as JSON errors
    (:func:`error_response`).

    Successful responses and redirects pass through untouched, as does an HTTPException whose
    body is already JSON (a handler that built its own error).
    """
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400 or e.content_type == "application/json":
            raise
        return _from_http_exception(request, e)
    except Exception as e:
        return error_response(e, method=request.method, path=request.path)


def error_response(exc: Exception, *, method: str, path: str) -> web.Response:
    """The JSON error answering ``exc`` raised while handling ``method`` ``path``.

    Crashes are logged with the method, the path and where they were raised, never the
    exception's message: query strings, bodies and the messages built from them may hold
    things that must not reach logs.
    """
    if isinstance(exc, RefusedRequest):  # ApiError, and what services refuse
        return json_error(exc.status, exc.code, exc.message, headers=exc.headers)
    if isinstance(exc, StoreUnavailableError | WriterBusyError):
        # The database is away (failover, lost connection) or a writer held the lock too
        # long: nothing was acknowledged, a retry may succeed.
        # The detail (driver error, host and port) is for the operator's log, once per
        # interval; the client learns only that it may retry.
        dropped = _throttle.allow("store_unavailable")
        if dropped is not None:
            _log.warning("store_unavailable", method=method, path=path, error=str(exc),
                         suppressed=dropped)
        return json_error(503, "unavailable", "the log's store is unavailable right now "
                          "(nothing was written); retry shortly", headers={"Retry-After": "1"})
    if isinstance(exc, LogRollbackError):
        _log.error("writer_refusing", method=method, path=path, error=str(exc))
        return json_error(503, "log_refusing", str(exc), headers={"Retry-After": "30"})
    if isinstance(exc, RequestBodyTimeout):
        resp = json_error(408, "request_timeout", str(exc))
        resp.force_close()
        return resp
    if isinstance(exc, ConnectionResetError):
        return json_error(CLIENT_CLOSED, "client_closed_request",
                          "the client closed the connection before the request was complete")
    if isinstance(exc, StorageFullError):
        dropped = _throttle.allow("storage_full")
        if dropped is not None:
            _log.warning("storage_full", error=str(exc), suppressed=dropped)
        return json_error(503, "storage_full",
                          "the notary's disk is full; nothing was written, retry later",
                          headers={"Retry-After": str(STORAGE_RETRY_AFTER)})
    _log.error("unhandled_error", method=method, path=path,
               exception_type=type(exc).__name__, where=safe_traceback(exc))
    return json_error(500, "internal", "internal server error")
