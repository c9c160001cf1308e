// Test-only signing (the package verifies, it never signs notes): log keys and witness
// cosigners made with @noble/curves, to build checkpoints and notes byte by byte.
import { ed25519 } from "@noble/curves/ed25519.js";
import { CosignatureVerifier, Ed25519Verifier, cosignedMessage, signatureLine, toBase64, checkpointText } from "../src/verify.js";

const enc = new TextEncoder();

export function seed(n) {
  return new Uint8Array(32).fill(n);
}

export class Signer {
  constructor(name, s = ed25519.utils.randomSecretKey()) {
    this.seed = s;
    this.verifier = new Ed25519Verifier(name, ed25519.getPublicKey(s));
  }
  get name() { return this.verifier.name; }
  get vkey() { return this.verifier.vkey; }
  line(text) {
    return signatureLine({ name: this.name, keyId: this.verifier.keyId, signature: ed25519.sign(enc.encode(text), this.seed) });
  }
}

export class Cosigner {
  constructor(name, s = ed25519.utils.randomSecretKey()) {
    this.seed = s;
    this.verifier = new CosignatureVerifier(name, ed25519.getPublicKey(s));
  }
  get name() { return this.verifier.name; }
  get vkey() { return this.verifier.vkey; }
  line(text, timestamp = 1700000000n) {
    const ts = new Uint8Array(8);
    new DataView(ts.buffer).setBigUint64(0, BigInt(timestamp));
    const sig = ed25519.sign(cosignedMessage(text, BigInt(timestamp)), this.seed);
    const blob = new Uint8Array(72);
    blob.set(ts);
    blob.set(sig, 8);
    return signatureLine({ name: this.name, keyId: this.verifier.keyId, signature: blob });
  }
}

/** A signed checkpoint note (bytes) for origin/size/root, signed by `log` and cosigners. */
export function signedCheckpoint(log, size, rootHash, ...cosigners) {
  const text = checkpointText({ origin: log.name, size: BigInt(size), rootHash, extensions: [] });
  const lines = [log.line(text), ...cosigners.map((c) => c.line(text))];
  return enc.encode(text + "\n" + lines.map((l) => l + "\n").join(""));
}

export { toBase64 };
