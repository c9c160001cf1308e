// Bytes, text and the strict base64/hex codecs every format here uses. No Buffer: runs in browsers.
import { NoteError } from "./errors.js";

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** UTF-8 bytes of a string (lone surrogates become U+FFFD: callers refuse them first). */
export function utf8(text) {
  return encoder.encode(text);
}

/** Strict UTF-8 decoding (a BOM is kept as U+FEFF); throws TypeError on invalid bytes. */
export function fromUtf8(bytes) {
  return strictDecoder.decode(bytes);
}

/** Whether `text` has no lone surrogate (so it encodes to UTF-8 without change). */
export function isWellFormed(text) {
  if (typeof text.isWellFormed === "function") return text.isWellFormed();
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
}

/** Index and code unit of the first lone surrogate in `text`, or null. */
export function firstLoneSurrogate(text) {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
      if (d >= 0xdc00 && d <= 0xdfff) { i++; continue; }
      return { index: i, unit: c };
    }
    if (c >= 0xdc00 && c <= 0xdfff) return { index: i, unit: c };
  }
  return null;
}

/** Number of Unicode code points (what Python's len() counts). */
export function codePointLength(text) {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

export function concatBytes(...parts) {
  let len = 0;
  for (const p of parts) len += p.length;
  const out = new Uint8Array(len);
  let off = 0;
  for (const p of parts) { out.set(p, off); off += p.length; }
  return out;
}

export function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
const HEX_VALUE = new Uint8Array(128);
for (let i = 0; i < 16; i++) {
  HEX_VALUE["0123456789abcdef".charCodeAt(i)] = i;
  HEX_VALUE["0123456789ABCDEF".charCodeAt(i)] = i;
}

/** Lower-case hex. */
export function toHex(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += HEX[bytes[i]];
  return s;
}

/** Bytes of an even-length hex string (either case); throws NoteError otherwise. */
export function fromHex(text) {
  if (typeof text !== "string" || text.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(text)) {
    throw new NoteError("bad hex");
  }
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = (HEX_VALUE[text.charCodeAt(2 * i)] << 4) | HEX_VALUE[text.charCodeAt(2 * i + 1)];
  return out;
}

const STD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const STD_INDEX = new Int16Array(128).fill(-1);
const URL_INDEX = new Int16Array(128).fill(-1);
for (let i = 0; i < 64; i++) {
  STD_INDEX[STD.charCodeAt(i)] = i;
  URL_INDEX[URL.charCodeAt(i)] = i;
}

function encode64(bytes, alphabet, pad) {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + alphabet[n & 63];
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i] << 16;
    out += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + (pad ? "==" : "");
  } else if (rest === 2) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8);
    out += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + (pad ? "=" : "");
  }
  return out;
}

// Decodes unpadded base64 of either alphabet; null on a bad character, impossible length or
// non-zero trailing bits (so every byte string has exactly one accepted spelling).
function decode64(text, index) {
  const len = text.length;
  if (len % 4 === 1) return null;
  const out = new Uint8Array(Math.floor((len * 3) / 4));
  let o = 0;
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < len; i++) {
    const c = text.charCodeAt(i);
    const v = c < 128 ? index[c] : -1;
    if (v < 0) return null;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
    acc &= 0xfff;
  }
  if (bits > 0 && (acc & ((1 << bits) - 1)) !== 0) return null;
  return out;
}

/** Standard padded base64. */
export function toBase64(bytes) {
  return encode64(bytes, STD, true);
}

/**
 * Strict standard padded base64: only the alphabet, exact padding, zero padding bits (the one
 * canonical spelling, as Python's strict_b64decode). Throws NoteError with `what` in the message.
 */
export function fromBase64(text, what = "base64") {
  if (typeof text !== "string") throw new NoteError(`bad ${what}: not text`);
  if (text.length % 4 !== 0) throw new NoteError(`bad ${what}: wrong length or padding`);
  let body = text;
  if (body.endsWith("==")) body = body.slice(0, -2);
  else if (body.endsWith("=")) body = body.slice(0, -1);
  if (body.includes("=")) throw new NoteError(`bad ${what}: misplaced padding`);
  const out = decode64(body, STD_INDEX);
  if (out === null || (body.length % 4 === 1)) throw new NoteError(`bad ${what}: not canonical base64`);
  return out;
}

/** Base64url without padding (RFC 4648 §5), as JOSE writes it. */
export function toBase64Url(bytes) {
  return encode64(bytes, URL, false);
}

/** Strict inverse of toBase64Url; throws Error (a plain message) when not canonical. */
export function fromBase64Url(text) {
  if (typeof text !== "string") throw new Error("base64url value must be a string");
  if (!/^[A-Za-z0-9_-]*$/.test(text)) {
    throw new Error("base64url value has characters outside A-Z a-z 0-9 - _ (or padding)");
  }
  if (text.length % 4 === 1) throw new Error("base64url value has an impossible length");
  const out = decode64(text, URL_INDEX);
  if (out === null) throw new Error("base64url value is not canonical (non-zero trailing bits)");
  return out;
}
