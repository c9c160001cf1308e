"""Child process for the roll crash tests: runs ``notary log roll`` (the command itself) and
stops right after one of its transaction's steps (``write``, ``put_log`` or ``switch_log``,
the first call), holding the log's lock, printing ``paused`` so that the parent can SIGKILL it
there, mid-transaction.

MODE ``hold``: a line on standard input lets it go on: the roll commits and the command
prints what it froze (a roll whose lock the parent held as long as it wanted, e.g. to kill a
frontend meanwhile). Otherwise it waits for the SIGKILL.

MODE ``compromised``: the emergency roll (``--reason compromised``, a new ``log.key``); its
STEP may also be ``install``: stopped after the roll committed, before ``log.key`` is
replaced.

Usage: python -m tests.roll_child DATA_DIR DATABASE STEP [hold|compromised]
(DATABASE '' for the SQLite file)
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from notary.cli.main import main as notary_cli
from notary.serving import root_key


def pause_after(cls: type, name: str, hold: bool) -> None:
    original: Callable[..., Awaitable[Any]] = getattr(cls, name)
    paused_once: list[bool] = []

    @functools.wraps(original)
    async def paused(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, *args, **kwargs)
        if not paused_once:
            paused_once.append(True)
            print("paused", flush=True)
            if hold:
                await asyncio.to_thread(sys.stdin.readline)
            else:
                await asyncio.Event().wait()  # until SIGKILL
        return result

    setattr(cls, name, paused)


def main(data: str, database: str, step: str, mode: str = "") -> int:
    hold = mode == "hold"
    if step == "install":
        def stop(*args: Any) -> None:
            print("paused", flush=True)
            time.sleep(3600)  # until SIGKILL

        root_key.install_new_root = stop  # type: ignore[assignment]
    elif database:
        from ledger.storage.postgres import PostgresWriteTx

        pause_after(PostgresWriteTx, step, hold)
    else:
        from ledger.storage.sqlite import SqliteWriteTx

        pause_after(SqliteWriteTx, step, hold)
    return notary_cli(["log", "roll", "--data", data,
                       *(["--database", database] if database else []),
                       *(["--reason", "compromised"] if mode == "compromised" else [])])


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
