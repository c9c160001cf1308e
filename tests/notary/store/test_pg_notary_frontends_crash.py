"""Three ``notary serve`` frontends on one PostgreSQL database under concurrent load, two of them
SIGKILLed and restarted at seeded random moments (the seed is printed):

- every acknowledged receipt verifies (signature and inclusion) with the JWKS of *any* frontend,
  and is served by every frontend exactly as it was signed;
- the log has no duplicate digest and no gap (every entry has its receipt, at its index);
- usage matches exactly: the capped account is charged its allowance and logged that many
  entries, the other account is charged one per entry logged for it;
- every checkpoint any frontend handed out (in a proof, or at ``/checkpoint``) is consistent with
  the final one;
- nothing was answered with a 500.

Each frontend has its own data directory (the log key copied in, a receipt key of its own), as
frontends on several machines would.
"""

from __future__ import annotations

import asyncio
import os
import random
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
from tests.waiting import until

KILLS = 4
ALLOWANCE = 40
CLIENTS = 24


def _frontends(tmp: Path, url: str) -> list[NotaryProcess]:
    first = NotaryProcess(tmp / "f0", args=["--database", url])
    first.start()
    first.stop()
    out = [first]
    for n in (1, 2):
        data = tmp / f"f{n}"
        data.mkdir(mode=0o700)
        for name in ("log.key", "log.vkey"):
            (data / name).write_bytes((first.data_dir / name).read_bytes())
            (data / name).chmod(0o600)
        out.append(NotaryProcess(data, args=["--database", url]))
    return out


def _api_key(front: NotaryProcess, url: str, account: str, *extra: str) -> str:
    out = front.cli("apikey", "create", "--data", str(front.data_dir), "--database", url,
                    "--account", account, *extra).stdout
    return out.strip().splitlines()[-1]


