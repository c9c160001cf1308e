"""Round trips to PostgreSQL per notarization and per commit (benchmarks/docs/pg_frontends.md),
and the key cache that saves authentication's round trip without weakening revocation.

Each statement sent to PostgreSQL is a network round trip that the frontend's event loop and a
backend both spend CPU on, and every one inside the commit transaction is made while holding
the log's lock that all frontends queue on. These tests count them (statements handed to
asyncpg, which sends each as one round trip) for one sequential notarization, so that a change
that adds one shows up here, not only as a slower benchmark.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from asyncpg.connection import Connection

from notary.core.accounts import split_api_key
from notary.http.appkeys import NOTARY
from notary.store.postgres import PgNotaryStore
from tests.notary_server import AppNotary, app_notary

# One sequential notarization of a new digest by an unlimited account, with a warm key cache:
# the commit and nothing else (no API-key version read, no known-digest read before it).
COMMIT = ["BEGIN", "SELECT size, time, note, history_time, active_log FROM ledger_state",
          "SELECT 0, r.idx", "WITH s AS", "COMMIT"]


@contextmanager
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement sent on any asyncpg connection while inside, in order (normalized)."""
    sent: list[str] = []
    plain = Connection.execute
    extended = Connection._execute

    async def execute(self: Connection, query: str, *args: Any, **kw: Any) -> Any:
        if not args:  # the simple-query protocol; with args it goes through _execute
            sent.append(" ".join(query.split()).rstrip(";"))
        return await plain(self, query, *args, **kw)

    async def _execute(self: Connection, query: str, *args: Any, **kw: Any) -> Any:
        sent.append(" ".join(query.split()))
        return await extended(self, query, *args, **kw)

    with monkeypatch.context() as m:
        m.setattr(Connection, "execute", execute)
        m.setattr(Connection, "_execute", _execute)
        yield sent


def _matches(sent: list[str], expected: list[str]) -> bool:
    return len(sent) == len(expected) and all(
        s.startswith(e) for s, e in zip(sent, expected, strict=True))


@dataclass
class Served:
    served: AppNotary
    http: aiohttp.ClientSession
    url: str

    @property
    def store(self) -> PgNotaryStore:
        store = self.served.app[NOTARY].store
        assert isinstance(store, PgNotaryStore)
        return store

    async def new_key(self, account: str) -> str:
        """A key made by this process, once its own notification came back (so the cache is
        not made stale again by it during the test)."""
        notices = self.store._notices
        token = await self.served.new_api_key(account, None)
        await _until(lambda: self.store._notices > notices, "the key's notification")
        return token

    async def post(self, n: int, token: str, server: str = "srv") -> tuple[int, Any]:
        body = {"server": server, "tool": "echo",
                "call_sha256": hashlib.sha256(f"call {n}".encode()).hexdigest()}
        async with self.http.post(f"{self.served.url}/v1/tool-calls", json=body,
                                  headers={"Authorization": f"Bearer {token}"}) as r:
            return r.status, await r.json()


@asynccontextmanager
async def serving(tmp_path: Path, pg_url: str) -> AsyncIterator[Served]:
    async with app_notary(tmp_path / "data", database=pg_url) as served, \
            aiohttp.ClientSession() as http:
        yield Served(served, http, pg_url)


def _key_id(token: str) -> str:
    parts = split_api_key(token)
    assert parts is not None
    return parts[0]


async def _elsewhere(url: str, sql: str, *args: Any) -> None:
    """A change made by another process (its own connection), as `notary apikey` would."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql, *args)
    finally:
        await conn.close()


async def _until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 10.0
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_a_notarization_is_its_commit_and_nothing_more(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(tmp_path, pg_url) as s:
        token = await s.new_key("alice")
        for n in range(3):  # warm: statements prepared, names and keys cached
            assert (await s.post(n, token))[0] == 201
        with counted(monkeypatch) as sent:
            status, first = await s.post(100, token)
        assert status == 201 and _matches(sent, COMMIT), sent
        with counted(monkeypatch) as sent:  # a known digest: found by the screen, 200
            status, again = await s.post(100, token)
        assert status == 200 and again["id"] == first["id"]
        # (then, perhaps, the head's read for its proof, as for any stored receipt)
        assert _matches(sent[:4], [*COMMIT[:3], "COMMIT"]), sent
        assert all(s.startswith("SELECT size, time, note FROM") for s in sent[4:]), sent


async def test_a_commit_after_another_frontends_catches_up_in_the_screens_round_trip(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two frontends of one log taking turns, as under load: each commit follows the other's,
    and the other's entries, which it catches up from, come with the screen's reads, so the
    commit is the same five statements as a lone frontend's (no read of its own under the
    lock); the receipts issued in turns are each at their own index of one log."""
    async with serving(tmp_path / "a", pg_url) as a:
        token = await a.new_key("alice")
        second = tmp_path / "b" / "data"
        second.mkdir(parents=True, mode=0o700)
        for name in ("log.key", "log.vkey"):
            (second / name).write_bytes((a.served.data / name).read_bytes())
            (second / name).chmod(0o600)
        async with app_notary(second, database=pg_url) as served_b, \
                aiohttp.ClientSession() as http_b:
            b = Served(served_b, http_b, pg_url)
            indexes = []
            for n in range(4):  # warm both: statements prepared, names and keys cached
                front = (a, b)[n % 2]
                status, body = await front.post(n, token)
                assert status == 201, body
                indexes.append(body["ledger"]["index"])
            for n in range(4, 10):
                front = (a, b)[n % 2]
                with counted(monkeypatch) as sent:
                    status, body = await front.post(n, token)
                assert status == 201 and _matches(sent, COMMIT), sent
                indexes.append(body["ledger"]["index"])
            assert indexes == list(range(10))
            head = await b.store.latest()
            assert head is not None and head.size == 10


