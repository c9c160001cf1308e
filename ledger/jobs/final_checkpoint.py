"""A frozen log's final checkpoint, cosigned by every witness and mirror, however long one of
them was down (docs/lifecycle.md).

A roll freezes a log; its final checkpoint never changes again, and it must still be witnessed
and mirrored like any other. A witness may be down at the roll, or not yet know the frozen
log's key. So the witnessing job's leader keeps, for every frozen log, submitting the final
checkpoint to each witness and mirror that has not cosigned it, each with its own exponential
backoff (``interval`` doubling up to :data:`MAX_BACKOFF`), until:

- it cosigns: the cosignature is merged into the checkpoint and the result saved in the log's
  store (``save_witnessed_final``), so that every process serves it at ``/logs/<n>/checkpoint``
  and in receipts of that log, and a restart knows who still has to cosign (whoever has no
  valid cosignature on the saved note: nothing else is persisted);
- it refuses for good: it holds another tree for that origin (a 409 with another root at some
  size or a size beyond the final one, or a 422: the checkpoint is not consistent with what it
  holds, a split view that no retry can mend) or calls the request malformed (400). Logged as
  an error once, and not tried again until the notary restarts;
- or :data:`RETRY_WINDOW` has passed since the log was frozen: logged once, given up.

Everything else is transient and retried: no answer, a timeout, 5xx, 429, and 403 and 404:
a witness answers 404 for an origin it does not know and 403 for a checkpoint signed by a key
it does not hold for that origin, which its operator mends by adding the frozen log's key
(``notary log list`` shows it). A failure is logged when it first happens and when it changes,
never once per try.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog
from prometheus_client import Counter

from ledger.client.http import HttpClient
from ledger.client.mirror import LogReaderSource, MirrorClient, MirrorError
from ledger.client.witness import WitnessClient, WitnessConflict, WitnessError
from ledger.core.note import (
    NoteError,
    NoteSignature,
    UnverifiedNoteError,
    merge_signatures,
    open_note,
    parse_note,
)
from ledger.core.tlog_policy import TlogPolicy
from ledger.jobs.witness_config import WitnessEndpoint
from ledger.log.facade import Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.log.reader import LogReader
from ledger.storage.base import LogStore

__all__ = ["MAX_BACKOFF", "RETRY_WINDOW", "FinalCheckpoints", "FrozenLog", "submit_final"]

_log = structlog.get_logger("ledger.jobs.final_checkpoint")

MAX_BACKOFF = 900.0
"""Seconds between two tries of one witness, at most (a witness down for days is tried every
15 minutes)."""
RETRY_WINDOW = 30 * 86400.0
"""Seconds after a log was frozen during which its final checkpoint is still submitted."""
PERMANENT_STATUSES = (400, 422)


@dataclass(frozen=True)
class FrozenLog:
    """A frozen log as the job needs it: its read-only :class:`Log` (whose head is the final
    checkpoint), its ML-DSA-44 line when checkpoints are dual-signed, and when it was frozen."""

    log: Log
    pq: PostQuantumCheckpoints | None
    frozen_at: float


FrozenLogs = Callable[[], Awaitable[Sequence[FrozenLog]]]
"""Every frozen log of the notary, oldest first (read again each round: a roll adds one)."""


class _FinalRefused(Exception):
    """A cosigner's answer that no retry can change (see the module)."""


@dataclass
class _Try:
    """One cosigner and one frozen log's final checkpoint."""

    client: WitnessClient | MirrorClient
    known: int = 0  # the cosigner's size for the frozen origin, as far as known
    failures: int = 0
    retry_at: float = 0.0
    task: asyncio.Task[None] | None = None
    error: str = ""
    refused: bool = False


@dataclass
class _Final:
    """A frozen log's final checkpoint: as served (log-signed, cosignatures merged in)."""

    frozen: FrozenLog
    note: bytes
    size: int
    text: str
    cosigned: set[str] = field(default_factory=set)  # cosigner vkeys with a valid line
    tries: dict[str, _Try] = field(default_factory=dict)
    gave_up: bool = False
    ignored: bytes | None = None  # a stored note not taken (said once, not every round)


