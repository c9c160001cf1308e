"""The single writer: group commit of pending appends, one signed checkpoint per batch.

Every pending entry is integrated in one transaction together with the newly signed checkpoint
that commits to it, and only after that transaction is durable is any waiter answered. So a crash
at any point loses nothing that was acknowledged, and the stored checkpoint always matches the
stored tiles. Under load, entries pile up while a commit is in flight and the next batch grows:
latency stays about one commit, throughput rises with the batch size.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from ledger.core.checkpoint import Checkpoint, sign_checkpoint
from ledger.core.compact import BatchHashes, EntryTooLargeError, Integrated, TreeState, integrate
from ledger.core.note import Ed25519Signer
from ledger.core.proofs import newest_leaf_proof, newest_leaves_proofs
from ledger.core.tiles import MAX_ENTRY_SIZE, leaf_hashes_in
from ledger.log.appended import Appended, AppendedRun
from ledger.log.catch_up import caught_up
from ledger.log.errors import (
    LogHaltedError,
    LogRollbackError,
    SequencerClosedError,
)
from ledger.log.reader import LogReader
from ledger.process import tracing
from ledger.storage.base import (
    CheckpointRecord,
    LogStore,
    StorageFullError,
    WriteTx,
)

Ctx = TypeVar("Ctx")
"""What a caller queues with each entry for the batch callbacks (the notary: the pending receipt;
the ledger: None). :class:`Sequencer` is generic in it, so a context reaches the hook and the
screen with the type it was appended with."""

Out = TypeVar("Out")
"""What the hook answers for each entry (the notary: its signed receipt), handed back to the
entry's caller (:attr:`Appended.result`); None for a writer without a hook."""

BatchHook = Callable[[WriteTx, Sequence[tuple[int, Ctx]]], Awaitable[Sequence[Out]]]
"""Runs inside the batch's transaction with (index, context) of each entry: rows added there
commit atomically with the entries. It answers one result per entry, in order, which reaches
the entry's caller once the transaction is durable (never before)."""

BatchScreen = Callable[[WriteTx, Sequence[Ctx]], Awaitable[Sequence[Exception | bytes | None]]]
"""Runs inside the batch's transaction, under the log's lock and before anything is integrated,
with the context of every queued entry; answers, per entry, None to log it as queued, bytes to
log those instead (an entry finalized under the lock, e.g. with a time that must not go back),
or the exception to answer its caller with. This is where decisions that must hold across
processes are made (the notary: a digest logged already, an allowance spent, a timestamp no
earlier than the last one logged), since no other writer can act between the screen and the
commit. A group (:meth:`Sequencer.append_many`) with any entry refused is refused as a whole,
with the first refusal."""

BatchObserver = Callable[[int, float], None]
"""Told (batch size, commit seconds) after each durable batch, e.g. for metrics."""

RollHook = Callable[[int], Awaitable[Ed25519Signer]]
"""The key of log ``n``, asked when the store says, under the lock, that log ``n`` is now the
active one (``notary log roll`` ran): the writer moves there before it writes anything."""

RollPoll = Callable[[], Awaitable[bool]]
"""Whether another log than the writer's is now active (asked while the writer is idle)."""

ROLL_POLL_SECONDS = 2.0
"""How often an idle writer asks :data:`RollPoll`: it moves to a new log within about this."""

SwitchObserver = Callable[[Ed25519Signer], None]
"""Told, once the transaction that moved the writer to another log committed, that log's key."""

PROBE_BYTES = 64 * 1024
"""Size of the write that tests whether a full store has room again (about a large batch)."""


class WriterState(enum.Enum):
    """Whether the writer signs: what ``/healthz``, the 503 answers and the metrics read."""

    WRITING = "writing"
    """Batches are committed (the last one may have failed: :attr:`WriterStatus.error`)."""
    REFUSING = "refusing"
    """The store holds a tree that does not extend the newest checkpoint this process saw
    committed (:class:`LogRollbackError`): every batch is refused, and each re-checks the store,
    so writing resumes by itself once the database is back where it was."""
    HALTED = "halted"
    """Damage was found in the stored log (:meth:`Sequencer.halt`): every append is refused
    until an operator has restored the store and restarted the process."""


@dataclass(frozen=True)
class WriterStatus:
    """The writer's one state, replaced whole on each change so a reader sees it consistent."""

    state: WriterState
    reason: str = ""
    """Why it refuses or halted, in words (empty while writing)."""
    error: Exception | None = None
    """Why the last commit failed (a full disk, the lock held too long, a rolled-back store),
    until one succeeds: what a health check reports. Nothing of a failed commit was written or
    acknowledged. None when no commit failed, such as a refusal found at start."""


