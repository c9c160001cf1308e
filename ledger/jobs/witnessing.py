"""The log side of witnessing: get the notary's checkpoints cosigned, publish the witnessed one.

Configured with witnesses (submission URL and cosignature verifier key each) and a quorum k of
n, or a C2SP tlog-policy (witnesses with their URLs, groups, a quorum expression), a
background task of the notary daemon:

- every ``interval`` seconds, when the tree has grown, takes the newest checkpoint as the
  *target* and submits it to every idle witness (C2SP tlog-witness ``add-checkpoint``) with
  ``old`` = that witness's last known size and a consistency proof from it (computed from the
  log's tiles). The first request uses the persisted size, or 0; a 409 ``text/x.tlog.size``
  answer teaches the witness's size and the request is retried with it;
- while the tree does not grow, submits the same checkpoint again to each witness every
  ``refresh`` seconds (``old`` = its size, no proof), and serves the fresh cosignature in place
  of the old one: a client that bounds a cosignature's age (its timestamp) keeps accepting an
  idle log's checkpoint. Each cosignature served is then at most ``refresh`` plus one round
  (``interval`` and the witness's answer time) old, while its witness answers;
- collects the cosignatures concurrently, each request with its own timeout; a witness that
  fails is retried later with exponential backoff, and one still busy never holds the others
  back. A new target is taken once the current one met the quorum or every witness has had
  its say, so that the witnesses converge on the same checkpoint;
- publishes the newest checkpoint that meets the policy (the log's signature and cosignatures
  that satisfy the quorum), merged with every cosignature collected for it.

Mirrors (C2SP tlog-mirror) are cosigners of another kind, run by the same job: instead of
``add-checkpoint`` alone, a mirror is pushed the target checkpoint *and the entries it lacks*
(:class:`ledger.client.mirror.MirrorClient`, reading the log's tiles), and its cosignature says
it durably stored them all. Its cosignature is collected, counted and merged like a witness's:
with ``quorum`` it counts toward k of n (witnesses and mirrors together); with a tlog-policy, a
mirror counts where the policy has a ``witness`` line with its key (the line's URL may be left
out, the mirror's submission URL is given with the mirror), and a mirror the policy does not
name is still pushed and its cosignature still served, but it counts for nothing. A mirror that
restarted, or a notary that did, resumes from where the mirror is (its 409 says so); nothing is
uploaded twice once stored.

When the log has an ML-DSA-44 key (``pq``, :mod:`ledger.log.pq_checkpoints`), every checkpoint
submitted carries the log's two signatures, so a witness that knows only the log's ML-DSA-44 key
can check it, and so does every checkpoint served.

What ``GET /checkpoint`` serves (through ledger.http.routes's ``PUBLISHED_CHECKPOINT`` hook):

- the newest checkpoint meeting the policy, with all its cosignatures, once there is one;
  ``Notary-Witnessed: true``;
- until then (a new log, or witnesses unreachable since the first start), the log-signed
  checkpoint currently submitted to the witnesses, with whatever cosignatures it has so far and
  ``Notary-Witnessed: false``. Once a witnessed checkpoint has been served, an unwitnessed one
  never is again: the published checkpoint only ever grows, so monitors never see a rollback,
  and it may lag behind the log by about one interval plus the witnesses' answer time.

``Notary-Witness-Cosignatures`` (every valid cosignature served, not just the quorum) and
``Notary-Witness-Quorum`` (k, or the policy's quorum name) say what it carries. The
witnessed checkpoint also backs ``GET /v1/tool-calls/{id}``: a receipt's proof is upgraded to
it (and so carries the cosignatures) as soon as it covers the entry.

None of this touches the write path: the sequencer never waits for a witness, and a slow or
unreachable witness only delays cosignatures. The witnesses' sizes and the witnessed checkpoint
are kept in the log's store (:class:`ledger.storage.base.WitnessState`), so a restart resumes
without a 409 round trip and serves the witnessed checkpoint at once. Releases before that kept
them in ``<data>/witnessing.json``: given as ``state_path``, that file is read once when the
store holds no state yet, and the state moves into the store.

A notary that rolls to its next log calls :meth:`Witnessing.switch_log`: the state starts over
for the new origin. Given its frozen logs (``frozen_logs``), the leader also gets each frozen
log's final checkpoint cosigned by every witness and mirror, retried until they do
(:mod:`ledger.jobs.final_checkpoint`), and :meth:`Witnessing.final_for` serves it. The store
holds the state of one origin, the active log's: a saved checkpoint of another origin means
the state is from before a roll, and is dropped with its sizes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from ledger.client.http import HttpClient
from ledger.client.mirror import LogReaderSource, MirrorClient, MirrorError
from ledger.client.witness import WitnessClient, WitnessConflict, WitnessError
from ledger.core.checkpoint import open_checkpoint
from ledger.core.hashing import EMPTY_ROOT, fold_right
from ledger.core.note import NoteError, NoteSignature, merge_signatures
from ledger.core.tlog_policy import TlogPolicy
from ledger.jobs.final_checkpoint import FinalCheckpoints, FrozenLogs
from ledger.jobs.witness_config import (
    WitnessConfigError,
    WitnessEndpoint,
    endpoints_from_policy,
    parse_mirror_spec,
    parse_witness_spec,
    public_key,
)
from ledger.log.facade import Head, Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.log.reader import stack_coords
from ledger.storage.base import WitnessState

__all__ = [
    "STATE_FILE",
    "Published",
    "WitnessConfigError",
    "WitnessEndpoint",
    "Witnessing",
    "endpoints_from_policy",
    "parse_mirror_spec",
    "parse_witness_spec",
]

_log = structlog.get_logger("ledger.jobs.witnessing")

STATE_FILE = "witnessing.json"
MAX_BACKOFF = 60.0
REFRESH = 60.0
"""Seconds after which an unchanged checkpoint is submitted again for fresh cosignatures."""
_KEPT_TARGETS = 8


@dataclass(frozen=True)
class Published:
    """The checkpoint ``/checkpoint`` serves: a log-signed note with merged cosignatures."""

    note: bytes
    size: int
    witnessed: bool
    cosignatures: int


@dataclass
class _Target:
    """A log checkpoint being cosigned, and the cosignatures it got so far (by witness vkey)."""

    note: bytes
    size: int
    cosigs: dict[str, NoteSignature] = field(default_factory=dict)
    attempted: set[str] = field(default_factory=set)
    cosigned_at: dict[str, float] = field(default_factory=dict)  # monotonic, by witness vkey


@dataclass
class _WitnessLink:
    """One witness or mirror the job submits to: its client, the size it is known to hold,
    the submission under way, and when to retry after failures."""

    endpoint: WitnessEndpoint
    client: WitnessClient | MirrorClient
    known: int | None = None  # the witness's size for our origin, when known
    task: asyncio.Task[None] | None = None
    busy_with: int | None = None  # size of the target being submitted
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""


class Witnessing:
    """Runs the witnessing loop for one log; create, ``await start()``, ``await close()``."""

    def __init__(self, log: Log, endpoints: Sequence[WitnessEndpoint], *,
                 quorum: int | None = None, policy: TlogPolicy | None = None,
                 interval: float = 2.0, timeout: float = 5.0, refresh: float = REFRESH,
                 state_path: Path | None = None,
                 registry: CollectorRegistry | None = None,
                 pq: PostQuantumCheckpoints | None = None,
                 frozen_logs: FrozenLogs | None = None) -> None:
        if not endpoints:
            raise WitnessConfigError("witnessing needs at least one witness or mirror")
        keys = [e.verifier.public_key for e in endpoints]
        if len(set(keys)) != len(keys):
            raise WitnessConfigError("the same witness key is configured twice")
        if (quorum is None) == (policy is None):
            raise WitnessConfigError("give a witness quorum or a witness policy (one of them)")
        if policy is None:
            assert quorum is not None
            if not 1 <= quorum <= len(endpoints):
                raise WitnessConfigError(f"witness quorum {quorum} must be 1..{len(endpoints)}")
            policy = TlogPolicy.from_quorum([e.verifier for e in endpoints], quorum,
                                            [e.url for e in endpoints])
        if not policy.requires_cosignatures:
            raise WitnessConfigError("the witness policy's quorum is none: nothing to collect")
        by_key = {public_key(v): name for name, (v, _) in policy.witnesses.items()}
        missing = [e.url for e in endpoints
                   if e.verifier.public_key not in by_key and not e.mirror]
        if missing:
            raise WitnessConfigError(f"witness {missing[0]} is not in the witness policy")
        if interval <= 0 or timeout <= 0 or refresh <= 0:
            raise WitnessConfigError("witness interval, timeout and refresh must be positive")
        self.log = log
        self.endpoints = list(endpoints)
        self.policy = policy
        self.quorum = policy.quorum_header
        # Only the cosigners the policy names count; a mirror it does not name is still pushed.
        self._names = {e.vkey: by_key[e.verifier.public_key] for e in endpoints
                       if e.verifier.public_key in by_key}
        self.interval = interval
        self.timeout = timeout
        self.refresh = refresh
        self.state_path = state_path
        #: The log's ML-DSA-44 line, added to every checkpoint submitted and served.
        self.pq = pq
        self.leading = False
        self._http: HttpClient | None = None
        self._witnesses: dict[str, _WitnessLink] = {}
        self._targets: OrderedDict[int, _Target] = OrderedDict()
        self._current: _Target | None = None
        self._published: Published | None = None
        self._task: asyncio.Task[None] | None = None
        self.frozen_logs = frozen_logs
        #: The frozen logs' final checkpoints (with ``frozen_logs``, once started).
        self.finals: FinalCheckpoints | None = None
        self._finals_task: asyncio.Task[None] | None = None
        self._dirty = False
        #: The origin the state is about (the log facade's may have moved on at a roll).
        self.origin = log.origin
        #: (witness vkey, origin) pairs already logged as unknown to that witness.
        self._unknown: set[tuple[str, str]] = set()
        #: lead, follow and switch_log one at a time (the lease's job and a roll may overlap).
        self._switching = asyncio.Lock()
        r = registry if registry is not None else CollectorRegistry()
        self.m_requests = Counter("notary_witness_requests_total",
                                  "add-checkpoint requests by witness and result",
                                  ["witness", "result"], registry=r)
        self.m_published = Gauge("notary_witnessed_checkpoint_size",
                                 "Size of the newest checkpoint meeting the witness policy",
                                 multiprocess_mode="livemostrecent", registry=r)
        self.m_cosigs = Gauge("notary_witnessed_checkpoint_cosignatures",
                              "Cosignatures on the published checkpoint",
                              multiprocess_mode="livemostrecent", registry=r)

    # Lifetime ---------------------------------------------------------------------------------

    async def start(self, *, lead: bool = True) -> None:
        """Load the state and serve the witnessed checkpoint; with ``lead``, also submit.

        When several processes serve one log, exactly one leads (it holds the witnessing
        lease, see :mod:`ledger.jobs.lease`); the others follow: they re-read the shared state
        every interval and serve the newest witnessed checkpoint the leader stored.
        """
        self._http = await HttpClient(timeout=self.timeout).open()
        for e in self.endpoints:
            client: WitnessClient | MirrorClient = (
                MirrorClient(e.url, [e.verifier], self._http) if e.mirror
                else WitnessClient(e.url, e.verifier, self._http))
            self._witnesses[e.vkey] = _WitnessLink(e, client)
        if self.frozen_logs is not None:
            self.finals = FinalCheckpoints(
                self.log.store, self.endpoints, self.frozen_logs, self.policy, self._names,
                http=self._http, interval=self.interval, timeout=self.timeout,
                requests=self.m_requests, on_failure=self._unknown_origin)
            await self._load_finals()
        await self._load()
        head = await self.log.head(0)
        if head is not None:
            self._set_target(head)
        self._republish()
        if lead:
            await self.lead()
        else:
            self._task = asyncio.create_task(self._follow(), name="witnessing (following)")

    async def lead(self) -> None:
        """Start submitting (this process took the lease); state is re-read first."""
        async with self._switching:
            await self._stop_task()
            await self._load()
            self.leading = True
            self._task = asyncio.create_task(self._run(), name="witnessing")
            self._run_finals()

    async def follow(self) -> None:
        """Stop submitting (the lease was lost) and follow the leader's stored state."""
        async with self._switching:
            await self._stop_task()
            self.leading = False
            self._task = asyncio.create_task(self._follow(), name="witnessing (following)")

    async def switch_log(self, frozen: str | None = None) -> None:
        """The notary rolled to its next log (docs/lifecycle.md): :attr:`log` already reads
        the new one. The state starts over for the new origin (no size known, nothing
        published) and is saved, so that a restart resumes the new log's state. The frozen
        log (origin ``frozen``) is the final-checkpoint job's from now on, told the sizes this
        job knew for it. A follower only starts over: the leader does the submitting.
        """
        async with self._switching:
            leading = self.leading
            await self._stop_task()
            if leading and frozen is not None and self.finals is not None:
                self.finals.hint(frozen, {vkey: w.known for vkey, w in self._witnesses.items()
                                          if w.known is not None})
            self.origin = self.log.origin
            self._targets.clear()
            self._current = self._published = None
            for w in self._witnesses.values():
                w.known, w.failures, w.retry_at, w.last_error = None, 0, 0.0, ""
                if isinstance(w.client, MirrorClient):
                    w.client.pending = 0
            self.m_published.set(0)
            self.m_cosigs.set(0)
            head = await self.log.head(0)
            if head is not None:
                self._set_target(head)
            self._republish()
            if leading:
                await self._save()
                self._dirty = False
                self._task = asyncio.create_task(self._run(), name="witnessing")
                self._run_finals()
            else:
                self._task = asyncio.create_task(self._follow(), name="witnessing (following)")
            _log.info("witnessing_switched_log", origin=self.origin, leading=leading)

    def _run_finals(self) -> None:
        if self.finals is not None:
            self._finals_task = asyncio.create_task(self.finals.run(),
                                                    name="witnessing: final checkpoints")

    async def _load_finals(self) -> None:
        if self.finals is not None:
            try:
                await self.finals.load()
            except Exception:  # served without cosignatures until a later round reads them
                _log.exception("final_checkpoints_load_failed")

    def final_for(self, origin: str, note: bytes) -> tuple[bytes, Mapping[str, str]]:
        """What ``/logs/<n>/checkpoint`` serves of the frozen log ``origin``, given its final
        checkpoint ``note`` as signed (ledger.http.routes's PUBLISHED_FINAL provider)."""
        return (note, {}) if self.finals is None else self.finals.served(origin, note)

    def _unknown_origin(self, e: WitnessEndpoint, origin: str, error: Exception) -> None:
        """A 404 means the witness does not know ``origin`` (C2SP tlog-witness): its
        operator must add the log's key. Said once per witness and origin."""
        if getattr(error, "status", None) != 404 or (e.vkey, origin) in self._unknown:
            return
        self._unknown.add((e.vkey, origin))
        _log.warning("witness_does_not_know_log", witness=e.verifier.name,
                     url=e.url, origin=origin,
                     hint="the witness needs this log's verifier key (notary log list)")

    async def _stop_task(self) -> None:
        tasks = [t for t in (self._task, self._finals_task,
                             *(w.task for w in self._witnesses.values())) if t]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for w in self._witnesses.values():
            w.task = None
            w.busy_with = None
        self._task = self._finals_task = None

    async def close(self) -> None:
        await self._stop_task()
        if self._dirty and self.leading:
            await self._save()
        if self._http is not None:
            await self._http.close()

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._load()
                await self._load_finals()
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("witnessing_follow_failed")

    # What is published ------------------------------------------------------------------------

    def witnessed(self) -> tuple[int, bytes] | None:
        """(size, note) of the newest checkpoint meeting the policy, or None (for receipts)."""
        pub = self._served()
        return (pub.size, pub.note) if pub is not None and pub.witnessed else None

    def checkpoint_for(self, head: Head) -> tuple[bytes, Mapping[str, str]]:
        """What ``GET /checkpoint`` serves (ledger.http.routes's PUBLISHED_CHECKPOINT provider)."""
        pub = self._served()
        if pub is None or pub.size > head.size:
            note = self.pq.latest(head)[1] if self.pq is not None else head.note
            witnessed, count = False, 0
        else:
            note, witnessed, count = pub.note, pub.witnessed, pub.cosignatures
        return note, {"Notary-Witnessed": "true" if witnessed else "false",
                      "Notary-Witness-Cosignatures": str(count),
                      "Notary-Witness-Quorum": str(self.quorum)}

    def _served(self) -> Published | None:
        """The published checkpoint, unless it is of a log the notary has just rolled away
        from (until :meth:`switch_log` has started over)."""
        pub = self._published
        if pub is None or not pub.note.startswith(self.log.origin.encode() + b"\n"):
            return None
        return pub

    # The loop ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self._tick()
                if self._dirty:
                    self._dirty = False
                    await self._save()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let witnessing die with the notary still serving
                _log.exception("witnessing_tick_failed")
            await asyncio.sleep(self.interval)

    async def _tick(self) -> None:
        head = await self.log.head()
        if head is None:
            return
        cur = self._current
        now = time.monotonic()
        if cur is None or (head.size > cur.size and (self._meets(cur)
                                                     or self._round_over(cur, now))):
            cur = self._set_target(head)
            self._republish()
        for vkey, w in self._witnesses.items():
            if w.task is not None or w.retry_at > now or (
                    vkey in cur.cosigs and now - cur.cosigned_at[vkey] < self.refresh):
                continue  # busy, backing off, or its cosignature is fresh enough
            w.busy_with = cur.size
            w.task = asyncio.create_task(self._submit(w, cur), name=f"witness {w.endpoint.url}")

    def _meets(self, target: _Target) -> bool:
        """Whether the cosignatures collected for ``target`` meet the witness policy."""
        return self.policy.satisfied({self._names[vkey] for vkey in target.cosigs
                                      if vkey in self._names})

    def _round_over(self, target: _Target, now: float) -> bool:
        """Every witness has answered for ``target``, or is busy elsewhere, or backing off."""
        for vkey, w in self._witnesses.items():
            if vkey in target.attempted:
                continue
            if w.task is not None and w.busy_with == target.size:
                return False
            if w.task is None and w.retry_at <= now:
                return False
        return True

    def _set_target(self, head: Head) -> _Target:
        target = self._targets.get(head.size) or _Target(
            self.pq.sign(head) if self.pq is not None else head.note, head.size)
        self._targets[head.size] = target
        self._targets.move_to_end(head.size)
        while len(self._targets) > _KEPT_TARGETS:
            self._targets.popitem(last=False)
        self._current = target
        return target

    async def _push(self, w: _WitnessLink, client: MirrorClient, target: _Target) -> None:
        """Push ``target`` and the entries the mirror lacks; keep its cosignature."""
        name = w.endpoint.verifier.name
        client.pending = max(client.pending, w.known or 0)
        try:
            sigs = await client.push(target.note, LogReaderSource(self.log.reader))
        finally:
            if client.pending != w.known:  # learned from a 409, or moved by this push
                w.known = client.pending
                self._dirty = True
        self.m_requests.labels(name, "cosigned").inc()
        self._cosigned(w, target, sigs[0])

    def _cosigned(self, w: _WitnessLink, target: _Target, sig: NoteSignature) -> None:
        target.cosigs[w.endpoint.vkey] = sig  # a newer one replaces the witness's older one
        target.cosigned_at[w.endpoint.vkey] = time.monotonic()
        w.known = target.size
        w.failures = 0
        w.retry_at = 0.0
        w.last_error = ""
        self._dirty = True
        self._republish()

    async def _submit(self, w: _WitnessLink, target: _Target) -> None:
        name = w.endpoint.verifier.name
        try:
            if isinstance(w.client, MirrorClient):
                await self._push(w, w.client, target)
                return
            for _ in range(3):
                old = w.known or 0
                if old > target.size:
                    target = await self._ahead(w, old, target)
                proof = (await self.log.reader.consistency_proof(old, target.size)
                         if 0 < old < target.size else [])
                try:
                    sigs = await w.client.add_checkpoint(old, proof, target.note)
                except WitnessConflict as c:
                    self.m_requests.labels(name, "conflict").inc()
                    if c.root_mismatch:
                        raise WitnessError(f"{name} holds another root at size {c.size}: a "
                                           "checkpoint inconsistent with this log was signed "
                                           "with its key") from None
                    head = await self.log.head()
                    if head is not None and c.size > head.size:
                        raise WitnessError(f"{name} has seen size {c.size}, larger than this "
                                           f"log ({head.size}): was the log rolled back?"
                                           ) from None
                    w.known = c.size
                    self._dirty = True
                    continue
                self.m_requests.labels(name, "cosigned").inc()
                self._cosigned(w, target, sigs[0])
                return
            raise WitnessError(f"{name} kept answering 409")
        except (WitnessError, MirrorError, ValueError, RuntimeError) as e:
            # ValueError covers a proof the reader cannot make; RuntimeError a damaged store.
            if not isinstance(e, WitnessConflict):
                self.m_requests.labels(name, "failed").inc()
            self._unknown_origin(w.endpoint, self.origin, e)
            w.failures += 1
            w.retry_at = time.monotonic() + min(MAX_BACKOFF, self.interval * 2 ** w.failures)
            if str(e) != w.last_error:
                _log.warning("witness_failed", witness=name, url=w.endpoint.url, error=str(e),
                             size=target.size)
            w.last_error = str(e)
        finally:
            target.attempted.add(w.endpoint.vkey)
            w.task = None
            w.busy_with = None

    async def _ahead(self, w: _WitnessLink, old: int, target: _Target) -> _Target:
        """The target for a witness already at ``old``, beyond ``target``: the log's head.

        A witness ahead of this round's checkpoint is normal when another process of the log
        (or an earlier run whose state was not saved) submitted a newer one: it is brought the
        log's newest checkpoint instead, with a proof from its size. Only a witness ahead of the
        log's own tree means the log went back.
        """
        head = await self.log.head(0)
        if head is None or head.size < old:
            raise WitnessError(f"{w.endpoint.verifier.name} is at size {old}, beyond this log "
                               f"({head.size if head else 0}): was the log rolled back?")
        target.attempted.add(w.endpoint.vkey)
        return self._set_target(head)

    def _republish(self) -> None:
        pub = self._published
        best = max((t for t in self._targets.values() if self._meets(t)),
                   key=lambda t: t.size, default=None)
        merged = None if best is None else merge_signatures(best.note, best.cosigs.values())
        if best is not None and merged is not None and (
                pub is None or best.size > pub.size or (best.size == pub.size and (
                    not pub.witnessed or len(best.cosigs) > pub.cosignatures or (
                        # as many, some fresher (a refresh round): served at once
                        len(best.cosigs) == pub.cosignatures and merged != pub.note)))):
            pub = Published(merged, best.size, True, len(best.cosigs))
        elif (pub is None or not pub.witnessed) and self._current is not None and (
                pub is None or self._current.size >= pub.size):
            cur = self._current
            note = merge_signatures(cur.note, cur.cosigs.values()) if cur.cosigs else cur.note
            pub = Published(note, cur.size, False, len(cur.cosigs))
        if pub is not self._published:
            before = self._published
            if pub is not None and pub.witnessed and (
                    before is None or not before.witnessed or pub.size > before.size
                    or pub.cosignatures > before.cosignatures):
                # Logged again when a late cosignature joins: the log says what /checkpoint
                # serves, never fewer cosignatures than it carries.
                _log.info("witnessed_checkpoint", size=pub.size, cosignatures=pub.cosignatures,
                          witnesses=len(self.endpoints), quorum=self.policy.describe())
            self._published = pub
            self._dirty = True
        if pub is not None:
            self.m_published.set(pub.size if pub.witnessed else 0)
            self.m_cosigs.set(pub.cosignatures)

    # Persistence ------------------------------------------------------------------------------

    async def _save(self) -> None:
        """Save the witnesses' sizes and the witnessed checkpoint in the log's store."""
        pub = self._published
        await self.log.store.save_witness_state(WitnessState(
            {vkey: w.known for vkey, w in self._witnesses.items() if w.known is not None},
            pub.note if pub is not None and pub.witnessed else None))

    async def _load(self) -> None:
        """Adopt the stored state: witnesses' sizes, and the witnessed checkpoint if it is
        newer than (or as new as, with more cosignatures) the one served now.

        Followers call this every interval (the leader of several processes on one log
        writes the state), so it only ever moves forward."""
        state = await self.log.store.witness_state()
        if state is None:
            state = self._legacy_state()
            if state is None:
                return
            self._dirty = True  # into the store with the next save
        if state.published is not None and not state.published.startswith(
                self.origin.encode() + b"\n"):
            return  # saved for the log before a roll: none of it is this log's
        for vkey, size in state.sizes.items():
            if vkey in self._witnesses:
                known = self._witnesses[vkey].known
                self._witnesses[vkey].known = max(known or 0, size)
        pub = self._published
        note = state.published
        if note is not None and (pub is None or note != pub.note):
            got = await self._check_published(note)
            if got is not None and (pub is None or not pub.witnessed or got.size > pub.size
                                    or (got.size == pub.size  # as many: fresher (refreshed)
                                        and got.cosignatures >= pub.cosignatures)):
                self._published = got
                self.m_published.set(got.size)
                self.m_cosigs.set(got.cosignatures)

    def _legacy_state(self) -> WitnessState | None:
        """The state file of an older release (``state_path``), if there is one for this log."""
        if self.state_path is None or not self.state_path.exists():
            return None
        try:
            doc = json.loads(self.state_path.read_text(encoding="utf-8"))
            if doc.get("version") != 1 or doc.get("origin") != self.log.origin:
                raise ValueError("not this log's witnessing state")
            sizes = {vkey: item["size"] for vkey, item in doc.get("witnesses", {}).items()
                     if isinstance(item.get("size"), int)}
            note = doc.get("published")
        except (OSError, ValueError, AttributeError, TypeError) as e:
            _log.warning("witnessing_state_ignored", path=str(self.state_path), error=str(e))
            return None
        return WitnessState(sizes, note.encode("utf-8") if isinstance(note, str) else None)

    async def _check_published(self, note: bytes) -> Published | None:
        """A persisted witnessed checkpoint, if it still meets the policy and is of this tree."""
        try:
            cp, _ = open_checkpoint(note, self.log.verifier)
            cosigned = self.policy.cosigners(note, [self.log.verifier])
            if not self.policy.satisfied(cosigned):
                raise ValueError("its cosignatures no longer meet the witness policy")
            head = await self.log.head(0)
            if head is None or cp.size > head.size:
                raise ValueError("it is beyond the log's size")
            hashes = await self.log.reader.hashes(stack_coords(cp.size), cp.size)
            root = fold_right(list(hashes.values())) if cp.size else EMPTY_ROOT
            if root != cp.root_hash:
                raise ValueError("its root is not this log's root at its size")
        except (NoteError, ValueError, RuntimeError) as e:
            _log.warning("witnessed_checkpoint_ignored", error=str(e))
            return None
        return Published(note, cp.size, True, len(cosigned))
