"""``GET /healthz/checkpoint``: green only while the log has produced a validly signed
checkpoint within ``max_age`` seconds, on a real notary on loopback.

Without witnesses the time is the newest checkpoint's commit; with witnesses it is when a
quorum last cosigned the checkpoint served, which the witnessing job refreshes while the log
is idle (so an idle witnessed log stays green, and goes red once its witnesses stop).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp

from ledger.core.cosignature import CosignatureSigner
from notary.serving.config import Settings
from notary.serving.startup import init_data_dir
from tests.notary_server import ServedNotary, create_api_key, live_notary, start_notary
from tests.servers import bound_socket
from tests.waiting import eventually
from tests.witness_servers import WitnessProc

H = "/healthz/checkpoint"


async def _health(http: aiohttp.ClientSession, url: str, query: str = ""
                  ) -> tuple[int, dict[str, Any]]:
    async with http.get(f"{url}{H}{query}") as r:
        assert r.headers["Cache-Control"] == "no-store"
        body: dict[str, Any] = await r.json()
        return r.status, body


async def test_unwitnessed_log_is_green_after_a_commit_and_red_once_idle_past_the_bound(
        tmp_path: Path) -> None:
    async with live_notary(tmp_path) as notary:
        await notary.notarize()
        status, body = await _health(notary.http, notary.url, "?max_age=30")
        assert status == 200, body
        assert body["status"] == "ok" and body["witnessed"] is False
        assert body["size"] == await notary.size() and 0 <= body["age"] < 30
        # Idle for longer than the bound: no checkpoint produced within it.
        await asyncio.sleep(1.2)
        status, body = await _health(notary.http, notary.url, "?max_age=1")
        assert status == 503, body
        assert body["status"] == "stale" and body["error"]["code"] == "checkpoint_stale"
        assert "committed" in body["problem"] and body["age"] > 1
        # A write signs a new checkpoint: green again under the same bound.
        await notary.notarize()
        status, body = await _health(notary.http, notary.url, "?max_age=1")
        assert status == 200, body
        # The default bound without witnesses is an hour.
        status, body = await _health(notary.http, notary.url)
        assert status == 200 and body["max_age"] == 3600


async def test_bad_max_age_is_refused(tmp_path: Path) -> None:
    async with live_notary(tmp_path) as notary:
        for query in ("?max_age=soon", "?max_age=-1", "?max_age=nan", "?max_age=inf",
                      "?max_age=1&max_age=2"):
            status, body = await _health(notary.http, notary.url, query)
            assert (status, body["error"]["code"]) == (400, "invalid_max_age"), query
        status, body = await _health(notary.http, notary.url, "?maxage=1")
        assert (status, body["error"]["code"]) == (400, "unknown_field")


async def test_witnessed_idle_log_stays_green_while_witnesses_refresh_and_red_without_them(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    witness = WitnessProc(CosignatureSigner.generate("witness.test/w0"), tmp_path / "w0.db",
                          first.vkey)
    await witness.start()
    settings = Settings(data=base.data, listen=base.listen, witnesses=(witness.spec,),
                        witness_quorum=1, witness_interval=0.05, witness_timeout=0.5,
                        witness_refresh=0.5)
    # Before the notary runs: the command would block this loop, the notary's too.
    key = create_api_key(settings.data, "a")
    notary: ServedNotary = await start_notary(settings, http, first.vkey, sock)
    try:
        await notary.issue(key, 0)
        size = json.loads((await notary.get("/v1/ledger"))[1])["size"]

        async def witnessed() -> dict[str, Any] | None:
            status, body = await _health(http, notary.url, "?max_age=2")
            return body if status == 200 and body["size"] == size else None

        body = await eventually(witnessed, "a fresh witnessed checkpoint")
        assert body["witnessed"] is True
        # The default bound with witnesses: two refresh periods and a round.
        assert (await _health(http, notary.url))[1]["max_age"] == 2 * 0.5 + 0.05 + 0.5
        # Idle for several times the bound: the refreshed cosignatures keep it green.
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            status, body = await _health(http, notary.url, "?max_age=2")
            assert status == 200, body
            assert body["size"] == size and body["age"] <= 2
            await asyncio.sleep(0.25)
        # The witness stops answering: its last cosignature ages past the bound.
        await witness.stop()

        async def stale() -> dict[str, Any] | None:
            status, body = await _health(http, notary.url, "?max_age=2")
            return body if status == 503 else None

        body = await eventually(stale, "the health check to go red")
        assert body["error"]["code"] == "checkpoint_stale" and body["witnessed"] is True
        assert "cosigned by a witness quorum" in body["problem"] and body["age"] > 2
    finally:
        await notary.runner.cleanup()
        await witness.stop()
