"""OpenTelemetry traces, exported when, and only when, the standard ``OTEL_*`` variables ask.

A process that serves (``notary serve``, the gateway, a notarized MCP server) calls
:func:`setup` once at start. With no ``OTEL_*`` variable asking for traces, it imports nothing
of OpenTelemetry and leaves :data:`TRACER` None: that one module global is all a hot path
(the notary's ``POST /v1/tool-calls``, the log's commit) looks at before doing anything for
tracing. When they ask, the OpenTelemetry SDK is set up from the same variables as any other
OpenTelemetry program (``OTEL_EXPORTER_OTLP_*``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``): this module adds no
setting of its own.

Client code that runs inside someone else's program (the SDK's notary client) never sets
anything up; it continues whatever trace the program is in, if OpenTelemetry is loaded there at
all (:func:`tracer`, :func:`inject`).

Trace context comes in as W3C ``traceparent``/``tracestate``/``baggage``: an HTTP header on the
notary's API, or members of ``_meta`` in MCP (2026-07-28); both are read by the same
propagator (:func:`remote_parent`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

__all__ = ["NAME", "TRACER", "annotate", "as_context", "client_span", "current", "inject", "link",
           "remote_parent", "setup", "tracer", "wanted"]

NAME = "mcp-notary"
"""The instrumentation scope of every span this project makes."""

TRACER: Tracer | None = None
"""Set by :func:`setup` when this process exports traces; None otherwise (the fast check)."""

_set_up = False
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the ``OTEL_*`` variables ask this process to export traces.

    ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` say no; an explicit
    ``OTEL_TRACES_EXPORTER`` or an OTLP endpoint says yes. With none of them set the answer is
    no: OpenTelemetry's own default (OTLP to localhost) would make every process that merely
    has the package installed try to export.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = _exporters(environ)
    if exporters is not None:
        return bool(exporters)
    return any(environ.get(name, "").strip() for name in _ENDPOINTS)


def _exporters(environ: Mapping[str, str]) -> list[str] | None:
    """``OTEL_TRACES_EXPORTER`` as a list without ``none``; None when it is not set."""
    value = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not value:
        return None
    return [e.strip() for e in value.split(",") if e.strip() not in ("", "none")]


def setup(service: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Export this process's spans as the ``OTEL_*`` variables say; whether it does.

    Once per process (later calls answer the first's result). ``service`` is the default
    ``service.name``; ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` win over it. A
    program that installed its own tracer provider keeps it: spans go there. Without the
    ``otel`` extra installed, one line on stderr says so and the process runs untraced.
    """
    global TRACER, _set_up
    if _set_up or not wanted(environ):
        _set_up = True
        return TRACER is not None
    _set_up = True
    try:
        from opentelemetry import trace  # deferred: only when OTEL_* asks for traces
        from opentelemetry.sdk.resources import Resource  # deferred: as above
        from opentelemetry.sdk.trace import TracerProvider  # deferred: as above
        from opentelemetry.sdk.trace.export import (  # deferred: as above
            BatchSpanProcessor,
            SpanExporter,
        )
    except ImportError:
        _unavailable("the OpenTelemetry SDK is not installed")
        return False
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):  # the program's own
        TRACER = current.get_tracer(NAME)
        return True
    exporters: list[SpanExporter] = []
    for kind in _exporters(environ) or ["otlp"]:
        try:
            exporters.append(_exporter(kind, environ))
        except (ImportError, ValueError) as e:
            _unavailable(str(e))
    if not exporters:
        return False
    named = "OTEL_SERVICE_NAME" in environ or "service.name=" in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": service}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    TRACER = provider.get_tracer(NAME)
    return True


