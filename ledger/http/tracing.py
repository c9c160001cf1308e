"""A server span per HTTP request, in the caller's trace (W3C ``traceparent``), while the
process exports traces (:mod:`ledger.process.tracing`); nothing is added otherwise."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from ledger.process import tracing

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["middlewares", "server_span"]


@contextmanager
def server_span(method: str, route: str, headers: Mapping[str, str]) -> Iterator[Span]:
    """The span of one request (named ``METHOD route``, the semantic conventions' HTTP server
    span), a child of the caller's ``traceparent`` if it sent one. Only while tracing."""
    from opentelemetry.trace import SpanKind  # deferred: loaded by tracing.setup() already

    assert tracing.TRACER is not None
    with tracing.TRACER.start_as_current_span(
            f"{method} {route}", context=tracing.remote_parent(headers), kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "http.route": route}) as span:
        yield span


@web.middleware
async def _traced(request: web.Request, handler: Handler) -> web.StreamResponse:
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    with server_span(request.method, route, request.headers) as span:
        response = await handler(request)
        span.set_attribute("http.response.status_code", response.status)
        return response


def middlewares() -> list[Middleware]:
    """The tracing middleware (put it first, outermost: it sees the answer the error
    middlewares made) while this process exports traces; none otherwise."""
    return [] if tracing.TRACER is None else [_traced]
