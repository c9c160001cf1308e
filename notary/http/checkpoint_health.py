"""Whether the log has produced a validly signed checkpoint lately: what ``GET
/healthz/checkpoint`` and the ``notary_checkpoint_timestamp_seconds`` metric report.

A checkpoint note carries no time of the log's (a C2SP checkpoint is origin, size and root,
and the log's Ed25519 signature is deterministic: re-signing an idle tree gives the same
bytes), and the sequencer signs only when it commits entries. So "produced within a bound"
is read from what is signed with a time:

- with witnesses (or mirrors), the checkpoint ``/checkpoint`` serves must meet the witness
  policy, and its time is when the quorum last vouched for it: the newest T such that the
  cosignatures timestamped T or later meet the quorum
  (:meth:`ledger.core.tlog_policy.TlogPolicy.quorum_time`). The witnessing job submits an idle
  log's checkpoint again every ``witness_refresh`` seconds, so an idle log stays fresh while
  its witnesses answer, and goes stale when they stop (or when the log grows and they never
  cosign the new size);
- without witnesses, the newest checkpoint must verify under the log's key, and its time is
  when it was committed (kept in the store, so any frontend or worker answers alike): an idle
  unwitnessed log goes stale once it has taken no write for the bound.

Either way a writer that refuses or halted produces no new checkpoint, which is stale too.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import NoteError
from ledger.core.tlog_policy import TlogPolicyNotMet
from ledger.http.routes import LOG
from ledger.log.sequencer import WriterState
from notary.http.appkeys import NOTARY, WITNESSING
from notary.serving.config import Settings

__all__ = ["Freshness", "default_max_age", "freshness"]

UNWITNESSED_MAX_AGE = 3600.0
"""The default bound (seconds) for a log without witnesses: an hour without a write."""


@dataclass(frozen=True)
class Freshness:
    """The checkpoint served and since when it is vouched for."""

    size: int
    witnessed: bool
    at: float | None = None
    """UNIX seconds: the quorum's cosigning time, or the commit time without witnesses."""
    problem: str | None = None
    """Why no checkpoint is fresh whatever the bound (None: compare ``at`` with it)."""


def default_max_age(settings: Settings) -> float:
    """The bound when a check gives none: with witnesses, two refresh periods plus a round
    (one missed refresh is tolerated); without, :data:`UNWITNESSED_MAX_AGE`."""
    if settings.witnesses or settings.witness_policy or settings.mirrors:
        return 2 * settings.witness_refresh + settings.witness_interval + settings.witness_timeout
    return UNWITNESSED_MAX_AGE


async def freshness(app: web.Application) -> Freshness:
    """What this process knows of the newest checkpoint served (from the store: any worker)."""
    log = app[LOG]
    head = await log.head()
    if head is None:
        return Freshness(0, False, problem="the log has no checkpoint yet")
    witnessing = app.get(WITNESSING)
    stopped = _writer_problem(app)
    if witnessing is None:
        try:
            open_checkpoint(head.note, log.verifier)
        except NoteError as e:
            return Freshness(head.size, False, problem=f"the newest checkpoint does not verify "
                             f"under the log's key: {e}")
        return Freshness(head.size, False, at=head.record.time, problem=stopped)
    note, _ = witnessing.checkpoint_for(head)
    try:
        cp, at = witnessing.policy.quorum_time(note, [log.verifier])
    except (TlogPolicyNotMet, NoteError) as e:
        return Freshness(head.size, False, problem=f"no checkpoint meets the witness policy "
                         f"({witnessing.policy.describe()}) yet: {e}")
    return Freshness(cp.size, True, at=float(at), problem=stopped)


def _writer_problem(app: web.Application) -> str | None:
    status = app[NOTARY].sequencer.status
    if status.state is WriterState.HALTED:
        return f"writes are stopped, no checkpoint can be signed: {status.reason}"
    if status.state is WriterState.REFUSING:
        return f"writes are refused, no checkpoint can be signed: {status.reason}"
    return None
