"""Reading a log over HTTP: its checkpoint, consistency proofs and tlog-tiles resources.

Everything the log says is untrusted input here: the monitor verifies it (signatures, proofs,
recomputed tiles) before believing any of it. A failure to obtain an answer (refused connection,
timeout, a 5xx or 404, an answer too large or malformed) is a
:class:`~ledger.client.http.FetchError`, which is not an alarm: the log may be down, and the
monitor tries again later. Only answers that contradict what was verified are alarms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ledger.client.http import FetchError, HttpClient
from ledger.client.pipeline import PipelinedFetcher, PipelineError
from ledger.core.compact import decode_bundle
from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE, leaf_hash
from ledger.core.note import NoteError, strict_b64decode
from ledger.core.proofs import (
    Coord,
    ProofError,
    assemble,
    consistency_plan,
    inclusion_plan,
    plan_coords,
    verify_inclusion,
)
from ledger.core.tilehash import ExpandedTile, tile_of
from ledger.core.tiles import ENTRIES_LEVEL, MAX_ENTRY_SIZE, TILE_WIDTH, Tile, tile_count

__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "MAX_PROOF_JSON_BYTES",
    "MAX_TILE_BYTES",
    "EntryUnproven",
    "LogSource",
    "proven_entry",
    "tile_at",
]

#: The largest tile or bundle a log may serve: a full bundle of the largest entries, each after
#: its two-byte length.
MAX_TILE_BYTES = TILE_WIDTH * (2 + MAX_ENTRY_SIZE)
MAX_CHECKPOINT_BYTES = 1 << 20
#: A consistency proof is at most 2·log2(size) hashes; this is ample for any tree.
MAX_PROOF_JSON_BYTES = 1 << 16
_CONCURRENCY = 16  # requests in flight when not pipelining


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
    """One log's base URL (where ``/checkpoint`` and ``/tile/…`` live), read through ``http``.

    Requests ask for identity encoding: tiles are mostly hashes (incompressible), and a monitor
    on the same network as the log gains nothing from making the log compress bundles. Many
    tiles at once go through the pipelined fetcher while the server allows it.
    """

    def __init__(self, url: str, http: HttpClient, *, timeout: float = 30.0,
                 pipeline: bool = True) -> None:
        self.url = url.rstrip("/")
        self.http = http
        self._sem = asyncio.Semaphore(_CONCURRENCY)
        self._pipeline: PipelinedFetcher | None = None
        self._pipelined_requests = 0
        self._pipelined_bytes = 0
        #: Set once the JSON proof API answered 404 (a tlog-mirror's monitoring prefix, a
        #: static tile tree): proofs come from the tiles without asking again.
        self.no_proof_api = False
        if pipeline:
            try:
                self._pipeline = PipelinedFetcher(self.url, timeout=timeout)
            except PipelineError:
                self._pipeline = None

    @property
    def requests(self) -> int:
        return self.http.requests + self._pipelined_requests

    @property
    def received_bytes(self) -> int:
        return self.http.bytes + self._pipelined_bytes

    async def close(self) -> None:
        if self._pipeline is not None:
            await self._pipeline.close()

    async def get(self, path: str, *, limit: int, params: dict[str, str] | None = None
                  ) -> bytes:
        return await self.http.get(f"{self.url}/{path}", limit=limit, params=params,
                                   headers={"Accept-Encoding": "identity"})

    async def checkpoint(self) -> bytes:
        return await self.get("checkpoint", limit=MAX_CHECKPOINT_BYTES)

    async def tile(self, tile: Tile) -> bytes:
        return await self.get(tile.path(), limit=_limit(tile))

    async def tiles(self, tiles: Sequence[Tile]) -> list[bytes]:
        """Many tiles at once, in order: pipelined when the server allows it (see
        :mod:`ledger.client.pipeline`), else with concurrent requests of the HTTP client."""
        if not tiles:
            return []
        fetcher = self._pipeline
        if fetcher is not None:
            try:
                bodies = await fetcher.fetch([t.path() for t in tiles],
                                             max(_limit(t) for t in tiles))
            except PipelineError as e:
                # deferred: structlog (and rich) only to log this, not for every verifier
                import structlog

                structlog.get_logger("ledger.monitor").info("pipelining_off", url=self.url,
                                                            reason=str(e))
                self._pipeline = None
                await fetcher.close()
            else:
                self._pipelined_requests += len(bodies)
                self._pipelined_bytes += sum(len(b) for b in bodies)
                return bodies

        async def one(tile: Tile) -> bytes:
            async with self._sem:
                return await self.tile(tile)

        return list(await asyncio.gather(*(one(t) for t in tiles)))

    async def consistency_proof(self, old: int, new: int) -> list[bytes]:
        """PROOF(old, new) from the log's JSON API, or computed from its tiles if it has none.

        The proof is not trusted either way: the caller verifies it against the two roots.
        """
        if not self.no_proof_api:
            try:
                return await self.consistency_from_api(old, new)
            except FetchError as e:
                # No such API (a static tlog-tiles mirror, say), or nonsense from it.
                self.no_proof_api = e.status == 404
        return await self.consistency_from_tiles(old, new)

    async def consistency_from_api(self, old: int, new: int) -> list[bytes]:
        """PROOF(old, new) from ``/v1/ledger/proofs/consistency`` (``{old, new, proof}``); an
        answer of another shape is a malformed :class:`~ledger.client.http.FetchError`."""
        url = f"{self.url}/v1/ledger/proofs/consistency"
        doc = await self.http.get_json(url, limit=MAX_PROOF_JSON_BYTES,
                                       params={"old": str(old), "new": str(new)})
        hashes = doc.get("proof") if isinstance(doc, dict) else None
        texts = [h for h in hashes if isinstance(h, str)] if isinstance(hashes, list) else []
        if (not isinstance(doc, dict) or doc.get("old") != old or doc.get("new") != new
                or not isinstance(hashes, list) or len(texts) != len(hashes)):
            raise FetchError(f"{url}?old={old}&new={new}", "malformed answer", status=200,
                             malformed=True)
        try:
            return [strict_b64decode(h, "proof hash") for h in texts]
        except NoteError as e:
            raise FetchError(f"{url}?old={old}&new={new}", str(e), status=200,
                             malformed=True) from None

    async def hashes(self, coords: Sequence[Coord], tree_size: int) -> dict[Coord, bytes]:
        """Stored subtree hashes read out of the tiles a tree of ``tree_size`` publishes."""
        tiles: dict[tuple[int, int], ExpandedTile] = {}
        out: dict[Coord, bytes] = {}
        for coord in coords:
            tl, tn, _ = tile_of(coord)
            if (tl, tn) not in tiles:
                tile = tile_at(tl, tn, tree_size)
                data = await self.tile(tile)
                if not data or len(data) % HASH_SIZE:
                    raise FetchError(f"{self.url}/{tile.path()}", "the tile is not a whole "
                                     "number of hashes", status=200, malformed=True)
                tiles[(tl, tn)] = ExpandedTile(data)
            try:
                out[coord] = tiles[(tl, tn)].get(coord)
            except KeyError as e:
                raise FetchError(f"{self.url}/tile/{tl}/{tn}", f"the tile is too short: {e}",
                                 status=200, malformed=True) from None
        return out

    async def consistency_from_tiles(self, old: int, new: int) -> list[bytes]:
        plan = consistency_plan(old, new)
        return assemble(plan, await self.hashes(plan_coords(plan), new))


class EntryUnproven(LedgerError, ValueError):
    """The tiles do not hold the entry asked for, or not the one the root commits to."""


async def proven_entry(source: LogSource, index: int, size: int, root: bytes) -> bytes:
    """Entry ``index`` of the tree (``size``, ``root``) read from the tiles and proven
    included under that root (a checkpoint the caller verified): what the notary's chain of
    logs is followed with (a frozen log's last entry names the next log)."""
    bundle_tile = tile_at(ENTRIES_LEVEL, index // TILE_WIDTH, size)
    data = await source.tile(bundle_tile)
    try:
        entry = decode_bundle(data)[index % TILE_WIDTH]
    except (ValueError, IndexError) as e:
        raise EntryUnproven(f"{bundle_tile.path()} does not hold entry {index}: {e}") from None
    plan = inclusion_plan(index, size)
    proof = assemble(plan, await source.hashes(plan_coords(plan), size))
    try:
        verify_inclusion(index, size, leaf_hash(entry), proof, root)
    except ProofError as e:
        raise EntryUnproven(f"entry {index} served is not the one the checkpoint commits to: "
                            f"{e}") from None
    return entry
