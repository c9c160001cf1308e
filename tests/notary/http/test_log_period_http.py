"""``notary serve --log-period 1h --log-retention 1h`` on loopback, its clock injected (issue 33):
crossing a boundary rolls the log with reason ``scheduled`` and new receipts land in the next
log; a restart after two more boundaries rolls once and prunes the old frozen logs whole."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from notary.core.periods import Span, next_boundary
from notary.http.app import create_app
from notary.http.appkeys import STORE
from notary.http.log_jobs import CLOCK
from notary.operator import admin
from notary.serving.config import Settings
from notary.serving.log_schedule import POLL
from notary.serving.startup import init_data_dir
from tests.notary_server import HOST, headless_settings
from tests.servers import Served, bound_socket, start_server
from tests.waiting import eventually

HOUR = Span(1, "h")


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def past_next_boundary(self) -> None:
        at = datetime.fromtimestamp(self.now, UTC)
        self.now = next_boundary(HOUR, at).timestamp() + 1


async def serve(config: Settings, clock: Clock, port: int = 0) -> Served:
    app = create_app(config)
    app[CLOCK] = clock  # no setting reaches it: code only
    return await start_server(app, sock=bound_socket(port))


async def logs(http: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with http.get(url + "/v1/ledger") as r:
        assert r.status == 200
        listed: list[dict[str, Any]] = (await r.json())["logs"]
        return listed


async def test_period_rolls_and_retention_while_serving(shared: str, tmp_path: Path) -> None:
    sock = bound_socket()
    port = sock.getsockname()[1]
    base = headless_settings(tmp_path / "data", shared)
    config = Settings(data=base.data, database=base.database, listen=f"{HOST}:{port}",
                      log_period="1h", log_retention="1h")
    init_data_dir(config)
    clock = Clock()
    app = create_app(config)
    app[CLOCK] = clock
    served = await start_server(app, sock=sock)
    try:
        async with aiohttp.ClientSession() as http:
            token = (await admin.create_api_key(served.app[STORE], "a", None)).token
            auth = {"Authorization": f"Bearer {token}"}

            async def post(n: int) -> dict[str, Any]:
                body = {"server": "srv", "tool": "t", "call_sha256": f"{n:064x}"}
                async with http.post(served.url + "/v1/tool-calls", json=body,
                                     headers=auth) as r:
                    assert r.status == 201, await r.text()
                    receipt: dict[str, Any] = await r.json()
                    return receipt

            first = await post(1)
            assert len(await logs(http, served.url)) == 1
            clock.past_next_boundary()

            async def rolled() -> list[dict[str, Any]] | None:
                listed = await logs(http, served.url)
                return listed if len(listed) == 2 else None

            listed = await eventually(rolled, "the period roll", timeout=10)
            assert [g["state"] for g in listed] == ["frozen", "active"]
            assert listed[0]["origin"] == first["ledger"]["origin"]
            assert listed[0]["size"] == 2  # the receipt, then the successor record
            later = await post(2)
            assert later["ledger"]["origin"] == listed[1]["origin"]
            clock.now += 600  # later in the period: no second roll
            await asyncio.sleep(2 * POLL)
            assert len(await logs(http, served.url)) == 2
    finally:
        await served.stop()
    # Stopped across two boundaries (over an hour after log 0 froze): one roll at start, and
    # retention prunes log 0 whole (log 1, frozen now, is kept).
    clock.past_next_boundary()
    clock.past_next_boundary()
    served = await serve(config, clock, port)
    try:
        async with aiohttp.ClientSession() as http:
            async def settled() -> list[dict[str, Any]] | None:
                listed = await logs(http, served.url)
                return listed if len(listed) == 3 and listed[0]["min_index"] else None

            listed = await eventually(settled, "a roll and retention at start", timeout=10)
            assert [g["state"] for g in listed] == ["frozen", "frozen", "active"]
            assert [g["min_index"] for g in listed] == [2, 0, 0]
            async with http.get(served.url + "/logs/0/v1/ledger/entries/0") as r:
                assert r.status == 404 and "pruned" in await r.text()
    finally:
        await served.stop()
