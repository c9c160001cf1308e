"""verify_tool_call: all five levels for one tool call, offline or online.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ledger.client.http import FetchError, HttpClient
from ledger.core.cosignature import LogVerifier
from ledger.core.note import NoteError, parse_note
from ledger.core.tlog_proof import ProofBundleError, decode_proof_bundle
from notary.core.cose_verification import check_cose
from notary.core.log_chain import ChainError
from notary.core.paths import receipt_path
from notary.core.receipts import Receipt
from notary.core.verification import (
    LevelResult,
    Verdict,
    failed,
    malformed_verdict,
    passed,
    skipped,
    verify_receipt,
)
from notary.verifier.chain import key_by_chain, notary_base
from notary.verifier.inputs import (
    MalformedReceipt,
    ToolCall,
    VerifierInputError,
    log_base_url,
    parse_receipt,
)
from notary.verifier.online import check_consistency, record_consistency
from notary.verifier.report import Report, require_level
from notary.verifier.state import (
    StateFile,
)
from notary.verifier.tile_proof import proof_from_tiles
from notary.verifier.trust import Retirement, Trust


def _select_log_key(receipt: Receipt, proof: str | None,
                    keys: Sequence[LogVerifier]) -> LogVerifier | LevelResult | None:
    """The trusted log key for the receipt's origin; a failed result when there is none.

    Several keys may share an origin (a rotated log key); the one that signed the proof's
    checkpoint is preferred.
    """
    if not keys:
        return None
    origin = receipt.origin
    candidates = [k for k in keys if k.name == origin]
    if not candidates:
        return failed(f"no trusted log key for origin {origin!r} (trusted: "
                      f"{', '.join(sorted({k.name for k in keys}))})")
    if len(candidates) > 1 and proof is not None:
        try:
            note = parse_note(decode_proof_bundle(proof.encode()).checkpoint)
            signers = {(s.name, s.key_id) for s in note.signatures}
            candidates.sort(key=lambda k: (k.name, k.key_id) not in signers)
        except (NoteError, ProofBundleError):
            pass
    return candidates[0]


async def _fetch_receipt(call: ToolCall, fetcher: HttpClient | None
                         ) -> tuple[Receipt | MalformedReceipt, str]:
    url = call.receipt_url
    if url is None:
        raise VerifierInputError("the tool result carries no receipt and no receipt_url; "
                                 "pass the receipt (--receipt)")
    if fetcher is None:
        raise VerifierInputError(f"the tool result carries no receipt, and offline it cannot be "
                                 f"fetched from {url}; pass it with --receipt")
    try:
        receipt = parse_receipt(await fetcher.get_json(url), f"the receipt from {url}")
    except FetchError as e:
        raise VerifierInputError(f"cannot fetch the receipt: {e}") from e
    return receipt, f"receipt fetched from {url}"


async def _fetch_proof(receipt: Receipt, receipt_url: str | None,
                       fetcher: HttpClient | None) -> tuple[str | None, str]:
    """The notary's current proof for a receipt (served with the receipt at its URL)."""
    base = log_base_url(receipt)
    url = receipt_url or (base + receipt_path(receipt.id) if base else None)
    if fetcher is None or url is None:
        return None, "the receipt has no proof and offline none can be fetched"
    try:
        fetched = await fetcher.get_json(url)
    except FetchError as e:
        return None, f"the receipt has no proof and none could be fetched: {e}"
    proof = fetched.get("proof") if isinstance(fetched, dict) else None
    if not isinstance(proof, str):
        return None, f"the receipt has no proof and {url} gave none"
    return proof, f"inclusion proof fetched from {url}"


def _check_meta(call: ToolCall, receipt: Receipt, verdict: Verdict) -> None:
    """Level 1 also covers the binding of the result's ``_meta`` to its receipt.

    ``_meta`` repeats ``id`` and ``call_sha256`` outside the signature; if they disagree with
    the receipt, the result was paired with someone else's receipt.
    """
    if verdict.levels.get("record", skipped("")).status != "passed":
        return
    signed = {"id": receipt.id, "call_sha256": receipt.call_sha256}
    if call.meta is not None:
        for key, value in signed.items():
            if key in call.meta and call.meta[key] != value:
                verdict.levels["record"] = failed(
                    f"the result's _meta {key} {call.meta[key]!r} differs from its receipt's "
                    f"{value!r}")
                return
    verdict.levels["record"] = passed(f"the call record hashes to call_sha256 "
                                      f"{receipt.call_sha256}")


