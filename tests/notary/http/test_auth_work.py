"""An existing key id with a wrong secret costs what an unknown key id costs.

Timing is not asserted (tests never measure speed); the work is. Both refusals must run the
same SQL statements, the same number of SQLite virtual-machine steps, and the same sequence of
Python and C calls, which is what makes their timing alike. Before the fix the known key id
cost an extra joined row and a row object, about 5 µs of difference per request.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp

from notary.http.appkeys import NOTARY
from notary.serving.refusals import Unauthorized
from notary.serving.service import Notary
from notary.store.sqlite import SqliteNotaryStore
from tests.notary_server import app_notary, run_cli


async def _work(notary: Notary, token: str) -> tuple[list[str], int, list[tuple[str, str]]]:
    """(SQL statements, SQLite VM steps, calls made) of one refused authentication."""
    assert isinstance(notary.store, SqliteNotaryStore)
    conn = notary.store._point  # the connection key lookups run on (on the event loop)
    statements: list[str] = []
    steps = [0]
    calls: list[tuple[str, str]] = []

    def step() -> int:
        steps[0] += 1
        return 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            calls.append((event, f"{frame.f_code.co_filename}:{frame.f_code.co_name}"))
        elif event == "c_call":
            calls.append((event, getattr(arg, "__qualname__", type(arg).__name__)))

    conn.set_trace_callback(statements.append)
    conn.set_progress_handler(step, 1)
    sys.setprofile(profile)
    try:
        await notary.authenticate(f"Bearer {token}")
    except Unauthorized:
        pass
    else:
        raise AssertionError("the key was accepted")
    finally:
        sys.setprofile(None)
        conn.set_progress_handler(None, 1)
        conn.set_trace_callback(None)
    return statements, steps[0], calls


async def test_unknown_key_id_and_wrong_secret_do_the_same_work(tmp_path: Path) -> None:
    async with app_notary(tmp_path / "data") as served:
        key = await served.new_api_key("alice")
        for i in range(20):
            await served.new_api_key(f"other{i}")
        key_id, secret = key[3:15], key[16:]  # nk_<12 hex>_<43 chars, "_" among them>
        wrong_secret = f"nk_{key_id}_{('B' if secret[0] == 'A' else 'A')}{secret[1:]}"
        unknown_id = f"nk_{'0' * 12}_{secret}"
        notary = served.app[NOTARY]

        # Over HTTP the two refusals are indistinguishable.
        answers = []
        async with aiohttp.ClientSession() as http:
            for token in (wrong_secret, unknown_id):
                async with http.post(f"{served.url}/v1/tool-calls",
                                     json={"server": "s", "tool": "t", "call_sha256": "0" * 64},
                                     headers={"Authorization": f"Bearer {token}"}) as r:
                    answers.append((r.status, await r.json(), r.headers["WWW-Authenticate"]))
        assert answers[0] == answers[1] and answers[0][0] == 401

        # And they do the same work (after one call each, so both see a warm key cache).
        await _work(notary, wrong_secret)
        await _work(notary, unknown_id)
        known = await _work(notary, wrong_secret)
        unknown = await _work(notary, unknown_id)
        # No statement at all: the keys are answered from memory while no change is
        # signalled (notary.store.sqlite_state.KeySignal), whichever key id is asked for.
        assert known[0] == unknown[0] == [], (known[0], unknown[0])
        assert known[1] == unknown[1], f"SQLite VM steps: {known[1]} vs {unknown[1]}"
        assert known[2] == unknown[2]


async def test_revocation_and_new_keys_take_effect_at_once(tmp_path: Path) -> None:
    """The key table is cached in memory; a change by another process is seen on the next
    request (the cache is keyed by a version that triggers bump)."""
    async with app_notary(tmp_path / "data") as served:
        notary = served.app[NOTARY]
        first = await served.new_api_key("alice")
        assert (await notary.authenticate(f"Bearer {first}")).name == "alice"
        second = await served.cli_api_key("bob", allowance=7)  # another process (the CLI)
        account = await notary.authenticate(f"bearer {second}")
        assert (account.name, account.monthly_allowance) == ("bob", 7)
        code, _ = await asyncio.to_thread(
            run_cli, "apikey", "revoke", "--data", str(served.data), first)
        assert code == 0
        try:
            await notary.authenticate(f"Bearer {first}")
        except Unauthorized as e:
            assert "revoked" in str(e)
        else:
            raise AssertionError("a revoked key was accepted")
