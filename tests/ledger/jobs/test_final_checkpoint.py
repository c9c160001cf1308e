"""The final-checkpoint job (ledger.jobs.final_checkpoint) against real witness apps on
loopback: what it stops retrying (a witness holding another tree for the origin; a log frozen
longer ago than the retry window) and what it serves (the signed text unchanged, never a stored
note of another text)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter

from ledger.client.http import HttpClient
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, merge_signatures, parse_note
from ledger.core.tlog_policy import TlogPolicy
from ledger.core.witness_protocol import format_add_checkpoint
from ledger.jobs.final_checkpoint import RETRY_WINDOW, FinalCheckpoints, FrozenLog
from ledger.jobs.witness_config import WitnessEndpoint
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from ledger.witness.server import Witness, create_witness_app
from ledger.witness.store import WitnessStore
from tests.servers import serving
from tests.waiting import until

ORIGIN = "example.test/frozen"


async def _log(signer: Ed25519Signer, entries: Sequence[bytes]) -> Log:
    log = await Log.open(MemoryStore(), signer=signer)
    for e in entries:
        await log.append(e)
    return log


@asynccontextmanager
async def _witnesses(tmp: Path, signer: Ed25519Signer, n: int
                     ) -> AsyncIterator[list[tuple[CosignatureSigner, str]]]:
    """``n`` witness apps of ``ORIGIN`` on loopback: (cosigner, URL) each."""
    async with AsyncExitStack() as stack:
        out = []
        for i in range(n):
            cosigner = CosignatureSigner.generate(f"witness.test/{i}")
            store = await WitnessStore.open(tmp / f"w{i}.db", cosigner.verifier_key_text())
            stack.push_async_callback(store.close)
            app = create_witness_app(Witness(cosigner, {ORIGIN: [signer.verifier()]}, store))
            out.append((cosigner, (await stack.enter_async_context(serving(app))).url))
        yield out


def _job(log: Log, witnesses: list[tuple[CosignatureSigner, str]], frozen_at: float,
         http: HttpClient) -> tuple[FinalCheckpoints, Counter, MemoryStore]:
    endpoints = [WitnessEndpoint(url, c.verifier()) for c, url in witnesses]
    policy = TlogPolicy.from_quorum([e.verifier for e in endpoints], 1)
    names = {e.vkey: e.verifier.name for e in endpoints}
    requests = Counter("requests", "", ["witness", "result"], registry=CollectorRegistry())
    store = MemoryStore()

    async def frozen() -> list[FrozenLog]:
        return [FrozenLog(log, None, frozen_at)]

    job = FinalCheckpoints(store, endpoints, frozen, policy, names, http=http, interval=0.05,
                           timeout=1.0, requests=requests, on_failure=lambda *_: None)
    return job, requests, store


def _count(requests: Counter, result: str) -> float:
    (metric,) = requests.collect()
    return sum(s.value for s in metric.samples
               if s.name.endswith("_total") and s.labels["result"] == result)


async def test_a_witness_holding_another_tree_is_not_retried(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    log = await _log(signer, [b"a", b"b", b"c"])
    other = await _log(signer, [b"a", b"b", b"X"])  # the same key, another tree of size 3
    head, forked = await log.head(0), await other.head(0)
    assert head is not None and forked is not None
    http = await HttpClient(timeout=1.0).open()
    try:
        async with _witnesses(tmp_path, signer, 2) as witnesses:
            (_, split_url), (honest, _) = witnesses
            async with http.session.post(split_url + "/add-checkpoint",
                                         data=format_add_checkpoint(0, [], forked.note)) as r:
                assert r.status == 200  # the split view this witness now holds
            job, requests, store = _job(log, witnesses, time.time(), http)
            task = asyncio.create_task(job.run())
            split_vkey = witnesses[0][0].verifier_key_text()
            await until(lambda: job.awaiting(ORIGIN) == {split_vkey}, "the honest cosignature")
            await until(lambda: _count(requests, "failed") >= 1, "the refusal")
            await asyncio.sleep(0.5)  # ten intervals: a transient failure would be retried
            assert _count(requests, "failed") == 1
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            note, headers = job.served(ORIGIN, head.note)
            assert parse_note(note).text == parse_note(head.note).text
            assert (await store.witnessed_finals())[ORIGIN] == note
            assert headers["Notary-Witnessed"] == "true"
            assert headers["Notary-Witness-Cosignatures"] == "1"
            assert any(s.name == honest.name for s in parse_note(note).signatures)
    finally:
        await http.close()


async def test_a_log_frozen_longer_ago_than_the_window_is_left_alone(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    log = await _log(signer, [b"a"])
    http = await HttpClient(timeout=1.0).open()
    try:
        async with _witnesses(tmp_path, signer, 1) as witnesses:
            job, requests, _ = _job(log, witnesses, time.time() - RETRY_WINDOW - 60, http)
            task = asyncio.create_task(job.run())
            await asyncio.sleep(0.3)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            assert _count(requests, "cosigned") + _count(requests, "failed") == 0
            assert job.awaiting(ORIGIN) == {witnesses[0][0].verifier().vkey}
    finally:
        await http.close()


async def test_a_stored_note_of_another_text_is_never_served(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    log = await _log(signer, [b"a", b"b"])
    other = await _log(signer, [b"a", b"X"])
    head, forked = await log.head(0), await other.head(0)
    assert head is not None and forked is not None
    http = await HttpClient(timeout=1.0).open()
    try:
        async with _witnesses(tmp_path, signer, 1) as witnesses:
            job, _, store = _job(log, witnesses, time.time(), http)
            cosigner = witnesses[0][0]
            text = parse_note(forked.note).text
            await store.save_witnessed_final(ORIGIN, merge_signatures(
                forked.note, [cosigner.cosign(text, int(time.time()))]))
            await job.load()
            assert job.served(ORIGIN, head.note) == (head.note, {})
            assert job.awaiting(ORIGIN) == {cosigner.verifier().vkey}
    finally:
        await http.close()
