// OpenTelemetry spans for the notary requests this package makes, the way a library does it: it
// depends only on @opentelemetry/api (an optional peer dependency), sets nothing up, and makes
// spans only when the application has registered a tracer provider (its own NodeSDK, OTLP
// exporter and OTEL_* variables: docs/tracing.md). Otherwise it never imports the API and the
// request carries the caller's W3C trace context on, unchanged, as tracecontext.js did alone.
//
// Browser bundles get tracing-off.js instead (package.json "imports" #tracing, condition
// "browser"), so the verifier's bundle holds nothing of OpenTelemetry.

import { isTraceparent, traceHeaders } from "./tracecontext.js";

/** The instrumentation scope of our spans (the Python side's too). */
const NAME = "mcp-notary";

// Where every copy of @opentelemetry/api 1.x keeps what the application registered (provider,
// propagator, context manager): nothing there means nothing to report to, so no import at all.
const GLOBAL = Symbol.for("opentelemetry.js.api.1");

let loading = null;

/** @opentelemetry/api, or null when it is not installed (asked once). */
function api() {
  loading ??= import("@opentelemetry/api").catch(() => null);
  return loading;
}

/** The tracer of the application's registered provider, or null when it has none. */
async function tracer() {
  const otel = await api();
  if (otel === null) return null;
  const provider = otel.trace.getTracerProvider();
  // The global provider is a proxy: without a delegate nobody registered a real one.
  const found = typeof provider.getDelegateTracer === "function" ? provider.getDelegateTracer(NAME) : provider.getTracer(NAME);
  return found ? { otel, tracer: found } : null;
}

/**
 * The parent of our span: the caller's trace context from `carrier` (an MCP request's `_meta`)
 * or, without a valid one there, the active context. An active span of the same trace is
 * preferred to the carrier's (it is the application's own span under the caller's).
 */
function parentContext(otel, carrier) {
  const active = otel.context.active();
  const given = traceHeaders(carrier);
  if (given === null) return active;
  const [, traceId, spanId, flags] = given.traceparent.split("-");
  if (otel.trace.getSpanContext(active)?.traceId === traceId) return active;
  const remote = { traceId, spanId, traceFlags: parseInt(flags, 16) & 1, isRemote: true };
  if (given.tracestate !== undefined) {
    try {
      remote.traceState = otel.createTraceState(given.tracestate);
    } catch {
      // a tracestate the API cannot parse is dropped, as a propagator would
    }
  }
  return otel.trace.setSpanContext(active, remote);
}

/** W3C headers for `ctx`: the application's propagator's, completed with traceparent/tracestate. */
function headersFor(otel, ctx, span, carrier) {
  const headers = {};
  otel.propagation.inject(ctx, headers);
  if (!isTraceparent(headers.traceparent)) {
    // No W3C propagator registered: the notary reads W3C trace context only.
    const { traceId, spanId, traceFlags, traceState } = span.spanContext();
    headers.traceparent = `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`;
    const state = traceState?.serialize();
    if (state) headers.tracestate = state;
  }
  const baggage = traceHeaders(carrier)?.baggage;
  if (headers.baggage === undefined && baggage !== undefined) headers.baggage = baggage;
  return headers;
}

/**
 * Run `request(headers, span)` for a call to the notary in a client span named `name`, a child
 * of the caller's trace context in `carrier` (or of the active context), whose context the
 * headers carry; `span` is null (and the headers are the carrier's, checked) when the
 * application has registered no tracer provider. A failure is recorded on the span and rethrown.
 */
export function clientSpan(name, attributes, carrier, request) {
  // Nothing registered by any copy of the API: the untraced request, nothing else run.
  if (globalThis[GLOBAL]?.trace === undefined) return request(traceHeaders(carrier) ?? {}, null);
  return traced(name, attributes, carrier, request);
}

async function traced(name, attributes, carrier, request) {
  const found = await tracer().catch(() => null);
  if (found === null) return request(traceHeaders(carrier) ?? {}, null);
  const { otel } = found;
  let span, ctx, headers;
  try {
    const parent = parentContext(otel, carrier);
    span = found.tracer.startSpan(name, { kind: otel.SpanKind.CLIENT, attributes }, parent);
    ctx = otel.trace.setSpan(parent, span);
    headers = headersFor(otel, ctx, span, carrier);
  } catch {
    // Telemetry never fails a notarization: whatever broke, the request goes untraced.
    span?.end();
    return request(traceHeaders(carrier) ?? {}, null);
  }
  try {
    return await otel.context.with(ctx, () => request(headers, span));
  } catch (e) {
    span.recordException(e);
    span.setStatus({ code: otel.SpanStatusCode.ERROR, message: e?.message });
    throw e;
  } finally {
    span.end();
  }
}
