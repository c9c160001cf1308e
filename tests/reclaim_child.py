"""Child process for the reclaim crash test: runs ``notary log prune --reclaim``'s work in
batches of 100 and stops for good in its second batch, printing ``paused`` so that the parent
can SIGKILL it there: ``inside`` (SQLite only) with the batch's rows deleted but not committed,
``after`` once the batch has committed.

Usage: python -m tests.reclaim_child DATA_DIR DATABASE ORIGIN inside|after
(DATABASE '' for the SQLite file)
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from notary.serving.keys import Paths
from notary.serving.reclaim import reclaim
from notary.store import open_store, sqlite_reclaim


def pause_inside() -> None:
    original = sqlite_reclaim.reclaim_rows
    calls = 0

    def paused(*args: Any) -> int:
        nonlocal calls
        deleted = original(*args)
        calls += 1
        if calls == 2:  # in the writer thread, before COMMIT
            print("paused", flush=True)
            time.sleep(3600)  # until SIGKILL
        return deleted

    sqlite_reclaim.reclaim_rows = paused  # type: ignore[assignment]


def after(done: int, total: int) -> None:
    if done == 200:
        print("paused", flush=True)
        time.sleep(3600)  # until SIGKILL


async def main(data: str, database: str, origin: str, mode: str) -> None:
    if mode == "inside":
        pause_inside()
    store = await open_store(database, Paths(Path(data)).db)
    await reclaim(store, origin, batch=100, progress=after if mode == "after" else None)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
