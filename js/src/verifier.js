// Verify a notarized MCP tool call, all five levels, as the Python `notary verify` does:
// the inputs it takes (a saved tool call, a bare tool result, a receipt and a record), the
// trust it loads (JWKS, log keys, witness keys and a quorum, or a tlog-policy), offline by
// default, and online the log's latest checkpoint and consistency proofs, with the newest
// checkpoint per log kept in a store the caller passes.

import { FetchError, JsonError, NoteError, ProofBundleError, ReceiptFormatError, StateError, VerifierInputError } from "./errors.js";
import { fromBase64, fromUtf8, toBase64 } from "./bytes.js";
import { parseJson } from "./json.js";
import { Jwks, validateReceiptShape } from "./receipt.js";
import { parseNote } from "./note.js";
import { parseLogKey, parseVerifierKey } from "./keys.js";
import { openCheckpoint } from "./checkpoint.js";
import { decodeProofBundle } from "./proofbundle.js";
import { Policy, parsePolicy } from "./policy.js";
import { LEVELS, failed, passed, skipped, verifyLevels } from "./levels.js";
import { Reconciler, Seen, checkStoredEntry, describePairs, jsonSize } from "./state.js";
import { checkUrl, createFetcher, getJson, splitUrl } from "./fetcher.js";
import { consistencyFromTiles, proofFromTiles } from "./tiles.js";
import { checkCoseReceipt } from "./cose.js";
import { ChainError, keyByChain, notaryBase } from "./chain.js";
import { receiptPath } from "./paths.js";

/** The _meta key of the rs-tool-call/1 notarization block in a tool result. */
export const META_KEY = "com.rightshold/tool-call";

const TRUST = Symbol("mcp-notary trust");
const SAVED_CALL_KEYS = ["tool", "arguments", "result", "server"];
const ENTRIES_PATH = /\/v1\/ledger\/entries\/[0-9]+\/?$/;
const has = (obj, key) => Object.prototype.hasOwnProperty.call(obj, key);
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const pyType = (v) => (v === null ? "NoneType" : Array.isArray(v) ? "list" : typeof v === "string" ? "str" : typeof v === "boolean" ? "bool" : typeof v === "number" ? (Number.isInteger(v) ? "int" : "float") : typeof v);
const repr = (v) => (typeof v === "string" ? `'${v}'` : v === undefined || v === null ? "None" : JSON.stringify(v));

function object(value, what) {
  if (!isObject(value)) throw new VerifierInputError(`${what} must be a JSON object, not ${pyType(value)}`);
  return value;
}

function readDoc(value, what) {
  if (typeof value === "string" || value instanceof Uint8Array) {
    try {
      return parseJson(value);
    } catch (e) {
      if (e instanceof JsonError) throw new VerifierInputError(`cannot read ${what}: ${e.message}`);
      throw e;
    }
  }
  return value;
}

/** The log's base URL from the receipt's ledger.entry_url, or null without an http(s) URL. */
export function logBaseUrl(receipt) {
  const url = isObject(receipt?.ledger) ? receipt.ledger.entry_url : undefined;
  if (typeof url !== "string") return null;
  const parts = splitUrl(url);
  if (parts === null || !["http", "https"].includes(parts.scheme) || !parts.netloc) return null;
  const path = ENTRIES_PATH.test(parts.path) ? parts.path.replace(ENTRIES_PATH, "") : "";
  return `${parts.scheme}://${parts.netloc}${path}`.replace(/\/+$/, "");
}

// ---------------------------------------------------------------------------------------------
// Inputs

/** Format (b): a CallToolResult (wire JSON) plus the tool name and arguments of the call. */
export function callFromToolResult(result, { tool, arguments: args, server, receipt } = {}) {
  result = object(result, "the tool result");
  if (typeof tool !== "string" || !tool) throw new VerifierInputError("the tool name is required to rebuild the call record");
  args = object(args === undefined || args === null ? {} : args, "the arguments");
  const metaAll = result._meta;
  const block = isObject(metaAll) && has(metaAll, META_KEY) ? metaAll[META_KEY] : undefined;
  if (!isObject(block)) {
    throw new VerifierInputError(`the tool result has no _meta['${META_KEY}']: it was not notarized, or its _meta was stripped on the way`);
  }
  if (block.notarized === false) {
    throw new VerifierInputError(`the server says this result was not notarized: ${has(block, "reason") ? block.reason : "no reason given"}`);
  }
  if (typeof block.salt !== "string") {
    throw new VerifierInputError(`_meta['${META_KEY}'].salt is missing: the record cannot be rebuilt without it`);
  }
  const record = { tool, arguments: args, result, salt: block.salt };
  if (server !== undefined && server !== null) record.server = server;
  if (receipt === undefined || receipt === null) {
    const embedded = block.receipt;
    if (embedded !== undefined && embedded !== null) receipt = object(embedded, `_meta['${META_KEY}'].receipt`);
    else receipt = null;
  }
  return { receipt, record, meta: block, source: "tool result" };
}

/** Format (a): a saved tool call {tool, arguments, result, server?}. */
export function callFromSavedCall(doc, { receipt } = {}) {
  doc = object(doc, "a saved tool call");
  const unknown = Object.keys(doc).filter((k) => !SAVED_CALL_KEYS.includes(k)).sort();
  if (unknown.length) {
    throw new VerifierInputError(`a saved tool call has unknown member(s) ${JSON.stringify(unknown)}; expected ${JSON.stringify([...SAVED_CALL_KEYS].sort())}`);
  }
  for (const key of ["tool", "result"]) {
    if (!has(doc, key)) throw new VerifierInputError(`a saved tool call needs '${key}'`);
  }
  const server = has(doc, "server") ? doc.server : null;
  if (typeof doc.tool !== "string" || (server !== null && typeof server !== "string")) {
    throw new VerifierInputError("a saved tool call's 'tool' and 'server' must be strings");
  }
  const args = has(doc, "arguments") ? doc.arguments : {};
  const call = callFromToolResult(object(doc.result, "'result'"), { tool: doc.tool, arguments: object(args, "'arguments'"), server, receipt });
  return { ...call, source: "saved tool call" };
}

