"""Child process for the notary store's crash tests: notarizes under load, printing every
acknowledged receipt as ``R <id> <call_sha256> <index>`` (flushed at once), so that the parent
knows exactly what was promised before it sends SIGKILL.

    python -m tests.notary_crash_child DATA [GENERATION]

``DATA`` is an initialised data directory (``tests.notary_server.headless_notary``);
``GENERATION`` the lookup keys' generation (``notary.store.sqlite_lookup``), small so that
the kill falls among closes, merges and deletes too.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from notary.store import sqlite_lookup
from tests.notary_server import UNLIMITED, headless_notary


async def main(data: Path, in_flight: int = 24) -> None:
    async with headless_notary(data, "sqlite") as notary:
        out = sys.stdout

        async def worker() -> None:
            while True:
                receipt, _ = await notary.notarize(UNLIMITED, "srv", "t", os.urandom(32).hex())
                out.write(f"R {receipt.id} {receipt.call_sha256} {receipt.index}\n")
                out.flush()

        await asyncio.gather(*(worker() for _ in range(in_flight)))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        sqlite_lookup.GENERATION = int(sys.argv[2])
    asyncio.run(main(Path(sys.argv[1])))
