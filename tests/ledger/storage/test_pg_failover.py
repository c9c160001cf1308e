"""High availability on PostgreSQL, for real: a primary with a synchronous streaming standby,
writers on a multi-host URL (``target_session_attrs=read-write``) under load, the primary
SIGKILLed and the standby promoted. Afterwards every acknowledged entry is in the log at its
index, every checkpoint any writer was handed is consistent with the final tree (no fork), and
the writers carried on by themselves on the new primary."""

from __future__ import annotations

import asyncio
import os
import random
import time

from ledger.core.checkpoint import open_checkpoint
from ledger.core.hashing import leaf_hash
from ledger.core.note import Ed25519Signer
from ledger.core.proofs import verify_consistency, verify_inclusion
from ledger.log.facade import Log
from ledger.log.sequencer import WriterState
from ledger.storage.base import StoreError
from ledger.storage.postgres import PostgresStore
from tests.pgcluster import primary_with_standby
from tests.waiting import until

WRITERS = 3


async def test_writers_survive_a_primary_killed_and_a_standby_promoted() -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}")
    rng = random.Random(seed)
    signer = Ed25519Signer.generate("ha.test/log")
    with primary_with_standby() as (primary, standby):
        url = (f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
               "/postgres?target_session_attrs=read-write")
        logs = [await Log.open(await PostgresStore.open(url, retry_for=60.0), signer=signer)
                for _ in range(WRITERS)]
        acked: dict[int, bytes] = {}
        notes: set[bytes] = set()
        failures = 0
        after_failover = asyncio.Event()
        killed_at: list[float] = []
        first_after: list[float] = []
        stop = asyncio.Event()

        async def writer(log: Log) -> None:
            nonlocal failures
            while not stop.is_set():
                entry = os.urandom(16)
                started = time.monotonic()
                try:
                    done = await log.append(entry)
                except StoreError:
                    failures += 1  # not acknowledged: it may or may not be in the log
                    continue
                acked[done.index] = entry
                notes.add(done.checkpoint)
                if killed_at and started > killed_at[0] and not first_after:
                    first_after.append(time.monotonic())
                    after_failover.set()

        tasks = [asyncio.create_task(writer(log)) for log in logs for _ in range(8)]
        # The kill lands under load: once writes are acknowledged, at a random moment after.
        await until(lambda: len(acked) >= len(tasks), "writes acknowledged before the kill", 60)
        await asyncio.sleep(rng.random())
        before = len(acked)
        assert before > 0
        primary.kill()
        killed_at.append(time.monotonic())
        await asyncio.sleep(rng.random() * 0.5)
        await asyncio.to_thread(standby.promote)
        await asyncio.wait_for(after_failover.wait(), 60)
        await asyncio.sleep(0.5)  # some more load on the new primary
        stop.set()
        await asyncio.gather(*tasks)
        print(f"{before} acknowledged before the kill, {len(acked)} in all, {failures} failed; "
              f"first receipt {first_after[0] - killed_at[0]:.2f}s after the kill")
        log = logs[0]
        head = await log.head(0)
        assert head is not None and head.size >= len(acked) > before
        entries = await log.reader.entries(0, head.size)
        for index, entry in acked.items():
            assert entries[index] == entry, f"acknowledged entry {index} lost or changed"
        verifier = signer.verifier()
        for note in notes:
            cp, _ = open_checkpoint(note, verifier)
            assert cp.size <= head.size
            proof = await log.reader.consistency_proof(cp.size, head.size)
            verify_consistency(cp.size, head.size, cp.root_hash, head.checkpoint.root_hash,
                               proof)
        for index in rng.sample(sorted(acked), min(50, len(acked))):
            proof = await log.reader.inclusion_proof(index, head.size)
            verify_inclusion(index, head.size, leaf_hash(acked[index]), proof,
                             head.checkpoint.root_hash)
        for w in logs:
            assert w.sequencer is not None
            assert w.sequencer.status.state is WriterState.WRITING
            await w.close()
