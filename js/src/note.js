// C2SP signed-note: parsing, key texts, key IDs, and opening a note with trusted keys.
// Same rules as ledger.core.note (itself Go's note.Open), including canonical base64 only.

import { sha256 } from "@noble/hashes/sha2.js";
import { NoteError } from "./errors.js";
import { bytesEqual, concatBytes, fromBase64, fromUtf8, toBase64, utf8 } from "./bytes.js";
import { verifyEd25519 } from "./ed25519.js";

export const KEY_TYPE_ED25519 = 0x01;
export const KEY_TYPE_COSIGNATURE_V1 = 0x04;
export const MAX_NOTE_SIZE = 1 << 20;
export const MAX_SIGNATURES = 100;
export const COSIGNATURE_SIZE = 72;
const MAX_TIMESTAMP = (1n << 63n) - 1n;

const EM_DASH_PREFIX = "\u2014 ";
const WHITE_SPACE = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680,
  ...Array.from({ length: 0x200b - 0x2000 }, (_, i) => 0x2000 + i),
  0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

/** Whether `name` may be a key name: non-empty, no Unicode space, no `+`, no control chars. */
export function isValidKeyName(name) {
  if (typeof name !== "string" || name.length === 0 || name.includes("+")) return false;
  for (const ch of name) {
    const c = ch.codePointAt(0);
    if (WHITE_SPACE.has(c) || c < 0x20 || (c >= 0xd800 && c <= 0xdfff)) return false;
  }
  return true;
}

function checkKeyName(name) {
  if (!isValidKeyName(name)) {
    throw new NoteError(`invalid key name ${JSON.stringify(name)}: must be non-empty, without spaces or '+'`);
  }
}

/** The key ID: first 4 bytes (big-endian) of SHA-256(name ‖ 0x0A ‖ type ‖ key). */
export function keyId(name, keyType, publicKey) {
  const d = sha256(concatBytes(utf8(name), Uint8Array.of(0x0a, keyType), publicKey));
  return ((d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3]) >>> 0;
}

const hex8 = (id) => id.toString(16).padStart(8, "0");

/** Split a vkey `<name>+<hex id>+<base64(type ‖ key)>`; the ID must match. */
export function parseVkeyText(text) {
  if (typeof text !== "string") throw new NoteError("verifier key must be text");
  const first = text.indexOf("+");
  const second = first < 0 ? -1 : text.indexOf("+", first + 1);
  if (second < 0) throw new NoteError("malformed verifier key: want <name>+<hex key ID>+<base64 key>");
  const name = text.slice(0, first);
  const hexId = text.slice(first + 1, second);
  const key64 = text.slice(second + 1);
  checkKeyName(name);
  if (!/^[0-9a-fA-F]{8}$/.test(hexId)) throw new NoteError(`bad key ID ${JSON.stringify(hexId)}: want 8 hex digits`);
  const id = parseInt(hexId, 16) >>> 0;
  const blob = fromBase64(key64, "verifier key base64");
  if (blob.length < 2) throw new NoteError("malformed verifier key: key data too short");
  const keyType = blob[0];
  const material = blob.subarray(1);
  if (keyId(name, keyType, material) !== id) throw new NoteError(`verifier key ID ${hexId} does not match name and key`);
  return { name, keyId: id, keyType, material };
}

class Ed25519Key {
  constructor(name, publicKey, keyType) {
    checkKeyName(name);
    if (!(publicKey instanceof Uint8Array) || publicKey.length !== 32) throw new NoteError("Ed25519 public key must be 32 bytes");
    this.name = name;
    this.publicKey = Uint8Array.from(publicKey);
    this.keyType = keyType;
    this.keyId = keyId(name, keyType, this.publicKey);
    Object.freeze(this);
  }

  /** The verifier key text `<name>+<hex id>+<base64(type ‖ key)>`. */
  get vkey() {
    return `${this.name}+${hex8(this.keyId)}+${toBase64(concatBytes(Uint8Array.of(this.keyType), this.publicKey))}`;
  }

