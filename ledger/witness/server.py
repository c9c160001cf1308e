"""The witness HTTP service: C2SP tlog-witness ``POST /add-checkpoint``, ``POST /sign-subtree``
and the monitoring endpoint ``GET /<origin hash>/checkpoint``.

A witness holds one or more keys (Ed25519 cosignature/v1, ML-DSA-44 subtree/v1) and cosigns
with each. Several witness processes may share a key file and a data directory: the store's
transaction serialises them.

For each configured log (origin and verifier keys) the witness cosigns a checkpoint only after
checking, in the spec's order: the origin is known (else 404), a trusted key signed it (else
403), ``old`` is not above the checkpoint size (else 400), ``old`` is the size it last cosigned
(else 409 with that size as ``text/x.tlog.size``), the consistency proof verifies (else 422), and
at equal sizes the roots are equal (else 409). The compare and the write are one durable SQLite
transaction (see :mod:`ledger.witness.store`); requests for one origin are handled one at a time,
and the cosignature is computed and sent only after the commit.

``sign-subtree`` (served when the witness holds an ML-DSA-44 key, the only kind that can sign a
subtree) checks, in this order: the body's form and that ``[start, end)`` is a non-empty valid
subtree ending within the reference checkpoint (else 400, before anything is verified); the
origin is known (else 404); the reference checkpoint carries a valid cosignature of one of this
witness's keys (else 403), which is all it needs to carry, since the witness only ever cosigned
checkpoints consistent with its view; and the subtree consistency proof (else 422). It answers
with a subtree/v1 signature by each ML-DSA-44 key, timestamp 0.

Other answers are ``text/plain`` with a one-line reason: this is the witness protocol, not the
notary's JSON API, and Go clients show the body as is.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import NoteError, NoteSignature, NoteVerifier, open_note, parse_note
from ledger.core.proofs import ProofError
from ledger.core.subtree import is_valid_subtree, verify_subtree_consistency
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.witness_protocol import (
    MAX_REQUEST_SIZE,
    SIZE_CONTENT_TYPE,
    Outcome,
    ProtocolError,
    format_cosignatures,
    format_size,
    parse_add_checkpoint,
    parse_sign_subtree,
)
from ledger.witness.store import WitnessStore

__all__ = ["WITNESS", "Answer", "Witness", "WitnessSigner", "create_witness_app",
           "origin_hash", "read_body", "sign_subtree_answer"]

_log = structlog.get_logger("ledger.witness")

_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class WitnessSigner(Protocol):
    """A witness key: Ed25519 cosignature/v1 (``CosignatureSigner``) or ML-DSA-44 subtree/v1
    (``SubtreeCosignatureSigner``)."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def verifier_key_text(self) -> str: ...

    def verifier(self) -> NoteVerifier: ...

    def cosign(self, checkpoint_text: str, timestamp: int) -> NoteSignature: ...


