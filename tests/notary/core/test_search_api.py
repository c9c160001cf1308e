"""``GET /v1/tool-calls`` as a search: the notary app on a loopback socket, driven over HTTP.

Newest first by (issued_at, index), filtered by server, tool and a time range, in bounded pages
joined by opaque cursors that stay stable while new receipts arrive; every bad parameter is a
precise 400; and every combination of filters is answered from an index, not a table scan.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest

from notary.core.search import DEFAULT_LIMIT, MAX_LIMIT, Cursor, encode_cursor
from tests.notary_server import AppNotary, app_notary


class Client:
    def __init__(self, notary: AppNotary, http: aiohttp.ClientSession, key: str) -> None:
        self.notary, self.http, self.key = notary, http, key

    async def issue(self, server: str, tool: str) -> dict[str, Any]:
        body = {"server": server, "tool": tool, "call_sha256": secrets.token_hex(32)}
        async with self.http.post(self.notary.url + "/v1/tool-calls", json=body,
                                  headers={"Authorization": f"Bearer {self.key}"}) as r:
            assert r.status == 201
            receipt: dict[str, Any] = await r.json()
            return receipt

    async def search(self, **params: str | int) -> tuple[int, Any]:
        async with self.http.get(f"{self.notary.url}/v1/tool-calls?{urlencode(params)}") as r:
            return r.status, await r.json()

    async def ok(self, **params: str | int) -> dict[str, Any]:
        status, body = await self.search(**params)
        assert status == 200, body
        assert isinstance(body, dict)
        return body

    async def all_ids(self, **params: str | int) -> list[str]:
        """Every page, following next_cursor."""
        ids: list[str] = []
        cursor: str | None = None
        while True:
            page = await self.ok(**params, **({"cursor": cursor} if cursor else {}))
            ids += [r["id"] for r in page["tool_calls"]]
            cursor = page["next_cursor"]
            if cursor is None:
                return ids


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    async with app_notary(tmp_path / "data") as notary, aiohttp.ClientSession() as http:
        yield Client(notary, http, await notary.new_api_key("search"))


def newest_first(receipts: list[dict[str, Any]]) -> list[str]:
    ordered = sorted(receipts, key=lambda r: (r["issued_at"], r["ledger"]["index"]), reverse=True)
    return [r["id"] for r in ordered]


async def test_newest_first_filters_and_pages(client: Client) -> None:
    made = []
    for i in range(7):
        made.append(await client.issue("weather", "forecast" if i % 2 else "alerts"))
        made.append(await client.issue("files", "read"))
    everything = await client.ok()
    assert [r["id"] for r in everything["tool_calls"]] == newest_first(made)
    assert everything["next_cursor"] is None
    # Search results are the signed receipts themselves (no proof: fetch the receipt for one).
    first = everything["tool_calls"][-1]
    assert first == {k: v for k, v in made[0].items() if k != "proof"}

    weather = [r for r in made if r["server"] == "weather"]
    assert await client.all_ids(server="weather", limit=2) == newest_first(weather)
    forecast = [r for r in weather if r["tool"] == "forecast"]
    assert await client.all_ids(server="weather", tool="forecast", limit=1) == newest_first(
        forecast)
    assert await client.all_ids(tool="read", limit=3) == newest_first(
        [r for r in made if r["tool"] == "read"])
    assert (await client.ok(server="nobody"))["tool_calls"] == []

    # since is inclusive, until exclusive, both on issued_at.
    times = sorted({r["issued_at"] for r in made})
    lo, hi = times[2], times[-2]
    window = [r for r in made if lo <= r["issued_at"] < hi]
    assert window, "the calls span several milliseconds"
    assert await client.all_ids(since=lo, until=hi, limit=2) == newest_first(window)
    # Any RFC 3339 spelling of the same instant selects the same receipts.
    as_offset = lo.replace("Z", "+00:00")
    assert await client.all_ids(since=as_offset, until=hi) == newest_first(window)


async def test_cursors_are_stable_while_receipts_arrive(client: Client) -> None:
    made = [await client.issue("srv", "t") for _ in range(6)]
    page1 = await client.ok(limit=3)
    assert [r["id"] for r in page1["tool_calls"]] == newest_first(made)[:3]
    for _ in range(4):
        await client.issue("srv", "t")  # newer than anything the cursor points past
    page2 = await client.ok(limit=3, cursor=page1["next_cursor"])
    assert [r["id"] for r in page2["tool_calls"]] == newest_first(made)[3:]
    assert page2["next_cursor"] is None
    # The same cursor gives the same page again.
    again = await client.ok(limit=3, cursor=page1["next_cursor"])
    assert again == page2


async def test_limit_default_and_bound(client: Client) -> None:
    for _ in range(DEFAULT_LIMIT + 1):
        await client.issue("srv", "t")
    page = await client.ok()
    assert len(page["tool_calls"]) == DEFAULT_LIMIT and page["next_cursor"] is not None
    page = await client.ok(limit=MAX_LIMIT)
    assert len(page["tool_calls"]) == DEFAULT_LIMIT + 1 and page["next_cursor"] is None


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": "0"}, "invalid_limit"),
        ({"limit": str(MAX_LIMIT + 1)}, "invalid_limit"),
        ({"limit": "05"}, "invalid_limit"),
        ({"limit": "ten"}, "invalid_limit"),
        ({"limit": "-1"}, "invalid_limit"),
        ({"since": "yesterday"}, "invalid_time"),
        ({"since": "2026-01-01T00:00:00"}, "invalid_time"),  # no time zone: ambiguous
        ({"until": "2026-02-30T00:00:00Z"}, "invalid_time"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "invalid_time"),
        ({"since": "2026-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "invalid_time"),
        ({"cursor": "nonsense"}, "invalid_cursor"),
        ({"cursor": "djF8eHx4"}, "invalid_cursor"),  # base64url of "v1|x|x"
        ({"cursor": "x" * 500}, "invalid_cursor"),
        ({"server": ""}, "invalid_name"),
        ({"tool": "t" * 257}, "invalid_name"),
        ({"server": "a\nb"}, "invalid_name"),
        ({"page": "2"}, "unknown_field"),
        ({"call_sha256": "a" * 64, "server": "srv"}, "invalid_query"),
    ],
)
async def test_bad_parameters_are_precise_400s(client: Client, params: dict[str, str],
                                               code: str) -> None:
    status, body = await client.search(**params)
    assert (status, body["error"]["code"]) == (400, code), body
    assert body["error"]["message"]


async def test_repeated_parameter_is_refused(client: Client) -> None:
    async with client.http.get(client.notary.url + "/v1/tool-calls?server=a&server=b") as r:
        assert r.status == 400
        assert (await r.json())["error"]["code"] == "repeated_parameter"


async def test_a_tampered_cursor_is_refused(client: Client) -> None:
    good = encode_cursor(Cursor("2026-01-01T00:00:00.000Z", 5))
    status, _ = await client.search(cursor=good)
    assert status == 200
    for bad in (good[:-1], good + "A", good.replace("8", "9", 1)):
        status, body = await client.search(cursor=bad)
        assert (status, body["error"]["code"]) == (400, "invalid_cursor"), bad


async def test_lookup_by_digest_still_works(client: Client) -> None:
    receipt = await client.issue("srv", "t")
    status, found = await client.search(call_sha256=receipt["call_sha256"])
    assert status == 200 and found["id"] == receipt["id"] and "proof" in found


@pytest.mark.parametrize(
    "filters",
    [{}, {"server": "s"}, {"server": "s", "tool": "t"}, {"tool": "t"},
     {"since": "2000-01-01T00:00:00.000Z"}, {"server": "s", "until": "2999-01-01T00:00:00.000Z"},
     {"server": "s", "tool": "t", "since": "2000-01-01T00:00:00.000Z",
      "until": "2999-01-01T00:00:00.000Z"}],
)
async def test_every_search_is_an_index_range_scan(client: Client, filters: dict[str, str]
                                                   ) -> None:
    """The query plan of each filter combination is one range search of the receipts (by an
    index whose key starts with the equality filters, or by the log index the time bounds
    give), read in order: no table scan, no temporary sort."""
    for server, tool in (("s", "t"), ("s", "u"), ("z", "t")):
        await client.issue(server, tool)
    store = client.notary.store
    real = store._point  # type: ignore[attr-defined]
    plans: list[str] = []

    class Spy:
        def execute(self, sql: str, args: Any = ()) -> sqlite3.Cursor:
            if sql.lstrip().startswith("SELECT r.idx"):  # the receipts query itself
                plans.append(" | ".join(str(row[-1]) for row in
                                        real.execute("EXPLAIN QUERY PLAN " + sql, args)))
            return real.execute(sql, args)

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    store._point = Spy()  # type: ignore[attr-defined]
    try:
        await store.search_receipts(**filters, before=("2999-06-01T00:00:00.000Z", 7),
                                    limit=21)
    finally:
        store._point = real  # type: ignore[attr-defined]
    assert len(plans) == 1 and plans[0].startswith("SEARCH r USING"), plans
    main = plans[0].split(" | ")[0]
    for column in ("server", "tool"):  # equality filters are part of the index key
        assert (f"{column}=?" in main) == (column in filters), plans
    assert "SCAN" not in plans[0] and "TEMP B-TREE" not in plans[0], plans
