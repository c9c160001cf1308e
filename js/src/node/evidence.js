// The evidence store in Node: a directory of saved calls, one file per call named
// `<receipt id>.json`, each what `mcp-notary verify CALL` and `notary verify CALL` read; written
// atomically (temporary file, fsync, rename), never overwritten (a receipt id already kept means
// a replayed result). The same store as the Python notary.verifier.evidence.EvidenceStore.

import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { JsonError, VerifierInputError } from "../errors.js";
import { parseJson } from "../json.js";
import { isReceiptId } from "../ids.js";
import { bundleText, parseBundle } from "../evidence.js";
import { expandUser } from "./state-file.js";

const MAX_INPUT_BYTES = 64 << 20;

/** Write `data` to `path` atomically (mode 0600: arguments and results are private). */
export function writeAtomic(path, data) {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${Date.now()}.tmp`);
  const fd = openSync(tmp, "w", 0o600);
  try {
    try {
      writeSync(fd, data);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    try { unlinkSync(tmp); } catch { /* already gone */ }
    throw e;
  }
  try {
    const dir = openSync(dirname(path), "r");
    try { fsyncSync(dir); } finally { closeSync(dir); }
  } catch { /* a platform that cannot fsync a directory */ }
}

/** A directory of saved calls (created on first save). */
export class EvidenceStore {
  constructor(directory) {
    this.directory = expandUser(directory);
  }

  pathFor(receiptId) {
    if (!isReceiptId(receiptId)) throw new TypeError(`${JSON.stringify(receiptId)} is not a receipt id`);
    return join(this.directory, `${receiptId}.json`);
  }

  /** Whether a call with this receipt is already kept (a replay, for a new call). */
  has(receiptId) {
    return existsSync(this.pathFor(receiptId));
  }

  /** Keep one verified call, durably; refuses to replace one already kept. */
  save(receiptId, call) {
    const path = this.pathFor(receiptId);
    if (existsSync(path)) throw new Error(`${path} is already kept`);
    writeAtomic(path, JSON.stringify(call, null, 2) + "\n");
    return path;
  }

  /** The saved calls' paths, by name (a write in progress is a dot file). */
  files() {
    let names;
    try {
      names = readdirSync(this.directory);
    } catch {
      return [];
    }
    return names.filter((n) => n.endsWith(".json") && !n.startsWith(".")).sort()
      .map((n) => join(this.directory, n)).filter((p) => statSync(p).isFile());
  }

  /** [{source, doc}] (or {source, error} for a file that cannot be read). */
  entries() {
    return this.files().map((p) => {
      try {
        return { source: p, doc: parseJson(readFileSync(p)) };
      } catch (e) {
        if (e instanceof JsonError || e.code) return { source: p, error: `cannot read it: ${e.message}` };
        throw e;
      }
    });
  }

  /** Write every kept call to one bundle file (atomically); how many it holds. */
  exportBundle(out) {
    const docs = this.entries().map((e) => {
      if (e.error !== undefined) throw new VerifierInputError(`${e.source}: ${e.error}`);
      return e.doc;
    });
    writeAtomic(expandUser(out), bundleText(docs));
    return docs.length;
  }
}

/**
 * The saved calls of an evidence store (a directory) or a bundle, in order; null when `path` is
 * neither (a single saved call).
 */
export function readEvidence(path) {
  const p = expandUser(path);
  let stat;
  try {
    stat = statSync(p);
  } catch {
    return null; // the single-call reader reports it
  }
  if (stat.isDirectory()) return new EvidenceStore(p).entries();
  if (!stat.isFile() || stat.size > MAX_INPUT_BYTES) return null;
  return parseBundle(readFileSync(p), path);
}