/** Format (c): a receipt (with its proof) and an rs-tool-call/1 call record. */
export function callFromReceiptAndRecord(receipt, record) {
  return { receipt: object(receipt, "the receipt"), record: object(record, "the call record"), meta: null, source: "receipt and record" };
}

/**
 * Format (a) or (b), told apart by shape: a result has `content`, a saved call `result`. A
 * JSON-RPC response is unwrapped to its result. Text is parsed (bounded).
 */
export function callFromDocument(doc, { tool, arguments: args, receipt } = {}) {
  let obj = object(readDoc(doc, "the tool call"), "the tool call document");
  if (has(obj, "jsonrpc")) obj = object(obj.result, "the JSON-RPC response's result");
  if (has(obj, "content")) {
    if (tool === undefined || tool === null) throw new VerifierInputError("a bare tool result needs the tool name (--tool)");
    return callFromToolResult(obj, { tool, arguments: args, receipt });
  }
  if (has(obj, "result")) {
    if ((tool !== undefined && tool !== null) || (args !== undefined && args !== null)) {
      throw new VerifierInputError("--tool and --arguments are for a bare tool result; a saved tool call carries its own");
    }
    return callFromSavedCall(obj, { receipt });
  }
  throw new VerifierInputError("not a tool call: expected a saved call {tool, arguments, result} or a CallToolResult {content, _meta, ...}");
}

// ---------------------------------------------------------------------------------------------
// Trust

function jwksFrom(doc, where) {
  let jwks;
  if (doc instanceof Jwks) jwks = doc;
  else {
    try {
      jwks = new Jwks(object(readDoc(doc, `the JWKS from ${where}`), `the JWKS from ${where}`));
    } catch (e) {
      if (e instanceof VerifierInputError) throw e;
      if (e?.name === "JwksError") throw new VerifierInputError(`the JWKS from ${where} is unusable: ${e.message}`);
      throw e;
    }
  }
  if (jwks.size === 0) throw new VerifierInputError(`the JWKS from ${where} has no Ed25519 key`);
  return jwks;
}

function keyList(values, what, parse) {
  const list = values === undefined || values === null ? [] : Array.isArray(values) ? values : [values];
  return list.map((v) => {
    if (typeof v !== "string") {
      if (v !== null && typeof v === "object" && typeof v.verify === "function" && typeof v.name === "string") return v;
      throw new VerifierInputError(`a ${what} must be a verifier key text`);
    }
    const text = v.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, ""); // ASCII blanks only, as Python
    try {
      return parse(text);
    } catch (e) {
      if (e instanceof NoteError) throw new VerifierInputError(`bad ${what} ${repr(text.slice(0, 60))}: ${e.message}`);
      throw e;
    }
  });
}

/**
 * The trust anchors, from what a caller has in hand: `jwks` (a JWKS object, its JSON text or a
 * Jwks), `logKeys` (vkey texts `<origin>+<id>+<key>`, Ed25519 or ML-DSA-44), `witnesses`
 * (cosignature/v1, ML-DSA-44 or Ed25519 vkeys) with `quorum` (default: all of them), or `policy` (tlog-policy text; its logs join the
 * log keys). Throws VerifierInputError for unusable material.
 */
export function makeTrust({ jwks = null, logKeys = [], witnesses = [], quorum, policy = null, retired = {} } = {}) {
  const out = {
    jwks: jwks === null || jwks === undefined ? null : jwksFrom(jwks, "the arguments"),
    logKeys: keyList(logKeys, "log key", parseLogKey),
    witnesses: keyList(witnesses, "witness key", parseVerifierKey),
    quorum: 0,
    policy: null,
    // Logs whose keys a compromised roll retired, by origin: {finalSize, at, by} (Python's Trust.retired).
    retired: Object.freeze(Object.assign(Object.create(null), retired ?? {})),
  };
  // A key counts once, under another name too (cosignature/v1 does not commit to the name), as
  // openCheckpoint counts cosignatures and as Python's verifier refuses an unmeetable quorum.
  const distinct = new Set(out.witnesses.map((w) => (w.publicKey instanceof Uint8Array ? `pk:${toBase64(w.publicKey)}` : `id:${w.name}\n${w.keyId}`))).size;
  out.quorum = quorum === undefined || quorum === null ? distinct : quorum;
  if (!Number.isInteger(out.quorum) || out.quorum < 0) throw new VerifierInputError("the witness quorum must be a non-negative integer");
  if (out.quorum > distinct) throw new VerifierInputError(`a quorum of ${out.quorum} cannot be met by ${distinct} distinct witness key(s)`);
  if (policy !== null && policy !== undefined) {
    out.policy = policyFrom(policy);
    if (out.quorum > 0 && out.policy.quorum !== "none") {
      throw new VerifierInputError("give witness keys with a quorum or a tlog-policy with a quorum, not both");
    }
    for (const v of out.policy.logVerifiers) {
      if (!out.logKeys.some((k) => k.name === v.name && k.keyId === v.keyId)) out.logKeys.push(v);
    }
  }
  out[TRUST] = true;
  return Object.freeze(out);
}

function policyFrom(policy) {
  try {
    return policy instanceof Policy ? policy : parsePolicy(policy);
  } catch (e) {
    if (e?.name === "PolicyError") throw new VerifierInputError(`the tlog-policy is unusable: ${e.message}`);
    throw e;
  }
}

