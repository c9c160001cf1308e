// C2SP tlog-proof: `c2sp.org/tlog-proof@v1`, optional `extra`, `index N`, inclusion hashes, a
// blank line, then the signed checkpoint verbatim. Strict decoding, as ledger.core.tlog_proof.

import { NoteError, ProofBundleError } from "./errors.js";
import { fromBase64, toBase64, utf8 } from "./bytes.js";
import { parseNote } from "./note.js";
import { onClearCheckpointCache, parseCheckpointText } from "./checkpoint.js";

export const HEADER = "c2sp.org/tlog-proof@v1";
export const MAX_PROOF_HASHES = 64;
const MAX_INDEX = (1n << 64n) - 1n;
const INDEX_LINE = /^index (0|[1-9][0-9]*)$/;

// Checkpoints that parsed, by their exact text: a busy log puts one checkpoint in many bundles.
const parsed = new Map();
const MAX_PARSED = 256;
const latin1 = new TextDecoder("latin1");

function checkCheckpointSyntax(checkpoint) {
  const id = latin1.decode(checkpoint);
  if (parsed.has(id)) return;
  try {
    parseCheckpointText(parseNote(checkpoint).text);
  } catch (e) {
    if (e instanceof NoteError) throw new ProofBundleError(`bad checkpoint in proof: ${e.message}`);
    throw e;
  }
  if (parsed.size >= MAX_PARSED) parsed.delete(parsed.keys().next().value);
  parsed.set(id, true);
}

/** Forget the checkpoints already parsed (clearCheckpointCache does it too). */
export function clearProofBundleCache() {
  parsed.clear();
}
onClearCheckpointCache(clearProofBundleCache);

/**
 * Decode a tlog-proof (string or bytes): {index (BigInt), proof (Uint8Array[]), checkpoint
 * (the signed note's bytes), extra (Uint8Array or null)}. The checkpoint is checked for syntax
 * only; signatures are verified by openCheckpoint. Throws ProofBundleError.
 */
export function decodeProofBundle(data) {
  const bytes = typeof data === "string" ? utf8(data) : data;
  if (!(bytes instanceof Uint8Array)) throw new ProofBundleError("proof must be bytes or text");
  let pos = 0;
  const nextLine = (what) => {
    const end = bytes.indexOf(0x0a, pos);
    if (end < 0) throw new ProofBundleError(`proof ends before the ${what}`);
    const raw = bytes.subarray(pos, end);
    pos = end + 1;
    let s = "";
    for (const b of raw) {
      if (b >= 0x80) throw new ProofBundleError(`non-ASCII bytes in the ${what}`);
      s += String.fromCharCode(b);
    }
    return s;
  };
  if (nextLine("header line") !== HEADER) throw new ProofBundleError(`proof does not start with ${JSON.stringify(HEADER)}`);
  let extra = null;
  let line = nextLine("index line");
  if (line.startsWith("extra ")) {
    try {
      extra = fromBase64(line.slice(6), "extra data");
    } catch (e) {
      throw new ProofBundleError(e.message);
    }
    if (extra.length === 0) throw new ProofBundleError("empty extra data (omit the line instead)");
    line = nextLine("index line");
  }
  const m = INDEX_LINE.exec(line);
  if (m === null) throw new ProofBundleError(`bad index line ${JSON.stringify(line.slice(0, 40))}`);
  const index = BigInt(m[1]);
  if (index > MAX_INDEX) throw new ProofBundleError("index does not fit in 64 bits");
  const proof = [];
  for (;;) {
    line = nextLine("blank line before the checkpoint");
    if (line === "") break;
    if (proof.length >= MAX_PROOF_HASHES) throw new ProofBundleError(`proof has more than ${MAX_PROOF_HASHES} hashes`);
    let h;
    try {
      h = fromBase64(line, "proof hash");
    } catch (e) {
      throw new ProofBundleError(e.message);
    }
    if (h.length !== 32) throw new ProofBundleError(`proof hash is ${h.length} bytes, want 32`);
    proof.push(h);
  }
  const checkpoint = bytes.slice(pos);
  if (checkpoint.length === 0) throw new ProofBundleError("proof has no checkpoint");
  checkCheckpointSyntax(checkpoint);
  return Object.freeze({ index, proof: Object.freeze(proof), checkpoint, extra });
}

/** The tlog-proof text of a bundle, as bytes. */
export function encodeProofBundle({ index, proof, checkpoint, extra = null }) {
  const lines = [HEADER];
  if (extra !== null) lines.push("extra " + toBase64(extra));
  lines.push(`index ${BigInt(index)}`);
  for (const h of proof) lines.push(toBase64(h));
  const head = utf8(lines.map((l) => l + "\n").join("") + "\n");
  const out = new Uint8Array(head.length + checkpoint.length);
  out.set(head);
  out.set(checkpoint, head.length);
  return out;
}
