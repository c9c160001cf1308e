"""SCITT: RFC 9942 COSE receipts of tool calls and the keys that verify them (docs/scitt.md).

- ``GET /v1/tool-calls/{id}/receipt.cose`` (``?size=N``, ``?alg=EdDSA|ML-DSA-44``)
- ``GET /.well-known/scitt-keys`` and ``/.well-known/scitt-keys/{kid}``: the log's COSE keys,
  as draft-ietf-scitt-scrapi-09 §2.1 and §2.2 name them (a COSE_KeySet, a COSE_Key)
- ``GET /.well-known/transparency-configuration``: the configuration document of the drafts up
  to draft-ietf-scitt-scrapi-05 (§2.1.1), for clients written against them: the issuer, the
  keys as a JWKS, and where the COSE keys are
"""

from __future__ import annotations

import base64
import binascii

import cbor2
from aiohttp import web

from ledger.core.cose_receipt import ALG_EDDSA, ALG_ML_DSA_44, MEDIA_TYPE, CoseKey, cose_key_set
from ledger.http.errors import ApiError
from ledger.http.routes import query_uint
from ledger.log.cose_roots import CoseRoots
from notary.core.paths import COSE_RECEIPT_ROUTE
from notary.http.appkeys import COSE_ROOTS, NOTARY, SETTINGS
from notary.http.routes.tool_calls import receipt_id_of
from notary.serving.cose import cose_receipt

_ALGS = {"EdDSA": ALG_EDDSA, "ML-DSA-44": ALG_ML_DSA_44}
_CBOR = "application/cbor"


def _roots(request: web.Request) -> CoseRoots:
    roots = request.app.get(COSE_ROOTS)
    if roots is None:
        raise ApiError(404, "not_found", "this notary serves no COSE receipts "
                       "(cose_receipts is off)")
    return roots


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


async def get_cose_receipt(request: web.Request) -> web.Response:
    roots = _roots(request)
    unknown = sorted(set(request.query) - {"size", "alg"})
    if unknown:
        raise ApiError(400, "unknown_field", f"unknown query parameter(s) {unknown}; allowed: "
                       "size, alg")
    names = request.query.getall("alg", [])
    if len(names) > 1 or (names and names[0] not in _ALGS):
        raise ApiError(400, "bad_parameter", f"alg must be given at most once, one of "
                       f"{', '.join(_ALGS)}")
    alg = _ALGS[names[0]] if names else ALG_EDDSA
    if roots.key(alg) is None:
        raise ApiError(400, "bad_parameter", f"this notary signs no {names[0]} receipts")
    size = query_uint(request, "size")
    receipt_id = receipt_id_of(request.match_info["id"])
    body = await cose_receipt(request.app[NOTARY], roots, receipt_id, size=size, alg=alg)
    resp = web.Response(body=body, content_type=MEDIA_TYPE)
    # The default tree moves as the log grows (a newer witnessed checkpoint); a given size not.
    resp.headers["Cache-Control"] = "no-cache" if size is None else "public, max-age=3600"
    return resp


def _cbor_response(value: object, *, cache: bool = True) -> web.Response:
    resp = web.Response(body=cbor2.dumps(value, canonical=True), content_type=_CBOR)
    if cache:
        resp.headers["Cache-Control"] = "public, max-age=60"
    return resp


async def scitt_keys(request: web.Request) -> web.Response:
    resp = web.Response(body=cose_key_set(_roots(request).keys), content_type=_CBOR)
    resp.headers["Cache-Control"] = "public, max-age=60"
    return resp


async def scitt_key(request: web.Request) -> web.Response:
    """One key by its kid: base64url without padding (a thumbprint is not URL-safe)."""
    raw = request.match_info["kid"]
    try:
        kid = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except (binascii.Error, ValueError):
        kid = b""
    for key in _roots(request).keys:
        if key.kid == kid and _b64url(kid) == raw:
            return _cbor_response(key.cose_key())
    raise ApiError(404, "not_found", "no key of this log has that kid (base64url, no padding)")


def _jwk(key: CoseKey) -> dict[str, str]:
    if key.alg == ALG_EDDSA:
        material = {"kty": "OKP", "crv": "Ed25519", "x": _b64url(key.public_key)}
    else:  # RFC 9964 §3: the AKP key type
        material = {"kty": "AKP", "pub": _b64url(key.public_key)}
    return {**material, "alg": key.alg_name, "use": "sig", "kid": _b64url(key.kid)}


async def transparency_configuration(request: web.Request) -> web.Response:
    roots = _roots(request)
    base = request.app[SETTINGS].base_url.rstrip("/")
    return _cbor_response({
        "issuer": roots.issuer,
        "jwks": {"keys": [_jwk(k) for k in roots.keys]},
        "scitt_keys_uri": f"{base}/.well-known/scitt-keys",
        "receipt_uri_template": base + COSE_RECEIPT_ROUTE,
    })


def add_scitt_routes(app: web.Application) -> None:
    app.router.add_get(COSE_RECEIPT_ROUTE, get_cose_receipt)
    app.router.add_get("/.well-known/scitt-keys", scitt_keys)
    app.router.add_get("/.well-known/scitt-keys/{kid}", scitt_key)
    app.router.add_get("/.well-known/transparency-configuration", transparency_configuration)