/**
 * Like makeTrust, and also: `jwks` may be an http(s) URL, and `notary` a notary's base URL whose
 * own JWKS and log keys (the active log's and every log its /v1/ledger lists) fill in what is
 * missing (trust on first use: log keys only when neither `logKeys` nor the policy's `log`
 * lines pin any), and whose list says which logs' keys are retired (read even when every key
 * is given: it only ever makes a verdict stricter). Needs a fetcher for URLs.
 */
export async function loadTrust(spec = {}, { fetcher = null } = {}) {
  let { jwks = null, logKeys = [], notary = null, retired = {} } = spec;
  const policy = spec.policy === null || spec.policy === undefined ? null : policyFrom(spec.policy);
  if (typeof jwks === "string" && /^https?:\/\//.test(jwks)) {
    if (fetcher === null) throw new VerifierInputError(`the JWKS ${jwks} is a URL, and offline nothing is fetched; pass a saved JWKS`);
    try {
      jwks = jwksFrom(await getJson(fetcher, jwks), jwks);
    } catch (e) {
      if (e instanceof FetchError) throw new VerifierInputError(`cannot fetch the JWKS: ${e.message}`);
      throw e;
    }
  }
  const keys = logKeys === null || logKeys === undefined ? [] : Array.isArray(logKeys) ? logKeys : [logKeys];
  // The policy's log lines are pinned keys, as `logKeys` (Python's with_policy_logs).
  const pinned = keys.length > 0 || (policy !== null && policy.logVerifiers.length > 0);
  if ((jwks === null || !pinned) && notary) {
    if (fetcher === null) throw new VerifierInputError("fetching the notary's keys needs the network; pass jwks and logKeys");
    const base = notary.replace(/\/+$/, "");
    checkUrl(base);
    let nJwks;
    let ledger;
    try {
      nJwks = jwksFrom(await getJson(fetcher, base + "/.well-known/jwks.json"), base);
      ledger = await getJson(fetcher, base + "/v1/ledger");
    } catch (e) {
      if (e instanceof FetchError) throw new VerifierInputError(`cannot fetch the notary's keys: ${e.message}`);
      throw e;
    }
    if (!isObject(ledger) || typeof ledger.vkey !== "string") throw new VerifierInputError(`${base}/v1/ledger has no 'vkey'`);
    jwks = jwks ?? nJwks;
    // Every listed log's key too, so that a receipt of a log frozen since verifies under its
    // own log's key (Python's trust_from_notary).
    if (!pinned) keys.push(...new Set([ledger.vkey, ...logListKeys(ledger)]));
    retired = retirements(ledger);
  } else if (notary && fetcher !== null) {
    try {
      retired = retirements(await getJson(fetcher, notary.replace(/\/+$/, "") + "/v1/ledger"));
    } catch (e) {
      if (!(e instanceof FetchError)) throw e; // none when it cannot be asked (Python's notary_retirements)
    }
  }
  return makeTrust({ ...spec, jwks, logKeys: keys, policy, retired });
}

/** The retired logs of a /v1/ledger document's `logs`, by origin (entries not well formed are left out). */
function retirements(ledger) {
  const out = Object.create(null); // origins are the notary's to choose: "__proto__" is just a key
  for (const entry of isObject(ledger) && Array.isArray(ledger.logs) ? ledger.logs : []) {
    if (!isObject(entry) || !isObject(entry.retired)) continue;
    if (typeof entry.origin === "string" && Number.isInteger(entry.size)) {
      out[entry.origin] = { finalSize: entry.size, at: String(entry.retired.at), by: String(entry.retired.by) };
    }
  }
  return out;
}

function retirementReason(origin, r) {
  return `the keys of log ${repr(origin)} were retired by the compromised roll that froze ${repr(r.by)} at ${r.at}: a receipt of it is valid only when its checkpoint is consistent with the log's final checkpoint (size ${r.finalSize})`;
}

/** A receipt of a log whose keys are retired: level 5 must have found its checkpoint consistent with the log's final one (Python's _check_retired). */
function checkRetired(report, origin, r) {
  const verdict = report.verdict;
  const level = verdict.levels.consistency ?? skipped("");
  const latest = report.latest;
  if (level.status === "passed" && latest !== null && BigInt(latest.size) === BigInt(r.finalSize)) {
    report.notes.push(`${retirementReason(origin, r)}: it is`);
  } else {
    const why = level.status === "passed" && latest !== null ? `the log serves a checkpoint of size ${latest.size}` : level.reason;
    verdict.levels.consistency = failed(`${retirementReason(origin, r)}; ${why}`);
  }
  verdict.require("consistency");
}

// ---------------------------------------------------------------------------------------------
// The report

function receiptSummary(receipt) {
  if (receipt === null || receipt === undefined) return null;
  const ledger = isObject(receipt.ledger) ? receipt.ledger : {};
  const pick = (o, k) => (has(o, k) ? o[k] : null);
  return {
    id: pick(receipt, "id"), server: pick(receipt, "server"), tool: pick(receipt, "tool"),
    call_sha256: pick(receipt, "call_sha256"), issued_at: pick(receipt, "issued_at"),
    origin: pick(ledger, "origin"), index: pick(ledger, "index"),
  };
}

/** The outcome: one verdict per level, which levels were required, and the overall validity. */
export class Report {
  constructor(verdict, receipt, notes = [], proof = null) {
    this.verdict = verdict;
    this.receipt = receipt;
    this.checkpoint = verdict.checkpoint;
    this.conflicts = [];
    this.notes = notes;
    this.proof = proof; // the proof verified with (after an upgrade: the fetched one)
    this.cose = null; // the COSE receipt's check, when one was given: required to pass
    this.latest = null; // the log's latest checkpoint level 5 fetched and verified (a frozen log's: its final)
  }

