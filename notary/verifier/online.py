"""Level 5 online: fetch the newest checkpoint and a consistency proof, and reconcile them with
what the verifier saw before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.client.http import FetchError, HttpClient
from ledger.client.tiles import LogSource
from ledger.core.checkpoint import Checkpoint, open_checkpoint
from ledger.core.cosignature import LogVerifier
from ledger.core.note import NoteError
from ledger.core.tlog_proof import decode_proof_bundle
from notary.core.receipts import Receipt
from notary.core.verification import (
    LevelResult,
    Verdict,
    check_witnesses,
    failed,
    passed,
    skipped,
)
from notary.verifier.inputs import log_base_url
from notary.verifier.report import Report, require_level
from notary.verifier.state import (
    Conflict,
    ProofResult,
    Reconciler,
    Reconciliation,
    Seen,
    StateFile,
    describe_pairs,
)
from notary.verifier.trust import Trust


@dataclass
class Consistency:
    """What level 5 found, before anything is written: the level and whether the verdict
    requires it, the notes for the report, the fork or rollback evidence (None when the
    checkpoints were never reconciled), the newest checkpoint seen, to remember, and the log's
    latest checkpoint as fetched and verified (a frozen log's: its final)."""

    level: LevelResult
    required: bool = False
    notes: list[str] = field(default_factory=list)
    conflicts: list[Conflict] | None = None
    newest: Seen | None = None
    latest: Checkpoint | None = None


def _failure(reason: str, notes: list[str] | None = None) -> Consistency:
    """A failed level 5: the verdict then requires it (a rollback or fork is never optional)."""
    return Consistency(failed(reason), required=True, notes=notes or [])


async def check_consistency(receipt: Receipt, verdict: Verdict, proof: str | None,
                            log_key: LogVerifier | None, trust: Trust,
                            fetcher: HttpClient | None, state: StateFile | None,
                            log_url: str | None) -> Consistency:
    """Level 5, the rollback and fork check: the receipt's checkpoint against the one stored
    for its log (read, never written here) and the log's latest (fetched when online), with
    the consistency proofs between them. :func:`record_consistency` applies the result."""
    cp = verdict.checkpoint
    if cp is None or log_key is None or proof is None:
        return Consistency(skipped("no verified checkpoint to compare (level 3)"))
    if verdict.levels["witnesses"].status == "failed":
        return Consistency(skipped(
            "the receipt's checkpoint does not meet the witness policy; it is neither compared "
            "nor remembered"))
    receipt_seen = Seen("receipt", cp, decode_proof_bundle(proof.encode()).checkpoint)
    notes: list[str] = []
    stored: Seen | None = None
    if state is not None:
        stored, altered, note = _stored(state, log_key, cp)
        if altered is not None:
            return _failure(altered)
        notes.extend(note)
    latest = await _fetch_latest(receipt, log_key, trust, fetcher, log_url)
    if isinstance(latest, str):
        return _failure(latest, notes)
    reconciler = Reconciler(stored, receipt_seen, latest.seen)
    proofs: dict[tuple[int, int], ProofResult] = {}
    if latest.log is not None:
        for old, new in reconciler.proofs_needed():
            proofs[(old, new)] = await _consistency_proof(latest.log, old, new)
    result = reconciler.finish(proofs)
    if result.conflicts:
        found = _failure("; ".join(c.message for c in result.conflicts), notes)
    else:
        found = _judged(result, receipt_seen, stored, latest.seen, latest.problems, cp.origin)
        found.notes[:0] = notes
        found.newest = result.newest
    found.conflicts = result.conflicts
    found.latest = None if latest.seen is None else latest.seen.checkpoint
    return found


def _stored(state: StateFile, log_key: LogVerifier, cp: Checkpoint
            ) -> tuple[Seen | None, str | None, list[str]]:
    """The checkpoint stored for this log: (it, why the file was altered, notes)."""
    stored: Seen | None = None
    entry = state.get(log_key.vkey)
    if entry is not None:
        try:
            stored_cp, _ = open_checkpoint(entry.checkpoint.encode(), log_key)
            stored = Seen("stored", stored_cp, entry.checkpoint.encode())
        except (NoteError, ValueError) as e:
            if entry.vkey:  # recorded under this very key: the file was altered
                return None, (
                    f"the checkpoint stored for {cp.origin!r} in {state.path} does not "
                    f"verify under the trusted log key ({e}); the file was altered: remove "
                    "that entry to start over"), []
            # an older file's entry for the origin, naming no key: another log's
    other_keys = state.other_keys(log_key.vkey)
    if stored is None and other_keys:
        return None, None, [
            f"{state.path} holds checkpoints of {cp.origin!r} under other log keys "
            f"({', '.join(other_keys)}): those are other logs of that name (a notary that "
            "started over has a new key), not compared with this one"]
    return stored, None, []


@dataclass
class _Latest:
    """The log's latest checkpoint (None when not fetched), where the log is served, and
    why the latest checkpoint is missing when it is."""

    seen: Seen | None = None
    log: LogSource | None = None
    problems: list[str] = field(default_factory=list)


async def _fetch_latest(receipt: Receipt, log_key: LogVerifier, trust: Trust,
                        fetcher: HttpClient | None, log_url: str | None) -> _Latest | str:
    """The log's latest checkpoint, or the reason level 5 fails (a log that refused to
    answer, or serves a checkpoint its key did not sign)."""
    base = (log_url.rstrip("/") if log_url else None) or log_base_url(receipt)
    if fetcher is None:
        return _Latest(problems=["offline: the log's latest checkpoint and consistency "
                                 "proofs are not fetched"])
    if base is None:
        return _Latest(problems=["no http(s) log URL in the receipt (use --log-url)"])
    log = LogSource(base, fetcher, pipeline=False)
    try:
        try:
            return _Latest(await _latest(log, log_key, trust), log)
        except NoteError:
            # The notary may have rolled to a new log since (docs/lifecycle.md): a frozen
            # log is served where its /v1/ledger's ``logs`` says.
            moved = None if log_url else await _listed_url(fetcher, base, receipt.origin)
            if moved is None:
                raise
            base, log = moved, LogSource(moved, fetcher, pipeline=False)
            return _Latest(await _latest(log, log_key, trust), log)
    except FetchError as e:
        if e.refused:
            return f"the log's latest checkpoint: {e}"
        return _Latest(log=log,
                       problems=[f"the log's latest checkpoint could not be fetched: {e}"])
    except _LatestUnusable as e:
        return _Latest(log=log, problems=[str(e)])
    except NoteError as e:
        return (f"the log at {base} serves a checkpoint that does not verify under the "
                f"trusted log key: {e}")


def _judged(result: Reconciliation, receipt_seen: Seen, stored: Seen | None,
            latest: Seen | None, problems: list[str], origin: str) -> Consistency:
    """Level 5 when no conflict was found: passed when every other checkpoint seen is
    proven consistent with the receipt's, else skipped with what could not be checked."""
    others = [s for s in (stored, latest) if s is not None]
    if others and all(result.connected(receipt_seen, s) for s in others):
        what = " and ".join(s.describe() for s in others)
        # A problem fetching is worth a note when the level passed all the same.
        return Consistency(passed(f"consistent with {what}"), required=stored is not None,
                           notes=list(problems))
    if stored is None and latest is None:
        return Consistency(skipped("; ".join([*problems, f"no checkpoint of {origin!r} under "
                                                         "this log key seen before"])))
    unchecked = describe_pairs(result.unchecked)
    return Consistency(skipped("; ".join(p for p in [*problems, unchecked] if p)))


def record_consistency(report: Report, found: Consistency, state: StateFile | None,
                       log_key: LogVerifier | None, online: bool) -> None:
    """Put level 5's result into ``report`` and remember the newest checkpoint seen in
    ``state`` (online only: an offline check reads the state file, for a stored checkpoint
    still catches a rollback, but never writes it, so it leaves no file behind)."""
    verdict = report.verdict
    if found.required:
        require_level(verdict, "consistency")
    verdict.levels["consistency"] = found.level
    report.notes.extend(found.notes)
    report.latest = found.latest
    if found.conflicts is not None:
        report.conflicts = found.conflicts
    newest, cp = found.newest, verdict.checkpoint
    if state is None or newest is None or log_key is None or cp is None:
        return
    if not online:
        if newest.label != "stored":
            report.notes.append(f"offline: {state.path} is not updated")
        return
    if state.remember(newest.checkpoint, newest.note, log_key.vkey):
        report.notes.append(f"remembered {newest.describe()} as the newest checkpoint seen for "
                            f"{cp.origin!r} in {state.path}")


class _LatestUnusable(Exception):
    """The log's latest checkpoint verifies under the log key but misses the witness quorum."""


async def _latest(log: LogSource, log_key: LogVerifier, trust: Trust) -> Seen:
    """The log's latest checkpoint, verified under the log key and the witness policy.

    One without the witness quorum is not used (a log may serve a new checkpoint before its
    witnesses cosign it; that is not evidence of anything) but one the log key did not sign is
    an error the caller reports as a failure.
    """
    note = await log.checkpoint()
    latest, _ = open_checkpoint(note, log_key)
    policy = trust.witness_policy
    if policy is not None and policy.requires_cosignatures:
        level = check_witnesses(note, log_key, policy)
        if level.status != "passed":
            raise _LatestUnusable(
                f"the log's latest checkpoint (size {latest.size}) does not meet the witness "
                f"policy and is not used: {level.reason}")
    return Seen("latest", latest, note)


async def _consistency_proof(log: LogSource, old: int, new: int) -> ProofResult:
    """The log's proof, or why there is none: ``refused`` when it answered without one."""
    try:
        return ProofResult(proof=tuple(await log.consistency_from_api(old, new)))
    except FetchError as e:
        if e.status == 404:
            # No proof API: a static tlog-tiles mirror (``--publish``). The tiles hold the
            # same hashes; the proof is checked against both roots all the same.
            try:
                return ProofResult(proof=tuple(await log.consistency_from_tiles(old, new)))
            except FetchError as t:
                return ProofResult(problem=f"{e}; and from tiles: {t}",
                                   refused=e.refused and t.refused)
        return ProofResult(problem=str(e), refused=e.refused)


async def _listed_url(fetcher: HttpClient, base: str, origin: str) -> str | None:
    """Where the notary at ``base`` serves the log ``origin``, from its ``/v1/ledger``'s
    ``logs`` (None when it lists no such log, or cannot be asked)."""
    try:
        ledger = await fetcher.get_json(base + "/v1/ledger")
    except FetchError:
        return None
    logs = ledger.get("logs") if isinstance(ledger, dict) else None
    for entry in logs if isinstance(logs, list) else []:
        if isinstance(entry, dict) and entry.get("origin") == origin:
            url = entry.get("url")
            if isinstance(url, str) and url.startswith(("http://", "https://")):
                return url.rstrip("/")
    return None
