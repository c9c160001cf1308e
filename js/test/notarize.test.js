// Notarizer: the record it hashes is what the client receives, the _meta block is the Python
// SDK's, and a failure is never silent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { META_KEY, NotarizationFailedError, Notarizer, NotaryClient, NotaryUnavailableError, callSha256, recordFor, notarizationOf } from "../src/index.js";

function fakeClient({ fail = null } = {}) {
  const calls = [];
  return {
    baseUrl: "http://127.0.0.1:1",
    calls,
    async notarize(server, tool, digest) {
      calls.push({ server, tool, digest });
      if (fail) throw fail;
      return { spec: "rs-tool-call/1", id: "tc_AAAAAAAAAAAAAAAAAAAAAA", server, tool, call_sha256: digest, proof: "proof" };
    },
  };
}

const quiet = { warn() {} };

test("the block, the digest of exactly what is sent, existing _meta kept", async () => {
  const client = fakeClient();
  const n = new Notarizer(client, "srv", { logger: quiet, publicUrl: "https://notary.example/" });
  const input = { content: [{ type: "text", text: "x", annotations: undefined }], structuredContent: { n: NaN, d: new Date(0), u: undefined }, _meta: { keep: 1 } };
  const out = await n.notarizeResult("tool", { a: 1 }, input);
  assert.equal(input.isError, undefined, "the input is not modified");
  assert.deepEqual(out.structuredContent, { n: null, d: "1970-01-01T00:00:00.000Z" }, "hashed in its wire form");
  assert.equal(out.isError, false, "isError is sent explicitly");
  assert.equal(out._meta.keep, 1);
  const block = out._meta[META_KEY];
  assert.deepEqual(Object.keys(block), ["spec", "id", "call_sha256", "salt", "receipt_url", "verify_url", "receipt"]);
  assert.equal(block.receipt_url, "https://notary.example/v1/tool-calls/tc_AAAAAAAAAAAAAAAAAAAAAA");
  assert.equal(block.verify_url, "https://notary.example/v1/tool-calls/verify");
  assert.equal(client.calls[0].digest, block.call_sha256);
  // the client, from what it received, computes the same digest
  const received = JSON.parse(JSON.stringify(out));
  assert.equal(callSha256(recordFor("tool", { a: 1 }, received), { server: "srv" }), block.call_sha256);
  assert.deepEqual(notarizationOf(received), block);
  const salts = new Set();
  for (let i = 0; i < 5; i++) salts.add((await n.notarizeResult("tool", {}, { content: [] }))._meta[META_KEY].salt);
  assert.equal(salts.size, 5, "a fresh salt per call");
});

test("embedReceipt false, no arguments, and a non-object _meta replaced with a warning", async () => {
  const warnings = [];
  const n = new Notarizer(fakeClient(), "srv", { embedReceipt: false, logger: { warn: (m) => warnings.push(m) } });
  const out = await n.notarizeResult("t", undefined, { content: [], _meta: "oops" });
  assert.equal(out._meta[META_KEY].receipt, undefined);
  assert.equal(callSha256(recordFor("t", {}, out), { server: "srv" }), out._meta[META_KEY].call_sha256);
  assert.match(warnings.join("\n"), /non-object _meta/);
  const again = await n.notarizeResult("t", {}, { content: [], _meta: { [META_KEY]: { forged: true } } });
  assert.equal(again._meta[META_KEY].forged, undefined);
  assert.match(warnings.join("\n"), /already had/);
});

test("non-final results pass through, unnotarized", async () => {
  const client = fakeClient();
  const n = new Notarizer(client, "srv", { logger: quiet });
  const pending = { resultType: "input_required", inputRequests: {} };
  assert.equal(await n.notarizeResult("t", {}, pending), pending);
  assert.equal(client.calls.length, 0);
});

