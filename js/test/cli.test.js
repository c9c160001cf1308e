// `mcp-notary verify`: the Python CLI's inputs and exit status (0 valid, 1 not valid, 2 usage or
// input error), its --json report, and a state file it shares with `notary verify`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { StateFileStore, main } from "../src/node/index.js";
import { META_KEY, NotaryClient, Notarizer, makeTrust, verifyToolCall } from "../src/index.js";
import { loadCases } from "./support/corpus.js";
import { notaryCli, notaryCommand, startNotary } from "./support/notary.js";
import { Cosigner } from "./helpers.js";

const BIN = fileURLToPath(new URL("../bin/mcp-notary.js", import.meta.url));
// notary.verifier.state remembering the checkpoint of a saved call's receipt (argv: call, state
// file, log vkey), as `notary verify` does online.
const PY_REMEMBER = `
import json, sys
from pathlib import Path
from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import parse_note
from ledger.core.tlog_proof import decode_proof_bundle
from notary.verifier.state import StateFile
call = json.loads(Path(sys.argv[1]).read_text())
receipt = call["result"]["_meta"]["com.rightshold/tool-call"]["receipt"]
note = decode_proof_bundle(receipt["proof"].encode()).checkpoint
assert StateFile(Path(sys.argv[2])).remember(parse_checkpoint_text(parse_note(note).text), note, sys.argv[3])
`;
const dir = mkdtempSync(join(tmpdir(), "mcp-notary-cli-"));
const cases = Object.fromEntries(loadCases().map((c) => [c.name, c.case]));

function write(name, value) {
  const path = join(dir, name);
  writeFileSync(path, typeof value === "string" ? value : JSON.stringify(value));
  return path;
}

async function run(...argv) {
  let out = "";
  let err = "";
  const code = await main(argv, { stdout: { write: (s) => (out += s) }, stderr: { write: (s) => (err += s) } });
  return { code, out, err };
}

const base = cases["valid-saved-call"];
const jwks = write("jwks.json", base.trust.jwks);
const vkey = base.trust.log_keys[0];
const trustArgs = ["--jwks", jwks, "--log-key", vkey];

test("inputs and exit status", async () => {
  const saved = write("saved.json", base.input.call);
  let r = await run("verify", saved, ...trustArgs, "--offline", "--no-state");
  assert.equal(r.code, 0, r.out + r.err);
  assert.match(r.out, /1\. record {7}PASSED/);
  assert.match(r.out, /VALID: every required level passed\./);
  r = await run("verify", saved, ...trustArgs, "--offline", "--no-state", "--json");
  const doc = JSON.parse(r.out);
  assert.equal(doc.valid, true);
  assert.deepEqual(doc.required, ["record", "signature", "inclusion"]);
  assert.equal(doc.receipt.id, base.input.call.result._meta["com.rightshold/tool-call"].id);
  const bare = cases["valid-tool-result"].input;
  r = await run("verify", write("bare.json", bare.call), "--tool", bare.tool, "--arguments", JSON.stringify(bare.arguments), ...trustArgs, "--offline", "--no-state");
  assert.equal(r.code, 0, r.out + r.err);
  const pair = cases["valid-receipt-record"].input;
  r = await run("verify", "--receipt", write("receipt.json", pair.receipt), "--record", write("record.json", pair.record), ...trustArgs, "--offline", "--no-state");
  assert.equal(r.code, 0, r.out + r.err);
  const keyFile = write("log.vkey", `# the log\n${vkey}\n`);
  r = await run("verify", saved, "--jwks", jwks, "--log-key", `@${keyFile}`, "--offline", "--no-state");
  assert.equal(r.code, 0, r.out + r.err);
  // not valid: exit 1
  const tampered = cases["tamper-record-arguments"].input.call;
  r = await run("verify", write("tampered.json", tampered), ...trustArgs, "--offline", "--no-state");
  assert.equal(r.code, 1);
  assert.match(r.out, /1\. record {7}FAILED/);
  assert.match(r.out, /NOT VALID: record did not pass\./);
  const w = cases["witness-quorum-3-of-3-short"];
  r = await run("verify", write("w.json", w.input.call), "--receipt", write("wr.json", w.input.receipt), ...trustArgs, ...w.trust.witnesses.flatMap((k) => ["--witness", k]), "--offline", "--no-state", "--json");
  assert.equal(r.code, 1);
  assert.equal(JSON.parse(r.out).levels.witnesses.status, "failed");
  const policy = cases["policy-any-met"];
  r = await run("verify", write("p.json", policy.input.call), "--receipt", write("pr.json", policy.input.receipt), "--jwks", jwks, "--policy", write("policy.txt", policy.trust.policy), "--offline", "--no-state", "--json");
  assert.equal(r.code, 0, r.out + r.err);
  assert.equal(JSON.parse(r.out).levels.witnesses.status, "passed");
});