def origin_hash(origin: str) -> str:
    """The path segment of a log in monitoring URLs: lowercase hex SHA-256 of the origin."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Answer:
    """One HTTP answer of the witness, independent of aiohttp (so it can be tested directly)."""

    status: int
    body: bytes
    content_type: str = "text/plain"

    @classmethod
    def text(cls, status: int, message: str) -> Answer:
        return cls(status, message.encode("utf-8") + b"\n")


class Witness:
    """The witness's behaviour: its cosigning keys, the logs it follows, its durable store."""

    def __init__(self, signers: WitnessSigner | Sequence[WitnessSigner],
                 logs: Mapping[str, Sequence[NoteVerifier]], store: WitnessStore, *,
                 clock: Callable[[], float] = time.time) -> None:
        if not logs:
            raise ValueError("a witness needs at least one log to follow")
        self.signers: list[WitnessSigner] = (
            list(signers) if isinstance(signers, Sequence) else [signers])
        if not self.signers:
            raise ValueError("a witness needs at least one key")
        self.subtree_signers = [s for s in self.signers
                                if isinstance(s, SubtreeCosignatureSigner)]
        self.own_keys = [s.verifier() for s in self.signers]
        self.logs = {origin: list(keys) for origin, keys in logs.items()}
        self.origins = {origin_hash(origin): origin for origin in self.logs}
        self.store = store
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self.registry = CollectorRegistry()
        self.requests = Counter("witness_add_checkpoint_total", "add-checkpoint requests",
                                ["status"], registry=self.registry)
        self.latency = Histogram("witness_add_checkpoint_seconds",
                                 "add-checkpoint handling time, durable commit included",
                                 buckets=_BUCKETS, registry=self.registry)
        self.subtree_requests = Counter("witness_sign_subtree_total", "sign-subtree requests",
                                        ["status"], registry=self.registry)

    @property
    def signer(self) -> WitnessSigner:
        """The first key (the one a single-key witness has)."""
        return self.signers[0]

    def _cosign(self, text: str) -> list[NoteSignature]:
        timestamp = int(self.clock())
        return [s.cosign(text, timestamp) for s in self.signers]

    async def add_checkpoint(self, body: bytes) -> Answer:
        """Handle one request body; never raises for bad input (every refusal is an Answer)."""
        started = time.perf_counter()
        answer = await self._add_checkpoint(body)
        self.requests.labels(str(answer.status)).inc()
        self.latency.observe(time.perf_counter() - started)
        return answer

    async def _add_checkpoint(self, body: bytes) -> Answer:
        try:
            req = parse_add_checkpoint(body)
            note = parse_note(req.checkpoint)
            cp = parse_checkpoint_text(note.text)
        except (ProtocolError, NoteError) as e:
            return Answer.text(400, f"malformed request: {e}")
        verifiers = self.logs.get(cp.origin)
        if verifiers is None:
            return Answer.text(404, f"unknown log origin {cp.origin[:200]!r}")
        try:
            _, log_sigs = open_note(req.checkpoint, verifiers)
        except NoteError as e:  # unverified, invalid or ambiguous: no trusted signature
            return Answer.text(403, f"checkpoint is not signed by a trusted key of the log: {e}")
        lock = self._locks.setdefault(cp.origin, asyncio.Lock())
        async with lock:
            decision, sigs = await self.store.add(
                cp.origin, req.old, req.proof, cp, req.checkpoint, body, text=note.text,
                log_signatures=log_sigs, cosign=self._cosign)
            if decision.outcome is Outcome.COSIGN:
                # Only now, with the new state durable, may the cosignatures leave the witness.
                _log.debug("cosigned", origin=cp.origin, size=cp.size, old=req.old)
                return Answer(200, format_cosignatures(sigs), "text/plain; charset=utf-8")
        if decision.evidence:
            _log.warning("refused_signed_checkpoint", origin=cp.origin, size=cp.size,
                         old=req.old, status=decision.outcome.value, reason=decision.reason)
        if decision.outcome is Outcome.CONFLICT:
            return Answer(409, format_size(decision.known), SIZE_CONTENT_TYPE)
        return Answer.text(decision.outcome.value, decision.reason)


    async def sign_subtree(self, body: bytes) -> Answer:
        """Handle one ``sign-subtree`` body; never raises for bad input."""
        answer = await self._sign_subtree(body)
        self.subtree_requests.labels(str(answer.status)).inc()
        return answer

    async def _sign_subtree(self, body: bytes) -> Answer:
        return sign_subtree_answer(body, self.logs, self.own_keys, self.subtree_signers)

    async def checkpoint(self, hashed_origin: str) -> Answer:
        """The newest checkpoint cosigned for the log whose origin hashes to ``hashed_origin``,
        with the log signatures verified and this witness's cosignatures (404 if none)."""
        origin = self.origins.get(hashed_origin)
        note = None if origin is None else await self.store.cosigned(origin)
        if note is None:
            return Answer.text(404, "this witness has cosigned no checkpoint of that log")
        return Answer(200, note, "text/plain; charset=utf-8")


