// Ed25519 through Node's own crypto, synchronously: the same OpenSSL arithmetic as WebCrypto
// in Node, without a thread-pool round trip per signature. A backend for setEd25519Backend
// (the admission checks of src/ed25519.js still run first). Node only.
import { createPublicKey, verify } from "node:crypto";

const keys = new Map();
const MAX_KEYS = 1024;

function keyObject(publicKey) {
  const x = Buffer.from(publicKey).toString("base64url");
  let key = keys.get(x);
  if (key === undefined) {
    if (keys.size >= MAX_KEYS) keys.delete(keys.keys().next().value);
    key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x }, format: "jwk" });
    keys.set(x, key);
  }
  return key;
}

/** The backend object: `setEd25519Backend(nodeEd25519)`. */
export const nodeEd25519 = Object.freeze({
  name: "node",
  verify(publicKey, message, signature) {
    try {
      return verify(null, message, keyObject(publicKey), signature);
    } catch {
      return false;
    }
  },
});
