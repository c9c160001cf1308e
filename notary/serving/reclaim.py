"""Reclaiming a pruned range's rows (``notary log prune ORIGIN --min-index N --reclaim``,
docs/lifecycle.md): the notary's rows of the receipts below a frozen log's minimum index.

Pruning (:func:`notary.serving.lifecycle.prune`) denies tiles and keeps everything stored. A
receipt's own rows (its signature and names, and the lookup keys that ``GET
/v1/tool-calls/{id}``, ``?call_sha256=`` and search read) are what grows besides the log; this
deletes them for the pruned range, while the log's tiles and entries stay. Such a receipt
keeps verifying offline (it was born complete); the notary no longer serves it, nor counts
its ``call_sha256`` as a duplicate.

The work goes in batches of :data:`BATCH` entries, each one store transaction deleting a batch's
receipt rows with their lookup rows, lowest positions first: a kill at any point leaves whole
batches done and the rest untouched, and a rerun starts at the lowest receipt row left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ledger.log.reader import LogReader
from ledger.storage.base import LogRecord
from notary.core.entry import EntryError, decode_entry
from notary.core.logs import position
from notary.serving.lifecycle import PruneRefused
from notary.store.base import NotaryStore

__all__ = ["BATCH", "Reclaimed", "reclaim"]

BATCH = 4096
"""Entries a transaction reclaims (16 entry bundles): short enough to leave the write lock to
the notary's own commits between two."""

Progress = Callable[[int, int], None]
"""Told (entries done, entries in the range) after each batch."""


@dataclass(frozen=True)
class Reclaimed:
    log: LogRecord
    receipts: int
    """Receipt rows deleted by this run (0 when a run before did it all)."""
    free_bytes: int | None
    """What the store holds free for new rows afterwards (SQLite), or None (PostgreSQL)."""


async def reclaim(store: NotaryStore, origin: str, *, batch: int = BATCH,
                  progress: Progress | None = None) -> Reclaimed:
    """Delete the receipt and lookup rows of the frozen log ``origin`` below its minimum index
    (see the module). Refuses the active log and an unknown one (:class:`PruneRefused`)."""
    record = next((r for r in await store.logs() if r.origin == origin), None)
    if record is None or record.state != "frozen":
        what = "not a frozen log of this notary" if record is None else "the active log"
        raise PruneRefused(f"{origin!r} is {what}: only a frozen log's pruned range can be "
                           "reclaimed (`notary log list` shows them)")
    end = record.min_index
    lo = position(record.n, 0)
    first = await store.first_receipt(lo, lo + end) if end else None
    at = end if first is None else first - lo
    reader = LogReader(store.for_log(record.n))
    deleted = 0
    while at < end:
        stop = min(at + batch, end)
        keys = []
        for i, data in enumerate(await reader.entries(at, stop), start=at):
            try:
                entry = decode_entry(data)
            except EntryError:  # the successor record: no receipt
                continue
            keys.append((position(record.n, i), entry.id, entry.call_sha256.hex()))
        deleted += await store.reclaim_receipts(position(record.n, at),
                                                position(record.n, stop), keys)
        at = stop
        if progress is not None:
            progress(at, end)
    return Reclaimed(record, deleted, await store.free_bytes())
