// The README's examples are valid code and name only what the package exports.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { transform } from "esbuild";
import * as root from "../src/index.js";
import * as verifyOnly from "../src/verify.js";
import * as node from "../src/node/index.js";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
const blocks = [...readme.matchAll(/```(js|ts|sh)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1], code: m[2] }));

test("every js and ts example parses, and imports only exported names", async () => {
  assert.ok(blocks.filter((b) => b.lang !== "sh").length >= 3);
  for (const { lang, code } of blocks.filter((b) => b.lang !== "sh")) {
    await transform(code, { loader: lang, format: "esm" }); // throws on a syntax error
    for (const m of code.matchAll(/import \{([^}]+)\} from "(mcp-notary[^"]*)"/g)) {
      const mod = { "mcp-notary": root, "mcp-notary/verify": verifyOnly, "mcp-notary/node": node }[m[2]];
      assert.ok(mod, m[2]);
      for (const name of m[1].split(",").map((n) => n.trim()).filter(Boolean)) assert.ok(name in mod, `${m[2]} exports ${name}`);
    }
  }
});

test("the building blocks listed are exported", () => {
  const section = readme.split("## Building blocks")[1].split("##")[0];
  const names = [...section.matchAll(/`([A-Za-z0-9]+)(?:\([^`]*\))?`/g)].map((m) => m[1]);
  assert.ok(names.length > 20);
  for (const n of names) assert.ok(n in root, `mcp-notary exports ${n}`);
});
