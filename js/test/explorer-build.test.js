// The explorer's built assets are committed (so the notary runs without Node); they must be
// exactly what a fresh build of js/explorer and js/src gives. Run `npm run build:explorer`
// after changing either.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_OUT, buildExplorer } from "../scripts/build-explorer.mjs";

const committed = () => {
  const out = { "index.html": readFileSync(join(DEFAULT_OUT, "index.html")) };
  for (const name of readdirSync(join(DEFAULT_OUT, "assets"))) out[`assets/${name}`] = readFileSync(join(DEFAULT_OUT, "assets", name));
  return out;
};

test("the committed explorer assets equal a fresh build (run `npm run build:explorer` if not)", async () => {
  const fresh = await buildExplorer();
  const have = committed();
  assert.deepEqual(Object.keys(have).sort(), Object.keys(fresh).sort(), "stale or extra asset files in notary/http/explorer");
  for (const [name, bytes] of Object.entries(fresh)) assert.ok(bytes.equals(have[name]), `${name} differs from a fresh build`);
});

test("the build is deterministic and names assets by their content", async () => {
  const [a, b] = [await buildExplorer(), await buildExplorer()];
  assert.deepEqual(Object.keys(a), Object.keys(b));
  for (const name of Object.keys(a)) assert.ok(a[name].equals(b[name]), name);
  const html = a["index.html"].toString("utf8");
  for (const name of Object.keys(a).filter((n) => n.startsWith("assets/"))) assert.ok(html.includes(`/explorer/${name}`), `index.html references ${name}`);
  assert.doesNotMatch(html, /<script>|<style>|\sstyle=|\son[a-z]+=/i, "no inline script or style (the CSP forbids them)");
  assert.doesNotMatch(html, /https?:\/\//, "no asset from outside the notary");
  const js = a[Object.keys(a).find((n) => n.endsWith(".js"))].toString("utf8");
  assert.doesNotMatch(js, /\beval\(|new Function\(/, "no eval (the CSP forbids it)");
});
