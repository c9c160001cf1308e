// RFC 9942 COSE receipts of inclusion (docs/scitt.md), read as ledger.core.cose_receipt reads
// them: a COSE_Sign1 (tag 18) by the log over the root of its RFC 9162 tree (detached payload),
// the inclusion proof of one leaf in the unprotected header:
//
//   18([ << {1: alg, 4: kid, 15: {1: iss, 6: iat}, 395: 1} >>,
//        {396: {-1: [ << [tree_size, leaf_index, [path...]] >> ]}},  nil,  signature ])
//
// The signature covers ["Signature1", protected, h'', root]; the root is rebuilt from the leaf
// (our CBOR log entry, rebuilt from the JSON receipt) and the path. The grammar is Python's,
// item for item, so that no input gets two verdicts: one CBOR item in its single encoding
// (definite lengths, minimal heads, no duplicate keys, nothing after it), of integers (no
// bignums), byte and text strings (valid UTF-8), arrays, maps keyed by integers or text, booleans and null, at most
// 16 levels deep, the one tag being the outermost. cborg's tokenizer reads the heads (strict:
// minimal); the values are built here, where those rules are checked. Browser-safe.

import { Tokenizer, Type, encode } from "cborg";
import { sha256 } from "@noble/hashes/sha2.js";
import { ml_dsa44 } from "@noble/post-quantum/ml-dsa.js";
import { CoseReceiptError, EntryError, ProofError } from "./errors.js";
import { bytesEqual, toBase64, toHex } from "./bytes.js";
import { verifyEd25519 } from "./ed25519.js";
import { encodeEntry, entryFromReceipt } from "./entry.js";
import { HASH_SIZE, leafHash, rootFromInclusionProof } from "./merkle.js";
import { Ed25519Verifier } from "./note.js";
import { SubtreeCosignatureVerifier } from "./mldsa.js";

/** The registered media type of a COSE receipt (RFC 9943). */
export const COSE_RECEIPT_MEDIA_TYPE = "application/scitt-receipt+cose";
export const ALG_EDDSA = -8;
export const ALG_ML_DSA_44 = -48;
/** Larger than any receipt of ours; as ledger.core.cose_receipt.MAX_RECEIPT_SIZE. */
export const MAX_COSE_RECEIPT_BYTES = 16 * 1024;
/** Nesting levels a receipt's CBOR may have; as ledger.core.cose_receipt.MAX_CBOR_DEPTH. */
export const MAX_CBOR_DEPTH = 16;

const TAG_SIGN1 = 18;
const [HDR_ALG, HDR_CRIT, HDR_KID, HDR_CWT, HDR_VDS, HDR_VDP] = [1, 2, 4, 15, 395, 396];
const VDS_RFC9162_SHA256 = 1;
const VDP_INCLUSION = -1;
const [CWT_ISS, CWT_IAT] = [1, 6];
const UNDERSTOOD = new Set([HDR_ALG, HDR_CRIT, HDR_KID, HDR_CWT, HDR_VDS]);
const SIGNATURE_SIZE = new Map([[ALG_EDDSA, 64], [ALG_ML_DSA_44, 2420]]);
const PUBLIC_KEY_SIZE = new Map([[ALG_EDDSA, 32], [ALG_ML_DSA_44, 1312]]);
const ALG_NAME = new Map([[ALG_EDDSA, "EdDSA"], [ALG_ML_DSA_44, "ML-DSA-44"]]);
const MAX_TREE_SIZE = (1n << 63n) - 1n;
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const TOKENIZER_OPTIONS = { strict: true, allowIndefinite: false, allowUndefined: false, allowBigInt: true, retainStringBytes: true };

/** A tag read from a receipt: its number and content. */
class Tag {
  constructor(tag, value) {
    this.tag = tag;
    this.value = value;
  }
}

function item(tokens, depth, tagged, what) {
  if (depth > MAX_CBOR_DEPTH) throw new CoseReceiptError(`${what} nests deeper than ${MAX_CBOR_DEPTH} levels`);
  const token = tokens.next();
  const type = token.type;
  if (Type.equals(type, Type.uint) || Type.equals(type, Type.negint) || Type.equals(type, Type.bytes)) return token.value;
  if (Type.equals(type, Type.null)) return null;
  if (Type.equals(type, Type.true)) return true;
  if (Type.equals(type, Type.false)) return false;
  if (Type.equals(type, Type.string)) {
    try {
      return UTF8.decode(token.byteValue);
    } catch {
      throw new CoseReceiptError(`${what} is not well-formed CBOR (a text string that is not UTF-8)`);
    }
  }
  if (Type.equals(type, Type.array)) {
    const out = [];
    for (let i = 0; i < token.value; i++) out.push(item(tokens, depth + 1, false, what));
    return out;
  }
  if (Type.equals(type, Type.map)) {
    const out = new Map();
    for (let i = 0; i < token.value; i++) {
      const key = item(tokens, depth + 1, false, what);
      if (!isInt(key) && typeof key !== "string") throw new CoseReceiptError(`${what} has a map key that is not an integer or text`);
      if (out.has(key)) throw new CoseReceiptError(`${what} is not in a single, minimal, definite-length encoding (a duplicate map key)`);
      out.set(key, item(tokens, depth + 1, false, what));
    }
    return out;
  }
  if (Type.equals(type, Type.tag) && tagged) return new Tag(token.value, item(tokens, depth + 1, false, what));
  throw new CoseReceiptError(`${what} holds a ${type.name}: only integers, byte and text strings, arrays, maps, booleans and null are read`);
}

