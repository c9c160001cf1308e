"""The request metrics middleware: every request counted once under its own labels, with the
label children resolved once (a cache) and still counted when that cache is full."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import generate_latest

from notary.http import metrics as metrics_module
from notary.http.metrics import Metrics
from tests.servers import Serve


def _count(m: Metrics, route: str, method: str, status: str) -> float:
    value = m.registry.get_sample_value(
        "notary_http_requests_total", {"route": route, "method": method, "status": status})
    return value or 0.0


async def test_each_series_counted_with_the_cache_and_past_its_bound(
        monkeypatch: pytest.MonkeyPatch, serve: Serve) -> None:
    monkeypatch.setattr(metrics_module, "_MAX_SERIES", 2)
    m = Metrics()
    resolved: list[tuple[str, ...]] = []
    labels = m.requests.labels

    def counting_labels(*values: str) -> object:
        resolved.append(values)
        return labels(*values)

    monkeypatch.setattr(m.requests, "labels", counting_labels)

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({}, status=201 if request.method == "POST" else 200)

    app = web.Application(middlewares=[m.middleware()])
    app.router.add_route("*", "/x", ok)
    served = await serve(app)
    async with aiohttp.ClientSession() as http:
        for method in ("POST", "POST", "GET", "PUT", "PUT", "PATCH", "POST"):
            async with http.request(method, served.url + "/x") as r:
                await r.read()
        async with http.get(served.url + "/nowhere") as r:
            assert r.status == 404
    assert _count(m, "/x", "POST", "201") == 3
    assert _count(m, "/x", "GET", "200") == 1
    assert _count(m, "/x", "PUT", "200") == 2  # past the cache's bound: uncached, still counted
    assert _count(m, "/x", "PATCH", "200") == 1
    assert _count(m, "unmatched", "GET", "404") == 1
    # labels() once per cached series; the two PUTs, past the bound, resolve every time.
    assert sorted(resolved) == sorted([("/x", "POST", "201"), ("/x", "GET", "200"),
                                       ("/x", "PUT", "200"), ("/x", "PUT", "200"),
                                       ("/x", "PATCH", "200"), ("unmatched", "GET", "404")])
    text = generate_latest(m.registry).decode()
    assert 'notary_http_request_duration_seconds_count{method="POST",route="/x"} 3.0' in text
