// An emergency roll (`notary log roll --reason compromised`, docs/lifecycle.md) around receipt-key
// rotations: receipts of every log under every receipt key verify in Node and in Python's
// `notary verify` with the same statuses; the logs whose keys the roll retired are listed so,
// and a receipt of one of them is valid only when level 5 finds it consistent with that log's
// final checkpoint; when that cannot be checked both verifiers fail it, naming the retirement.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NotaryClient, Notarizer, createFetcher, loadTrust, verifyToolCall } from "../src/index.js";
import { freePort, notaryCli, startNotary } from "./support/notary.js";

let notary;
let dir;
let ledger;
const calls = []; // {name, call, kid, origin}

const meta = (c) => c.result._meta["com.rightshold/tool-call"].receipt;
const statuses = (r) => Object.fromEntries(Object.entries(r.levels).map(([k, v]) => [k, v.status]));

async function notarize(notarizer, name) {
  const args = { name };
  const result = await notarizer.notarizeResult("echo", args, { content: [{ type: "text", text: name }] });
  const call = { tool: "echo", arguments: args, result };
  calls.push({ name, call, kid: meta(call).signature.kid, origin: meta(call).ledger.origin });
  return calls.at(-1);
}

/** `notary keys rotate`, then notarize until the server signs with the new key (it rereads keys every few seconds). */
async function rotate(notarizer, name) {
  const before = calls.at(-1).kid;
  const r = notaryCli("keys", "rotate", "--data", notary.data);
  assert.equal(r.status, 0, r.stderr);
  for (let i = 0; i < 100; i++) {
    const got = await notarize(notarizer, `${name}-${i}`);
    if (got.kid !== before) return got;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error("the server never signed with the rotated receipt key");
}

function roll(reason) {
  const r = notaryCli("log", "roll", "--data", notary.data, "--reason", reason);
  assert.equal(r.status, 0, r.stderr);
}

before(async () => {
  notary = await startNotary();
  dir = mkdtempSync(join(tmpdir(), "mcp-notary-js-emergency-"));
  const notarizer = new Notarizer(new NotaryClient(notary.url, notary.apiKey), "emergency-test", { logger: null });
  await notarize(notarizer, "log0-keyA");
  await rotate(notarizer, "log0-keyB");
  roll("operator");
  await notarize(notarizer, "log1-keyB");
  await rotate(notarizer, "log1-keyC");
  roll("compromised");
  await notarize(notarizer, "log2-keyC");
  ledger = await (await fetch(notary.url + "/v1/ledger")).json();
});
after(async () => {
  await notary?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the log list: logs 0 and 1 retired by the compromised roll of log 1, log 2 of a new root", () => {
  assert.deepEqual(ledger.logs.map((l) => [l.state, l.key_generation]), [["frozen", 0], ["frozen", 0], ["active", 1]]);
  for (const l of ledger.logs.slice(0, 2)) assert.deepEqual(l.retired, { reason: "compromised", at: ledger.logs[1].frozen_at, by: ledger.logs[1].origin });
  assert.equal(ledger.logs[2].retired, null);
  // Three receipt keys, and receipts of each log under two of them.
  assert.equal(new Set(calls.map((c) => c.kid)).size, 3);
  for (const origin of ledger.logs.map((l) => l.origin)) assert.ok(calls.some((c) => c.origin === origin), origin);
});

test("every receipt verifies online in Node and in Python, with the same statuses", async () => {
  const trust = await loadTrust({ notary: notary.url }, { fetcher: createFetcher({ fetch }) });
  assert.deepEqual(Object.keys(trust.retired).sort(), ledger.logs.slice(0, 2).map((l) => l.origin).sort());
  for (const { name, call } of calls.filter((c, i) => i === 0 || c.kid !== calls[i - 1].kid || c.origin !== calls[i - 1].origin)) {
    const js = await verifyToolCall(call, { trust: { notary: notary.url }, online: true });
    assert.ok(js.valid, js.render());
    assert.equal(js.levels.consistency.status, "passed", js.render());
    const path = join(dir, `${name}.json`);
    writeFileSync(path, JSON.stringify(call));
    const py = notaryCli("verify", path, "--notary", notary.url, "--no-state", "--json");
    assert.equal(py.status, 0, py.stdout + py.stderr);
    assert.deepEqual(statuses(js), Object.fromEntries(Object.entries(JSON.parse(py.stdout).levels).map(([k, v]) => [k, v.status])));
  }
});

test("a retired log's receipt that level 5 cannot tie to the final checkpoint fails in both, naming the retirement", async () => {
  const port = await freePort(); // nothing listens there: the log's checkpoint cannot be fetched
  const logUrl = `http://127.0.0.1:${port}`;
  for (const { name, call, origin } of [calls[0], calls.find((c) => c.origin === ledger.logs[1].origin), calls.at(-1)]) {
    const retired = origin !== ledger.logs[2].origin;
    const js = await verifyToolCall(call, { trust: { notary: notary.url }, online: true, logUrl });
    const path = join(dir, `${name}-unreachable.json`);
    writeFileSync(path, JSON.stringify(call));
    const py = notaryCli("verify", path, "--notary", notary.url, "--log-url", logUrl, "--no-state", "--json");
    const pyReport = JSON.parse(py.stdout);
    assert.equal(js.valid, !retired, js.render());
    assert.equal(pyReport.valid, !retired, py.stdout);
    assert.equal(py.status, retired ? 1 : 0);
    assert.deepEqual(statuses(js), Object.fromEntries(Object.entries(pyReport.levels).map(([k, v]) => [k, v.status])));
    if (retired) {
      assert.equal(js.levels.consistency.status, "failed");
      assert.match(js.levels.consistency.reason, /retired by the compromised roll/);
      assert.match(pyReport.levels.consistency.reason, /retired by the compromised roll/);
    } else {
      assert.equal(js.levels.consistency.status, "skipped");
    }
  }
});
