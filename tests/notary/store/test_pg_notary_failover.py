"""High availability with real notary frontends: a primary with a synchronous streaming standby
(both throwaway clusters on loopback), two ``notary serve`` frontends on the multi-host URL
(``target_session_attrs=read-write``) under load, the primary SIGKILLed, the standby promoted.

Afterwards every receipt any client was given verifies (signature and inclusion) and is in the
log at its index, every checkpoint any client saw is consistent with the final tree (no frontend
signed a fork), the frontends carried on by themselves on the new primary, and no request was
answered with a 500 (requests during the failover wait or get a 503)."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import Ed25519Verifier
from ledger.core.proofs import verify_consistency
from ledger.core.tlog_proof import decode_proof_bundle
from ledger.log.facade import Log
from notary.core.entry import decode_entry
from notary.core.verification import verify_receipt
from notary.store import open_store
from tests.notary_server import NotaryProcess, jwks_listing
from tests.pgcluster import primary_with_standby
from tests.waiting import until

CLIENTS = 16


async def test_frontends_survive_a_primary_killed_and_a_standby_promoted(tmp_path: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}")
    rng = random.Random(seed)
    with primary_with_standby() as (primary, standby):
        url = (f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
               "/postgres?target_session_attrs=read-write")
        first = NotaryProcess(tmp_path / "f0", args=["--database", url])
        first.start()
        data = tmp_path / "f1"
        data.mkdir(mode=0o700)
        for name in ("log.key", "log.vkey"):
            (data / name).write_bytes((first.data_dir / name).read_bytes())
            (data / name).chmod(0o600)
        second = NotaryProcess(data, args=["--database", url]).start()
        fronts = [first, second]
        key = first.cli("apikey", "create", "--data", str(first.data_dir), "--database", url,
                        "--account", "ha").stdout.strip().splitlines()[-1]
        acked: list[dict[str, Any]] = []
        statuses: Counter[int] = Counter()
        killed_at: list[float] = []
        first_after: list[float] = []
        recovered = asyncio.Event()
        stop = asyncio.Event()

        async def client(n: int, http: aiohttp.ClientSession) -> None:
            crng = random.Random(seed + n)
            while not stop.is_set():
                front = crng.choice(fronts)
                started = time.monotonic()
                try:
                    async with http.post(
                            f"{front.url}/v1/tool-calls",
                            json={"server": "s", "tool": "t", "call_sha256": os.urandom(32).hex()},
                            headers={"Authorization": f"Bearer {key}"}) as r:
                        statuses[r.status] += 1
                        body = await r.json(content_type=None)
                except (TimeoutError, aiohttp.ClientError):
                    statuses[0] += 1
                    await asyncio.sleep(0.05)
                    continue
                if r.status == 201:
                    acked.append(body)
                    if killed_at and started > killed_at[0] and not first_after:
                        first_after.append(time.monotonic())
                        recovered.set()
                elif r.status == 503:
                    await asyncio.sleep(0.05)

        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=90)) as http:
                tasks = [asyncio.create_task(client(n, http)) for n in range(CLIENTS)]
                # The kill lands under load: once receipts are issued, at a random moment after.
                await until(lambda: len(acked) >= CLIENTS, "receipts issued before the kill", 60)
                await asyncio.sleep(rng.random())
                before = len(acked)
                assert before > 0
                await asyncio.to_thread(primary.kill)
                killed_at.append(time.monotonic())
                await asyncio.sleep(rng.random() * 0.5)
                await asyncio.to_thread(standby.promote)
                await asyncio.wait_for(recovered.wait(), 60)
                await asyncio.sleep(0.5)  # some more load on the new primary
                stop.set()
                await asyncio.gather(*tasks)
                # Every frontend lists every key that signed, at once (it reads them per request).
                kids = {receipt["signature"]["kid"] for receipt in acked}
                jwks_of = [await jwks_listing(http, front.url, kids) for front in fronts]
        finally:
            for f in fronts:
                f.stop()
        print(f"{before} receipts before the kill, {len(acked)} in all, statuses "
              f"{dict(statuses)}; first receipt {first_after[0] - killed_at[0]:.2f}s after "
              "the kill")
        assert statuses[500] == 0 and len(acked) > before
        verifier = Ed25519Verifier.from_vkey((first.data_dir / "log.vkey").read_text().strip())
        notes = set()
        for receipt in acked:
            for jwks in jwks_of:
                verdict = verify_receipt(receipt, record=None, jwks=jwks, log_verifier=verifier)
                assert verdict.levels["signature"].status == "passed", verdict.to_json()
                assert verdict.levels["inclusion"].status == "passed", verdict.to_json()
            notes.add(decode_proof_bundle(receipt["proof"].encode()).checkpoint)
        store = await open_store(url, tmp_path / "unused.sqlite")
        log = await Log.open(store, verifier=verifier)
        try:
            head = await log.head(0)
            assert head is not None
            entries = [decode_entry(e) for e in await log.reader.entries(0, head.size)]
            for receipt in acked:  # nothing acknowledged was lost in the failover
                assert entries[receipt["ledger"]["index"]].id == receipt["id"]
            for note in notes:
                cp, _ = open_checkpoint(note, verifier)
                assert 0 < cp.size <= head.size
                proof = await log.reader.consistency_proof(cp.size, head.size)
                verify_consistency(cp.size, head.size, cp.root_hash,
                                   head.checkpoint.root_hash, proof)
        finally:
            await log.close()
