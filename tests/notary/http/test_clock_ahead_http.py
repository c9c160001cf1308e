"""Over HTTP: a write that would carry a future ``issued_at`` is a 503 ``clock_behind_log``,
counted in ``/metrics`` and reported by ``/healthz``, and changes nothing (docs/design.md,
"Honest times").

The notary's clock is the test hook (``Notary.clock``): it runs a day ahead for one write (as
a frontend with a wrong clock would), then is right again.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import aiohttp

from notary.core.records import CallRecord, new_salt
from notary.serving.clock_guard import utc_now
from tests.notary_server import app_notary


def _body(n: int) -> dict[str, str]:
    rec = CallRecord(server="srv", tool="echo", arguments={"n": n},
                     result={"content": []}, salt=new_salt())
    return {"server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()}


async def test_a_future_issued_at_is_refused_counted_and_reported(tmp_path: Path) -> None:
    async with app_notary(tmp_path / "data") as served, aiohttp.ClientSession() as http:
        key = await served.new_api_key("alice")
        auth = {"Authorization": f"Bearer {key}"}
        served.notary.clock = lambda: utc_now() + timedelta(days=1)
        async with http.post(served.url + "/v1/tool-calls", data=json.dumps(_body(1)),
                             headers=auth) as r:
            assert r.status == 201
        served.notary.clock = utc_now
        async with http.post(served.url + "/v1/tool-calls", data=json.dumps(_body(2)),
                             headers=auth) as r:
            err = await r.json()
            assert r.status == 503 and err["error"]["code"] == "clock_behind_log"
            assert int(r.headers["Retry-After"]) > 0
        async with http.get(served.url + "/healthz") as r:
            health = await r.json()
        assert r.status == 200
        assert (health["status"], health["writes"], health["size"]) == ("failing", "refused", 1)
        assert "clock" in health["problem"]
        async with http.get(served.url + "/metrics") as r:
            assert "notary_clock_refusals_total 1.0" in await r.text()
        async with http.get(served.url + "/v1/ledger") as r:
            assert (await r.json())["size"] == 1
