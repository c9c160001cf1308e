"""Level 5 online: fetch the newest checkpoint and a consistency proof, and reconcile them with
what the verifier saw before.
"""

from __future__ import annotations

from ledger.client.http import FetchError, HttpClient
from ledger.client.tiles import LogSource
from ledger.core.checkpoint import open_checkpoint
from ledger.core.cosignature import LogVerifier
from ledger.core.note import NoteError
from ledger.core.tlog_proof import decode_proof_bundle
from notary.core.receipts import Receipt
from notary.core.verification import (
    check_witnesses,
    failed,
    passed,
    skipped,
)
from notary.verifier.inputs import log_base_url
from notary.verifier.report import Report, require_level
from notary.verifier.state import (
    ProofResult,
    Reconciler,
    Seen,
    StateFile,
    describe_pairs,
)
from notary.verifier.trust import Trust


async def _level5(report: Report, receipt: Receipt, proof: str | None,
                  log_key: LogVerifier | None, trust: Trust, fetcher: HttpClient | None,
                  state: StateFile | None, log_url: str | None) -> None:
    verdict = report.verdict
    cp = verdict.checkpoint
    if cp is None or log_key is None or proof is None:
        verdict.levels["consistency"] = skipped("no verified checkpoint to compare (level 3)")
        return
    if verdict.levels["witnesses"].status == "failed":
        verdict.levels["consistency"] = skipped(
            "the receipt's checkpoint does not meet the witness policy; it is neither compared "
            "nor remembered")
        return
    receipt_seen = Seen("receipt", cp, decode_proof_bundle(proof.encode()).checkpoint)

    stored: Seen | None = None
    if state is not None:
        entry = state.get(log_key.vkey)
        if entry is not None:
            try:
                stored_cp, _ = open_checkpoint(entry.checkpoint.encode(), log_key)
                stored = Seen("stored", stored_cp, entry.checkpoint.encode())
            except (NoteError, ValueError) as e:
                if entry.vkey:  # recorded under this very key: the file was altered
                    verdict.levels["consistency"] = failed(
                        f"the checkpoint stored for {cp.origin!r} in {state.path} does not "
                        f"verify under the trusted log key ({e}); the file was altered: remove "
                        "that entry to start over")
                    require_level(verdict, "consistency")
                    return
                # an older file's entry for the origin, naming no key: another log's
        other_keys = state.other_keys(log_key.vkey)
        if stored is None and other_keys:
            report.notes.append(
                f"{state.path} holds checkpoints of {cp.origin!r} under other log keys "
                f"({', '.join(other_keys)}): those are other logs of that name (a notary that "
                "started over has a new key), not compared with this one")

    latest: Seen | None = None
    problems: list[str] = []
    base = (log_url.rstrip("/") if log_url else None) or log_base_url(receipt)
    log = LogSource(base, fetcher, pipeline=False) if fetcher is not None and base else None
    if fetcher is None:
        problems.append("offline: the log's latest checkpoint and consistency proofs are not "
                        "fetched")
    elif base is None:
        problems.append("no http(s) log URL in the receipt (use --log-url)")
    else:
        try:
            assert log is not None
            try:
                latest = await _latest(log, log_key, trust)
            except NoteError:
                # The notary may have rolled to a new log since (docs/lifecycle.md): a frozen
                # log is served where its /v1/ledger's ``logs`` says.
                moved = None if log_url else await _listed_url(fetcher, base, receipt.origin)
                if moved is None:
                    raise
                base, log = moved, LogSource(moved, fetcher, pipeline=False)
                latest = await _latest(log, log_key, trust)
        except FetchError as e:
            if e.refused:
                verdict.levels["consistency"] = failed(f"the log's latest checkpoint: {e}")
                require_level(verdict, "consistency")
                return
            problems.append(f"the log's latest checkpoint could not be fetched: {e}")
        except _LatestUnusable as e:
            problems.append(str(e))
        except NoteError as e:
            verdict.levels["consistency"] = failed(
                f"the log at {base} serves a checkpoint that does not verify under the trusted "
                f"log key: {e}")
            require_level(verdict, "consistency")
            return

    report.latest = None if latest is None else latest.checkpoint
    reconciler = Reconciler(stored, receipt_seen, latest)
    proofs: dict[tuple[int, int], ProofResult] = {}
    if log is not None:
        for old, new in reconciler.proofs_needed():
            proofs[(old, new)] = await _consistency_proof(log, old, new)
    result = reconciler.finish(proofs)
    report.conflicts = result.conflicts

    if result.conflicts:
        verdict.levels["consistency"] = failed("; ".join(c.message for c in result.conflicts))
        require_level(verdict, "consistency")
        return
    others = [s for s in (stored, latest) if s is not None]
    unchecked = describe_pairs(result.unchecked)
    if others and all(result.connected(receipt_seen, s) for s in others):
        what = " and ".join(s.describe() for s in others)
        level = passed(f"consistent with {what}")
        if stored is not None:
            require_level(verdict, "consistency")
    elif stored is None and latest is None:
        level = skipped("; ".join([*problems, f"no checkpoint of {cp.origin!r} under this log "
                                              "key seen before"]))
    else:
        level = skipped("; ".join(p for p in [*problems, unchecked] if p))
    if problems and level.status == "passed":
        report.notes.extend(problems)
    verdict.levels["consistency"] = level

    newest = result.newest
    if fetcher is None:
        # Offline: the state file is read (a stored checkpoint still catches a rollback) but
        # never written, so an offline check leaves no file behind.
        if state is not None and newest is not None and newest.label != "stored":
            report.notes.append(f"offline: {state.path} is not updated")
        return
    if state is not None and newest is not None and state.remember(
            newest.checkpoint, newest.note, log_key.vkey):
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