  equals(other) {
    return other instanceof Ed25519Key && other.keyType === this.keyType && other.name === this.name &&
      bytesEqual(other.publicKey, this.publicKey);
  }

  toString() {
    return this.vkey;
  }
}

/** A plain Ed25519 note verifier key (type 0x01): log keys, and witnesses signing plainly. */
export class Ed25519Verifier extends Ed25519Key {
  constructor(name, publicKey) {
    super(name, publicKey, KEY_TYPE_ED25519);
  }

  static fromVkey(text) {
    const { name, keyType, material } = parseVkeyText(text);
    if (keyType !== KEY_TYPE_ED25519) throw new NoteError(`verifier key type 0x${keyType.toString(16).padStart(2, "0")} is not Ed25519 (0x01)`);
    if (material.length !== 32) throw new NoteError("Ed25519 verifier key must hold 32 bytes of key");
    return new Ed25519Verifier(name, material);
  }

  /** Whether `signature` is this key's Ed25519 signature of `message` (the note text). */
  async verify(message, signature) {
    if (signature.length !== 64) return false;
    return verifyEd25519(this.publicKey, message, signature);
  }
}

/** The bytes a cosignature/v1 signs: `cosignature/v1\ntime <ts>\n` + the checkpoint text. */
export function cosignedMessage(checkpointText, timestamp) {
  const body = typeof checkpointText === "string" ? utf8(checkpointText) : checkpointText;
  return concatBytes(utf8(`cosignature/v1\ntime ${timestamp}\n`), body);
}

/** A witness's cosignature/v1 key (type 0x04): signature = 8-byte timestamp ‖ Ed25519 sig. */
export class CosignatureVerifier extends Ed25519Key {
  constructor(name, publicKey) {
    super(name, publicKey, KEY_TYPE_COSIGNATURE_V1);
  }

  static fromVkey(text) {
    const { name, keyType, material } = parseVkeyText(text);
    if (keyType !== KEY_TYPE_COSIGNATURE_V1) {
      throw new NoteError(`verifier key type 0x${keyType.toString(16).padStart(2, "0")} is not an Ed25519 cosignature key (0x04)`);
    }
    if (material.length !== 32) throw new NoteError("cosignature verifier key must hold 32 bytes of key");
    return new CosignatureVerifier(name, material);
  }

  /** The timestamp of a cosignature field (only meaningful once it verified). */
  static timestamp(signature) {
    if (signature.length !== COSIGNATURE_SIZE) throw new NoteError(`cosignature is ${signature.length} bytes, want ${COSIGNATURE_SIZE} (timestamp ‖ sig)`);
    let t = 0n;
    for (let i = 0; i < 8; i++) t = (t << 8n) | BigInt(signature[i]);
    return t;
  }

  async verify(message, signature) {
    if (signature.length !== COSIGNATURE_SIZE) return false;
    const t = CosignatureVerifier.timestamp(signature);
    if (t > MAX_TIMESTAMP) return false;
    return verifyEd25519(this.publicKey, cosignedMessage(message, t), signature.subarray(8));
  }
}

/**
 * Parse a signed note without verifying: text, then every signature line
 * {name, keyId, signature} in order. Bytes or a string. Throws NoteError.
 */
export function parseNote(data) {
  let bytes = data;
  if (typeof data === "string") bytes = utf8(data);
  if (!(bytes instanceof Uint8Array)) throw new NoteError("note must be bytes");
  if (bytes.length > MAX_NOTE_SIZE) throw new NoteError(`note is ${bytes.length} bytes, more than the limit of ${MAX_NOTE_SIZE}`);
  let decoded;
  try {
    decoded = fromUtf8(bytes);
  } catch {
    throw new NoteError("note is not valid UTF-8");
  }
  for (let i = 0; i < decoded.length; i++) {
    const c = decoded.charCodeAt(i);
    if (c < 0x20 && c !== 0x0a) throw new NoteError(`note contains control character U+${c.toString(16).toUpperCase().padStart(4, "0")}`);
  }
  const split = decoded.lastIndexOf("\n\n");
  if (split < 0) throw new NoteError("note has no blank line before its signatures");
  const text = decoded.slice(0, split + 1);
  const block = decoded.slice(split + 2);
  if (block.length === 0) throw new NoteError("note has no signature lines");
  if (!block.endsWith("\n")) throw new NoteError("note does not end with a newline");
  const lines = block.slice(0, -1).split("\n");
  if (lines.length > MAX_SIGNATURES) throw new NoteError(`note has ${lines.length} signatures, more than ${MAX_SIGNATURES}`);
  return { text, signatures: lines.map(parseSignatureLine) };
}

