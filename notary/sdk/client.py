"""An asyncio HTTP client for the notary's API (``/v1/tool-calls``, JWKS, ledger).

Why retries are safe: issuing a receipt is keyed by ``call_sha256``. If a ``POST
/v1/tool-calls`` reached the notary but its answer was lost (connection reset, timeout, a
5xx from a proxy), sending the same digest again returns the receipt that already exists
(200 instead of 201) and is not counted twice against the allowance. So the client retries
connection errors, timeouts and 5xx answers with exponential backoff and jitter, and never
retries a 4xx: a 4xx is the notary's considered answer (bad key, quota, malformed input), and
asking again would only get the same answer later.

Errors are typed so callers can choose a policy: :class:`NotaryHTTPError` (the notary refused,
with its stable ``code``), :class:`NotaryUnavailableError` (it could not be reached or kept
failing), :class:`NotaryResponseError` (it answered something that is not a valid reply).
All derive from :class:`NotaryError`.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import random
import re
from collections.abc import Mapping
from types import TracebackType

import aiohttp

from ledger.client.http import MAX_JSON_BYTES, MAX_JSON_DEPTH, read_bounded
from ledger.core.boundedjson import JsonError, JsonObject, parse_json
from ledger.process import tracing
from notary.core.errors import NotaryBaseError
from notary.core.paths import TOOL_CALLS_PATH, VERIFY_PATH, receipt_path
from notary.core.receipts import Receipt, ReceiptFormatError

__all__ = [
    "MISSING_API_KEY",
    "NotaryClient",
    "NotaryError",
    "NotaryHTTPError",
    "NotaryResponseError",
    "NotaryUnavailableError",
]

_log = logging.getLogger("notary.sdk")

_HEX64 = re.compile(r"[0-9a-f]{64}")
# Whitespace and control characters can never be part of a key (a trailing newline read from
# a file is the usual culprit) and must never reach a header.
_NOT_IN_A_KEY = re.compile(r"[\x00-\x20\x7f-\x9f\s]")

MISSING_API_KEY = (
    "the notary client has no API key, so no tool result could be notarized: pass api_key to "
    "NotaryClient (a server usually reads it from the NOTARY_API_KEY environment variable; "
    "create one with `notary apikey create`)"
)
"""Why a :class:`NotaryClient` without a key cannot notarize (the JS package says the same)."""
_RECEIPT_FIELDS = ("server", "tool", "call_sha256")

MAX_BACKOFF = 2.0
"""Longest single wait between two attempts, in seconds (also caps ``Retry-After``).

A tool call is waiting on the notary while it retries; waiting longer than this between
attempts would hold the caller for an unreasonable time, and by then the policy of the
caller (fail or mark) is the better answer than another attempt.
"""


class NotaryError(NotaryBaseError):
    """Base class of every error the notary client raises."""


class NotaryHTTPError(NotaryError):
    """The notary answered with a 4xx: a refusal that retrying would not change.

    ``code`` is the stable machine-readable code of the JSON error body
    (``unauthorized``, ``quota_exceeded``, ``invalid_call_sha256``...), ``message`` the
    human-readable text, ``retry_after`` the ``Retry-After`` header in seconds when present.
    """

    def __init__(self, status: int, code: str, message: str,
                 *, retry_after: float | None = None) -> None:
        super().__init__(f"notary answered {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class NotaryUnavailableError(NotaryError):
    """The notary could not be reached, timed out or kept failing with 5xx after all retries.

    ``attempts`` is how many requests were made; ``status`` the last 5xx status if the last
    failure was one (None for connection errors and timeouts). The last underlying error is
    chained as ``__cause__``.
    """

    def __init__(self, message: str, *, attempts: int, status: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status


class NotaryResponseError(NotaryError):
    """The notary answered 2xx with something that is not the documented reply.

    Not retried: a notary that returns garbage, or a receipt for another call than the one
    asked for, is broken or impersonated, and a receipt from it must not be embedded.
    """


class _Retryable(Exception):
    """Internal: one attempt failed in a way worth another attempt."""

    def __init__(self, description: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.status = status
        self.retry_after = retry_after


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: not worth parsing for a wait capped at MAX_BACKOFF
    return seconds if seconds >= 0 else None


def _connection_failure(exc: aiohttp.ClientError) -> str:
    """A failed exchange in the words the JS client uses: ``connection failed (ECONNREFUSED)``.

    The system error's name, when there is one, is what an operator looks up, and it reads the
    same from both SDKs; anything else is named by its type.
    """
    code = exc.errno if isinstance(exc, aiohttp.ClientOSError) else None
    if code is not None and code in errno.errorcode:
        return f"connection failed ({errno.errorcode[code]})"
    return f"{type(exc).__name__}: {exc}"


def _error_body(status: int, reason: str | None, body: bytes) -> tuple[str, str]:
    """(code, message) from the notary's ``{"error": {"code", "message"}}`` body, if any."""
    try:
        doc = parse_json(body, max_bytes=MAX_JSON_BYTES, max_depth=4)
    except JsonError:
        doc = None
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        code, message = err.get("code"), err.get("message")
        if isinstance(code, str) and isinstance(message, str):
            return code, message
    text = body[:200].decode("utf-8", "replace").strip()
    return f"http_{status}", text or (reason or "no message")


