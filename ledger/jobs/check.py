"""Full audit of a stored log: rebuild every tile from the entries and compare byte for byte.

The sequencer trusts its own tiles (it only re-checks the root of the compact range on start), so
damage to a stored tile deep in the tree would go unnoticed until some proof failed for a client.
The audit trusts nothing but the entries and the log's public key: it re-integrates the entries
from an empty tree with the same pure code the writer uses, compares each tile it produces with
the stored one, and checks that the final root is the one the signed checkpoint commits to.

It reads through the :class:`~ledger.storage.base.LogStore` interface only, holds one chunk of
entries in memory at a time, and hashes in a worker thread so that it can run inside a serving
process (the background scrub, :mod:`ledger.jobs.scrub`, paces it with ``pace``). Another process
may append while it runs; it audits the checkpoint it started with, reading only the prefix of
the right-edge tiles that checkpoint covers, so appends never make it report damage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from ledger.core.checkpoint import open_checkpoint
from ledger.core.compact import TreeState, decode_bundle, integrate
from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE
from ledger.core.note import NoteError, NoteVerifier
from ledger.core.tiles import ENTRIES_LEVEL, TILE_WIDTH, Tile, tiles_for_size
from ledger.storage.base import LogStore, TileKey

__all__ = ["AuditError", "CheckReport", "audit_log"]

Progress = Callable[[int, int], None]
"""Told (entries checked, entries in total) as the audit advances."""
Pace = Callable[[int], Awaitable[None]]
"""Awaited after each chunk with the number of stored tiles and bundles it read: a caller that
must bound the audit's rate sleeps there."""


class AuditError(LedgerError):
    """The first way in which the stored log is not what its signed checkpoint says."""


@dataclass(frozen=True)
class CheckReport:
    """What a full check of a stored log found consistent: its signed size and root."""

    origin: str
    size: int
    root: bytes
    tiles: int  # tiles and entry bundles compared


def _name(key: TileKey, width: int = TILE_WIDTH) -> str:
    return Tile(key[0], key[1], width).path()


def _units(key: TileKey, data: bytes) -> list[bytes]:
    """A tile split into hashes, or a bundle into entries (for locating the first difference)."""
    if key[0] == ENTRIES_LEVEL:
        try:
            return decode_bundle(data)
        except ValueError:
            return []
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


def _compare(key: TileKey, want: bytes, stored: bytes | None, *, exact: bool) -> None:
    """Raise unless ``stored`` is ``want`` (or, at a moving right edge, starts with it)."""
    a = _units(key, want)
    name = _name(key, len(a))
    if stored is None:
        raise AuditError(f"{name} is missing from the store")
    if stored == want or (not exact and stored.startswith(want)):
        return
    entries = key[0] == ENTRIES_LEVEL
    b = _units(key, stored)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            raise AuditError(
                f"{name} differs from the tile recomputed from the entries at "
                f"{'entry' if entries else 'hash'} {i}"
            )
    noun = "entries" if entries else "hashes"
    raise AuditError(f"{name} holds {len(b)} {noun} where the entries give {len(a)}")


def _entries_of(n: int, data: bytes | None, size: int) -> list[bytes]:
    key = (ENTRIES_LEVEL, n)
    want = min(TILE_WIDTH, size - n * TILE_WIDTH)
    name = _name(key, want)
    if data is None:
        raise AuditError(f"{name} is missing from the store")
    try:
        bundle = decode_bundle(data)
    except ValueError as e:
        raise AuditError(f"{name} is malformed: {e}") from None
    if len(bundle) < want or (want == TILE_WIDTH and len(bundle) != want):
        raise AuditError(f"{name} holds {len(bundle)} entries, expected {want}")
    return bundle[:want]


def _is_full(key: TileKey, data: bytes) -> bool:
    if key[0] == ENTRIES_LEVEL:
        return len(decode_bundle(data)) == TILE_WIDTH
    return len(data) == TILE_WIDTH * HASH_SIZE


async def _compare_full(store: LogStore, tiles: Mapping[TileKey, bytes],
                        bundles: Mapping[TileKey, bytes]) -> int:
    """Compare the tiles that became full; the number of hash tiles read from the store."""
    stored = dict(bundles)
    read = await store.read_tiles([k for k in tiles if k[0] != ENTRIES_LEVEL])
    stored.update(read)
    for key in sorted(tiles):
        _compare(key, tiles[key], stored.get(key), exact=True)
    return len(read)


async def audit_log(
    store: LogStore,
    verifier: NoteVerifier,
    *,
    progress: Progress | None = None,
    chunk_bundles: int = 64,
    pace: Pace | None = None,
) -> CheckReport:
    """Check the latest stored checkpoint against everything stored; raise :class:`AuditError`.

    Checks, in order: the checkpoint's signature by ``verifier`` (whose name is the origin),
    every entry bundle and tile that the checkpoint's tree publishes, and the root hash.
    ``progress`` is told how far it got after each chunk of ``chunk_bundles`` bundles, and
    ``pace`` is awaited there with the number of stored tiles and bundles the chunk read.
    """
    record = await store.latest()
    if record is None:
        raise AuditError("the store holds no checkpoint")
    try:
        cp, _ = open_checkpoint(record.note, verifier)
    except NoteError as e:
        raise AuditError(f"the stored checkpoint does not verify: {e}") from None
    if cp.size != record.size:
        raise AuditError(f"the stored checkpoint says size {cp.size}, the store says {record.size}")
    size = cp.size
    state = TreeState()
    edge: dict[TileKey, bytes] = {}  # tiles still partial so far
    compared = 0
    bundles = -(-size // TILE_WIDTH)
    for first in range(0, bundles, chunk_bundles):
        keys = [(ENTRIES_LEVEL, n) for n in range(first, min(first + chunk_bundles, bundles))]
        got = await store.read_tiles(keys)
        entries = [e for k in keys for e in _entries_of(k[1], got.get(k), size)]
        done = await asyncio.to_thread(integrate, state, entries)
        state = done.state
        full = {k: v for k, v in done.tiles.items() if _is_full(k, v)}
        for k, v in done.tiles.items():
            if k in full:
                edge.pop(k, None)
            else:
                edge[k] = v
        read = await _compare_full(store, full, {k: v for k, v in got.items() if k in full})
        compared += len(full)
        if progress is not None:
            progress(state.size, size)
        if pace is not None:
            await pace(len(got) + read)
    expected = {(t.level, t.index) for t in tiles_for_size(size, entries=True) if not t.is_full}
    if set(edge) != expected:  # a bug here, not damage in the store
        raise AssertionError(f"audit edge tiles {sorted(edge)} are not {sorted(expected)}")
    stored_edge = await store.read_tiles(list(edge))
    if pace is not None:
        await pace(len(stored_edge))
    latest = await store.latest()
    # Edge tiles grow when another process appends; if none did, they must match exactly.
    exact = latest is not None and latest.size == size
    for key in sorted(edge):
        _compare(key, edge[key], stored_edge.get(key), exact=exact)
    compared += len(edge)
    if state.root() != cp.root_hash:
        raise AuditError(
            f"the root recomputed from the entries is {state.root().hex()}, but the signed "
            f"checkpoint says {cp.root_hash.hex()}"
        )
    return CheckReport(cp.origin, size, cp.root_hash, compared)
