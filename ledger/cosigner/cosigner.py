"""What a witness and a mirror share: their keys, the logs they follow, C2SP tlog-witness's
``add-checkpoint`` and ``sign-subtree``, and the checkpoint they serve to monitors.

``add-checkpoint`` checks, in the spec's order: the body's form (else 400), the origin is known
(else 404), a trusted key of the log signed it (else 403); then the state runs the compare step
(:func:`ledger.core.witness_protocol.decide`: ``old`` not above the size, else 400; ``old`` the
size it holds, else 409 with that size as ``text/x.tlog.size``; the consistency proof, else
422; at equal sizes equal roots, else 409) and persists the outcome in one durable transaction,
cosigning inside it when it cosigns. Requests for one origin are handled one at a time, and the
cosignatures leave only after the commit. The two cosigners differ only in their state
(:class:`CosignerState`): a witness's is the checkpoint it cosigned, a mirror's the pending
checkpoint, which it accepts without signing.

``sign-subtree`` (served when the cosigner holds an ML-DSA-44 key, the only kind that can sign
a subtree) checks, in this order: the body's form and that ``[start, end)`` is a non-empty valid
subtree ending within the reference checkpoint (else 400, before anything is verified); the
origin is known (else 404); the reference checkpoint carries a valid cosignature of one of this
cosigner's keys (else 403), which is all it needs to carry, since the cosigner only ever
cosigned checkpoints consistent with its view; and the subtree consistency proof (else 422). It
answers with a subtree/v1 signature by each ML-DSA-44 key, timestamp 0.

Other answers are ``text/plain`` with a one-line reason: this is the witness protocol, not the
notary's JSON API, and Go clients show the body as is.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import structlog
from structlog.typing import FilteringBoundLogger

from ledger.core.checkpoint import Checkpoint, parse_checkpoint_text
from ledger.core.note import Note, NoteError, NoteSignature, NoteVerifier, open_note, parse_note
from ledger.core.proofs import ProofError
from ledger.core.subtree import is_valid_subtree, verify_subtree_consistency
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.witness_protocol import (
    SIZE_CONTENT_TYPE,
    AddCheckpointRequest,
    CheckpointDecision,
    Outcome,
    ProtocolError,
    SignSubtreeRequest,
    format_cosignatures,
    format_size,
    parse_add_checkpoint,
    parse_sign_subtree,
)

__all__ = ["Cosign", "Cosigner", "CosignerAnswer", "CosignerState", "Submitted",
           "WitnessSigner", "origin_hash"]

class WitnessSigner(Protocol):
    """A cosigner's key: Ed25519 cosignature/v1 (``CosignatureSigner``) or ML-DSA-44
    subtree/v1 (``SubtreeCosignatureSigner``)."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def verifier_key_text(self) -> str: ...

    def verifier(self) -> NoteVerifier: ...

    def cosign(self, checkpoint_text: str, timestamp: int) -> NoteSignature: ...


#: The cosigning callback a state gets: a checkpoint's note text in, the cosigner's lines out.
Cosign = Callable[[str], list[NoteSignature]]


def origin_hash(origin: str) -> str:
    """The path segment of a log in monitoring URLs: lowercase hex SHA-256 of the origin."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CosignerAnswer:
    """One HTTP answer of a cosigner, independent of aiohttp (so it can be tested directly)."""

    status: int
    body: bytes
    content_type: str = "text/plain"

    @classmethod
    def text(cls, status: int, message: str) -> CosignerAnswer:
        return cls(status, message.encode("utf-8") + b"\n")


@dataclass(frozen=True)
class Submitted:
    """An ``add-checkpoint`` request whose log signatures verified: what a state compares with
    what it holds, and persists."""

    request: AddCheckpointRequest
    checkpoint: Checkpoint
    #: The checkpoint's text with the log signature lines that verified (and only those).
    verified: Note
    #: The request body as sent (kept as evidence when refused).
    body: bytes


class CosignerState(Protocol):
    """A cosigner's durable memory of the logs it follows."""

    async def add_checkpoint(self, submitted: Submitted, cosign: Cosign
                             ) -> tuple[CheckpointDecision, list[NoteSignature]]:
        """Run :func:`~ledger.core.witness_protocol.decide` against the checkpoint held for
        the origin and persist the outcome, in one durable transaction; return the decision
        and the lines to answer a cosigned checkpoint with (none from a state that accepts
        without signing), once the transaction is durable."""
        ...

    async def served(self, origin: str) -> bytes | None:
        """The checkpoint served to monitors for ``origin``, log signatures and this
        cosigner's cosignatures included, or None."""
        ...


