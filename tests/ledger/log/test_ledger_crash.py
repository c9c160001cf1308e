"""Crash safety: SIGKILL a busy writer at random moments; nothing acknowledged may be lost
(SQLite, and PostgreSQL where the killed writer's transaction dies with its connection)."""

from __future__ import annotations

import base64
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.core.checkpoint import open_checkpoint
from ledger.core.hashing import leaf_hash
from ledger.core.note import Ed25519Signer
from ledger.core.proofs import verify_consistency, verify_inclusion
from ledger.log.facade import Log
from tests.crash_child import open_store

REPO = Path(__file__).resolve().parents[3]
ROUNDS = {"sqlite": 25, "postgres": 10, "sqlite, one at a time": 12}
WORKERS = {"sqlite, one at a time": 1}  # lone commits, on the loop's thread (LONE_ENTRIES)
ACKS = {"sqlite, one at a time": 800}  # about a second of lone commits


def _run_child_until_killed(where: str, key: str, rng: random.Random, workers: int = 64,
                            acks: int = 4000) -> tuple[dict[int, bytes], list[bytes]]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # As a module from the repository: run as a file, tests/ would be first on sys.path and
    # tests/ledger/ would shadow the ledger package.
    proc = subprocess.Popen([sys.executable, "-m", "tests.crash_child", where, key, str(workers)],
                            cwd=REPO, stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    acked: dict[int, bytes] = {}
    checkpoints: list[bytes] = []
    target = rng.randint(1, acks)
    deadline = time.monotonic() + 20
    for raw in proc.stdout:
        kind, *rest = raw.decode().split()
        if kind == "A":
            acked[int(rest[0])] = bytes.fromhex(rest[1])
        else:
            checkpoints.append(base64.b64decode(rest[0]))
        if len(acked) >= target or time.monotonic() > deadline:
            break
    time.sleep(rng.random() * 0.05)  # land the kill anywhere, mid-commit included
    proc.send_signal(signal.SIGKILL)
    # Lines already written before the kill were promised too.
    for raw in proc.stdout:
        kind, *rest = raw.decode().split()
        if kind == "A":
            acked[int(rest[0])] = bytes.fromhex(rest[1])
        elif len(rest) == 1:
            checkpoints.append(base64.b64decode(rest[0]))
    proc.wait()
    return acked, checkpoints


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "sqlite, one at a time"])
async def test_sigkill_never_loses_acknowledged_entries(tmp_path: Path, backend: str,
                                                        request: pytest.FixtureRequest,
                                                        seeded_rng: random.Random) -> None:
    where = request.getfixturevalue("pg_url") if backend == "postgres" else str(tmp_path)
    rng = seeded_rng
    signer = Ed25519Signer.generate("crash.test/log")
    key = signer.private_key_text()
    verifier = signer.verifier()
    all_acked: dict[int, bytes] = {}
    all_checkpoints: list[bytes] = []
    for _ in range(ROUNDS[backend]):
        acked, cps = _run_child_until_killed(where, key, rng, WORKERS.get(backend, 64),
                                             ACKS.get(backend, 4000))
        all_acked.update(acked)
        print(f"round: {len(acked)} acked, {len(cps)} checkpoints")
        all_checkpoints.extend(cps)
        # Restart: opening with the signer recomputes the root from tiles and checks it.
        log = await Log.open(await open_store(where), signer=signer)
        try:
            head = await log.head(0)
            assert head is not None
            assert all_acked, "the child acknowledged nothing"
            assert max(all_acked) < head.size
            sample = rng.sample(sorted(all_acked), min(300, len(all_acked)))
            entries = await log.reader.entries(0, head.size)
            for index in all_acked:
                assert entries[index] == all_acked[index], f"entry {index} changed or lost"
            for index in sample:
                proof = await log.reader.inclusion_proof(index, head.size)
                verify_inclusion(index, head.size, leaf_hash(all_acked[index]), proof,
                                 head.checkpoint.root_hash)
            for note in all_checkpoints:
                cp, _ = open_checkpoint(note, verifier)
                assert cp.size <= head.size
                if cp.size:
                    proof = await log.reader.consistency_proof(cp.size, head.size)
                    verify_consistency(cp.size, head.size, cp.root_hash,
                                       head.checkpoint.root_hash, proof)
        finally:
            await log.close()
