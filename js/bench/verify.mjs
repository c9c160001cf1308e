// Benchmarks of the JavaScript package, driven by benchmarks/js_verify.py (which prints the table
// and writes the JSON); each subcommand prints one JSON object on stdout.
//
//   node bench/verify.mjs verify CASES.json [--seconds S]
//       offline verifications/s of levels 1-3 (verifyLevels with the record, the JWKS and the
//       log key), one at a time and 64 in flight (WebCrypto), one at a time with Node's own
//       crypto (mcp-notary/node) and with @noble/curves, each pass with the memos emptied;
//       CASES.json is {jwks, vkey, cases: [{receipt, record}]} as Python's verify_receipt gets them
//   node bench/verify.mjs latency --notary URL --key KEY [--calls N] [--warmup N]
//       the latency a notarized tool call adds in a TypeScript MCP server (test/fixtures/server.ts
//       over stdio, plain and notarized, calls interleaved), and the bare POST /v1/tool-calls
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as Client2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as Stdio2 } from "@modelcontextprotocol/client/stdio";
import { Ed25519Verifier, Jwks, NotaryClient, clearCheckpointCache, ed25519Backend, setEd25519Backend, verifyLevels } from "../src/index.js";
import { fixtureServer } from "../test/support/build.js";
import { nodeEd25519 } from "../src/node/index.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { seconds: { type: "string", default: "3" }, notary: { type: "string" }, key: { type: "string" }, calls: { type: "string", default: "400" }, warmup: { type: "string", default: "30" } },
});

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function verifyRate(cases, jwks, logVerifier, minSeconds, inFlight) {
  for (const c of cases) {
    const v = await verifyLevels(c.receipt, { record: c.record, jwks, logVerifier });
    if (!["record", "signature", "inclusion"].every((n) => v.levels[n].status === "passed")) throw new Error(`does not verify: ${JSON.stringify(v.levels)}`);
  }
  let done = 0, spent = 0, cpu = 0, passes = 0, best = Infinity;
  while (spent < minSeconds || passes < 3) {
    clearCheckpointCache();
    const t0 = performance.now();
    const c0 = cpuSeconds();
    if (inFlight === 1) {
      for (const c of cases) await verifyLevels(c.receipt, { record: c.record, jwks, logVerifier });
    } else {
      for (let i = 0; i < cases.length; i += inFlight) {
        await Promise.all(cases.slice(i, i + inFlight).map((c) => verifyLevels(c.receipt, { record: c.record, jwks, logVerifier })));
      }
    }
    const elapsed = (performance.now() - t0) / 1000;
    cpu += cpuSeconds() - c0;
    spent += elapsed;
    best = Math.min(best, elapsed);
    done += cases.length;
    passes++;
  }
  return { receipts: cases.length, in_flight: inFlight, passes, verifications: done, seconds: spent, cpu_seconds: cpu,
    per_s: done / spent, best_pass_per_s: cases.length / best, per_cpu_s: done / cpu, cpu_us_per_verification: (cpu / done) * 1e6 };
}

function summary(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
  return { n: s.length, p50_ms: q(0.5), p90_ms: q(0.9), p99_ms: q(0.99), mean_ms: s.reduce((a, b) => a + b, 0) / s.length };
}

async function connect(server, env, sdk) {
  const params = { command: process.execPath, args: [server], env: { ...process.env, ...env }, stderr: "ignore" };
  if (sdk === "v1") {
    const c = new Client({ name: "bench", version: "1" });
    await c.connect(new StdioClientTransport(params));
    return c;
  }
  const c = new Client2({ name: "bench", version: "1" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await c.connect(new Stdio2(params));
  return c;
}

async function latency(url, key, calls, warmup) {
  const server = await fixtureServer();
  const env = { NOTARY_URL: url, NOTARY_API_KEY: key, FIXTURE_KIND: "mcp" };
  const out = {};
  const client = new NotaryClient(url, key);
  for (const sdk of ["v1", "v2"]) {
    const plain = await connect(server, { ...env, FIXTURE_SDK: sdk, FIXTURE_NOTARIZE: "0" }, sdk);
    const notarized = await connect(server, { ...env, FIXTURE_SDK: sdk }, sdk);
    const series = { plain: [], notarized: [], post: [] };
    const timed = async (name, fn) => {
      const t0 = performance.now();
      await fn();
      return [name, performance.now() - t0];
    };
    for (let i = 0; i < warmup + calls; i++) {
      const args = { a: i, b: sdk === "v1" ? 1 : 2 };
      const steps = [
        () => timed("plain", () => plain.callTool({ name: "add", arguments: args })),
        () => timed("notarized", async () => {
          const r = await notarized.callTool({ name: "add", arguments: args });
          if (!r._meta?.["com.rightshold/tool-call"]?.id) throw new Error("not notarized");
        }),
        () => timed("post", () => client.notarize("bench", "add", Array.from({ length: 64 }, () => "0123456789abcdef"[Math.floor(Math.random() * 16)]).join(""))),
      ];
      if (i % 2) steps.reverse();
      for (const step of steps) {
        const [name, ms] = await step();
        if (i >= warmup) series[name].push(ms);
      }
    }
    await plain.close();
    await notarized.close();
    const p = summary(series.plain);
    const n = summary(series.notarized);
    out[sdk] = { protocol: sdk === "v1" ? "2025-11-25 (@modelcontextprotocol/sdk 1.x)" : "2026-07-28 (@modelcontextprotocol/server 2.x)", plain: p, notarized: n, bare_post: summary(series.post),
      added_p50_ms: n.p50_ms - p.p50_ms, added_p99_ms: n.p99_ms - p.p99_ms };
  }
  return out;
}

const [command, file] = positionals;
if (command === "verify") {
  const doc = JSON.parse(readFileSync(file, "utf8"));
  const jwks = new Jwks(doc.jwks);
  const logVerifier = Ed25519Verifier.fromVkey(doc.vkey);
  const seconds = Number(values.seconds);
  const result = { node: process.version, backend: await ed25519Backend() };
  result.sequential = await verifyRate(doc.cases, jwks, logVerifier, seconds, 1);
  result.in_flight_64 = await verifyRate(doc.cases, jwks, logVerifier, seconds, 64);
  setEd25519Backend(nodeEd25519);
  result.node_crypto_sequential = await verifyRate(doc.cases, jwks, logVerifier, seconds, 1);
  setEd25519Backend("noble");
  result.noble_sequential = await verifyRate(doc.cases.slice(0, 200), jwks, logVerifier, Math.min(seconds, 2), 1);
  setEd25519Backend("auto");
  process.stdout.write(JSON.stringify(result) + "\n");
} else if (command === "latency") {
  const result = await latency(values.notary, values.key, Number(values.calls), Number(values.warmup));
  process.stdout.write(JSON.stringify(result) + "\n");
} else {
  process.stderr.write("usage: node bench/verify.mjs verify CASES.json | latency --notary URL --key KEY\n");
  process.exitCode = 2;
}
