// The explorer in a real browser: headless Chromium against a real `notary serve` (with a real
// witness) on 127.0.0.1. Checks what a person would: the overview renders without a console
// error, a receipt found by id or by digest verifies at every level in the page, a tampered
// saved call fails at exactly the record level without the record ever leaving the browser, and
// a pinned wrong log key makes inclusion fail. Screenshots of the main pages go to a temporary
// directory, or to $NOTARY_SCREENSHOTS (`NOTARY_SCREENSHOTS=docs/screenshots npm test` refreshes
// the README's pictures): a test run never changes tracked files.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { ed25519 } from "@noble/curves/ed25519.js";
import { Ed25519Verifier, META_KEY, callSha256, makeTrust, newSalt, verifyCoseReceipt } from "../src/verify.js";
import { REPO } from "./support/notary.js";
import { CHROMIUM, startStack, witnessed } from "./support/explorer.js";

const SHOTS = process.env.NOTARY_SCREENSHOTS
  ? join(REPO, process.env.NOTARY_SCREENSHOTS)
  : mkdtempSync(join(tmpdir(), "explorer-shots-"));
const LEVELS = ["record", "signature", "inclusion", "witnesses", "consistency"];
let stack;
let browser;
const calls = [];

async function notarize(server, tool, args, text) {
  const record = { server, tool, arguments: args, result: { content: [{ type: "text", text }] }, salt: newSalt() };
  const digest = callSha256(record);
  const r = await fetch(stack.url + "/v1/tool-calls", {
    method: "POST", headers: { authorization: `Bearer ${stack.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ server, tool, call_sha256: digest }),
  });
  assert.equal(r.status, 201, await r.clone().text());
  const receipt = await r.json();
  const meta = { spec: "rs-tool-call/1", id: receipt.id, call_sha256: digest, salt: record.salt,
    receipt_url: `${stack.url}/v1/tool-calls/${receipt.id}`, verify_url: `${stack.url}/v1/tool-calls/verify`, receipt };
  const saved = { server, tool, arguments: args, result: { ...record.result, _meta: { [META_KEY]: meta } } };
  return { record, receipt, saved };
}

/** A page that records every console error and every request (URL, headers, body). */
async function openPage({ viewport = { width: 1280, height: 900 } } = {}) {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const errors = [];
  const requests = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("request", (r) => requests.push({ url: r.url(), method: r.method(), headers: r.headers(), body: r.postDataBuffer() }));
  return { page, context, errors, requests };
}

async function levels(page) {
  const verdict = page.locator('[data-testid="verdict"][data-valid]');
  await verdict.waitFor({ timeout: 30000 });
  const out = {};
  for (const name of LEVELS) out[name] = await verdict.locator(`[data-level="${name}"]`).getAttribute("data-verdict");
  return { valid: await verdict.getAttribute("data-valid"), ...out };
}

before(async () => {
  stack = await startStack();
  calls.push(await notarize("weather", "get_forecast", { city: "Paris" }, "18°C, light rain"));
  calls.push(await notarize("weather", "get_forecast", { city: "Lyon" }, "21°C, sunny"));
  calls.push(await notarize("files", "read_file", { path: "/etc/motd" }, "Welcome"));
  for (let i = 0; i < 5; i++) calls.push(await notarize("search", "web_search", { q: `query ${i}` }, `result ${i}`));
  await witnessed(stack.url, calls.length);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await stack?.cleanup();
});

test("/ redirects to the overview, which renders the log with no console error", async () => {
  const { page, context, errors } = await openPage();
  const resp = await page.goto(stack.url + "/");
  assert.equal(new URL(page.url()).pathname, "/explorer/");
  assert.match(resp.headers()["content-security-policy"], /script-src 'self'/);
  await page.getByRole("heading", { name: "The log" }).waitFor();
  assert.equal(await page.locator('[data-testid="log-size"]').textContent(), `${calls.length} entries`);
  const body = await page.locator("main").textContent();
  assert.ok(body.includes(stack.origin) && body.includes(stack.vkey), "origin and log key shown");
  assert.ok(body.includes("witness.test/w1"), "the witness is listed");
  assert.match(await page.locator('[data-testid="checkpoint-text"]').textContent(), new RegExp(`^${stack.origin}\n${calls.length}\n`));
  assert.ok((await page.locator("svg.chart path.line").count()) === 1, "the growth chart is drawn");
  assert.ok((await page.locator("svg.chart rect.bar").count()) >= 1, "entries per minute are drawn");
  assert.equal(await page.getByText("✔ verified here").count() >= 2, true, "log signature and cosignature verified in the page");
  // The checkpoint is dual-signed: each signature's algorithm is shown, and the log's ML-DSA-44
  // line (its key from /v1/ledger vkeys) verifies in the page with @noble/post-quantum.
  const rows = await page.getByRole("region", { name: "checkpoint signatures" }).locator("tbody tr").allTextContents();
  assert.ok(rows.some((r) => r.startsWith("log") && r.includes("ML-DSA-44") && r.includes("✔ verified here")), rows.join(" | "));
  assert.ok(rows.some((r) => r.startsWith("log") && /Ed25519(?! \()/.test(r) && r.includes("✔ verified here")), rows.join(" | "));
  assert.ok(body.includes("Post-quantum log key (ML-DSA-44)"), "the ML-DSA-44 log key is shown");
  await page.screenshot({ path: join(SHOTS, "overview.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("a receipt found by id verifies in the page, and with its record every level passes", async () => {
  const { page, context, errors } = await openPage();
  const { receipt, record } = calls[0];
  await page.goto(stack.url + "/explorer/");
  await page.getByLabel("Find a tool call").fill(receipt.id);
  await page.keyboard.press("Enter");
  await page.waitForURL(`**/explorer/tool-calls/${receipt.id}`);
  // Without the record the call is not proven (level 1 is required), though the receipt is.
  assert.deepEqual(await levels(page), { valid: "false", record: "skipped", signature: "passed", inclusion: "passed", witnesses: "passed", consistency: "passed" });
  await page.getByLabel("Call record or saved tool call (for level 1)").fill(JSON.stringify(record));
  await page.getByRole("button", { name: "Verify with this record" }).click();
  await page.locator('[data-level="record"][data-verdict="passed"]').waitFor();
  assert.deepEqual(await levels(page), { valid: "true", record: "passed", signature: "passed", inclusion: "passed", witnesses: "passed", consistency: "passed" });
  const text = await page.locator(".trust").textContent();
  assert.ok(text.includes(stack.vkey) && text.includes("/v1/ledger"), "the page says which log key it trusts and where it came from");
  await page.screenshot({ path: join(SHOTS, "receipt.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("a receipt found by its call_sha256 verifies at every level", async () => {
  const { page, context, errors } = await openPage();
  const { receipt, saved } = calls[1];
  await page.goto(stack.url + "/explorer/search");
  await page.getByLabel("Find a tool call").fill(receipt.call_sha256);
  await page.getByRole("button", { name: "Find" }).click();
  await page.waitForURL(`**/explorer/tool-calls/${receipt.id}`);
  await page.getByLabel("Call record or saved tool call (for level 1)").fill(JSON.stringify(saved));
  await page.getByRole("button", { name: "Verify with this record" }).click();
  await page.locator('[data-level="record"][data-verdict="passed"]').waitFor();
  assert.deepEqual(await levels(page), { valid: "true", record: "passed", signature: "passed", inclusion: "passed", witnesses: "passed", consistency: "passed" });
  assert.deepEqual(errors, []);
  await context.close();
});

test("search by server and tool lists newest first and pages with a cursor; deep links work", async () => {
  const { page, context, errors } = await openPage();
  await page.goto(`${stack.url}/explorer/servers/search?limit=2`);
  await page.getByRole("heading", { name: /Tool calls of/ }).waitFor();
  const ids = async () => page.locator("table.results tbody tr td:nth-child(5)").allTextContents();
  const first = await ids();
  const expected = calls.filter((c) => c.receipt.server === "search").map((c) => c.receipt.id).reverse();
  assert.deepEqual(first, expected, "newest first (the page asks for 20, more than there are)");
  await page.goto(`${stack.url}/explorer/servers/weather?tool=get_forecast`);
  await page.locator("table.results").waitFor();
  assert.deepEqual(await ids(), [calls[1].receipt.id, calls[0].receipt.id]);
  await page.screenshot({ path: join(SHOTS, "search.png"), fullPage: true });
  // Paging: the API's cursor, followed by the page's "Older" link.
  const r = await (await fetch(`${stack.url}/v1/tool-calls?server=search&limit=2`)).json();
  await page.goto(`${stack.url}/explorer/search?server=search&cursor=${encodeURIComponent(r.next_cursor)}`);
  await page.locator("table.results").waitFor();
  assert.deepEqual(await ids(), expected.slice(2));
  // An entry deep link shows the entry and its receipt, verified.
  await page.goto(`${stack.url}/explorer/entries/${calls[2].receipt.ledger.index}`);
  assert.equal((await levels(page)).inclusion, "passed");
  assert.ok((await page.locator("main").textContent()).includes(calls[2].receipt.id));
  assert.deepEqual(errors, []);
  await context.close();
});

test("a tampered saved call pasted into the panel fails at exactly the record level; no request carries it", async () => {
  const { page, context, errors, requests } = await openPage();
  const tampered = structuredClone(calls[2].saved);
  tampered.arguments.path = "/etc/shadow-TAMPERED-MARKER";
  const text = JSON.stringify(tampered, null, 2);
  await page.goto(stack.url + "/explorer/verify");
  await page.getByLabel("Saved tool call, or call record").fill(text);
  await page.getByRole("button", { name: "Verify in this browser" }).click();
  assert.deepEqual(await levels(page), { valid: "false", record: "failed", signature: "passed", inclusion: "passed", witnesses: "passed", consistency: "passed" });
  await page.screenshot({ path: join(SHOTS, "verify-tampered.png"), fullPage: true });
  // The genuine call, pasted the same way, passes.
  await page.getByLabel("Saved tool call, or call record").fill(JSON.stringify(calls[2].saved));
  await page.getByRole("button", { name: "Verify in this browser" }).click();
  await page.locator('[data-testid="verdict"][data-valid="true"]').waitFor();
  assert.equal((await levels(page)).record, "passed");
  const secrets = ["TAMPERED-MARKER", calls[2].record.salt, "/etc/motd", "Welcome"];
  assert.ok(requests.length > 3, "the page did fetch (keys, checkpoints, proofs)");
  for (const r of requests) {
    const blob = [r.url, JSON.stringify(r.headers), r.body ? r.body.toString("latin1") : ""].join("\n");
    for (const s of secrets) assert.ok(!blob.includes(s) && !blob.includes(encodeURIComponent(s)), `${r.method} ${r.url} carries ${s}`);
    assert.equal(r.method, "GET", `${r.method} ${r.url}: the panel only reads`);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test("a pinned wrong log key makes inclusion fail; unpinning restores it", async () => {
  const { page, context, errors } = await openPage();
  const wrong = new Ed25519Verifier(stack.origin, ed25519.getPublicKey(ed25519.utils.randomSecretKey())).vkey;
  await page.goto(stack.url + "/explorer/trust");
  await page.getByLabel("Pin a log key you got elsewhere").fill(wrong);
  await page.getByRole("button", { name: "Pin", exact: true }).click();
  await page.getByText(`Pinned a log key for ${stack.origin}.`).waitFor();
  await page.screenshot({ path: join(SHOTS, "trust.png"), fullPage: true });
  await page.goto(`${stack.url}/explorer/tool-calls/${calls[0].receipt.id}`);
  const got = await levels(page);
  assert.equal(got.valid, "false");
  assert.equal(got.inclusion, "failed");
  assert.equal(got.signature, "passed");
  assert.ok((await page.getByRole("alert").allTextContents()).some((t) => t.includes("differs from the one this notary serves")));
  await page.goto(stack.url + "/explorer/trust");
  await page.locator(`[data-unpin="${stack.origin}"]`).click();
  await page.getByText(`Unpinned the key for ${stack.origin}.`).waitFor();
  await page.goto(`${stack.url}/explorer/tool-calls/${calls[0].receipt.id}`);
  assert.equal((await levels(page)).inclusion, "passed");
  assert.deepEqual(errors, []);
  await context.close();
});

test("pinned to the log's ML-DSA-44 key alone, a receipt verifies in the page against the dual-signed checkpoint", async () => {
  const { page, context, errors } = await openPage();
  await page.goto(stack.url + "/explorer/trust");
  await page.getByRole("button", { name: "Pin its post-quantum (ML-DSA-44) key instead" }).click();
  await page.getByText("Pinned the served ML-DSA-44 log key").waitFor();
  assert.ok((await page.locator("main").textContent()).includes("(matches)"), "an ML-DSA-44 pin matches the served keys");
  await page.goto(`${stack.url}/explorer/tool-calls/${calls[0].receipt.id}`);
  const got = await levels(page);
  assert.equal(got.inclusion, "passed", JSON.stringify(got));
  assert.equal(got.signature, "passed");
  const text = await page.locator(".trust").textContent();
  assert.ok(text.includes("pinned"), "the page says the log key is the pinned one");
  await page.goto(stack.url + "/explorer/trust");
  await page.locator(`[data-unpin="${stack.origin}"]`).click();
  await page.getByText(`Unpinned the key for ${stack.origin}.`).waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});

test("on a phone-sized screen the overview fits and the receipt page verifies", async () => {
  const { page, context, errors } = await openPage({ viewport: { width: 390, height: 844 } });
  await page.goto(stack.url + "/explorer/");
  await page.getByRole("heading", { name: "The log" }).waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);
  await page.screenshot({ path: join(SHOTS, "overview-phone.png"), fullPage: false });
  await page.goto(`${stack.url}/explorer/tool-calls/${calls[3].receipt.id}`);
  await page.getByLabel("Call record or saved tool call (for level 1)").fill(JSON.stringify(calls[3].record));
  await page.getByRole("button", { name: "Verify with this record" }).click();
  await page.locator('[data-level="record"][data-verdict="passed"]').waitFor();
  assert.equal((await levels(page)).valid, "true");
  await page.screenshot({ path: join(SHOTS, "receipt-phone.png"), fullPage: false });
  assert.deepEqual(errors, []);
  await context.close();
});

test("the explorer is usable by keyboard: skip link, then the find box, then Enter", async () => {
  const { page, context, errors } = await openPage();
  await page.goto(stack.url + "/explorer/");
  await page.getByRole("heading", { name: "The log" }).waitFor();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.textContent), "Skip to content");
  await page.locator("#find-q").focus();
  await page.keyboard.type(String(calls[4].receipt.ledger.index));
  await page.keyboard.press("Enter");
  await page.waitForURL(`**/explorer/entries/${calls[4].receipt.ledger.index}`);
  assert.equal((await levels(page)).inclusion, "passed");
  assert.equal(await page.evaluate(() => document.activeElement.textContent), `Entry #${calls[4].receipt.ledger.index}`, "focus moves to the new page's heading");
  assert.deepEqual(errors, []);
  await context.close();
});

test("a server name with braces has a deep link; a pasted receipt whose origin is named like an Object member is verified, not refused", async () => {
  const { page, context, errors } = await openPage();
  const braced = await notarize("we{ath}er", "get_forecast", { city: "Nice" }, "25°C, sunny");
  const resp = await page.goto(`${stack.url}/explorer/servers/${encodeURIComponent("we{ath}er")}`);
  assert.equal(resp.status(), 200, "the app shell, not a JSON 404");
  await page.getByRole("heading", { name: /Tool calls of/ }).waitFor();
  await page.locator("table.results").waitFor();
  assert.deepEqual(await page.locator("table.results tbody tr td:nth-child(5)").allTextContents(), [braced.receipt.id]);
  // A receipt of a log named "constructor" (here: ours with its origin changed, so the signature
  // fails): the page has no key for that log and says so level by level.
  for (const origin of ["constructor", "__proto__", "toString"]) {
    const receipt = structuredClone(calls[0].receipt);
    receipt.ledger.origin = origin;
    await page.goto(stack.url + "/explorer/verify");
    await page.getByLabel("Saved tool call, or call record").fill(JSON.stringify(calls[0].record));
    await page.getByLabel("Receipt (only with a bare call record)").fill(JSON.stringify(receipt));
    await page.getByRole("button", { name: "Verify in this browser" }).click();
    const got = await levels(page);
    assert.deepEqual([got.valid, got.record, got.signature, got.inclusion], ["false", "passed", "failed", "skipped"], origin);
    assert.equal(await page.getByText("Cannot verify").count(), 0, origin);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

// Issue 32, item 15: one test per defect of the explorer's pages.

test("the Trust page shows no stray `null` when it has no message to show", async () => {
  const { page, context, errors } = await openPage();
  await page.goto(stack.url + "/explorer/trust");
  await page.getByRole("heading", { name: "Trust", exact: true }).waitFor();
  assert.doesNotMatch(await page.locator("main").innerText(), /\bnull\b/);
  assert.deepEqual(errors, []);
  await context.close();
});

test("the overview shows the ML-DSA-44 log key as a fingerprint, and its button copies the whole key", async () => {
  const { page, context, errors } = await openPage();
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: stack.url });
  const ledger = await (await fetch(stack.url + "/v1/ledger")).json();
  const pq = ledger.vkeys.find((k) => k !== ledger.vkey);
  assert.ok(pq.length > 1500, "an ML-DSA-44 verifier key is long");
  await page.goto(stack.url + "/explorer/");
  await page.getByRole("heading", { name: "The log" }).waitFor();
  const field = page.locator("dt", { hasText: "Post-quantum log key (ML-DSA-44)" }).locator("xpath=following-sibling::dd[1]");
  const height = (await field.boundingBox()).height;
  assert.ok(height < 200, `the key's field is ${height}px tall`);
  const [name, keyId] = pq.split("+");
  assert.ok((await field.innerText()).includes(`${name}+${keyId}`), "the key's name and key ID are shown");
  assert.equal(await field.getByText(pq).isVisible(), false, "the whole key is folded away");
  await field.getByRole("button", { name: "Copy the full key" }).click();
  await field.getByText("Copied").waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), pq);
  await field.getByText("Show the full key").click();
  assert.equal(await field.getByText(pq).isVisible(), true, "unfolded, the whole key is shown");
  assert.deepEqual(errors, []);
  await context.close();
});

test("at 1280 px the checkpoint's signatures table fits its column", async () => {
  const { page, context, errors } = await openPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(stack.url + "/explorer/");
  const region = page.getByRole("region", { name: "checkpoint signatures" });
  await region.waitFor();
  const [table, room] = await region.evaluate((w) => [w.querySelector("table").scrollWidth, w.clientWidth]);
  assert.ok(table <= room, `the table is ${table}px wide in a ${room}px column`);
  assert.deepEqual(errors, []);
  await context.close();
});

test("after \"Verify with this record\" the verdict is scrolled into view", async () => {
  const { page, context, errors } = await openPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${stack.url}/explorer/tool-calls/${calls[5].receipt.id}`);
  await page.locator('[data-testid="verdict"]').waitFor();
  await page.getByLabel("Call record or saved tool call (for level 1)").fill(JSON.stringify(calls[5].record));
  await page.getByRole("button", { name: "Verify with this record" }).click();
  await page.locator('[data-level="record"][data-verdict="passed"]').waitFor();
  const box = await page.locator('[data-testid="verdict"]').evaluate((v) => {
    const r = v.getBoundingClientRect();
    return { top: r.top, bottom: r.bottom, height: innerHeight };
  });
  assert.ok(box.top >= 0 && box.bottom <= box.height, `the verdict spans ${box.top}..${box.bottom}px of a ${box.height}px window`);
  assert.deepEqual(errors, []);
  await context.close();
});

test("/explorer/verify shows no empty box before the first verification", async () => {
  const { page, context, errors } = await openPage();
  await page.goto(stack.url + "/explorer/verify");
  await page.getByRole("heading", { name: "Verify a tool call" }).waitFor();
  for (const card of await page.locator("main .card").all()) {
    if (await card.isVisible()) assert.notEqual((await card.innerText()).trim(), "", "a visible card with nothing in it");
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test("a receipt id typed in the search page's server box, or sent as ?q=, opens the receipt", async () => {
  const { page, context, errors } = await openPage();
  const { id } = calls[6].receipt;
  await page.goto(stack.url + "/explorer/search");
  await page.getByLabel("Server").fill(id);
  await page.getByLabel("Server").press("Enter");
  await page.waitForURL(`**/explorer/tool-calls/${id}`);
  assert.equal(await page.getByTestId("receipt-id").textContent(), id);
  await page.goto(`${stack.url}/explorer/search?q=${id}`);
  await page.waitForURL(`**/explorer/tool-calls/${id}`);
  assert.equal(await page.getByTestId("receipt-id").textContent(), id);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a receipt's page offers its COSE receipt for download: the notary's bytes, as application/scitt-receipt+cose", async () => {
  const { page, context, errors } = await openPage();
  const { receipt } = calls[3];
  await page.goto(`${stack.url}/explorer/tool-calls/${receipt.id}`);
  const link = page.getByRole("link", { name: "Download (RFC 9942, for SCITT tools)" });
  assert.equal(await link.getAttribute("href"), `/v1/tool-calls/${receipt.id}/receipt.cose`);
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  assert.equal(download.suggestedFilename(), `${receipt.id}.cose`);
  const path = await download.path();
  const bytes = new Uint8Array(readFileSync(path));
  // what the link serves, with its media type (fetched in the page: same origin, same cookies)
  const served = await page.evaluate(async (href) => {
    const r = await fetch(href);
    return { type: r.headers.get("content-type"), bytes: [...new Uint8Array(await r.arrayBuffer())] };
  }, await link.getAttribute("href"));
  assert.equal(served.type, "application/scitt-receipt+cose");
  assert.deepEqual([...bytes], served.bytes);
  // and they are this call's COSE receipt, signed by the log
  const trust = makeTrust({ logKeys: [stack.vkey] });
  const verified = await verifyCoseReceipt(receipt, bytes, trust);
  assert.equal(verified.leafIndex, BigInt(receipt.ledger.index));
  assert.deepEqual(errors, []);
  await context.close();
});
