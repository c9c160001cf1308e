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
    async def fetch_all(tiles: list[Tile]) -> list[tuple[Tile, bytes]]:
        return list(zip(tiles, await source.tiles(tiles), strict=True))

    first_bundle, last_bundle = a // TILE_WIDTH, (b - 1) // TILE_WIDTH
    queue: asyncio.Queue[_Chunk | BaseException | None] = asyncio.Queue(_PREFETCH_CHUNKS)

    async def producer() -> None:
        try:
            for n0 in range(first_bundle, last_bundle + 1, chunk_bundles):
                ns = range(n0, min(n0 + chunk_bundles, last_bundle + 1))
                got = await fetch_all([tile_at(ENTRIES_LEVEL, n, b) for n in ns] +
                                      [tile_at(0, n, b) for n in ns])
                k = len(ns)
                await queue.put(_Chunk(n0, list(got[:k]), {t.index: (t, d) for t, d in got[k:]}))
            await queue.put(None)
        except BaseException as e:  # handed to the consumer, which raises it
            await queue.put(e)

    task = asyncio.create_task(producer())
    state = start
    compared = 0
    pending: dict[tuple[int, int], bytes] = {}  # partial tiles as of the latest chunk
    last_save = time.monotonic()
    hashing = 0.0
    try:
        while True:
            item = await queue.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            served = {(ENTRIES_LEVEL, t.index): (t, d) for t, d in item.bundles}
            served.update({(0, n): v for n, v in item.level0.items()})
            for g in range(0, len(item.bundles), _GROUP_BUNDLES):
                entries: list[bytes] = []
                for tile, data in item.bundles[g : g + _GROUP_BUNDLES]:
                    got = _entries(tile, data)
                    skip = a - tile.index * TILE_WIDTH if tile.index == first_bundle else 0
                    entries.extend(got[skip:] if skip > 0 else got)
                first_index = state.size
                t0 = time.perf_counter()
                done = integrate(state, entries)
                hashing += time.perf_counter() - t0
                state = done.state
                if on_entries is not None:
                    on_entries(first_index, entries)
                upper = [key for key in done.tiles if key[0] > 0 and _is_full(key, state.size)]
                for tile, data in await fetch_all([Tile(level, index) for level, index in upper]):
                    served[(tile.level, tile.index)] = (tile, data)
                for key, want in done.tiles.items():
                    if _is_full(key, state.size):
                        pending.pop(key, None)
                        tile, data = served[key]
                        if data != want:
                            raise _mismatch(tile, want, data)
                        compared += 1
                    else:
                        pending[key] = want
                # Hashing runs on the event loop in short slices (~1 ms), so the downloads
                # keep flowing in between without a thread fighting the loop for the GIL.
                await asyncio.sleep(0)
            if progress is not None:
                progress(state.size - a, b - a)
            if save is not None and time.monotonic() - last_save > _SAVE_EVERY \
                    and state.size < b:
                await save(state)
                last_save = time.monotonic()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    # The right edge: every partial tile of the target tree that this range changed.
    edge = list(pending.items())
    fetched = await fetch_all([tile_at(key[0], key[1], b) for key, _ in edge])
    for (_, want), (tile, data) in zip(edge, fetched, strict=True):
        if data != want:
            raise _mismatch(tile, want, data)
        compared += 1
    if state.root() != target.root_hash:
        raise _root_alarm(state, target)
    return AuditResult(state, b - a, compared, time.perf_counter() - began,
                       source.requests - requests0, source.received_bytes - bytes0,
                       {"hashing_seconds": hashing})


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

