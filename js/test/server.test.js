// A TypeScript MCP server (test/fixtures/server.ts) notarized with this package against a real
// `notary serve` on 127.0.0.1, called over stdio by the TypeScript clients of SDK 1.x and 2.x;
// its results verified by the JS verifier and by the Python `notary verify`.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as ClientV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";
import { META_KEY, VerifierInputError, makeTrust, verifyToolCall, recordFor, verifyReceipt, NotaryClient, Notarizer, notarizeServer } from "../src/index.js";
import { freePort, notaryCli, startNotary } from "./support/notary.js";
import { fixtureServer } from "./support/build.js";

let notary;
let server;
let trust;
const scratch = mkdtempSync(join(tmpdir(), "mcp-notary-server-test-"));

before(async () => {
  [notary, server] = await Promise.all([startNotary(), fixtureServer()]);
  trust = makeTrust({ jwks: notary.jwks, logKeys: [notary.vkey] });
});
after(async () => notary?.cleanup());

/**
 * A TypeScript client connected to the fixture server over stdio. `env` entries set to undefined
 * are removed from the server's environment; `stderr` (an array) collects what the server logs.
 */
async function connect(clientKind, env, { stderr = null, target = notary } = {}) {
  const fullEnv = { ...process.env, NOTARY_URL: target.url, NOTARY_API_KEY: target.apiKey, ...env };
  for (const [k, v] of Object.entries(fullEnv)) if (v === undefined) delete fullEnv[k];
  const params = { command: process.execPath, args: [server], env: fullEnv, stderr: "pipe" };
  const Transport = clientKind === "v1" ? StdioV1 : StdioV2;
  const transport = new Transport(params);
  if (stderr !== null) transport.stderr.on("data", (chunk) => stderr.push(String(chunk)));
  if (clientKind === "v1") {
    const client = new ClientV1({ name: "js-test", version: "1.0.0" });
    await client.connect(transport);
    return client;
  }
  const negotiation = { "v2-auto": { versionNegotiation: { mode: "auto" } }, "v2-modern": { versionNegotiation: { mode: { pin: "2026-07-28" } } } };
  const client = new ClientV2({ name: "js-test", version: "1.0.0" }, negotiation[clientKind] ?? {});
  await client.connect(transport);
  return client;
}

const CALLS = [
  ["add", { a: 2, b: 40 }],
  ["echo", { text: "héllo \u2028 😀", n: 9007199254740991 }],
  ["boom", {}],
  ["traps", {}],
];

const MATRIX = [
  { sdk: "v1", kind: "mcp", order: "before", client: "v1" },
  { sdk: "v1", kind: "mcp", order: "after", client: "v1" },
  { sdk: "v1", kind: "lowlevel", order: "before", client: "v1" },
  { sdk: "v1", kind: "lowlevel", order: "after", client: "v1" },
  { sdk: "v2", kind: "mcp", order: "before", client: "v2-auto" },
  { sdk: "v2", kind: "mcp", order: "after", client: "v2-legacy" },
  { sdk: "v2", kind: "lowlevel", order: "before", client: "v2-legacy" },
  { sdk: "v2", kind: "lowlevel", order: "after", client: "v2-auto" },
  { sdk: "v2", kind: "mcp", order: "after", client: "v2-modern" },
];

const saved = [];

describe("every final result is notarized and verifies", () => {
  for (const m of MATRIX) {
    test(`SDK ${m.sdk} ${m.kind}, notarizeServer ${m.order} the tools, client ${m.client}`, async () => {
      const client = await connect(m.client, { FIXTURE_SDK: m.sdk, FIXTURE_KIND: m.kind, FIXTURE_ORDER: m.order });
      try {
        const calls = m.sdk === "v2" && m.kind === "mcp" ? [...CALLS, ["list", {}]] : CALLS;
        for (const [tool, args] of calls) {
          const result = await client.callTool({ name: tool, arguments: args });
          const block = result._meta?.[META_KEY];
          assert.ok(block, `${tool}: no ${META_KEY} in _meta`);
          assert.deepEqual(Object.keys(block).sort(), ["call_sha256", "id", "receipt", "receipt_url", "salt", "spec", "verify_url"]);
          assert.equal(block.spec, "rs-tool-call/1");
          assert.match(block.salt, /^[0-9a-f]{32}$/);
          assert.equal(block.receipt_url, `${notary.url}/v1/tool-calls/${block.id}`);
          assert.equal(typeof block.receipt.proof, "string");
          assert.equal(block.receipt.server, "ts-fixture");
          assert.equal(result.isError, tool === "boom", `${tool}: isError is sent explicitly`);
          if (tool === "echo") assert.equal(result._meta["example.com/trace"], "t-1", "existing _meta is kept");
          if (tool === "list") {
            const modern = m.client === "v2-modern" || m.client === "v2-auto";
            assert.deepEqual(result.structuredContent, modern ? [1, 2, 3] : { result: [1, 2, 3] }, "each era's shape is hashed as that client receives it");
          }
          const report = await verifyToolCall({ tool, arguments: args, result }, { trust });
          assert.ok(report.valid, report.render());
          assert.deepEqual(Object.fromEntries(Object.entries(report.levels).map(([k, v]) => [k, v.status])),
            { record: "passed", signature: "passed", inclusion: "passed", witnesses: "skipped", consistency: "skipped" });
          // the record as the client rebuilds it, with the receipt alone
          const viaRecord = await verifyReceipt(block.receipt, recordFor(tool, args, result), { trust });
          assert.ok(viaRecord.valid, viaRecord.render());
          // another argument value is another call
          const other = await verifyToolCall({ tool, arguments: { ...args, extra: 1 }, result }, { trust });
          assert.equal(other.levels.record.status, "failed");
          saved.push({ m, tool, doc: { tool, arguments: args, result } });
        }
      } finally {
        await client.close();
      }
    });
  }
});

