// C2SP tlog-cosignature, ML-DSA-44 subtree/v1 (signature type 0x06): the post-quantum line a
// log adds to its checkpoints (key name = origin) and that witnesses cosign with. Same rules as
// ledger.core.subtree_cosignature: the signed message is the binary cosigned_message (label
// "subtree/v1\n\0", cosigner name and origin with a one-byte length, timestamp, start and end as
// big-endian u64, the 32-byte hash), pure ML-DSA-44 (FIPS 204) with an empty context; the note
// signature field is the 8-byte timestamp followed by the 2,420-byte signature.

import { ml_dsa44 } from "@noble/post-quantum/ml-dsa.js";
import { NoteError } from "./errors.js";
import { bytesEqual, concatBytes, fromUtf8, toBase64, utf8 } from "./bytes.js";
import { parseCheckpointText } from "./checkpoint.js";
import { isValidKeyName, keyId, parseVkeyText } from "./note.js";

export const KEY_TYPE_SUBTREE_V1 = 0x06;
export const MLDSA44_PUBLIC_KEY_SIZE = 1312;
export const MLDSA44_SIGNATURE_SIZE = 2420;
export const SUBTREE_SIGNATURE_SIZE = 8 + MLDSA44_SIGNATURE_SIZE;
const MAX_U64 = (1n << 64n) - 1n;
const MAX_TIMESTAMP = (1n << 63n) - 1n;
const LABEL = utf8("subtree/v1\n\0");

function u64(value) {
  const out = new Uint8Array(8);
  let v = BigInt(value);
  for (let i = 7; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

function opaque8(what, text) {
  const raw = utf8(text);
  if (raw.length < 1 || raw.length > 255) throw new NoteError(`${what} must be 1 to 255 bytes of UTF-8, not ${raw.length}`);
  return concatBytes(Uint8Array.of(raw.length), raw);
}

/** Whether [start, end) is a subtree (MTC draft §4.1): start a multiple of BIT_CEIL(end - start). */
export function isValidSubtree(start, end) {
  const s = BigInt(start);
  const e = BigInt(end);
  if (s < 0n || s > e) return false;
  let ceil = 1n;
  while (ceil < e - s) ceil <<= 1n;
  return s % ceil === 0n;
}

/** The cosigned_message bytes a subtree/v1 signature covers; refuses what the spec forbids. */
export function subtreeMessage(cosignerName, timestamp, origin, start, end, hash) {
  const [t, s, e] = [BigInt(timestamp), BigInt(start), BigInt(end)];
  for (const [what, v] of [["timestamp", t], ["start", s], ["end", e]]) {
    if (v < 0n || v > MAX_U64) throw new NoteError(`${what} must be an integer in 0..2^64-1`);
  }
  if (t > MAX_TIMESTAMP) throw new NoteError(`timestamp ${t} is above 2^63-1`);
  if (s !== 0n && t !== 0n) throw new NoteError("a subtree that does not start at 0 is signed with timestamp 0");
  if (!isValidSubtree(s, e)) throw new NoteError(`[${s}, ${e}) is not a valid subtree`);
  if (!(hash instanceof Uint8Array) || hash.length !== 32) throw new NoteError("subtree hash must be 32 bytes");
  return concatBytes(LABEL, opaque8("cosigner name", cosignerName), u64(t), opaque8("log origin", origin), u64(s), u64(e), hash);
}

/**
 * An ML-DSA-44 subtree/v1 verifier key. As a note verifier it checks a checkpoint's line (the
 * subtree [0, size)); verifySubtree checks any subtree.
 */
export class SubtreeCosignatureVerifier {
  constructor(name, publicKey) {
    if (!isValidKeyName(name)) throw new NoteError(`invalid key name ${JSON.stringify(name)}: must be non-empty, without spaces or '+'`);
    if (!(publicKey instanceof Uint8Array) || publicKey.length !== MLDSA44_PUBLIC_KEY_SIZE) {
      throw new NoteError(`ML-DSA-44 public key must be ${MLDSA44_PUBLIC_KEY_SIZE} bytes`);
    }
    this.name = name;
    this.publicKey = Uint8Array.from(publicKey);
    this.keyType = KEY_TYPE_SUBTREE_V1;
    this.keyId = keyId(name, KEY_TYPE_SUBTREE_V1, this.publicKey);
    Object.freeze(this);
  }

  static fromVkey(text) {
    const { name, keyType, material } = parseVkeyText(text);
    if (keyType !== KEY_TYPE_SUBTREE_V1) {
      throw new NoteError(`verifier key type 0x${keyType.toString(16).padStart(2, "0")} is not an ML-DSA-44 subtree key (0x06)`);
    }
    return new SubtreeCosignatureVerifier(name, material);
  }

  get vkey() {
    return `${this.name}+${this.keyId.toString(16).padStart(8, "0")}+${toBase64(concatBytes(Uint8Array.of(KEY_TYPE_SUBTREE_V1), this.publicKey))}`;
  }

  /** The timestamp a signature field claims (only meaningful once it verified). */
  static timestamp(signature) {
    if (signature.length !== SUBTREE_SIGNATURE_SIZE) throw new NoteError(`subtree/v1 signature is ${signature.length} bytes, want ${SUBTREE_SIGNATURE_SIZE}`);
    let t = 0n;
    for (let i = 0; i < 8; i++) t = (t << 8n) | BigInt(signature[i]);
    return t;
  }

  /** Whether `signature` (timestamp ‖ ML-DSA-44 signature) signs the subtree; never throws. */
  async verifySubtree(origin, start, end, hash, signature) {
    if (!(signature instanceof Uint8Array) || signature.length !== SUBTREE_SIGNATURE_SIZE) return false;
    try {
      const message = subtreeMessage(this.name, SubtreeCosignatureVerifier.timestamp(signature), origin, start, end, hash);
      return ml_dsa44.verify(signature.subarray(8), message, this.publicKey);
    } catch {
      return false;
    }
  }

  /** Whether `signature` signs the checkpoint whose note text is `message` (bytes). */
  async verify(message, signature) {
    let cp;
    try {
      // fromUtf8 keeps a leading U+FEFF: inside a note it is part of the origin, which the
      // signature covers (a default TextDecoder would drop it, and the verdict with it).
      cp = parseCheckpointText(fromUtf8(message));
    } catch {
      return false;
    }
    return this.verifySubtree(cp.origin, 0n, cp.size, cp.rootHash, signature);
  }

  equals(other) {
    return other instanceof SubtreeCosignatureVerifier && other.name === this.name && bytesEqual(other.publicKey, this.publicKey);
  }

  toString() {
    return this.vkey;
  }
}