  /** The receipt carrying the proof used: an upgraded receipt, ready to save; null without one. */
  receiptWithProof() {
    if (this.receipt === null || this.receipt === undefined) return null;
    return this.proof === null ? { ...this.receipt } : { ...this.receipt, proof: this.proof };
  }

  /** Every required level passed and none failed (Python's Report.valid). */
  get valid() {
    return this.verdict.valid && !Object.values(this.verdict.levels).some((r) => r.status === "failed") &&
      (this.cose === null || this.cose.status === "passed");
  }

  get exitCode() {
    return this.valid ? 0 : 1;
  }

  get required() {
    return [...this.verdict.required];
  }

  /** {record, signature, inclusion, witnesses, consistency}: each {status, reason, required}. */
  get levels() {
    const out = {};
    for (const name of LEVELS) {
      const r = this.verdict.levels[name] ?? skipped("not checked");
      out[name] = { status: r.status, reason: r.reason, required: this.verdict.required.includes(name) };
    }
    return out;
  }

  /** The JSON report of `notary verify --json`. */
  toJSON() {
    const levels = {};
    for (const [name, r] of Object.entries(this.levels)) {
      const entry = { status: r.status };
      if (r.reason) entry.reason = r.reason;
      entry.required = r.required;
      if (name === "consistency" && this.conflicts.length) entry.evidence = this.conflicts.map((c) => c.toJSON());
      levels[name] = entry;
    }
    const cp = this.checkpoint;
    return {
      valid: this.valid, levels, required: this.required, receipt: receiptSummary(this.receipt),
      checkpoint: cp ? { origin: cp.origin, size: jsonSize(cp.size), root: toBase64(cp.rootHash) } : null,
      ...(this.cose === null ? {} : { cose: this.cose }),
      notes: [...this.notes],
    };
  }

  /** The human-readable report. */
  render() {
    const lines = [];
    const s = receiptSummary(this.receipt);
    if (s) {
      lines.push(`Receipt ${s.id}: server ${repr(s.server)}, tool ${repr(s.tool)}, issued ${s.issued_at}`);
      lines.push(`  log ${repr(s.origin)}, entry ${s.index}`);
    }
    LEVELS.forEach((name, i) => {
      const r = this.levels[name];
      const reason = r.reason ? `: ${r.reason}` : "";
      lines.push(`  ${i + 1}. ${name.padEnd(12)} ${r.status.toUpperCase().padEnd(8)} (${r.required ? "required" : "optional"})${reason}`);
    });
    for (const c of this.conflicts) {
      lines.push(`  EVIDENCE of a ${c.kind.toUpperCase()}: ${c.message}`);
      for (const seen of [c.first, c.second]) {
        lines.push(`    ${seen.describe()}:`);
        for (const ln of fromUtf8(seen.note).replace(/\n+$/, "").split("\n")) lines.push("      " + ln);
      }
    }
    if (this.cose !== null) lines.push(`  COSE receipt   ${this.cose.status.toUpperCase().padEnd(8)} (required): ${this.cose.reason}`);
    for (const n of this.notes) lines.push(`  note: ${n}`);
    const missing = LEVELS.filter((n) => this.verdict.required.includes(n) && this.verdict.levels[n]?.status !== "passed");
    if (this.cose !== null && this.cose.status !== "passed") missing.push("the COSE receipt");
    lines.push(this.valid ? "VALID: every required level passed." : `NOT VALID: ${missing.join(", ")} did not pass.`);
    return lines.join("\n");
  }
}

// ---------------------------------------------------------------------------------------------
// Verification

function selectLogKey(receipt, proof, keys) {
  if (keys.length === 0) return null;
  const origin = isObject(receipt.ledger) ? receipt.ledger.origin : undefined;
  const candidates = keys.filter((k) => k.name === origin);
  if (candidates.length === 0) {
    return failed(`no trusted log key for origin ${repr(origin)} (trusted: ${[...new Set(keys.map((k) => k.name))].sort().join(", ")})`);
  }
  if (candidates.length > 1 && proof !== null) {
    try {
      const note = parseNote(decodeProofBundle(proof).checkpoint);
      const signers = new Set(note.signatures.map((s) => `${s.name}\n${s.keyId}`));
      candidates.sort((a, b) => Number(!signers.has(`${a.name}\n${a.keyId}`)) - Number(!signers.has(`${b.name}\n${b.keyId}`)));
    } catch (e) {
      if (!(e instanceof NoteError || e instanceof ProofBundleError)) throw e;
    }
  }
  return candidates[0];
}

function isWellShaped(receipt) {
  try {
    validateReceiptShape(receipt);
    return true;
  } catch (e) {
    if (e instanceof ReceiptFormatError) return false;
    throw e;
  }
}

async function fetchReceipt(call, fetcher) {
  const url = isObject(call.meta) && typeof call.meta.receipt_url === "string" ? call.meta.receipt_url : null;
  if (url === null) throw new VerifierInputError("the tool result carries no receipt and no receipt_url; pass the receipt (--receipt)");
  if (fetcher === null) throw new VerifierInputError(`the tool result carries no receipt, and offline it cannot be fetched from ${url}; pass it with --receipt`);
  try {
    return [object(await getJson(fetcher, url), `the receipt from ${url}`), `receipt fetched from ${url}`];
  } catch (e) {
    if (e instanceof FetchError) throw new VerifierInputError(`cannot fetch the receipt: ${e.message}`);
    throw e;
  }
}