async def _upgraded(call: ToolCall, receipt: Receipt, proof_text: str | None, trust: Trust,
                    fetcher: HttpClient | None, log_url: str | None, notes: list[str]
                    ) -> str | None:
    """``--upgrade``: the receipt's current proof from the notary (or, when it gives none,
    from the tiles at ``log_url``) if it verifies, else ``proof_text``; what happened goes to
    ``notes``."""
    if fetcher is None:
        raise VerifierInputError("--upgrade fetches the receipt's proof, which --offline "
                                 "forbids")
    fresh, note = await _fetch_proof(receipt, call.receipt_url, fetcher)
    if fresh is None and log_url is not None:
        # The notary gives none (it is gone, say): the proof into the checkpoint served at
        # --log-url (a mirror's), from its tiles; verified below like the notary's.
        fresh, from_tiles = await proof_from_tiles(receipt, log_url, fetcher)
        note = from_tiles if fresh is not None else f"{note}; {from_tiles}"
    if fresh is None:
        notes.append(f"not upgraded: {note.removeprefix('the receipt has no proof and ')}")
    elif fresh == proof_text:
        notes.append("upgrade: the notary serves the same proof (no newer witnessed "
                     "checkpoint covers the entry yet)")
    else:
        selected = _select_log_key(receipt, fresh, trust.log_keys)
        key = selected if isinstance(selected, LogVerifier) else None
        trial = verify_receipt(receipt, record=call.record, jwks=trust.jwks,
                               log_verifier=key, proof=fresh,
                               witness_policy=trust.witness_policy)
        if trial.levels.get("inclusion", skipped("")).status == "passed":
            proof_text = fresh
            notes.append(f"upgraded: {note}")
        else:
            notes.append(f"not upgraded: the fetched proof does not verify "
                         f"({trial.levels.get('inclusion', skipped('')).reason})")
    return proof_text


async def verify_tool_call(
    call: ToolCall,
    trust: Trust,
    *,
    fetcher: HttpClient | None = None,
    state: StateFile | None = None,
    log_url: str | None = None,
    upgrade: bool = False,
    cose: bytes | None = None,
) -> Report:
    """Check all five levels of one tool call.

    ``fetcher`` None means offline: nothing is fetched, level 5 decides only what needs no
    proof, and the state file is read but not written. ``state`` None means no memory (level
    5 then compares with the log's latest only). ``log_url`` overrides the log's base URL
    taken from the receipt's ``ledger.entry_url``. ``upgrade`` fetches the receipt's current
    proof from the notary first (``GET /v1/tool-calls/{id}``: into the newest witnessed
    checkpoint that covers it) and verifies with it when it verifies; ``report.proof`` is the
    proof used, so the upgraded receipt can be saved and later checked offline with its
    cosignatures. ``cose`` is an RFC 9942 COSE receipt of the same call, checked against the
    receipt and the trusted log keys as the report's ``cose`` line (needs no network). Raises
    :class:`VerifierInputError` for unusable inputs and
    :class:`VerifierStateError` for a state file that cannot be read or written.
    """
    notes: list[str] = []
    given = call.receipt
    if given is None:
        given, note = await _fetch_receipt(call, fetcher)
        notes.append(note)
    if isinstance(given, MalformedReceipt):
        verdict = malformed_verdict(given.problem)
        verdict.levels["witnesses"] = skipped("the receipt is malformed")
        verdict.levels["consistency"] = skipped("the receipt is malformed")
        return Report(verdict, given.raw, None, notes=notes,
                      cose=None if cose is None else failed("the receipt it goes with is "
                                                            "malformed"))
    receipt = given
    proof_text = receipt.proof
    if proof_text is None:
        proof_text, note = await _fetch_proof(receipt, call.receipt_url, fetcher)
        notes.append(note)

    chain_problem = None
    if fetcher is not None and trust.log_keys and all(k.name != receipt.origin
                                                      for k in trust.log_keys):
        trust, chain_problem = await _chained(receipt, trust, fetcher, notes)

    if upgrade:
        proof_text = await _upgraded(call, receipt, proof_text, trust, fetcher, log_url, notes)

    selected = _select_log_key(receipt, proof_text, trust.log_keys)
    log_key = selected if isinstance(selected, LogVerifier) else None
    verdict = verify_receipt(receipt, record=call.record, jwks=trust.jwks, log_verifier=log_key,
                             proof=proof_text, witness_policy=trust.witness_policy)
    if isinstance(selected, LevelResult) and "inclusion" in verdict.levels:
        verdict.levels["inclusion"] = selected if chain_problem is None else failed(
            f"{selected.reason}; following the chain of logs from a pinned key: "
            f"{chain_problem}")
    if fetcher is not None:
        verdict, proof_text = await _witnessed_proof(call, receipt, verdict, proof_text,
                                                     log_key, trust, fetcher, notes)
    _check_meta(call, receipt, verdict)
    report = Report(verdict, receipt, verdict.checkpoint, notes=notes, proof=proof_text)
    if cose is not None:
        report.cose = check_cose(receipt, cose, trust.log_keys, verdict.checkpoint)
    if trust.requires_witnesses:
        require_level(verdict, "witnesses")

    found = await check_consistency(receipt, verdict, proof_text, log_key, trust, fetcher,
                                    state, log_url)
    record_consistency(report, found, state, log_key, online=fetcher is not None)
    retired = trust.retired.get(receipt.origin)
    if retired is not None:
        _check_retired(report, retired)
    return report


