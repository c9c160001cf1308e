// Which kind of key a vkey is, and which kinds a log and a witness may have: one home, as
// ledger.core.cosignature's parse_verifier_key / parse_log_key / parse_witness_key in Python.
// A log signs its checkpoints with Ed25519 (0x01) and, post-quantum, ML-DSA-44 (0x06); a
// witness or mirror cosigns with cosignature/v1 (0x04) or ML-DSA-44 (0x06).

import { NoteError } from "./errors.js";
import { CosignatureVerifier, Ed25519Verifier, KEY_TYPE_COSIGNATURE_V1, KEY_TYPE_ED25519, parseVkeyText } from "./note.js";
import { KEY_TYPE_SUBTREE_V1, SubtreeCosignatureVerifier } from "./mldsa.js";

const hex2 = (t) => `0x${t.toString(16).padStart(2, "0")}`;

/** A verifier for a vkey of any supported type: 0x01, 0x04 or 0x06. */
export function parseVerifierKey(text) {
  const { keyType } = parseVkeyText(text);
  if (keyType === KEY_TYPE_ED25519) return Ed25519Verifier.fromVkey(text);
  if (keyType === KEY_TYPE_COSIGNATURE_V1) return CosignatureVerifier.fromVkey(text);
  if (keyType === KEY_TYPE_SUBTREE_V1) return SubtreeCosignatureVerifier.fromVkey(text);
  throw new NoteError(`unsupported verifier key type ${hex2(keyType)}`);
}

/** A log's checkpoint key: Ed25519 (0x01) or ML-DSA-44 (0x06); a witness key is refused. */
export function parseLogKey(text) {
  const { keyType } = parseVkeyText(text);
  if (keyType === KEY_TYPE_ED25519) return Ed25519Verifier.fromVkey(text);
  if (keyType === KEY_TYPE_SUBTREE_V1) return SubtreeCosignatureVerifier.fromVkey(text);
  throw new NoteError(`key type ${hex2(keyType)} is not a log key (Ed25519 0x01 or ML-DSA-44 0x06)`);
}

/** A witness's (or mirror's) key: cosignature/v1 (0x04) or ML-DSA-44 (0x06). */
export function parseWitnessKey(text) {
  const { keyType } = parseVkeyText(text);
  if (keyType === KEY_TYPE_COSIGNATURE_V1) return CosignatureVerifier.fromVkey(text);
  if (keyType === KEY_TYPE_SUBTREE_V1) return SubtreeCosignatureVerifier.fromVkey(text);
  throw new NoteError(`key type ${hex2(keyType)} is not a witness key (cosignature/v1 0x04 or ML-DSA-44 0x06)`);
}

/** The signature algorithm of a verifier key, for people (the explorer shows it). */
export function algorithmOf(verifier) {
  if (verifier instanceof SubtreeCosignatureVerifier) return "ML-DSA-44";
  if (verifier instanceof CosignatureVerifier) return "Ed25519 (cosignature/v1)";
  return "Ed25519";
}