async function fetchProof(receipt, receiptUrl, fetcher) {
  const base = logBaseUrl(receipt);
  const url = receiptUrl ?? (base ? base + receiptPath(receipt.id) : null);
  if (fetcher === null || url === null) return [null, "the receipt has no proof and offline none can be fetched"];
  let fetched;
  try {
    fetched = await getJson(fetcher, url);
  } catch (e) {
    if (e instanceof FetchError || e instanceof VerifierInputError) return [null, `the receipt has no proof and none could be fetched: ${e.message}`];
    throw e;
  }
  const proof = isObject(fetched) ? fetched.proof : undefined;
  if (typeof proof !== "string") return [null, `the receipt has no proof and ${url} gave none`];
  return [proof, `inclusion proof fetched from ${url}`];
}

function checkMeta(call, receipt, verdict) {
  if (verdict.levels.record?.status !== "passed") return;
  if (call.meta !== null && call.meta !== undefined) {
    for (const key of ["id", "call_sha256"]) {
      if (has(call.meta, key) && call.meta[key] !== receipt[key]) {
        verdict.levels.record = failed(`the result's _meta ${key} ${repr(call.meta[key])} differs from its receipt's ${repr(receipt[key])}`);
        return;
      }
    }
  }
  verdict.levels.record = passed(`the call record hashes to call_sha256 ${receipt.call_sha256}`);
}

class LatestUnusable extends Error {}

async function meetsWitnessRule(note, logKey, trust) {
  if (trust.policy !== null && trust.policy.quorum !== "none") {
    await trust.policy.verify(note, [logKey]);
  } else if (trust.quorum) {
    await openCheckpoint(note, logKey, trust.witnesses, trust.quorum);
  }
}

async function fetchLatest(fetcher, base, logKey, trust) {
  const note = await fetcher.getBytes(base + "/checkpoint");
  const { checkpoint } = await openCheckpoint(note, logKey);
  try {
    await meetsWitnessRule(note, logKey, trust);
  } catch (e) {
    if (e instanceof NoteError) {
      throw new LatestUnusable(`the log's latest checkpoint (size ${checkpoint.size}) does not meet the witness policy and is not used: ${e.message}`);
    }
    throw e;
  }
  return new Seen("latest", checkpoint, note);
}

async function fetchConsistency(fetcher, base, oldSize, newSize) {
  const url = `${base}/v1/ledger/proofs/consistency?old=${oldSize}&new=${newSize}`;
  let doc;
  try {
    doc = await getJson(fetcher, url);
  } catch (e) {
    if (e instanceof FetchError && e.status === 404) return await consistencyOfTiles(fetcher, base, oldSize, newSize, e);
    if (e instanceof FetchError) return { problem: e.message, refused: e.refused };
    throw e;
  }
  const hashes = isObject(doc) ? doc.proof : undefined;
  const sameSize = (v, want) => (typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) === want : typeof v === "boolean" ? BigInt(v) === want : false);
  if (!isObject(doc) || !sameSize(doc.old, oldSize) || !sameSize(doc.new, newSize) || !Array.isArray(hashes) || !hashes.every((h) => typeof h === "string")) {
    return { problem: `GET ${url}: malformed answer`, refused: true };
  }
  try {
    return { proof: hashes.map((h) => fromBase64(h, "proof hash")) };
  } catch (e) {
    if (e instanceof NoteError) return { problem: `GET ${url}: ${e.message}`, refused: true };
    throw e;
  }
}

/** No proof API at `base` (404: a tlog-mirror's monitoring prefix or a static tile tree serves
 * tiles only): the proof from its tiles, verified by the caller like any other (as Python's
 * notary verify does); else both problems. */
async function consistencyOfTiles(fetcher, base, oldSize, newSize, apiError) {
  try {
    return { proof: await consistencyFromTiles(fetcher, base, oldSize, newSize) };
  } catch (e) {
    if (e instanceof FetchError) return { problem: `${apiError.message}; from its tiles: ${e.message}`, refused: apiError.refused && e.refused };
    throw e;
  }
}

/** Where the notary at `base` serves the log `origin`, from its /v1/ledger's `logs` (null when
 * it lists no such log, or cannot be asked). */
async function listedUrl(fetcher, base, origin) {
  let ledger;
  try {
    ledger = await getJson(fetcher, base + "/v1/ledger");
  } catch (e) {
    if (e instanceof FetchError) return null;
    throw e;
  }
  const logs = isObject(ledger) && Array.isArray(ledger.logs) ? ledger.logs : [];
  for (const entry of logs) {
    if (isObject(entry) && entry.origin === origin && typeof entry.url === "string" && /^https?:\/\//.test(entry.url)) {
      return entry.url.replace(/\/+$/, "");
    }
  }
  return null;
}

/** The first (Ed25519) verifier key of each log in /v1/ledger's `logs`. */
function logListKeys(ledger) {
  const logs = isObject(ledger) && Array.isArray(ledger.logs) ? ledger.logs : [];
  return logs.filter((e) => isObject(e) && Array.isArray(e.vkeys) && typeof e.vkeys[0] === "string").map((e) => e.vkeys[0]);
}

async function storeGet(store, key) {
  let entry;
  try {
    entry = await store.get(key);
  } catch (e) {
    if (e instanceof StateError) throw e;
    throw new StateError(`cannot read the verifier state: ${e?.message ?? e}`);
  }
  return entry === undefined || entry === null ? null : checkStoredEntry(key, entry);
}

/**
 * The stored entry of the log with verifier key `vkey` (a log is its origin and its key, as for
 * the monitor), or null. An entry of an older store, kept under the origin alone (a name holds
 * no "+"), counts when it names this key or none (its checkpoint is verified under the key
 * anyway); `otherKey` is the key an older entry names when it is another log's.
 */
