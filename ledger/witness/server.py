"""The witness HTTP service: C2SP tlog-witness ``POST /add-checkpoint``, ``POST /sign-subtree``
and the monitoring endpoint ``GET /<origin hash>/checkpoint``, plus ``/metrics``.

A witness is a :class:`~ledger.cosigner.cosigner.Cosigner` (which has the protocol's checks, in
the spec's order) whose state is the latest checkpoint it cosigned per log
(:mod:`ledger.witness.store`). It holds one or more keys (Ed25519 cosignature/v1, ML-DSA-44
subtree/v1) and cosigns with each. Several witness processes may share a key file and a data
directory: the store's transaction serialises them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ledger.core.note import NoteVerifier
from ledger.cosigner.app import cosigner_app
from ledger.cosigner.cosigner import Cosigner, CosignerAnswer, WitnessSigner
from ledger.witness.store import WitnessStore

__all__ = ["WITNESS", "Witness", "create_witness_app"]

_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class Witness(Cosigner):
    """The witness's behaviour: its cosigning keys, the logs it follows, its durable store,
    and the counters of its requests."""

    nothing_served = "this witness has cosigned no checkpoint of that log"

    def __init__(self, signers: WitnessSigner | Sequence[WitnessSigner],
                 logs: Mapping[str, Sequence[NoteVerifier]], store: WitnessStore, *,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(list(signers) if isinstance(signers, Sequence) else [signers], logs,
                         store, role="witness", clock=clock)
        self.store = store
        self.registry = CollectorRegistry()
        self.requests = Counter("witness_add_checkpoint_total", "add-checkpoint requests",
                                ["status"], registry=self.registry)
        self.latency = Histogram("witness_add_checkpoint_seconds",
                                 "add-checkpoint handling time, durable commit included",
                                 buckets=_BUCKETS, registry=self.registry)
        self.subtree_requests = Counter("witness_sign_subtree_total", "sign-subtree requests",
                                        ["status"], registry=self.registry)

    async def add_checkpoint(self, body: bytes) -> CosignerAnswer:
        started = time.perf_counter()
        answer = await super().add_checkpoint(body)
        self.requests.labels(str(answer.status)).inc()
        self.latency.observe(time.perf_counter() - started)
        return answer

    async def sign_subtree(self, body: bytes) -> CosignerAnswer:
        answer = await super().sign_subtree(body)
        self.subtree_requests.labels(str(answer.status)).inc()
        return answer


WITNESS = web.AppKey("ledger.witness", Witness)


async def _metrics(request: web.Request) -> web.Response:
    resp = web.Response(body=generate_latest(request.app[WITNESS].registry))
    resp.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
    return resp


def create_witness_app(witness: Witness) -> web.Application:
    """The aiohttp application of one witness: the protocol's endpoints and ops endpoints.

    ``POST /sign-subtree`` is there only when the witness holds a key that can sign subtrees.
    """
    app = cosigner_app(witness)
    app[WITNESS] = witness
    app.router.add_get("/metrics", _metrics)
    return app
