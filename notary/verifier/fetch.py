"""The few HTTP GETs of the online checks, bounded in size, with errors that say whether the
log refused or could not be reached.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp

from notary.verifier.inputs import VerifierInputError

MAX_RESPONSE_BYTES = 4 << 20
"""Largest HTTP answer read; receipts, checkpoints and proofs are a few kilobytes."""


class FetchError(Exception):
    """A GET failed. ``status`` is the HTTP status when the server answered at all.

    The distinction matters to level 5: a log that answers 4xx (or garbage) to a question it
    must be able to answer is evidence against it, while a network failure or a 5xx is not
    evidence of anything and only means the check could not be made.
    """

    def __init__(self, url: str, message: str, status: int | None = None,
                 malformed: bool = False) -> None:
        super().__init__(f"GET {url}: {message}")
        self.url = url
        self.status = status
        self.malformed = malformed

    @property
    def refused(self) -> bool:
        return self.malformed or (self.status is not None and 400 <= self.status < 500)


class Fetcher(Protocol):
    """What the online checks need: GET a URL's bytes. Offline code is handed ``None``."""

    async def get_bytes(self, url: str) -> bytes: ...


async def get_json(fetcher: Fetcher, url: str) -> Any:
    """GET and parse JSON; a body that is not JSON is a malformed answer."""
    data = await fetcher.get_bytes(url)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise FetchError(url, f"the answer is not JSON: {e}", malformed=True) from None


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise VerifierInputError(f"{url!r} is not an http(s) URL")


class HttpFetcher:
    """GETs over one aiohttp session with a total timeout per request.

    Use as an async context manager. Only ``http``/``https`` URLs are fetched, answers are
    capped at :data:`MAX_RESPONSE_BYTES`, and redirects are not followed: a log's API answers
    directly, and a redirect is more likely to lead somewhere unintended than to help.
    """

    def __init__(self, timeout: float = 10.0) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpFetcher:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get_bytes(self, url: str) -> bytes:
        _check_url(url)
        if self._session is None:
            raise RuntimeError("HttpFetcher is used outside 'async with'")
        try:
            async with self._session.get(url, allow_redirects=False) as resp:
                body = await resp.content.read(MAX_RESPONSE_BYTES + 1)
                if len(body) > MAX_RESPONSE_BYTES:
                    raise FetchError(url, "the answer is too large", resp.status, malformed=True)
                if resp.status != 200:
                    raise FetchError(url, f"HTTP {resp.status}: {_error_text(body)}", resp.status)
                return body
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise FetchError(url, f"{type(e).__name__}: {e}") from None


def _error_text(body: bytes) -> str:
    """The message of a JSON error answer, else the start of the body."""
    try:
        doc = json.loads(body)
        message = doc["error"]["message"]
        if isinstance(message, str):
            return message
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        pass
    return body[:200].decode("utf-8", "replace").strip()
