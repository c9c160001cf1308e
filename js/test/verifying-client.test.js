// The verifying client end to end: the official TypeScript SDK clients (1.x and 2.x) ↔ the
// notarized TypeScript fixture server over stdio ↔ a real `notary serve`; and the same server
// lying after it notarized (FIXTURE_LIE): each lie caught and handled as configured, only
// verified calls kept, and the evidence store read back by both CLIs, as a directory and a bundle.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as ClientV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";
import { BUNDLE_FORMAT, META_KEY, ReceiptCheckError, VERIFICATION_META_KEY, makeTrust, verifyingClient } from "../src/index.js";
import { EvidenceStore, main, readEvidence } from "../src/node/index.js";
import { notaryCli, startNotary } from "./support/notary.js";
import { fixtureServer } from "./support/build.js";

let notary;
let server;
let trust;
let jwksFile;
const scratch = mkdtempSync(join(tmpdir(), "mcp-notary-verifying-client-"));

before(async () => {
  [notary, server] = await Promise.all([startNotary(), fixtureServer()]);
  trust = makeTrust({ jwks: notary.jwks, logKeys: [notary.vkey] });
  jwksFile = join(scratch, "jwks.json");
  writeFileSync(jwksFile, JSON.stringify(notary.jwks));
});
after(async () => notary?.cleanup());

async function connect(clientKind, env) {
  const params = { command: process.execPath, args: [server], env: { ...process.env, NOTARY_URL: notary.url, NOTARY_API_KEY: notary.apiKey, ...env }, stderr: "pipe" };
  if (clientKind === "v1") {
    const client = new ClientV1({ name: "js-test", version: "1.0.0" });
    await client.connect(new StdioV1(params));
    return client;
  }
  const client = new ClientV2({ name: "js-test", version: "1.0.0" });
  await client.connect(new StdioV2(params));
  return client;
}

async function cli(...argv) {
  let out = "";
  let err = "";
  const code = await main(argv, { stdout: { write: (s) => { out += s; } }, stderr: { write: (s) => { err += s; } } });
  return { code, out, err };
}

const CALLS = [
  ["add", { a: 2, b: 40 }],
  ["echo", { text: "héllo \u2028 😀", n: 9007199254740991 }],
  ["boom", {}],
  ["traps", {}],
];
const TRUST_FLAGS = () => ["--jwks", jwksFile, "--log-key", notary.vkey, "--offline"];

describe("every result verified, kept, and verified again by both CLIs", () => {
  for (const [sdk, clientKind] of [["v1", "v1"], ["v2", "v2"]]) {
    test(`server SDK ${sdk}, client ${clientKind}`, async () => {
      const dir = join(scratch, `evidence-${sdk}`);
      const raw = await connect(clientKind, { FIXTURE_SDK: sdk });
      const client = verifyingClient(raw, { trust, evidence: new EvidenceStore(dir), server: "ts-fixture" });
      try {
        assert.ok((await client.listTools()).tools.length, "everything else is the client's");
        for (const [name, args] of CALLS) {
          const result = await client.callTool({ name, arguments: args });
          const finding = result._meta[VERIFICATION_META_KEY];
          assert.equal(finding.status, "verified", JSON.stringify(finding));
          assert.deepEqual(finding.levels, { record: "passed", signature: "passed", inclusion: "passed", witnesses: "skipped", consistency: "skipped" });
          assert.ok(result._meta[META_KEY], "the notarization block is kept");
          assert.equal(result.isError, name === "boom");
          assert.ok(readdirSync(dir).includes(`${finding.id}.json`));
        }
      } finally {
        await raw.close();
      }
      assert.equal(new EvidenceStore(dir).files().length, CALLS.length);
      let r = await cli("verify", dir, ...TRUST_FLAGS(), "--json");
      assert.equal(r.code, 0, r.out + r.err);
      const doc = JSON.parse(r.out);
      assert.equal(doc.valid, true);
      assert.equal(doc.calls.length, CALLS.length);
      const bundle = join(scratch, `evidence-${sdk}.jsonl`);
      assert.equal(new EvidenceStore(dir).exportBundle(bundle), CALLS.length);
      assert.deepEqual(JSON.parse(readFileSync(bundle, "utf8").split("\n")[0]), { format: BUNDLE_FORMAT, calls: CALLS.length });
      r = await cli("verify", bundle, ...TRUST_FLAGS());
      assert.equal(r.code, 0, r.out + r.err);
      assert.match(r.out, new RegExp(`${CALLS.length} of ${CALLS.length} saved calls verified\\n$`));
      // The Python CLI reads what the JS client kept, in both forms.
      for (const target of [dir, bundle]) {
        const py = notaryCli("verify", target, ...TRUST_FLAGS(), "--json");
        assert.equal(py.status, 0, py.stdout + py.stderr);
        assert.deepEqual(JSON.parse(py.stdout).calls.map((c) => c.levels), JSON.parse((await cli("verify", target, ...TRUST_FLAGS(), "--json")).out).calls.map((c) => c.levels));
      }
      // A changed saved call fails alone; --export keeps only what verified; a truncated bundle is refused.
      const first = new EvidenceStore(dir).files()[0];
      const saved = JSON.parse(readFileSync(first, "utf8"));
      writeFileSync(first, JSON.stringify({ ...saved, arguments: { tampered: true } }));
      const again = join(scratch, `again-${sdk}.jsonl`);
      r = await cli("verify", dir, ...TRUST_FLAGS(), "--export", again);
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, new RegExp(`${CALLS.length - 1} of ${CALLS.length} saved calls verified`));
      assert.equal(readEvidence(again).length, CALLS.length - 1);
      const lines = readFileSync(bundle, "utf8").split("\n");
      writeFileSync(bundle, lines.slice(0, -2).join("\n") + "\n");
      r = await cli("verify", bundle, ...TRUST_FLAGS());
      assert.equal(r.code, 2);
      assert.match(r.err, /truncated/);
      const py = notaryCli("verify", bundle, ...TRUST_FLAGS());
      assert.equal(py.status, 2, py.stderr);
    });
  }
});

