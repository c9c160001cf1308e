// Receipts and the receipt-key JWKS (docs/formats.md, "Receipts"), as notary.core.receipts.
//
// A receipt is {spec, id, server, tool, call_sha256, issued_at, ledger{origin, index,
// entry_url}, signature{alg, kid, sig}, proof?}; `sig` is Ed25519 (base64url) over the JCS bytes
// of the receipt without `signature` and `proof`. The JWKS holds RFC 8037 OKP Ed25519 keys
// whose `kid` is the RFC 7638 thumbprint.

import { sha256 } from "@noble/hashes/sha2.js";
import { CanonicalizationError, JwksError, ReceiptFormatError, ReceiptSignatureError } from "./errors.js";
import { canonicalText } from "./canonical.js";
import { fromBase64Url, isWellFormed, toBase64Url, utf8 } from "./bytes.js";
import { isIssuedAt, isReceiptId, issuedAtProblem } from "./ids.js";
import { isFloatLiteral, parseJson } from "./json.js";
import { SPEC, nameProblem } from "./records.js";
import { verifyEd25519 } from "./ed25519.js";

export const RECEIPT_ALG = "EdDSA";
const SIGNED_KEYS = ["spec", "id", "server", "tool", "call_sha256", "issued_at", "ledger"];
const OPTIONAL_KEYS = ["proof", "signature"];
const LEDGER_KEYS = ["origin", "index", "entry_url"];
const SIGNATURE_KEYS = ["alg", "kid", "sig"];
const HEX64 = /^[0-9a-f]{64}$/;

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const show = (v) => (typeof v === "string" ? JSON.stringify(v) : v === undefined ? "undefined" : JSON.stringify(v) ?? String(v));

function checkKeys(obj, required, optional, where) {
  const keys = Object.keys(obj);
  const missing = required.filter((k) => !Object.prototype.hasOwnProperty.call(obj, k)).sort();
  const extra = keys.filter((k) => !required.includes(k) && !optional.includes(k)).sort();
  if (missing.length || extra.length) {
    const parts = [];
    if (missing.length) parts.push(`missing ${JSON.stringify(missing)}`);
    if (extra.length) parts.push(`unexpected ${JSON.stringify(extra)}`);
    throw new ReceiptFormatError(`${where}: ${parts.join(", ")}`);
  }
}

function nonEmptyString(obj, key, where) {
  if (typeof obj[key] !== "string" || obj[key].length === 0) throw new ReceiptFormatError(`${where}.${key} must be a non-empty string`);
}

/** Check a receipt's shape strictly (not its signature); throws ReceiptFormatError. */
export function validateReceiptShape(receipt) {
  if (!isObject(receipt)) throw new ReceiptFormatError(`receipt must be an object, not ${receipt === null ? "null" : Array.isArray(receipt) ? "array" : typeof receipt}`);
  checkKeys(receipt, SIGNED_KEYS, OPTIONAL_KEYS, "$");
  if (receipt.spec !== SPEC) throw new ReceiptFormatError(`$.spec must be ${JSON.stringify(SPEC)}, got ${show(receipt.spec)}`);
  if (!isReceiptId(receipt.id)) throw new ReceiptFormatError(`$.id ${show(receipt.id)} is not a receipt id (tc_ + 22 base64url)`);
  for (const key of ["server", "tool"]) {
    const problem = nameProblem(receipt[key]);
    if (problem !== null) throw new ReceiptFormatError(`$.${key} ${problem}`);
  }
  if (typeof receipt.call_sha256 !== "string" || !HEX64.test(receipt.call_sha256)) {
    throw new ReceiptFormatError("$.call_sha256 must be 64 lower-case hex characters");
  }
  if (typeof receipt.issued_at !== "string") throw new ReceiptFormatError("$.issued_at must be a string");
  if (!isIssuedAt(receipt.issued_at)) throw new ReceiptFormatError(`$.issued_at: ${issuedAtProblem(receipt.issued_at)}`);
  const ledger = receipt.ledger;
  if (!isObject(ledger)) throw new ReceiptFormatError("$.ledger must be an object");
  checkKeys(ledger, LEDGER_KEYS, [], "$.ledger");
  nonEmptyString(ledger, "origin", "$.ledger");
  nonEmptyString(ledger, "entry_url", "$.ledger");
  const index = ledger.index;
  if (!Number.isSafeInteger(index) || index < 0 || isFloatLiteral(ledger, "index")) {
    throw new ReceiptFormatError("$.ledger.index must be an integer from 0 to 2^53-1");
  }
  if ("proof" in receipt && typeof receipt.proof !== "string") throw new ReceiptFormatError("$.proof must be a string (tlog-proof text)");
  if ("signature" in receipt) {
    const signature = receipt.signature;
    if (!isObject(signature)) throw new ReceiptFormatError("$.signature must be an object");
    checkKeys(signature, SIGNATURE_KEYS, [], "$.signature");
    for (const key of [...SIGNATURE_KEYS].sort()) nonEmptyString(signature, key, "$.signature");
  }
}

