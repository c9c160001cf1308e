// C2SP tlog-checkpoint: origin, decimal size, base64 root hash, optional extension lines, as a
// signed note; opened under the log key and, when a quorum is asked for, witness cosignatures.
// The same strict rules as ledger.core.checkpoint.

import { CheckpointError, NoteError } from "./errors.js";
import { bytesEqual, fromBase64, toBase64, utf8 } from "./bytes.js";
import { openNote, parseNote } from "./note.js";

export const MAX_TREE_SIZE = (1n << 64n) - 1n;
const DECIMAL = /^(?:0|[1-9][0-9]*)$/;

function checkLine(what, line) {
  if (typeof line !== "string" || line.length === 0) throw new CheckpointError(`checkpoint ${what} must be a non-empty string`);
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c < 0x20) throw new CheckpointError(`checkpoint ${what} contains forbidden character U+${c.toString(16).toUpperCase().padStart(4, "0")}`);
  }
}

/**
 * Parse a checkpoint note text (signatures split off): {origin, size (BigInt), rootHash
 * (32 bytes), extensions}. Throws CheckpointError.
 */
export function parseCheckpointText(text) {
  if (typeof text !== "string") throw new CheckpointError("checkpoint text must be a string");
  if (!text.endsWith("\n")) throw new CheckpointError("checkpoint text must end with a newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3) throw new CheckpointError("checkpoint text needs origin, size and root hash lines");
  const [origin, sizeLine, rootLine, ...extensions] = lines;
  if (!DECIMAL.test(sizeLine)) throw new CheckpointError(`bad checkpoint size ${JSON.stringify(sizeLine.slice(0, 40))}`);
  const size = BigInt(sizeLine);
  if (size > MAX_TREE_SIZE) throw new CheckpointError("checkpoint size does not fit in 64 bits");
  let rootHash;
  try {
    rootHash = fromBase64(rootLine, "checkpoint root hash");
  } catch (e) {
    throw new CheckpointError(e.message);
  }
  if (rootHash.length !== 32) throw new CheckpointError(`checkpoint root hash is ${rootHash.length} bytes, want 32`);
  checkLine("origin", origin);
  for (const ext of extensions) checkLine("extension line", ext);
  return Object.freeze({ origin, size, rootHash, extensions: Object.freeze(extensions) });
}

/** The note text of a checkpoint. */
export function checkpointText(cp) {
  return [cp.origin, cp.size.toString(), toBase64(cp.rootHash), ...cp.extensions].map((l) => l + "\n").join("");
}

// What makes two witness keys the same witness: the public key (cosignature/v1 does not commit
// to the name, so one key listed under two names counts once towards a quorum).
const identity = (v) => (v.publicKey instanceof Uint8Array ? `pk:${toBase64(v.publicKey)}` : `id:${v.name}\n${v.keyId}`);

const memo = new Map();
const latin1 = new TextDecoder("latin1");
const MAX_MEMO = 256;

/** Forget every remembered checkpoint verification (for benchmarks and tests). */
export function clearCheckpointCache() {
  memo.clear();
  clearProofBundleCacheHook?.();
}

let clearProofBundleCacheHook = null;
/** @internal the proof-bundle module registers its own memo here. */
export function onClearCheckpointCache(fn) {
  clearProofBundleCacheHook = fn;
}

/**
 * Verify a signed checkpoint: the log key's signature (its name must be the origin) and, when
 * `quorum` > 0, cosignatures by at least `quorum` distinct `witnesses`. A signature by a known
 * key that does not verify rejects the note. Returns {checkpoint, note}; throws NoteError.
 *
 * The log-key-only case is memoized on the exact note bytes and the key (successes only), as
 * many receipts carry the same checkpoint.
 */
export async function openCheckpoint(data, logVerifier, witnesses = [], quorum = 0) {
  if (!Number.isInteger(quorum) || quorum < 0) throw new TypeError("quorum must be a non-negative integer");
  const bytes = typeof data === "string" ? utf8(data) : data;
  if (witnesses.length === 0 && quorum === 0 && logVerifier?.vkey !== undefined) {
    const id = `${logVerifier.vkey}\n${latin1.decode(bytes)}`;
    const hit = memo.get(id);
    if (hit !== undefined) return hit;
    const out = await openUncached(bytes, logVerifier, [], 0);
    if (memo.size >= MAX_MEMO) memo.delete(memo.keys().next().value);
    memo.set(id, out);
    return out;
  }
  return openUncached(bytes, logVerifier, witnesses, quorum);
}

async function openUncached(bytes, logVerifier, witnesses, quorum) {
  const parsed = parseNote(bytes);
  const cp = parseCheckpointText(parsed.text);
  if (logVerifier.name !== cp.origin) {
    throw new CheckpointError(`log key name ${JSON.stringify(logVerifier.name)} does not match origin ${JSON.stringify(cp.origin)}`);
  }
  const logIdent = `${logVerifier.name}\n${logVerifier.keyId}`;
  const ws = witnesses.filter((w) => `${w.name}\n${w.keyId}` !== logIdent);
  const distinct = new Set(ws.map(identity));
  if (quorum > distinct.size) throw new CheckpointError(`quorum ${quorum} cannot be met by ${distinct.size} distinct witness keys`);
  const { note, verified } = await openNote(bytes, [logVerifier, ...ws]);
  const ids = new Set(verified.map((s) => `${s.name}\n${s.keyId}`));
  if (!ids.has(logIdent)) throw new CheckpointError(`checkpoint is not signed by the log key for ${JSON.stringify(cp.origin)}`);
  if (quorum > 0) {
    const cosigned = new Set(ws.filter((w) => ids.has(`${w.name}\n${w.keyId}`)).map(identity));
    if (cosigned.size < quorum) {
      throw new CheckpointError(`checkpoint has ${cosigned.size} verified witness cosignatures, need ${quorum}`);
    }
  }
  return Object.freeze({ checkpoint: cp, note });
}

/** Whether two parsed checkpoints are the same tree head. */
export function sameTreeHead(a, b) {
  return a.origin === b.origin && a.size === b.size && bytesEqual(a.rootHash, b.rootHash);
}

export { NoteError };
