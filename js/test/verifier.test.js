// The verifier online (level 5 against a real notary, through a proxy that can lag, refuse or
// lie), the witness-proof upgrade, the stores, and hostile inputs.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import {
  META_KEY, MemoryStore, NotaryClient, Notarizer, Reconciler, Seen, StateError, VerifierInputError, WebStorageStore,
  decodeProofBundle, makeTrust, parseCheckpointText, parseNote, verifyToolCall, verifyReceipt,
} from "../src/index.js";
import { startNotary } from "./support/notary.js";
import { Cosigner, Signer, signedCheckpoint } from "./helpers.js";

let notary;
let notarizer;
let trust;
let proxy;
let proxyUrl;
let mode = {};

const dec = new TextDecoder();

async function call(tool, args) {
  const result = await notarizer.notarizeResult(tool, args, { content: [{ type: "text", text: JSON.stringify(args) }] });
  return { tool, arguments: args, result };
}
const checkpointOf = (saved) => dec.decode(decodeProofBundle(saved.result._meta[META_KEY].receipt.proof).checkpoint);

before(async () => {
  notary = await startNotary();
  notarizer = new Notarizer(new NotaryClient(notary.url, notary.apiKey), "verifier-test", { logger: null });
  trust = makeTrust({ jwks: notary.jwks, logKeys: [notary.vkey] });
  proxy = createServer(async (req, res) => {
    const path = req.url;
    const send = (status, body, type = "application/json") => {
      res.writeHead(status, { "content-type": type });
      res.end(typeof body === "string" ? body : JSON.stringify(body));
    };
    if (path === "/checkpoint" && mode.checkpoint !== undefined) return send(mode.checkpoint.status ?? 200, mode.checkpoint.body, "text/plain");
    if (path.startsWith("/v1/ledger/proofs/consistency") && mode.proofs !== undefined) return send(mode.proofs.status, mode.proofs.body(new URL(path, "http://x")));
    if (path === "/receipt" && mode.receipt !== undefined) return send(200, mode.receipt);
    const upstream = await fetch(notary.url + path);
    send(upstream.status, await upstream.text(), upstream.headers.get("content-type"));
  });
  await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  proxyUrl = `http://127.0.0.1:${proxy.address().port}`;
});
after(async () => {
  proxy?.closeAllConnections();
  await new Promise((resolve) => (proxy ? proxy.close(resolve) : resolve()));
  await notary?.cleanup();
});

const statuses = (r) => Object.fromEntries(Object.entries(r.levels).map(([k, v]) => [k, v.status]));

