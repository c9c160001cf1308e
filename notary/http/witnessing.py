"""Witnessing in ``notary serve``: the notary's settings turned into a running
:class:`ledger.jobs.witnessing.Witnessing`, started and stopped with the application.

Mirrors (``--mirror URL=VKEY``) run in the same job as cosigners of another kind: with
``--witness``/``--witness-quorum`` they count toward the quorum like witnesses (k of witnesses
and mirrors together; a majority by default); with ``--witness-policy`` a mirror counts where a
``witness`` line has its key (see :func:`ledger.jobs.witnessing.endpoints_from_policy`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from ledger.core.note import Ed25519Signer
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tlog_policy import TlogPolicy, TlogPolicyError, parse_tlog_policy
from ledger.http.routes import LOG, PQ_CHECKPOINTS, PUBLISHED_CHECKPOINT, PUBLISHED_FINAL
from ledger.jobs.final_checkpoint import FrozenLog, FrozenLogs
from ledger.jobs.lease import FileLease, JobRunner, Lease
from ledger.jobs.witnessing import (
    STATE_FILE,
    WitnessConfigError,
    WitnessEndpoint,
    Witnessing,
    endpoints_from_policy,
    parse_mirror_spec,
    parse_witness_spec,
)
from ledger.log.facade import Head, Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from notary.http.appkeys import METRICS, NOTARY, WITNESSING
from notary.serving.config import ConfigError, Settings
from notary.serving.service import Notary

_log = structlog.get_logger("notary.witnessing")


def _policy(settings: Settings) -> TlogPolicy | None:
    """The ``witness_policy`` file (C2SP tlog-policy), when one is configured."""
    if not settings.witness_policy:
        return None
    if settings.witnesses or settings.witness_quorum:
        raise ConfigError("witness_policy replaces witnesses and witness_quorum: give one or "
                          "the other")
    path = Path(settings.witness_policy).expanduser()
    try:
        return parse_tlog_policy(path.read_bytes())
    except OSError as e:
        raise ConfigError(f"cannot read the witness policy {path}: {e}") from None
    except TlogPolicyError as e:
        raise ConfigError(f"the witness policy {path} is not valid: {e}") from None


def _endpoints(settings: Settings) -> list[WitnessEndpoint]:
    """Witnesses and mirrors, as configured (the policy's witnesses, or ``witnesses``)."""
    try:
        mirrors = [parse_mirror_spec(s) for s in settings.mirrors]
        policy = _policy(settings)
        if policy is not None:
            return endpoints_from_policy(policy, mirrors)
        return [parse_witness_spec(s) for s in settings.witnesses] + mirrors
    except WitnessConfigError as e:
        raise ConfigError(str(e)) from None


def _quorum(settings: Settings, endpoints: Sequence[WitnessEndpoint]) -> int:
    quorum = settings.witness_quorum or len(endpoints) // 2 + 1
    if not 1 <= quorum <= len(endpoints):
        raise ConfigError(f"witness_quorum {quorum} must be 1..{len(endpoints)} (the number of "
                          "witnesses and mirrors), or 0 for a majority")
    if settings.witness_interval <= 0 or settings.witness_timeout <= 0:
        raise ConfigError("witness_interval and witness_timeout must be positive")
    keys = [e.verifier.public_key for e in endpoints]
    if len(set(keys)) != len(keys):
        raise ConfigError("the same witness (or mirror) key is configured twice")
    return quorum


def _lease(log: Log, settings: Settings) -> Lease:
    """Who submits: one process of the log at a time. A database that serves processes on
    several machines has its own lease (PostgreSQL: an advisory lock); otherwise a lock file in
    the data directory, which every worker of ``--workers`` shares."""
    make = getattr(log.store, "lease", None)
    if make is not None:
        lease: Lease = make("witnessing")
        return lease
    return FileLease(settings.data / "witnessing.lock")


def witness_policy(settings: Settings) -> tuple[int, list[WitnessEndpoint]]:
    """(quorum, witnesses and mirrors) as configured; (0, []) without any. Checked at
    startup."""
    endpoints = _endpoints(settings)
    return (_quorum(settings, endpoints) if endpoints else 0), endpoints


def from_settings(log: Log, settings: Settings, registry: CollectorRegistry | None = None,
                  pq: PostQuantumCheckpoints | None = None,
                  frozen_logs: FrozenLogs | None = None) -> Witnessing:
    """A :class:`Witnessing` for the notary's settings (quorum 0 means a majority).

    With a witness policy, its quorum expression decides what is published, and its ``log``
    lines (if any) must include one of this log's keys (Ed25519, or the ML-DSA-44 one when it
    dual-signs): a policy written for another log is a mistake to stop at, not to run with.
    """
    endpoints = _endpoints(settings)
    policy = _policy(settings)
    ours = {log.verifier.vkey, *([pq.vkey] if pq is not None else [])}
    try:
        if policy is not None:
            if policy.logs and all(k.vkey not in ours for k, _ in policy.logs):
                raise ConfigError("the witness policy lists log keys, but not this log's "
                                  f"({', '.join(sorted(ours))})")
            return Witnessing(log, endpoints, policy=policy,
                              interval=settings.witness_interval,
                              timeout=settings.witness_timeout,
                              refresh=settings.witness_refresh,
                              state_path=settings.data / STATE_FILE, registry=registry, pq=pq,
                              frozen_logs=frozen_logs)
        return Witnessing(log, endpoints, quorum=_quorum(settings, endpoints),
                          interval=settings.witness_interval,
                          timeout=settings.witness_timeout, refresh=settings.witness_refresh,
                          state_path=settings.data / STATE_FILE,
                          registry=registry, pq=pq, frozen_logs=frozen_logs)
    except WitnessConfigError as e:
        raise ConfigError(str(e)) from None


def _frozen_logs(notary: Notary, pq: PostQuantumCheckpoints | None) -> FrozenLogs:
    """The notary's frozen logs for the final-checkpoint job, each dual-signed under its own
    ML-DSA-44 key when checkpoints are."""
    lines: dict[str, PostQuantumCheckpoints] = {}

    async def frozen_logs() -> list[FrozenLog]:
        out = []
        for record in await notary.logs.refresh():
            log = None if record.state != "frozen" else await notary.logs.frozen(record.origin)
            if log is None:
                continue
            line = None
            own = notary.logs.own_signer(record)
            # (a retired root's log: its final checkpoint was stored dual-signed by the roll)
            if pq is not None and own is not None:
                line = lines.get(record.origin)
                if line is None:
                    line = lines[record.origin] = PostQuantumCheckpoints(
                        SubtreeCosignatureSigner.derived_from(own), record.origin)
            out.append(FrozenLog(log, line, record.frozen_at or 0.0))
        return out

    return frozen_logs


async def _switch_log(notary: Notary, witnessing: Witnessing, active: str) -> None:
    """Move ``witnessing`` to the notary's new active log (origin ``active``); the log before
    it goes to the final-checkpoint job."""
    try:
        n = notary.logs.number_of(active)
        if n is None:
            await notary.logs.refresh(force=True)
            n = notary.logs.number_of(active)
        record = None if not n else notary.logs.record(n - 1)
        await witnessing.switch_log(None if record is None else record.origin)
    except asyncio.CancelledError:
        raise
    except Exception:  # the notary goes on serving; witnessing says what went wrong
        _log.exception("witnessing_switch_failed")


def witnessing_context(settings: Settings
                       ) -> Callable[[web.Application], AsyncIterator[None]]:
    """The aiohttp cleanup_ctx for witnessing, to run after the notary's own (which opens the
    log); a no-op without witnesses.

    The witness settings are checked here, when the application is built: a mistake then stops
    ``notary serve`` before it opens anything, with the ConfigError as the message.
    """
    endpoints = _endpoints(settings)
    if endpoints and not settings.witness_policy:
        _quorum(settings, endpoints)

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        if not endpoints:
            yield
            return
        notary = app[NOTARY]
        witnessing = from_settings(app[LOG], settings, app[METRICS].registry,
                                   pq=app.get(PQ_CHECKPOINTS),
                                   frozen_logs=_frozen_logs(notary, app.get(PQ_CHECKPOINTS)))
        await witnessing.start(lead=False)
        app[WITNESSING] = witnessing
        app[PUBLISHED_CHECKPOINT] = witnessing.checkpoint_for
        app[PUBLISHED_FINAL] = witnessing.final_for
        signed = notary.frozen_note

        def frozen_note(log: Log, head: Head) -> bytes:
            # A frozen log's receipts carry its final checkpoint's cosignatures too.
            return witnessing.final_for(log.origin, head.note if signed is None
                                        else signed(log, head))[0]

        notary.frozen_note = frozen_note

        def witnessed(head: Head) -> tuple[int, bytes] | None:
            return witnessing.witnessed()

        app[NOTARY].published_checkpoints.insert(0, witnessed)
        switching: set[asyncio.Task[None]] = set()

        def rolled(signer: Ed25519Signer) -> None:
            # Told synchronously by the writer; the job's switch runs beside it.
            task = asyncio.create_task(_switch_log(app[NOTARY], witnessing, signer.name),
                                       name="witnessing: switch log")
            switching.add(task)
            task.add_done_callback(switching.discard)

        app[NOTARY].on_log_switch.append(rolled)

        async def submit() -> None:
            # Held by one process of the log at a time (the lease); the others follow.
            await witnessing.lead()
            try:
                await asyncio.Event().wait()
            finally:
                await witnessing.follow()

        runner = JobRunner("witnessing", _lease(app[LOG], settings), submit,
                           retry=min(settings.witness_interval, 2.0))
        job = asyncio.create_task(runner.run(), name="witnessing lease")
        _log.info("witnessing_started",
                  witnesses=[e.url for e in witnessing.endpoints if not e.mirror],
                  mirrors=[e.url for e in witnessing.endpoints if e.mirror],
                  quorum=witnessing.policy.describe(), interval=witnessing.interval)
        try:
            yield
        finally:
            notary.frozen_note = signed
            app[NOTARY].published_checkpoints.remove(witnessed)
            app[NOTARY].on_log_switch.remove(rolled)
            for task in switching:
                task.cancel()
            await asyncio.gather(*switching, return_exceptions=True)
            job.cancel()
            await asyncio.gather(job, return_exceptions=True)
            await witnessing.close()

    return ctx
