// Bounded, strict JSON parsing for untrusted input, with the value model of Python's json.loads.
//
// The verifier must reach the same verdict as the Python one on the same bytes, so a document
// is read by the rule of ledger.core.boundedjson.parse_json: besides RFC 8259's grammar, it
// refuses what two parsers could read differently (duplicate member names, `NaN`, `Infinity`
// and `-Infinity`, a byte order mark, bytes that are not UTF-8) and anything nested deeper than
// MAX_JSON_DEPTH, the one bound Python's verifier applies too (notary.verifier.inputs
// MAX_INPUT_DEPTH; the cross-language corpus checks that the two agree). Integers keep their
// exactness and a number written with a fraction or exponent is a float even when its value is
// whole (Python's `1.0` is not an int). JSON.parse cannot tell any of that, so this is a small
// iterative parser:
//
// - an integer literal that a double would change (2^53+1) becomes an `UnsafeInteger` marker
//   carrying its digits, so canonicalization refuses it with its path instead of hashing a
//   rounded number; one that a double holds exactly, or whose double JavaScript writes with the
//   same digits, is a plain number (the rule of notary.canonical._int_problem);
// - whole-valued numbers written as floats are remembered per container (`isFloatLiteral`);
// - size and nesting depth are bounded, nothing recurses, and every failure is a JsonError.

import { JsonError } from "./errors.js";
import { fromUtf8 } from "./bytes.js";

/** Largest JSON text read (Python's notary.verifier.inputs MAX_INPUT_BYTES; the corpus checks). */
export const MAX_JSON_BYTES = 64 * 1024 * 1024;
/**
 * The one nesting bound of verifier input: a call record may nest canonical.js's MAX_DEPTH (256)
 * deep, inside a few levels of saved call or receipt. Python's is notary.verifier.inputs
 * MAX_INPUT_DEPTH; the corpus records it and test/corpus.test.js checks the two are equal.
 */
export const MAX_JSON_DEPTH = 264;
/** Python refuses to convert integer literals longer than this (int max_str_digits). */
const MAX_INT_DIGITS = 4300;

/** An integer literal that no JavaScript number represents faithfully. */
export class UnsafeInteger {
  constructor(literal) {
    this.literal = literal;
    Object.freeze(this);
  }
  /** The number JSON.parse would have produced (a different value). */
  get rounded() {
    return Number(this.literal);
  }
  toString() {
    return this.literal;
  }
  toJSON() {
    return this.literal;
  }
}

const floatLiterals = new WeakMap();

/** Whether `container[key]` was written as a float literal (`1.0`, `2e3`) in parsed JSON. */
export function isFloatLiteral(container, key) {
  const keys = floatLiterals.get(container);
  return keys !== undefined && keys.has(key);
}

