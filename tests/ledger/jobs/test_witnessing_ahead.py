"""A witness already ahead of the checkpoint being submitted (another process of the log, or an
earlier run, gave it a newer one) is brought the log's newest checkpoint, not reported as a
rollback; a witness ahead of the log's own tree still is one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer
from ledger.core.witness_protocol import format_add_checkpoint
from ledger.jobs.witnessing import WitnessEndpoint, Witnessing
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from ledger.witness.server import Witness, create_witness_app
from ledger.witness.store import WitnessStore
from tests.servers import serving

ORIGIN = "example.test/ahead"


def failures(witnessing: Witnessing) -> float:
    (metric,) = witnessing.m_requests.collect()
    return sum(s.value for s in metric.samples
               if s.name.endswith("_total") and s.labels["result"] == "failed")


async def test_a_witness_ahead_of_the_round_gets_the_logs_head(tmp_path: Path) -> None:
    log_signer = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=log_signer)
    for i in range(5):
        await log.append(b"e%d" % i)
    wsigner = CosignatureSigner.generate("witness.test/w")
    store = await WitnessStore.open(tmp_path / "w.db", wsigner.verifier_key_text())
    witness = Witness(wsigner, {ORIGIN: [log_signer.verifier()]}, store)
    async with serving(create_witness_app(witness)) as server:
        witnessing = Witnessing(log, [WitnessEndpoint(server.url, wsigner.verifier())],
                                quorum=1, interval=0.05, timeout=2.0)
        await witnessing.start(lead=False)  # this round's target: size 5
        for i in range(5, 10):
            await log.append(b"e%d" % i)
        head = await log.head(0)
        assert head is not None and head.size == 10
        # Someone else (another frontend) already brought the witness to size 10.
        async with aiohttp.ClientSession() as http, http.post(
                server.url + "/add-checkpoint",
                data=format_add_checkpoint(0, [], head.note)) as r:
            assert r.status == 200
        await witnessing.lead()
        for _ in range(200):
            got = witnessing.witnessed()
            if got is not None and got[0] == 10:
                break
            await asyncio.sleep(0.02)
        assert witnessing.witnessed() is not None and witnessing.witnessed()[0] == 10  # type: ignore[index]
        assert failures(witnessing) == 0  # not a "rolled back?" failure
        await witnessing.close()
    await store.close()
    await log.close()