function parseSignatureLine(line) {
  if (!line.startsWith(EM_DASH_PREFIX)) throw new NoteError(`signature line does not start with '— ': ${JSON.stringify(line.slice(0, 80))}`);
  const rest = line.slice(EM_DASH_PREFIX.length);
  const sp = rest.indexOf(" ");
  if (sp < 0 || sp === rest.length - 1) throw new NoteError("signature line has no signature");
  const name = rest.slice(0, sp);
  const b64 = rest.slice(sp + 1);
  if (!isValidKeyName(name)) throw new NoteError(`signature line has invalid key name ${JSON.stringify(name)}`);
  const blob = fromBase64(b64, "signature base64");
  if (blob.length < 5) throw new NoteError("signature is shorter than a key ID and one byte");
  const id = ((blob[0] << 24) | (blob[1] << 16) | (blob[2] << 8) | blob[3]) >>> 0;
  return { name, keyId: id, signature: blob.subarray(4) };
}

/** One signature line as written in a note (no final newline). */
export function signatureLine(sig) {
  const id = Uint8Array.of(sig.keyId >>> 24, (sig.keyId >>> 16) & 0xff, (sig.keyId >>> 8) & 0xff, sig.keyId & 0xff);
  return `${EM_DASH_PREFIX}${sig.name} ${toBase64(concatBytes(id, sig.signature))}`;
}

/** An invalid signature by a known key: the note is forged or corrupted. */
export class InvalidSignatureError extends NoteError {
  constructor(name, id) {
    super(`invalid signature for key ${name}+${hex8(id)}`);
    this.keyName = name;
    this.keyId = id;
  }
}

/** No signature by a known key is on the note (the parsed note is attached, untrusted). */
export class UnverifiedNoteError extends NoteError {
  constructor(message, note) {
    super(message);
    this.note = note;
  }
}

/**
 * Parse a note and verify the signatures made by known keys (name and key ID match a verifier;
 * others are ignored). Every signature by a known key must verify, else InvalidSignatureError;
 * with none verified, UnverifiedNoteError. Returns {note, verified} (first verified line per key).
 */
export async function openNote(data, verifiers) {
  const note = parseNote(data);
  const known = new Map();
  for (const v of verifiers) {
    const id = `${v.name}\n${v.keyId}`;
    const list = known.get(id) ?? [];
    if (!list.some((c) => c === v || (typeof c.equals === "function" && c.equals(v)))) list.push(v);
    known.set(id, list);
  }
  const message = utf8(note.text);
  const checks = [];
  for (const sig of note.signatures) {
    const matching = known.get(`${sig.name}\n${sig.keyId}`);
    if (matching === undefined) continue;
    if (matching.length > 1) throw new NoteError(`ambiguous key ${sig.name}+${hex8(sig.keyId)}: several verifiers`);
    checks.push(matching[0].verify(message, sig.signature).then((ok) => [sig, ok]));
  }
  const results = await Promise.all(checks);
  const verified = [];
  const seen = new Set();
  for (const [sig, ok] of results) {
    if (!ok) throw new InvalidSignatureError(sig.name, sig.keyId);
    const id = `${sig.name}\n${sig.keyId}`;
    if (!seen.has(id)) {
      seen.add(id);
      verified.push(sig);
    }
  }
  if (verified.length === 0) throw new UnverifiedNoteError("note has no verifiable signatures", note);
  return { note, verified };
}

