// RFC 9162 §2.1 Merkle tree hashing and proof verification (§2.1.3.2 inclusion, §2.1.4.2
// consistency) with DESIGN.md's edge rules. Sizes and indexes are BigInt (trees reach 2^64).

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

/** The root that `proof` implies for `leaf` (a leaf hash) at `index` in a tree of `size`. */
export function rootFromInclusionProof(index, size, leaf, proof) {
  let fn = big(index, "index");
  let sn = big(size, "size");
  if (!(fn >= 0n && fn < sn)) throw new ProofError(`index ${fn} is not in a tree of size ${sn}`);
  checkHash("leaf hash", leaf);
  sn -= 1n;
  let r = leaf;
  proof.forEach((p, i) => {
    checkHash(`proof hash ${i}`, p);
    if (sn === 0n) throw new ProofError("inclusion proof is longer than the tree is deep");
    if ((fn & 1n) === 1n || fn === sn) {
      r = nodeHash(p, r);
      if ((fn & 1n) === 0n) {
        while (fn !== 0n && (fn & 1n) === 0n) { fn >>= 1n; sn >>= 1n; }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  });
  if (sn !== 0n) throw new ProofError("inclusion proof is too short");
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
  let fn = m - 1n;
  let sn = n - 1n;
  while ((fn & 1n) === 1n) { fn >>= 1n; sn >>= 1n; }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0n) throw new ProofError("consistency proof is too long");
    if ((fn & 1n) === 1n || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if ((fn & 1n) === 0n) {
        while (fn !== 0n && (fn & 1n) === 0n) { fn >>= 1n; sn >>= 1n; }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new ProofError("consistency proof is too short");
  if (!bytesEqual(fr, oldRoot)) throw new ProofError("consistency proof does not lead to the old root");
  if (!bytesEqual(sr, newRoot)) throw new ProofError("consistency proof does not lead to the new root");
}