/** One CBOR item in its single encoding, of the plain types above; `tagged`: the outermost item
 * may be a tag (the caller checks which). */
function strict(data, what, { tagged = false } = {}) {
  const tokens = new Tokenizer(data, TOKENIZER_OPTIONS);
  let value;
  try {
    value = item(tokens, 1, tagged, what);
  } catch (e) {
    if (e instanceof CoseReceiptError) throw e;
    throw new CoseReceiptError(`${what} is not well-formed CBOR, or not in a single, minimal, definite-length encoding (${e.message.replace(/^CBOR decode error: /, "")})`);
  }
  if (!tokens.done()) throw new CoseReceiptError(`${what} has bytes after it`);
  return value;
}

const isInt = (v) => typeof v === "bigint" || Number.isInteger(v);
const isUint = (v) => isInt(v) && v >= 0;
const isMap = (v) => v instanceof Map;
const isBytes = (v) => v instanceof Uint8Array;

function parseProtected(raw) {
  if (!isBytes(raw) || raw.length === 0) throw new CoseReceiptError("the protected header must be a non-empty byte string");
  const header = strict(raw, "the protected header");
  if (!isMap(header)) throw new CoseReceiptError("the protected header is not a map");
  const alg = header.get(HDR_ALG);
  if (!SIGNATURE_SIZE.has(alg)) throw new CoseReceiptError("alg (1) must be EdDSA (-8) or ML-DSA-44 (-48)");
  if (header.get(HDR_VDS) !== VDS_RFC9162_SHA256) throw new CoseReceiptError("vds (395) must be 1, RFC9162_SHA256");
  if (header.has(HDR_CRIT)) {
    const crit = header.get(HDR_CRIT);
    const understood = (c) => (isInt(c) || typeof c === "string") && header.has(c) && UNDERSTOOD.has(c);
    if (!Array.isArray(crit) || crit.length === 0 || !crit.every(understood)) {
      throw new CoseReceiptError("crit (2) names a header this verifier does not understand");
    }
  }
  const kid = header.get(HDR_KID) ?? null;
  if (kid !== null && !isBytes(kid)) throw new CoseReceiptError("kid (4) must be a byte string");
  let issuer = null;
  let iat = null;
  if (header.has(HDR_CWT)) {
    const claims = header.get(HDR_CWT);
    if (!isMap(claims)) throw new CoseReceiptError("the CWT claims (15) are not a map");
    issuer = claims.get(CWT_ISS) ?? null;
    iat = claims.get(CWT_IAT) ?? null;
    if (issuer !== null && typeof issuer !== "string") throw new CoseReceiptError("the issuer claim (1) must be text");
    if (iat !== null && !isUint(iat)) throw new CoseReceiptError("the iat claim (6) must be an unsigned integer");
  }
  return { alg, kid, issuer, iat };
}

const bitLength = (n) => (n === 0n ? 0 : n.toString(2).length);
const popCount = (n) => [...n.toString(2)].filter((b) => b === "1").length;

/** How many hashes the RFC 9162 inclusion path of leaf `index` in a tree of `size` has. */
export function inclusionPathLength(index, size) {
  const [i, n] = [BigInt(index), BigInt(size)];
  const inner = bitLength(i ^ (n - 1n));
  return inner + popCount(i >> BigInt(inner));
}