test("usage and input errors exit 2 with a message", async () => {
  const saved = write("saved2.json", base.input.call);
  const usage = [
    [], ["frobnicate"], ["verify", saved], ["verify", saved, "--jwks", jwks], ["verify", ...trustArgs],
    ["verify", join(dir, "missing.json"), ...trustArgs], ["verify", write("junk.json", { x: 1 }), ...trustArgs],
    ["verify", write("result.json", cases["valid-tool-result"].input.call), ...trustArgs],
    ["verify", saved, "--record", saved, ...trustArgs], ["verify", saved, "--jwks", jwks, "--log-key", "nope"],
    ["verify", saved, ...trustArgs, "--offline", "--notary", "http://127.0.0.1:1"],
    ["verify", saved, "--jwks", "http://127.0.0.1:1/jwks", "--log-key", vkey, "--offline"],
    ["verify", saved, ...trustArgs, "--quorum", "1"], ["verify", saved, ...trustArgs, "--witness", cases["witness-quorum-2-of-3"].trust.witnesses[0], "--quorum", "2"],
    ["verify", saved, ...trustArgs, "--state", "x", "--no-state"], ["verify", saved, "--jwks", write("notjwks.json", { keys: [] }), "--log-key", vkey],
    ["verify", saved, ...trustArgs, "--bogus"], ["verify", saved, ...trustArgs, "--timeout", "0"], ["verify", saved, ...trustArgs, "--quorum", "x"],
    ["verify", write("notjson.json", "{nope"), ...trustArgs], ["verify", write("bom.json", "\ufeff" + JSON.stringify(base.input.call)), ...trustArgs, "--offline"],
    ["verify", write("notnot.json", cases["input-not-notarized"].input.call), ...trustArgs, "--offline"],
    ["verify", saved, ...trustArgs, "--policy", write("badpolicy.txt", "quorum nobody\n")],
    ["verify", saved, ...trustArgs, "--state", write("badstate.json", "[1]"), "--offline"],
  ];
  for (const argv of usage) {
    const r = await run(...argv);
    assert.equal(r.code, 2, `${argv.join(" ")}\n${r.out}${r.err}`);
    assert.match(r.err, /error|usage/, argv.join(" "));
    assert.equal(r.out, "", "nothing on stdout for an error");
  }
  assert.equal((await run("verify", "--help")).code, 0);
});

test("the state file is the Python verifier's: each reads what the other wrote", async () => {
  const state = join(dir, "state.json");
  const c0 = cases["state-same-checkpoint"].input.call;
  const file = write("c0.json", c0);
  let r = await run("verify", file, ...trustArgs, "--offline", "--state", state);
  assert.equal(r.code, 0, r.out + r.err);
  assert.equal(existsSync(state), false, "--offline reads the state file, never writes it (as Python)");
  // the library remembers (offline too), in the state file's format, under the log key
  const trust = makeTrust({ jwks: cases["state-same-checkpoint"].trust.jwks, logKeys: [vkey] });
  assert.ok((await verifyToolCall(c0, { trust, store: new StateFileStore(state) })).valid);
  const written = JSON.parse(readFileSync(state, "utf8"));
  assert.equal(written.version, 1);
  assert.deepEqual(Object.keys(written.logs), [vkey]);
  // Python reads it: the same checkpoint again is decided offline, passed and required
  const py = notaryCli("verify", file, ...trustArgs, "--offline", "--state", state, "--json");
  assert.equal(py.status, 0, py.stdout + py.stderr);
  const report = JSON.parse(py.stdout);
  assert.equal(report.levels.consistency.status, "passed");
  assert.ok(report.required.includes("consistency"));
  // and the other way round: Python remembers a newer checkpoint, the JS CLI reads it. Python
  // writes its state file only online (--offline reads it, never writes it), so here its state
  // module stores the checkpoint, as its online verifier does once level 5 has passed.
  const newer = write("c2.json", cases["state-older-checkpoint"].input.call);
  const pyState = join(dir, "py-state.json");
  assert.equal(notaryCli("verify", newer, ...trustArgs, "--offline", "--state", pyState).status, 0);
  assert.equal(existsSync(pyState), false, "Python's --offline writes no state file");
  const remember = spawnSync(join(dirname(notaryCommand()[0]), "python"), ["-c", PY_REMEMBER, newer, pyState, vkey], { encoding: "utf8" });
  assert.equal(remember.status, 0, remember.stdout + remember.stderr);
  r = await run("verify", newer, ...trustArgs, "--offline", "--state", pyState, "--json");
  assert.equal(r.code, 0, r.out + r.err);
  assert.equal(JSON.parse(r.out).levels.consistency.status, "passed");
});

