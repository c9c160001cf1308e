"""Bulk downloads of tlog-tiles resources over pipelined HTTP/1.1 keep-alive connections.

An audit of a million entries fetches about 7,800 small resources (entry bundles of ~40 kB and
hash tiles of 8 kB). With a general HTTP client, each costs a few hundred microseconds of client
CPU and a round trip, which on a small machine is more than the re-hashing itself. Tiles are
plain GETs of immutable paths, so they can be pipelined (RFC 9112 §9.3.2): a few connections,
each with many requests written at once and the responses read back in order. That cuts the
client's cost per resource by an order of magnitude and keeps the server busy.

This is deliberately narrow: GET only, ``Accept-Encoding: identity``, responses framed by
``Content-Length`` or chunked encoding, ``Connection: close`` honoured by re-sending what was not
answered on a new connection. Anything else (a redirect, a compressed body, a malformed head) is
a :class:`PipelineError`, on which the caller falls back to its general HTTP client; a non-200
status is a :class:`~ledger.client.tiles.FetchError` like any other.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from urllib.parse import urlsplit

from ledger.client.tiles import FetchError

__all__ = ["PipelineError", "PipelinedFetcher"]

_MAX_HEAD = 64 * 1024


class PipelineError(Exception):
    """The server's answer is outside what the pipelined fetcher handles; use another client."""


class _Connection:
    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lock = asyncio.Lock()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class PipelinedFetcher:
    """GET many paths under one base URL; answers come back in the order asked."""

    def __init__(self, base_url: str, *, connections: int = 2, depth: int = 32,
                 timeout: float = 30.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PipelineError(f"cannot pipeline to {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.prefix = parts.path.rstrip("/")
        netloc = parts.netloc.rsplit("@", 1)[-1]
        self.host_header = netloc.encode("idna" if not netloc.isascii() else "ascii")
        self.depth = depth
        self.timeout = timeout
        self._conns = [_Connection() for _ in range(max(1, connections))]

    async def close(self) -> None:
        for c in self._conns:
            c.close()

    async def fetch(self, paths: Sequence[str], limit: int) -> list[bytes]:
        """The bodies of ``paths`` (relative to the base URL), each at most ``limit`` bytes."""
        n = len(self._conns)
        slices = [list(range(i, len(paths), n)) for i in range(n)]
        out: list[bytes | None] = [None] * len(paths)

        async def run(conn: _Connection, indexes: list[int]) -> None:
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
            raise FetchError(f"timed out fetching {len(paths)} tiles") from None
        except (PipelineError, FetchError):
            await self.close()
            raise
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError) as e:
            await self.close()
            raise PipelineError(f"{type(e).__name__}: {e}") from e
        assert all(b is not None for b in out)
        return [b for b in out if b is not None]

    async def _open(self, conn: _Connection) -> None:
        ctx = ssl.create_default_context() if self.tls else None
        try:
            conn.reader, conn.writer = await asyncio.open_connection(
                self.host, self.port, ssl=ctx, limit=_MAX_HEAD)
        except OSError as e:
            raise FetchError(f"cannot connect to {self.host}:{self.port}: {e}") from e

    async def _exchange(self, conn: _Connection, paths: list[str], limit: int) -> list[bytes]:
        """Send every request at once, read the answers in order; re-send after a close."""
        bodies: list[bytes] = []
        silent = 0  # connections in a row closed before answering anything
        while len(bodies) < len(paths):
            if conn.writer is None:
                await self._open(conn)
            assert conn.reader is not None and conn.writer is not None
            pending = paths[len(bodies):]
            conn.writer.write(b"".join(self._request(p) for p in pending))
            await conn.writer.drain()
            answered = 0
            try:
                for path in pending:
                    body, keep = await self._response(conn.reader, path, limit)
                    bodies.append(body)
                    answered += 1
                    if not keep:
                        conn.close()
                        break
            except asyncio.IncompleteReadError:
                # The server closed the connection (an idle keep-alive that timed out, or a
                # limit on requests per connection): what it did not answer goes on a new one.
                conn.close()
            silent = 0 if answered else silent + 1
            if silent > 1:
                raise PipelineError("the server closes connections without answering")
        return bodies

    def _request(self, path: str) -> bytes:
        target = f"{self.prefix}/{path.lstrip('/')}".encode("ascii")
        return (b"GET " + target + b" HTTP/1.1\r\nHost: " + self.host_header +
                b"\r\nAccept-Encoding: identity\r\nUser-Agent: notary-monitor\r\n\r\n")

    async def _response(self, reader: asyncio.StreamReader, path: str, limit: int
                        ) -> tuple[bytes, bool]:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        status_line = lines[0].split(b" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
            raise PipelineError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(status_line[1])
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise PipelineError(f"malformed header line {line[:80]!r}")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = headers[key] + b", " + value if key in headers else value
        encoding = headers.get(b"content-encoding", b"identity").lower()
        if encoding not in (b"identity", b""):
            raise PipelineError(f"compressed answer ({encoding.decode(errors='replace')})")
        keep = b"close" not in headers.get(b"connection", b"").lower() and \
            status_line[0] != b"HTTP/1.0"
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            body = await self._chunked(reader, limit)
        elif b"content-length" in headers:
            length = int(headers[b"content-length"])
            if length > limit:
                raise FetchError(f"GET {path}: answer larger than {limit} bytes")
            body = await reader.readexactly(length)
        else:  # delimited by the end of the connection
            buf = bytearray()
            while len(buf) <= limit:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                buf += chunk
            body, keep = bytes(buf), False
        if len(body) > limit:
            raise FetchError(f"GET {path}: answer larger than {limit} bytes")
        if status == 200:
            return body, keep
        if 300 <= status < 400:
            raise PipelineError(f"redirect ({status}) for {path}")
        raise FetchError(f"GET {path}: HTTP {status}: "
                         f"{body[:200].decode('utf-8', 'replace').strip()}")

    @staticmethod
    async def _chunked(reader: asyncio.StreamReader, limit: int) -> bytes:
        body = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return bytes(body)
            if len(body) + size > limit:
                raise PipelineError("chunked answer larger than the limit")
            body += await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise PipelineError("malformed chunked encoding")