def sign_subtree_answer(body: bytes, origins: Container[str], own_keys: Sequence[NoteVerifier],
                        signers: Sequence[SubtreeCosignatureSigner]) -> Answer:
    """The ``sign-subtree`` answer of a cosigner whose keys are ``own_keys`` (those that may
    have cosigned the reference checkpoint) and ``signers`` (its ML-DSA-44 keys), for the logs
    ``origins``; never raises for bad input. Shared by the witness and the mirror, which the
    spec has handle the request identically."""
    try:
        req = parse_sign_subtree(body)
        note = parse_note(req.checkpoint)
        cp = parse_checkpoint_text(note.text)
    except (ProtocolError, NoteError) as e:
        return Answer.text(400, f"malformed request: {e}")
    if req.start == req.end or not is_valid_subtree(req.start, req.end):
        return Answer.text(400, f"[{req.start}, {req.end}) is not a non-empty valid subtree")
    if req.end > cp.size:
        return Answer.text(400, f"subtree ends at {req.end}, past the checkpoint's size "
                                f"{cp.size}")
    if cp.origin not in origins:
        return Answer.text(404, f"unknown log origin {cp.origin[:200]!r}")
    try:
        open_note(req.checkpoint, own_keys)
    except NoteError as e:
        return Answer.text(403, f"the checkpoint carries no valid cosignature of this "
                                f"cosigner: {e}")
    try:
        verify_subtree_consistency(req.start, req.end, cp.size, req.proof,
                                   req.subtree_hash, cp.root_hash)
    except ProofError as e:
        return Answer.text(422, f"subtree consistency proof: {e}")
    sigs = [s.sign_subtree(cp.origin, req.start, req.end, req.subtree_hash) for s in signers]
    return Answer(200, format_cosignatures(sigs), "text/plain; charset=utf-8")


WITNESS = web.AppKey("ledger.witness", Witness)


async def read_body(request: web.Request) -> bytes | Answer:
    """The body of a protocol POST, or the refusal to send instead: 413 beyond
    :data:`MAX_REQUEST_SIZE`, 400 for one that cannot be read as sent (a ``Content-Encoding``
    its bytes are not in, which aiohttp reports only while inflating them). Shared with the
    mirror."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        return Answer.text(413, f"request body is larger than {MAX_REQUEST_SIZE} bytes")
    except web.RequestPayloadError:
        return Answer.text(400, "the request body cannot be read as its Content-Encoding "
                                "says")


async def _posted(request: web.Request,
                  handle: Callable[[Witness, bytes], Awaitable[Answer]]) -> web.Response:
    """A protocol POST: the readable body handed to ``handle``."""
    body = await read_body(request)
    if isinstance(body, Answer):
        return _response(body)
    return _response(await handle(request.app[WITNESS], body))


async def _add_checkpoint(request: web.Request) -> web.Response:
    return await _posted(request, Witness.add_checkpoint)


async def _sign_subtree(request: web.Request) -> web.Response:
    return await _posted(request, Witness.sign_subtree)


async def _checkpoint(request: web.Request) -> web.Response:
    return _response(await request.app[WITNESS].checkpoint(request.match_info["origin_hash"]))


def _response(answer: Answer) -> web.Response:
    resp = web.Response(status=answer.status, body=answer.body)
    resp.headers["Content-Type"] = answer.content_type
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def _metrics(request: web.Request) -> web.Response:
    resp = web.Response(body=generate_latest(request.app[WITNESS].registry))
    resp.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
    return resp


def create_witness_app(witness: Witness) -> web.Application:
    """The aiohttp application of one witness: the protocol's endpoints and ops endpoints.

    ``POST /sign-subtree`` is there only when the witness holds a key that can sign subtrees.
    """
    app = web.Application(client_max_size=MAX_REQUEST_SIZE)
    app[WITNESS] = witness
    app.router.add_post("/add-checkpoint", _add_checkpoint)
    if witness.subtree_signers:
        app.router.add_post("/sign-subtree", _sign_subtree)
    app.router.add_get(r"/{origin_hash:[0-9a-f]{64}}/checkpoint", _checkpoint)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    return app