_WRITING = WriterStatus(WriterState.WRITING)


_Landed = tuple[int, CheckpointRecord, list[tuple[bytes, ...]] | None, Sequence[Out] | None]
"""What a group's future resolves to: its first index, the checkpoint, its entries' proofs and
the hook's results for them."""


class _Group(NamedTuple, Generic[Ctx, Out]):
    """Entries queued together by one caller, answered by one future. (A named tuple: one is
    made per request, and a frozen dataclass costs several times as much to make.)"""

    entries: list[bytes]
    contexts: list[Ctx]
    future: asyncio.Future[_Landed[Out]]
    proof: bool = False  # answer with each entry's inclusion proof too
    trace: object = None  # the caller's trace context, while tracing (ledger.process.tracing)
    hashes: BatchHashes | None = None  # its batch_hashes, made beforehand (append_many)


@dataclass
class _Batch(Generic[Ctx, Out]):
    """One commit's work, filled in by the stages of :meth:`Sequencer._commit_batch`."""

    groups: list[_Group[Ctx, Out]] = dataclasses.field(default_factory=list)
    """Taken under the lock; once screened, the admitted ones."""
    taken: bool = False
    """Whether the lock was taken and the batch with it (else a failure fails the next one)."""
    refused: list[tuple[_Group[Ctx, Out], Exception]] = dataclasses.field(default_factory=list)
    """The screen's refusals, answered once the transaction has ended (not before a rollback)."""
    switched: Ed25519Signer | None = None
    """The key of the log the writer moved to (a roll), told once the move has committed."""
    caught_up: CheckpointRecord | None = None
    """The stored checkpoint of other processes' commits that the writer caught up with."""
    first: int = 0
    """The index of the first entry written."""
    done: Integrated | None = None  # the new tiles and tree state, once integrated
    record: CheckpointRecord | None = None  # the checkpoint signed for ``done``
    results: Sequence[Out] = ()  # the hook's, one per entry written


