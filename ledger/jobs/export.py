"""Write a log as a static tlog-tiles tree that any web server or bucket can serve as is.

Each file is written to a temporary name and renamed into place, so a reader never sees a torn
tile. The checkpoint is written last: a mirror that is read while an export runs only ever
advertises a tree whose tiles are all present. Tiles already exported are compared, not rewritten:
a tile path names bytes that never change, so different bytes there mean the directory holds
another log (or a forked one) and the export stops rather than hide it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ledger.core.checkpoint import open_checkpoint
from ledger.core.compact import decode_bundle
from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE
from ledger.core.note import NoteError, open_note, parse_note
from ledger.core.tiles import TILE_WIDTH, Tile, tiles_for_size
from ledger.log.facade import Head, Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.process.atomic import write_atomic

__all__ = ["ExportError", "ExportResult", "export_log"]

Progress = Callable[[int, int], None]
"""Told (files done, files in total) as the export advances."""

_CHUNK = 256  # tiles read from the store per query


class ExportError(LedgerError, RuntimeError):
    """The export cannot proceed without hiding a problem (damaged store, foreign directory)."""


@dataclass(frozen=True)
class ExportResult:
    size: int
    written: int  # files created or replaced (the checkpoint included)
    unchanged: int  # files already present with the same bytes


def _write_atomic(path: Path, data: bytes) -> None:
    # A static tree is public; directories are not synced per tile (a re-run completes it).
    write_atomic(path, data, mode=0o644, sync_dir=False)


def write_tile_once(path: Path, data: bytes) -> bool:
    """Write a tile unless it is already there; True if written. Raise on different bytes."""
    try:
        existing = path.read_bytes()
    except FileNotFoundError:
        _write_atomic(path, data)
        return True
    if existing != data:
        raise ExportError(
            f"{path} already exists with different bytes; a tile never changes, so this "
            "directory holds another log's tiles or a damaged copy"
        )
    return False


def _write_tiles(out: Path, pairs: list[tuple[Tile, bytes]]) -> int:
    return sum(write_tile_once(out / t.path(), data) for t, data in pairs)


def check_full_tile(tile: Tile, data: bytes | None) -> bytes:
    """A full tile read from the store, refusing one that is missing or not full."""
    if data is None:
        raise ExportError(f"{tile.path()} is missing from the store: the store is damaged")
    if tile.is_entries:
        try:
            ok = len(decode_bundle(data)) == TILE_WIDTH
        except ValueError:
            ok = False
    else:
        ok = len(data) == TILE_WIDTH * HASH_SIZE
    if not ok:
        raise ExportError(f"{tile.path()} in the store is not a full tile: the store is damaged")
    return data


async def _tile_bytes(log: Log, chunk: list[Tile]) -> list[tuple[Tile, bytes]]:
    full = await log.store.read_tiles([(t.level, t.index) for t in chunk if t.is_full])
    out = []
    for t in chunk:
        if t.is_full:
            data = check_full_tile(t, full.get((t.level, t.index)))
        else:
            partial = await log.reader.tile(t.level, t.index, t.width)
            if partial is None:
                raise ExportError(f"{t.path()} is missing from the store: the store is damaged")
            data = partial
        out.append((t, data))
    return out


def _check_existing_checkpoint(log: Log, path: Path, size: int) -> None:
    """Refuse to move a mirror backwards, or over another log's mirror."""
    try:
        existing = path.read_bytes()
    except FileNotFoundError:
        return
    try:
        cp, _ = open_checkpoint(existing, log.verifier)
    except NoteError as e:
        raise ExportError(f"{path} is not a checkpoint of this log ({e})") from None
    if cp.size > size:
        raise ExportError(
            f"{path} is for tree size {cp.size}, newer than this log's {size}; refusing to roll "
            "the mirror back"
        )


def _same_dual_signed(existing: bytes, head: Head, pq: PostQuantumCheckpoints) -> bool:
    """Whether ``existing`` is ``head``'s checkpoint with a valid ML-DSA-44 line of the log's:
    then it stays (signing again would only change the line's timestamp and bytes)."""
    try:
        note, _ = open_note(existing, [pq.signer.verifier()])
    except NoteError:
        return False
    return note.text == parse_note(head.note).text


async def export_log(log: Log, out: Path, *, progress: Progress | None = None,
                     pq: PostQuantumCheckpoints | None = None) -> ExportResult:
    """Export the tree of the log's current checkpoint into ``out`` (created if needed); with
    ``pq``, the checkpoint carries the log's ML-DSA-44 line too."""
    head = await log.head()
    if head is None:
        raise ExportError("the log has no signed checkpoint yet")
    checkpoint_path = out / "checkpoint"
    _check_existing_checkpoint(log, checkpoint_path, head.size)
    tiles = tiles_for_size(head.size, entries=True)
    total = len(tiles) + 1
    written = unchanged = 0
    for i in range(0, len(tiles), _CHUNK):
        pairs = await _tile_bytes(log, tiles[i : i + _CHUNK])
        new = await asyncio.to_thread(_write_tiles, out, pairs)
        written += new
        unchanged += len(pairs) - new
        if progress is not None:
            progress(i + len(pairs), total)
    existing = checkpoint_path.read_bytes() if checkpoint_path.exists() else None
    if existing is not None and (existing == head.note if pq is None
                                 else _same_dual_signed(existing, head, pq)):
        unchanged += 1
    else:
        note = head.note if pq is None else pq.sign(head)
        await asyncio.to_thread(_write_atomic, checkpoint_path, note)
        written += 1
    if progress is not None:
        progress(total, total)
    return ExportResult(head.size, written, unchanged)
