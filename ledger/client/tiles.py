"""Reading a log over HTTP: its checkpoint, consistency proofs and tlog-tiles resources.

Everything the log says is untrusted input here: the monitor verifies it (signatures, proofs,
recomputed tiles) before believing any of it. A failure to obtain an answer (refused connection,
timeout, a 5xx or 404) is a :class:`FetchError`, which is not an alarm: the log may be down, and
the monitor tries again later. Only answers that contradict what was verified are alarms.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Sequence

import aiohttp
import structlog

from ledger.core.hashing import HASH_SIZE
from ledger.core.proofs import Coord, assemble, consistency_plan, plan_coords
from ledger.core.tilehash import ExpandedTile, tile_of
from ledger.core.tiles import ENTRIES_LEVEL, TILE_WIDTH, Tile, tile_count

__all__ = ["FetchError", "LogSource", "read_bounded", "tile_at"]

#: The largest tile or bundle a log may serve: 256 entries of at most 65,535 bytes each.
MAX_TILE_BYTES = TILE_WIDTH * (2 + 0xFFFF)
MAX_CHECKPOINT_BYTES = 1 << 20
_CONCURRENCY = 16  # requests in flight when not pipelining

_log = structlog.get_logger("ledger.monitor")


class FetchError(Exception):
    """The log did not give a usable answer (network, timeout, status, malformed JSON)."""


async def read_bounded(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The whole body, or None as soon as it proves longer than ``limit`` (a hostile log's
    endless answer is never read into memory)."""
    if resp.content_length is not None and resp.content_length > limit:
        return None
    buf = bytearray()
    async for chunk in resp.content.iter_any():
        buf += chunk
        if len(buf) > limit:
            return None
    return bytes(buf)


def _limit(tile: Tile) -> int:
    return MAX_TILE_BYTES if tile.level == ENTRIES_LEVEL else TILE_WIDTH * HASH_SIZE


def tile_at(level: int, index: int, tree_size: int) -> Tile:
    """The tile (level, index) with the width a tree of ``tree_size`` publishes for it."""
    count = tile_count(tree_size, level)
    width = min(TILE_WIDTH, count - index * TILE_WIDTH)
    if width <= 0:
        raise ValueError(f"tile {level}/{index} is not in a tree of size {tree_size}")
    return Tile(level, index, width)


class LogSource:
    """One log's base URL (where ``/checkpoint`` and ``/tile/…`` live) and an HTTP session.

    Requests ask for identity encoding: tiles are mostly hashes (incompressible), and a monitor
    on the same network as the log gains nothing from making the log compress bundles.
    """

    def __init__(self, url: str, session: aiohttp.ClientSession, *, timeout: float = 30.0,
                 pipeline: bool = True) -> None:
        from ledger.client.pipeline import PipelinedFetcher, PipelineError

        self.url = url.rstrip("/")
        self.session = session
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.requests = 0
        self.bytes = 0
        self._sem = asyncio.Semaphore(_CONCURRENCY)
        self._pipeline: PipelinedFetcher | None = None
        if pipeline:
            try:
                self._pipeline = PipelinedFetcher(self.url, timeout=timeout)
            except PipelineError:
                self._pipeline = None

    async def close(self) -> None:
        if self._pipeline is not None:
            await self._pipeline.close()

    async def get(self, path: str, *, limit: int, params: dict[str, str] | None = None
                  ) -> bytes:
        url = f"{self.url}/{path}"
        try:
            async with self.session.get(url, params=params, timeout=self.timeout,
                                        headers={"Accept-Encoding": "identity"}) as resp:
                status = resp.status
                body = await read_bounded(resp, limit)
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise FetchError(f"GET {url}: {type(e).__name__}: {e}") from e
        self.requests += 1
        if body is None:
            raise FetchError(f"GET {url}: answer larger than {limit} bytes")
        self.bytes += len(body)
        if status != 200:
            raise FetchError(f"GET {url}: HTTP {status}: "
                             f"{body[:200].decode('utf-8', 'replace').strip()}")
        return body

    async def checkpoint(self) -> bytes:
        return await self.get("checkpoint", limit=MAX_CHECKPOINT_BYTES)

    async def tile(self, tile: Tile) -> bytes:
        return await self.get(tile.path(), limit=_limit(tile))

    async def tiles(self, tiles: Sequence[Tile]) -> list[bytes]:
        """Many tiles at once, in order: pipelined when the server allows it (see
        :mod:`ledger.client.pipeline`), else with concurrent requests of the HTTP client."""
        from ledger.client.pipeline import PipelineError

        if not tiles:
            return []
        fetcher = self._pipeline
        if fetcher is not None:
            try:
                bodies = await fetcher.fetch([t.path() for t in tiles],
                                             max(_limit(t) for t in tiles))
            except PipelineError as e:
                _log.info("pipelining_off", url=self.url, reason=str(e))
                self._pipeline = None
                await fetcher.close()
            else:
                self.requests += len(bodies)
                self.bytes += sum(len(b) for b in bodies)
                return bodies

        async def one(tile: Tile) -> bytes:
            async with self._sem:
                return await self.tile(tile)

        return list(await asyncio.gather(*(one(t) for t in tiles)))

    async def consistency_proof(self, old: int, new: int) -> list[bytes]:
        """PROOF(old, new) from the log's JSON API, or computed from its tiles if it has none.

        The proof is not trusted either way: the caller verifies it against the two roots.
        """
        try:
            body = await self.get("v1/ledger/proofs/consistency", limit=1 << 16,
                                  params={"old": str(old), "new": str(new)})
            obj = json.loads(body)
            return [base64.b64decode(h, validate=True) for h in obj["proof"]]
        except (FetchError, ValueError, KeyError, TypeError, binascii.Error):
            # No such API (a static tlog-tiles mirror, say), or nonsense from it.
            return await self.consistency_from_tiles(old, new)

    async def hashes(self, coords: Sequence[Coord], tree_size: int) -> dict[Coord, bytes]:
        """Stored subtree hashes read out of the tiles a tree of ``tree_size`` publishes."""
        tiles: dict[tuple[int, int], ExpandedTile] = {}
        out: dict[Coord, bytes] = {}
        for coord in coords:
            tl, tn, _ = tile_of(coord)
            if (tl, tn) not in tiles:
                data = await self.tile(tile_at(tl, tn, tree_size))
                if not data or len(data) % HASH_SIZE:
                    raise FetchError(f"tile {tl}/{tn} is not a whole number of hashes")
                tiles[(tl, tn)] = ExpandedTile(data)
            try:
                out[coord] = tiles[(tl, tn)].get(coord)
            except KeyError as e:
                raise FetchError(f"tile {tl}/{tn} is too short: {e}") from None
        return out

    async def consistency_from_tiles(self, old: int, new: int) -> list[bytes]:
        plan = consistency_plan(old, new)
        return assemble(plan, await self.hashes(plan_coords(plan), new))
