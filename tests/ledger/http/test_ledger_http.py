"""The log's HTTP read API, exercised over real loopback HTTP against a SQLite-backed log."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from ledger.core.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.note import Ed25519Signer, Ed25519Verifier
from ledger.core.proofs import ProofError, verify_consistency, verify_inclusion
from ledger.core.tiles import TILE_WIDTH, tiles_for_size
from ledger.core.tlog_proof import decode_proof_bundle
from ledger.http.errors import ApiError, error_middleware
from ledger.http.routes import LOG, PUBLISHED_CHECKPOINT, add_ledger_routes, create_ledger_app
from ledger.log.errors import LogRollbackError
from ledger.log.facade import Log
from ledger.storage.base import StoreUnavailableError
from ledger.storage.sqlite import SqliteStore
from tests.servers import Serve

ORIGIN = "example.com/http-test"
IMMUTABLE = "public, max-age=31536000, immutable"
SHORT = "public, max-age=2"


def entry(i: int) -> bytes:
    return f"entry {i}".encode() * (i % 7)  # includes empty entries (i % 7 == 0)


@dataclass
class Served:
    log: Log
    url: str
    http: aiohttp.ClientSession
    entries: list[bytes]

    async def append(self, n: int) -> None:
        new = [entry(len(self.entries) + i) for i in range(n)]
        await asyncio.gather(*(self.log.append(e) for e in new))
        self.entries.extend(new)

    async def get(self, path: str, **kw: Any) -> tuple[aiohttp.ClientResponse, bytes]:
        async with self.http.get(self.url + path, **kw) as r:
            return r, await r.read()

    async def json(self, path: str, status: int = 200) -> Any:
        r, body = await self.get(path)
        assert r.status == status, body
        assert r.content_type == "application/json"
        return json.loads(body)


@pytest.fixture
async def served(tmp_path: Path, serve: Serve) -> AsyncIterator[Served]:
    signer = Ed25519Signer.generate(ORIGIN)
    store = await SqliteStore.open(tmp_path / "log.db", create=True)
    log = await Log.open(store, signer=signer)
    server = await serve(create_ledger_app(log))
    async with aiohttp.ClientSession() as http:
        yield Served(log, server.url, http, [])
    await server.stop()
    await log.close()


def verifier(s: Served) -> Ed25519Verifier:
    return s.log.verifier


async def served_checkpoint(s: Served) -> Checkpoint:
    r, body = await s.get("/checkpoint")
    assert r.status == 200
    cp, _ = open_checkpoint(body, verifier(s))
    return cp


def error_code(body: bytes) -> str:
    data = json.loads(body)
    assert set(data) == {"error"} and set(data["error"]) == {"code", "message"}
    assert data["error"]["message"]
    code: str = data["error"]["code"]
    return code


# --- /checkpoint --------------------------------------------------------------------------------


async def test_checkpoint_is_the_signed_note_with_short_caching(served: Served) -> None:
    r, body = await served.get("/checkpoint")
    assert r.status == 200
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert r.headers["Cache-Control"] == SHORT
    cp, _ = open_checkpoint(body, verifier(served))
    assert (cp.origin, cp.size, cp.root_hash) == (ORIGIN, 0, merkle_root([]))

    await served.append(10)
    cp = await served_checkpoint(served)
    assert cp.size == 10
    assert cp.root_hash == merkle_root([leaf_hash(e) for e in served.entries])


# --- tiles --------------------------------------------------------------------------------------


def bundle_of(entries: list[bytes]) -> bytes:
    return b"".join(len(e).to_bytes(2, "big") + e for e in entries)


def level0_of(entries: list[bytes]) -> bytes:
    return b"".join(leaf_hash(e) for e in entries)


async def test_every_tile_of_the_tree_is_served_with_the_right_bytes(served: Served) -> None:
    await served.append(600)
    tiles = tiles_for_size(600, entries=True)
    assert {t.path() for t in tiles} >= {"tile/1/000.p/2", "tile/0/002.p/88", "tile/entries/001"}
    for t in tiles:
        r, body = await served.get("/" + t.path())
        assert r.status == 200, t.path()
        assert r.headers["Content-Type"] == "application/octet-stream"
        assert r.headers["Cache-Control"] == IMMUTABLE  # partial ones too (tlog-tiles)
        first = t.index * TILE_WIDTH
        if t.is_entries:
            assert body == bundle_of(served.entries[first : first + t.width])
        elif t.level == 0:
            assert body == level0_of(served.entries[first : first + t.width])
        else:  # level 1: roots of the full level-0 tiles
            leaves = [leaf_hash(e) for e in served.entries]
            want = b"".join(merkle_root(leaves[i * 256 : (i + 1) * 256]) for i in range(t.width))
            assert body == want


async def test_entry_bundles_are_compressed_when_asked(served: Served) -> None:
    await served.append(300)
    r, body = await served.get("/tile/entries/000", headers={"Accept-Encoding": "gzip"})
    assert r.status == 200
    assert r.headers.get("Content-Encoding") == "gzip"
    assert body == bundle_of(served.entries[:256])  # the client decompressed it


async def test_partial_tiles_stay_available_as_prefixes(served: Served) -> None:
    await served.append(100)
    _, old_tile = await served.get("/tile/0/000.p/100")
    _, old_bundle = await served.get("/tile/entries/000.p/100")
    assert old_tile == level0_of(served.entries)
    await served.append(200)  # tile 0 is now full, tile 1 has 44
    for path, want in [("/tile/0/000.p/100", old_tile), ("/tile/entries/000.p/100", old_bundle)]:
        r, body = await served.get(path)
        assert r.status == 200 and body == want
        assert r.headers["Cache-Control"] == IMMUTABLE
    r, body = await served.get("/tile/0/000.p/50")
    assert r.status == 200 and body == old_tile[: 50 * 32]
    r, body = await served.get("/tile/0/000")
    assert r.status == 200 and body == level0_of(served.entries[:256])
    r, body = await served.get("/tile/0/001.p/44")
    assert r.status == 200 and body == level0_of(served.entries[256:300])
    r, body = await served.get("/tile/entries/001.p/44")
    assert r.status == 200 and body == bundle_of(served.entries[256:300])
    for beyond in ["/tile/0/001.p/45", "/tile/entries/001.p/45", "/tile/0/001",
                   "/tile/entries/001", "/tile/1/000", "/tile/1/000.p/2", "/tile/2/000.p/1"]:
        r, body = await served.get(beyond)
        assert r.status == 404, beyond
        assert error_code(body) == "not_found"
        assert r.headers["Cache-Control"] == "no-store"  # served once the tree covers it
    r, _ = await served.get("/tile/1/000.p/1")
    assert r.status == 200


async def test_empty_tree_serves_no_tiles(served: Served) -> None:
    for path in ["/tile/0/000.p/1", "/tile/entries/000.p/1", "/tile/0/000"]:
        r, body = await served.get(path)
        assert r.status == 404 and error_code(body) == "not_found"


@pytest.mark.parametrize("path", [
    "/tile/0/0", "/tile/0/0000", "/tile/00/000", "/tile/01/000", "/tile/64/000",
    "/tile/-1/000", "/tile/0/000.p/0", "/tile/0/000.p/256", "/tile/0/000.p/007",
    "/tile/0/x000/001", "/tile/0/1000", "/tile/0/x1/000", "/tile/entries/000.p/",
    "/tile/entries", "/tile/0/000/", "/tile/x/000", "/tile/0/000.p/1/2", "/tile/0/abc",
])
async def test_malformed_tile_paths_are_400(served: Served, path: str) -> None:
    await served.append(3)
    r, body = await served.get(path)
    assert r.status == 400, path
    assert error_code(body) == "bad_tile_path"


async def test_huge_tile_index_is_404_not_a_storage_error(served: Served) -> None:
    await served.append(3)
    # Seven groups: as many digits as a uint64 has, so a well-formed index beyond the tree.
    r, body = await served.get("/tile/0/x999/x999/x999/x999/x999/x999/999")
    assert r.status == 404 and error_code(body) == "not_found"
    # Eight groups or more: longer than any uint64 tree needs, refused before conversion.
    for groups in (8, 1500):
        r, body = await served.get("/tile/0/" + "x999/" * (groups - 1) + "999")
        assert r.status == 400 and error_code(body) == "bad_tile_path", groups


# --- JSON conveniences --------------------------------------------------------------------------


async def test_ledger_summary(served: Served) -> None:
    await served.append(5)
    data = await served.json("/v1/ledger")
    assert set(data) == {"origin", "vkey", "vkeys", "size", "root", "checkpoint"}
    assert data["origin"] == ORIGIN and data["size"] == 5
    assert data["vkeys"] == [data["vkey"]]  # no ML-DSA-44 key given to this app
    v = Ed25519Verifier.from_vkey(data["vkey"])
    cp, _ = open_checkpoint(data["checkpoint"].encode(), v)
    assert cp.size == 5 and base64.b64decode(data["root"]) == cp.root_hash


async def test_entry_with_its_proof_verifies_offline(served: Served) -> None:
    await served.append(300)
    for index in (0, 1, 255, 256, 299):
        data = await served.json(f"/v1/ledger/entries/{index}")
        assert data["index"] == index and data["size"] == 300
        e = base64.b64decode(data["entry"])
        assert e == served.entries[index]
        assert data["leaf_hash"] == leaf_hash(e).hex()
        bundle = decode_proof_bundle(data["proof"].encode())
        assert bundle.index == index
        assert bundle.checkpoint == data["checkpoint"].encode()
        cp, _ = open_checkpoint(bundle.checkpoint, verifier(served))
        verify_inclusion(index, cp.size, leaf_hash(e), bundle.proof, cp.root_hash)
        with pytest.raises(ProofError):
            verify_inclusion(index, cp.size, leaf_hash(e + b"x"), bundle.proof, cp.root_hash)


async def test_entry_beyond_the_tree_is_404(served: Served) -> None:
    await served.append(3)
    r, body = await served.get("/v1/ledger/entries/3")
    assert r.status == 404 and error_code(body) == "not_found"
    r, _ = await served.get("/v1/ledger/entries/2")
    assert r.status == 200


BAD_INTS = ["abc", "-1", "+1", "01", "1.0", "1e3", " 1", "１", "0x10", "",
            "99999999999999999999999", "18446744073709551616"]


@pytest.mark.parametrize("raw", BAD_INTS)
async def test_bad_entry_index_is_400(served: Served, raw: str) -> None:
    await served.append(3)
    r, body = await served.get("/v1/ledger/entries/" + raw)
    if raw == "":  # no index at all: a different route
        assert r.status == 404
        return
    assert r.status == 400, raw
    assert error_code(body) == "bad_parameter"


async def test_inclusion_proofs_verify_at_every_size(served: Served) -> None:
    await served.append(70)
    leaves = [leaf_hash(e) for e in served.entries]
    for size in (1, 2, 7, 64, 70):
        for index in {0, size // 2, size - 1}:
            data = await served.json(f"/v1/ledger/proofs/inclusion?index={index}&size={size}")
            assert data["index"] == index and data["size"] == size
            assert data["leaf_hash"] == leaves[index].hex()
            proof = [base64.b64decode(h) for h in data["proof"]]
            verify_inclusion(index, size, leaves[index], proof, merkle_root(leaves[:size]))
    cp = await served_checkpoint(served)
    data = await served.json("/v1/ledger/proofs/inclusion?index=9")  # size defaults to current
    assert data["size"] == 70
    proof = [base64.b64decode(h) for h in data["proof"]]
    verify_inclusion(9, cp.size, leaves[9], proof, cp.root_hash)


@pytest.mark.parametrize(("query", "status"), [
    ("", 400), ("index=", 400), ("index=a", 400), ("index=-1", 400), ("index=+1", 400),
    ("index=1&index=2", 400), ("index=1&size=x", 400), ("index=5&size=5", 400),
    ("index=0&size=0", 400), ("index=1&size=11", 404), ("index=10", 404),
    ("index=18446744073709551615", 404), ("index=18446744073709551616", 400),
])
async def test_inclusion_bad_queries(served: Served, query: str, status: int) -> None:
    await served.append(10)
    r, body = await served.get("/v1/ledger/proofs/inclusion?" + query)
    assert r.status == status, query
    assert error_code(body) == ("not_found" if status == 404 else "bad_parameter")


async def test_consistency_proofs_verify(served: Served) -> None:
    await served.append(5)
    old_cp = await served_checkpoint(served)
    await served.append(600)
    new_cp = await served_checkpoint(served)
    data = await served.json("/v1/ledger/proofs/consistency?old=5")
    assert data["old"] == 5 and data["new"] == 605
    proof = [base64.b64decode(h) for h in data["proof"]]
    verify_consistency(5, 605, old_cp.root_hash, new_cp.root_hash, proof)
    leaves = [leaf_hash(e) for e in served.entries]
    for old, new in [(1, 2), (3, 300), (256, 512), (300, 300), (100, 604)]:
        data = await served.json(f"/v1/ledger/proofs/consistency?old={old}&new={new}")
        proof = [base64.b64decode(h) for h in data["proof"]]
        verify_consistency(old, new, merkle_root(leaves[:old]), merkle_root(leaves[:new]), proof)
    with pytest.raises(ProofError):
        verify_consistency(5, 605, new_cp.root_hash, new_cp.root_hash, proof)


@pytest.mark.parametrize(("query", "status"), [
    ("", 400), ("old=0", 400), ("old=0&new=5", 400), ("old=6&new=5", 400), ("old=11", 400),
    ("old=1&new=11", 404), ("old=x", 400), ("old=1&new=-2", 400), ("old=01", 400),
    ("old=1&new=1&new=2", 400),
])
async def test_consistency_bad_queries(served: Served, query: str, status: int) -> None:
    await served.append(10)
    r, body = await served.get("/v1/ledger/proofs/consistency?" + query)
    assert r.status == status, query
    assert error_code(body) == ("not_found" if status == 404 else "bad_parameter")


async def test_checkpoint_history_is_newest_first_and_includes_the_latest(served: Served) -> None:
    await served.append(4)
    data = await served.json("/v1/ledger/checkpoints")
    cps = data["checkpoints"]
    assert isinstance(cps, list) and cps
    _, current = await served.get("/checkpoint")
    assert cps[0]["checkpoint"].encode() == current and cps[0]["size"] == 4
    sizes = [c["size"] for c in cps]
    assert sizes == sorted(set(sizes), reverse=True)
    for c in cps:
        cp, _ = open_checkpoint(c["checkpoint"].encode(), verifier(served))
        assert cp.size == c["size"]
        # RFC 3339 UTC with milliseconds, like issued_at (not a raw float epoch).
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", c["time"]), c["time"]
    assert len((await served.json("/v1/ledger/checkpoints?limit=1"))["checkpoints"]) == 1


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=1001", "limit=x", "limit=-1", "limit=1&limit=2"]
)
async def test_checkpoint_history_bad_limit(served: Served, query: str) -> None:
    r, body = await served.get("/v1/ledger/checkpoints?" + query)
    assert r.status == 400 and error_code(body) == "bad_parameter"


# --- errors -------------------------------------------------------------------------------------


async def test_unknown_route_and_wrong_method_are_json(served: Served) -> None:
    r, body = await served.get("/nope")
    assert r.status == 404 and error_code(body) == "not_found"
    async with served.http.post(served.url + "/checkpoint", data=b"x") as resp:
        assert resp.status == 405
        assert error_code(await resp.read()) == "method_not_allowed"
        assert "GET" in resp.headers["Allow"]
    async with served.http.head(served.url + "/checkpoint") as resp:
        assert resp.status == 200


async def test_error_middleware_body_limit_crash_and_api_error(serve: Serve) -> None:
    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async def crash(request: web.Request) -> web.Response:
        raise RuntimeError("secret internal detail")

    async def refuse(request: web.Request) -> web.Response:
        raise ApiError(409, "conflict_here", "already there", headers={"Retry-After": "3"})

    async def unavailable(request: web.Request) -> web.Response:
        raise StoreUnavailableError("the PostgreSQL database is unavailable: OSError: "
                                    "Connect call failed ('10.1.2.3', 5432)")

    async def rolled_back(request: web.Request) -> web.Response:
        raise LogRollbackError("the store's checkpoint is at size 3, older than size 8")

    app = web.Application(middlewares=[error_middleware], client_max_size=1000)
    app.router.add_post("/echo", echo)
    app.router.add_get("/crash", crash)
    app.router.add_get("/refuse", refuse)
    app.router.add_get("/unavailable", unavailable)
    app.router.add_get("/rolled-back", rolled_back)
    url = (await serve(app)).url
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/echo", data=b"x" * 10) as r:
            assert r.status == 200 and await r.read() == b"x" * 10
        async with http.post(url + "/echo", data=b"x" * 5000) as r:
            assert r.status == 413
            body = await r.read()
            assert error_code(body) == "payload_too_large"
            assert "1000 bytes" in json.loads(body)["error"]["message"]
        async with http.get(url + "/crash") as r:
            assert r.status == 500
            body = await r.read()
            assert error_code(body) == "internal" and b"secret" not in body
        async with http.get(url + "/refuse") as r:
            assert r.status == 409 and r.headers["Retry-After"] == "3"
            assert error_code(await r.read()) == "conflict_here"
        # A store that is away, or one the writer refuses: 503s that say so, never a 500.
        async with http.get(url + "/unavailable") as r:
            assert r.status == 503 and r.headers["Retry-After"] == "1"
            body = await r.read()
            assert error_code(body) == "unavailable" and b"10.1.2.3" not in body
        async with http.get(url + "/rolled-back") as r:
            assert r.status == 503
            body = await r.read()
            assert error_code(body) == "log_refusing" and b"size 8" in body


async def test_routes_mount_on_a_larger_app_and_read_the_log_at_request_time(
    tmp_path: Path, serve: Serve,
) -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hi")

    app = web.Application(middlewares=[error_middleware])
    app.router.add_get("/hello", hello)
    add_ledger_routes(app)
    signer = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(await SqliteStore.open(tmp_path / "l.db", create=True), signer=signer)
    app[LOG] = log
    url = (await serve(app)).url
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "/hello") as r:
                assert await r.text() == "hi"
            await log.append(b"one")
            async with http.get(url + "/checkpoint") as r:
                cp, _ = open_checkpoint(await r.read(), signer.verifier())
                assert cp.size == 1
            async with http.get(url + "/tile/entries/000.p/1") as r:
                assert await r.read() == b"\x00\x03one"
    finally:
        await log.close()


async def test_a_published_checkpoint_of_another_log_is_never_served(
        tmp_path: Path, serve: Serve) -> None:
    """A job that has not followed a roll yet (witnessing) may offer the last log's note: the
    head's own is served instead (issue 33)."""
    log = await Log.open(await SqliteStore.open(tmp_path / "log.db", create=True),
                         signer=Ed25519Signer.generate(ORIGIN))
    await log.append(b"x")
    other = Ed25519Signer.generate("another.test/log")
    stale = sign_checkpoint(Checkpoint(other.name, 5, b"\0" * 32), other)
    app = create_ledger_app(log)
    app[PUBLISHED_CHECKPOINT] = lambda head: (stale, {"Notary-Witnessed": "true"})
    server = await serve(app)
    async with aiohttp.ClientSession() as http, http.get(server.url + "/checkpoint") as r:
        body = await r.read()
    assert body == (await log.head(0)).note  # type: ignore[union-attr]
    await server.stop()
    await log.close()
