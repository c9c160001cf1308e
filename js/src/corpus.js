// Run one case of the cross-language corpus (tests/corpus/generate.py) through this package:
// used by the Node tests and, bundled, by the browser tests. Returns what the case's `expect`
// describes, so the caller compares the two.

import { parseJson } from "./json.js";
import { callFromDocument, callFromReceiptAndRecord, makeTrust, verifyToolCall, verifyReceipt } from "./verifier.js";
import { MemoryStore } from "./state.js";
import { recordFromJson, recordBytes } from "./records.js";
import { canonicalText } from "./canonical.js";
import { fromBase64, fromHex, toHex } from "./bytes.js";
import { verifyEd25519 } from "./ed25519.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { verifyCoseReceipt } from "./cose.js";
import { CanonicalizationError, CoseReceiptError, JsonError, RecordError, StateError, VerifierInputError } from "./errors.js";

const LEVELS = ["record", "signature", "inclusion", "witnesses", "consistency"];

/** An input as the CLI reads it: `*_b64` (raw bytes) and `*_text` through the strict parser. */
function load(obj, key) {
  const b64 = obj[`${key}_b64`];
  const text = typeof b64 === "string" ? fromBase64(b64) : obj[`${key}_text`];
  if (typeof text !== "string" && !(text instanceof Uint8Array)) return obj[key];
  try {
    return parseJson(text);
  } catch (e) {
    if (e instanceof JsonError) throw new VerifierInputError(`cannot read the ${key}: ${e.message}`);
    throw e;
  }
}

/** The call_sha256 of a `verify` case's call record, as the verifier rebuilds it; or null. */
export function recordDigest(c) {
  const inp = c.input;
  let call;
  try {
    if (inp.format === "saved_call" || inp.format === "tool_result") {
      const args = load(inp, "arguments");
      const receipt = load(inp, "receipt");
      call = callFromDocument(load(inp, "call"), { tool: inp.tool ?? undefined, arguments: args ?? undefined, receipt: receipt ?? undefined });
    } else if (inp.format === "receipt_record") {
      call = callFromReceiptAndRecord(load(inp, "receipt"), load(inp, "record"));
    } else return null;
  } catch (e) {
    if (e instanceof VerifierInputError) return null;
    throw e;
  }
  const receipt = call.receipt !== null && typeof call.receipt === "object" ? call.receipt : {};
  try {
    const record = recordFromJson(call.record, { server: typeof receipt.server === "string" ? receipt.server : undefined });
    return toHex(sha256(recordBytes(record)));
  } catch (e) {
    if (e instanceof RecordError || e instanceof CanonicalizationError) return null;
    throw e;
  }
}

/** The outcome of a `verify` case: {error, levels, valid, required}. */
export async function runVerifyCase(c) {
  const t = c.trust;
  try {
    const policy = typeof t.policy_b64 === "string" ? fromBase64(t.policy_b64) : t.policy ?? null;
    const trust = makeTrust({ jwks: t.jwks ?? null, logKeys: t.log_keys ?? [], witnesses: t.witnesses ?? [], quorum: t.quorum ?? undefined, policy });
    const store = c.state === null || c.state === undefined ? null : new MemoryStore(c.state);
    const inp = c.input;
    let report;
    if (inp.format === "saved_call" || inp.format === "tool_result") {
      const opts = { trust, store };
      if (inp.tool !== undefined && inp.tool !== null) opts.tool = inp.tool;
      const args = load(inp, "arguments");
      if (args !== undefined && args !== null) opts.arguments = args;
      const receipt = load(inp, "receipt");
      if (receipt !== undefined && receipt !== null) opts.receipt = receipt;
      report = await verifyToolCall(load(inp, "call"), opts);
    } else if (inp.format === "receipt_record") {
      report = await verifyReceipt(load(inp, "receipt"), load(inp, "record"), { trust, store });
    } else {
      report = await verifyReceipt(load(inp, "receipt"), null, { trust, store });
    }
    const levels = Object.fromEntries(LEVELS.map((n) => [n, report.levels[n].status]));
    return { error: null, levels, valid: report.valid, required: report.required, reasons: Object.fromEntries(LEVELS.map((n) => [n, report.levels[n].reason])) };
  } catch (e) {
    if (e instanceof VerifierInputError) return { error: "input", levels: null, valid: null, required: null, message: e.message };
    if (e instanceof StateError) return { error: "state", levels: null, valid: null, required: null, message: e.message };
    throw e;
  }
}

/** The outcome of a `jcs` case: {refused, call_sha256, canonical}. */
export function runJcsCase(c) {
  let record;
  try {
    record = recordFromJson(parseJson(c.record_text), { server: c.server ?? undefined });
  } catch (e) {
    if (e instanceof RecordError || e instanceof CanonicalizationError || e instanceof JsonError) return { refused: true, call_sha256: null, canonical: null, message: e.message };
    throw e;
  }
  return { refused: false, call_sha256: toHex(sha256(recordBytes(record))), canonical: canonicalText(record) };
}

/** The outcome of an `ed25519` case: {valid}, by the Ed25519 backend in use. */
export async function runEd25519Case(c) {
  return { valid: await verifyEd25519(fromHex(c.public_key), fromHex(c.message), fromHex(c.signature)) };
}

/** The outcome of a `cose` case: per COSE receipt {valid, tree_size, leaf_index, root} or
 * {valid: false} (tests/corpus/cose_cases.py). */
export async function runCoseCase(c) {
  const trust = makeTrust({ logKeys: c.trust.log_keys });
  const out = [];
  for (const b64 of c.cose_b64) {
    try {
      const r = await verifyCoseReceipt(c.receipt, fromBase64(b64), trust);
      out.push({ valid: true, tree_size: Number(r.treeSize), leaf_index: Number(r.leafIndex), root: toHex(r.root) });
    } catch (e) {
      if (!(e instanceof CoseReceiptError)) throw e;
      out.push({ valid: false, reason: e.message });
    }
  }
  return out;
}

/** Run any case; {expected, got, ok}. */
export async function runCase(c) {
  if (c.kind === "cose") {
    const got = await runCoseCase(c);
    const bare = got.map((g) => (g.valid ? g : { valid: false }));
    const wrong = c.expect.map((e, i) => (JSON.stringify(e) === JSON.stringify(bare[i]) ? null : `${c.variants?.[i] ?? i}: got ${JSON.stringify(got[i])}`)).filter((w) => w !== null);
    return { expected: c.expect, got: wrong, ok: wrong.length === 0 && got.length === c.expect.length };
  }
  if (c.kind === "ed25519") {
    const got = await runEd25519Case(c);
    return { expected: c.expect, got, ok: got.valid === c.expect.valid };
  }
  if (c.kind === "jcs") {
    const got = runJcsCase(c);
    const e = c.expect;
    const ok = got.refused === e.refused && got.call_sha256 === e.call_sha256 && got.canonical === e.canonical;
    return { expected: e, got, ok };
  }
  const got = await runVerifyCase(c);
  got.call_sha256 = recordDigest(c);
  const e = { ...c.expect, call_sha256: c.call_sha256 ?? null };
  const ok = got.error === e.error && JSON.stringify(got.levels) === JSON.stringify(e.levels) && got.valid === e.valid &&
    JSON.stringify(got.required) === JSON.stringify(e.required) && got.call_sha256 === e.call_sha256;
  return { expected: e, got, ok };
}
