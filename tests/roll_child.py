"""Child process for the roll crash test: runs ``notary log roll``'s transaction and stops for
good right after one of its steps (``write``, ``put_log`` or ``switch_log``, the first call),
printing ``paused`` so that the parent can SIGKILL it there, mid-transaction.

With a fourth argument ``compromised``, it runs the emergency roll (a new ``log.key``); its
STEP may also be ``install``: stopped after the roll committed, before ``log.key`` is replaced.

Usage: python -m tests.roll_child DATA_DIR DATABASE STEP [compromised]
(DATABASE '' for the SQLite file)
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from notary.serving import root_key
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


async def main(data: str, database: str, step: str, reason: str = "operator") -> None:
    paths = Paths(Path(data))
    if step == "install":
        def stop(*args: Any) -> None:
            print("paused", flush=True)
            time.sleep(3600)  # until SIGKILL

        root_key.install_new_root = stop  # type: ignore[assignment]
    elif database:
        from ledger.storage.postgres import PostgresWriteTx

        pause_after(PostgresWriteTx, step)
    else:
        from ledger.storage.sqlite import SqliteWriteTx

        pause_after(SqliteWriteTx, step)
    store = await open_store(database, paths.db)
    if reason == "compromised":
        await root_key.emergency_roll(store, paths, load_log_key(paths))
    else:
        await roll(store, load_log_key(paths))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
