// The log entry (leaf) of one notarized call: deterministic CBOR (RFC 8949 §4.2.1) of
// {spec, id, server, tool, call_sha256 (32-byte string), issued_at}; a verifier rebuilds it from
// the receipt alone. Encoded and decoded with cborg, strict, as notary.core.entry with cbor2.

import { encode, decode } from "cborg";
import { EntryError } from "./errors.js";
import { bytesEqual, fromHex, toHex } from "./bytes.js";
import { isIssuedAt, isReceiptId, issuedAtProblem } from "./ids.js";
import { SPEC, nameProblem } from "./records.js";

export const MAX_ENTRY_BYTES = 65535;
const KEYS = ["spec", "id", "server", "tool", "call_sha256", "issued_at"];
const HEX64 = /^[0-9a-f]{64}$/;

function checkFields({ id, server, tool, callSha256, issuedAt }) {
  if (!isReceiptId(id)) throw new EntryError(`id ${JSON.stringify(id)} is not a receipt id (tc_ + 22 base64url)`);
  for (const [name, value] of [["server", server], ["tool", tool]]) {
    const problem = nameProblem(value);
    if (problem !== null) throw new EntryError(`${name} ${problem}`);
  }
  if (!(callSha256 instanceof Uint8Array) || callSha256.length !== 32) throw new EntryError("call_sha256 must be exactly 32 bytes");
  if (!isIssuedAt(issuedAt)) throw new EntryError(issuedAtProblem(issuedAt));
}

const CHECKED = new WeakSet();

/** The entry's deterministic CBOR bytes. */
export function encodeEntry(fields) {
  if (!CHECKED.has(fields)) checkFields(fields);
  const data = encode({
    spec: SPEC, id: fields.id, server: fields.server, tool: fields.tool,
    call_sha256: fields.callSha256, issued_at: fields.issuedAt,
  });
  if (data.length > MAX_ENTRY_BYTES) throw new EntryError(`entry is ${data.length} bytes; at most ${MAX_ENTRY_BYTES} fit`);
  return data;
}

/** The entry fields a receipt commits to, from the receipt's own members. Throws EntryError. */
export function entryFromReceipt(receipt) {
  if (receipt === null || typeof receipt !== "object" || Array.isArray(receipt)) throw new EntryError("receipt must be an object");
  const missing = KEYS.filter((k) => !Object.prototype.hasOwnProperty.call(receipt, k)).sort();
  if (missing.length > 0) throw new EntryError(`receipt lacks ${JSON.stringify(missing)}`);
  if (receipt.spec !== SPEC) throw new EntryError(`receipt spec ${JSON.stringify(receipt.spec)} is not ${JSON.stringify(SPEC)}`);
  if (typeof receipt.call_sha256 !== "string" || !HEX64.test(receipt.call_sha256)) {
    throw new EntryError("receipt call_sha256 must be 64 lower-case hex characters");
  }
  for (const k of ["id", "server", "tool", "issued_at"]) {
    if (typeof receipt[k] !== "string") throw new EntryError(`${k} must be a text string, not ${typeof receipt[k]}`);
  }
  const fields = {
    id: receipt.id, server: receipt.server, tool: receipt.tool,
    callSha256: fromHex(receipt.call_sha256), issuedAt: receipt.issued_at,
  };
  checkFields(fields);
  CHECKED.add(fields);
  return Object.freeze(fields);
}

/**
 * Parse leaf bytes strictly: the exact keys and types, and the deterministic encoding (the
 * decoded entry must re-encode to the same bytes). Returns receipt-style fields
 * {spec, id, server, tool, call_sha256 (hex), issued_at}. Throws EntryError.
 */
export function decodeEntry(data) {
  if (!(data instanceof Uint8Array)) throw new EntryError("entry must be bytes");
  if (data.length > MAX_ENTRY_BYTES) throw new EntryError(`entry is ${data.length} bytes; at most ${MAX_ENTRY_BYTES} fit`);
  let obj;
  try {
    obj = decode(data, { strict: true, rejectDuplicateMapKeys: true, useMaps: true, tags: [] });
  } catch (e) {
    throw new EntryError(`entry is not valid CBOR: ${e.message}`);
  }
  if (!(obj instanceof Map)) throw new EntryError("entry must be a CBOR map");
  const keys = [...obj.keys()];
  const extra = keys.filter((k) => !KEYS.includes(k));
  const missing = KEYS.filter((k) => !obj.has(k));
  if (extra.length > 0 || missing.length > 0) {
    throw new EntryError(`entry keys differ: missing ${JSON.stringify(missing.sort())}, unexpected ${JSON.stringify(extra.map(String))}`);
  }
  if (obj.get("spec") !== SPEC) throw new EntryError(`entry spec ${JSON.stringify(obj.get("spec"))} is not ${JSON.stringify(SPEC)}`);
  const digest = obj.get("call_sha256");
  if (!(digest instanceof Uint8Array)) throw new EntryError("call_sha256 must be a byte string");
  for (const k of ["id", "server", "tool", "issued_at"]) {
    if (typeof obj.get(k) !== "string") throw new EntryError(`${k} must be a text string`);
  }
  const fields = { id: obj.get("id"), server: obj.get("server"), tool: obj.get("tool"), callSha256: digest, issuedAt: obj.get("issued_at") };
  if (!bytesEqual(encodeEntry(fields), data)) throw new EntryError("entry is not in deterministic CBOR encoding");
  return { spec: SPEC, id: fields.id, server: fields.server, tool: fields.tool, call_sha256: toHex(digest), issued_at: fields.issuedAt };
}