test("the installed bin runs and exits with the verdict's status", () => {
  const ok = spawnSync(process.execPath, [BIN, "verify", write("b.json", base.input.call), ...trustArgs, "--offline", "--no-state"], { encoding: "utf8" });
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
  const bad = spawnSync(process.execPath, [BIN, "verify", write("bt.json", cases["tamper-record-content"].input.call), ...trustArgs, "--offline", "--no-state"], { encoding: "utf8" });
  assert.equal(bad.status, 1);
  const usage = spawnSync(process.execPath, [BIN, "verify"], { encoding: "utf8" });
  assert.equal(usage.status, 2);
});

test("--version prints the package version, as notary --version and ledger --version do", async () => {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  const r = await run("--version");
  assert.deepEqual([r.code, r.out], [0, `mcp-notary ${pkg.version}\n`]);
  const bin = spawnSync(process.execPath, [BIN, "--version"], { encoding: "utf8" });
  assert.deepEqual([bin.status, bin.stdout], [0, `mcp-notary ${pkg.version}\n`]);
  const py = notaryCli("--version");
  assert.equal(py.status, 0, py.stderr);
  assert.match(py.stdout, /^notary \S+\n$/);
});

test("the flags of notary verify: --witness-policy (--policy too), --upgrade, --save-receipt; the same exit status", async () => {
  const notary = await startNotary();
  try {
    const notarizer = new Notarizer(new NotaryClient(notary.url, notary.apiKey), "cli-test", { logger: null });
    const calls = [];
    for (let i = 0; i < 3; i++) {
      const args = { i };
      calls.push({ tool: "t", arguments: args, result: await notarizer.notarizeResult("t", args, { content: [{ type: "text", text: String(i) }] }) });
    }
    const callFile = write("upgrade-call.json", calls[0]);
    const jwksFile = write("upgrade-jwks.json", notary.jwks);
    const trust = ["--jwks", jwksFile, "--log-key", notary.vkey, "--no-state"];
    // --upgrade: both CLIs fetch the current proof, verify with it and save the same receipt
    const jsOut = join(dir, "js-upgraded.json");
    const pyOut = join(dir, "py-upgraded.json");
    const js = await run("verify", callFile, ...trust, "--upgrade", "--save-receipt", jsOut, "--json");
    assert.equal(js.code, 0, js.out + js.err);
    assert.ok(JSON.parse(js.out).notes.some((n) => n.startsWith("upgraded: ")), js.out);
    const py = notaryCli("verify", callFile, ...trust, "--upgrade", "--save-receipt", pyOut, "--json");
    assert.equal(py.status, 0, py.stdout + py.stderr);
    const saved = JSON.parse(readFileSync(jsOut, "utf8"));
    assert.deepEqual(saved, JSON.parse(readFileSync(pyOut, "utf8")));
    assert.notEqual(saved.proof, calls[0].result._meta[META_KEY].receipt.proof, "a newer proof");
    // the saved receipt verifies offline in both
    const rec = [callFile, "--receipt", jsOut];
    assert.equal((await run("verify", ...rec, ...trust, "--offline")).code, 0);
    assert.equal(notaryCli("verify", ...rec, ...trust, "--offline").status, 0);
    // --witness-policy and its other name --policy; exit 2 where Python exits 2
    const policy = write("cli.policy", `log ${notary.vkey}\nquorum none\n`);
    const deep = write("deep.policy", [`log ${notary.vkey}`, `witness A ${new Cosigner("w.example").vkey}`, "group G1 any A",
      ...Array.from({ length: 399 }, (_, i) => `group G${i + 2} any G${i + 1}`), "quorum G400", ""].join("\n"));
    const noKeys = ["--jwks", jwksFile, "--no-state", "--offline"];
    for (const [argv, code] of [
      [[callFile, ...noKeys, "--witness-policy", policy], 0],
      [[callFile, ...noKeys, "--policy", policy], 0],
      [[callFile, ...noKeys, "--witness-policy", deep], 2],
      [[callFile, ...noKeys, "--witness-policy", policy, "--witness", `${new Cosigner("w.example").vkey}`], 2],
      [[callFile, ...trust, "--upgrade", "--offline"], 2],
      [[callFile, ...trust, "--save-receipt", join(callFile, "r.json")], 2], // its directory is a file
    ]) {
      const got = await run("verify", ...argv);
      assert.equal(got.code, code, `${argv.join(" ")}: ${got.out}${got.err}`);
      const pyArgv = argv.map((a) => (a === "--policy" ? "--witness-policy" : a));
      assert.equal(notaryCli("verify", ...pyArgv).status, code, `python ${pyArgv.join(" ")}`);
    }
    assert.equal((await run("verify", callFile, ...noKeys, "--policy", policy, "--witness-policy", policy)).code, 2);
  } finally {
    await notary.cleanup();
  }
});