describe("level 5 online", () => {
  test("first sight, then a newer receipt and an older one: proven consistent, remembered", async () => {
    mode = {};
    const store = new MemoryStore();
    const c0 = await call("a", { i: 0 });
    await call("a", { i: 1 });
    const first = await verifyToolCall(c0, { trust, store, online: true, logUrl: proxyUrl });
    assert.ok(first.valid, first.render());
    assert.equal(first.levels.consistency.status, "passed");
    assert.equal(first.levels.consistency.required, false, "nothing was stored before");
    const origin = notary.origin;
    const size = store.get(notary.vkey).size;
    assert.ok(size >= 2);
    const c2 = await call("a", { i: 2 });
    const newer = await verifyToolCall(c2, { trust, store, online: true, logUrl: proxyUrl });
    assert.ok(newer.valid && newer.levels.consistency.required, newer.render());
    assert.ok(store.get(notary.vkey).size > size);
    const older = await verifyToolCall(c0, { trust, store, online: true, logUrl: proxyUrl });
    assert.ok(older.valid, older.render());
    assert.match(older.levels.consistency.reason, /consistent with the checkpoint already seen/);
  });

  test("a lagging latest checkpoint is fine when the log proves it a prefix", async () => {
    const c = await call("b", { i: 0 });
    const store = new MemoryStore();
    await verifyToolCall(await call("b", { i: 1 }), { trust, store, online: true, logUrl: proxyUrl });
    mode = { checkpoint: { body: checkpointOf(c) } };
    const r = await verifyToolCall(c, { trust, store, online: true, logUrl: proxyUrl });
    assert.ok(r.valid, r.render());
    assert.match(r.levels.consistency.reason, /the log's latest checkpoint \(size \d+\)/);
  });

  test("a rollback: the log serves an older tree and will not prove it a prefix", async () => {
    const c = await call("c", { i: 0 });
    const store = new MemoryStore();
    const later = await call("c", { i: 1 });
    await verifyToolCall(later, { trust, store, online: true, logUrl: proxyUrl });
    const before = structuredClone(store.get(notary.vkey));
    mode = { checkpoint: { body: checkpointOf(c) }, proofs: { status: 404, body: () => ({ error: { code: "not_found", message: "beyond the tree" } }) } };
    const r = await verifyToolCall(later, { trust, store, online: true, logUrl: proxyUrl });
    assert.equal(r.valid, false);
    assert.equal(r.levels.consistency.status, "failed");
    assert.deepEqual(new Set(r.conflicts.map((x) => x.kind)), new Set(["rollback"]));
    assert.match(r.levels.consistency.reason, /the log now serves size/);
    assert.ok(r.render().includes("EVIDENCE of a ROLLBACK"));
    assert.equal(r.toJSON().levels.consistency.evidence.length, r.conflicts.length);
    assert.deepEqual(store.get(notary.vkey), before, "nothing is remembered");
  });

  test("a proof that does not verify, a checkpoint the log key did not sign, a log that is down", async () => {
    const c = await call("d", { i: 0 });
    await call("d", { i: 1 });
    // The log's /checkpoint is dual-signed at most once a second, so it may lag the receipts
    // for a moment: wait until it is newer than c's, so that a bad proof means a fork.
    const cSize = parseCheckpointText(parseNote(checkpointOf(c)).text).size;
    for (let i = 0; i < 100; i++) {
      const served = parseCheckpointText(parseNote(await (await fetch(notary.url + "/checkpoint")).text()).text);
      if (served.size > cSize) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    mode = { proofs: { status: 200, body: (u) => ({ old: Number(u.searchParams.get("old")), new: Number(u.searchParams.get("new")), proof: ["A".repeat(43) + "="] }) } };
    const bad = await verifyToolCall(c, { trust, online: true, logUrl: proxyUrl });
    assert.equal(bad.levels.consistency.status, "failed");
    assert.equal(bad.conflicts[0].kind, "fork");
    mode = { proofs: { status: 200, body: () => ({ old: 1, new: 2, proof: "x" }) } };
    assert.equal((await verifyToolCall(c, { trust, online: true, logUrl: proxyUrl })).levels.consistency.status, "failed");
    const forger = new Signer(notary.origin);
    mode = { checkpoint: { body: dec.decode(signedCheckpoint(forger, 1, new Uint8Array(32))) } };
    const unsigned = await verifyToolCall(c, { trust, online: true, logUrl: proxyUrl });
    assert.equal(unsigned.levels.consistency.status, "failed");
    assert.match(unsigned.levels.consistency.reason, /does not verify under the trusted log key/);
    mode = { checkpoint: { status: 503, body: "busy" } };
    const down = await verifyToolCall(c, { trust, online: true, logUrl: proxyUrl });
    assert.ok(down.valid, down.render());
    assert.equal(down.levels.consistency.status, "skipped");
    assert.match(down.levels.consistency.reason, /could not be fetched/);
    mode = { checkpoint: { status: 404, body: "{}" } };
    assert.equal((await verifyToolCall(c, { trust, online: true, logUrl: proxyUrl })).levels.consistency.status, "failed", "a 4xx to /checkpoint is evidence");
    mode = {};
  });

  test("a receipt whose own proof lacks the witness quorum is checked again with the current proof", async () => {
    const c = await call("e", { i: 0 });
    const w = new Cosigner("witness.example");
    const receipt = c.result._meta[META_KEY].receipt;
    const bundle = decodeProofBundle(receipt.proof);
    const text = parseNote(bundle.checkpoint).text;
    const cosigned = { ...receipt, proof: receipt.proof.replace(/\n$/, "") + "\n" + w.line(text) + "\n" };
    mode = { receipt: cosigned };
    const saved = structuredClone(c);
    saved.result._meta[META_KEY].receipt_url = proxyUrl + "/receipt";
    const wtrust = makeTrust({ jwks: notary.jwks, logKeys: [notary.vkey], witnesses: [w.vkey] });
    const offline = await verifyToolCall(saved, { trust: wtrust });
    assert.equal(offline.levels.witnesses.status, "failed");
    const online = await verifyToolCall(saved, { trust: wtrust, online: true });
    assert.ok(online.valid, online.render());
    assert.ok(online.notes.some((n) => n.includes("lacked the witness quorum")));
    mode = {};
  });
});

test("the reconciler's rules (as notary.verifier.state)", () => {
  const log = new Signer("example.com/log");
  const seen = (label, size, root) => {
    const note = signedCheckpoint(log, size, new Uint8Array(32).fill(root));
    return new Seen(label, parseCheckpointText(parseNote(note).text), note);
  };
  const same = new Reconciler(seen("stored", 3, 1), seen("receipt", 3, 1), null).finish();
  assert.deepEqual([same.conflicts.length, same.newest], [0, null]);
  assert.deepEqual(new Reconciler(seen("stored", 3, 1), seen("receipt", 3, 2), null).finish().conflicts.map((c) => c.kind), ["fork"]);
  const lagging = new Reconciler(seen("stored", 3, 1), seen("receipt", 3, 1), seen("latest", 2, 2));
  assert.deepEqual(lagging.proofsNeeded(), [[2n, 3n]]);
  assert.deepEqual(new Set(lagging.finish(new Map([["2 3", { problem: "HTTP 404", refused: true }]])).conflicts.map((c) => c.kind)), new Set(["rollback"]));
  const unreachable = new Reconciler(seen("stored", 3, 1), seen("receipt", 3, 1), seen("latest", 2, 2)).finish(new Map([["2 3", { problem: "ECONNREFUSED" }]]));
  assert.ok(unreachable.conflicts.length === 0 && unreachable.unchecked.length === 2, "both pairs with the latest are left unchecked");
  assert.notEqual(new Reconciler(null, seen("receipt", 2, 1), null).finish().newest, null, "first sight is remembered");
  const needs = new Reconciler(seen("stored", 2, 1), seen("receipt", 4, 2), null);
  assert.deepEqual(needs.proofsNeeded(), [[2n, 4n]]);
  const res = needs.finish();
  assert.ok(res.unchecked.length === 1 && res.newest === null);
});

test("stores: a corrupt entry is a StateError, web storage keeps the state file's format", async () => {
  const c = await call("f", { i: 0 });
  await assert.rejects(verifyToolCall(c, { trust, store: new MemoryStore({ [notary.origin]: { size: -1, root: "", checkpoint: "" } }) }), StateError);
  await assert.rejects(verifyToolCall(c, { trust, store: { get() { throw new Error("disk on fire"); }, set() {} } }), /cannot read the verifier state: disk on fire/);
  const items = new Map();
  const storage = { getItem: (k) => items.get(k) ?? null, setItem: (k, v) => items.set(k, v) };
  const store = new WebStorageStore(storage);
  assert.ok((await verifyToolCall(c, { trust, store })).valid);
  const doc = JSON.parse(items.get("mcp-notary/verifier-state"));
  assert.equal(doc.version, 1);
  assert.equal(doc.logs[notary.vkey].checkpoint, checkpointOf(c));
  const again = await verifyToolCall(c, { trust, store });
  assert.equal(again.levels.consistency.status, "passed");
  assert.equal(again.levels.consistency.required, true);
  items.set("mcp-notary/verifier-state", "{broken");
  await assert.rejects(verifyToolCall(c, { trust, store }), StateError);
});

test("hostile inputs: a report or an input error, never anything else", async () => {
  const c = await call("g", { text: "x", n: [1, 2, { k: null }] });
  const doc = JSON.parse(JSON.stringify(c));
  const values = [null, true, 0, -1, 1.5, 2 ** 53, "", "x", "tc_AAAAAAAAAAAAAAAAAAAAAA", [], {}, [null], { a: 1 }, "\ud800", "A".repeat(300), NaN];
  const paths = [];
  const walk = (v, p) => {
    paths.push(p);
    if (v && typeof v === "object") for (const k of Object.keys(v)) walk(v[k], [...p, k]);
  };
  walk(doc, []);
  let reports = 0;
  let inputErrors = 0;
  let seed = 7;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  for (let i = 0; i < 600; i++) {
    const mutated = structuredClone(doc);
    for (let j = 0; j <= rand(3); j++) {
      const p = paths[1 + rand(paths.length - 1)];
      let parent = mutated;
      for (const k of p.slice(0, -1)) parent = parent?.[k];
      if (parent === null || typeof parent !== "object") continue;
      if (rand(4) === 0) delete parent[p.at(-1)];
      else parent[p.at(-1)] = structuredClone(values[rand(values.length)]);
    }
    try {
      const r = await verifyToolCall(mutated, { trust, store: new MemoryStore() });
      assert.ok(["passed", "failed", "skipped"].includes(r.levels.record.status));
      reports++;
    } catch (e) {
      assert.ok(e instanceof VerifierInputError, `${e?.stack}`);
      inputErrors++;
    }
  }
  assert.ok(reports > 100 && inputErrors > 50, `${reports} reports, ${inputErrors} input errors`);
  // text: truncated, bloated, deep
  const text = JSON.stringify(doc);
  for (const t of [text.slice(0, text.length / 2), text + "x", "[".repeat(100000), `{"a":${"[".repeat(600)}`, "\u0000", ""]) {
    await assert.rejects(verifyToolCall(t, { trust }), VerifierInputError);
  }
  await assert.rejects(verifyReceipt("{}", "[", { trust }), VerifierInputError);
  const bad = await verifyReceipt({ x: 1 }, null, { trust });
  assert.equal(bad.levels.signature.status, "failed");
  assert.equal(bad.levels.witnesses.reason, "the receipt is malformed");
});
