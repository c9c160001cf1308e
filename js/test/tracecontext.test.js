// W3C trace context from an MCP request's _meta to the notary request's headers (the notary
// continues the caller's trace: docs/tracing.md). No OpenTelemetry package: passed on as sent.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { META_KEY, Notarizer, NotaryClient, isTraceparent, traceHeaders } from "../src/index.js";
import { startNotary } from "./support/notary.js";

const TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

test("traceHeaders takes a valid traceparent and, with it, a well-formed tracestate and baggage", () => {
  assert.deepEqual(traceHeaders({ traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE", baggage: "k=v", other: "x" }),
    { traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE", baggage: "k=v" });
  assert.deepEqual(traceHeaders({ traceparent: TRACEPARENT, tracestate: "a=\n", baggage: "x".repeat(8193) }), { traceparent: TRACEPARENT });
  for (const bad of [undefined, null, "", "00-" + "0".repeat(32) + "-b7ad6b7169203331-01", "00-0af7651916cd43dd8448eb211c80319c-" + "0".repeat(16) + "-01",
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", `${TRACEPARENT}-extra`, 42]) {
    assert.equal(isTraceparent(bad), false, String(bad));
    assert.equal(traceHeaders({ traceparent: bad, tracestate: "a=b" }), null);
  }
  assert.equal(isTraceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future"), true);
  assert.equal(traceHeaders(null), null);
  assert.equal(traceHeaders("00-x"), null);
});

let notary;
before(async () => {
  notary = await startNotary();
});
after(async () => notary?.cleanup());

test("a notarized tools/call sends the caller's traceparent from _meta to the notary", async () => {
  const sent = [];
  const recording = (url, init) => {
    sent.push({ url, headers: { ...init.headers } });
    return fetch(url, init);
  };
  const n = new Notarizer(new NotaryClient(notary.url, notary.apiKey, { fetch: recording }), "traced", { logger: null });
  const handler = n.wrapHandler(async () => ({ content: [{ type: "text", text: "ok" }] }));
  const meta = { traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE", progressToken: 7 };
  const out = await handler({ params: { name: "t", arguments: {}, _meta: meta } }, {});
  assert.equal(out._meta[META_KEY].receipt.server, "traced");
  assert.equal(sent.length, 1);
  assert.equal(sent[0].headers.traceparent, TRACEPARENT);
  assert.equal(sent[0].headers.tracestate, "congo=t61rcWkgMzE");
  assert.equal(sent[0].headers.progressToken, undefined);
  // Without trace context in _meta, no trace header is sent.
  await handler({ params: { name: "t", arguments: { again: true } } }, {});
  assert.equal(sent.length, 2);
  assert.equal(sent[1].headers.traceparent, undefined);
});