class FinalCheckpoints:
    """Cosigns every frozen log's final checkpoint (see the module): :meth:`run` in the
    process that holds the witnessing lease, :meth:`load` in the others; :meth:`served` for
    what ``/logs/<n>/checkpoint`` and a frozen log's receipts carry."""

    def __init__(self, store: LogStore, endpoints: Sequence[WitnessEndpoint],
                 frozen_logs: FrozenLogs, policy: TlogPolicy, names: Mapping[str, str], *,
                 http: HttpClient, interval: float, timeout: float, requests: Counter,
                 on_failure: Callable[[WitnessEndpoint, str, Exception], None]) -> None:
        self.store = store
        self.endpoints = list(endpoints)
        self.frozen_logs = frozen_logs
        self.policy = policy
        self.names = names  # cosigner vkey -> policy name, for those the policy counts
        self.http = http
        self.interval = interval
        self.timeout = timeout
        self.m_requests = requests
        self.on_failure = on_failure
        self._finals: dict[str, _Final] = {}
        self._hints: dict[str, dict[str, int]] = {}
        self._saving = asyncio.Lock()

    # What is served ---------------------------------------------------------------------------

    def served(self, origin: str, note: bytes) -> tuple[bytes, dict[str, str]]:
        """The frozen log ``origin``'s final checkpoint with every cosignature collected for
        it, given ``note``, the checkpoint as served without them; ``note`` itself when none
        is known. The signed text is never changed: a note of another text is not used."""
        final = self._finals.get(origin)
        if final is None or not final.cosigned or parse_note(note).text != final.text:
            return note, {}
        names = {self.names[v] for v in final.cosigned if v in self.names}
        return final.note, {
            "Notary-Witnessed": "true" if self.policy.satisfied(names) else "false",
            "Notary-Witness-Cosignatures": str(len(final.cosigned)),
            "Notary-Witness-Quorum": self.policy.quorum_header}

    def awaiting(self, origin: str) -> set[str]:
        """The cosigners (vkeys) still to cosign ``origin``'s final checkpoint."""
        final = self._finals.get(origin)
        return {e.vkey for e in self.endpoints} - (final.cosigned if final else set())

    # State ------------------------------------------------------------------------------------

    async def load(self) -> None:
        """Learn the frozen logs and the cosigned final checkpoints saved in the store (the
        leader's, or an earlier run's); every stored cosignature is verified first."""
        stored = await self.store.witnessed_finals()
        for frozen in await self.frozen_logs():
            origin = frozen.log.origin
            final = self._finals.get(origin)
            if final is None:
                head = await frozen.log.head(0)
                if head is None:
                    continue
                note = frozen.pq.latest(head)[1] if frozen.pq is not None else head.note
                final = _Final(frozen, note, head.size, parse_note(note).text)
                self._finals[origin] = final
            saved = stored.get(origin)
            if saved is not None and saved not in (final.note, final.ignored):
                self._adopt(final, saved)

    def _adopt(self, final: _Final, note: bytes) -> None:
        """Take ``note`` (a stored or merged final checkpoint) if it is of the same text,
        signed by the log, and carries no fewer valid cosignatures than the one held."""
        try:
            open_note(note, [final.frozen.log.verifier])
            if parse_note(note).text != final.text:
                raise NoteError("its text is not the frozen log's final checkpoint")
            # A line by a cosigner's key that does not verify would make clients refuse the
            # whole note: such a note is not served.
            cosigned = {e.vkey for e in self.endpoints if _cosigned(note, e)}
        except NoteError as e:
            final.ignored = note
            _log.warning("final_checkpoint_ignored", origin=final.frozen.log.origin,
                         error=str(e))
            return
        if cosigned >= final.cosigned:
            final.note, final.cosigned = note, cosigned

    def hint(self, origin: str, known: Mapping[str, int]) -> None:
        """The cosigners' sizes for ``origin`` as the active log's witnessing knew them at
        the roll, so the first submission needs no 409 round trip."""
        self._hints[origin] = dict(known)

    # The loop ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Submit until every final checkpoint is cosigned (runs while leading; cancel it)."""
        try:
            while True:
                try:
                    await self.load()
                    self._tick()
                except asyncio.CancelledError:
                    raise
                except Exception:  # never let this die with the notary still serving
                    _log.exception("final_checkpoints_tick_failed")
                await asyncio.sleep(self.interval)
        finally:
            tasks = [t.task for f in self._finals.values() for t in f.tries.values() if t.task]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for f in self._finals.values():
                for t in f.tries.values():
                    t.task = None

    def _tick(self) -> None:
        now, wall = time.monotonic(), time.time()
        for origin, final in self._finals.items():
            if final.gave_up:
                continue
            waiting = [e for e in self.endpoints if e.vkey not in final.cosigned]
            if waiting and wall - final.frozen.frozen_at > RETRY_WINDOW:
                final.gave_up = True
                _log.warning("final_checkpoint_given_up", origin=origin, size=final.size,
                             witnesses=[e.url for e in waiting],
                             days=round(RETRY_WINDOW / 86400))
                continue
            hints = self._hints.pop(origin, {})
            for e in waiting:
                t = final.tries.get(e.vkey)
                if t is None:
                    client: WitnessClient | MirrorClient = (
                        MirrorClient(e.url, [e.verifier], self.http) if e.mirror
                        else WitnessClient(e.url, e.verifier, self.http))
                    t = final.tries[e.vkey] = _Try(client, hints.get(e.vkey) or 0)
                if t.task is None and not t.refused and t.retry_at <= now:
                    t.task = asyncio.create_task(self._submit(final, e, t),
                                                 name=f"final checkpoint {origin} {e.url}")

    async def _submit(self, final: _Final, e: WitnessEndpoint, t: _Try) -> None:
        name, origin = e.verifier.name, final.frozen.log.origin
        try:
            async with asyncio.timeout(self.timeout * 4):
                sig = await submit_final(t.client, t.known, final.frozen.log.reader,
                                         final.note, final.size)
        except (WitnessError, MirrorError, _FinalRefused, ValueError, RuntimeError,
                TimeoutError) as err:
            self.m_requests.labels(name, "failed").inc()
            self.on_failure(e, origin, err)
            text = str(err) or repr(err)
            if isinstance(err, _FinalRefused) or getattr(err, "status", None) in PERMANENT_STATUSES:
                t.refused = True
                _log.error("final_checkpoint_refused", witness=name, url=e.url, origin=origin,
                           size=final.size, error=text)
            elif text != t.error:
                _log.warning("final_checkpoint_not_cosigned", witness=name, url=e.url,
                             origin=origin, size=final.size, error=text,
                             hint="retried with backoff until it cosigns")
            t.error = text
            t.failures += 1
            t.retry_at = time.monotonic() + min(MAX_BACKOFF, self.interval * 2 ** t.failures)
            return
        finally:
            t.task = None
        self.m_requests.labels(name, "cosigned").inc()
        _log.info("final_checkpoint_cosigned", witness=name, origin=origin, size=final.size,
                  tries=t.failures + 1)
        self._adopt(final, merge_signatures(final.note, [sig]))
        async with self._saving:  # the newest merged note, one save at a time
            await self.store.save_witnessed_final(origin, final.note)