function parseInclusion(unprotected) {
  if (!isMap(unprotected)) throw new CoseReceiptError("the unprotected header is not a map");
  const vdp = unprotected.get(HDR_VDP);
  if (!isMap(vdp) || vdp.size !== 1 || !vdp.has(VDP_INCLUSION)) {
    throw new CoseReceiptError("vdp (396) must be a map holding only inclusion proofs (-1)");
  }
  const proofs = vdp.get(VDP_INCLUSION);
  if (!Array.isArray(proofs) || proofs.length !== 1 || !isBytes(proofs[0])) {
    throw new CoseReceiptError("a receipt must carry exactly one inclusion proof (a bstr)");
  }
  const proof = strict(proofs[0], "the inclusion proof");
  if (!Array.isArray(proof) || proof.length !== 3) throw new CoseReceiptError("the inclusion proof must be [tree_size, leaf_index, path]");
  const [size, index, path] = proof;
  if (!isUint(size) || !isUint(index) || !(BigInt(index) < BigInt(size) && BigInt(size) <= MAX_TREE_SIZE)) {
    throw new CoseReceiptError("the inclusion proof's leaf_index must be below its tree_size");
  }
  if (!Array.isArray(path) || !path.every((h) => isBytes(h) && h.length === HASH_SIZE)) {
    throw new CoseReceiptError("the inclusion path must be an array of 32-byte hashes");
  }
  const want = inclusionPathLength(index, size);
  if (path.length !== want) {
    throw new CoseReceiptError(`the inclusion path has ${path.length} hashes; leaf ${index} of a tree of size ${size} needs ${want}`);
  }
  return { treeSize: BigInt(size), leafIndex: BigInt(index), path };
}

/**
 * A COSE receipt's fields, not yet verified: {protected, alg, algName, kid, issuer, iat,
 * treeSize, leafIndex (BigInt), path, signature}. Throws CoseReceiptError saying what is wrong.
 */
export function parseCoseReceipt(data) {
  if (!isBytes(data) || data.length === 0) throw new CoseReceiptError("a COSE receipt must be non-empty bytes");
  if (data.length > MAX_COSE_RECEIPT_BYTES) throw new CoseReceiptError(`a COSE receipt is at most ${MAX_COSE_RECEIPT_BYTES} bytes`);
  const outer = strict(data, "the receipt", { tagged: true });
  if (!(outer instanceof Tag) || outer.tag !== TAG_SIGN1) throw new CoseReceiptError("not a COSE_Sign1 (tag 18)");
  if (!Array.isArray(outer.value) || outer.value.length !== 4) throw new CoseReceiptError("a COSE_Sign1 is [protected, unprotected, payload, signature]");
  const [protectedBytes, unprotected, payload, signature] = outer.value;
  const header = parseProtected(protectedBytes);
  const inclusion = parseInclusion(unprotected);
  if (payload !== null) throw new CoseReceiptError("the payload must be detached (nil): it is the root the proof leads to");
  const size = SIGNATURE_SIZE.get(header.alg);
  const algName = ALG_NAME.get(header.alg);
  if (!isBytes(signature) || signature.length !== size) throw new CoseReceiptError(`an ${algName} signature is ${size} bytes`);
  return Object.freeze({ protected: protectedBytes, ...header, algName, ...inclusion, signature });
}

/** RFC 9052 §4.4 Sig_structure of a COSE_Sign1 with empty external AAD. */
export function coseSigStructure(protectedBytes, payload) {
  return encode(["Signature1", protectedBytes, new Uint8Array(0), payload]);
}

/** A log key as a COSE key {alg, publicKey, kid}: kid the RFC 9679 thumbprint (SHA-256). */
export function coseKey(alg, publicKey) {
  if (PUBLIC_KEY_SIZE.get(alg) !== publicKey?.length) throw new CoseReceiptError(`not a ${ALG_NAME.get(alg) ?? alg} public key`);
  // RFC 9679 §4 (OKP: kty, crv, x) and RFC 9964 (AKP: kty, alg, pub), deterministic CBOR
  const params = alg === ALG_EDDSA ? new Map([[1, 1], [-1, 6], [-2, publicKey]]) : new Map([[1, 7], [3, ALG_ML_DSA_44], [-1, publicKey]]);
  return Object.freeze({ alg, algName: ALG_NAME.get(alg), publicKey, kid: sha256(encode(params)) });
}

/** The COSE keys of trusted log keys (Ed25519: EdDSA, ML-DSA-44: ML-DSA-44); others are none. */
export function coseKeysOf(logKeys) {
  const out = [];
  for (const k of logKeys) {
    if (k instanceof Ed25519Verifier) out.push(coseKey(ALG_EDDSA, k.publicKey));
    else if (k instanceof SubtreeCosignatureVerifier) out.push(coseKey(ALG_ML_DSA_44, k.publicKey));
  }
  return out;
}

function keyFor(receipt, keys) {
  const sameAlg = keys.filter((k) => k.alg === receipt.alg);
  if (receipt.kid !== null) {
    const key = sameAlg.find((k) => bytesEqual(k.kid, receipt.kid));
    if (key === undefined) throw new CoseReceiptError(`no trusted ${receipt.algName} key has kid ${toHex(receipt.kid)}`);
    return key;
  }
  if (sameAlg.length !== 1) {
    throw new CoseReceiptError(`the receipt names no kid and ${sameAlg.length} trusted ${receipt.algName} keys could have signed it`);
  }
  return sameAlg[0];
}