test('"fail" withholds the result with a JSON-RPC error; "mark" marks it; both warn', async () => {
  const down = new NotaryUnavailableError("notary at http://x unavailable after 2 attempt(s): ECONNREFUSED", { attempts: 2 });
  const warnings = [];
  const logger = { warn: (m) => warnings.push(m) };
  const fail = new Notarizer(fakeClient({ fail: down }), "srv", { logger });
  await assert.rejects(fail.notarizeResult("t", {}, { content: [] }), (e) => {
    assert.ok(e instanceof NotarizationFailedError);
    assert.equal(e.code, -32603);
    assert.deepEqual(e.data, { [META_KEY]: { spec: "rs-tool-call/1", notarized: false, reason: down.message, tool_executed: true } });
    return true;
  });
  const mark = new Notarizer(fakeClient({ fail: down }), "srv", { onUnreachable: "mark", logger });
  const out = await mark.notarizeResult("t", {}, { content: [{ type: "text", text: "kept" }], _meta: { keep: true } });
  assert.deepEqual(out._meta, { keep: true, [META_KEY]: { spec: "rs-tool-call/1", notarized: false, reason: down.message } });
  assert.equal(out.content[0].text, "kept");
  // a record that cannot be hashed faithfully is a failure of the same kind, before any request
  const client = fakeClient();
  const strict = new Notarizer(client, "srv", { logger });
  await assert.rejects(strict.notarizeResult("t", { s: "\ud800" }, { content: [] }), /cannot be hashed/);
  await assert.rejects(strict.notarizeResult("t", {}, { content: "no" }), /cannot be hashed/);
  assert.equal(client.calls.length, 0);
  assert.equal(warnings.length, 4);
  assert.throws(() => new Notarizer(client, "srv", { onUnreachable: "ignore" }), /'fail' or 'mark'/);
  assert.throws(() => new Notarizer(client, ""), /serverName/);
});

test("the handler wrapper copies the arguments before the tool runs and skips task requests", async () => {
  const client = fakeClient();
  const n = new Notarizer(client, "srv", { logger: quiet });
  const handler = n.wrapHandler(async (req) => {
    req.params.arguments.a = "changed by the tool";
    return { content: [] };
  });
  const out = await handler({ params: { name: "t", arguments: { a: 1 } } }, {});
  assert.equal(callSha256(recordFor("t", { a: 1 }, out), { server: "srv" }), out._meta[META_KEY].call_sha256);
  const task = await n.wrapHandler(async () => ({ task: { taskId: "x" } }))({ params: { name: "t", task: {} } }, {});
  assert.deepEqual(task, { task: { taskId: "x" } });
  assert.equal(client.calls.length, 1);
});

test("a client without an API key is refused when the Notarizer is built, naming the setting", () => {
  for (const key of [undefined, null, ""]) {
    const client = new NotaryClient("http://127.0.0.1:9", key);
    assert.equal(client.hasApiKey, false);
    assert.throws(() => new Notarizer(client, "srv"), (e) => {
      assert.ok(e instanceof TypeError);
      assert.match(e.message, /has no API key/);
      assert.match(e.message, /pass apiKey to NotaryClient/);
      assert.match(e.message, /NOTARY_API_KEY/);
      return true;
    });
  }
  assert.equal(new NotaryClient("http://127.0.0.1:9", "nk_abc_def").hasApiKey, true);
  for (const bad of ["nk_abc_def\n", " nk_abc_def", "nk_abc\u0000def"]) {
    assert.throws(() => new NotaryClient("http://127.0.0.1:9", bad), (e) => e instanceof TypeError && /whitespace or control/.test(e.message) && !e.message.includes("nk_abc"));
  }
});

test("an unexpected error after the tool ran is still the documented error, its stack in the log", async () => {
  const warnings = [];
  const bug = new TypeError("a bug in a custom client");
  const n = new Notarizer(fakeClient({ fail: bug }), "srv", { logger: { warn: (m) => warnings.push(m) } });
  const reason = "unexpected TypeError in the notarizer (see the server log)";
  await assert.rejects(n.notarizeResult("t", {}, { content: [] }), (e) => {
    assert.ok(e instanceof NotarizationFailedError);
    assert.equal(e.code, -32603);
    assert.deepEqual(e.data, { [META_KEY]: { spec: "rs-tool-call/1", notarized: false, reason, tool_executed: true } });
    return true;
  });
  assert.equal(warnings.length, 1);
  assert.ok(warnings[0].startsWith(`[mcp-notary] could not notarize a result of tool "t" (${reason}); policy "fail"\n`), warnings[0]);
  assert.match(warnings[0], /a bug in a custom client/);
  const mark = new Notarizer(fakeClient({ fail: bug }), "srv", { onUnreachable: "mark", logger: { warn() {} } });
  assert.deepEqual((await mark.notarizeResult("t", {}, { content: [] }))._meta[META_KEY], { spec: "rs-tool-call/1", notarized: false, reason });
});
