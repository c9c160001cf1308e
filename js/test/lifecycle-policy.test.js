// A tlog-policy whose `log` lines name several logs of a notary that rolled (docs/verifying.md):
// it is a source of pinned log keys. With that policy alone, receipts of each named log verify at
// every level, offline and online, in Node (API and `mcp-notary verify`) and in Python's
// `notary verify`, with the same statuses; a receipt of a log it does not name fails level 3
// naming that log's origin, unless a key comes from elsewhere (--log-key, the successor chain).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NotaryClient, Notarizer, createFetcher, loadTrust, verifyToolCall } from "../src/index.js";
import { main } from "../src/node/index.js";
import { notaryCli, startNotary } from "./support/notary.js";

let notary;
let ledger;
let dir;
let jwksPath;
const calls = {};

async function call(notarizer, tool, args) {
  const result = await notarizer.notarizeResult(tool, args, { content: [{ type: "text", text: JSON.stringify(args) }] });
  return { tool, arguments: args, result };
}

before(async () => {
  notary = await startNotary();
  dir = mkdtempSync(join(tmpdir(), "mcp-notary-js-policy-"));
  const notarizer = new Notarizer(new NotaryClient(notary.url, notary.apiKey), "policy-test", { logger: null });
  calls.log0 = await call(notarizer, "before", { i: 0 });
  const rolled = notaryCli("log", "roll", "--data", notary.data);
  assert.equal(rolled.status, 0, rolled.stderr);
  calls.log1 = await call(notarizer, "after", { i: 1 });
  ledger = await (await fetch(notary.url + "/v1/ledger")).json();
  jwksPath = join(dir, "jwks.json");
  writeFileSync(jwksPath, JSON.stringify(notary.jwks));
  for (const [name, c] of Object.entries(calls)) writeFileSync(join(dir, `${name}.json`), JSON.stringify(c));
});
after(async () => {
  await notary?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const statuses = (levels) => Object.fromEntries(Object.entries(levels).map(([k, v]) => [k, v.status]));

/** A policy naming logs `numbers` (every key of each: Ed25519, and ML-DSA-44 when it dual-signs). */
function policy(numbers) {
  return numbers.flatMap((n) => ledger.logs[n].vkeys.map((k) => `log ${k}`)).join("\n") + "\nquorum none\n";
}

function writePolicy(name, numbers) {
  const path = join(dir, `${name}.policy`);
  writeFileSync(path, policy(numbers));
  return path;
}

async function jsCli(...argv) {
  let out = "";
  let err = "";
  const code = await main(argv, { stdout: { write: (s) => (out += s) }, stderr: { write: (s) => (err += s) } });
  return { code, out, err };
}

/** The verdict of Python's `notary verify`, the JS CLI's and the JS API's, checked to agree. */
async function verdicts(name, flags, { trust, online }) {
  const argv = [join(dir, `${name}.json`), "--jwks", jwksPath, ...flags, "--no-state", "--json", ...(online ? [] : ["--offline"])];
  const py = notaryCli("verify", ...argv);
  const cli = await jsCli("verify", ...argv);
  const api = await verifyToolCall(calls[name], { trust, online });
  const pyReport = JSON.parse(py.stdout || "null");
  assert.ok(pyReport, py.stderr);
  const cliReport = JSON.parse(cli.out || "null");
  assert.ok(cliReport, cli.err);
  assert.deepEqual(statuses(cliReport.levels), statuses(pyReport.levels), `${name} ${flags}: JS CLI ${cli.out} / Python ${py.stdout}`);
  assert.deepEqual(statuses(api.levels), statuses(pyReport.levels), `${name} ${flags}: JS ${api.render()} / Python ${py.stdout}`);
  assert.equal(api.valid, pyReport.valid);
  assert.equal(py.status, pyReport.valid ? 0 : 1, py.stderr);
  assert.equal(cli.code, py.status, cli.err);
  return { py: pyReport, js: api };
}

test("the notary rolled: logs 0 and 1, each with its own origin and key", () => {
  assert.deepEqual(ledger.logs.map((l) => l.state), ["frozen", "active"]);
  assert.notEqual(ledger.logs[0].origin, ledger.logs[1].origin);
  assert.notEqual(ledger.logs[0].vkeys[0], ledger.logs[1].vkeys[0]);
});

test("a policy naming both logs: receipts of each verify at every level with it alone, offline and online", async () => {
  const path = writePolicy("both", [0, 1]);
  for (const online of [false, true]) {
    for (const name of ["log0", "log1"]) {
      const { py, js } = await verdicts(name, ["--witness-policy", path], { trust: { jwks: notary.jwks, policy: policy([0, 1]) }, online });
      assert.ok(js.valid, js.render());
      assert.equal(py.valid, true);
      assert.equal(js.levels.inclusion.status, "passed");
      assert.equal(js.levels.consistency.status, online ? "passed" : "skipped", js.render());
    }
  }
});

test("a receipt of a log the policy does not name fails level 3 naming its origin, in both", async () => {
  const path = writePolicy("second", [1]);
  for (const online of [false, true]) {
    // Online, the successor chain only leads forward from log 1: nothing leads back to log 0.
    const { py, js } = await verdicts("log0", ["--witness-policy", path], { trust: { jwks: notary.jwks, policy: policy([1]) }, online });
    assert.equal(js.valid, false);
    assert.equal(js.levels.inclusion.status, "failed");
    for (const reason of [js.levels.inclusion.reason, py.levels.inclusion.reason]) {
      assert.ok(reason.includes(`no trusted log key for origin '${ledger.logs[0].origin}'`), reason);
    }
  }
});

test("policy keys and --log-key are one pinned set: the key of the unnamed log may come from --log-key", async () => {
  const path = writePolicy("second-plus", [1]);
  const { py, js } = await verdicts("log0", ["--witness-policy", path, "--log-key", ledger.logs[0].vkeys[0]],
    { trust: { jwks: notary.jwks, policy: policy([1]), logKeys: [ledger.logs[0].vkeys[0]] }, online: false });
  assert.ok(js.valid, js.render());
  assert.equal(py.valid, true);
});

test("a policy naming log 0 only: a receipt of log 1 verifies online by following the successor record, offline it fails", async () => {
  const path = writePolicy("first", [0]);
  for (const online of [false, true]) {
    const { js } = await verdicts("log1", ["--witness-policy", path], { trust: { jwks: notary.jwks, policy: policy([0]) }, online });
    assert.equal(js.valid, online, js.render());
    if (online) assert.ok(js.notes.some((n) => n.includes("through 1 successor record(s)")), js.render());
  }
});

test("with --notary, the policy's log keys are pinned: the notary's list does not add the logs the policy leaves out", async () => {
  const fetcher = createFetcher({ fetch });
  const trust = await loadTrust({ notary: notary.url, policy: policy([1]) }, { fetcher });
  assert.deepEqual(trust.logKeys.map((k) => k.name).sort(), ledger.logs[1].vkeys.map(() => ledger.logs[1].origin));
  assert.ok(trust.jwks, "the receipt keys still come from the notary");
  const path = writePolicy("second-notary", [1]);
  const py = notaryCli("verify", join(dir, "log0.json"), "--notary", notary.url, "--witness-policy", path, "--no-state", "--json");
  const cli = await jsCli("verify", join(dir, "log0.json"), "--notary", notary.url, "--witness-policy", path, "--no-state", "--json");
  const js = await verifyToolCall(calls.log0, { trust: { notary: notary.url, policy: policy([1]) }, online: true });
  const pyReport = JSON.parse(py.stdout);
  assert.equal(pyReport.valid, false, py.stdout);
  assert.equal(js.valid, false, js.render());
  assert.match(pyReport.levels.inclusion.reason, new RegExp(`no trusted log key for origin '${ledger.logs[0].origin}'`));
  assert.deepEqual(statuses(js.levels), statuses(pyReport.levels));
  assert.deepEqual(statuses(JSON.parse(cli.out).levels), statuses(pyReport.levels));
  // A policy without log lines pins no log key: the notary's list fills them in, as before.
  const witnessOnly = "quorum none\n";
  const filled = await loadTrust({ notary: notary.url, policy: witnessOnly }, { fetcher });
  assert.ok(ledger.logs.every((l) => filled.logKeys.some((k) => k.vkey === l.vkeys[0])));
});
