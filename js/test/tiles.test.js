// Consistency proofs read out of tlog-tiles (what a tlog-mirror's monitoring prefix serves):
// checked against RFC 9162 consistency verification on trees up to level-2 tiles.
import { test } from "node:test";
import assert from "node:assert/strict";
import { leafHash, nodeHash, verifyConsistency, verifyInclusion } from "../src/merkle.js";
import { ProofError } from "../src/errors.js";
import { consistencyFromTiles, consistencyPlan, encodeIndex, proofFromTiles, tilePath } from "../src/tiles.js";
import { FetchError } from "../src/errors.js";

/** Every tile a tree of `leaves` publishes, by path, and the tree's root of each size asked. */
function tree(n) {
  const levels = [Array.from({ length: n }, (_, i) => leafHash(new TextEncoder().encode(`entry ${i}`)))];
  while (levels[levels.length - 1].length > 1) {
    const below = levels[levels.length - 1];
    const up = [];
    for (let i = 0; i + 1 < below.length; i += 2) up.push(nodeHash(below[i], below[i + 1]));
    levels.push(up);
  }
  const files = new Map();
  for (let tl = 0; 8 * tl < levels.length; tl++) {
    const row = levels[8 * tl];
    for (let t = 0; t * 256 < row.length; t++) {
      const part = row.slice(t * 256, t * 256 + 256);
      const data = new Uint8Array(part.length * 32);
      part.forEach((h, i) => data.set(h, 32 * i));
      files.set(tilePath(BigInt(tl), BigInt(t), BigInt(n)), data);
    }
  }
  const root = (size) => {
    const mth = (lo, hi) => {
      if (hi - lo === 1) return levels[0][lo];
      let k = 1;
      while (k * 2 < hi - lo) k *= 2;
      return nodeHash(mth(lo, lo + k), mth(lo + k, hi));
    };
    return mth(0, size);
  };
  return { files, root };
}

const fetcherOf = (files, seen = []) => ({
  async getBytes(url) {
    seen.push(url);
    const path = url.slice("http://m.test/abc/".length);
    if (!files.has(path)) throw new FetchError(url, "HTTP 404", { status: 404 });
    return files.get(path);
  },
});

test("tile paths as tlog-tiles writes them", () => {
  assert.equal(encodeIndex(0n), "000");
  assert.equal(encodeIndex(1234067n), "x001/x234/067");
  assert.equal(tilePath(0n, 1n, 300n), "tile/0/001.p/44");
  assert.equal(tilePath(0n, 0n, 300n), "tile/0/000");
  assert.equal(tilePath(1n, 0n, 70000n), "tile/1/000");
  assert.equal(tilePath(1n, 1n, 70000n), "tile/1/001.p/17");
  // RFC 9162 2.1.4: PROOF(3, D[0:8]) = [2,3) [3,4) [0,2) [4,8) as the ranges, deepest first.
  assert.deepEqual(consistencyPlan(3n, 8n), [[2n, 3n], [3n, 4n], [0n, 2n], [4n, 8n]]);
});

test("proofs from tiles verify between any two sizes", async () => {
  for (const n of [1, 2, 7, 256, 300, 513, 70000]) {
    const { files, root } = tree(n);
    const pairs = [[1, n], [Math.max(1, n - 1), n], [Math.ceil(n / 3), n], [256, n], [257, n], [65536, n]];
    for (const [a, b] of pairs) {
      if (!(a >= 1 && a <= b)) continue;
      const proof = await consistencyFromTiles(fetcherOf(files), "http://m.test/abc", BigInt(a), BigInt(b));
      verifyConsistency(BigInt(a), BigInt(b), root(a), root(b), proof); // throws if it does not
      if (a < b) assert.throws(() => verifyConsistency(BigInt(a), BigInt(b), root(a), root(b - 1), proof), ProofError);
    }
  }
});

test("a missing or broken tile is a FetchError, never a proof", async () => {
  const { files } = tree(300);
  await assert.rejects(consistencyFromTiles(fetcherOf(new Map()), "http://m.test/abc", 5n, 300n), FetchError);
  const bad = new Map(files);
  bad.set("tile/0/001.p/44", new Uint8Array(33));
  await assert.rejects(consistencyFromTiles(fetcherOf(bad), "http://m.test/abc", 5n, 300n), FetchError);
  const short = new Map(files);
  short.set("tile/0/001.p/44", new Uint8Array(32));
  await assert.rejects(consistencyFromTiles(fetcherOf(short), "http://m.test/abc", 290n, 300n), FetchError);
});

test("an inclusion proof from tiles is a tlog-proof that verifies", async () => {
  const { files, root } = tree(700);
  const note = new TextEncoder().encode("m.test/log\n700\nROOT\n\n— m.test/log AAAA\n");
  const served = new Map(files);
  served.set("checkpoint", note);
  for (const index of [0, 1, 255, 256, 699]) {
    const [text, why] = await proofFromTiles(fetcherOf(served), "http://m.test/abc/", index);
    assert.match(why, /size 700/);
    const lines = text.split("\n");
    assert.equal(lines[0], "c2sp.org/tlog-proof@v1");
    assert.equal(lines[1], `index ${index}`);
    const blank = lines.indexOf("");
    const proof = lines.slice(2, blank).map((l) => Uint8Array.from(atob(l), (c) => c.charCodeAt(0)));
    const leaf = leafHash(new TextEncoder().encode(`entry ${index}`));
    verifyInclusion(BigInt(index), 700n, leaf, proof, root(700));
    assert.equal(lines.slice(blank + 1).join("\n"), new TextDecoder().decode(note));
  }
  const [none, why] = await proofFromTiles(fetcherOf(served), "http://m.test/abc", 700);
  assert.equal(none, null);
  assert.match(why, /does not cover index 700/);
  const [gone] = await proofFromTiles(fetcherOf(new Map()), "http://m.test/abc", 3);
  assert.equal(gone, null);
});
