"""Incremental audit of a served log: download new entries, recompute every tile, match the root.

Starting from the compact state of the last audited tree (ledger.core.compact.TreeState), the audit
downloads the entry bundles and hash tiles that a verified checkpoint adds, re-integrates the
entries with the log writer's own pure code (:func:`ledger.core.compact.integrate`), and compares:

- every tile and bundle that becomes full in the range, byte for byte, with the one served;
- every partial tile and bundle at the right edge of the checkpoint, likewise;
- the recomputed root with the checkpoint's root.

So a tile or entry changed after the fact, an entry bundle that disagrees with the hash tiles,
or a checkpoint whose root the entries do not give, is caught and reported with the first tile
that differs. Downloads run ahead of the hashing (a bounded pipeline of chunks), and hashing runs
in short slices on the event loop, so the network and the CPU overlap.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ledger.client.tiles import LogSource, tile_at
from ledger.core.checkpoint import Checkpoint
from ledger.core.compact import TreeState, decode_bundle, integrate
from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE
from ledger.core.tiles import ENTRIES_LEVEL, TILE_WIDTH, Tile, tile_count

__all__ = ["AuditAlarm", "AuditResult", "audit_range"]

EntriesHook = Callable[[int, Sequence[bytes]], None]
"""Told (index of the first entry, entries) for each downloaded run of new entries."""
ProgressHook = Callable[[int, int], None]
"""Told (entries audited so far, entries to audit) as the audit advances."""
SaveHook = Callable[[TreeState], Awaitable[None]]
"""Given the intermediate state now and then, so a restart can resume a long audit."""

_CHUNK_BUNDLES = 32  # entry bundles fetched together (8,192 entries), with their hash tiles
_GROUP_BUNDLES = 4  # entry bundles hashed between two turns of the event loop
_PREFETCH_CHUNKS = 4
_SAVE_EVERY = 10.0  # seconds between intermediate saves


class AuditAlarm(LedgerError):
    """What the log serves contradicts its verified checkpoint.

    ``kind`` is ``tile_mismatch``, ``bad_bundle`` or ``root_mismatch``; ``evidence`` holds the
    tile path and both versions (base64) when a tile is at fault.
    """

    def __init__(self, kind: str, message: str, evidence: dict[str, object] | None = None
                 ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.evidence = evidence or {}


@dataclass
class AuditResult:
    state: TreeState
    entries: int  # entries audited in this run
    tiles: int  # tiles and bundles compared
    seconds: float
    requests: int = 0
    bytes: int = 0
    stats: dict[str, float] = field(default_factory=dict)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _mismatch(tile: Tile, want: bytes, served: bytes) -> AuditAlarm:
    size = 1 if tile.is_entries else HASH_SIZE
    if tile.is_entries:
        try:
            a, b = decode_bundle(want), decode_bundle(served)
        except ValueError:
            a, b = [], []
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                     min(len(a), len(b)))
        where = f"entry {first}"
    else:
        first = next((i for i in range(0, min(len(want), len(served)), size)
                      if want[i : i + size] != served[i : i + size]),
                     min(len(want), len(served)))
        where = f"hash {first // HASH_SIZE}"
    return AuditAlarm(
        "tile_mismatch",
        f"{tile.path()} served by the log differs from the one recomputed from the entries "
        f"(first difference at {where})",
        {"tile": {"path": tile.path(), "recomputed": _b64(want), "served": _b64(served)}},
    )


def _entries(tile: Tile, data: bytes) -> list[bytes]:
    try:
        entries = decode_bundle(data)
    except ValueError as e:
        raise AuditAlarm("bad_bundle", f"{tile.path()} is malformed: {e}",
                         {"tile": {"path": tile.path(), "served": _b64(data)}}) from None
    if len(entries) != tile.width:
        raise AuditAlarm(
            "bad_bundle", f"{tile.path()} holds {len(entries)} entries, not {tile.width}",
            {"tile": {"path": tile.path(), "served": _b64(data)}})
    return entries


@dataclass
class _Chunk:
    first: int  # first bundle index
    bundles: list[tuple[Tile, bytes]]
    level0: dict[int, tuple[Tile, bytes]]


async def audit_range(
    source: LogSource,
    start: TreeState,
    target: Checkpoint,
    *,
    on_entries: EntriesHook | None = None,
    progress: ProgressHook | None = None,
    save: SaveHook | None = None,
    chunk_bundles: int = _CHUNK_BUNDLES,
) -> AuditResult:
    """Audit the entries [start.size, target.size) and return the state at ``target.size``.

    ``target`` must already be verified (signature and consistency): the audit checks that the
    served data is the tree it commits to. Raises :class:`AuditAlarm` at the first difference,
    :class:`~ledger.client.http.FetchError` when the log does not answer.
    """
    began = time.perf_counter()
    requests0, bytes0 = source.requests, source.received_bytes
    a, b = start.size, target.size
    if b < a:
        raise ValueError(f"cannot audit backwards from {a} to {b}")
    if b == a:
        if start.root() != target.root_hash:
            raise _root_alarm(start, target)
        return AuditResult(start, 0, 0, 0.0)
    run = _AuditRun(source, start, b, on_entries, progress, save)
    await run.range(chunk_bundles)
    await run.right_edge()
    if run.state.root() != target.root_hash:
        raise _root_alarm(run.state, target)
    return AuditResult(run.state, b - a, run.compared, time.perf_counter() - began,
                       source.requests - requests0, source.received_bytes - bytes0,
                       {"hashing_seconds": run.hashing})


@dataclass
class _AuditRun:
    """One audit from ``state`` (as it starts) to ``size`` leaves: where it got, what it
    compared, and the partial tiles left to compare at the right edge."""

    source: LogSource
    state: TreeState
    size: int
    on_entries: EntriesHook | None
    progress: ProgressHook | None
    save: SaveHook | None
    start: int = field(init=False)  # the first entry audited
    compared: int = 0
    hashing: float = 0.0  # seconds spent hashing
    pending: dict[tuple[int, int], bytes] = field(default_factory=dict)  # as of the latest chunk
    last_save: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.start = self.state.size

    async def fetch(self, tiles: list[Tile]) -> list[tuple[Tile, bytes]]:
        return list(zip(tiles, await self.source.tiles(tiles), strict=True))

    async def range(self, chunk_bundles: int) -> None:
        """Every chunk of bundles, hashed and compared while the next ones download."""
        queue: asyncio.Queue[_Chunk | BaseException | None] = asyncio.Queue(_PREFETCH_CHUNKS)
        task = asyncio.create_task(self._download(queue, chunk_bundles))
        try:
            while (chunk := await _next(queue)) is not None:
                await self._audit_chunk(chunk)
                await self._report()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _download(self, queue: asyncio.Queue[_Chunk | BaseException | None],
                        chunk_bundles: int) -> None:
        """Each chunk's entry bundles with their level-0 tiles, then None; or the error."""
        first_bundle, last_bundle = self.start // TILE_WIDTH, (self.size - 1) // TILE_WIDTH
        try:
            for n0 in range(first_bundle, last_bundle + 1, chunk_bundles):
                ns = range(n0, min(n0 + chunk_bundles, last_bundle + 1))
                got = await self.fetch([tile_at(ENTRIES_LEVEL, n, self.size) for n in ns] +
                                       [tile_at(0, n, self.size) for n in ns])
                k = len(ns)
                await queue.put(_Chunk(n0, list(got[:k]), {t.index: (t, d) for t, d in got[k:]}))
            await queue.put(None)
        except BaseException as e:  # handed to the consumer, which raises it
            await queue.put(e)

    async def _audit_chunk(self, chunk: _Chunk) -> None:
        served = {(ENTRIES_LEVEL, t.index): (t, d) for t, d in chunk.bundles}
        served.update({(0, n): v for n, v in chunk.level0.items()})
        for g in range(0, len(chunk.bundles), _GROUP_BUNDLES):
            await self._audit_group(chunk.bundles[g : g + _GROUP_BUNDLES], served)
            # Hashing runs on the event loop in short slices (~1 ms), so the downloads
            # keep flowing in between without a thread fighting the loop for the GIL.
            await asyncio.sleep(0)

    async def _audit_group(self, bundles: list[tuple[Tile, bytes]],
                           served: dict[tuple[int, int], tuple[Tile, bytes]]) -> None:
        """Integrate a few bundles' new entries and compare the tiles that became full."""
        entries = self._new_entries(bundles)
        first_index = self.state.size
        t0 = time.perf_counter()
        done = integrate(self.state, entries)
        self.hashing += time.perf_counter() - t0
        self.state = done.state
        if self.on_entries is not None:
            self.on_entries(first_index, entries)
        upper = [key for key in done.tiles if key[0] > 0 and _is_full(key, self.state.size)]
        for tile, data in await self.fetch([Tile(level, index) for level, index in upper]):
            served[(tile.level, tile.index)] = (tile, data)
        for key, want in done.tiles.items():
            if _is_full(key, self.state.size):
                self.pending.pop(key, None)
                tile, data = served[key]
                if data != want:
                    raise _mismatch(tile, want, data)
                self.compared += 1
            else:
                self.pending[key] = want

    def _new_entries(self, bundles: list[tuple[Tile, bytes]]) -> list[bytes]:
        """The bundles' entries, less those of the first bundle before the audit's start."""
        entries: list[bytes] = []
        for tile, data in bundles:
            got = _entries(tile, data)
            skip = self.start - tile.index * TILE_WIDTH \
                if tile.index == self.start // TILE_WIDTH else 0
            entries.extend(got[skip:] if skip > 0 else got)
        return entries

    async def _report(self) -> None:
        """Tell the progress, and save the state now and then (never the final one)."""
        if self.progress is not None:
            self.progress(self.state.size - self.start, self.size - self.start)
        if self.save is not None and time.monotonic() - self.last_save > _SAVE_EVERY \
                and self.state.size < self.size:
            await self.save(self.state)
            self.last_save = time.monotonic()

    async def right_edge(self) -> None:
        """Compare every partial tile of the target tree that this range changed."""
        edge = list(self.pending.items())
        fetched = await self.fetch([tile_at(key[0], key[1], self.size) for key, _ in edge])
        for (_, want), (tile, data) in zip(edge, fetched, strict=True):
            if data != want:
                raise _mismatch(tile, want, data)
            self.compared += 1


async def _next(queue: asyncio.Queue[_Chunk | BaseException | None]) -> _Chunk | None:
    """The next chunk downloaded, None after the last; a download's error is raised here."""
    item = await queue.get()
    if isinstance(item, BaseException):
        raise item
    return item


def _is_full(key: tuple[int, int], size: int) -> bool:
    """Whether tile ``key`` is complete in a tree of ``size`` leaves (from sizes, not bytes)."""
    level, index = key
    return (index + 1) * TILE_WIDTH <= tile_count(size, level)


def _root_alarm(state: TreeState, target: Checkpoint) -> AuditAlarm:
    return AuditAlarm(
        "root_mismatch",
        f"the entries served for size {target.size} give root {_b64(state.root())}, but the "
        f"signed checkpoint says {_b64(target.root_hash)}",
        {"recomputed_root": _b64(state.root()), "size": target.size},
    )

