"""tests/notary_server.py's in-loop notary: creating a key never blocks the loop it serves in."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.notary_server import app_notary


async def test_a_cli_key_waits_out_a_write_the_loop_holds(tmp_path: Path) -> None:
    """``notary apikey create`` is another writer of the database: while a job of the in-loop
    notary holds SQLite's write lock across an await (as witnessing does), the command waits,
    and must not block the loop meanwhile, or the lock is never released and the command times
    out (a blocking helper once failed a full-suite run that way)."""
    async with app_notary(tmp_path / "data") as served:
        async with served.store.transaction():
            made = asyncio.create_task(served.cli_api_key("bob", allowance=7))
            await asyncio.sleep(0.5)  # the command reaches the lock meanwhile
            assert not made.done()  # it waits for the write this loop holds
        key = await made
        account = await served.notary.authenticate(f"Bearer {key}")
        assert (account.name, account.monthly_allowance) == ("bob", 7)
