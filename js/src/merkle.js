// RFC 9162 §2.1 Merkle tree hashing and proof verification (§2.1.3.2 inclusion, §2.1.4.2
// consistency) with the edge rules of docs/formats.md. Sizes and indexes are BigInt (trees reach 2^64).

import { sha256 } from "@noble/hashes/sha2.js";
import { ProofError } from "./errors.js";
import { bytesEqual } from "./bytes.js";

export const HASH_SIZE = 32;

/** SHA-256(0x00 ‖ entry). */
export function leafHash(entry) {
  const buf = new Uint8Array(entry.length + 1);
  buf.set(entry, 1);
  return sha256(buf);
}

/** SHA-256(0x01 ‖ left ‖ right). */
export function nodeHash(left, right) {
  const buf = new Uint8Array(65);
  buf[0] = 1;
  buf.set(left, 1);
  buf.set(right, 33);
  return sha256(buf);
}

const big = (n, what) => {
  if (typeof n === "bigint") return n;
  if (Number.isSafeInteger(n)) return BigInt(n);
  throw new ProofError(`${what} must be an integer`);
};

function checkHash(name, h) {
  if (!(h instanceof Uint8Array) || h.length !== HASH_SIZE) {
    throw new ProofError(`${name} is ${h?.length ?? "not"} bytes, not ${HASH_SIZE}`);
  }
}

// The path walks below use these on either representation: Numbers (exact up to 2^53, where
// every real tree is, and much faster) or BigInts (trees up to 2^64).
const NUM = { zero: 0, one: 1, odd: (x) => x % 2 === 1, half: (x) => Math.floor(x / 2), dec: (x) => x - 1 };
const BIG = { zero: 0n, one: 1n, odd: (x) => (x & 1n) === 1n, half: (x) => x >> 1n, dec: (x) => x - 1n };
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const arith = (...xs) => (xs.every((x) => x <= SAFE) ? [NUM, xs.map(Number)] : [BIG, xs]);

/** The root that `proof` implies for `leaf` (a leaf hash) at `index` in a tree of `size`. */
export function rootFromInclusionProof(index, size, leaf, proof) {
  const bi = big(index, "index");
  const bs = big(size, "size");
  if (!(bi >= 0n && bi < bs)) throw new ProofError(`index ${bi} is not in a tree of size ${bs}`);
  checkHash("leaf hash", leaf);
  const [A, [fn0, sn0]] = arith(bi, bs);
  let fn = fn0;
  let sn = A.dec(sn0);
  let r = leaf;
  for (let i = 0; i < proof.length; i++) {
    const p = proof[i];
    checkHash(`proof hash ${i}`, p);
    if (sn === A.zero) throw new ProofError("inclusion proof is longer than the tree is deep");
    if (A.odd(fn) || fn === sn) {
      r = nodeHash(p, r);
      if (!A.odd(fn)) {
        while (fn !== A.zero && !A.odd(fn)) { fn = A.half(fn); sn = A.half(sn); }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = A.half(fn);
    sn = A.half(sn);
  }
  if (sn !== A.zero) throw new ProofError("inclusion proof is too short");
  return r;
}

/** Throw ProofError unless `proof` shows `leaf` (a leaf hash) at `index` under `root`. */
export function verifyInclusion(index, size, leaf, proof, root) {
  checkHash("root", root);
  if (!bytesEqual(rootFromInclusionProof(index, size, leaf, proof), root)) {
    throw new ProofError("inclusion proof does not lead to the expected root");
  }
}

/** Throw ProofError unless `proof` shows the tree of `oldSize` is a prefix of `newSize`'s. */
export function verifyConsistency(oldSize, newSize, oldRoot, newRoot, proof) {
  const m = big(oldSize, "old size");
  const n = big(newSize, "new size");
  if (n < m) throw new ProofError(`new size ${n} is smaller than old size ${m}`);
  if (m === 0n) throw new ProofError("a consistency proof from size 0 proves nothing");
  if (m === n) {
    if (proof.length !== 0) throw new ProofError("equal sizes need an empty proof");
    if (!bytesEqual(oldRoot, newRoot)) throw new ProofError("equal sizes but different roots");
    return;
  }
  checkHash("old root", oldRoot);
  checkHash("new root", newRoot);
  proof.forEach((p, i) => checkHash(`proof hash ${i}`, p));
  if (proof.length === 0) throw new ProofError("empty consistency proof for different sizes");
  const path = [...proof];
  if ((m & (m - 1n)) === 0n) path.unshift(oldRoot);
  const [A, [m0, n0]] = arith(m, n);
  let fn = A.dec(m0);
  let sn = A.dec(n0);
  while (A.odd(fn)) { fn = A.half(fn); sn = A.half(sn); }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === A.zero) throw new ProofError("consistency proof is too long");
    if (A.odd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (!A.odd(fn)) {
        while (fn !== A.zero && !A.odd(fn)) { fn = A.half(fn); sn = A.half(sn); }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = A.half(fn);
    sn = A.half(sn);
  }
  if (sn !== A.zero) throw new ProofError("consistency proof is too short");
  if (!bytesEqual(fr, oldRoot)) throw new ProofError("consistency proof does not lead to the old root");
  if (!bytesEqual(sr, newRoot)) throw new ProofError("consistency proof does not lead to the new root");
}
