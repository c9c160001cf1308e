"""The witness HTTP service: C2SP tlog-witness ``POST /add-checkpoint``.

For each configured log (origin and verifier keys) the witness cosigns a checkpoint only after
checking, in the spec's order: the origin is known (else 404), a trusted key signed it (else
403), ``old`` is not above the checkpoint size (else 400), ``old`` is the size it last cosigned
(else 409 with that size as ``text/x.tlog.size``), the consistency proof verifies (else 422), and
at equal sizes the roots are equal (else 409). The compare and the write are one durable SQLite
transaction (see :mod:`ledger.witness.store`); requests for one origin are handled one at a time,
and the cosignature is computed and sent only after the commit.

Other answers are ``text/plain`` with a one-line reason: this is the witness protocol, not the
notary's JSON API, and Go clients show the body as is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import NoteError, NoteVerifier, open_note, parse_note
from ledger.core.witness_protocol import (
    MAX_REQUEST_SIZE,
    SIZE_CONTENT_TYPE,
    Outcome,
    ProtocolError,
    format_cosignatures,
    format_size,
    parse_add_checkpoint,
)
from ledger.witness.store import WitnessStore

__all__ = ["WITNESS", "Answer", "Witness", "create_witness_app"]

_log = structlog.get_logger("ledger.witness")

_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


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
    """The witness's behaviour: a cosigning key, the logs it follows, its durable store."""

    def __init__(self, signer: CosignatureSigner, logs: Mapping[str, Sequence[NoteVerifier]],
                 store: WitnessStore, *, clock: Callable[[], float] = time.time) -> None:
        if not logs:
            raise ValueError("a witness needs at least one log to follow")
        self.signer = signer
        self.logs = {origin: list(keys) for origin, keys in logs.items()}
        self.store = store
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self.registry = CollectorRegistry()
        self.requests = Counter("witness_add_checkpoint_total", "add-checkpoint requests",
                                ["status"], registry=self.registry)
        self.latency = Histogram("witness_add_checkpoint_seconds",
                                 "add-checkpoint handling time, durable commit included",
                                 buckets=_BUCKETS, registry=self.registry)

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
            open_note(req.checkpoint, verifiers)
        except NoteError as e:  # unverified, invalid or ambiguous: no trusted signature
            return Answer.text(403, f"checkpoint is not signed by a trusted key of the log: {e}")
        lock = self._locks.setdefault(cp.origin, asyncio.Lock())
        async with lock:
            decision = await self.store.add(cp.origin, req.old, req.proof, cp, req.checkpoint,
                                            body)
            if decision.outcome is Outcome.COSIGN:
                # Only now, with the new state durable, may the cosignature leave the witness.
                sig = self.signer.cosign(note.text, int(self.clock()))
                _log.debug("cosigned", origin=cp.origin, size=cp.size, old=req.old)
                return Answer(200, format_cosignatures([sig]), "text/plain; charset=utf-8")
        if decision.evidence:
            _log.warning("refused_signed_checkpoint", origin=cp.origin, size=cp.size,
                         old=req.old, status=decision.outcome.value, reason=decision.reason)
        if decision.outcome is Outcome.CONFLICT:
            return Answer(409, format_size(decision.known), SIZE_CONTENT_TYPE)
        return Answer.text(decision.outcome.value, decision.reason)


WITNESS = web.AppKey("ledger.witness", Witness)


async def _add_checkpoint(request: web.Request) -> web.Response:
    witness = request.app[WITNESS]
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _response(Answer.text(413, f"request body is larger than {MAX_REQUEST_SIZE} "
                                          "bytes"))
    return _response(await witness.add_checkpoint(body))


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
    """The aiohttp application of one witness (``POST /add-checkpoint`` and ops endpoints)."""
    app = web.Application(client_max_size=MAX_REQUEST_SIZE)
    app[WITNESS] = witness
    app.router.add_post("/add-checkpoint", _add_checkpoint)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    return app
