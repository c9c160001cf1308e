"""The aiohttp routes a witness and a mirror share: ``POST /add-checkpoint``, ``POST
/sign-subtree`` (with an ML-DSA-44 key), ``GET /<origin hash>/checkpoint`` and ``/healthz``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from ledger.core.witness_protocol import MAX_REQUEST_SIZE
from ledger.cosigner.cosigner import Cosigner, CosignerAnswer

__all__ = ["COSIGNER", "cosigner_app", "read_body", "response"]

COSIGNER = web.AppKey("ledger.cosigner", Cosigner)


def cosigner_app(cosigner: Cosigner, *, checkpoint_cache: str = "no-store") -> web.Application:
    """An application with the shared routes of ``cosigner``; the caller adds its own.
    ``checkpoint_cache`` is the ``Cache-Control`` of a served checkpoint."""
    app = web.Application(client_max_size=MAX_REQUEST_SIZE)
    app[COSIGNER] = cosigner
    app.router.add_post("/add-checkpoint", _posted(lambda c, body: c.add_checkpoint(body)))
    if cosigner.subtree_signers:
        app.router.add_post("/sign-subtree", _posted(lambda c, body: c.sign_subtree(body)))

    async def checkpoint(request: web.Request) -> web.Response:
        answer = await request.app[COSIGNER].checkpoint(request.match_info["origin_hash"])
        resp = response(answer)
        if answer.status == 200:
            resp.headers["Cache-Control"] = checkpoint_cache
        return resp

    app.router.add_get(r"/{origin_hash:[0-9a-f]{64}}/checkpoint", checkpoint)
    app.router.add_get("/healthz", _healthz)
    return app


async def read_body(request: web.Request) -> bytes | CosignerAnswer:
    """The body of a protocol POST, or the refusal to send instead: 413 beyond
    :data:`MAX_REQUEST_SIZE`, 400 for one that cannot be read as sent (a ``Content-Encoding``
    its bytes are not in, which aiohttp reports only while inflating them)."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        return CosignerAnswer.text(413, f"request body is larger than {MAX_REQUEST_SIZE} bytes")
    except web.RequestPayloadError:
        return CosignerAnswer.text(400, "the request body cannot be read as its Content-Encoding "
                                        "says")


def _posted(handle: Callable[[Cosigner, bytes], Awaitable[CosignerAnswer]]
            ) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of a protocol POST: the readable body handed to ``handle``."""

    async def handler(request: web.Request) -> web.Response:
        body = await read_body(request)
        if isinstance(body, CosignerAnswer):
            return response(body)
        return response(await handle(request.app[COSIGNER], body))

    return handler


def response(answer: CosignerAnswer) -> web.Response:
    """``answer`` as an aiohttp response, not to be cached unless the caller says so."""
    resp = web.Response(status=answer.status, body=answer.body)
    resp.headers["Content-Type"] = answer.content_type
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def _healthz(request: web.Request) -> web.Response:
    problem = request.app[COSIGNER].health()
    if problem is not None:
        return web.Response(status=503, text=f"failing: {problem}\n")
    return web.Response(text="ok\n")
