// /v1/tool-calls has one home in the package (src/paths.js, as notary/core/paths.py in Python):
// no other module spells it in code (comments may name a route for the reader).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { TOOL_CALLS_PATH, VERIFY_PATH, receiptPath } from "../src/paths.js";

const SRC = fileURLToPath(new URL("../src/", import.meta.url));

const modules = (dir) => readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
  e.isDirectory() ? modules(join(dir, e.name)) : e.name.endsWith(".js") ? [join(dir, e.name)] : []);

test("no module but src/paths.js spells the path in code", () => {
  const found = [];
  for (const file of modules(SRC)) {
    if (file === join(SRC, "paths.js")) continue;
    readFileSync(file, "utf8").split("\n").forEach((line, i) => {
      const code = line.replace(/^\s*\/\/.*$/, "").replace(/\s\/\/\s.*$/, "");
      if (code.includes("/v1/tool-calls")) found.push(`${file.slice(SRC.length)}:${i + 1}`);
    });
  }
  assert.deepEqual(found, []);
});

test("the paths are the notary's, and an id cannot name another path", () => {
  assert.equal(TOOL_CALLS_PATH, "/v1/tool-calls");
  assert.equal(VERIFY_PATH, "/v1/tool-calls/verify");
  assert.equal(receiptPath("tc_S0ng9Vz-5gkPPiNuTYmVQA"), "/v1/tool-calls/tc_S0ng9Vz-5gkPPiNuTYmVQA");
  assert.equal(receiptPath("../verify?x"), "/v1/tool-calls/..%2Fverify%3Fx");
});