async function loadStored(store, vkey) {
  if (store === null) return { entry: null, otherKey: null };
  const entry = await storeGet(store, vkey);
  if (entry !== null) return { entry, otherKey: null };
  const legacy = await storeGet(store, vkey.split("+")[0]);
  if (legacy === null) return { entry: null, otherKey: null };
  if (legacy.vkey === vkey || legacy.vkey === "") return { entry: legacy, otherKey: null };
  return { entry: null, otherKey: legacy.vkey };
}

// The note is kept as fromUtf8 decodes it: a leading U+FEFF is part of the origin, not a BOM.
async function remember(store, seen, vkey) {
  const { entry: current } = await loadStored(store, vkey);
  if (current !== null && current.vkey !== "" && BigInt(current.size) > seen.size) return false;
  const entry = {
    size: jsonSize(seen.size), root: toBase64(seen.checkpoint.rootHash), checkpoint: fromUtf8(seen.note),
    vkey, updated: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
  };
  try {
    await store.set(vkey, entry);
  } catch (e) {
    if (e instanceof StateError) throw e;
    throw new StateError(`cannot write the verifier state: ${e?.message ?? e}`);
  }
  return true;
}

/** A level-5 result: the level, whether the verdict requires it, notes for the report, the
 * fork or rollback evidence (null when the checkpoints were never reconciled), the newest
 * checkpoint seen, to remember, and the log's latest checkpoint as fetched and verified (a
 * frozen log's: its final). */
function consistency(level, { required = false, notes = [], conflicts = null, newest = null, latest = null } = {}) {
  return { level, required, notes, conflicts, newest, latest };
}

/** A failed level 5: the verdict then requires it (a rollback or fork is never optional). */
const consistencyFailure = (reason, notes = []) => consistency(failed(reason), { required: true, notes });

/**
 * Level 5, the rollback and fork check: the receipt's checkpoint against the one stored for its
 * log (read, never written here) and the log's latest (fetched when online), with the
 * consistency proofs between them. `recordConsistency` applies the result (as Python's
 * check_consistency and record_consistency do).
 */
async function checkConsistency(receipt, verdict, proof, logKey, trust, fetcher, store, logUrl) {
  const cp = verdict.checkpoint;
  if (cp === null || logKey === null || proof === null) {
    return consistency(skipped("no verified checkpoint to compare (level 3)"));
  }
  if (verdict.levels.witnesses.status === "failed") {
    return consistency(skipped("the receipt's checkpoint does not meet the witness policy; it is neither compared nor remembered"));
  }
  const receiptSeen = new Seen("receipt", cp, decodeProofBundle(proof).checkpoint);
  const { stored, altered, notes } = await storedSeen(store, logKey, cp);
  if (altered !== null) return consistencyFailure(altered);
  const latest = await latestSeen(receipt, logKey, trust, fetcher, logUrl);
  if (typeof latest === "string") return consistencyFailure(latest, notes);

  const reconciler = new Reconciler(stored, receiptSeen, latest.seen);
  const proofs = new Map();
  if (latest.base !== null) {
    for (const [oldSize, newSize] of reconciler.proofsNeeded()) {
      proofs.set(`${oldSize} ${newSize}`, await fetchConsistency(fetcher, latest.base, oldSize, newSize));
    }
  }
  const result = reconciler.finish(proofs);
  const latestCheckpoint = latest.seen === null ? null : latest.seen.checkpoint;
  if (result.conflicts.length) {
    return { ...consistencyFailure(result.conflicts.map((c) => c.message).join("; "), notes), conflicts: result.conflicts, latest: latestCheckpoint };
  }
  const judged = judgeConsistency(result, receiptSeen, stored, latest.seen, latest.problems, cp.origin);
  return { ...judged, notes: [...notes, ...judged.notes], conflicts: result.conflicts, newest: result.newest, latest: latestCheckpoint };
}

/** The checkpoint stored for this log: { stored, altered: why the state was altered, notes }. */
async function storedSeen(store, logKey, cp) {
  let stored = null;
  const { entry, otherKey } = await loadStored(store, logKey.vkey);
  if (entry !== null) {
    try {
      const { checkpoint: storedCp } = await openCheckpoint(entry.checkpoint, logKey);
      stored = new Seen("stored", storedCp, new TextEncoder().encode(entry.checkpoint));
    } catch (e) {
      if (!(e instanceof NoteError)) throw e;
      if (entry.vkey !== "") { // recorded under this very key: the state was altered
        return { stored: null, altered: `the checkpoint stored for ${repr(cp.origin)} in the verifier state does not verify under the trusted log key (${e.message}); the state was altered: remove that entry to start over`, notes: [] };
      }
      // an older store's entry for the origin, naming no key: another log's
    }
  }
  const notes = otherKey === null ? [] : [`the verifier state holds checkpoints of ${repr(cp.origin)} under another log key (${otherKey}): another log of that name (a notary that started over has a new key), not compared with this one`];
  return { stored, altered: null, notes };
}

/**
 * The log's latest checkpoint: { seen (null when not fetched), base (where proofs are fetched,
 * null offline), problems }, or the reason level 5 fails (a log that refused to answer, or
 * serves a checkpoint its key did not sign).
 */