/**
 * A receipt from JSON text (bounded parse) or an object, shape-checked; returns the object.
 * Throws ReceiptFormatError (JsonError for unparseable text).
 */
export function parseReceipt(input) {
  const receipt = typeof input === "string" || input instanceof Uint8Array ? parseJson(input) : input;
  validateReceiptShape(receipt);
  return receipt;
}

const RECEIPT_BODY_KEYS = "call_sha256,id,issued_at,ledger,server,spec,tool";

// The JCS text of a receipt body of exactly the receipt shape (string members, a safe integer
// index), written directly: JCS orders these keys this way, and writes a well-formed string as
// JSON.stringify does and a safe integer as its decimal digits. Null when the body has any other
// shape, for which the general canonicalization below is used. The tests compare the two.
function receiptBodyText(receipt) {
  const keys = Object.keys(receipt).filter((k) => k !== "signature" && k !== "proof").sort().join(",");
  if (keys !== RECEIPT_BODY_KEYS) return null;
  const ledger = receipt.ledger;
  if (ledger === null || typeof ledger !== "object" || Array.isArray(ledger) || Object.keys(ledger).sort().join(",") !== "entry_url,index,origin") return null;
  const strings = [receipt.call_sha256, receipt.id, receipt.issued_at, ledger.entry_url, ledger.origin, receipt.server, receipt.spec, receipt.tool];
  if (!strings.every((v) => typeof v === "string" && isWellFormed(v))) return null;
  if (!Number.isSafeInteger(ledger.index)) return null;
  const q = JSON.stringify;
  return `{"call_sha256":${q(receipt.call_sha256)},"id":${q(receipt.id)},"issued_at":${q(receipt.issued_at)},` +
    `"ledger":{"entry_url":${q(ledger.entry_url)},"index":${ledger.index + 0},"origin":${q(ledger.origin)}},` +
    `"server":${q(receipt.server)},"spec":${q(receipt.spec)},"tool":${q(receipt.tool)}}`;
}

/** The bytes a receipt signature covers: JCS of the receipt minus signature and proof. */
export function signedBytes(receipt) {
  const fast = receiptBodyText(receipt);
  if (fast !== null) return utf8(fast);
  return utf8(canonicalText(bodyOf(receipt)));
}

/** signedBytes through the general JCS path only (the tests hold the fast path to it). */
export function signedBytesGeneral(receipt) {
  return utf8(canonicalText(bodyOf(receipt)));
}

