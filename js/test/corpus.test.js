// Cross-language agreement: every case of the corpus the Python suite generates (valid receipts
// and saved calls, Python SDK results, each tamper case, witness and policy cases, the
// verifier's memory, JCS traps) gives here exactly the verdict per level, the validity and the
// call_sha256 recorded there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadCases, loadIndex } from "./support/corpus.js";
import { MAX_JSON_BYTES, MAX_JSON_DEPTH } from "../src/json.js";
import { MAX_ANSWER_DEPTH, MAX_RESPONSE_BYTES } from "../src/fetcher.js";
import { runCase } from "../src/corpus.js";
import { MemoryStore, makeTrust, setEd25519Backend, verifyToolCall } from "../src/verify.js";
import { nodeEd25519 } from "../src/node/ed25519-node.js";

const cases = loadCases();

test("the corpus holds every kind of case", () => {
  const names = cases.map((c) => c.name);
  for (const prefix of ["valid-", "python-sdk-auto-", "python-sdk-legacy-", "tamper-receipt-", "tamper-record-", "input-", "trust-", "witness-", "policy-", "state-", "jcs-refuse-", "jcs-", "hostile-", "ed25519-", "cose-"]) {
    assert.ok(names.some((n) => n.startsWith(prefix)), `no case named ${prefix}*`);
  }
  assert.ok(cases.length >= 150, `${cases.length} cases`);
});

test("the JSON parser's bounds are Python's (one depth bound, one size bound)", () => {
  const { limits } = loadIndex();
  assert.equal(MAX_JSON_DEPTH, limits.json_depth);
  assert.equal(MAX_JSON_BYTES, limits.json_bytes);
  assert.equal(MAX_ANSWER_DEPTH, limits.answer_depth, "a JSON answer from the network: one depth bound too");
  assert.equal(MAX_RESPONSE_BYTES, limits.answer_bytes);
});

for (const backend of ["auto", "noble", nodeEd25519]) {
  test(`every case agrees with Python (Ed25519 backend ${backend.name ?? backend})`, async () => {
    setEd25519Backend(backend);
    try {
      const mismatches = [];
      for (const { name, case: c } of cases) {
        if (backend !== "auto" && !["witness-", "tamper-receipt-", "valid-", "ed25519-", "cose-"].some((p) => name.startsWith(p))) continue;
        const { ok, expected, got } = await runCase(c);
        if (!ok) mismatches.push(`${name}:\n  expected ${JSON.stringify(expected)}\n  got      ${JSON.stringify(got)}`);
      }
      assert.equal(mismatches.length, 0, mismatches.join("\n"));
    } finally {
      setEd25519Backend("auto");
    }
  });
}

test("a checkpoint whose origin starts with U+FEFF is remembered as Python remembers it", async () => {
  const byName = new Map(cases.map(({ name, case: c }) => [name, c]));
  const remembered = byName.get("pq-bom-origin-remembered");
  for (const name of ["pq-bom-origin-ml-dsa-key", "pq-bom-origin-ed25519-key"]) {
    const c = byName.get(name);
    const trust = makeTrust({ jwks: c.trust.jwks, logKeys: c.trust.log_keys });
    const store = new MemoryStore();
    for (const run of [1, 2]) {
      const report = await verifyToolCall(c.input.call, { trust, store, receipt: c.input.receipt });
      assert.equal(report.valid, true, `${name}, run ${run}: ${JSON.stringify(report.levels)}`);
    }
    const [vkey] = c.trust.log_keys;
    assert.equal(store.get(vkey).checkpoint, Object.values(remembered.state)[0].checkpoint, name);
  }
});
