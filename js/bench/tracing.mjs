// What tracing adds to a notarization in the npm package (docs/tracing.md), per call, in one
// process: the notary request stubbed by an async function, so that only the tracing code is
// timed. Prints one JSON object: nanoseconds per call, the median of --rounds rounds.
//
//   node bench/tracing.mjs [--calls N] [--rounds R]
//
// "direct" is the code without tracing (the _meta trace context checked and passed on),
// "off" the same call through src/tracing.js with no tracer provider registered (what every
// server that does not trace runs), "on" with a NodeTracerProvider registered whose spans go
// nowhere (NoopSpanProcessor: the span is made, its context injected, nothing exported).
import { parseArgs } from "node:util";
import { NodeTracerProvider, NoopSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { traceHeaders } from "../src/tracecontext.js";
import { clientSpan } from "../src/tracing.js";

const { values } = parseArgs({ options: { calls: { type: "string", default: "200000" }, rounds: { type: "string", default: "5" } } });
const calls = Number(values.calls);
const rounds = Number(values.rounds);
const meta = { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", progressToken: 1 };
const attributes = { "http.request.method": "POST", "url.full": "http://127.0.0.1:8080/v1/tool-calls", "gen_ai.tool.name": "add" };
const request = async (headers) => headers;

const ways = {
  direct: () => request(traceHeaders(meta) ?? {}, null),
  off: () => clientSpan("POST /v1/tool-calls", attributes, meta, request),
  on: () => clientSpan("POST /v1/tool-calls", attributes, meta, request),
};

async function nsPerCall(way) {
  const times = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < calls; i++) await way();
    times.push(Number(process.hrtime.bigint() - t0) / calls);
  }
  return times.sort((a, b) => a - b)[Math.floor(rounds / 2)];
}

const out = { calls, rounds, ns_per_call: {} };
// direct and off take turns (warm-up included), then the provider is registered for good.
for (const name of ["direct", "off", "direct", "off"]) out.ns_per_call[name] = Math.round(await nsPerCall(ways[name]));
new NodeTracerProvider({ spanProcessors: [new NoopSpanProcessor()] }).register();
out.ns_per_call.on = Math.round(await nsPerCall(ways.on));
process.stdout.write(JSON.stringify(out) + "\n");