test("the Python `notary verify` accepts the same results, and refuses a changed one", () => {
  assert.ok(saved.length >= MATRIX.length * CALLS.length, `${saved.length} results saved`);
  const jwksFile = join(scratch, "jwks.json");
  writeFileSync(jwksFile, JSON.stringify(notary.jwks));
  // one result of each configuration and every tool of one configuration
  const picks = [...new Map(saved.map((s) => [JSON.stringify(s.m), s])).values(), ...saved.filter((s) => s.m.sdk === "v2" && s.m.kind === "mcp" && s.m.order === "before")];
  for (const [i, s] of picks.entries()) {
    const file = join(scratch, `call-${i}.json`);
    writeFileSync(file, JSON.stringify(s.doc));
    const r = notaryCli("verify", file, "--jwks", jwksFile, "--log-key", notary.vkey, "--offline", "--no-state", "--json");
    assert.equal(r.status, 0, `${JSON.stringify(s.m)} ${s.tool}: ${r.stdout}\n${r.stderr}`);
    assert.equal(JSON.parse(r.stdout).valid, true);
  }
  const changed = join(scratch, "changed.json");
  const doc = structuredClone(picks[0].doc);
  doc.result.content[0].text += "!";
  writeFileSync(changed, JSON.stringify(doc));
  const r = notaryCli("verify", changed, "--jwks", jwksFile, "--log-key", notary.vkey, "--offline", "--no-state", "--json");
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.equal(JSON.parse(r.stdout).levels.record.status, "failed");
});

describe("an unreachable notary is never silent", () => {
  for (const sdk of ["v1", "v2"]) {
    test(`SDK ${sdk}: "fail" withholds the result with a JSON-RPC error`, async () => {
      const port = await freePort();
      const client = await connect(sdk === "v1" ? "v1" : "v2-legacy", { FIXTURE_SDK: sdk, NOTARY_URL: `http://127.0.0.1:${port}` });
      try {
        await assert.rejects(client.callTool({ name: "add", arguments: { a: 1, b: 1 } }), (e) => {
          assert.equal(e.code, -32603);
          assert.match(e.message, /could not be notarized/);
          const data = e.data?.[META_KEY];
          assert.deepEqual({ ...data, reason: typeof data.reason }, { spec: "rs-tool-call/1", notarized: false, reason: "string", tool_executed: true });
          assert.match(data.reason, /unavailable after 2 attempt/);
          return true;
        });
      } finally {
        await client.close();
      }
    });
    test(`SDK ${sdk}: "mark" returns the result marked as not notarized`, async () => {
      const port = await freePort();
      const client = await connect(sdk === "v1" ? "v1" : "v2-auto", { FIXTURE_SDK: sdk, NOTARY_URL: `http://127.0.0.1:${port}`, NOTARY_ON_UNREACHABLE: "mark" });
      try {
        const result = await client.callTool({ name: "echo", arguments: { text: "x" } });
        const block = result._meta[META_KEY];
        assert.equal(block.notarized, false);
        assert.equal(block.spec, "rs-tool-call/1");
        assert.match(block.reason, /unavailable/);
        assert.equal(result._meta["example.com/trace"], "t-1");
        await assert.rejects(verifyToolCall({ tool: "echo", arguments: { text: "x" }, result }, { trust }), VerifierInputError);
      } finally {
        await client.close();
      }
    });
  }
});

