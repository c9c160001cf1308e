// Signed notes, checkpoints, cosignatures, tlog-proof and tlog-policy.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CheckpointError, CosignatureVerifier, Ed25519Verifier, InvalidSignatureError, NoteError, PolicyError, PolicyNotMet,
  ProofBundleError, UnverifiedNoteError, decodeProofBundle, encodeProofBundle, keyId, openCheckpoint, openNote,
  parseCheckpointText, parseNote, parsePolicy, parseVerifierKey, parseVkeyText, clearCheckpointCache,
} from "../src/verify.js";
import { MAX_GROUP_DEPTH } from "../src/policy.js";
import { Cosigner, Signer, signedCheckpoint } from "./helpers.js";

const enc = new TextEncoder();
const VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
const MESSAGE = "This is an example message.\n";
const SIGLINE = "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=";

test("the c2sp.org/signed-note example verifies, and a flipped byte does not", async () => {
  const v = Ed25519Verifier.fromVkey(VKEY);
  assert.equal(v.vkey, VKEY);
  const { note, verified } = await openNote(enc.encode(`${MESSAGE}\n${SIGLINE}\n`), [v]);
  assert.equal(note.text, MESSAGE);
  assert.equal(verified.length, 1);
  const tampered = enc.encode(`This is an example message!\n\n${SIGLINE}\n`);
  await assert.rejects(openNote(tampered, [v]), InvalidSignatureError);
  const other = new Signer("example.com/foo");
  await assert.rejects(openNote(enc.encode(`${MESSAGE}\n${SIGLINE}\n`), [other.verifier]), UnverifiedNoteError);
});

test("vkeys: the key ID must match, only the first two + split, types are checked", () => {
  const { name, keyId: id, keyType } = parseVkeyText(VKEY);
  assert.deepEqual([name, id, keyType], ["example.com/foo", 0x530d903a, 1]);
  assert.throws(() => parseVkeyText(VKEY.replace("530d903a", "530d903b")), /does not match/);
  assert.throws(() => parseVkeyText("example.com/foo+530d903a"), /malformed/);
  assert.throws(() => parseVkeyText("bad name+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"), /invalid key name/);
  assert.throws(() => CosignatureVerifier.fromVkey(VKEY), /not an Ed25519 cosignature key/);
  const w = new Cosigner("witness.example");
  assert.ok(parseVerifierKey(w.vkey) instanceof CosignatureVerifier);
  assert.ok(parseVerifierKey(VKEY) instanceof Ed25519Verifier);
  assert.equal(keyId("example.com/foo", 1, Ed25519Verifier.fromVkey(VKEY).publicKey), 0x530d903a);
});

test("note syntax: blank line, signature lines, canonical base64, control characters, size", () => {
  const ok = `${MESSAGE}\n${SIGLINE}\n`;
  assert.equal(parseNote(ok).signatures.length, 1);
  for (const bad of [MESSAGE, `${MESSAGE}\n`, `${MESSAGE}\n${SIGLINE}`, `${MESSAGE}\n- x AAAAAAA=\n`, `a\tb\n\n${SIGLINE}\n`,
    `${MESSAGE}\n${SIGLINE.slice(0, -1)}\n`, `${MESSAGE}\n— example.com/foo AAAA\n`, `${MESSAGE}\n${(SIGLINE + "\n").repeat(101)}`]) {
    assert.throws(() => parseNote(enc.encode(bad)), NoteError, JSON.stringify(bad.slice(0, 40)));
  }
  assert.throws(() => parseNote(new Uint8Array([0xff, 0x0a, 0x0a])), /UTF-8/);
  assert.throws(() => parseNote(new Uint8Array((1 << 20) + 1)), /limit/);
});

test("checkpoints: strict text, log key by origin, witnesses and quorum", async () => {
  clearCheckpointCache();
  const log = new Signer("log.example/x");
  const [w1, w2, w3] = [1, 2, 3].map((i) => new Cosigner(`w${i}.example`));
  const root = new Uint8Array(32).fill(9);
  const note = signedCheckpoint(log, 7, root, w1, w2);
  const { checkpoint } = await openCheckpoint(note, log.verifier);
  assert.equal(checkpoint.size, 7n);
  assert.equal(checkpoint.origin, "log.example/x");
  await openCheckpoint(note, log.verifier, [w1.verifier, w2.verifier, w3.verifier], 2);
  await assert.rejects(openCheckpoint(note, log.verifier, [w1.verifier, w2.verifier, w3.verifier], 3), /2 verified witness cosignatures, need 3/);
  await assert.rejects(openCheckpoint(note, log.verifier, [w1.verifier], 2), /cannot be met/);
  // the same witness key under two names counts once
  const alias = new CosignatureVerifier("alias.example", w1.verifier.publicKey);
  await assert.rejects(openCheckpoint(note, log.verifier, [w1.verifier, alias], 2), CheckpointError);
  await assert.rejects(openCheckpoint(note, new Signer("other.example/x").verifier), /does not match origin/);
  // a forged cosignature by a known witness rejects the note
  const text = new TextDecoder().decode(note);
  const lines = text.split("\n");
  const forged = lines.map((l) => (l.startsWith("— w1.example") ? l.slice(0, -3) + (l.endsWith("A==") ? "Q==" : "A==") : l)).join("\n");
  await assert.rejects(openCheckpoint(forged, log.verifier, [w1.verifier], 1), NoteError);
  for (const bad of ["o\n01\nAAAA\n", "o\n1\n", "o\n1\nAAAA\n", "o\n-1\n" + "A".repeat(43) + "=\n", "o\n18446744073709551616\n" + "A".repeat(43) + "=\n", "o\n1\n" + "A".repeat(43) + "=\n\n"]) {
    assert.throws(() => parseCheckpointText(bad), CheckpointError, JSON.stringify(bad));
  }
  assert.equal(parseCheckpointText("o\n18446744073709551615\n" + "A".repeat(43) + "=\next\n").size, (1n << 64n) - 1n);
});

