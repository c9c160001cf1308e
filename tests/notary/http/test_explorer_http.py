"""The explorer as the notary serves it: redirects, the app shell on every deep link, hashed
assets with immutable caching, the Content-Security-Policy, and the package data that ships it.
Its behaviour in a browser is tested in js/test/explorer.test.js (headless Chromium)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from ledger.core.cosignature import CosignatureSigner
from notary.http.routes.explorer import CSP, explorer_assets
from tests.notary_server import AppNotary, app_notary

REPO = Path(__file__).resolve().parents[3]
SHELL_PATHS = ["/explorer/", "/explorer/search", "/explorer/verify", "/explorer/trust",
               "/explorer/tool-calls/tc_AAAAAAAAAAAAAAAAAAAAAA", "/explorer/entries/12",
               "/explorer/servers/my%20server", "/explorer/servers/%7Bweather%7D",
               "/explorer/servers/a%7Bb", "/explorer/servers/%7D"]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[AppNotary, aiohttp.ClientSession]]:
    async with app_notary(tmp_path / "data") as notary, aiohttp.ClientSession() as http:
        yield notary, http


async def test_root_and_bare_explorer_redirect(
        served: tuple[AppNotary, aiohttp.ClientSession]) -> None:
    notary, http = served
    for path in ("/", "/explorer"):
        async with http.get(notary.url + path, allow_redirects=False) as r:
            assert r.status == 302 and r.headers["Location"] == "/explorer/"
            assert await r.read() == b""


async def test_every_page_path_serves_the_shell_under_the_csp(
        served: tuple[AppNotary, aiohttp.ClientSession]) -> None:
    notary, http = served
    bodies = set()
    for path in SHELL_PATHS:
        async with http.get(notary.url + path) as r:
            assert r.status == 200, path
            assert r.content_type == "text/html"
            assert r.headers["Content-Security-Policy"] == CSP
            assert r.headers["Cache-Control"] == "no-cache"
            assert r.headers["X-Content-Type-Options"] == "nosniff"
            bodies.add(await r.read())
    assert len(bodies) == 1
    for path in ("/explorer/nope", "/explorer/tool-calls/a/b"):
        async with http.get(notary.url + path) as r:
            assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"


def test_the_policy_allows_nothing_but_this_origin() -> None:
    directives = dict(d.strip().split(" ", 1) for d in CSP.split(";"))
    assert directives["default-src"] == "'none'"
    for name in ("script-src", "style-src", "connect-src", "img-src"):
        assert directives[name] == "'self'", name
    assert "unsafe" not in CSP and "http" not in CSP and "data:" not in CSP
    assert directives["frame-ancestors"] == "'none'"


async def test_assets_are_hashed_immutable_and_typed(
        served: tuple[AppNotary, aiohttp.ClientSession]) -> None:
    notary, http = served
    async with http.get(notary.url + "/explorer/") as r:
        shell = await r.text()
    names = re.findall(r'"/explorer/assets/([^"]+)"', shell)
    assert {n.rsplit(".", 1)[1] for n in names} == {"js", "css", "svg"}
    assert "http://" not in shell and "https://" not in shell  # nothing from elsewhere
    types = {"js": "text/javascript", "css": "text/css", "svg": "image/svg+xml"}
    for name in names:
        async with http.get(f"{notary.url}/explorer/assets/{name}") as r:
            assert r.status == 200
            assert r.content_type == types[name.rsplit(".", 1)[1]]
            assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
            body = await r.read()
        _, digest, _ = name.split(".")
        assert len(digest) == 16, name
        assert body == (REPO / "notary/http/explorer/assets" / name).read_bytes()
    async with http.get(notary.url + "/explorer/assets/app.0000000000000000.js") as r:
        assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"
    async with http.post(notary.url + "/explorer/") as r:
        assert r.status == 405 and (await r.json())["error"]["code"] == "method_not_allowed"


def test_package_data_ships_the_built_explorer() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["notary"]
    built = explorer_assets()
    assert built is not None
    for rel in ["http/explorer/index.html", *(f"http/explorer/assets/{n}" for n in built.assets)]:
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


async def test_witnesses_lists_keys_and_quorum_not_urls(tmp_path: Path) -> None:
    async with app_notary(tmp_path / "plain") as notary, aiohttp.ClientSession() as http, \
            http.get(notary.url + "/v1/witnesses") as r:
        assert await r.json() == {"quorum": 0, "witnesses": []}
    signers = [CosignatureSigner.generate(f"witness.test/w{i}") for i in range(3)]
    specs = tuple(f"http://127.0.0.1:9/secret-path-{i}={s.verifier_key_text()}"
                  for i, s in enumerate(signers))
    async with app_notary(tmp_path / "witnessed", witnesses=specs, witness_quorum=2,
                          witness_interval=60.0) as notary, aiohttp.ClientSession() as http, \
            http.get(notary.url + "/v1/witnesses") as r:
        text = await r.text()
        doc = await r.json()
    assert doc == {"quorum": 2, "witnesses": [
        {"name": s.name, "vkey": s.verifier_key_text()} for s in signers]}
    assert "secret-path" not in text
