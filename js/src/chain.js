// Following a notary's chain of logs from a pinned log key (docs/lifecycle.md), as Python's
// notary.verifier.chain does with notary.core.log_chain's checks: each frozen log's last entry,
// read from its tiles and proven under its final checkpoint (verified under the key followed so
// far), is the successor record naming the next log's origin and keys. No key is ever taken
// from the unsigned list of logs.
import { decode, encode } from "cborg";
import { FetchError, NoteError, ProofBundleError, ProofError } from "./errors.js";
import { getJson } from "./fetcher.js";
import { openCheckpoint } from "./checkpoint.js";
import { leafHash, verifyInclusion } from "./merkle.js";
import { decodeProofBundle } from "./proofbundle.js";
import { encodeIndex, proofFromTiles } from "./tiles.js";
import { parseLogKey } from "./keys.js";
import { bytesEqual } from "./bytes.js";

export class ChainError extends Error {
  constructor(message) {
    super(message);
    this.name = "ChainError";
  }
}

const SUCCESSOR_SPEC = "rs-log-successor/1";
const SUCCESSOR_KEYS = ["frozen_at", "origin", "previous", "reason", "spec", "vkeys"];
const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const text = (v) => typeof v === "string" && v.length > 0;

/** The notary's base URL from a log's (`<base>/logs/<n>` for log n >= 1). */
export function notaryBase(logBase) {
  return logBase.replace(/\/+$/, "").replace(/\/logs\/[0-9]+$/, "");
}