test("tlog-proof: strict decoding round-trips", () => {
  const log = new Signer("log.example/x");
  const cp = signedCheckpoint(log, 3, new Uint8Array(32));
  const proof = [new Uint8Array(32).fill(1), new Uint8Array(32).fill(2)];
  const bytes = encodeProofBundle({ index: 2n, proof, checkpoint: cp });
  const b = decodeProofBundle(bytes);
  assert.equal(b.index, 2n);
  assert.deepEqual(encodeProofBundle(b), bytes);
  const text = new TextDecoder().decode(bytes);
  for (const bad of [text.replace("index 2", "index 02"), text.replace("c2sp.org/tlog-proof@v1", "c2sp.org/tlog-proof@v2"),
    text.replace("index 2\n", "index 2\nextra \n"), text.split("\n\n")[0] + "\n\n", text.replace("AQEB", "AQE*")]) {
    assert.throws(() => decodeProofBundle(bad), ProofBundleError, JSON.stringify(bad.slice(0, 60)));
  }
  const withExtra = encodeProofBundle({ index: 0n, proof: [], checkpoint: cp, extra: new Uint8Array([1, 2]) });
  assert.deepEqual(decodeProofBundle(withExtra).extra, new Uint8Array([1, 2]));
});

test("tlog-policy: parsing rules and quorum evaluation", async () => {
  const log = new Signer("log.example/x");
  const [a, b, c] = ["a", "b", "c"].map((n) => new Cosigner(`${n}.example`));
  const policy = parsePolicy(`# trust\nlog ${log.vkey} https://log.example\nwitness A ${a.vkey}\nwitness B ${b.vkey}\nwitness C ${c.vkey}\ngroup AB any A B\ngroup all2 2 AB C\nquorum all2\n`);
  assert.equal(policy.quorum, "all2");
  const root = new Uint8Array(32);
  await policy.verify(signedCheckpoint(log, 1, root, a, c));
  await assert.rejects(policy.verify(signedCheckpoint(log, 1, root, a, b)), PolicyNotMet);
  await assert.rejects(policy.verify(signedCheckpoint(new Signer("log.example/x"), 1, root, a, c)), PolicyNotMet);
  const bad = [
    "quorum none\nquorum none\n", `witness none ${a.vkey}\nquorum none\n`, "group g any X\nquorum none\n",
    `witness A ${a.vkey}\nwitness B ${a.vkey}\nquorum A\n`, `witness A ${a.vkey}\ngroup g 2 A\nquorum g\n`,
    `witness A ${a.vkey}\ngroup g 01 A\nquorum g\n`, "bogus x\nquorum none\n", "log x\nquorum none\n", "", "quorum none\u0001\n",
    `witness A ${a.vkey}\ngroup g any A\ngroup h any A\nquorum h\n`,
  ];
  for (const text of bad) assert.throws(() => parsePolicy(text), PolicyError, JSON.stringify(text));
  assert.equal(parsePolicy("quorum none\n").quorum, "none");
});

test("tlog-policy: one nesting bound and one decoding rule with Python", async () => {
  const w = new Cosigner("w.example");
  const nested = (depth) => [`witness A ${w.vkey}`, "group G1 any A", ...Array.from({ length: depth - 1 }, (_, i) => `group G${i + 2} any G${i + 1}`), `quorum G${depth}`, ""].join("\n");
  const policy = parsePolicy(nested(MAX_GROUP_DEPTH));
  assert.equal(policy.satisfied(new Set(["A"])), true);
  for (const depth of [MAX_GROUP_DEPTH + 1, 400, 3000]) {
    assert.throws(() => parsePolicy(nested(depth)), (e) => e instanceof PolicyError && /nests 33 deep/.test(e.message), String(depth));
  }
  assert.equal(MAX_GROUP_DEPTH, 32);
  const text = enc.encode("quorum none\n");
  assert.throws(() => parsePolicy(Uint8Array.from([0xef, 0xbb, 0xbf, ...text])), /byte order mark/);
  assert.throws(() => parsePolicy(Uint8Array.from([...enc.encode(`witness A ${w.vkey} https://caf`), 0xe9, ...enc.encode(".example\nquorum A\n")])), /not UTF-8/);
  assert.throws(() => parsePolicy(`witness A ${w.vkey} https://x\ud800\nquorum A\n`), /not UTF-8/);
  assert.ok(parsePolicy(`witness Zürich ${w.vkey}\nquorum Zürich\n`).witnesses.has("Zürich"));
});
