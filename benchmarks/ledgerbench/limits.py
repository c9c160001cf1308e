"""Phase 1: the machine's limits, the ceilings the ledger's figures are read against.

SHA-256 on 65-byte messages (a leaf hash; two per appended entry), Ed25519 signatures (one per
checkpoint) and fsync'd SQLite commits (WAL, synchronous=FULL; one per durable batch) on the
disk that holds the work directory.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import nacl.signing

from benchmarks._common import rate
from benchmarks.ledgerbench.workload import ORIGIN, SIGNER_SEED


def limit_sha256(seconds: float) -> float:
    msgs = [os.urandom(65) for _ in range(1000)]
    h = hashlib.sha256

    def run() -> int:
        for m in msgs:
            h(m).digest()
        return len(msgs)

    return rate(run, seconds)[0]


def limit_ed25519(seconds: float) -> float:

    key = nacl.signing.SigningKey(SIGNER_SEED)
    msg = f"{ORIGIN}\n1000000\n{'A' * 43}=\n".encode()

    def run() -> int:
        for _ in range(100):
            key.sign(msg)
        return 100

    return rate(run, seconds)[0]


def limit_sqlite_commits(path: Path, seconds: float) -> float:
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = FULL")
        con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        row = os.urandom(64)

        def run() -> int:
            con.execute("BEGIN IMMEDIATE")
            con.execute("INSERT INTO t (v) VALUES (?)", (row,))
            con.execute("COMMIT")
            return 1

        run()
        return rate(run, seconds)[0]
    finally:
        con.close()
        for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            p.unlink(missing_ok=True)
