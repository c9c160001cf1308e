// rs-tool-call/1 call records and call_sha256 (docs/formats.md, "The call record and call_sha256").
//
// call_sha256 = hex SHA-256 of the JCS bytes of {spec, server, tool, arguments, result, salt},
// result = {content, structuredContent?, isError?} exactly as the client received them:
// structuredContent may be any JSON value and is hashed as sent (null included), omitted only
// when the result has no such member; resultType and _meta are never hashed.

import { RecordError } from "./errors.js";
import { canonicalJson, checkJsSafe, childPath } from "./canonical.js";
import { codePointLength, isWellFormed, toHex } from "./bytes.js";
import { sha256 } from "@noble/hashes/sha2.js";

export const SPEC = "rs-tool-call/1";
export const SALT_MIN_BYTES = 16;
export const MAX_NAME_CHARS = 256;

const SALT_RE = /^(?:[0-9a-f]{2}){16,}$/;
const RECORD_KEYS = new Set(["spec", "server", "tool", "arguments", "result", "salt"]);

const has = (obj, key) => Object.prototype.hasOwnProperty.call(obj, key);
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const typeOf = (v) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

/** A fresh salt: 16 CSPRNG bytes as 32 lower-case hex characters. */
export function newSalt() {
  const bytes = new Uint8Array(SALT_MIN_BYTES);
  globalThis.crypto.getRandomValues(bytes);
  return toHex(bytes);
}

/** Why `value` is not an acceptable server or tool name, or null if it is. */
export function nameProblem(value) {
  if (typeof value !== "string") return `must be a string, not ${typeOf(value)}`;
  if (value.length === 0) return "must not be empty";
  const n = codePointLength(value);
  if (n > MAX_NAME_CHARS) return `is ${n} characters long; at most ${MAX_NAME_CHARS} are allowed`;
  if (!isWellFormed(value)) return "contains a lone surrogate (not valid Unicode)";
  return null;
}

/** Whether a result may be notarized: resultType absent/null or "complete". */
export function isFinal(result) {
  const t = result?.resultType;
  return t === undefined || t === null || t === "complete";
}

/**
 * The part of a CallToolResult (wire JSON) that is hashed: {content, structuredContent?,
 * isError?}. `content` must be an array; `structuredContent` is kept whenever the member is
 * present (any JSON value, null included); `isError` must be a boolean (null counts as absent,
 * as a JSON null there is no value). Throws RecordError.
 */
export function hashedResult(result) {
  if (!isObject(result)) throw new RecordError("$.result", `must be an object, not ${typeOf(result)}`);
  if (!has(result, "content")) throw new RecordError("$.result.content", "is required (a list of content blocks)");
  const content = result.content;
  if (!Array.isArray(content)) throw new RecordError("$.result.content", `must be a list, not ${typeOf(content)}`);
  const out = { content };
  if (has(result, "structuredContent") && result.structuredContent !== undefined) {
    out.structuredContent = result.structuredContent;
  }
  const isError = result.isError;
  if (isError !== undefined && isError !== null) {
    if (typeof isError !== "boolean") throw new RecordError("$.result.isError", `must be a boolean, not ${typeOf(isError)}`);
    out.isError = isError;
  }
  return out;
}

/**
 * A validated call record {spec, server, tool, arguments, result, salt} (result reduced by
 * hashedResult), ready to hash. Throws RecordError or CanonicalizationError.
 */
export function makeRecord({ server, tool, arguments: args, result, salt }) {
  for (const [key, value] of [["server", server], ["tool", tool]]) {
    const problem = nameProblem(value);
    if (problem !== null) throw new RecordError(`$.${key}`, problem);
  }
  if (!isObject(args)) {
    throw new RecordError("$.arguments", `must be a JSON object, not ${typeOf(args)}; use {} when the call had no arguments`);
  }
  if (typeof salt !== "string") throw new RecordError("$.salt", `must be a string, not ${typeOf(salt)}`);
  if (!SALT_RE.test(salt)) {
    throw new RecordError("$.salt", `must be lower-case hex of at least ${SALT_MIN_BYTES} bytes (${2 * SALT_MIN_BYTES}+ characters, even length)`);
  }
  if (!isObject(result)) throw new RecordError("$.result", `must be an object, not ${typeOf(result)}`);
  if (!isFinal(result)) {
    throw new RecordError("$.result.resultType", `${JSON.stringify(result.resultType)} is not final; only results with resultType absent or 'complete' are notarized`);
  }
  const record = { spec: SPEC, server, tool, arguments: args, result: hashedResult(result), salt };
  checkJsSafe(record);
  return record;
}

/**
 * A record from its JSON form {server?, tool, arguments, result, salt, spec?} (as `notary hash`
 * and the verify endpoint take it); `server` fills in a record that omits it. Unknown members
 * are refused. Throws RecordError or CanonicalizationError.
 */
export function recordFromJson(obj, { server } = {}) {
  if (!isObject(obj)) throw new RecordError("$", `a call record must be an object, not ${typeOf(obj)}`);
  const unknown = Object.keys(obj).filter((k) => !RECORD_KEYS.has(k)).sort();
  if (unknown.length > 0) {
    throw new RecordError(childPath("$", unknown[0]), `unknown member(s) ${JSON.stringify(unknown)}; expected ${JSON.stringify([...RECORD_KEYS].sort())}`);
  }
  if (has(obj, "spec") && obj.spec !== SPEC) throw new RecordError("$.spec", `must be ${JSON.stringify(SPEC)}, got ${JSON.stringify(obj.spec)}`);
  const fields = { ...obj };
  if (!has(fields, "server") && server !== undefined && server !== null) fields.server = server;
  for (const key of ["server", "tool", "arguments", "result", "salt"]) {
    if (!has(fields, key)) throw new RecordError(`$.${key}`, "is required");
  }
  for (const key of ["server", "tool", "salt"]) {
    if (typeof fields[key] !== "string") throw new RecordError(`$.${key}`, `must be a string, not ${typeOf(fields[key])}`);
  }
  if (!isObject(fields.arguments)) throw new RecordError("$.arguments", `must be an object, not ${typeOf(fields.arguments)}`);
  if (!isObject(fields.result)) throw new RecordError("$.result", `must be an object, not ${typeOf(fields.result)}`);
  return makeRecord(fields);
}

/** The JCS bytes call_sha256 is computed over, of a record made by makeRecord/recordFromJson. */
export function recordBytes(record) {
  return canonicalJson(record);
}

/**
 * call_sha256 of a call record: lower-case hex SHA-256 of its JCS bytes. Accepts the record
 * JSON form (validated with recordFromJson; pass `server` when the record omits it).
 */
export function callSha256(record, { server } = {}) {
  return toHex(sha256(canonicalJson(recordFromJson(record, { server }))));
}
