// Verification levels 1-4 of one receipt, pure (no I/O), as notary.core.verification:
// (1) the record rebuilds call_sha256, (2) the receipt signature verifies under a trusted
// receipt key, (3) the entry rebuilt from the receipt is included in a checkpoint signed by the
// trusted log key, (4) that checkpoint carries the required witness cosignatures.

import { CanonicalizationError, EntryError, NoteError, ProofBundleError, ProofError, ReceiptFormatError, ReceiptSignatureError, RecordError } from "./errors.js";
import { toHex } from "./bytes.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { recordBytes, recordFromJson } from "./records.js";
import { validateReceiptShape } from "./receipt.js";
import { encodeEntry, entryFromReceipt } from "./entry.js";
import { decodeProofBundle } from "./proofbundle.js";
import { openCheckpoint } from "./checkpoint.js";
import { leafHash, verifyInclusion } from "./merkle.js";

export const LEVELS = Object.freeze(["record", "signature", "inclusion", "witnesses", "consistency"]);
export const BASE_REQUIRED = Object.freeze(["record", "signature", "inclusion"]);

export const passed = (reason = "") => ({ status: "passed", reason });
export const failed = (reason) => ({ status: "failed", reason });
export const skipped = (reason) => ({ status: "skipped", reason });

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const repr = (v) => (typeof v === "string" ? `'${v}'` : v === undefined || v === null ? "None" : JSON.stringify(v));

/** Per-level results; `valid` when every required level passed. */
export class Verdict {
  constructor() {
    this.levels = {};
    this.required = [...BASE_REQUIRED];
    this.checkpoint = null;
  }

  get valid() {
    return this.required.every((n) => this.levels[n]?.status === "passed");
  }

  require(level) {
    if (!this.required.includes(level)) this.required.push(level);
  }
}

function describeError(e, ...types) {
  if (types.some((t) => e instanceof t)) return e.message;
  throw e;
}

/** Level 1: the call record (JSON form, or null) rebuilds the receipt's call_sha256. */
export function checkRecord(receipt, record) {
  if (record === null || record === undefined) return skipped("no call record given");
  const server = typeof receipt.server === "string" ? receipt.server : undefined;
  let rec;
  let digest;
  try {
    rec = recordFromJson(record, { server });
    digest = toHex(sha256(recordBytes(rec)));
  } catch (e) {
    return failed(`the record is not a valid rs-tool-call/1 record: ${describeError(e, RecordError, CanonicalizationError)}`);
  }
  if (rec.server !== receipt.server || rec.tool !== receipt.tool) return failed("the record's server or tool differs from the receipt's");
  if (digest !== receipt.call_sha256) return failed(`the record hashes to ${digest}, the receipt says ${receipt.call_sha256}`);
  return passed();
}

/** Level 2: the receipt is signed by a key of the trusted JWKS (or null: skipped). */
export async function checkSignature(receipt, jwks) {
  if (jwks === null || jwks === undefined) return skipped("no receipt keys (JWKS) given");
  try {
    await jwks.verify(receipt);
  } catch (e) {
    return failed(describeError(e, ReceiptSignatureError));
  }
  return passed(`kid ${receipt.signature.kid}`);
}

/** Level 3; returns {level, bundle, checkpoint}. */
export async function checkInclusion(receipt, proof, logVerifier) {
  if (proof === null || proof === undefined) return { level: skipped("no proof bundle given"), bundle: null, checkpoint: null };
  if (logVerifier === null || logVerifier === undefined) return { level: skipped("no log verifier key given"), bundle: null, checkpoint: null };
  let bundle;
  try {
    bundle = decodeProofBundle(proof);
  } catch (e) {
    return { level: failed(`malformed proof bundle: ${describeError(e, ProofBundleError)}`), bundle: null, checkpoint: null };
  }
  let entry;
  try {
    entry = entryFromReceipt(receipt);
  } catch (e) {
    return { level: failed(`cannot rebuild the log entry from the receipt: ${describeError(e, EntryError)}`), bundle, checkpoint: null };
  }
  const ledger = receipt.ledger;
  if (!isObject(ledger) || !Number.isSafeInteger(ledger.index) || BigInt(ledger.index) !== bundle.index) {
    return { level: failed("the proof is for another index than the receipt's"), bundle, checkpoint: null };
  }
  let cp;
  try {
    ({ checkpoint: cp } = await openCheckpoint(bundle.checkpoint, logVerifier));
  } catch (e) {
    return { level: failed(`checkpoint: ${describeError(e, NoteError)}`), bundle, checkpoint: null };
  }
  if (ledger.origin !== cp.origin) {
    return { level: failed(`the receipt names log ${repr(ledger.origin)}, the checkpoint ${repr(cp.origin)}`), bundle, checkpoint: cp };
  }
  try {
    verifyInclusion(bundle.index, cp.size, leafHash(encodeEntry(entry)), bundle.proof, cp.rootHash);
  } catch (e) {
    return { level: failed(`inclusion proof: ${describeError(e, ProofError)}`), bundle, checkpoint: cp };
  }
  return { level: passed(`index ${bundle.index} in ${cp.origin} at size ${cp.size}`), bundle, checkpoint: cp };
}

/**
 * Levels 1-4 of one receipt (the Python verify_receipt). `proof` defaults to the receipt's
 * own; `witnesses` + `quorum` (k distinct cosigners), or a tlog `policy`, set level 4.
 */
export async function verifyLevels(receipt, { record = null, jwks = null, logVerifier = null, proof = null, witnesses = [], quorum = 0, policy = null } = {}) {
  const verdict = new Verdict();
  try {
    validateReceiptShape(receipt);
  } catch (e) {
    const reason = `malformed receipt: ${describeError(e, ReceiptFormatError)}`;
    for (const name of LEVELS.slice(0, 3)) verdict.levels[name] = failed(reason);
    return verdict;
  }
  if (proof === null || proof === undefined) proof = typeof receipt.proof === "string" ? receipt.proof : null;
  verdict.levels.record = checkRecord(receipt, record);
  const [signature, inclusion] = await Promise.all([checkSignature(receipt, jwks), checkInclusion(receipt, proof, logVerifier)]);
  verdict.levels.signature = signature;
  verdict.levels.inclusion = inclusion.level;
  verdict.checkpoint = inclusion.level.status === "passed" ? inclusion.checkpoint : null;
  verdict.bundle = inclusion.bundle;
  const wantsPolicy = policy !== null && policy !== undefined && policy.quorum !== "none";
  if (quorum <= 0 && !wantsPolicy) {
    verdict.levels.witnesses = skipped("no witness quorum required");
  } else if (inclusion.bundle === null || logVerifier === null || inclusion.level.status !== "passed") {
    verdict.levels.witnesses = skipped("no verified checkpoint to check cosignatures on");
  } else {
    try {
      if (wantsPolicy) {
        const { cosigned } = await policy.verify(inclusion.bundle.checkpoint, [logVerifier]);
        verdict.levels.witnesses = passed(`the policy's quorum ${JSON.stringify(policy.quorum)} is met (cosigned by ${[...cosigned].sort().join(", ")})`);
      } else {
        await openCheckpoint(inclusion.bundle.checkpoint, logVerifier, witnesses, quorum);
        verdict.levels.witnesses = passed(`${quorum} of ${witnesses.length} witnesses`);
      }
    } catch (e) {
      verdict.levels.witnesses = failed(describeError(e, NoteError));
    }
    verdict.require("witnesses");
  }
  return verdict;
}
