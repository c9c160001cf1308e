// NotaryClient: retries with back-off on connection errors, timeouts and 5xx; never on 4xx; a
// receipt for another call refused; the API key never shown. Against a local HTTP server.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { inspect } from "node:util";
import { NotaryClient, NotaryHTTPError, NotaryResponseError, NotaryUnavailableError } from "../src/index.js";
import { freePort } from "./support/notary.js";

const KEY = "nk_secret_api_key_value";
let server;
let url;
let script = [];
const seen = [];

before(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body, at: Date.now() });
      const step = script.shift() ?? { status: 500, body: { error: { code: "script_empty", message: "no more answers" } } };
      if (step.hang) return; // never answers
      if (step.destroy) return req.socket.destroy();
      const headers = { "content-type": "application/json", ...(step.headers ?? {}) };
      res.writeHead(step.status, headers);
      res.end(typeof step.body === "string" ? step.body : JSON.stringify(step.body(JSON.parse(body || "{}"))));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${server.address().port}`;
});
after(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));

const receiptFor = (req) => ({
  spec: "rs-tool-call/1", id: "tc_AAAAAAAAAAAAAAAAAAAAAA", server: req.server, tool: req.tool, call_sha256: req.call_sha256,
  issued_at: "2026-01-01T00:00:00.000Z", ledger: { origin: "o", index: 0, entry_url: "http://127.0.0.1/v1/ledger/entries/0" },
  signature: { alg: "EdDSA", kid: "k", sig: "s" }, proof: "p",
});
const ok = (extra = {}) => ({ status: 201, body: receiptFor, ...extra });
const digest = "ab".repeat(32);

test("5xx and dropped connections are retried with back-off, then the receipt is returned", async () => {
  script = [{ status: 503, body: () => ({ error: { code: "busy", message: "try later" } }) }, { destroy: true }, ok()];
  seen.length = 0;
  const client = new NotaryClient(url, KEY, { retries: 3, backoffMs: 20 });
  const receipt = await client.notarize("srv", "tool", digest);
  assert.equal(receipt.call_sha256, digest);
  assert.equal(seen.length, 3);
  assert.ok(seen.every((r) => r.method === "POST" && r.url === "/v1/tool-calls" && r.auth === `Bearer ${KEY}`));
  assert.deepEqual(JSON.parse(seen[0].body), { server: "srv", tool: "tool", call_sha256: digest });
  assert.ok(seen[1].at - seen[0].at >= 10, "the first retry waits at least half the back-off");
});

test("Retry-After of a 5xx is honoured (capped at 2 s)", async () => {
  script = [{ status: 503, headers: { "retry-after": "0.3" }, body: () => ({}) }, ok()];
  seen.length = 0;
  await new NotaryClient(url, KEY, { retries: 1, backoffMs: 1 }).notarize("s", "t", digest);
  assert.ok(seen[1].at - seen[0].at >= 290, `waited ${seen[1].at - seen[0].at} ms`);
});

test("a 4xx is never retried and keeps the notary's code", async () => {
  script = [{ status: 402, body: () => ({ error: { code: "quota_exceeded", message: "monthly allowance used" } }) }];
  seen.length = 0;
  await assert.rejects(new NotaryClient(url, KEY, { retries: 3 }).notarize("s", "t", digest), (e) => {
    assert.ok(e instanceof NotaryHTTPError);
    assert.equal(e.status, 402);
    assert.equal(e.code, "quota_exceeded");
    return true;
  });
  assert.equal(seen.length, 1);
});

test("retries run out: NotaryUnavailableError with the attempt count and last status", async () => {
  script = [{ status: 502, body: "bad gateway" }, { status: 500, body: "oops" }, { status: 500, body: "oops" }];
  await assert.rejects(new NotaryClient(url, KEY, { retries: 2, backoffMs: 1 }).notarize("s", "t", digest), (e) => {
    assert.ok(e instanceof NotaryUnavailableError);
    assert.equal(e.attempts, 3);
    assert.equal(e.status, 500);
    assert.match(e.message, /unavailable after 3 attempt\(s\): HTTP 500 http_500: oops/);
    assert.ok(!e.message.includes(KEY));
    return true;
  });
});

test("connection refused and timeouts are retried too", async () => {
  const closed = `http://127.0.0.1:${await freePort()}`;
  await assert.rejects(new NotaryClient(closed, KEY, { retries: 2, backoffMs: 1 }).notarize("s", "t", digest), (e) => e instanceof NotaryUnavailableError && e.attempts === 3 && /ECONNREFUSED/.test(e.message));
  script = [{ hang: true }, ok()];
  const t0 = Date.now();
  const receipt = await new NotaryClient(url, KEY, { retries: 1, timeoutMs: 200, backoffMs: 1 }).notarize("s", "t", digest);
  assert.equal(receipt.server, "s");
  assert.ok(Date.now() - t0 >= 190);
});

test("an answer that is not a receipt for this call is refused, not retried", async () => {
  const good = { server: "s", tool: "t", call_sha256: digest };
  for (const body of [() => ({ ...receiptFor({ server: "s", tool: "t", call_sha256: "cd".repeat(32) }) }), () => good, "not json", () => [1],
    () => ({ ...receiptFor(good), extra: 1 }), () => ({ ...receiptFor(good), ledger: { origin: "o", index: -1, entry_url: "x" } }),
    () => ({ ...receiptFor(good), pad: "x".repeat(5 << 20) })]) {
    script = [{ status: 201, body }];
    seen.length = 0;
    await assert.rejects(new NotaryClient(url, KEY, { retries: 3 }).notarize("s", "t", digest), NotaryResponseError);
    assert.equal(seen.length, 1);
  }
});

test("arguments are checked and the API key is never shown", () => {
  assert.throws(() => new NotaryClient("ftp://x", KEY), TypeError);
  assert.throws(() => new NotaryClient(url, KEY, { retries: -1 }), RangeError);
  assert.throws(() => new NotaryClient(url, KEY, { timeoutMs: 0 }), RangeError);
  const client = new NotaryClient(url + "/", KEY);
  assert.equal(client.baseUrl, url);
  for (const shown of [String(client), inspect(client), JSON.stringify(client), inspect(client, { showHidden: true, depth: 5 })]) {
    assert.ok(!shown.includes(KEY), shown);
  }
  assert.rejects(new NotaryClient(url).notarize("s", "t", digest), /has no API key/);
  assert.rejects(client.notarize("s", "t", "XYZ"), /64 lower-case hex/);
  assert.equal(client.receiptUrl("tc_a/b"), `${url}/v1/tool-calls/tc_a%2Fb`);
});