test("hostile state files: both CLIs read each one alike (used, or exit 2)", async () => {
  const c = cases["state-same-checkpoint"];
  const file = write("hs-call.json", c.input.call);
  const good = JSON.stringify({ version: 1, logs: c.state });
  const variants = {
    "version true": good.replace('"version":1', '"version":true'),
    "version 1.0": good.replace('"version":1', '"version":1.0'),
    "logs null": '{"version":1,"logs":null}',
    "logs array": '{"version":1,"logs":[]}',
    "no logs": '{"version":1}',
    "document array": "[]",
    "duplicate version": good.replace('"version":1', '"version":1,"version":1'),
    "BOM": "\ufeff" + good,
    "NaN size": good.replace('"size":', '"size":NaN,"z":'),
    "size 2^64": good.replace(/"size":\d+/, '"size":18446744073709551616'),
  };
  for (const [name, text] of Object.entries(variants)) {
    const state = write(`hs-${name.replace(/\W/g, "_")}.state`, text);
    const js = await run("verify", file, ...trustArgs, "--offline", "--state", state);
    const py = notaryCli("verify", file, ...trustArgs, "--offline", "--state", state);
    assert.equal(js.code, py.status, `${name}: JS ${js.code} ${js.err}, Python ${py.status} ${py.stderr}`);
  }
});

test("--timeout that is not a positive finite number is exit 2 in both CLIs", async () => {
  const file = write("to-call.json", base.input.call);
  for (const value of ["nan", "inf", "0", "-1"]) {
    const js = await run("verify", file, ...trustArgs, "--offline", "--no-state", "--timeout", value);
    const py = notaryCli("verify", file, ...trustArgs, "--offline", "--no-state", "--timeout", value);
    assert.deepEqual([js.code, py.status], [2, 2], `${value}: ${js.err} ${py.stderr}`);
  }
});

