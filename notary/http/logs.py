"""The notary's sequence of logs on HTTP (docs/lifecycle.md): ``/logs/<n>/…`` for each log,
``/v1/ledger``'s ``logs``, and the ML-DSA-44 line of each log's checkpoints."""

from __future__ import annotations

from aiohttp import web

from ledger.core.note import Ed25519Signer
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.timestamps import rfc3339
from ledger.http.routes import LOG_LIST, LOGS, PQ_CHECKPOINTS, ServedLog
from ledger.log.facade import Head, Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from notary.serving.lifecycle import key_status
from notary.serving.service import Notary

__all__ = ["serve_logs"]


def serve_logs(app: web.Application, notary: Notary, base_url: str) -> None:
    """Register the providers the read routes use for the sequence of logs, and keep the
    dual-signing of checkpoints on the active log through rolls."""
    book = notary.logs
    frozen_pq: dict[str, PostQuantumCheckpoints] = {}
    pq = app.get(PQ_CHECKPOINTS)

    def pq_of(log: Log) -> PostQuantumCheckpoints | None:
        if pq is None:
            return None
        n = book.number_of(log.origin)
        record = None if n is None else book.record(n)
        if record is None:
            return None
        own = book.own_signer(record)
        if own is None:  # retired keys: its final checkpoint was dual-signed at the roll
            return None
        if log.origin not in frozen_pq:
            signer = SubtreeCosignatureSigner.derived_from(own)
            frozen_pq[log.origin] = PostQuantumCheckpoints(signer, log.origin)
        return frozen_pq[log.origin]

    def frozen_note(log: Log, head: Head) -> bytes:
        signer = pq_of(log)
        return head.note if signer is None else signer.latest(head)[1]

    if pq is not None:
        def rekey(signer: Ed25519Signer) -> None:
            pq.switch(SubtreeCosignatureSigner.derived_from(signer))

        notary.on_log_switch.append(rekey)
        notary.frozen_note = frozen_note

    async def lookup(n: int) -> ServedLog | None:
        records = await book.refresh()
        record = next((r for r in records if r.n == n), None)
        if n == notary.sequencer.log_number:  # pruned already if frozen by a roll not followed yet
            return ServedLog(notary.log, pq, True, 0 if record is None else record.min_index)
        if record is None or record.state != "frozen":
            return None
        log = await book.frozen(record.origin)
        return None if log is None else ServedLog(log, pq_of(log), False, record.min_index)

    async def listing(head: Head) -> list[dict[str, object]]:
        records = await book.refresh()
        keys = key_status(records)
        out: list[dict[str, object]] = []
        for i, r in enumerate(records):
            if r.final_size is not None:
                size = r.final_size
            elif r.n == notary.sequencer.log_number:
                size = head.size
            else:  # active since a roll this process has not followed yet (within seconds)
                latest = await notary.store.for_log(r.n).latest()
                size = 0 if latest is None else latest.size
            out.append({
                "origin": r.origin, "vkeys": list(r.vkeys), "state": r.state, "size": size,
                "min_index": r.min_index, "url": f"{base_url}/logs/{r.n}",
                "started": rfc3339(r.started) if r.started else None,
                "frozen_at": None if r.frozen_at is None else rfc3339(r.frozen_at),
                "successor": records[i + 1].origin if i + 1 < len(records) else None,
                **keys[i],
            })
        return out

    app[LOGS] = lookup
    app[LOG_LIST] = listing