async function latestSeen(receipt, logKey, trust, fetcher, logUrl) {
  let base = (logUrl ? logUrl.replace(/\/+$/, "") : null) || logBaseUrl(receipt);
  if (fetcher === null) {
    return { seen: null, base: null, problems: ["offline: the log's latest checkpoint and consistency proofs are not fetched"] };
  }
  if (base === null) return { seen: null, base: null, problems: ["no http(s) log URL in the receipt (use --log-url)"] };
  try {
    try {
      return { seen: await fetchLatest(fetcher, base, logKey, trust), base, problems: [] };
    } catch (e) {
      // The notary may have rolled to a new log since (docs/lifecycle.md): a frozen log is
      // served where its /v1/ledger's `logs` says (as Python's notary verify looks it up).
      if (!(e instanceof NoteError)) throw e;
      const moved = logUrl ? null : await listedUrl(fetcher, base, receipt.ledger.origin);
      if (moved === null) throw e;
      base = moved;
      return { seen: await fetchLatest(fetcher, base, logKey, trust), base, problems: [] };
    }
  } catch (e) {
    if (e instanceof FetchError) {
      if (e.refused) return `the log's latest checkpoint: ${e.message}`;
      return { seen: null, base, problems: [`the log's latest checkpoint could not be fetched: ${e.message}`] };
    }
    if (e instanceof LatestUnusable) return { seen: null, base, problems: [e.message] };
    if (e instanceof NoteError) return `the log at ${base} serves a checkpoint that does not verify under the trusted log key: ${e.message}`;
    throw e;
  }
}

/** Level 5 when no conflict was found: passed when every other checkpoint seen is proven
 * consistent with the receipt's, else skipped with what could not be checked. */
function judgeConsistency(result, receiptSeen, stored, latest, problems, origin) {
  const others = [stored, latest].filter((s) => s !== null);
  if (others.length && others.every((s) => result.connected(receiptSeen, s))) {
    // A problem fetching is worth a note when the level passed all the same.
    return consistency(passed(`consistent with ${others.map((s) => s.describe()).join(" and ")}`), { required: stored !== null, notes: [...problems] });
  }
  if (stored === null && latest === null) {
    return consistency(skipped([...problems, `no checkpoint of ${repr(origin)} under this log key seen before`].join("; ")));
  }
  return consistency(skipped([...problems, describePairs(result.unchecked)].filter((p) => p).join("; ")));
}

/** Put level 5's result into `report` and remember the newest checkpoint seen in `store`. */
async function recordConsistency(report, found, store, logKey) {
  const verdict = report.verdict;
  if (found.required) verdict.require("consistency");
  verdict.levels.consistency = found.level;
  report.notes.push(...found.notes);
  report.latest = found.latest;
  if (found.conflicts !== null) report.conflicts = found.conflicts;
  const newest = found.newest;
  if (store !== null && newest !== null && (await remember(store, newest, logKey.vkey))) {
    report.notes.push(`remembered ${newest.describe()} as the newest checkpoint seen for ${repr(verdict.checkpoint.origin)}`);
  }
}

/**
 * No pinned key is of the receipt's log: its key followed from a pinned log's through the
 * successor records (chain.js), or why it could not be: [trust, problem] (Python's _chained).
 */
async function chained(receipt, trust, fetcher, notes) {
  const base = logBaseUrl(receipt);
  if (base === null) return [trust, "the receipt names no http(s) notary to read the logs from"];
  let found;
  try {
    found = await keyByChain(fetcher, notaryBase(base), trust.logKeys, receipt.ledger.origin);
  } catch (e) {
    if (e instanceof ChainError) return [trust, e.message];
    throw e;
  }
  notes.push(`the key of log ${repr(receipt.ledger.origin)} followed from the pinned key of ${repr(found.pinned)} through ${found.steps} successor record(s)`);
  const retired = Object.freeze(Object.assign(Object.create(null), retirements(found.ledger), trust.retired));
  return [Object.freeze({ ...trust, logKeys: [...trust.logKeys, found.key], retired }), null];
}

function fetcherFrom(options) {
  if (options.fetcher) return options.fetcher;
  if (options.online || options.fetch) return createFetcher({ fetch: options.fetch ?? globalThis.fetch, timeoutMs: options.timeoutMs ?? 10000 });
  return null;
}

async function trustFrom(options, fetcher) {
  const t = options.trust ?? {};
  if (t[TRUST] === true) return t; // made by makeTrust or loadTrust
  return loadTrust(t, { fetcher });
}

/**
 * Check all five levels of a call (as returned by callFrom*). Options: `fetcher` (null:
 * offline), `store` (null: no memory), `logUrl` (the log's base URL instead of the receipt's),
 * `upgrade` (fetch the receipt's current proof from the notary first, into its newest witnessed
 * checkpoint, and verify with it when it verifies; `report.receiptWithProof()` is then the
 * upgraded receipt, as `notary verify --upgrade --save-receipt`), `cose` (the bytes of the
 * call's RFC 9942 COSE receipt: checked too, as `report.cose`, and required to pass).
 */
