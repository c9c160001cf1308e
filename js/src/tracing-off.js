// The browser's #tracing (package.json "imports"): no spans, nothing of OpenTelemetry bundled;
// the caller's W3C trace context is passed on unchanged (tracing.js explains the Node one).

import { traceHeaders } from "./tracecontext.js";

/** `request(headers, null)` with the carrier's trace context headers. */
export function clientSpan(name, attributes, carrier, request) {
  return request(traceHeaders(carrier) ?? {}, null);
}