async def _witnessed_proof(call: ToolCall, receipt: Receipt, verdict: Verdict,
                           proof_text: str | None, log_key: LogVerifier | None, trust: Trust,
                           fetcher: HttpClient, notes: list[str]
                           ) -> tuple[Verdict, str | None]:
    """The verdict and proof to keep when the receipt's own proof lacked the witness quorum.

    A proof issued with the receipt ends in the log's newest checkpoint, which witnesses cosign
    a little later; the notary upgrades a receipt's proof to its witnessed checkpoint once that
    covers the entry. Any such proof is verified in full."""
    witnesses = verdict.levels.get("witnesses")
    if witnesses is None or witnesses.status != "failed":
        return verdict, proof_text
    fresh, note = await _fetch_proof(receipt, call.receipt_url, fetcher)
    if fresh is None or fresh == proof_text:
        return verdict, proof_text
    retry = verify_receipt(receipt, record=call.record, jwks=trust.jwks, log_verifier=log_key,
                           proof=fresh, witness_policy=trust.witness_policy)
    if retry.levels.get("witnesses", witnesses).status != "passed":
        return verdict, proof_text
    notes.append(f"the receipt's own proof lacked the witness quorum: {note}")
    return retry, fresh


async def _chained(receipt: Receipt, trust: Trust, fetcher: HttpClient, notes: list[str]
                   ) -> tuple[Trust, str | None]:
    """No pinned key is of the receipt's log: its key followed from a pinned log's through
    the successor records (:mod:`notary.verifier.chain`), or why it could not be."""
    base = log_base_url(receipt)
    if base is None:
        return trust, "the receipt names no http(s) notary to read the logs from"
    try:
        chained = await key_by_chain(notary_base(base), trust.log_keys, receipt.origin, fetcher)
    except ChainError as e:
        return trust, str(e)
    notes.append(f"the key of log {receipt.origin!r} followed from the pinned key of "
                 f"{chained.pinned!r} through {chained.steps} successor record(s)")
    return replace(trust, log_keys=(*trust.log_keys, chained.key),
                   retired={**chained.retired, **trust.retired}), None


def _check_retired(report: Report, retired: Retirement) -> None:
    """A receipt of a log whose keys are retired (compromised): whoever holds them could sign
    any checkpoint, so only the log's final checkpoint, signed at the roll and served (and
    witnessed) since, vouches for it: level 5 must have found the receipt's checkpoint
    consistent with that one. Required, and failed otherwise."""
    verdict = report.verdict
    level = verdict.levels.get("consistency", skipped(""))
    latest = report.latest
    if level.status == "passed" and latest is not None and latest.size == retired.final_size:
        report.notes.append(f"{retired.reason()}: it is")
    else:
        why = (f"the log serves a checkpoint of size {latest.size}"
               if level.status == "passed" and latest is not None else level.reason)
        verdict.levels["consistency"] = failed(f"{retired.reason()}; {why}")
    require_level(verdict, "consistency")