function bodyOf(receipt) {
  const body = {};
  for (const [k, v] of Object.entries(receipt)) {
    if (k !== "signature" && k !== "proof") Object.defineProperty(body, k, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return body;
}

/** RFC 7638 SHA-256 thumbprint of the OKP Ed25519 key with this `x`. */
export function jwkThumbprint(x) {
  return toBase64Url(sha256(utf8(`{"crv":"Ed25519","kty":"OKP","x":${JSON.stringify(x)}}`)));
}

function parseEd25519Jwk(jwk, where) {
  if ("d" in jwk) throw new JwksError(`${where}: contains a private key ('d'); a JWKS must be public`);
  if (typeof jwk.x !== "string") throw new JwksError(`${where}: 'x' must be a base64url string`);
  let publicKey;
  try {
    publicKey = fromBase64Url(jwk.x);
  } catch (e) {
    throw new JwksError(`${where}: 'x' ${e.message}`);
  }
  if (publicKey.length !== 32) throw new JwksError(`${where}: 'x' must encode 32 bytes, got ${publicKey.length}`);
  const thumbprint = jwkThumbprint(jwk.x);
  const kid = "kid" in jwk ? jwk.kid : thumbprint;
  if (kid !== thumbprint) throw new JwksError(`${where}: kid ${show(kid)} is not the key's RFC 7638 thumbprint ${JSON.stringify(thumbprint)}`);
  const alg = "alg" in jwk ? jwk.alg : RECEIPT_ALG;
  if (alg !== RECEIPT_ALG && alg !== "Ed25519") throw new JwksError(`${where}: alg ${show(alg)} does not fit an Ed25519 key`);
  if (("use" in jwk ? jwk.use : "sig") !== "sig") throw new JwksError(`${where}: use ${show(jwk.use)} is not 'sig'`);
  if ("key_ops" in jwk && jwk.key_ops !== null && (!Array.isArray(jwk.key_ops) || !jwk.key_ops.includes("verify"))) {
    throw new JwksError(`${where}: key_ops does not allow 'verify'`);
  }
  return [thumbprint, publicKey];
}

/**
 * The trusted receipt keys by kid. Keys that are not OKP/Ed25519 are skipped; a malformed
 * Ed25519 key, a private one or one whose kid is not its thumbprint is refused (JwksError).
 */
export class Jwks {
  constructor(doc) {
    if (typeof doc === "string" || doc instanceof Uint8Array) doc = parseJson(doc);
    if (!isObject(doc)) throw new JwksError("a JWKS must be an object");
    if (!Array.isArray(doc.keys)) throw new JwksError("a JWKS needs a 'keys' array");
    this.keys = new Map();
    doc.keys.forEach((jwk, i) => {
      const where = `keys[${i}]`;
      if (!isObject(jwk)) throw new JwksError(`${where}: must be an object`);
      if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519") return;
      const [kid, publicKey] = parseEd25519Jwk(jwk, where);
      this.keys.set(kid, publicKey);
    });
  }

  get kids() {
    return [...this.keys.keys()];
  }

  get size() {
    return this.keys.size;
  }

  has(kid) {
    return this.keys.has(kid);
  }

  toJSON() {
    return { keys: [...this.keys].map(([kid, pk]) => ({ kty: "OKP", crv: "Ed25519", x: toBase64Url(pk), kid, alg: RECEIPT_ALG, use: "sig" })) };
  }

  /** Check a receipt's signature (not its shape); throws ReceiptSignatureError. */
  async verify(receipt) {
    if (!isObject(receipt)) throw new ReceiptSignatureError("malformed", "receipt must be an object");
    if (!("signature" in receipt)) throw new ReceiptSignatureError("missing", "receipt has no signature");
    const signature = receipt.signature;
    const keys = isObject(signature) ? Object.keys(signature).sort() : null;
    if (keys === null || keys.join(",") !== "alg,kid,sig") {
      throw new ReceiptSignatureError("malformed", "signature must be an object with exactly alg, kid and sig");
    }
    const { alg, kid, sig } = signature;
    if (alg !== RECEIPT_ALG) throw new ReceiptSignatureError("bad_alg", `alg ${show(alg)} is not ${JSON.stringify(RECEIPT_ALG)}`);
    if (typeof kid !== "string" || !this.keys.has(kid)) throw new ReceiptSignatureError("unknown_kid", `no trusted receipt key has kid ${show(kid)}`);
    if (typeof sig !== "string") throw new ReceiptSignatureError("malformed", "sig must be a base64url string");
    let raw;
    try {
      raw = fromBase64Url(sig);
    } catch (e) {
      throw new ReceiptSignatureError("malformed", `sig: ${e.message}`);
    }
    if (raw.length !== 64) throw new ReceiptSignatureError("malformed", `sig must encode 64 bytes, got ${raw.length}`);
    let message;
    try {
      message = signedBytes(receipt);
    } catch (e) {
      if (e instanceof CanonicalizationError) throw new ReceiptSignatureError("malformed", `receipt is not canonical JSON: ${e.message}`);
      throw e;
    }
    if (!(await verifyEd25519(this.keys.get(kid), message, raw))) {
      throw new ReceiptSignatureError("bad_signature", `Ed25519 signature does not verify under kid ${JSON.stringify(kid)}`);
    }
  }
}
