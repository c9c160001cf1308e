// Receipts of a notary that rolled to a new log (docs/lifecycle.md): a receipt of the frozen log
// and one of the active log both verify in Node, trusting the notary's log list as Python's
// `notary verify --notary` does, and the two verifiers give the same verdicts.
import { after, before, test } from "node:test";
import { createHash, generateKeyPairSync } from "node:crypto";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryStore, NotaryClient, createFetcher, Notarizer, loadTrust, makeTrust, verifyToolCall } from "../src/index.js";
import { notaryCli, startNotary } from "./support/notary.js";

let notary;
let frozenCall;
let activeCall;
let ledger;
let dir;

async function call(notarizer, tool, args) {
  const result = await notarizer.notarizeResult(tool, args, { content: [{ type: "text", text: JSON.stringify(args) }] });
  return { tool, arguments: args, result };
}

before(async () => {
  notary = await startNotary();
  dir = mkdtempSync(join(tmpdir(), "mcp-notary-js-life-"));
  const notarizer = new Notarizer(new NotaryClient(notary.url, notary.apiKey), "lifecycle-test", { logger: null });
  frozenCall = await call(notarizer, "before", { i: 0 });
  await call(notarizer, "before", { i: 1 });
  const rolled = notaryCli("log", "roll", "--data", notary.data);
  assert.equal(rolled.status, 0, rolled.stderr);
  activeCall = await call(notarizer, "after", { i: 2 });
  ledger = await (await fetch(notary.url + "/v1/ledger")).json();
});
after(async () => {
  await notary?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const statuses = (r) => Object.fromEntries(Object.entries(r.levels).map(([k, v]) => [k, v.status]));
const originOf = (c) => c.result._meta["com.rightshold/tool-call"].receipt.ledger.origin;

test("the notary rolled: two logs, each receipt in its own", () => {
  assert.equal(ledger.logs.length, 2);
  assert.deepEqual(ledger.logs.map((l) => l.state), ["frozen", "active"]);
  assert.equal(originOf(frozenCall), ledger.logs[0].origin);
  assert.equal(originOf(activeCall), ledger.logs[1].origin);
  assert.equal(ledger.origin, ledger.logs[1].origin);
});

test("--notary trust: receipts of the frozen and the active log verify online, level 5 from each log's own checkpoint", async () => {
  const trust = await loadTrust({ notary: notary.url }, { fetcher: createFetcher({ fetch }) });
  assert.ok(trust.logKeys.length >= 2, "every listed log's key is trusted");
  const store = new MemoryStore();
  for (const c of [frozenCall, activeCall]) {
    const report = await verifyToolCall(c, { trust: { notary: notary.url }, store, online: true });
    assert.ok(report.valid, report.render());
    assert.equal(report.levels.consistency.status, "passed", report.render());
  }
  // The frozen log's newest checkpoint is its final one: the successor record is its last entry.
  assert.equal(BigInt(store.get(ledger.logs[0].vkeys[0]).size), BigInt(ledger.logs[0].size));
  assert.equal(BigInt(store.get(ledger.logs[1].vkeys[0]).size), BigInt(ledger.logs[1].size));
});

test("pinned keys: each log's key is needed for its receipts", async () => {
  const jwks = notary.jwks;
  const onlyFirst = makeTrust({ jwks, logKeys: [ledger.logs[0].vkeys[0]] });
  assert.equal((await verifyToolCall(frozenCall, { trust: onlyFirst })).valid, true);
  const other = await verifyToolCall(activeCall, { trust: onlyFirst });
  assert.equal(other.valid, false);
  assert.equal(other.levels.inclusion.status, "failed");
  const both = makeTrust({ jwks, logKeys: ledger.logs.map((l) => l.vkeys[0]) });
  const report = await verifyToolCall(activeCall, { trust: both, online: true });
  assert.ok(report.valid, report.render());
});

test("Python's notary verify gives the same verdicts", async () => {
  for (const [name, c] of [["frozen", frozenCall], ["active", activeCall]]) {
    const path = join(dir, `${name}.json`);
    writeFileSync(path, JSON.stringify(c));
    const py = notaryCli("verify", path, "--notary", notary.url, "--no-state", "--json");
    assert.equal(py.status, 0, py.stdout + py.stderr);
    const pyLevels = Object.fromEntries(Object.entries(JSON.parse(py.stdout).levels).map(([k, v]) => [k, v.status]));
    const js = await verifyToolCall(c, { trust: { notary: notary.url }, online: true });
    assert.deepEqual(statuses(js), pyLevels);
  }
});

test("only log 0's key pinned: a receipt of the next log verifies by following the successor record, as in Python", async () => {
  const jwks = notary.jwks;
  const pinned = makeTrust({ jwks, logKeys: [ledger.logs[0].vkeys[0]] });
  const report = await verifyToolCall(activeCall, { trust: pinned, online: true });
  assert.ok(report.valid, report.render());
  assert.ok(report.notes.some((n) => n.includes("through 1 successor record(s)")), report.render());
  const path = join(dir, "active-pinned.json");
  writeFileSync(path, JSON.stringify(activeCall));
  const jwksPath = join(dir, "jwks.json");
  writeFileSync(jwksPath, JSON.stringify(jwks));
  // A key named as log 0 that the notary does not list for it: no chain to follow from it.
  const stranger = strangerKey(ledger.logs[0].origin);
  for (const [key, valid] of [[ledger.logs[0].vkeys[0], true], [stranger, false]]) {
    const py = notaryCli("verify", path, "--jwks", jwksPath, "--log-key", key, "--no-state", "--json");
    const js = await verifyToolCall(activeCall, { trust: { jwks, logKeys: [key] }, online: true });
    const pyReport = JSON.parse(py.stdout);
    assert.equal(pyReport.valid, valid, py.stdout);
    if (!valid) assert.match(js.levels.inclusion.reason, /following the chain of logs/);
    assert.equal(js.valid, valid, js.render());
    assert.deepEqual(statuses(js), Object.fromEntries(Object.entries(pyReport.levels).map(([k, v]) => [k, v.status])));
  }
});

/** A fresh Ed25519 note verifier key named `name` (C2SP signed-note: id = SHA-256(name ‖ "\n" ‖ 0x01 ‖ key)[:4]). */
function strangerKey(name) {
  const pub = Buffer.from(generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }).x, "base64url");
  const typed = Buffer.concat([Buffer.from([1]), pub]);
  const id = createHash("sha256").update(Buffer.concat([Buffer.from(name + "\n"), typed])).digest().subarray(0, 4).toString("hex");
  return `${name}+${id}+${typed.toString("base64")}`;
}