async function signatureVerifies(key, message, signature) {
  if (key.alg === ALG_EDDSA) return verifyEd25519(key.publicKey, message, signature);
  try {
    return ml_dsa44.verify(signature, message, key.publicKey);
  } catch {
    return false;
  }
}

/**
 * Check a COSE receipt (bytes) against the leaf `entry` (bytes) and COSE `keys` (coseKey):
 * resolves to {receipt, root}; rejects with CoseReceiptError. As ledger's verify_receipt.
 */
export async function verifyCoseInclusion(data, entry, keys) {
  const receipt = parseCoseReceipt(data);
  const key = keyFor(receipt, keys);
  let root;
  try {
    root = rootFromInclusionProof(receipt.leafIndex, receipt.treeSize, leafHash(entry), receipt.path);
  } catch (e) {
    if (e instanceof ProofError) throw new CoseReceiptError(`the inclusion proof does not evaluate: ${e.message}`);
    throw e;
  }
  if (!(await signatureVerifies(key, coseSigStructure(receipt.protected, root), receipt.signature))) {
    throw new CoseReceiptError("the signature does not verify over the root the inclusion proof leads to: the receipt is not for this entry, or was altered");
  }
  return { receipt, root };
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Verify the COSE receipt `data` (bytes) of the tool call whose rs-tool-call/1 receipt (JSON
 * object) is `receipt`, under the trusted log keys of `trust` (makeTrust's, or a list of log
 * key verifiers): the entry is rebuilt from the receipt, the inclusion proof leads from it to a
 * root the log signed with a trusted key of the receipt's log (Ed25519 for EdDSA, ML-DSA-44 for
 * ML-DSA-44), whose issuer is the receipt's `ledger.origin` and whose leaf index is its
 * `ledger.index`. Resolves to {alg, kid, issuer, iat, treeSize, leafIndex, root}; rejects with
 * CoseReceiptError.
 */
export async function verifyCoseReceipt(receipt, data, trust) {
  const ledger = isObject(receipt) && isObject(receipt.ledger) ? receipt.ledger : null;
  if (ledger === null || typeof ledger.origin !== "string" || !Number.isSafeInteger(ledger.index) || ledger.index < 0) {
    throw new CoseReceiptError("the receipt has no ledger origin and index to check the COSE receipt against");
  }
  let entry;
  try {
    entry = encodeEntry(entryFromReceipt(receipt));
  } catch (e) {
    if (e instanceof EntryError) throw new CoseReceiptError(`the receipt's log entry cannot be rebuilt: ${e.message}`);
    throw e;
  }
  const logKeys = Array.isArray(trust) ? trust : trust?.logKeys ?? [];
  const keys = coseKeysOf(logKeys.filter((k) => k.name === ledger.origin));
  if (keys.length === 0) throw new CoseReceiptError(`no trusted log key for origin '${ledger.origin}'`);
  const { receipt: cose, root } = await verifyCoseInclusion(data, entry, keys);
  if (cose.issuer !== ledger.origin) {
    throw new CoseReceiptError(`the COSE receipt's issuer ${cose.issuer === null ? "is missing" : JSON.stringify(cose.issuer)}; the receipt's log is '${ledger.origin}'`);
  }
  if (cose.leafIndex !== BigInt(ledger.index)) {
    throw new CoseReceiptError(`the COSE receipt proves leaf ${cose.leafIndex}; the receipt's entry is ${ledger.index}`);
  }
  return Object.freeze({ alg: cose.algName, kid: cose.kid, issuer: cose.issuer, iat: cose.iat, treeSize: cose.treeSize, leafIndex: cose.leafIndex, root });
}

/**
 * verifyCoseReceipt as a verdict for a report: {status: "passed" | "failed", reason}, and when
 * it passed {alg, tree_size, leaf_index, root (base64)} (the JSON report's `cose`).
 */
export async function checkCoseReceipt(receipt, data, trust) {
  let r;
  try {
    r = await verifyCoseReceipt(receipt, data, trust);
  } catch (e) {
    if (e instanceof CoseReceiptError) return { status: "failed", reason: e.message };
    throw e;
  }
  const [size, index] = [r.treeSize, r.leafIndex].map((n) => (n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : String(n)));
  return {
    status: "passed",
    reason: `${r.alg}, signed by the log '${r.issuer}': entry ${index} is in the tree of size ${size} (root ${toBase64(r.root)})`,
    alg: r.alg, tree_size: size, leaf_index: index, root: toBase64(r.root),
  };
}
