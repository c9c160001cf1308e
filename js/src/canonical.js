// Canonical JSON (RFC 8785, JCS) for everything hashed or signed, with the same admission rule
// as notary.canonical: a value must mean the same thing to JavaScript and to Python, so lone
// surrogates, non-finite numbers, integers a double would change (UnsafeInteger from parseJson)
// and anything that is not plain JSON data are refused with the path of the offending value.
// The serialization itself is the `canonicalize` package's.

import canonicalize from "canonicalize";
import { CanonicalizationError } from "./errors.js";
import { UnsafeInteger } from "./json.js";
import { firstLoneSurrogate, isWellFormed, utf8 } from "./bytes.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { toHex } from "./bytes.js";

/** Deepest nesting of arrays and objects accepted (the root counts), as in Python. */
export const MAX_DEPTH = 256;

const IDENTIFIER_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

function asciiJson(key) {
  // JSON string with every non-ASCII code unit escaped (Python's json.dumps(ensure_ascii=True)).
  let out = '"';
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else if (c === 0x0a) out += "\\n";
    else if (c === 0x0d) out += "\\r";
    else if (c === 0x09) out += "\\t";
    else if (c === 0x08) out += "\\b";
    else if (c === 0x0c) out += "\\f";
    else if (c < 0x20 || c > 0x7e) out += "\\u" + c.toString(16).padStart(4, "0");
    else out += key[i];
  }
  return out + '"';
}

/** Path of a member (string key) or element (integer index) of `parent`. */
export function childPath(parent, key) {
  if (typeof key === "number") return `${parent}[${key}]`;
  if (IDENTIFIER_RE.test(key)) return `${parent}.${key}`;
  return `${parent}[${asciiJson(key)}]`;
}

function pathOf(chain) {
  let out = String(chain[0]);
  for (let i = 1; i < chain.length; i++) out = childPath(out, chain[i]);
  return out;
}

function surrogateProblem(text, what) {
  const found = firstLoneSurrogate(text);
  if (found === null) return null;
  const hex = found.unit.toString(16).toUpperCase().padStart(4, "0");
  return `${what} contains a lone surrogate U+${hex} at index ${found.index}; it is not valid ` +
    "Unicode and cannot be encoded as UTF-8";
}

function isPlainObject(v) {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function typeName(v) {
  if (v === undefined) return "undefined";
  if (typeof v === "bigint") return "bigint";
  if (typeof v === "function") return "function";
  if (typeof v === "symbol") return "symbol";
  if (v instanceof Uint8Array) return "Uint8Array";
  return v?.constructor?.name ?? typeof v;
}

function scalarProblem(v) {
  if (v === null || typeof v === "boolean") return null;
  if (typeof v === "string") return isWellFormed(v) ? null : surrogateProblem(v, "string");
  if (typeof v === "number") {
    if (Number.isFinite(v)) return null;
    return `${Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity"} is not a JSON number ` +
      "(NaN and infinities are refused)";
  }
  if (v instanceof UnsafeInteger) {
    return `integer ${v.literal} is beyond ±(2^53−1) and JavaScript would read it as ` +
      `${JSON.stringify(v.rounded)}; send such numbers as strings`;
  }
  return `${typeName(v)} is not a JSON value`;
}

/**
 * Refuse, naming the path, any value JavaScript and JCS cannot represent faithfully (see the
 * module comment). Iterative, depth-first in document order. Throws CanonicalizationError.
 */
export function checkJsSafe(value, path = "$") {
  if (!Array.isArray(value) && !isPlainObject(value)) {
    const problem = scalarProblem(value);
    if (problem !== null) throw new CanonicalizationError(path, problem);
    return;
  }
  const stack = [{ value, keys: null, i: 0, chain: [path] }];
  const open = (container, chain) => {
    const frame = { value: container, keys: null, i: 0, chain };
    if (!Array.isArray(container)) {
      frame.keys = Object.keys(container);
      for (const key of frame.keys) {
        if (!isWellFormed(key)) {
          throw new CanonicalizationError(pathOf([...chain, key]), surrogateProblem(key, "object key"));
        }
      }
    }
    return frame;
  };
  stack[0] = open(value, [path]);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1];
    const container = frame.value;
    const n = frame.keys === null ? container.length : frame.keys.length;
    if (frame.i >= n) { stack.pop(); continue; }
    const key = frame.keys === null ? frame.i : frame.keys[frame.i];
    frame.i++;
    if (frame.keys === null && !(key in container)) {
      throw new CanonicalizationError(pathOf([...frame.chain, key]), "a hole in an array is not a JSON value");
    }
    const item = container[key];
    if (Array.isArray(item) || isPlainObject(item)) {
      const chain = [...frame.chain, key];
      if (stack.length >= MAX_DEPTH) {
        throw new CanonicalizationError(pathOf(chain), `nesting is deeper than ${MAX_DEPTH} arrays/objects`);
      }
      stack.push(open(item, chain));
      continue;
    }
    if (typeof item === "string" && isWellFormed(item)) continue;
    const problem = scalarProblem(item);
    if (problem !== null) throw new CanonicalizationError(pathOf([...frame.chain, key]), problem);
  }
}

/** The RFC 8785 text of `value` after checkJsSafe accepts it. */
export function canonicalText(value) {
  checkJsSafe(value);
  const text = canonicalize(value);
  if (typeof text !== "string") throw new CanonicalizationError("$", "cannot be canonicalized");
  return text;
}

/** The RFC 8785 (JCS) bytes of `value` (UTF-8). */
export function canonicalJson(value) {
  return utf8(canonicalText(value));
}

/** Lower-case hex SHA-256 of the JCS bytes of `value`. */
export function canonicalSha256(value) {
  return toHex(sha256(canonicalJson(value)));
}