def _cosigned(note: bytes, e: WitnessEndpoint) -> bool:
    """Whether ``note`` carries a cosignature by ``e``; NoteError when its line is invalid."""
    try:
        open_note(note, [e.verifier])
    except UnverifiedNoteError:
        return False
    return True


async def submit_final(client: WitnessClient | MirrorClient, known: int, reader: LogReader,
                       note: bytes, size: int) -> NoteSignature:
    """Get ``note`` (a frozen log's final checkpoint, of ``size``) cosigned by ``client``,
    from its size ``known`` for that log (0: unknown; a 409 teaches it), and return the
    cosignature. A mirror is pushed the entries it lacks too. Raises :class:`_FinalRefused` when
    the cosigner holds another tree for the origin, else what the client raises."""
    if isinstance(client, MirrorClient):
        client.pending = max(client.pending, known)
        return (await client.push(note, LogReaderSource(reader)))[0]
    old = known
    for _ in range(3):
        proof = await reader.consistency_proof(old, size) if 0 < old < size else []
        try:
            return (await client.add_checkpoint(old, proof, note))[0]
        except WitnessConflict as c:
            if c.root_mismatch or c.size > size:
                raise _FinalRefused(f"{client.verifier.name} holds size {c.size} with another "
                               "root, or beyond the final size") from None
            old = c.size
    raise WitnessError(f"{client.verifier.name} kept answering 409")
