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
import { setEd25519Backend } from "../src/verify.js";
import { nodeEd25519 } from "../src/node/ed25519-node.js";

const cases = loadCases();

test("the corpus holds every kind of case", () => {
  const names = cases.map((c) => c.name);
  for (const prefix of ["valid-", "python-sdk-auto-", "python-sdk-legacy-", "tamper-receipt-", "tamper-record-", "input-", "trust-", "witness-", "policy-", "state-", "jcs-refuse-", "jcs-", "hostile-", "ed25519-"]) {
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
        if (backend !== "auto" && !["witness-", "tamper-receipt-", "valid-", "ed25519-"].some((p) => name.startsWith(p))) continue;
        const { ok, expected, got } = await runCase(c);
        if (!ok) mismatches.push(`${name}:\n  expected ${JSON.stringify(expected)}\n  got      ${JSON.stringify(got)}`);
      }
      assert.equal(mismatches.length, 0, mismatches.join("\n"));
    } finally {
      setEd25519Backend("auto");
    }
  });
}
