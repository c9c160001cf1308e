"""A batch's receipts signed while its screen's round trip is in flight (PostgreSQL).

On PostgreSQL a commit holds the log's lock, which every frontend queues on, from its
``FOR UPDATE`` to its ``COMMIT``, and the event loop drives its round trips: signing the batch
after the screen, on the loop or handed to a thread, lengthens every hold by the signatures.
Yet a batch's indexes are known as soon as the lock is held (the stored size: what another
frontend appended is caught up before them), and the screen changes an entry only by refusing
it (the indexes after it move) or by giving it the log's later ``issued_at`` (a new entry
object). So the receipts are signed on a worker thread, at the indexes they will have if the
screen admits every entry as it is, while the loop waits for the screen; the batch's hook then
takes each receipt whose index, entry (the very object), key, origin and entry URL prefix are
those it signs for, and signs the others itself (:meth:`notary.serving.service.Notary.hook`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass

from notary.core.entry import LogEntry
from notary.core.receipts import Receipt, ReceiptKey

__all__ = ["SignedAhead"]


def _retrieve(future: asyncio.Future[list[Receipt]]) -> None:
    """Nobody may await a batch signed ahead (its transaction failed first): its error is
    retrieved here so that asyncio does not report it as never retrieved."""
    if not future.cancelled():
        future.exception()


@dataclass(frozen=True)
class SignedAhead:
    """The receipts of one transaction's screened entries, being signed on a worker thread."""

    tx: object  # the write transaction it was started in (a receipt never crosses one)
    key: ReceiptKey
    origin: str
    prefix: str
    entries: list[tuple[int, LogEntry]]
    future: asyncio.Future[list[Receipt]]

    @classmethod
    def start(cls, tx: object, key: ReceiptKey, origin: str, prefix: str, first: int,
              entries: Sequence[LogEntry]) -> SignedAhead:
        """Sign ``entries`` at ``first``, ``first + 1``, … on the loop's default executor."""
        placed = [(first + i, entry) for i, entry in enumerate(entries)]
        future = asyncio.get_running_loop().run_in_executor(None, functools.partial(
            key.sign_entries, placed, origin=origin, url_prefix=prefix))
        future.add_done_callback(_retrieve)
        return cls(tx, key, origin, prefix, placed, future)

    async def take(self, tx: object, key: ReceiptKey, origin: str, prefix: str,
                   items: Sequence[tuple[int, LogEntry]]) -> list[Receipt | None]:
        """Per (index, entry) of ``items``, the receipt signed ahead for exactly that index
        and entry under ``key`` in ``origin`` with ``prefix``; None where there is none (the
        screen refused an entry before it, or gave it a new ``issued_at``, or the key, the log
        or the transaction is another)."""
        if tx is not self.tx or key is not self.key or origin != self.origin \
                or prefix != self.prefix:
            return [None] * len(items)
        try:
            signed = await self.future
        except Exception:  # signed on the loop instead, where the error will show
            return [None] * len(items)
        ahead = {index: (entry, receipt)
                 for (index, entry), receipt in zip(self.entries, signed, strict=True)}
        out: list[Receipt | None] = []
        for index, entry in items:
            found = ahead.get(index)
            out.append(found[1] if found is not None and found[0] is entry else None)
        return out
