"""An opened log: its store, a reader for proofs and tiles, and (when writable) its sequencer.

This is the one object the HTTP routes, the CLI and the notary hold; it keeps "which checkpoint is
current" in one place so that proofs and the checkpoint they are against always agree.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.core.checkpoint import Checkpoint, open_checkpoint
from ledger.core.compact import BatchHashes
from ledger.core.note import Ed25519Signer, Ed25519Verifier
from ledger.core.tlog_proof import ProofBundle
from ledger.log.appended import Appended, AppendedRun
from ledger.log.reader import LogReader
from ledger.log.sequencer import BatchObserver, Sequencer, WriterState
from ledger.storage.base import CheckpointRecord, LogStore


@dataclass(frozen=True)
class Head:
    """A committed checkpoint, parsed once."""

    record: CheckpointRecord
    checkpoint: Checkpoint

    @property
    def size(self) -> int:
        return self.record.size

    @property
    def note(self) -> bytes:
        return self.record.note


class Log:
    """Open with :meth:`open`; call :meth:`close` when done.

    A writer that queues contexts with its entries (the notary's) builds its own
    :class:`Sequencer` on a :class:`LogReader` and passes both here: the log itself never looks
    at contexts, whatever their type, and its :meth:`append` queues none.
    """

    def __init__(self, store: LogStore, verifier: Ed25519Verifier, reader: LogReader,
                 sequencer: Sequencer[Any, Any] | None) -> None:
        self.store = store
        self.verifier = verifier
        self.reader = reader
        self.sequencer = sequencer
        self._head: Head | None = None
        self._head_read = 0.0
        self._tree = 0  # which tree (log) the head is of: bumped by switch()

    @property
    def origin(self) -> str:
        return self.verifier.name

    @classmethod
    async def open(
        cls,
        store: LogStore,
        *,
        signer: Ed25519Signer | None = None,
        verifier: Ed25519Verifier | None = None,
        max_batch: int = 4096,
        observer: BatchObserver | None = None,
        cache_tiles: int = 4096,
        trusted: CheckpointRecord | None = None,
    ) -> Log:
        """A writable log when given the signer (which checks the stored tree on start).

        ``trusted`` is a checkpoint of this log seen committed before (by an earlier run): the
        writer refuses a store whose tree does not extend it
        (:class:`~ledger.log.errors.LogRollbackError`).
        """
        if signer is None and verifier is None:
            raise ValueError("a log needs its signer (to write) or its verifier (to read)")
        reader = LogReader(store, cache_tiles=cache_tiles)
        sequencer: Sequencer[None, None] | None = None
        if signer is not None:
            sequencer = Sequencer(store, signer, reader=reader, max_batch=max_batch,
                                  observer=observer, trusted=trusted)
            try:
                await sequencer.start()
            except BaseException:
                await store.close()
                raise
            verifier = signer.verifier()
        assert verifier is not None
        return cls(store, verifier, reader, sequencer)

    async def head(self, max_age: float = 0.2) -> Head | None:
        """The newest committed checkpoint, re-read from the store at most every ``max_age`` s.

        Another process may append (``ledger add`` beside ``ledger serve``), so the store, not
        this process's sequencer, is the authority; the short cache keeps hot paths cheap.
        """
        seq = self.sequencer
        # A writer that refuses (or halted while refusing) saw a checkpoint the store no longer
        # extends: only a writing one's is followed.
        if seq is not None and seq.checkpoint is not None \
                and seq.status.state is WriterState.WRITING and self._newer(seq.checkpoint):
            self._set_head(seq.checkpoint)
        now = time.monotonic()
        if self._head is None or now - self._head_read > max_age:
            tree = self._tree
            rec = await self.store.latest()
            if tree != self._tree:  # read before a switch: of the other log; read again
                return await self.head(max_age)
            self._head_read = now
            if rec is not None and self._newer(rec):
                self._set_head(rec)
        return self._head

    def switch(self, verifier: Ed25519Verifier, reader: LogReader) -> None:
        """Follow the writer to another log of the store (a roll): its key, a reader with
        nothing cached of the last tree, and its head read afresh."""
        self.verifier, self.reader = verifier, reader
        self._head, self._head_read = None, 0.0
        self._tree += 1

    def _newer(self, rec: CheckpointRecord) -> bool:
        if not rec.note.startswith(self.verifier.name.encode() + b"\n"):
            return False  # another log's (the store moved on in a roll): followed on switch()
        head = self._head
        # Only growth: a store that went back (restored, failed over) or holds another tree
        # at the same size is not followed; the writer refuses it and says why.
        return head is None or rec.size > head.size

    def _set_head(self, rec: CheckpointRecord) -> None:
        cp, _ = open_checkpoint(rec.note, self.verifier)
        self._head = Head(rec, cp)

    async def append(self, entry: bytes) -> Appended[Any]:
        if self.sequencer is None:
            raise RuntimeError("this log was opened read-only")
        return await self.sequencer.append(entry, None)

    async def append_many(self, entries: Sequence[bytes], hashes: BatchHashes | None = None
                          ) -> AppendedRun:
        if self.sequencer is None:
            raise RuntimeError("this log was opened read-only")
        return await self.sequencer.append_many(entries, [None] * len(entries), hashes=hashes)

    async def proof_bundle(self, index: int, head: Head) -> ProofBundle:
        """The tlog-proof bundle of entry ``index`` against ``head``."""
        proof = await self.reader.inclusion_proof(index, head.size)
        return ProofBundle(index, tuple(proof), head.note)

    async def close(self) -> None:
        if self.sequencer is not None:
            await self.sequencer.close()
        await self.store.close()