const LIES = { changed: ["invalid", /record/], missing: ["missing", /no _meta/], other: ["invalid", /record/], replay: ["invalid", /replayed/] };

describe("a server that lies is caught", () => {
  for (const [lie, [status, why]] of Object.entries(LIES)) {
    for (const clientKind of ["v1", "v2"]) {
      test(`${lie}, client ${clientKind}: raise`, async () => {
        const dir = join(scratch, `lie-${lie}-${clientKind}`);
        const raw = await connect(clientKind, { FIXTURE_SDK: "v1", FIXTURE_LIE: lie });
        try {
          const client = verifyingClient(raw, { trust, evidence: new EvidenceStore(dir) });
          const twice = lie === "other" || lie === "replay";
          if (twice) assert.equal((await client.callTool({ name: "add", arguments: { a: 1, b: 1 } }))._meta[VERIFICATION_META_KEY].status, "verified");
          const args = lie === "replay" ? { a: 1, b: 1 } : { a: 2, b: 3 };
          await assert.rejects(client.callTool({ name: "add", arguments: args }), (e) => {
            assert.ok(e instanceof ReceiptCheckError, String(e));
            assert.equal(e.status, status);
            assert.match(e.message, why);
            return true;
          });
          assert.equal(new EvidenceStore(dir).files().length, twice ? 1 : 0);
        } finally {
          await raw.close();
        }
      });
    }
    if (lie === "changed" || lie === "missing") {
      test(`${lie}: mark and log return the result with the finding`, async () => {
        const raw = await connect("v1", { FIXTURE_SDK: "v1", FIXTURE_LIE: lie });
        const warnings = [];
        try {
          const marked = verifyingClient(raw, { trust, onMissing: "mark", onInvalid: "mark", logger: { warn: (m) => warnings.push(m) } });
          const logged = verifyingClient(raw, { trust, onMissing: "log", onInvalid: "log", logger: { warn: (m) => warnings.push(m) } });
          assert.equal((await marked.callTool({ name: "echo", arguments: { text: "secret-arg" } }))._meta[VERIFICATION_META_KEY].status, status);
          assert.deepEqual(warnings, []);
          assert.equal((await logged.callTool({ name: "echo", arguments: { text: "secret-arg" } }))._meta[VERIFICATION_META_KEY].status, status);
          assert.equal(warnings.length, 1);
          assert.match(warnings[0], new RegExp(`"echo": ${status}`));
          assert.ok(!warnings[0].includes("secret-arg") && !warnings[0].includes("something else"), warnings[0]);
        } finally {
          await raw.close();
        }
      });
    }
  }
});

test("options are checked", () => {
  assert.throws(() => verifyingClient({}, { trust }), /callTool/);
  assert.throws(() => verifyingClient({ callTool() {} }, { trust, onInvalid: "ignore" }), /onInvalid/);
});
