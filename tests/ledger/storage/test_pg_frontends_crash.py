"""Three writer processes on one PostgreSQL log under load, two of them SIGKILLed and restarted
at random (seeded) moments: nothing acknowledged is lost, no entry is logged twice, and every
checkpoint any of them was handed is consistent with the final tree."""

from __future__ import annotations

import base64
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import Ed25519Signer
from ledger.core.proofs import verify_consistency
from ledger.log.facade import Log
from ledger.storage.postgres import PostgresStore
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[3]
KILLS = 6


class Writer:
    """One crash_child process; its acknowledgements are collected by a reader thread."""

    def __init__(self, url: str, key: str, acked: dict[int, bytes], notes: set[bytes],
                 lock: threading.Lock) -> None:
        self.url, self.key = url, key
        self.acked, self.notes, self.lock = acked, notes, lock
        self.proc: subprocess.Popen[bytes] | None = None
        self.thread: threading.Thread | None = None
        self.acks = 0  # entries this writer's processes acknowledged

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.crash_child", self.url, self.key],
            cwd=REPO, stdout=subprocess.PIPE, env=env)
        self.thread = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            kind, *rest = raw.decode().split()
            with self.lock:
                if kind == "A" and len(rest) == 2:
                    index, entry = int(rest[0]), bytes.fromhex(rest[1])
                    assert self.acked.setdefault(index, entry) == entry, \
                        f"index {index} acknowledged to two different entries"
                    self.acks += 1
                elif kind == "C" and len(rest) == 1:
                    self.notes.add(base64.b64decode(rest[0]))

    def kill(self) -> None:
        assert self.proc is not None and self.thread is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.thread.join(10)

    def stop(self) -> None:
        self.kill()


async def test_three_writers_two_killed_at_random_share_one_log(pg_url: str) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}")
    rng = random.Random(seed)
    signer = Ed25519Signer.generate("frontends.test/log")
    # The log exists before the writers start (as after a first `notary serve`).
    log = await Log.open(await PostgresStore.open(pg_url), signer=signer)
    await log.close()
    acked: dict[int, bytes] = {}
    notes: set[bytes] = set()
    lock = threading.Lock()
    writers = [Writer(pg_url, signer.private_key_text(), acked, notes, lock) for _ in range(3)]
    for w in writers:
        w.start()
    for _ in range(KILLS):
        time.sleep(0.3 + rng.random())
        victim = writers[rng.randrange(2)]  # writers 0 and 1 die; writer 2 never does
        victim.kill()
        victim.start()
    # Load goes on after the last restart until every writer has acknowledged again.
    restarted = [w.acks for w in writers]
    wait_until(lambda: all(w.acks > n for w, n in zip(writers, restarted, strict=True)),
               "every writer to acknowledge again after the last restart", 60)
    for w in writers:
        w.stop()
    log = await Log.open(await PostgresStore.open(pg_url), signer=signer)
    try:
        head = await log.head(0)
        assert head is not None and acked
        print(f"{len(acked)} acknowledged, log size {head.size}, {len(notes)} checkpoints")
        entries = await log.reader.entries(0, head.size)
        for index, entry in acked.items():
            assert entries[index] == entry, f"acknowledged entry {index} lost or changed"
        assert len(set(entries)) == len(entries), "an entry was logged twice"
        for note in notes:
            cp, _ = open_checkpoint(note, signer.verifier())
            proof = await log.reader.consistency_proof(cp.size, head.size)
            verify_consistency(cp.size, head.size, cp.root_hash, head.checkpoint.root_hash,
                               proof)
    finally:
        await log.close()
