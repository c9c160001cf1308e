"""Bulk downloads of tlog-tiles resources over pipelined HTTP/1.1 keep-alive connections.

An audit of a million entries fetches about 7,800 small resources (entry bundles of ~40 kB and
hash tiles of 8 kB). With a general HTTP client, each costs a few hundred microseconds of client
CPU and a round trip, which on a small machine is more than the re-hashing itself. Tiles are
plain GETs of immutable paths, so they can be pipelined (RFC 9112 §9.3.2): a few connections,
each with many requests written at once and the responses read back in order. That cuts the
client's cost per resource by an order of magnitude and keeps the server busy.

This is deliberately narrow, and isolated from everything else: GET only, ``Accept-Encoding:
identity``, the answers parsed by the sans-I/O :class:`~ledger.client.framing.ResponseParser`
(fuzzed on its own), ``Connection: close`` honoured by re-sending what was not answered on a new
connection. Anything outside what the parser accepts (a redirect, a compressed body, a malformed
head) is a :class:`PipelineError`, on which :class:`~ledger.client.tiles.LogSource` falls back
to :class:`~ledger.client.http.HttpClient`; a non-200 status or an oversized body is a
:class:`~ledger.client.http.FetchError` like any other.

(h11 was measured as the framing layer instead: about 130 µs of CPU per 24 kB answer, which
would double the client's cost of an audit. The parser here is a few hundred lines and fuzzed.)
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from urllib.parse import urlsplit

from ledger.client.framing import BodyTooLarge, FramingError, Response, ResponseParser
from ledger.client.http import USER_AGENT, FetchError, error_text
from ledger.core.errors import LedgerError

__all__ = ["PipelineError", "PipelinedFetcher"]

_READ = 256 * 1024


class PipelineError(LedgerError):
    """The server's answer is outside what the pipelined fetcher handles; use another client."""


class _PipelinedConnection:
    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.parser: ResponseParser | None = None
        self.lock = asyncio.Lock()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = self.parser = None


class PipelinedFetcher:
    """GET many paths under one base URL; answers come back in the order asked."""

    def __init__(self, base_url: str, *, connections: int = 2, depth: int = 32,
                 timeout: float = 30.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PipelineError(f"cannot pipeline to {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.prefix = parts.path.rstrip("/")
        netloc = parts.netloc.rsplit("@", 1)[-1]
        self.host_header = netloc.encode("idna" if not netloc.isascii() else "ascii")
        self.depth = depth
        self.timeout = timeout
        self._conns = [_PipelinedConnection() for _ in range(max(1, connections))]

    async def close(self) -> None:
        for c in self._conns:
            c.close()

    async def fetch(self, paths: Sequence[str], limit: int) -> list[bytes]:
        """The bodies of ``paths`` (relative to the base URL), each at most ``limit`` bytes."""
        n = len(self._conns)
        slices = [list(range(i, len(paths), n)) for i in range(n)]
        out: list[bytes | None] = [None] * len(paths)

        async def run(conn: _PipelinedConnection, indexes: list[int]) -> None:
            async with conn.lock:
                for i in range(0, len(indexes), self.depth):
                    batch = indexes[i : i + self.depth]
                    bodies = await self._exchange(conn, [paths[j] for j in batch], limit)
                    for j, body in zip(batch, bodies, strict=True):
                        out[j] = body

        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.gather(*(run(c, s) for c, s in zip(self._conns, slices,
                                                                  strict=True) if s))
        except TimeoutError:
            await self.close()
            raise FetchError(self.base_url, f"timed out fetching {len(paths)} tiles") from None
        except (PipelineError, FetchError):
            await self.close()
            raise
        except FramingError as e:
            await self.close()
            raise PipelineError(str(e)) from None
        except (OSError, ValueError) as e:
            await self.close()
            raise PipelineError(f"{type(e).__name__}: {e}") from e
        assert all(b is not None for b in out)
        return [b for b in out if b is not None]

    async def _open(self, conn: _PipelinedConnection, limit: int) -> None:
        ctx = ssl.create_default_context() if self.tls else None
        try:
            conn.reader, conn.writer = await asyncio.open_connection(self.host, self.port,
                                                                     ssl=ctx)
        except OSError as e:
            raise FetchError(self.base_url, f"cannot connect to {self.host}:{self.port}: {e}"
                             ) from e
        conn.parser = ResponseParser(max_body=limit)

    async def _exchange(self, conn: _PipelinedConnection, paths: list[str], limit: int
                        ) -> list[bytes]:
        """Send every request at once, read the answers in order; re-send after a close."""
        bodies: list[bytes] = []
        silent = 0  # connections in a row closed before answering anything
        while len(bodies) < len(paths):
            if conn.writer is None:
                await self._open(conn, limit)
            assert conn.reader is not None and conn.writer is not None
            assert conn.parser is not None
            reader, parser = conn.reader, conn.parser
            parser.max_body = limit
            pending = paths[len(bodies):]
            conn.writer.write(b"".join(self._request(p) for p in pending))
            await conn.writer.drain()
            answered, open_ = 0, True
            try:
                while answered < len(pending) and open_:
                    resp = parser.next()
                    if resp is None:
                        data = await reader.read(_READ)
                        if data:
                            parser.feed(data)
                            continue
                        # The server closed the connection (an idle keep-alive that timed out,
                        # or a limit on requests per connection): what it did not answer goes
                        # on a new one.
                        open_ = False
                        resp = parser.eof()
                        if resp is None:
                            break
                    bodies.append(self._body(resp, pending[answered]))
                    answered += 1
                    open_ = open_ and resp.keep_alive
            except BodyTooLarge as e:
                raise FetchError(f"{self.base_url}/{pending[answered]}", str(e),
                                 malformed=True) from None
            if not open_:
                conn.close()
            silent = 0 if answered else silent + 1
            if silent > 1:
                raise PipelineError("the server closes connections without answering")
        return bodies

    def _request(self, path: str) -> bytes:
        target = f"{self.prefix}/{path.lstrip('/')}".encode("ascii")
        return (b"GET " + target + b" HTTP/1.1\r\nHost: " + self.host_header +
                b"\r\nAccept-Encoding: identity\r\nUser-Agent: " + USER_AGENT.encode() +
                b"\r\n\r\n")

    def _body(self, resp: Response, path: str) -> bytes:
        if resp.status == 200:
            return resp.body
        if 300 <= resp.status < 400:
            raise PipelineError(f"redirect ({resp.status}) for {path}")
        raise FetchError(f"{self.base_url}/{path}", f"HTTP {resp.status}: "
                         f"{error_text(resp.body)}", status=resp.status)