class Cosigner:
    """Keys, logs and a state; the witness and the mirror build on it."""

    #: The 404 of ``GET /<origin hash>/checkpoint`` for a log with nothing served yet.
    nothing_served = "this cosigner holds no checkpoint of that log"

    def __init__(self, signers: Sequence[WitnessSigner],
                 logs: Mapping[str, Sequence[NoteVerifier]], state: CosignerState, *,
                 role: str, clock: Callable[[], float] = time.time) -> None:
        if not logs:
            raise ValueError(f"a {role} needs at least one log to follow")
        if not signers:
            raise ValueError(f"a {role} needs at least one key")
        self.role = role
        self.signers = list(signers)
        self.subtree_signers = [s for s in self.signers
                                if isinstance(s, SubtreeCosignatureSigner)]
        self.own_keys = [s.verifier() for s in self.signers]
        self.logs = {origin: list(keys) for origin, keys in logs.items()}
        self.origins = {origin_hash(origin): origin for origin in self.logs}
        self.state = state
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._log: FilteringBoundLogger = structlog.get_logger(f"ledger.{role}")

    def _cosign(self, text: str) -> list[NoteSignature]:
        timestamp = int(self.clock())
        return [s.cosign(text, timestamp) for s in self.signers]

    async def add_checkpoint(self, body: bytes) -> CosignerAnswer:
        """Handle one ``add-checkpoint`` body; never raises for bad input (every refusal is an
        CosignerAnswer)."""
        parsed = _parsed(parse_add_checkpoint, body)
        if isinstance(parsed, CosignerAnswer):
            return parsed
        req, note, cp = parsed
        verifiers = self.logs.get(cp.origin)
        if verifiers is None:
            return CosignerAnswer.text(404, f"unknown log origin {cp.origin[:200]!r}")
        try:
            _, log_sigs = open_note(req.checkpoint, verifiers)
        except NoteError as e:  # unverified, invalid or ambiguous: no trusted signature
            return CosignerAnswer.text(403, "checkpoint is not signed by a trusted key of the "
                                            f"log: {e}")
        self._signed_by_log(cp.origin, note.signatures, verifiers)
        submitted = Submitted(req, cp, Note(note.text, tuple(log_sigs)), body)
        async with self._locks.setdefault(cp.origin, asyncio.Lock()):
            decision, sigs = await self.state.add_checkpoint(submitted, self._cosign)
        return self._answer(submitted, decision, sigs)

    def _signed_by_log(self, origin: str, signatures: Sequence[NoteSignature],
                       verifiers: Sequence[NoteVerifier]) -> None:
        """Called with every checkpoint a trusted key of the log signed, before the state
        sees it (the mirror says when a line is by a key it was not given)."""

    def _answer(self, submitted: Submitted, decision: CheckpointDecision, sigs: list[NoteSignature]
                ) -> CosignerAnswer:
        cp, old = submitted.checkpoint, submitted.request.old
        if decision.outcome is Outcome.COSIGN:
            # The state is durable: the cosignatures may leave. A mirror's pending checkpoint
            # is accepted unsigned, with an empty 200 (tlog-mirror).
            if not sigs:
                return CosignerAnswer(200, b"", "text/plain; charset=utf-8")
            self._log.debug("cosigned", origin=cp.origin, size=cp.size, old=old)
            return CosignerAnswer(200, format_cosignatures(sigs), "text/plain; charset=utf-8")
        if decision.evidence:
            self._log.warning("refused_signed_checkpoint", origin=cp.origin, size=cp.size,
                              old=old, status=decision.outcome.value, reason=decision.reason)
        if decision.outcome is Outcome.CONFLICT:
            return CosignerAnswer(409, format_size(decision.known), SIZE_CONTENT_TYPE)
        return CosignerAnswer.text(decision.outcome.value, decision.reason)

    async def sign_subtree(self, body: bytes) -> CosignerAnswer:
        """Handle one ``sign-subtree`` body; never raises for bad input."""
        parsed = _parsed(parse_sign_subtree, body)
        if isinstance(parsed, CosignerAnswer):
            return parsed
        req, _, cp = parsed
        if req.start == req.end or not is_valid_subtree(req.start, req.end):
            return CosignerAnswer.text(400, f"[{req.start}, {req.end}) is not a non-empty valid "
                                            "subtree")
        if req.end > cp.size:
            return CosignerAnswer.text(400, f"subtree ends at {req.end}, past the checkpoint's "
                                            f"size {cp.size}")
        if cp.origin not in self.logs:
            return CosignerAnswer.text(404, f"unknown log origin {cp.origin[:200]!r}")
        try:
            open_note(req.checkpoint, self.own_keys)
        except NoteError as e:
            return CosignerAnswer.text(403, f"the checkpoint carries no valid cosignature of this "
                                            f"cosigner: {e}")
        try:
            verify_subtree_consistency(req.start, req.end, cp.size, req.proof,
                                       req.subtree_hash, cp.root_hash)
        except ProofError as e:
            return CosignerAnswer.text(422, f"subtree consistency proof: {e}")
        sigs = [s.sign_subtree(cp.origin, req.start, req.end, req.subtree_hash)
                for s in self.subtree_signers]
        return CosignerAnswer(200, format_cosignatures(sigs), "text/plain; charset=utf-8")

    def health(self) -> str | None:
        """What ``/healthz`` reports as failing (a 503 with this reason), or None when all is
        well (the mirror says so of its bucket)."""
        return None

    async def checkpoint(self, hashed_origin: str) -> CosignerAnswer:
        """The checkpoint served for the log whose origin hashes to ``hashed_origin``, with
        the log signatures verified and this cosigner's cosignatures (404 if none)."""
        origin = self.origins.get(hashed_origin)
        note = None if origin is None else await self.state.served(origin)
        if note is None:
            return CosignerAnswer.text(404, self.nothing_served)
        return CosignerAnswer(200, note, "text/plain; charset=utf-8")


_Request = TypeVar("_Request", AddCheckpointRequest, SignSubtreeRequest)


def _parsed(parse: Callable[[bytes], _Request], body: bytes
            ) -> tuple[_Request, Note, Checkpoint] | CosignerAnswer:
    """A request body, its checkpoint note and that note's checkpoint, or the 400 to answer."""
    try:
        req = parse(body)
        note = parse_note(req.checkpoint)
        return req, note, parse_checkpoint_text(note.text)
    except (ProtocolError, NoteError) as e:
        return CosignerAnswer.text(400, f"malformed request: {e}")
