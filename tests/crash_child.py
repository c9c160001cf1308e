"""Child process for the crash tests: appends under load and reports every acknowledgement.

Each acknowledged entry is printed as ``A <index> <entry hex>`` and every new checkpoint it was
handed as ``C <base64 note>``, flushed at once, so the parent knows exactly what was promised
before it sends SIGKILL.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path

from ledger.core.note import Ed25519Signer
from ledger.log.facade import Log
from ledger.storage.base import LogStore
from ledger.storage.sqlite import SqliteStore


async def open_store(where: str) -> LogStore:
    """A PostgreSQL URL, or a directory holding the SQLite ``log.db``."""
    if where.startswith("postgresql://"):
        from ledger.storage.postgres import PostgresStore

        return await PostgresStore.open(where)
    return await SqliteStore.open(Path(where) / "log.db", create=True)


async def main(where: str, key: str, workers: int) -> None:
    store = await open_store(where)
    log = await Log.open(store, signer=Ed25519Signer.from_private_key(key), max_batch=512)
    seen: set[int] = set()
    out = sys.stdout

    async def worker() -> None:
        while True:
            entry = os.urandom(8 + int.from_bytes(os.urandom(1), "big") % 64)
            res = await log.append(entry)
            if res.size not in seen:
                seen.add(res.size)
                out.write(f"C {base64.b64encode(res.checkpoint).decode()}\n")
            out.write(f"A {res.index} {entry.hex()}\n")
            out.flush()

    await asyncio.gather(*(worker() for _ in range(workers)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 64))
