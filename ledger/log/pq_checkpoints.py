"""Dual-signed checkpoints: the log's ML-DSA-44 line on its committed checkpoints, off the
write path.

A log signs each checkpoint twice (C2SP tlog-checkpoint): its Ed25519 note signature (type 0x01,
what tlog-tiles requires of public logs and Go's ``note`` package reads) and an ML-DSA-44
subtree/v1 signature (type 0x06, key name = origin, the subtree ``[0, size)``), so that an entry
stays provable after Ed25519 falls. The sequencer signs only the Ed25519 line, inside the commit:
ML-DSA-44 costs about half a millisecond, which at one receipt a commit would be a third of a
receipt's latency. The second line is added here instead, when a checkpoint is *published*
(``GET /checkpoint``, the static tree, proofs of stored receipts, witnesses), at most once per
``min_interval`` seconds for what readers ask for, and exactly when a caller needs a given
checkpoint signed (a witness submission). A just-issued receipt therefore carries the
Ed25519-signed checkpoint, and gets its dual-signed one within ``min_interval`` by asking again,
as it gets witness cosignatures.

Nothing here is persisted: every process holding the log's ML-DSA-44 key signs the checkpoints
it serves, and signing again after a restart is harmless (the line only ever signs a checkpoint
the log committed, so it cannot sign two inconsistent ones).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ledger.core.note import merge_signatures, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.log.facade import Head

__all__ = ["DEFAULT_MIN_INTERVAL", "PostQuantumCheckpoints"]

#: How often, at most, a new checkpoint is signed for readers: a reader sees a dual-signed
#: checkpoint at most this much older than the newest (and a witness gets one signed on demand).
DEFAULT_MIN_INTERVAL = 1.0


class PostQuantumCheckpoints:
    """Adds the log's ML-DSA-44 line to committed checkpoints; remembers the newest it made."""

    def __init__(self, signer: SubtreeCosignatureSigner, origin: str, *,
                 min_interval: float = DEFAULT_MIN_INTERVAL,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if signer.name != origin:
            raise ValueError(f"the log's ML-DSA-44 key is named {signer.name!r}, not for the "
                             f"log's origin {origin!r}")
        if min_interval < 0:
            raise ValueError("min_interval must not be negative")
        self.signer = signer
        self.min_interval = min_interval
        self._clock = clock
        self._monotonic = monotonic
        self._latest: tuple[int, bytes] | None = None
        self._signed_at = float("-inf")
        #: How many checkpoints this process signed (a metric's source).
        self.signed = 0

    def switch(self, signer: SubtreeCosignatureSigner) -> None:
        """Sign for another log from now on (a roll: the next log's key); nothing signed for
        the last one is served again."""
        self.signer = signer
        self._latest = None
        self._signed_at = float("-inf")

    @property
    def vkey(self) -> str:
        return self.signer.verifier_key_text()

    def sign(self, head: Head) -> bytes:
        """``head``'s note with the ML-DSA-44 line added (signed now unless already done)."""
        latest = self._latest
        if latest is not None and latest[0] == head.size:
            return latest[1]
        text = parse_note(head.note).text
        line = self.signer.cosign(text, int(self._clock()))
        note = merge_signatures(head.note, [line])
        self.signed += 1
        self._signed_at = self._monotonic()
        if latest is None or head.size > latest[0]:
            self._latest = (head.size, note)
        return note

    def latest(self, head: Head) -> tuple[int, bytes]:
        """The newest dual-signed checkpoint for readers, no newer than ``head``.

        ``head`` is signed when nothing is yet, or when the last signature is ``min_interval``
        old; otherwise the last dual-signed checkpoint is returned, which may be smaller.
        """
        latest = self._latest
        if latest is not None and latest[0] > head.size:
            # A head older than what was signed (a reader's cached view): sign exactly it.
            return head.size, self.sign(head)
        if latest is None or (latest[0] < head.size
                              and self._monotonic() - self._signed_at >= self.min_interval):
            return head.size, self.sign(head)
        return latest