test("key files and key texts: one reading in both CLIs (UTF-8 without a BOM, CR/LF lines, ASCII blanks trimmed)", async () => {
  const file = write("kf-call.json", base.input.call);
  const enc = new TextEncoder();
  const files = {
    "plain, CRLF": enc.encode(`# the log\r\n  ${vkey}\t\r\n`),
    BOM: enc.encode(`\ufeff${vkey}\n`),
    "invalid UTF-8": Uint8Array.from([0x23, 0x20, 0xff, 0x0a, ...enc.encode(vkey)]),
    "U+2028 between two keys": enc.encode(`${vkey}\u2028${vkey}`),
    "NBSP after the key": enc.encode(`${vkey}\u00a0\n`),
    "NEL before the key": enc.encode(`\u0085${vkey}\n`),
  };
  const expected = { "plain, CRLF": 0 };
  for (const [name, bytes] of Object.entries(files)) {
    const keyFile = join(dir, `kf-${name.replace(/\W/g, "_")}.vkey`);
    writeFileSync(keyFile, bytes);
    for (const flag of ["--log-key", "--witness"]) {
      const keys = flag === "--log-key" ? ["--log-key", `@${keyFile}`] : ["--log-key", vkey, "--witness", `@${keyFile}`];
      const js = await run("verify", file, "--jwks", jwks, ...keys, "--offline", "--no-state");
      const py = notaryCli("verify", file, "--jwks", jwks, ...keys, "--offline", "--no-state");
      assert.equal(js.code, py.status, `${name} ${flag}: JS ${js.code} ${js.err}, Python ${py.status} ${py.stderr.slice(-300)}`);
      assert.ok(!py.stderr.includes("Traceback"), `${name}: ${py.stderr.slice(-300)}`);
      if (flag === "--log-key") assert.equal(js.code, expected[name] ?? 2, `${name}: ${js.err}`);
    }
  }
  for (const text of [`\ufeff${vkey}`, `${vkey}\u00a0`, `\t${vkey}\n`]) {
    const js = await run("verify", file, "--jwks", jwks, "--log-key", text, "--offline", "--no-state");
    const py = notaryCli("verify", file, "--jwks", jwks, "--log-key", text, "--offline", "--no-state");
    assert.equal(js.code, py.status, `${JSON.stringify(text)}: JS ${js.err}, Python ${py.stderr.slice(-300)}`);
  }
});

test("--cose FILE: the call's COSE receipt is checked too and must pass (exit 1 otherwise); not with a store", async () => {
  const file = write("cose-call.json", base.input.call);
  const coseFile = (name, b64) => {
    const path = join(dir, name);
    writeFileSync(path, Buffer.from(b64, "base64"));
    return path;
  };
  const own = cases["cose-valid-size-1-leaf-0"];
  assert.equal(own.receipt.id, base.input.call.result._meta[META_KEY].receipt.id, "the corpus's first entry is the saved call's");
  let r = await run("verify", file, ...trustArgs, "--offline", "--no-state", "--cose", coseFile("own.cose", own.cose_b64[0]));
  assert.equal(r.code, 0, r.out + r.err);
  assert.match(r.out, /COSE receipt {3}PASSED {3}\(required\): EdDSA, signed by the log '.+': entry 0 is in the tree of size 1/);
  r = await run("verify", file, ...trustArgs, "--offline", "--no-state", "--json", "--cose", coseFile("own.cose", own.cose_b64[0]));
  const doc = JSON.parse(r.out);
  assert.deepEqual([doc.valid, doc.cose.status, doc.cose.tree_size, doc.cose.leaf_index, doc.cose.alg], [true, "passed", 1, 0, "EdDSA"]);
  assert.equal(Buffer.from(doc.cose.root, "base64").toString("hex"), own.expect[0].root);

  const other = cases["cose-valid-size-7-leaf-4"].cose_b64[0]; // another entry's
  const flipped = Buffer.from(own.cose_b64[0], "base64");
  flipped[flipped.length - 1] ^= 1;
  for (const [name, path] of [["another entry's", coseFile("other.cose", other)], ["a flipped byte", coseFile("flipped.cose", flipped.toString("base64"))], ["not CBOR", write("not.cose", "{}")]]) {
    r = await run("verify", file, ...trustArgs, "--offline", "--no-state", "--json", "--cose", path);
    assert.equal(r.code, 1, `${name}: ${r.out}${r.err}`);
    const rep = JSON.parse(r.out);
    assert.deepEqual([rep.valid, rep.cose.status, rep.levels.inclusion.status], [false, "failed", "passed"], name);
  }
  r = await run("verify", file, ...trustArgs, "--offline", "--no-state", "--cose", coseFile("other.cose", other));
  assert.match(r.out, /NOT VALID: the COSE receipt did not pass\./);
  r = await run("verify", file, ...trustArgs, "--offline", "--no-state", "--cose", join(dir, "missing.cose"));
  assert.equal(r.code, 2);
  assert.match(r.err, /cannot read the COSE receipt/);
  const store = mkdtempSync(join(tmpdir(), "mcp-notary-cose-store-"));
  writeFileSync(join(store, "call.json"), JSON.stringify(base.input.call));
  r = await run("verify", store, ...trustArgs, "--offline", "--no-state", "--cose", coseFile("own.cose", own.cose_b64[0]));
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /--cose goes with one saved call/);
});
