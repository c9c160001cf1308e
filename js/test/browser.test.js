// The verifier bundled with esbuild for the browser (the package's browser entry point, no Node
// API) and run in headless Chromium (Debian's `chromium`, through playwright-core) over the same
// corpus as the Node tests: the same verdict on every case, with WebCrypto and with @noble/curves.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync } from "node:fs";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import { loadCases } from "./support/corpus.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
let browser;
let server;
let origin;
let bundle;
const offHost = [];

before(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium (./scripts/test does, as root) or set CHROMIUM_PATH`);
  }
  const out = await build({
    entryPoints: [new URL("./browser/entry.js", import.meta.url).pathname], bundle: true, write: false,
    platform: "browser", format: "iife", target: "es2022", logLevel: "silent",
  });
  bundle = out.outputFiles[0].text;
  server = createServer((req, res) => {
    if (req.url === "/bundle.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(bundle);
    } else {
      res.writeHead(200, { "content-type": "text/html" });
      res.end('<!doctype html><meta charset="utf-8"><title>mcp-notary</title><script src="/bundle.js"></script>');
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
      "--disable-sync", "--no-first-run", "--disable-features=Translate,OptimizationHints,MediaRouter", "--metrics-recording-only"],
  });
});

after(async () => {
  await browser?.close();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve()));
});

test("the browser entry point bundles without any Node module or OpenTelemetry", async () => {
  for (const entry of ["../src/index.js", "../src/verify.js"]) {
    const r = await build({ entryPoints: [new URL(entry, import.meta.url).pathname], bundle: true, write: false, platform: "browser", format: "esm", logLevel: "silent", metafile: true });
    const inputs = Object.keys(r.metafile.inputs);
    assert.ok(inputs.every((p) => !p.startsWith("node:") && !p.includes("/src/node/")), inputs.join(", "));
    // nothing of OpenTelemetry either (#tracing is tracing-off.js for browsers)
    assert.ok(inputs.every((p) => !p.includes("@opentelemetry/") && !p.endsWith("src/tracing.js")), inputs.join(", "));
    assert.ok(!/\bfrom\s*["']node:/.test(r.outputFiles[0].text));
  }
});

test("headless Chromium agrees with Python on every corpus case", async () => {
  const cases = loadCases().map(({ name, text }) => [name, text]);
  const page = await browser.newPage();
  await page.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.hostname !== "127.0.0.1") {
      offHost.push(url.href);
      return route.abort();
    }
    return route.continue();
  });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(origin + "/");
  assert.equal(await page.evaluate(() => typeof globalThis.notaryTest), "object", errors.join("\n"));
  assert.equal(await page.evaluate(() => window.isSecureContext), true);
  for (const backend of ["auto", "noble"]) {
    const subset = backend === "noble" ? cases.filter(([n]) => /^(valid|witness|tamper-receipt|policy|state|ed25519)-/.test(n)) : cases;
    const { used, results } = await page.evaluate(([texts, b]) => globalThis.notaryTest.runAll(texts, b), [subset, backend]);
    assert.equal(used, backend === "auto" ? "webcrypto" : "noble");
    assert.equal(results.length, subset.length);
    const bad = results.filter((r) => !r.ok);
    assert.equal(bad.length, 0, bad.map((r) => `${r.name}: expected ${JSON.stringify(r.expected)} got ${JSON.stringify(r.got)}`).join("\n"));
  }
  assert.deepEqual(errors, []);
  assert.deepEqual(offHost, [], "the page made requests off 127.0.0.1");
  await page.close();
});
