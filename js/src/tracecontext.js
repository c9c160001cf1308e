// W3C trace context (traceparent, tracestate, baggage) carried from an MCP request's `_meta`
// (MCP 2026-07-28) to the HTTP headers of the notary request it causes, so that the notary's
// spans join the caller's trace. Checked here, without OpenTelemetry: when the application
// traces, tracing.js makes our span its child and sends the span's context instead; otherwise
// the context is passed on as the caller sent it (the notary's span a child of the caller's).

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZEROS_32 = "0".repeat(32);
const ZEROS_16 = "0".repeat(16);
// Header values we pass on: printable ASCII, bounded (tracestate: 32 members of 256 at most;
// baggage: 8192 bytes, both per W3C).
const PRINTABLE = /^[\x20-\x7e]*$/;
const LIMITS = { tracestate: 512, baggage: 8192 };

/** Whether `value` is a W3C traceparent we can continue (version 00, or a later one's prefix). */
export function isTraceparent(value) {
  if (typeof value !== "string") return false;
  const m = TRACEPARENT.exec(value);
  if (m === null) return false;
  const [, version, traceId, spanId, , rest] = m;
  if (version === "ff" || traceId === ZEROS_32 || spanId === ZEROS_16) return false;
  return version !== "00" || rest === undefined;
}

/**
 * The trace context headers in `carrier` (an MCP `_meta` object, or anything with the same
 * keys): `{traceparent, tracestate?, baggage?}`, or null without a valid traceparent.
 * Nothing else is taken from it.
 */
export function traceHeaders(carrier) {
  if (carrier === null || typeof carrier !== "object" || !isTraceparent(carrier.traceparent)) return null;
  const headers = { traceparent: carrier.traceparent };
  for (const [key, limit] of Object.entries(LIMITS)) {
    const value = carrier[key];
    if (typeof value === "string" && value.length <= limit && PRINTABLE.test(value)) headers[key] = value;
  }
  return headers;
}