export async function verifyCall(call, trust, { fetcher = null, store = null, logUrl = null, upgrade = false, cose = null } = {}) {
  if (cose !== null && !(cose instanceof Uint8Array)) throw new VerifierInputError("the COSE receipt must be bytes (a Uint8Array)");
  const notes = [];
  let receipt = call.receipt;
  if (receipt === null || receipt === undefined) {
    let note;
    [receipt, note] = await fetchReceipt(call, fetcher);
    notes.push(note);
  }
  const receiptUrl = isObject(call.meta) && typeof call.meta.receipt_url === "string" ? call.meta.receipt_url : null;
  let proofText = typeof receipt.proof === "string" ? receipt.proof : null;
  if (!has(receipt, "proof") || receipt.proof === null) {
    let note;
    [proofText, note] = await fetchProof(receipt, receiptUrl, fetcher);
    notes.push(note);
  }
  let chainProblem = null;
  if (fetcher !== null && trust.logKeys.length && isWellShaped(receipt) && !trust.logKeys.some((k) => k.name === receipt.ledger.origin)) {
    [trust, chainProblem] = await chained(receipt, trust, fetcher, notes);
  }
  const keyFor = (proof) => {
    const found = selectLogKey(receipt, proof, trust.logKeys);
    return [found, found === null || "status" in found ? null : found];
  };
  const trustOptions = { record: call.record, jwks: trust.jwks, witnesses: trust.witnesses, quorum: trust.quorum, policy: trust.policy };
  if (upgrade) {
    if (fetcher === null) throw new VerifierInputError("--upgrade fetches the receipt's proof, which --offline forbids");
    if (isWellShaped(receipt)) {
      let [fresh, note] = await fetchProof(receipt, receiptUrl, fetcher);
      if (fresh === null && logUrl) {
        // The notary gives none (it is gone, say): the proof into the checkpoint served at
        // --log-url (a mirror's), from its tiles; verified below like the notary's.
        const [fromTiles, why] = await proofFromTiles(fetcher, logUrl, receipt.ledger.index);
        [fresh, note] = fromTiles !== null ? [fromTiles, why] : [null, `${note}; ${why}`];
      }
      if (fresh === null) notes.push(`not upgraded: ${note.replace(/^the receipt has no proof and /, "")}`);
      else if (fresh === proofText) notes.push("upgrade: the notary serves the same proof (no newer witnessed checkpoint covers the entry yet)");
      else {
        const trial = await verifyLevels(receipt, { ...trustOptions, logVerifier: keyFor(fresh)[1], proof: fresh });
        if (trial.levels.inclusion?.status === "passed") {
          proofText = fresh;
          notes.push(`upgraded: ${note}`);
        } else {
          notes.push(`not upgraded: the fetched proof does not verify (${trial.levels.inclusion?.reason})`);
        }
      }
    }
  }
  const [selected, logKey] = keyFor(proofText);
  const levelOptions = { ...trustOptions, logVerifier: logKey };
  let verdict = await verifyLevels(receipt, { ...levelOptions, proof: proofText });
  if (selected !== null && logKey === null && "inclusion" in verdict.levels) {
    verdict.levels.inclusion = chainProblem === null ? selected : failed(`${selected.reason}; following the chain of logs from a pinned key: ${chainProblem}`);
  }
  const witnesses = verdict.levels.witnesses;
  if (witnesses !== undefined && witnesses.status === "failed" && fetcher !== null) {
    const [fresh, note] = await fetchProof(receipt, receiptUrl, fetcher);
    if (fresh !== null && fresh !== proofText) {
      const retry = await verifyLevels(receipt, { ...levelOptions, proof: fresh });
      if ((retry.levels.witnesses ?? witnesses).status === "passed") {
        verdict = retry;
        proofText = fresh;
        notes.push(`the receipt's own proof lacked the witness quorum: ${note}`);
      }
    }
  }
  checkMeta(call, receipt, verdict);
  const report = new Report(verdict, receipt, notes, proofText);
  if (cose !== null) report.cose = await checkCoseReceipt(receipt, cose, trust);
  if (!("witnesses" in verdict.levels)) {
    verdict.levels.witnesses = skipped("the receipt is malformed");
    verdict.levels.consistency = skipped("the receipt is malformed");
    return report;
  }
  if (trust.quorum || (trust.policy !== null && trust.policy.quorum !== "none")) verdict.require("witnesses");
  const found = await checkConsistency(receipt, verdict, proofText, logKey, trust, fetcher, store, logUrl);
  await recordConsistency(report, found, store, logKey);
  const retired = trust.retired?.[receipt.ledger.origin];
  if (retired !== undefined && Object.hasOwn(trust.retired, receipt.ledger.origin)) checkRetired(report, receipt.ledger.origin, retired);
  report.checkpoint = verdict.checkpoint;
  return report;
}

/**
 * Verify a notarized tool call: a saved call {tool, arguments, result, server?}, a bare
 * CallToolResult (give `tool` and `arguments`) or a JSON-RPC response carrying one, as an object
 * or JSON text. Options: `trust` (see makeTrust/loadTrust), `receipt` (instead of the embedded
 * one), `online` (fetch the log's latest checkpoint and consistency proofs), `fetch`, `store`
 * ({get, set}: the newest checkpoint per log), `logUrl`, `timeoutMs`, `cose` (the call's COSE
 * receipt, bytes: checked too). Resolves to a Report;
 * throws VerifierInputError for unusable inputs and StateError for an unusable store.
 */
export async function verifyToolCall(input, options = {}) {
  const fetcher = fetcherFrom(options);
  const trust = await trustFrom(options, fetcher);
  const receipt = options.receipt === undefined || options.receipt === null ? null : object(readDoc(options.receipt, "the receipt"), "the receipt");
  const call = callFromDocument(input, { tool: options.tool, arguments: options.arguments === undefined ? undefined : readDoc(options.arguments, "the arguments"), receipt });
  return verifyCall(call, trust, { fetcher, store: options.store ?? null, logUrl: options.logUrl ?? null, cose: options.cose ?? null });
}

/**
 * Verify a receipt (with its proof) against the call record it should commit to (or null: level
 * 1 skipped). Same options as verifyToolCall. Resolves to a Report.
 */
export async function verifyReceipt(receipt, record, options = {}) {
  const fetcher = fetcherFrom(options);
  const trust = await trustFrom(options, fetcher);
  const r = object(readDoc(receipt, "the receipt"), "the receipt");
  const call = record === null || record === undefined
    ? { receipt: r, record: null, meta: null, source: "receipt" }
    : callFromReceiptAndRecord(r, readDoc(record, "the call record"));
  return verifyCall(call, trust, { fetcher, store: options.store ?? null, logUrl: options.logUrl ?? null, cose: options.cose ?? null });
}