class Sequencer(Generic[Ctx, Out]):
    """Owns appends to one log. Create, ``await start()``, then ``append`` from any task.

    Each entry is queued with a context of type ``Ctx``, which the screen and the hook get
    back, in the batch's order, inside the transaction that commits the entry; what the hook
    answers for it, of type ``Out``, comes back to its caller."""

    def __init__(
        self,
        store: LogStore,
        signer: Ed25519Signer,
        *,
        reader: LogReader | None = None,
        max_batch: int = 4096,
        hook: BatchHook[Ctx, Out] | None = None,
        screen: BatchScreen[Ctx] | None = None,
        observer: BatchObserver | None = None,
        clock: Callable[[], float] = time.time,
        trusted: CheckpointRecord | None = None,
        on_roll: RollHook | None = None,
        on_switched: SwitchObserver | None = None,
        poll_rolls: RollPoll | None = None,
    ) -> None:
        self.store = store
        #: Which of the store's logs this writer writes (0 for a store of one log).
        self.log_number: int = getattr(store, "log_number", 0)
        self.poll_rolls = poll_rolls
        self.on_roll = on_roll
        self.on_switched = on_switched
        self.signer = signer
        self.origin = signer.name
        self.reader = reader
        self.max_batch = max_batch
        self.hook = hook
        self.screen = screen
        self.observer = observer
        self.clock = clock
        self.state = TreeState()
        #: The newest checkpoint this process has seen durably committed (its own commits and
        #: what it read from the store), or one it was told it had seen before (``trusted``,
        #: e.g. remembered across restarts). Nothing inconsistent with it is ever signed.
        self.checkpoint: CheckpointRecord | None = trusted
        #: Whether it signs, and why not (:class:`WriterState`); changed only by the methods
        #: below, and never away from HALTED.
        self.status = _WRITING
        #: When (``clock`` seconds) this process last committed a write transaction, or None
        #: before its first: until then nobody knows whether its writes will get through.
        self.committed_at: float | None = None
        self._pending: list[_Group[Ctx, Out]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._probed = float("-inf")

    async def start(self) -> None:
        """Load and check the stored log, signing the empty tree for a brand-new store."""
        async with self.store.transaction() as tx:
            latest = await tx.latest()
            if latest is None:
                if self.checkpoint is not None and self.checkpoint.size > 0:
                    raise LogRollbackError(
                        f"the store is empty, but this process saw the log at size "
                        f"{self.checkpoint.size}: refusing to start a new tree over it")
                latest = self._sign(TreeState())
                await tx.write({}, latest)
            try:
                self.state = await self._catch_up(tx, latest)
                self.checkpoint = latest
            except LogRollbackError:
                # Serve reads; refuse every batch (each one re-checks the store, so writes
                # resume by themselves once the database is back where this process saw it).
                pass
        self._task = asyncio.create_task(self._run(), name=f"sequencer {self.origin}")

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The writer's event loop (else the running one), for the hot path's futures:
        ``asyncio.get_running_loop()`` makes a getpid syscall each call (CPython 3.11)."""
        return asyncio.get_running_loop() if self._task is None else self._task.get_loop()

    async def _catch_up(self, tx: WriteTx, latest: CheckpointRecord) -> TreeState:
        """The verified state at the stored checkpoint (:func:`caught_up`); a writer whose
        store lost commits it saw refuses to write until the store is back."""
        try:
            return await caught_up(tx, latest, self.checkpoint, self.state, self.origin,
                                   self.signer)
        except LogRollbackError as e:
            self._set(WriterStatus(WriterState.REFUSING, str(e)))
            raise

    def _set(self, status: WriterStatus) -> None:
        """The writer's new status: any but a halted writer's (which stays halted)."""
        if self.status.state is not WriterState.HALTED:
            self.status = status

    def halt(self, reason: str) -> None:
        """Refuse every append from now on, queued ones included.

        For damage found in the stored log (a tile or bundle that does not match the entries):
        every new checkpoint would commit to a tree whose proofs cannot be served correctly, so
        writing stops until an operator has restored the store. Reads are not affected.
        """
        self.status = WriterStatus(WriterState.HALTED, reason)
        self._wake.set()

    def _sign(self, state: TreeState) -> CheckpointRecord:
        note = sign_checkpoint(Checkpoint(self.origin, state.size, state.root()), self.signer)
        return CheckpointRecord(state.size, self.clock(), note)

    async def append(self, entry: bytes, context: Ctx, *, proof: bool = False
                     ) -> Appended[Out]:
        """Resolve, once durable, to the entry's index and the checkpoint that commits to it.

        ``proof``: also its inclusion proof in that checkpoint. The proofs of a batch are
        computed together after its commit (neighbours share all but their lowest levels:
        :meth:`LogReader.inclusion_proofs`), which costs a fraction of one proof each.
        """
        first, record, proofs, results = await self._queue([entry], [context], proof)
        return Appended(first, record.size, record.note, proofs[0] if proofs else None,
                        results[0] if results else None)

    async def append_many(self, entries: Sequence[bytes], contexts: Sequence[Ctx], *,
                          hashes: BatchHashes | None = None) -> AppendedRun:
        """Append entries that are known together, at consecutive indexes, in one commit.

        For bulk producers (``ledger add``, imports): one waiter for the whole group instead of
        one per entry, which is most of the cost of a large batch in asyncio. A group larger
        than ``max_batch`` is committed as one batch of its own. ``hashes``: their
        :func:`~ledger.core.compact.batch_hashes`, made beforehand, used if they land alone.
        """
        if len(contexts) != len(entries):
            raise ValueError("give one context per entry")
        if not entries:
            return AppendedRun(0, 0, 0, b"")
        first, record, _, _ = await self._queue(list(entries), list(contexts), hashes=hashes)
        return AppendedRun(first, len(entries), record.size, record.note)

    def _queue(self, entries: list[bytes], contexts: list[Ctx], proof: bool = False,
               hashes: BatchHashes | None = None) -> asyncio.Future[_Landed[Out]]:
        """Queue a group; the future its commit resolves (not a coroutine: a frame less to
        suspend and resume for every request)."""
        if entries and (longest := max(map(len, entries))) > MAX_ENTRY_SIZE:
            raise EntryTooLargeError(longest)
        if self.status.state is WriterState.HALTED:
            raise LogHaltedError(self.status.reason)
        if self._closing or self._task is None:
            raise SequencerClosedError("the log is not accepting appends")
        fut: asyncio.Future[_Landed[Out]] = self._task.get_loop().create_future()
        trace = None if tracing.TRACER is None else tracing.current()
        self._pending.append(_Group(entries, contexts, fut, proof, trace, hashes))
        self._wake.set()
        # No asyncio.shield: if the caller is cancelled, ``fut`` is cancelled with it, but the
        # entries stay queued and are committed all the same (the commit skips futures that are
        # already done), which is the outcome shielding would give, at a lower cost.
        return fut

    async def _run(self) -> None:
        while True:
            if self.poll_rolls is None:
                await self._wake.wait()
            else:
                try:
                    await asyncio.wait_for(self._wake.wait(), ROLL_POLL_SECONDS)
                except TimeoutError:
                    await self._follow_roll()
            self._wake.clear()
            while self._pending:
                if self.status.state is WriterState.HALTED:
                    batch, self._pending = self._pending, []
                    for group in batch:
                        if not group.future.done():
                            group.future.set_exception(LogHaltedError(self.status.reason))
                    break
                await self._commit()
            if self._closing:
                return

    def _next_batch(self) -> list[_Group[Ctx, Out]]:
        """The pending groups of the next batch, in order: up to ``max_batch`` entries, or one
        larger group alone."""
        take, count = 0, 0
        while take < len(self._pending) and (take == 0 or count < self.max_batch):
            count += len(self._pending[take].entries)
            take += 1
        batch = self._pending[:take]
        del self._pending[:take]
        return batch

    async def _screened(self, tx: WriteTx, batch: list[_Group[Ctx, Out]],
                        refused: list[tuple[_Group[Ctx, Out], Exception]]
                        ) -> list[_Group[Ctx, Out]]:
        """The groups of ``batch`` the screen admits; the others go to ``refused``, answered
        with their refusal once the transaction has ended (never before a rollback). An entry
        the screen replaced is checked for size by :func:`integrate`, with the rest."""
        if self.screen is None:
            return batch
        verdicts = list(await self.screen(tx, [c for g in batch for c in g.contexts]))
        if len(verdicts) != sum(len(g.contexts) for g in batch):
            raise RuntimeError("the batch screen must answer once per entry")
        admitted: list[_Group[Ctx, Out]] = []
        at = 0
        for group in batch:
            mine = verdicts[at:at + len(group.contexts)]
            at += len(group.contexts)
            refusal = next((v for v in mine if isinstance(v, Exception)), None)
            if refusal is not None:
                refused.append((group, refusal))
                continue
            entries = [v if isinstance(v, bytes) else e
                       for e, v in zip(group.entries, mine, strict=True)]
            admitted.append(group if entries == group.entries else
                            _Group(entries, group.contexts, group.future, group.proof,
                                   group.trace))
        return admitted

    async def _commit(self) -> None:
        if tracing.TRACER is None:
            await self._commit_batch()
            return
        # One span per commit, in the trace of the request that heads the queue (it is in
        # this batch whatever else joins), linked to the traces of the others in the batch.
        parent = self._pending[0].trace if self._pending else None
        with tracing.TRACER.start_as_current_span(
                "ledger.commit", context=tracing.as_context(parent)) as span:
            batch = await self._commit_batch()
            tracing.link(span, [g.trace for g in batch[1:]])
            span.set_attributes({"ledger.log.origin": self.origin,
                                 "ledger.commit.entries": sum(len(g.entries) for g in batch),
                                 "ledger.tree.size": self.state.size})

    async def _commit_batch(self) -> list[_Group[Ctx, Out]]:
        """Commit the next batch: :meth:`_apply` it in one transaction, then :meth:`_settle`
        it once that is durable, or :meth:`_fail` it; the groups it committed (none if it
        failed)."""
        started = time.perf_counter()
        batch: _Batch[Ctx, Out] = _Batch()
        try:
            async with self.store.transaction() as tx:
                await self._apply(tx, batch)
        except BaseException as e:
            self._fail(batch, e)
            if not isinstance(e, Exception):
                raise
            return []
        return await self._settle(batch, started)

    async def _apply(self, tx: WriteTx, batch: _Batch[Ctx, Out]) -> None:
        """Inside the transaction, holding the log's lock: take the batch, follow a roll,
        screen, catch up with other processes' commits, then integrate, sign and write the
        admitted entries and run the hook. Nothing of it is durable or answered before the
        commit."""
        # Taken once the log's lock is held: what arrived while this process waited for it
        # (another process committing) joins this batch, not the next one.
        batch.groups, batch.taken = self._next_batch(), True
        if self._rolled(tx):
            # A roll: nothing more goes to this log. (Also after a switch whose transaction
            # rolled back: the store handle is still on the old log.)
            batch.switched = await self._switch(tx)
        # The screen before the catch-up (neither depends on the other): a store may read
        # what the catch-up needs with the screen's reads (PostgreSQL: one round trip less
        # under the lock, PostgresWriteTx.catch_up_read).
        batch.groups = await self._screened(tx, batch.groups, batch.refused)
        batch.caught_up = await self._follow_store(tx)
        if self.status.state is WriterState.REFUSING:  # the store is back
            self._set(WriterStatus(WriterState.WRITING, error=self.status.error))
        groups = batch.groups
        entries = groups[0].entries if len(groups) == 1 else [e for g in groups for e in g.entries]
        if entries:
            await self._write(tx, batch, entries)

    def _rolled(self, tx: WriteTx) -> bool:
        """Whether the store's active log is another than the writer's or the transaction's
        (``notary log roll`` ran): only for a writer that follows rolls."""
        active = getattr(tx, "active_log", None)
        return self.on_roll is not None and active is not None and (
            active != self.log_number or tx.log_number != active)  # type: ignore[attr-defined]

    async def _follow_store(self, tx: WriteTx) -> CheckpointRecord | None:
        """The stored checkpoint, caught up with, when another process appended since this
        one's last commit (from its tiles: :meth:`_catch_up`); None when nobody did.

        ``self.checkpoint`` stays what it was until this transaction commits: only then is
        what it read known to be durable (with synchronous replication, on the standby too),
        and a failed commit binds nothing."""
        latest = await tx.latest()
        if latest is None:
            raise LogRollbackError("the stored checkpoint disappeared")
        if self.checkpoint is not None and latest.size == self.state.size \
                and latest.note == self.checkpoint.note:
            return None
        self.state = await self._catch_up(tx, latest)
        return latest

    async def _write(self, tx: WriteTx, batch: _Batch[Ctx, Out], entries: list[bytes]) -> None:
        """Integrate the admitted entries, sign the new checkpoint, write both, then run the
        hook with each entry's index and context (what it adds commits with them)."""
        batch.first = self.state.size
        alone = batch.groups[0].hashes if len(batch.groups) == 1 else None
        batch.done = integrate(self.state, entries, alone)
        batch.record = self._sign(batch.done.state)
        await tx.write(batch.done.tiles, batch.record)
        if self.hook is not None:
            contexts = [c for g in batch.groups for c in g.contexts]
            batch.results = await self.hook(
                tx, [(batch.first + i, c) for i, c in enumerate(contexts)])
            if len(batch.results) != len(contexts):
                raise RuntimeError("the batch hook must answer once per entry")

    def _fail(self, batch: _Batch[Ctx, Out], e: BaseException) -> None:
        """The transaction failed, so nothing of it was written: each waiter of the batch
        gets the error, which the status keeps until a commit succeeds."""
        # Not taken: the lock could not be, and the batch it was for fails. (Taken and every
        # group refused: only the refused ones fail; what queued since is the next batch's.)
        groups = batch.groups if batch.taken else self._next_batch()
        for group in [*groups, *(g for g, _ in batch.refused)]:
            if not group.future.done():
                group.future.set_exception(
                    e if isinstance(e, Exception) else RuntimeError(str(e)))
        if isinstance(e, Exception):
            self._set(dataclasses.replace(self.status, error=e))

    async def _settle(self, batch: _Batch[Ctx, Out], started: float) -> list[_Group[Ctx, Out]]:
        """After the commit: the writer's state, then the answers (the refused groups', then
        the others'); the groups whose entries it wrote."""
        self.committed_at = self.clock()
        if batch.switched is not None and self.on_switched is not None:
            self.on_switched(batch.switched)
        if self.status is not _WRITING:
            self._set(_WRITING)
        for group, refusal in batch.refused:
            if not group.future.done():
                group.future.set_exception(refusal)
        if batch.done is None or batch.record is None:
            self._settle_unwritten(batch)
            return []
        prior, self.state = self.state, batch.done.state
        self.checkpoint = batch.record
        if self.reader is not None:
            self.reader.offer(batch.done.tiles)
        if self.observer is not None:
            self.observer(sum(len(g.entries) for g in batch.groups),
                          time.perf_counter() - started)
        proofs = await self._proofs(batch.groups, batch.first, batch.record.size, prior,
                                    batch.done.tiles)
        index = batch.first
        for group in batch.groups:
            if not group.future.done():
                mine = None if proofs is None or not group.proof else [
                    proofs[i] for i in range(index, index + len(group.entries))]
                at = index - batch.first
                group.future.set_result((index, batch.record, mine, batch.results[
                    at:at + len(group.entries)] if batch.results else None))
            index += len(group.entries)
        return batch.groups

    def _settle_unwritten(self, batch: _Batch[Ctx, Out]) -> None:
        """After a commit that wrote no entry (all refused, or only empty groups: a follow):
        what it caught up with is now known to be durable, and an empty group is answered
        with the checkpoint."""
        if batch.caught_up is not None:
            self.checkpoint = batch.caught_up
        for group in batch.groups:
            if group.future.done():
                continue
            if self.checkpoint is None:
                group.future.set_exception(LogRollbackError(self.status.reason))
            else:
                group.future.set_result((self.state.size, self.checkpoint, None, None))

    async def _proofs(self, batch: list[_Group[Ctx, Out]], first: int, size: int, prior: TreeState,
                      tiles: dict[tuple[int, int], bytes]
                      ) -> dict[int, tuple[bytes, ...]] | None:
        """The inclusion proofs that ``batch`` asked for, by index, computed together; None
        if none was asked for or they cannot be computed (each caller then reads its own: the
        commit is durable either way). ``prior`` is the state the batch was appended to and
        ``tiles`` what it wrote: the proofs follow from its compact range and leaf hashes by
        hashing alone (:func:`newest_leaves_proofs`, :func:`newest_leaf_proof`)."""
        wanted: list[int] = []
        index = first
        for group in batch:
            if group.proof and not group.future.done():
                wanted.extend(range(index, index + len(group.entries)))
            index += len(group.entries)
        if not wanted:
            return None
        if wanted == [size - 1] and prior.size == size - 1:
            return {size - 1: tuple(newest_leaf_proof(prior.stack))}
        try:
            leaves = leaf_hashes_in(tiles, first, size) if prior.size == first else None
            if leaves is not None:
                every = newest_leaves_proofs(prior.stack, first, leaves)
                return {i: tuple(every[i - first]) for i in wanted}
            if self.reader is None:
                return None
            got = await self.reader.inclusion_proofs(wanted, size)
        except Exception:  # e.g. a tile evicted and its read failing: callers fall back
            return None
        return {i: tuple(p) for i, p in zip(wanted, got, strict=True)}

    async def _switch(self, tx: WriteTx) -> Ed25519Signer:
        """Move this transaction and the writer to the active log (see :data:`RollHook`):
        its key, its tables and, below, its stored state, checked as at start."""
        assert self.on_roll is not None
        n: int = tx.active_log  # type: ignore[attr-defined]
        signer = await self.on_roll(n)
        await tx.switch_log(n)  # type: ignore[attr-defined]
        self.signer, self.origin, self.log_number = signer, signer.name, n
        # Another tree: nothing seen of the last one binds it (its first checkpoint, the empty
        # tree, was signed by the roll; _catch_up checks it under this key).
        self.state, self.checkpoint = TreeState(), None
        if self.reader is not None:
            self.reader = LogReader(self.reader.store)  # another tree: no cached tile holds
        return signer

    async def _follow_roll(self) -> None:
        """While idle: when another log is now active, commit nothing, to move there."""
        assert self.poll_rolls is not None
        try:
            rolled = await self.poll_rolls()
        except Exception:  # the store is unreachable now: the next commit will tell
            return
        if rolled and not self._closing:
            fut: asyncio.Future[_Landed[Out]] = asyncio.get_running_loop().create_future()
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody waits
            self._pending.append(_Group([], [], fut, False))

    async def follow(self) -> None:
        """Take the lock once with nothing to write: moves the writer to the active log if a
        roll happened (for a reader that met a receipt of the new log first)."""
        await self._queue([], [])

    async def probe_storage(self) -> bool:
        """After a commit failed for lack of space: can the store take a write again? Clears
        the error if so.

        A health check calls this so that an instance marked unhealthy (its disk filled) turns
        healthy again once space is freed even if no client is sending it writes, which a
        load balancer that stopped routing to it would ensure. The probe writes (then empties)
        a row as large as a big batch, outside the log's tables, at most once a second: a tiny
        write could still fit in the free space of existing pages while real batches do not.
        """
        if not isinstance(self.status.error, StorageFullError):
            return self.status.error is None  # only a successful commit clears other errors
        now = time.monotonic()
        if now - self._probed < 1.0:
            return False
        self._probed = now
        try:
            await self.store.probe_space(PROBE_BYTES)
        except Exception:
            return False
        self._set(dataclasses.replace(self.status, error=None))
        return True

    async def close(self) -> None:
        """Stop taking appends, commit everything already pending, then stop."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None
