"""The explorer: a single-page app under ``/explorer/``, built from ``js/explorer`` into
``notary/http/explorer`` (package data), so running the notary needs no Node.

Every page path (the overview, ``tool-calls/<id>``, ``entries/<index>``, ``servers/<name>``,
``search``, ``verify``, ``trust``) answers with the same app shell and the page routes itself in
the browser, so a deep link works when pasted or reloaded. Asset names carry a hash of their
content: they are cached for a year as immutable, like full tiles, while the shell is revalidated
on every load and so picks up a new build at once.

The Content-Security-Policy allows nothing but this origin: no inline script or style, no eval,
no fetch elsewhere (``connect-src 'self'``), no frames. The page verifies receipts with keys it
shows and the user can pin, so a script injected from anywhere else must not be able to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from aiohttp import web

from ledger.http.errors import ApiError

__all__ = ["CSP", "add_explorer_routes", "explorer_assets"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
_SECURITY_HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
_IMMUTABLE = "public, max-age=31536000, immutable"
_TYPES: Mapping[str, str] = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
PAGES = ("search", "verify", "trust")


@dataclass(frozen=True)
class ExplorerAssets:
    """The built explorer: the app shell and the hashed assets, by file name."""

    shell: bytes
    assets: Mapping[str, tuple[bytes, str]]


def _directory() -> Traversable:
    return resources.files("notary.http").joinpath("explorer")


@cache
def explorer_assets() -> ExplorerAssets | None:
    """Read once per process (a few hundred kB); None when the package has no built explorer."""
    root = _directory()
    shell = root.joinpath("index.html")
    if not shell.is_file():
        return None
    assets: dict[str, tuple[bytes, str]] = {}
    folder = root.joinpath("assets")
    if folder.is_dir():
        for item in folder.iterdir():
            suffix = item.name[item.name.rfind("."):]
            if item.is_file() and suffix in _TYPES:
                assets[item.name] = (item.read_bytes(), _TYPES[suffix])
    return ExplorerAssets(shell.read_bytes(), assets)


def _built() -> ExplorerAssets:
    built = explorer_assets()
    if built is None:
        raise ApiError(503, "unavailable", "this installation has no built explorer "
                       "(run `npm run build:explorer` in js/)")
    return built


def _secured(resp: web.Response) -> web.Response:
    resp.headers.update(_SECURITY_HEADERS)
    return resp


async def shell(request: web.Request) -> web.Response:
    """The app shell, whatever the page: the browser renders the page the path names."""
    resp = web.Response(body=_built().shell, content_type="text/html", charset="utf-8")
    resp.headers["Cache-Control"] = "no-cache"
    return _secured(resp)


async def asset(request: web.Request) -> web.Response:
    found = _built().assets.get(request.match_info["name"])
    if found is None:
        raise ApiError(404, "not_found", "no such explorer asset")
    body, content_type = found
    resp = web.Response(body=body, content_type=content_type,
                        charset=None if content_type.startswith("image/") else "utf-8")
    resp.headers["Cache-Control"] = _IMMUTABLE
    resp.enable_compression()
    return _secured(resp)


async def to_explorer(request: web.Request) -> web.Response:
    """``/`` and ``/explorer``: people open the host; the explorer is what they want to see."""
    resp = web.Response(status=302, headers={"Location": "/explorer/"})
    resp.headers["Cache-Control"] = "no-cache"
    return resp


def add_explorer_routes(app: web.Application) -> None:
    """Register the explorer: explicit page paths (an unknown one is a JSON 404, not a shell
    that would render "not found" with a 200) and the assets."""
    r = app.router
    r.add_get("/", to_explorer)
    r.add_get("/explorer", to_explorer)
    r.add_get("/explorer/", shell)
    r.add_get("/explorer/assets/{name}", asset)
    r.add_get("/explorer/{page:" + "|".join(PAGES) + "}", shell)
    r.add_get("/explorer/tool-calls/{id}", shell)
    r.add_get("/explorer/entries/{index}", shell)
    # Any server name, braces included (aiohttp's default pattern, [^{}/]+, leaves them out).
    r.add_get("/explorer/servers/{name:[^/]+}", shell)