function markFloat(container, key) {
  let keys = floatLiterals.get(container);
  if (keys === undefined) {
    keys = new Set();
    floatLiterals.set(container, keys);
  }
  keys.add(key);
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** The value of an integer literal: a number when faithful, else an UnsafeInteger. */
export function integerValue(literal) {
  const value = Number(literal);
  if (Number.isSafeInteger(value) && literal.length <= 16) return value + 0; // -0 is the int 0
  const digits = literal.startsWith("-") ? literal.slice(1) : literal;
  if (digits.length > MAX_INT_DIGITS) {
    throw new JsonError(`an integer of ${digits.length} digits is longer than ${MAX_INT_DIGITS}`);
  }
  const n = BigInt(literal);
  if (n >= -MAX_SAFE && n <= MAX_SAFE) return Number(n) + 0;
  if (!Number.isFinite(value)) return new UnsafeInteger(literal);
  if (BigInt(value) === n) return value; // the double is exactly this integer (2^53, 10^18)
  if (String(value) === n.toString()) return value; // JavaScript writes that double with these digits
  return new UnsafeInteger(literal);
}

function describe(text, pos) {
  if (pos >= text.length) return "the end of the text";
  const c = text.codePointAt(pos);
  const shown = c >= 0x20 && c < 0x7f ? `'${String.fromCodePoint(c)}'` : `U+${c.toString(16).toUpperCase().padStart(4, "0")}`;
  return `${shown} at offset ${pos}`;
}

function setMember(obj, key, value) {
  if (Object.prototype.hasOwnProperty.call(obj, key)) {
    throw new JsonError(`duplicate member name ${JSON.stringify(key.slice(0, 60))}`);
  }
  if (key === "__proto__") {
    Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    obj[key] = value;
  }
}

const NUMBER_RE = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
const STRING_FAST_RE = /[^"\\\u0000-\u001f]*/y;

/**
 * Parse a JSON text (string, or UTF-8 bytes) strictly, as ledger.core.boundedjson.parse_json does.
 * Options: `maxBytes` (default MAX_JSON_BYTES), `maxDepth` (default MAX_JSON_DEPTH nested arrays/objects).
 * Throws JsonError on malformed or oversized input; never anything else.
 */
export function parseJson(input, { maxBytes = MAX_JSON_BYTES, maxDepth = MAX_JSON_DEPTH } = {}) {
  let text;
  if (typeof input === "string") {
    // UTF-16 length <= UTF-8 length <= 3 * UTF-16 length: encode only when it may matter.
    if (input.length > maxBytes || (input.length * 3 > maxBytes && new TextEncoder().encode(input).length > maxBytes)) {
      throw new JsonError(`the JSON text is larger than ${maxBytes} bytes`);
    }
    text = input;
  } else if (input instanceof Uint8Array) {
    if (input.length > maxBytes) throw new JsonError(`the JSON text is larger than ${maxBytes} bytes`);
    try {
      text = fromUtf8(input);
    } catch {
      throw new JsonError("the JSON text is not valid UTF-8");
    }
  } else {
    throw new JsonError("JSON input must be a string or UTF-8 bytes");
  }
  if (text.charCodeAt(0) === 0xfeff) {
    throw new JsonError("the JSON text starts with a byte order mark (BOM); send UTF-8 without one (RFC 8259 §8.1)");
  }
  let pos = 0;
  const len = text.length;
  const fail = (what) => {
    throw new JsonError(`invalid JSON: ${what}, found ${describe(text, pos)}`);
  };
  const skipWs = () => {
    while (pos < len) {
      const c = text.charCodeAt(pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) pos++;
      else break;
    }
  };
  const readString = () => {
    // pos is at the opening quote
    pos++;
    let out = "";
    for (;;) {
      STRING_FAST_RE.lastIndex = pos;
      STRING_FAST_RE.exec(text);
      const end = STRING_FAST_RE.lastIndex;
      if (end > pos) { out += text.slice(pos, end); pos = end; }
      if (pos >= len) fail("an unterminated string");
      const c = text.charCodeAt(pos);
      if (c === 0x22) { pos++; return out; }
      if (c < 0x20) fail("a control character in a string");
      // backslash
      const e = text.charCodeAt(pos + 1);
      switch (e) {
        case 0x22: out += '"'; break;
        case 0x5c: out += "\\"; break;
        case 0x2f: out += "/"; break;
        case 0x62: out += "\b"; break;
        case 0x66: out += "\f"; break;
        case 0x6e: out += "\n"; break;
        case 0x72: out += "\r"; break;
        case 0x74: out += "\t"; break;
        case 0x75: {
          const hex = text.slice(pos + 2, pos + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) { pos++; fail("a bad \\u escape"); }
          out += String.fromCharCode(parseInt(hex, 16));
          pos += 4;
          break;
        }
        default:
          pos++;
          fail("a bad escape");
      }
      pos += 2;
    }
  };
  // Returns [value, isFloatWhole]
  let floatWhole = false;
  const readScalar = () => {
    floatWhole = false;
    const c = text.charCodeAt(pos);
    if (c === 0x22) return readString();
    if (c === 0x74 && text.startsWith("true", pos)) { pos += 4; return true; }
    if (c === 0x66 && text.startsWith("false", pos)) { pos += 5; return false; }
    if (c === 0x6e && text.startsWith("null", pos)) { pos += 4; return null; }
    if ((c === 0x4e && text.startsWith("NaN", pos)) || (c === 0x49 && text.startsWith("Infinity", pos)) ||
        (c === 0x2d && text.startsWith("-Infinity", pos))) {
      throw new JsonError(`${c === 0x4e ? "NaN" : c === 0x49 ? "Infinity" : "-Infinity"} is not a JSON value`);
    }
    NUMBER_RE.lastIndex = pos;
    const m = NUMBER_RE.exec(text);
    if (m === null) fail("a value");
    pos = NUMBER_RE.lastIndex;
    if (m[1] === undefined && m[2] === undefined) return integerValue(m[0]);
    const value = Number(m[0]);
    floatWhole = Number.isInteger(value);
    return value;
  };

  // The stack holds open containers: {value, isArray, key}
  const stack = [];
  let root;
  skipWs();
  if (pos >= len) fail("a value");
  // state: expecting a value
  let value;
  for (;;) {
    // ---- read one value (opening containers pushes and continues)
    skipWs();
    const c = text.charCodeAt(pos);
    let produced = false;
    if (c === 0x7b || c === 0x5b) {
      if (stack.length >= maxDepth) {
        throw new JsonError(`the JSON text nests deeper than ${maxDepth} arrays/objects`);
      }
      const isArray = c === 0x5b;
      const container = isArray ? [] : {};
      pos++;
      skipWs();
      const close = isArray ? 0x5d : 0x7d;
      if (text.charCodeAt(pos) === close) {
        pos++;
        value = container;
        floatWhole = false;
        produced = true;
      } else {
        const frame = { value: container, isArray, key: null };
        stack.push(frame);
        if (!isArray) {
          if (text.charCodeAt(pos) !== 0x22) fail("a string key");
          frame.key = readString();
          skipWs();
          if (text.charCodeAt(pos) !== 0x3a) fail("':'");
          pos++;
        }
        continue;
      }
    } else {
      if (pos >= len) fail("a value");
      value = readScalar();
      produced = true;
    }
    // ---- attach the value and read separators, closing containers as they end
    while (produced) {
      const frame = stack[stack.length - 1];
      if (frame === undefined) {
        root = value;
        skipWs();
        if (pos < len) fail("the end of the text");
        return root;
      }
      if (frame.isArray) {
        if (floatWhole) markFloat(frame.value, frame.value.length);
        frame.value.push(value);
      } else {
        if (floatWhole) markFloat(frame.value, frame.key);
        setMember(frame.value, frame.key, value);
      }
      floatWhole = false;
      skipWs();
      const d = text.charCodeAt(pos);
      if (d === 0x2c) {
        pos++;
        if (!frame.isArray) {
          skipWs();
          if (text.charCodeAt(pos) !== 0x22) fail("a string key");
          frame.key = readString();
          skipWs();
          if (text.charCodeAt(pos) !== 0x3a) fail("':'");
          pos++;
        }
        produced = false; // read the next value
      } else if ((frame.isArray && d === 0x5d) || (!frame.isArray && d === 0x7d)) {
        pos++;
        stack.pop();
        value = frame.value;
      } else {
        fail(frame.isArray ? "',' or ']'" : "',' or '}'");
      }
    }
  }
}
