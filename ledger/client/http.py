"""The one HTTP client for reading logs, notaries and witnesses: bounded, and honest about why.

Everything a client reads from the network is untrusted: a hostile or broken server may answer
with an endless body, a body that stops half way, garbage, or JSON nested 30,000 deep. So every
answer is read with a size limit (never into memory past it), JSON is parsed with
:func:`ledger.core.boundedjson.parse_json` (size and depth bounds, strict), and every failure is
one exception type, :class:`FetchError`, that says which kind of failure it was:

- ``status`` is None when no complete answer arrived (connection refused or reset, timeout, a
  body cut short): nothing can be concluded about the server;
- ``status`` is the HTTP status of a non-200 answer;
- ``malformed`` is set when the server answered, but with something no honest server of the
  protocol sends (too large, not JSON, too deep).

:attr:`FetchError.refused` groups the last two: the server answered and would not or could not
give what was asked. A verifier treats that as evidence against a log that must be able to
answer; a monitor treats any FetchError as "could not read the log", never as an alarm by
itself (alarms need signed statements that contradict each other).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ledger.core.boundedjson import DEFAULT_MAX_DEPTH, JsonError, JsonValue, parse_json
from ledger.core.errors import LedgerError

if TYPE_CHECKING:
    import aiohttp

__all__ = ["MAX_JSON_BYTES", "MAX_JSON_DEPTH", "FetchError", "HttpAnswer", "HttpClient",
           "read_bounded"]

MAX_JSON_BYTES = 4 << 20
"""Largest JSON answer read: receipts, keys and proofs are a few kilobytes."""
MAX_JSON_DEPTH = DEFAULT_MAX_DEPTH

USER_AGENT = "mcp-notary"


class FetchError(LedgerError):
    """A request did not give a usable answer (see the module docstring for the kinds)."""

    def __init__(self, url: str, message: str, *, status: int | None = None,
                 malformed: bool = False, method: str = "GET") -> None:
        super().__init__(f"{method} {url}: {message}")
        self.url = url
        self.status = status
        self.malformed = malformed

    @property
    def refused(self) -> bool:
        """The server answered, with an error status or something malformed."""
        return self.malformed or (self.status is not None and 400 <= self.status < 500)


@dataclass(frozen=True)
class HttpAnswer:
    """A complete HTTP answer of any status, its body within the request's limit."""

    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str]


async def read_bounded(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The whole body, or None as soon as it proves longer than ``limit`` (a hostile server's
    endless answer is never read into memory)."""
    if resp.content_length is not None and resp.content_length > limit:
        return None
    buf = bytearray()
    async for chunk in resp.content.iter_any():
        buf += chunk
        if len(buf) > limit:
            return None
    return bytes(buf)


def error_text(body: bytes) -> str:
    """The message of a JSON error answer (``{"error": {"message"}}``), else the body's start;
    for error messages, so it is short and never raises."""
    try:
        doc = parse_json(body, max_bytes=64 * 1024, max_depth=4)
    except JsonError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str):
        return message[:300]
    return body[:200].decode("utf-8", "replace").strip()


class HttpClient:
    """Bounded GETs and POSTs over one aiohttp session, with a total timeout per request.

    aiohttp is imported when the first client is made, not with this module: a verifier that
    works offline names this class but never makes one.

    Give it a session to share one (it is then not closed here), or use it as an async context
    manager to have it open and close its own. Only http(s) URLs are fetched. Redirects are not
    followed unless ``follow_redirects``: a notary's or witness's API answers directly, and a
    redirect is more likely to lead somewhere unintended than to help (a static tile mirror
    behind a CDN is the exception, and everything read from it is verified anyway).
    """

    def __init__(self, session: aiohttp.ClientSession | None = None, *, timeout: float = 10.0,
                 follow_redirects: bool = False, headers: Mapping[str, str] | None = None
                 ) -> None:
        # (offline verification makes no client, and starts a fifth of a second sooner)
        # deferred: aiohttp, imported once a client is made
        import aiohttp

        self._session = session
        self._owned = False
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.follow_redirects = follow_redirects
        self.headers = {"User-Agent": USER_AGENT, **(headers or {})}
        self.requests = 0
        self.bytes = 0

    async def open(self) -> HttpClient:
        """Open a session of its own unless one was given (then :meth:`close` closes it)."""
        if self._session is None:
            # deferred: loaded by __init__ already (see there)
            import aiohttp

            self._session = aiohttp.ClientSession()
            self._owned = True
        return self

    async def __aenter__(self) -> HttpClient:
        return await self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session if this client opened it."""
        if self._owned and self._session is not None:
            await self._session.close()
            self._session = None
            self._owned = False

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("HttpClient has no session: pass one, or use 'async with'")
        return self._session

    async def request(self, method: str, url: str, *, limit: int, data: bytes | None = None,
                      params: Mapping[str, str] | None = None,
                      headers: Mapping[str, str] | None = None) -> HttpAnswer:
        """One request; any status is returned. Raises :class:`FetchError` when no complete
        answer within ``limit`` bytes arrived."""
        # deferred: loaded by __init__ already (see there)
        import aiohttp

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise FetchError(url, "not an http(s) URL", method=method)
        try:
            async with self.session.request(
                method, url, data=data, params=params, timeout=self.timeout,
                headers={**self.headers, **(headers or {})},
                allow_redirects=self.follow_redirects,
            ) as resp:
                status = resp.status
                body = await read_bounded(resp, limit)
                answer_headers = dict(resp.headers)
                content_type = resp.content_type
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as e:
            reason = "timed out" if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}"
            raise FetchError(url, reason, method=method) from None
        self.requests += 1
        if body is None:
            raise FetchError(url, f"the answer is larger than {limit} bytes", status=status,
                             malformed=True, method=method)
        self.bytes += len(body)
        return HttpAnswer(status, content_type, body, answer_headers)

    async def get(self, url: str, *, limit: int, params: Mapping[str, str] | None = None,
                  headers: Mapping[str, str] | None = None) -> bytes:
        """The body of a 200 answer; any other status is a :class:`FetchError`."""
        answer = await self.request("GET", url, limit=limit, params=params, headers=headers)
        if answer.status != 200:
            raise FetchError(url, f"HTTP {answer.status}: {error_text(answer.body)}",
                             status=answer.status)
        return answer.body

    async def get_json(self, url: str, *, limit: int = MAX_JSON_BYTES,
                       max_depth: int = MAX_JSON_DEPTH,
                       params: Mapping[str, str] | None = None) -> JsonValue:
        """GET and parse JSON within the bounds; an answer that is not is a malformed one."""
        body = await self.get(url, limit=limit, params=params)
        try:
            return parse_json(body, max_bytes=limit, max_depth=max_depth)
        except JsonError as e:
            raise FetchError(url, f"the answer is not usable JSON: {e}", status=200,
                             malformed=True) from None
