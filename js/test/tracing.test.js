// OpenTelemetry spans of the notary requests (docs/tracing.md): with the application's tracer
// provider registered, a notarization is a client span "POST /v1/tool-calls" under the MCP
// request's trace context, whose context the notary request carries; with none, no span and the
// caller's context is passed on unchanged; without @opentelemetry/api installed, the same.
// Spans are caught by the SDK's in-memory exporter; tests/js/test_js_tracing.py follows one
// trace end to end through OTLP.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { context, trace, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { META_KEY, Notarizer, NotaryClient } from "../src/index.js";
import { freePort, startNotary } from "./support/notary.js";

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const CALLER = "b7ad6b7169203331";
const TRACEPARENT = `00-${TRACE_ID}-${CALLER}-01`;
const GLOBAL = Symbol.for("opentelemetry.js.api.1");

let notary;
const sent = [];
const recording = (url, init) => {
  sent.push({ ...init.headers });
  return fetch(url, init);
};
const call = (handler, name, meta) => handler({ params: { name, arguments: { n: sent.length }, ...(meta && { _meta: meta }) } }, {});

before(async () => {
  notary = await startNotary();
});
after(async () => notary?.cleanup());

test("with no tracer provider registered, no span: the caller's context goes to the notary unchanged", async () => {
  assert.equal(globalThis[GLOBAL], undefined);
  const n = new Notarizer(new NotaryClient(notary.url, notary.apiKey, { fetch: recording }), "untraced", { logger: null });
  const out = await call(n.wrapHandler(async () => ({ content: [] })), "t", { traceparent: TRACEPARENT, baggage: "k=v" });
  assert.equal(out._meta[META_KEY].receipt.server, "untraced");
  assert.deepEqual(sent.at(-1).traceparent, TRACEPARENT);
  assert.deepEqual(sent.at(-1).baggage, "k=v");
});

test("with a provider registered, a notarization is a client span in the caller's trace", async (t) => {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  provider.register();
  t.after(async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
  });
  const client = new NotaryClient(notary.url, notary.apiKey, { fetch: recording, retries: 0, timeoutMs: 2000 });
  const n = new Notarizer(client, "traced", { logger: null });
  const handler = n.wrapHandler(async () => ({ content: [{ type: "text", text: "ok" }] }));

  // From the MCP request's _meta: a child of the caller's span, and the notary's parent.
  const out = await call(handler, "add", { traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE", baggage: "k=v" });
  const receipt = out._meta[META_KEY].receipt;
  let [span] = exporter.getFinishedSpans();
  assert.equal(exporter.getFinishedSpans().length, 1);
  assert.equal(span.name, "POST /v1/tool-calls");
  assert.equal(span.kind, SpanKind.CLIENT);
  assert.equal(span.instrumentationScope.name, "mcp-notary");
  assert.equal(span.spanContext().traceId, TRACE_ID);
  assert.equal(span.parentSpanContext.spanId, CALLER);
  assert.deepEqual(span.attributes, {
    "http.request.method": "POST", "url.full": `${notary.url}/v1/tool-calls`, "gen_ai.tool.name": "add",
    "notary.receipt.id": receipt.id, "notary.log.origin": receipt.ledger.origin, "notary.log.index": receipt.ledger.index,
  });
  assert.equal(sent.at(-1).traceparent, `00-${TRACE_ID}-${span.spanContext().spanId}-01`);
  assert.equal(sent.at(-1).tracestate, "congo=t61rcWkgMzE");
  assert.equal(sent.at(-1).baggage, "k=v");

  // Without trace context in _meta: a child of the application's active span.
  exporter.reset();
  const app = trace.getTracer("app").startSpan("app work");
  await context.with(trace.setSpan(context.active(), app), () => call(handler, "add"));
  app.end();
  [span] = exporter.getFinishedSpans();
  assert.equal(span.name, "POST /v1/tool-calls");
  assert.equal(span.spanContext().traceId, app.spanContext().traceId);
  assert.equal(span.parentSpanContext.spanId, app.spanContext().spanId);
  assert.equal(sent.at(-1).traceparent, `00-${app.spanContext().traceId}-${span.spanContext().spanId}-01`);

  // A caller that does not sample: no span recorded, the decision passed on.
  exporter.reset();
  await call(handler, "add", { traceparent: `00-${TRACE_ID}-${CALLER}-00` });
  assert.equal(exporter.getFinishedSpans().length, 0);
  assert.match(sent.at(-1).traceparent, new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));

  // A failed notarization: the span says so (the policy answers the MCP client as ever).
  exporter.reset();
  const down = new NotaryClient(`http://127.0.0.1:${await freePort()}`, "key", { retries: 0, timeoutMs: 2000 });
  const marked = await call(new Notarizer(down, "traced", { onUnreachable: "mark", logger: null }).wrapHandler(async () => ({ content: [] })), "add", { traceparent: TRACEPARENT });
  assert.equal(marked._meta[META_KEY].notarized, false);
  [span] = exporter.getFinishedSpans();
  assert.equal(span.status.code, SpanStatusCode.ERROR);
  assert.equal(span.parentSpanContext.spanId, CALLER);
  assert.equal(span.events[0].name, "exception");
  assert.equal(span.attributes["notary.receipt.id"], undefined);
});

test("without @opentelemetry/api installed, a notarization works and passes the context on", () => {
  // A child process where the package cannot be resolved, and a registration (by some other
  // copy of the API) that makes us try to load it.
  const hook = `data:text/javascript,export async function resolve(s, c, next) { if (s.startsWith("@opentelemetry/")) throw Object.assign(new Error("absent"), { code: "ERR_MODULE_NOT_FOUND" }); return next(s, c); }`;
  const script = `
    import { register } from "node:module";
    register(${JSON.stringify(hook)});
    globalThis[Symbol.for("opentelemetry.js.api.1")] = { trace: {} };
    const { Notarizer, NotaryClient, META_KEY } = await import(${JSON.stringify(new URL("../src/index.js", import.meta.url).href)});
    const headers = [];
    const client = new NotaryClient(${JSON.stringify(notary.url)}, ${JSON.stringify(notary.apiKey)}, { fetch: (u, i) => (headers.push(i.headers), fetch(u, i)) });
    const out = await new Notarizer(client, "no-otel", { logger: null }).wrapHandler(async () => ({ content: [] }))({ params: { name: "t", arguments: {}, _meta: { traceparent: ${JSON.stringify(TRACEPARENT)} } } }, {});
    let loaded = true;
    try { await import("@opentelemetry/api"); } catch { loaded = false; }
    console.log(JSON.stringify({ server: out._meta[META_KEY].receipt.server, traceparent: headers[0].traceparent, loaded }));
  `;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: fileURLToPath(new URL("..", import.meta.url)), encoding: "utf8", timeout: 30000 });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { server: "no-otel", traceparent: TRACEPARENT, loaded: false });
});