def _exporter(kind: str, environ: Mapping[str, str]) -> Any:
    """The standard exporter named by ``OTEL_TRACES_EXPORTER`` (each reads its own
    ``OTEL_EXPORTER_*`` variables)."""
    if kind == "console":
        from opentelemetry.sdk.trace.export import (  # deferred: only when asked for
            ConsoleSpanExporter,
        )
        return ConsoleSpanExporter(out=sys.stderr)
    if kind != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER={kind!r} is not one of otlp, console, none")
    protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # deferred: asked
            OTLPSpanExporter,
        )
        return OTLPSpanExporter()
    if protocol != "http/protobuf":
        raise ValueError(f"OTLP protocol {protocol!r} is not supported: use http/protobuf "
                         "or grpc")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # deferred: asked
        OTLPSpanExporter as HttpExporter,
    )
    return HttpExporter()


def _unavailable(why: str) -> None:
    print(f"tracing is off: OTEL_* asks for traces, but {why} (install the extra: "
          "pip install 'mcp-notary[otel]')", file=sys.stderr, flush=True)


def remote_parent(carrier: Mapping[str, object] | None) -> Context | None:
    """The caller's trace context from W3C ``traceparent`` (and ``tracestate``, ``baggage``)
    in ``carrier`` (HTTP headers with lower-case names, or MCP ``_meta``); None without a
    valid one. Only called while :data:`TRACER` is set."""
    if not carrier or not isinstance(carrier.get("traceparent"), str):
        return None
    from opentelemetry import propagate, trace  # deferred: loaded by setup() already

    strings = {k: v for k in ("traceparent", "tracestate", "baggage")
               if isinstance(v := carrier.get(k), str)}
    context = propagate.extract(strings)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def tracer() -> Tracer | None:
    """For client code: this process's tracer, or, in a program that loaded OpenTelemetry
    itself (directly or through the mcp SDK), the global one; None when neither is there."""
    if TRACER is not None or "opentelemetry.trace" not in sys.modules:
        return TRACER
    from opentelemetry import trace  # deferred: loaded by the program already

    return trace.get_tracer(NAME)


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current trace context (``traceparent``, ...) to outgoing HTTP ``headers``;
    nothing when the program has not loaded OpenTelemetry (then there is no trace to
    continue)."""
    if "opentelemetry.propagate" not in sys.modules and TRACER is None:
        return
    from opentelemetry import propagate  # deferred: loaded by the program already

    propagate.inject(headers)


@contextmanager
def client_span(name: str, attributes: Mapping[str, str | int | bool]) -> Iterator[Span | None]:
    """A client span around a call to another service, current while it runs (so
    :func:`inject` sends it as the parent); None when there is no tracer."""
    found = tracer()
    if found is None:
        yield None
        return
    from opentelemetry.trace import SpanKind  # deferred: loaded with the tracer

    with found.start_as_current_span(name, kind=SpanKind.CLIENT,
                                     attributes=dict(attributes)) as span:
        yield span


def current() -> object:
    """The current trace context, to carry across a queue (only while :data:`TRACER` is set)."""
    from opentelemetry import context  # deferred: loaded by setup() already

    return context.get_current()


def as_context(carried: object) -> Context | None:
    """A context :func:`current` returned (typed ``object`` where it is carried, so that
    the carrier needs no OpenTelemetry types), or None."""
    return cast("Context | None", carried)


def link(span: Span, carried: Sequence[object]) -> None:
    """Link ``span`` to the spans current in each of the contexts :func:`current` returned:
    work done once for several callers (a commit) shows in each caller's trace."""
    from opentelemetry import trace  # deferred: loaded by setup() already

    parent = getattr(span, "parent", None)
    seen = set()
    for ctx in carried:
        if ctx is None:
            continue
        found = trace.get_current_span(as_context(ctx)).get_span_context()
        if found.is_valid and found != parent and found.span_id not in seen:
            seen.add(found.span_id)
            span.add_link(found)


def annotate(attributes: Mapping[str, str | int | bool]) -> None:
    """Set ``attributes`` on the current span (a no-op outside a recorded one)."""
    if TRACER is None and "opentelemetry.trace" not in sys.modules:
        return
    from opentelemetry import trace  # deferred: loaded already

    trace.get_current_span().set_attributes(dict(attributes))
