// Ed25519 signature verification with one acceptance rule whatever does the arithmetic.
//
// The platform's WebCrypto (native code, in Node 20+ and current browsers) is used when it has
// Ed25519; otherwise @noble/curves' point arithmetic. Before either is asked, the checks libsodium
// (and so the Python verifier, through pynacl) makes are made here: S must be canonical (S < L),
// the public key a canonical encoding and neither it nor R a point of small order. The equation
// is then libsodium's, OpenSSL's and WebCrypto's: cofactorless, [S]B - [k]A encoded must equal R
// byte for byte. (@noble/curves' own verify multiplies by the cofactor, so it accepts an R with a
// small-order component, R + T, that those refuse; it is not used for the decision.)

import { ed25519 } from "@noble/curves/ed25519.js";
import { sha512 } from "@noble/hashes/sha2.js";
import { toHex } from "./bytes.js";

// L = 2^252 + 27742317777372353535851937790883648493, little-endian.
const L_LE = Uint8Array.from([
  0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
]);

/**
 * Encodings (sign bit ignored) of the points of small order, canonical and not: libsodium's
 * blocklist. The unit tests check every entry against the curve arithmetic of @noble/curves.
 */
export const SMALL_ORDER_ENCODINGS = [
  new Uint8Array(32),
  Uint8Array.from([1, ...new Array(31).fill(0)]),
  Uint8Array.from([
    0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
    0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05,
  ]),
  Uint8Array.from([
    0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
    0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a,
  ]),
  Uint8Array.from([0xec, ...new Array(30).fill(0xff), 0x7f]),
  Uint8Array.from([0xed, ...new Array(30).fill(0xff), 0x7f]),
  Uint8Array.from([0xee, ...new Array(30).fill(0xff), 0x7f]),
];

function isCanonicalScalar(s) {
  for (let i = 31; i >= 0; i--) {
    if (s[i] < L_LE[i]) return true;
    if (s[i] > L_LE[i]) return false;
  }
  return false; // equal to L
}

/** Whether a 32-byte point encoding (sign bit ignored) is one of the small-order points. */
export function hasSmallOrder(p) {
  for (const bad of SMALL_ORDER_ENCODINGS) {
    let diff = (p[31] & 0x7f) ^ bad[31];
    for (let i = 0; i < 31; i++) diff |= p[i] ^ bad[i];
    if (diff === 0) return true;
  }
  return false;
}

/** Whether a 32-byte point encoding has y < 2^255 - 19. */
export function isCanonicalPoint(p) {
  if ((p[31] & 0x7f) !== 0x7f) return true;
  for (let i = 30; i >= 1; i--) if (p[i] !== 0xff) return true;
  return p[0] < 0xed;
}

/** The libsodium admission checks; true when the inputs may be handed to a backend. */
export function passesStrictChecks(publicKey, signature) {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== 32) return false;
  if (!(signature instanceof Uint8Array) || signature.length !== 64) return false;
  if (!isCanonicalScalar(signature.subarray(32))) return false;
  if (hasSmallOrder(signature.subarray(0, 32))) return false;
  if (!isCanonicalPoint(publicKey) || hasSmallOrder(publicKey)) return false;
  return true;
}

const Point = ed25519.Point;
const L = Point.Fn.ORDER;

function littleEndian(bytes) {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i]);
  return n;
}

/** The cofactorless equation on inputs that passed the admission checks: [S]B - [k]A == R. */
function verifyCofactorless(publicKey, message, signature) {
  const r = signature.subarray(0, 32);
  const s = littleEndian(signature.subarray(32)); // < L: checked before
  const input = new Uint8Array(64 + message.length);
  input.set(r, 0);
  input.set(publicKey, 32);
  input.set(message, 64);
  const k = littleEndian(sha512(input)) % L;
  const a = Point.fromBytes(publicKey); // throws for an encoding that is no point
  const check = Point.BASE.multiplyUnsafe(s).subtract(a.multiplyUnsafe(k)).toBytes();
  let diff = 0;
  for (let i = 0; i < 32; i++) diff |= check[i] ^ r[i];
  return diff === 0;
}

let requested = "auto";
let detected = null; // Promise<"webcrypto" | "noble">
const keyCache = new Map();
const MAX_KEYS = 1024;

const hex = (s) => Uint8Array.from(s.match(/../g), (b) => parseInt(b, 16));
// RFC 8032 §7.1, TEST 1 (the empty message): what the platform must accept to be used.
const PROBE_KEY = hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
const PROBE_SIG = hex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b");

async function detect() {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return "noble";
  try {
    const key = await subtle.importKey("raw", PROBE_KEY, { name: "Ed25519" }, false, ["verify"]);
    const ok = await subtle.verify({ name: "Ed25519" }, key, PROBE_SIG, new Uint8Array(0));
    const bad = PROBE_SIG.slice();
    bad[0] ^= 1;
    const refused = !(await subtle.verify({ name: "Ed25519" }, key, bad, new Uint8Array(0)));
    return ok && refused ? "webcrypto" : "noble";
  } catch {
    return "noble";
  }
}

let custom = null;

/**
 * Choose how Ed25519 is computed: "auto" (WebCrypto when the platform has Ed25519, else
 * @noble/curves), "webcrypto", "noble", or an object {name, verify(publicKey, message,
 * signature) -> boolean | Promise<boolean>} (mcp-notary/node offers Node's own crypto this
 * way). The acceptance rule is the same for all: the admission checks here come first.
 */
export function setEd25519Backend(backend) {
  if (backend !== null && typeof backend === "object" && typeof backend.verify === "function" && typeof backend.name === "string") {
    requested = "custom";
    custom = backend;
  } else if (["auto", "webcrypto", "noble"].includes(backend)) {
    requested = backend;
    custom = null;
  } else {
    throw new TypeError(`unknown Ed25519 backend ${JSON.stringify(backend)}`);
  }
  detected = null;
  keyCache.clear();
}

/** The backend in use ("webcrypto", "noble" or a custom backend's name), after detection. */
export async function ed25519Backend() {
  if (requested === "custom") return custom.name;
  if (requested !== "auto") return requested;
  detected ??= detect();
  return detected;
}

function importKey(publicKey) {
  const id = toHex(publicKey);
  let key = keyCache.get(id);
  if (key === undefined) {
    if (keyCache.size >= MAX_KEYS) keyCache.delete(keyCache.keys().next().value);
    key = globalThis.crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
    keyCache.set(id, key);
    key.catch(() => keyCache.delete(id));
  }
  return key;
}

/**
 * Whether `signature` is a valid Ed25519 signature of `message` under the 32-byte `publicKey`.
 * Never throws: anything malformed is simply false.
 */
export async function verifyEd25519(publicKey, message, signature) {
  if (!passesStrictChecks(publicKey, signature) || !(message instanceof Uint8Array)) return false;
  try {
    if (requested === "custom") return (await custom.verify(publicKey, message, signature)) === true;
    const backend = requested === "auto" ? await (detected ??= detect()) : requested;
    if (backend === "webcrypto") {
      const key = await importKey(publicKey);
      return await globalThis.crypto.subtle.verify({ name: "Ed25519" }, key, signature, message);
    }
    return verifyCofactorless(publicKey, message, signature);
  } catch {
    return false;
  }
}
