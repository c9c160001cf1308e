// RFC 9162 proofs against the transparency-dev vectors (every file gives its wantErr) and the
// 8-leaf reference tree of docs/formats.md.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { fromBase64, fromHex, leafHash, nodeHash, rootFromInclusionProof, toHex, verifyConsistency, verifyInclusion, ProofError } from "../src/verify.js";

const VECTORS = fileURLToPath(new URL("../../tests/vectors/rfc9162/", import.meta.url));

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".json") ? [p] : [];
  });
}

const b64 = (s) => (s === null || s === undefined ? new Uint8Array(0) : Uint8Array.from(atob(s), (c) => c.charCodeAt(0)));

test("every inclusion vector gives its wantErr", () => {
  const all = files(join(VECTORS, "inclusion"));
  assert.ok(all.length > 50, `found ${all.length} inclusion vectors`);
  for (const f of all) {
    const v = JSON.parse(readFileSync(f, "utf8"));
    let err = null;
    try {
      verifyInclusion(BigInt(v.leafIdx), BigInt(v.treeSize), b64(v.leafHash), (v.proof ?? []).map(b64), b64(v.root));
    } catch (e) {
      assert.ok(e instanceof ProofError, `${f}: ${e}`);
      err = e;
    }
    assert.equal(err !== null, v.wantErr, `${f} (${v.desc}): ${err?.message}`);
  }
});

test("every consistency vector gives its wantErr", () => {
  const all = files(join(VECTORS, "consistency"));
  assert.ok(all.length > 50, `found ${all.length} consistency vectors`);
  for (const f of all) {
    const v = JSON.parse(readFileSync(f, "utf8"));
    let err = null;
    try {
      verifyConsistency(BigInt(v.size1), BigInt(v.size2), b64(v.root1), b64(v.root2), (v.proof ?? []).map(b64));
    } catch (e) {
      assert.ok(e instanceof ProofError, `${f}: ${e}`);
      err = e;
    }
    assert.equal(err !== null, v.wantErr, `${f} (${v.desc}): ${err?.message}`);
  }
});

const LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"];

function mth(hashes) {
  if (hashes.length === 1) return hashes[0];
  let k = 1;
  while (k * 2 < hashes.length) k *= 2;
  return nodeHash(mth(hashes.slice(0, k)), mth(hashes.slice(k)));
}

function path(index, hashes) {
  if (hashes.length === 1) return [];
  let k = 1;
  while (k * 2 < hashes.length) k *= 2;
  return index < k ? [...path(index, hashes.slice(0, k)), mth(hashes.slice(k))] : [...path(index - k, hashes.slice(k)), mth(hashes.slice(0, k))];
}

test("the 8-leaf reference tree: root, and every inclusion proof of every prefix", () => {
  const hashes = LEAVES.map((h) => leafHash(fromHex(h)));
  assert.equal(toHex(mth(hashes)), "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328");
  for (let size = 1; size <= 8; size++) {
    const prefix = hashes.slice(0, size);
    for (let i = 0; i < size; i++) {
      const proof = path(i, prefix);
      assert.deepEqual(rootFromInclusionProof(BigInt(i), BigInt(size), prefix[i], proof), mth(prefix));
      // one flipped bit anywhere fails
      if (proof.length) {
        const bad = proof.map((p) => Uint8Array.from(p));
        bad[0][0] ^= 1;
        assert.throws(() => verifyInclusion(i, size, prefix[i], bad, mth(prefix)), ProofError);
      }
    }
  }
});

test("edge rules: size 0, smaller new size, equal sizes, non-32-byte hashes, 2^64 trees", () => {
  const h = leafHash(new Uint8Array(0));
  assert.throws(() => verifyConsistency(0n, 1n, h, h, []), /size 0/);
  assert.throws(() => verifyConsistency(2n, 1n, h, h, []), /smaller/);
  verifyConsistency(3n, 3n, h, h, []);
  assert.throws(() => verifyConsistency(3n, 3n, h, h, [h]), /empty proof/);
  assert.throws(() => verifyInclusion(0n, 2n, h, [new Uint8Array(31)], h), /not 32/);
  assert.throws(() => verifyInclusion(5n, 5n, h, [], h), /not in a tree/);
  // the last leaf of a 2^64-1 tree needs the right number of hashes; one too few is refused
  const big = (1n << 64n) - 1n;
  assert.throws(() => rootFromInclusionProof(big - 1n, big, h, new Array(62).fill(h)), /too short/);
  assert.equal(rootFromInclusionProof(big - 1n, big, h, new Array(63).fill(h)).length, 32);
  assert.equal(fromBase64("AA==").length, 1);
});
