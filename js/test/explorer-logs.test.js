// The explorer of a notary that rolled to a new log (docs/lifecycle.md), in headless Chromium
// against a real `notary serve` on 127.0.0.1: the overview lists both logs with their keys, a
// receipt of the frozen log verifies in the page against that log's key (level 5 from the
// frozen log's own checkpoint), and search results say which log each call is in.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { callSha256, newSalt } from "../src/verify.js";
import { notaryCli, startNotary } from "./support/notary.js";
import { CHROMIUM } from "./support/explorer.js";
import { Signer } from "./helpers.js";

let notary;
let browser;
let ledger;
const calls = {};

async function notarize(server, tool, args, text) {
  const record = { server, tool, arguments: args, result: { content: [{ type: "text", text }] }, salt: newSalt() };
  const r = await fetch(notary.url + "/v1/tool-calls", {
    method: "POST", headers: { authorization: `Bearer ${notary.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ server, tool, call_sha256: callSha256(record) }),
  });
  assert.equal(r.status, 201, await r.clone().text());
  return { record, receipt: await r.json() };
}

before(async () => {
  notary = await startNotary({ origin: "explorer-logs.test/log" });
  calls.frozen = await notarize("weather", "get_forecast", { city: "Paris" }, "18°C");
  await notarize("weather", "get_forecast", { city: "Lyon" }, "21°C");
  const rolled = notaryCli("log", "roll", "--data", notary.data);
  assert.equal(rolled.status, 0, rolled.stderr);
  calls.active = await notarize("files", "read_file", { path: "/etc/motd" }, "Welcome");
  ledger = await (await fetch(notary.url + "/v1/ledger")).json();
  assert.deepEqual(ledger.logs.map((l) => l.state), ["frozen", "active"]);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
});

after(async () => {
  await browser?.close();
  await notary?.cleanup();
});

async function openPage() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  return { page, context, errors };
}

async function levels(page) {
  const verdict = page.locator('[data-testid="verdict"][data-valid]');
  await verdict.waitFor({ timeout: 30000 });
  const out = { valid: await verdict.getAttribute("data-valid") };
  for (const name of ["record", "signature", "inclusion", "witnesses", "consistency"]) {
    out[name] = await verdict.locator(`[data-level="${name}"]`).getAttribute("data-verdict");
  }
  return out;
}

test("the overview lists both logs: origin, state, size, key fingerprints, time window", async () => {
  const { page, context, errors } = await openPage();
  await page.goto(notary.url + "/explorer/");
  const rows = page.locator('[data-testid="logs"] tbody tr');
  await rows.first().waitFor();
  assert.equal(await rows.count(), 2);
  for (const [i, log] of ledger.logs.entries()) {
    const row = rows.nth(i);
    assert.equal(await row.getAttribute("data-origin"), log.origin);
    assert.equal(await row.getAttribute("data-state"), log.state);
    const text = await row.innerText();
    assert.ok(text.includes(String(log.size)), text);
    assert.match(text, /SHA-256 [0-9a-f]{4} /);
    assert.ok(text.includes(log.state === "active" ? "now" : log.frozen_at.slice(0, 10)), text);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test("a receipt of the frozen log verifies in the browser against that log's key", async () => {
  const { page, context, errors } = await openPage();
  await page.goto(`${notary.url}/explorer/tool-calls/${calls.frozen.receipt.id}`);
  assert.equal(await page.getByTestId("receipt-log").innerText(), ledger.logs[0].origin);
  const first = await levels(page);
  assert.deepEqual({ ...first, valid: undefined, record: undefined },
    { valid: undefined, record: undefined, signature: "passed", inclusion: "passed", witnesses: "skipped", consistency: "passed" });
  assert.ok((await page.locator(".trust").innerText()).includes(ledger.logs[0].origin));
  // With its record: valid at every required level.
  await page.fill("#record-input", JSON.stringify(calls.frozen.record));
  await page.getByRole("button", { name: "Verify with this record" }).click();
  await page.waitForFunction(() => document.querySelector('[data-level="record"]')?.getAttribute("data-verdict") === "passed");
  assert.equal((await levels(page)).valid, "true");
  // Level 5 remembered the frozen log's final checkpoint under its own key.
  const state = JSON.parse(await page.evaluate(() => localStorage.getItem("mcp-notary.explorer.checkpoints.v1")));
  assert.equal(BigInt(state.logs[ledger.logs[0].vkeys[0]].size), BigInt(ledger.logs[0].size));
  assert.deepEqual(errors, []);
  await context.close();
});

test("a pinned wrong key for the frozen log's origin fails its inclusion; the trust page lists that log", async () => {
  const { page, context } = await openPage();
  await page.goto(notary.url + "/explorer/trust");
  await page.locator(`[data-pin="${ledger.logs[0].origin}"]`).waitFor();
  const wrong = new Signer(ledger.logs[0].origin).vkey; // another key for the frozen log's origin
  await page.getByLabel("Pin a log key you got elsewhere").fill(wrong);
  await page.getByRole("button", { name: "Pin", exact: true }).click();
  await page.locator(`[data-unpin="${ledger.logs[0].origin}"]`).waitFor();
  await page.goto(`${notary.url}/explorer/tool-calls/${calls.frozen.receipt.id}`);
  assert.equal((await levels(page)).inclusion, "failed");
  // The active log's receipt is unaffected by that pin.
  await page.goto(`${notary.url}/explorer/tool-calls/${calls.active.receipt.id}`);
  assert.equal((await levels(page)).inclusion, "passed");
  await context.close();
});

test("search results say which log each call is in", async () => {
  const { page, context, errors } = await openPage();
  await page.goto(notary.url + "/explorer/search");
  await page.locator("table.results").waitFor();
  const logsShown = await page.locator("table.results td[data-log]").evaluateAll((tds) => tds.map((td) => td.getAttribute("data-log")));
  assert.deepEqual(logsShown, [ledger.logs[1].origin, ledger.logs[0].origin, ledger.logs[0].origin]);
  assert.deepEqual(errors, []);
  await context.close();
});