def _receipt(doc: JsonObject, path: str) -> Receipt:
    """The notary's answer as a :class:`Receipt`: strictly shaped, signed, with a proof."""
    try:
        receipt = Receipt.from_json(doc)
    except ReceiptFormatError as exc:
        raise NotaryResponseError(f"the notary's answer to {path} is not a receipt: {exc}"
                                  ) from exc
    if receipt.signature is None or receipt.proof is None:
        raise NotaryResponseError("the notary's receipt lacks its signature or its proof")
    return receipt


class NotaryClient:
    """Client for one notary. Use as ``async with NotaryClient(url, key) as notary: ...``.

    ``api_key`` is only needed for :meth:`notarize`; verifying and reading are
    unauthenticated. A :class:`~notary.sdk.Notarizer` refuses a client without one when it is
    built, so a server missing its key fails at start-up rather than on its first call.
    ``timeout`` bounds each attempt (seconds). ``retries`` is the number of *additional*
    attempts after the first for transient failures, so at most ``retries + 1`` requests
    are made; the wait before retry ``n`` (0-based) is ``backoff * 2**n`` seconds with
    "equal jitter" (half fixed, half random, so many servers retrying together spread out),
    capped at :data:`MAX_BACKOFF`, and never shorter than a ``Retry-After`` the notary sent
    with a 5xx (also capped).

    ``session`` lets an application share its own ``aiohttp.ClientSession`` (it is then not
    closed by this client). Without one, a session is created lazily on first use inside
    the running event loop and closed by :meth:`close` / ``__aexit__``; a closed client
    reopens a fresh session if used again, so a client can outlive one MCP server lifespan
    and serve the next.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 5.0,
        retries: int = 3,
        backoff: float = 0.05,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if backoff < 0:
            raise ValueError("backoff must be >= 0")
        if api_key is not None and (not isinstance(api_key, str)
                                    or _NOT_IN_A_KEY.search(api_key) is not None):
            # The key itself is never part of a message.
            raise ValueError("api_key must be a string without whitespace or control "
                             "characters (the key is not shown)")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._session = session
        self._owns_session = session is None

    def __repr__(self) -> str:
        # Never show the API key.
        return f"NotaryClient({self.base_url!r}, retries={self.retries}, timeout={self.timeout})"

    @property
    def has_api_key(self) -> bool:
        """Whether this client can notarize (an empty key counts as none)."""
        return bool(self._api_key)

    # Lifetime -------------------------------------------------------------------------------

    async def __aenter__(self) -> NotaryClient:
        self._get_session()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session this client created (a caller-supplied one is left open)."""
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or (self._owns_session and self._session.closed):
            self._session = aiohttp.ClientSession()
            self._owns_session = True
        return self._session

    # URLs -----------------------------------------------------------------------------------

    def receipt_url(self, receipt_id: str) -> str:
        """Where anyone can fetch this receipt with a proof to the latest checkpoint."""
        return self.base_url + receipt_path(receipt_id)

    @property
    def verify_url(self) -> str:
        """The online verification endpoint (``POST {id, record}``, no auth)."""
        return self.base_url + VERIFY_PATH

    # API ------------------------------------------------------------------------------------

    async def notarize(self, server: str, tool: str, call_sha256: str) -> Receipt:
        """Notarize one call digest; the receipt with its ``proof``.

        Sends only the server name, the tool name and the digest. A digest already notarized
        returns its existing receipt. The receipt is parsed strictly and checked to be *for
        this call* (same server, tool and digest, signed, with a ``proof``) before it is
        returned, because a receipt for anything else would be embedded in a result it does
        not describe. Its signature is the verifier's to check, against keys it trusts.
        """
        if not self._api_key:
            raise ValueError(MISSING_API_KEY)
        if not isinstance(call_sha256, str) or _HEX64.fullmatch(call_sha256) is None:
            raise ValueError("call_sha256 must be 64 lower-case hex characters")
        body = {"server": server, "tool": tool, "call_sha256": call_sha256}
        # In the program's trace, if it has one: the notary continues it (traceparent).
        with tracing.client_span(f"POST {TOOL_CALLS_PATH}", {
                "http.request.method": "POST", "url.full": self.base_url + TOOL_CALLS_PATH,
                "gen_ai.tool.name": tool}) as span:
            doc = await self._request("POST", TOOL_CALLS_PATH, body, auth=True)
            for key in _RECEIPT_FIELDS:
                if doc.get(key) != body[key]:
                    raise NotaryResponseError(
                        f"the notary returned a receipt whose {key} is {doc.get(key)!r}, "
                        f"not {body[key]!r}"
                    )
            receipt = _receipt(doc, TOOL_CALLS_PATH)
            if span is not None:
                span.set_attributes({"notary.receipt.id": receipt.id,
                                     "notary.log.origin": receipt.origin,
                                     "notary.log.index": receipt.index})
            return receipt

    async def get_receipt(self, receipt_id: str) -> Receipt:
        """The receipt ``receipt_id`` with a proof to the notary's latest checkpoint."""
        path = receipt_path(receipt_id)
        receipt = _receipt(await self._request("GET", path), path)
        if receipt.id != receipt_id:
            raise NotaryResponseError(f"the notary answered receipt {receipt.id!r} for "
                                      f"{receipt_id!r}")
        return receipt

    async def lookup(self, call_sha256: str) -> Receipt:
        """The receipt issued for ``call_sha256`` (raises NotaryHTTPError 404 if none)."""
        receipt = _receipt(await self._request("GET", TOOL_CALLS_PATH,
                                               params={"call_sha256": call_sha256}),
                           TOOL_CALLS_PATH)
        if receipt.call_sha256 != call_sha256:
            raise NotaryResponseError("the notary answered a receipt for another call_sha256")
        return receipt

    async def verify(self, receipt_id: str, record: Mapping[str, object]) -> JsonObject:
        """Online verification: the notary's per-level verdict for ``record``.

        The notary hashes the record in memory and does not store it; still, this sends the
        arguments and the result to the notary. Prefer offline verification
        (:func:`notary.core.verification.verify_receipt`) when they are confidential.
        """
        return await self._request("POST", VERIFY_PATH,
                                   {"id": receipt_id, "record": dict(record)})

    async def jwks(self) -> JsonObject:
        """The receipt keys (``/.well-known/jwks.json``): the ``jwks`` of ``verify_tool_result``."""
        return await self._request("GET", "/.well-known/jwks.json")

    async def ledger(self) -> JsonObject:
        """The log's description: ``origin``, ``vkey`` (note verifier key), ``size``..."""
        return await self._request("GET", "/v1/ledger")

    # Transport ------------------------------------------------------------------------------

    async def _request(self, method: str, path: str, body: object = None, *, auth: bool = False,
                       params: Mapping[str, str] | None = None) -> JsonObject:
        url = self.base_url + path
        headers = {"Accept": "application/json"}
        if auth and self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data: bytes | None = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        tracing.inject(headers)
        attempts = 0
        while True:
            attempts += 1
            try:
                return await self._attempt(method, url, headers, data, params)
            except _Retryable as failure:
                if attempts > self.retries:
                    raise NotaryUnavailableError(
                        f"notary at {self.base_url} unavailable after {attempts} attempt(s): "
                        f"{failure.description}",
                        attempts=attempts, status=failure.status,
                    ) from failure.__cause__ or failure
                delay = self._delay(attempts - 1, failure.retry_after)
                _log.info("notary %s %s failed (%s); retry %d/%d in %.3fs", method, path,
                          failure.description, attempts, self.retries, delay)
                await asyncio.sleep(delay)

    def _delay(self, retry: int, retry_after: float | None) -> float:
        base = min(self.backoff * 2.0**retry, MAX_BACKOFF)
        delay = base / 2 + random.uniform(0, base / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_BACKOFF))
        return delay

    async def _attempt(self, method: str, url: str, headers: Mapping[str, str],
                       data: bytes | None, params: Mapping[str, str] | None) -> JsonObject:
        session = self._get_session()
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            async with session.request(method, url, data=data, headers=headers, params=params,
                                       timeout=timeout, allow_redirects=False) as resp:
                # Bounded: a hostile or broken server's endless answer is never held whole.
                payload = await read_bounded(resp, MAX_JSON_BYTES)
                status, reason, resp_headers = resp.status, resp.reason, resp.headers
        except TimeoutError as exc:
            raise _Retryable(f"timed out after {self.timeout:g} s") from exc
        except aiohttp.ClientError as exc:
            # Connection refused/reset, DNS, a response cut short: transient by nature.
            raise _Retryable(_connection_failure(exc)) from exc
        if payload is None:
            raise NotaryResponseError(f"the notary's answer from {url} is larger than "
                                      f"{MAX_JSON_BYTES} bytes")
        if status >= 500:
            code, message = _error_body(status, reason, payload)
            raise _Retryable(f"HTTP {status} {code}: {message}", status,
                             _retry_after(resp_headers))
        if status >= 400:
            code, message = _error_body(status, reason, payload)
            raise NotaryHTTPError(status, code, message, retry_after=_retry_after(resp_headers))
        if not 200 <= status < 300:
            raise NotaryResponseError(f"unexpected HTTP {status} from {url}")
        try:
            doc = parse_json(payload, max_bytes=MAX_JSON_BYTES, max_depth=MAX_JSON_DEPTH)
        except JsonError as exc:
            raise NotaryResponseError(f"the notary's answer from {url} is not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise NotaryResponseError(f"the notary's answer from {url} is not a JSON object")
        return doc
