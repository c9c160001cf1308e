"""Child process for the roll crash test: runs ``notary log roll``'s transaction and stops for
good right after one of its steps (``write``, ``put_log`` or ``switch_log``, the first call),
printing ``paused`` so that the parent can SIGKILL it there, mid-transaction.

Usage: python -m tests.roll_child DATA_DIR DATABASE STEP   (DATABASE '' for the SQLite file)
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import roll
from notary.store import open_store


def pause_after(cls: type, name: str) -> None:
    original: Callable[..., Awaitable[Any]] = getattr(cls, name)

    @functools.wraps(original)
    async def paused(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, *args, **kwargs)
        print("paused", flush=True)
        await asyncio.Event().wait()  # until SIGKILL
        return result

    setattr(cls, name, paused)


async def main(data: str, database: str, step: str) -> None:
    paths = Paths(Path(data))
    if database:
        from ledger.storage.postgres import PostgresWriteTx

        pause_after(PostgresWriteTx, step)
    else:
        from ledger.storage.sqlite import SqliteWriteTx

        pause_after(SqliteWriteTx, step)
    store = await open_store(database, paths.db)
    await roll(store, load_log_key(paths))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