/** /v1/ledger's `logs`, strictly (Python's parse_log_list): every log frozen but the last. */
function parseLogList(logs, base) {
  if (!Array.isArray(logs) || logs.length === 0 || logs.length > 100000) throw new ChainError("logs is not a non-empty list");
  return logs.map((item, i) => {
    if (!isObject(item)) throw new ChainError(`logs[${i}] is not an object`);
    if (!Array.isArray(item.vkeys) || !item.vkeys.length || !item.vkeys.every(text)) throw new ChainError(`logs[${i}].vkeys is not a non-empty list of strings`);
    if (!Number.isSafeInteger(item.size) || item.size < 0) throw new ChainError(`logs[${i}].size is not a non-negative integer`);
    for (const k of ["origin", "state", "url"]) if (!text(item[k])) throw new ChainError(`logs[${i}].${k} is not a non-empty string`);
    const want = i === logs.length - 1 ? "active" : "frozen";
    if (item.state !== want) throw new ChainError(`logs[${i}] is '${item.state}': every log but the last is frozen and the last is active`);
    let url;
    try {
      url = new URL(item.url, base.replace(/\/+$/, "") + "/");
    } catch {
      throw new ChainError(`logs[${i}].url is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new ChainError(`logs[${i}].url is not an http(s) URL`);
    return { origin: item.origin, vkeys: [...item.vkeys], size: BigInt(item.size), url: url.href.replace(/\/+$/, "") };
  });
}

function decodeSuccessor(entry, frozen) {
  let obj;
  try {
    obj = decode(entry, { strict: true, rejectDuplicateMapKeys: true, useMaps: true, tags: [] });
  } catch (e) {
    throw new ChainError(`the last entry of frozen log ${frozen.origin} is not a successor record: not valid CBOR: ${e.message}`);
  }
  const bad = (why) => new ChainError(`the last entry of frozen log ${frozen.origin} is not a successor record: ${why}`);
  if (!(obj instanceof Map) || [...obj.keys()].sort().join() !== SUCCESSOR_KEYS.join()) throw bad(`a successor record is a map of exactly ${SUCCESSOR_KEYS.join(", ")}`);
  const r = Object.fromEntries(obj);
  if (r.spec !== SUCCESSOR_SPEC) throw bad(`spec is not ${SUCCESSOR_SPEC}`);
  for (const k of ["origin", "previous", "frozen_at", "reason"]) if (!text(r[k])) throw bad(`${k} must be a non-empty text string`);
  if (!Array.isArray(r.vkeys) || !r.vkeys.length || !r.vkeys.every(text)) throw bad("vkeys must be a non-empty list of text strings");
  if (!["scheduled", "operator", "compromised"].includes(r.reason)) throw bad(`reason ${r.reason} is not known`);
  if (!bytesEqual(encode(obj), entry)) throw bad("the record is not in deterministic CBOR encoding");
  return r;
}

/** Entry `index` of a tree (size, root) read from the log's tiles and proven under that root. */
async function provenEntry(fetcher, url, index, size, root) {
  const n = index / 256n;
  const width = size - n * 256n;
  const bundle = await fetcher.getBytes(`${url}/tile/entries/${encodeIndex(n)}${width >= 256n ? "" : `.p/${width}`}`);
  let entry = null;
  for (let pos = 0, i = 0n; pos < bundle.length; i++) {
    if (pos + 2 > bundle.length) break;
    const len = (bundle[pos] << 8) | bundle[pos + 1];
    if (pos + 2 + len > bundle.length) break;
    if (i === index % 256n) entry = bundle.subarray(pos + 2, pos + 2 + len);
    pos += 2 + len;
  }
  if (entry === null) throw new ChainError(`the entry bundle at ${url} does not hold entry ${index}`);
  const [proofText, why] = await proofFromTiles(fetcher, url, index);
  if (proofText === null) throw new ChainError(why);
  let proof;
  try {
    proof = decodeProofBundle(proofText).proof;
  } catch (e) {
    if (e instanceof ProofBundleError) throw new ChainError(e.message);
    throw e;
  }
  try {
    verifyInclusion(index, size, leafHash(entry), proof, root);
  } catch (e) {
    if (e instanceof ProofError) throw new ChainError(`entry ${index} served at ${url} is not the one its final checkpoint commits to: ${e.message}`);
    throw e;
  }
  return entry;
}

/**
 * The key of the log `origin`, followed from the newest pinned log before it (`pinned`: parsed
 * log keys): {key, pinned (that log's origin), steps, ledger}. Throws ChainError saying where the
 * chain breaks.
 */
export async function keyByChain(fetcher, notaryUrl, pinned, origin) {
  let ledger;
  try {
    ledger = await getJson(fetcher, notaryUrl + "/v1/ledger");
  } catch (e) {
    if (e instanceof FetchError) throw new ChainError(`cannot read the notary's list of logs: ${e.message}`);
    throw e;
  }
  const logs = parseLogList(isObject(ledger) ? ledger.logs : null, notaryUrl);
  const target = logs.findIndex((l) => l.origin === origin);
  if (target < 0) throw new ChainError(`the notary at ${notaryUrl} does not list the log '${origin}'`);
  let start = -1;
  let verifier = null;
  for (let i = target; i >= 0 && start < 0; i--) {
    verifier = pinned.find((k) => k.name === logs[i].origin && logs[i].vkeys.includes(k.vkey)) ?? null;
    if (verifier !== null) start = i;
  }
  if (start < 0) throw new ChainError(`no pinned log key is of a log before '${origin}' in the notary's list`);
  for (let j = start; j < target; j++) {
    const listed = logs[j];
    const next = logs[j + 1];
    let cp;
    try {
      ({ checkpoint: cp } = await openCheckpoint(await fetcher.getBytes(`${listed.url}/checkpoint`), verifier));
    } catch (e) {
      if (e instanceof NoteError) throw new ChainError(`the final checkpoint of ${listed.origin} does not verify under the key followed to it: ${e.message}`);
      if (e instanceof FetchError) throw new ChainError(`frozen log ${listed.origin}: ${e.message}`);
      throw e;
    }
    const size = BigInt(cp.size);
    if (size !== listed.size || size === 0n) throw new ChainError(`frozen log ${listed.origin} serves a checkpoint of size ${size}; the notary lists its final size as ${listed.size}`);
    let entry;
    try {
      entry = await provenEntry(fetcher, listed.url, size - 1n, size, cp.rootHash);
    } catch (e) {
      if (e instanceof FetchError) throw new ChainError(`frozen log ${listed.origin}: ${e.message}`);
      throw e;
    }
    const record = decodeSuccessor(entry, listed);
    if (record.previous !== listed.origin) throw new ChainError(`the successor record ending ${listed.origin} names ${record.previous} as its log`);
    if (record.origin !== next.origin || record.vkeys.join("\n") !== next.vkeys.join("\n")) {
      throw new ChainError(`frozen log ${listed.origin} hands over to ${record.origin}, but the notary lists ${next.origin} with other keys`);
    }
    let found = null;
    for (const vkey of record.vkeys) {
      let k;
      try {
        k = parseLogKey(vkey);
      } catch (e) {
        if (e instanceof NoteError) throw new ChainError(`the successor record of ${record.previous} names a key that is not a log key: ${e.message}`);
        throw e;
      }
      if (k.name !== record.origin) throw new ChainError(`the successor record of ${record.previous} names a key of ${k.name}, not of ${record.origin}`);
      if (found === null && k.constructor === verifier.constructor) found = k;
    }
    if (found === null) throw new ChainError(`the successor record of ${record.previous} names no key of the pinned kind for ${record.origin}`);
    verifier = found;
  }
  return { key: verifier, pinned: logs[start].origin, steps: target - start, ledger };
}