describe("a server that cannot notarize fails at start-up, or answers the documented error", () => {
  for (const sdk of ["v1", "v2"]) {
    test(`SDK ${sdk}: without NOTARY_API_KEY the server refuses to start, naming the setting`, async () => {
      const stderr = [];
      await assert.rejects(connect(sdk === "v1" ? "v1" : "v2-auto", { FIXTURE_SDK: sdk, NOTARY_API_KEY: undefined }, { stderr }));
      const text = stderr.join("");
      assert.match(text, /the notary client has no API key, so no tool result could be notarized: pass apiKey to NotaryClient/, text);
      assert.match(text, /NOTARY_API_KEY/);
    });
  }

  const withheld = (tool, reason) => `tool "${tool}" ran but its result could not be notarized (${reason}); the result is withheld. Its side effects, if any, have happened: do not blindly retry a non-idempotent call.`;
  for (const [sdk, clientKind] of [["v1", "v1"], ["v2", "v2-legacy"], ["v2", "v2-auto"]]) {
    test(`SDK ${sdk}, client ${clientKind}: a key revoked meanwhile, then a stopped notary`, async () => {
      const own = await startNotary({ origin: "js-failures.example/log" });
      const stderr = [];
      const client = await connect(clientKind, { FIXTURE_SDK: sdk }, { stderr, target: own });
      try {
        const first = await client.callTool({ name: "add", arguments: { a: 1, b: 1 } });
        assert.ok(first._meta?.[META_KEY]?.receipt, "notarized while the key is valid");
        const revoke = notaryCli("apikey", "revoke", "--data", own.data, own.apiKey);
        assert.equal(revoke.status, 0, revoke.stderr);
        const cases = [["notary answered 401 unauthorized: this API key has been revoked", null],
          [`notary at ${own.url} unavailable after 2 attempt(s): connection failed (ECONNREFUSED)`, () => own.stop()]];
        for (const [reason, before] of cases) {
          await before?.();
          stderr.length = 0;
          await assert.rejects(client.callTool({ name: "add", arguments: { a: 1, b: 1 } }), (e) => {
            assert.equal(e.code, -32603);
            // SDK 1.x's client prefixes the code to the message it received
            assert.equal(e.message.replace(/^MCP error -32603: /, ""), withheld("add", reason));
            assert.deepEqual(e.data, { [META_KEY]: { spec: "rs-tool-call/1", notarized: false, reason, tool_executed: true } });
            return true;
          });
          // one line on the server's stderr, the reason without the key, no stack (it may
          // arrive just after the client's error: wait for it, within a bound)
          for (const deadline = Date.now() + 10_000; !stderr.join("").includes("\n") && Date.now() < deadline;) {
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          assert.equal(stderr.join(""), `[mcp-notary] could not notarize a result of tool "add" (${reason}); policy "fail"\n`);
        }
      } finally {
        await client.close();
        await own.cleanup();
      }
    });
  }
});

test("a result without its receipt verifies online (receipt_url), and offline is an input error", async () => {
  const client = await connect("v1", { FIXTURE_SDK: "v1", NOTARY_EMBED: "0" });
  try {
    const args = { a: 5, b: 6 };
    const result = await client.callTool({ name: "add", arguments: args });
    assert.equal(result._meta[META_KEY].receipt, undefined);
    const online = await verifyToolCall({ tool: "add", arguments: args, result }, { trust, online: true });
    assert.ok(online.valid, online.render());
    assert.ok(online.notes.some((n) => n.startsWith("receipt fetched from")));
    assert.equal(online.levels.consistency.status, "passed");
    await assert.rejects(verifyToolCall({ tool: "add", arguments: args, result }, { trust }), /offline it cannot be fetched/);
  } finally {
    await client.close();
  }
});

test("notarizeServer refuses a second notarizer and objects that are not MCP servers", async () => {
  const { McpServer } = await import("@modelcontextprotocol/sdk/server/mcp.js");
  const s = new McpServer({ name: "x", version: "1" });
  const n = new Notarizer(new NotaryClient(notary.url, notary.apiKey), "x");
  notarizeServer(s, n);
  assert.throws(() => notarizeServer(s, n), /already has a Notarizer/);
  assert.throws(() => notarizeServer({}, n), /needs an McpServer or Server/);
});

describe("a notarized server declares the receipt extension", () => {
  for (const m of [MATRIX[0], MATRIX[2], MATRIX[4], MATRIX[5], MATRIX[8]]) {
    test(`SDK ${m.sdk} ${m.kind}, client ${m.client}`, async () => {
      const client = await connect(m.client, { FIXTURE_SDK: m.sdk, FIXTURE_KIND: m.kind, FIXTURE_ORDER: m.order });
      try {
        const caps = client.getServerCapabilities();
        const modern = m.client === "v2-modern" || m.client === "v2-auto";
        const table = modern ? caps.extensions : caps.experimental;
        assert.deepEqual(table?.[META_KEY], {
          spec: "rs-tool-call/1", metaKey: META_KEY, notary: notary.url,
          jwks: `${notary.url}/.well-known/jwks.json`, logKeys: [],
        });
      } finally {
        await client.close();
      }
    });
  }
});