async def test_a_key_revoked_elsewhere_issues_nothing_before_its_notice(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache trusted by authentication is a notification behind at worst; the screen,
    under the lock, sees the key version moved and re-checks the batch's keys."""
    async with serving(tmp_path, pg_url) as s:
        token = await s.new_key("alice")
        assert (await s.post(0, token))[0] == 201
        assert s.store._keys_fresh
        # The notification is still on its way: the frontend has not seen it.
        await s.store._listener.remove_listener("notary_key_version", s.store._key_notice)
        await _elsewhere(s.url, "UPDATE notary_api_keys SET revoked = 1 WHERE key_id = $1",
                         _key_id(token))
        assert s.store._keys_fresh  # authentication still trusts its cache
        status, err = await s.post(1, token)
        assert status == 401 and "revoked" in err["error"]["message"]
        assert (await s.post(2, token))[0] == 401  # and from now on, at authentication
        assert (await s.store.latest()) is not None and (await s.store.latest()).size == 1


async def test_a_key_created_elsewhere_works_once_notified(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(tmp_path, pg_url) as s:
        token = await s.new_key("alice")
        assert (await s.post(0, token))[0] == 201 and s.store._keys_fresh
        other = await s.served.new_api_key("bob", None)  # this process: seen at once
        assert (await s.post(1, other, "bobs"))[0] == 201
        # Another process adds a key to bob's account: the notice makes the cache re-check.
        record = await s.store.api_key(_key_id(other))
        assert record is not None
        await _elsewhere(
            s.url, "INSERT INTO notary_api_keys (key_id, account, secret_sha256, created) "
            "SELECT 'aaaaaaaaaaaa', account, secret_sha256, 0 FROM notary_api_keys "
            "WHERE key_id = $1", _key_id(other))
        await _until(lambda: not s.store._keys_fresh, "the notification")
        assert (await s.store.api_key("aaaaaaaaaaaa")) is not None


async def test_without_its_listen_connection_every_lookup_reads_the_version(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(tmp_path, pg_url) as s:
        token = await s.new_key("alice")
        assert (await s.post(0, token))[0] == 201 and s.store._keys_fresh
        monkeypatch.setattr(s.store, "_relisten", lambda: None)  # stays down
        s.store._listener.terminate()
        await _until(lambda: s.store._listener is None, "the termination")
        for n in (1, 2):
            with counted(monkeypatch) as sent:
                assert (await s.post(n, token))[0] == 201
            assert _matches(sent, ["SELECT n FROM notary_key_version", *COMMIT]), sent
        monkeypatch.undo()
        await s.store.api_key(_key_id(token))  # reopens it in the background
        await _until(lambda: s.store._listener is not None, "the new LISTEN connection")
        await s.store.api_key(_key_id(token))
        assert s.store._keys_fresh


async def test_a_commits_write_plans_only_what_it_writes_and_no_function_scan(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit's one write statement holds only the CTEs that have rows to write (each
    CTE costs the server its plan's set-up and its tables' and indexes' locks at every
    execution, rows or none), and unnests the receipts' arrays in the select list (a
    ProjectSet), not with a function scan that first copies each array into a tuple store
    (benchmarks/docs/pg_frontends.md)."""
    writes: list[tuple[str, Sequence[Any]]] = []
    extended = Connection._execute

    async def _execute(self: Connection, query: str, args: Sequence[Any], *more: Any,
                       **kw: Any) -> Any:
        if query.startswith("WITH "):
            writes.append((query, args))
        return await extended(self, query, args, *more, **kw)

    async with serving(tmp_path, pg_url) as s:
        token = await s.new_key("alice")
        assert (await s.post(0, token))[0] == 201  # the first: with a history row
        with monkeypatch.context() as m:
            m.setattr(Connection, "_execute", _execute)
            assert (await s.post(1, token))[0] == 201
        assert len(writes) == 1
        query, args = writes[0]
        # The checkpoint, the edge's parts, the receipt, its usage, the latest issued_at: no
        # whole tile, cleared part, history row or server name claim to write.
        assert re.findall(r"(?m)^(?:WITH |,)?(\w+) AS \(", query) == ["s", "p", "r", "u", "n"]
        conn = await asyncpg.connect(pg_url)
        try:  # EXPLAIN without ANALYZE plans the statement and runs none of it
            plan = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {query}", *args))
        finally:
            await conn.close()
    inserts = {n["Relation Name"]: n["Plans"][0]["Node Type"] for n in _nodes(plan[0]["Plan"])
               if n["Node Type"] == "ModifyTable" and n.get("Operation") == "Insert"}
    assert inserts == {"ledger_tile_parts": "ProjectSet", "notary_receipts": "ProjectSet",
                       "notary_usage": "ProjectSet"}


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)