async def test_three_frontends_two_killed_at_random(tmp_path: Path, pg_url: str) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}")
    rng = random.Random(seed)
    fronts = _frontends(tmp_path, pg_url)
    for f in fronts:
        await asyncio.to_thread(f.start)
    vkey = (fronts[0].data_dir / "log.vkey").read_text().strip()
    unl = _api_key(fronts[0], pg_url, "unl")
    cap = _api_key(fronts[0], pg_url, "cap", "--monthly-allowance", str(ALLOWANCE))
    acked: list[tuple[str, dict[str, Any]]] = []  # (account, receipt with proof)
    acked_by: Counter[str] = Counter()  # receipts acknowledged, by frontend URL
    notes: set[bytes] = set()
    statuses: Counter[int] = Counter()
    sent: dict[str, set[str]] = {"unl": set(), "cap": set()}
    shared = [os.urandom(32).hex() for _ in range(30)]  # asked of several frontends
    stop = asyncio.Event()

    async def client(n: int, http: aiohttp.ClientSession) -> None:
        crng = random.Random(seed + n)
        while not stop.is_set():
            account = "cap" if crng.random() < 0.25 else "unl"
            digest = (crng.choice(shared) if account == "unl" and crng.random() < 0.2
                      else os.urandom(32).hex())
            sent[account].add(digest)
            front = crng.choice(fronts)
            key = cap if account == "cap" else unl
            try:
                async with http.post(f"{front.url}/v1/tool-calls",
                                     json={"server": f"srv-{account}", "tool": "t",
                                           "call_sha256": digest},
                                     headers={"Authorization": f"Bearer {key}"}) as r:
                    statuses[r.status] += 1
                    body = await r.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.05)  # a frontend that is down: not acknowledged
                continue
            if r.status in (200, 201):
                acked.append((account, body))
                acked_by[front.url] += 1
                notes.add(decode_proof_bundle(body["proof"].encode()).checkpoint)

    async def poll_checkpoints(http: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            for front in fronts:
                try:
                    async with http.get(f"{front.url}/checkpoint") as r:
                        if r.status == 200:
                            notes.add(await r.read())
                except (TimeoutError, aiohttp.ClientError):
                    pass
            await asyncio.sleep(0.2)

    timeout = aiohttp.ClientTimeout(total=20)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        tasks = [asyncio.create_task(client(n, http)) for n in range(CLIENTS)]
        tasks.append(asyncio.create_task(poll_checkpoints(http)))
        for _ in range(KILLS):
            await asyncio.sleep(0.5 + 1.5 * rng.random())
            victim = fronts[rng.randrange(2)]  # frontends 0 and 1 die; frontend 2 never does
            await asyncio.to_thread(victim.restart, crash=True)
        # Load goes on after the last restart until every frontend has answered again.
        restarted = dict(acked_by)
        await until(lambda: all(acked_by[f.url] > restarted.get(f.url, 0) for f in fronts),
                    "every frontend to acknowledge again after the last restart", 60)
        stop.set()
        await asyncio.gather(*tasks)

        # Every frontend lists every key that signed, at once (it reads them per request).
        kids = {receipt["signature"]["kid"] for _, receipt in acked}
        jwks_of = [await jwks_listing(http, front.url, kids) for front in fronts]
        # Served by every frontend exactly as signed (a sample: every one would be slow).
        for _, receipt in rng.sample(acked, min(60, len(acked))):
            for front in fronts:
                async with http.get(f"{front.url}/v1/tool-calls/{receipt['id']}") as r:
                    assert r.status == 200
                    again = await r.json()
                assert {k: v for k, v in again.items() if k != "proof"} == \
                    {k: v for k, v in receipt.items() if k != "proof"}
    for f in fronts:
        await asyncio.to_thread(f.stop)

    print(f"{len(acked)} acknowledged, statuses {dict(statuses)}, {len(notes)} checkpoints")
    assert statuses[500] == 0 and acked and statuses[429] > 0
    verifier = Ed25519Verifier.from_vkey(vkey)
    for _, receipt in acked:
        for jwks in jwks_of:  # any frontend's JWKS
            verdict = verify_receipt(receipt, record=None, jwks=jwks, log_verifier=verifier)
            assert verdict.levels["signature"].status == "passed", verdict.to_json()
            assert verdict.levels["inclusion"].status == "passed", verdict.to_json()
    by_digest: dict[str, set[str]] = {}
    for _, receipt in acked:
        by_digest.setdefault(receipt["call_sha256"], set()).add(receipt["id"])
    assert all(len(ids) == 1 for ids in by_digest.values()), "two receipts for one digest"

    store = await open_store(pg_url, tmp_path / "unused.sqlite")
    log = await Log.open(store, verifier=verifier)
    try:
        head = await log.head(0)
        assert head is not None
        entries = [decode_entry(e) for e in await log.reader.entries(0, head.size)]
        digests = [e.call_sha256_hex for e in entries]
        assert len(set(digests)) == len(digests), "a digest was logged twice"
        for index, entry in enumerate(entries):  # no gap: every entry has its receipt
            stored = await store.receipt_by_digest(entry.call_sha256_hex)
            assert stored is not None and stored.index == index and stored.id == entry.id
        for _, receipt in acked:
            assert digests[receipt["ledger"]["index"]] == receipt["call_sha256"]
        months = {e.issued_at[:7] for e in entries}
        for account in ("unl", "cap"):
            logged = sum(d in sent[account] for d in digests)
            charged = sum([await store.usage(account, m) for m in months])
            assert charged == logged, (account, charged, logged)
        assert sum(d in sent["cap"] for d in digests) == ALLOWANCE
        for note in notes:
            cp, _ = open_checkpoint(note, verifier)
            assert cp.size <= head.size
            if cp.size == 0:
                continue  # the empty tree: a prefix of every tree
            proof = await log.reader.consistency_proof(cp.size, head.size)
            verify_consistency(cp.size, head.size, cp.root_hash, head.checkpoint.root_hash,
                               proof)
    finally:
        await log.close()
