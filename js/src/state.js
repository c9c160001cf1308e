// Verification level 5: the verifier's memory of each log (the newest checkpoint seen per log:
// origin and key, so a notary that started over under the same origin is another log) and the
// pure rules comparing it with the receipt's and the log's latest checkpoint, as
// notary.verifier.state. The memory is a store object the caller passes:
//   { get(key) -> entry | undefined, set(key, entry) }   (either may return a Promise)
// keyed by the log verifier key `<origin>+<id>+<key>` (older stores: by origin, still read),
// where an entry is the Python state file's: {size, root, checkpoint, vkey, updated}. The signed
// note is kept whole and verified again under the trusted log key on every use, so editing a
// store cannot make the verifier accept anything, only complain.

import { JsonError, StateError } from "./errors.js";
import { isFloatLiteral, parseJson } from "./json.js";
import { bytesEqual, fromUtf8, toBase64 } from "./bytes.js";
import { verifyConsistency } from "./merkle.js";

const DESCRIBE = {
  stored: "the checkpoint already seen (state file)",
  receipt: "the receipt's checkpoint",
  latest: "the log's latest checkpoint",
};

/** A checkpoint verified under the trusted log key, with its note bytes and where it came from. */
export class Seen {
  constructor(label, checkpoint, note) {
    this.label = label;
    this.checkpoint = checkpoint;
    this.note = note;
  }
  get size() {
    return this.checkpoint.size;
  }
  describe() {
    return `${DESCRIBE[this.label]} (size ${this.size})`;
  }
}

const noteText = (bytes) => {
  try {
    return fromUtf8(bytes);
  } catch {
    return new TextDecoder().decode(bytes);
  }
};

/** Two signed checkpoints of one log that cannot both be honest views of one history. */
export class Conflict {
  constructor(kind, message, first, second) {
    this.kind = kind;
    this.message = message;
    this.first = first;
    this.second = second;
  }
  toJSON() {
    return {
      kind: this.kind,
      message: this.message,
      checkpoints: [this.first, this.second].map((s) => ({
        source: s.label, size: jsonSize(s.size), root: toBase64(s.checkpoint.rootHash), note: noteText(s.note),
      })),
    };
  }
}

/** A BigInt size as a JSON number when exact, else as a decimal string. */
export function jsonSize(size) {
  return size <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(size) : size.toString();
}

/** The outcome of reconciling: conflicts, proven pairs, unchecked pairs (with why), newest. */
export class Reconciliation {
  constructor() {
    this.conflicts = [];
    this.checked = [];
    this.unchecked = [];
    this.newest = null;
  }
  /** Whether `a` and `b` are linked by proven consistency, directly or through others. */
  connected(a, b) {
    const reach = new Set([a.label]);
    let grew = true;
    while (grew) {
      grew = false;
      for (const [x, y] of this.checked) {
        for (const [u, v] of [[x, y], [y, x]]) {
          if (reach.has(u.label) && !reach.has(v.label)) {
            reach.add(v.label);
            grew = true;
          }
        }
      }
    }
    return reach.has(b.label);
  }
}

/**
 * Compare the stored, receipt and latest checkpoints of one origin pair by pair: equal sizes
 * need equal roots (else a fork); different sizes need a consistency proof from the log. A
 * missing or failed proof the log should have been able to give is a rollback when the smaller
 * one is the log's latest (or the receipt's against the stored one), a fork otherwise.
 */
export class Reconciler {
  constructor(stored, receipt, latest) {
    this.stored = stored;
    this.receipt = receipt;
    this.latest = latest;
    this.seen = [stored, receipt, latest].filter((s) => s !== null && s !== undefined);
    this.result = new Reconciliation();
    this.pending = [];
    for (let i = 0; i < this.seen.length; i++) {
      for (const b of this.seen.slice(i + 1)) this.classify(this.seen[i], b);
    }
  }

  classify(a, b) {
    const [small, big] = a.size <= b.size ? [a, b] : [b, a];
    if (small.size === big.size) {
      if (bytesEqual(small.checkpoint.rootHash, big.checkpoint.rootHash)) this.result.checked.push([small, big]);
      else {
        this.result.conflicts.push(new Conflict("fork", `${small.describe()} and ${big.describe()} have the same size but different root hashes: the log key signed two different trees`, small, big));
      }
      return;
    }
    this.pending.push([small, big]);
  }

  /** The [old, new] consistency proofs to fetch (BigInt sizes), sorted, without repeats. */
  proofsNeeded() {
    const out = new Map();
    for (const [s, b] of this.pending) out.set(`${s.size} ${b.size}`, [s.size, b.size]);
    return [...out.values()].sort((x, y) => (x[0] === y[0] ? (x[1] < y[1] ? -1 : 1) : x[0] < y[0] ? -1 : 1));
  }

  /**
   * Verify fetched proofs and decide. `proofs` maps "old new" to {proof: Uint8Array[]} or
   * {problem, refused}; a missing entry counts as not fetched (offline).
   */
  finish(proofs = new Map()) {
    const res = this.result;
    for (const [small, big] of this.pending) {
      const got = proofs.get(`${small.size} ${big.size}`);
      const rollback = small.label === "latest" || (small.label === "receipt" && big.label === "stored");
      const kind = rollback ? "rollback" : "fork";
      const lead = small.label === "latest" ? `the log now serves size ${small.size}, smaller than ${big.describe()}, and ` : "";
      if (got === undefined || !got.proof) {
        if (got !== undefined && got.refused) {
          res.conflicts.push(new Conflict(kind, `${lead}the log gave no consistency proof from ${small.describe()} to ${big.describe()}, both signed by its key: ${got.problem}`, small, big));
        } else {
          res.unchecked.push([[small, big], got !== undefined ? got.problem : "needs a consistency proof (offline)"]);
        }
        continue;
      }
      try {
        verifyConsistency(small.size, big.size, small.checkpoint.rootHash, big.checkpoint.rootHash, got.proof);
      } catch (e) {
        const what = kind === "rollback" ? "is older than and not a prefix of" : "is not a prefix of";
        res.conflicts.push(new Conflict(kind, `${lead}${small.describe()} ${what} ${big.describe()}: ${e.message}`, small, big));
        continue;
      }
      res.checked.push([small, big]);
    }
    res.newest = res.conflicts.length ? null : this.newestOf(res);
    return res;
  }

  newestOf(res) {
    const anchor = this.stored ?? this.receipt;
    let best = null;
    for (const s of this.seen) {
      if (res.connected(anchor, s) && (best === null || s.size > best.size)) best = s;
    }
    if (this.stored && best.size <= this.stored.size) return null;
    return best;
  }
}

/** One line saying which comparisons could not be made and why. */
export function describePairs(pairs) {
  return pairs.map(([[a, b], why]) => `${a.describe()} vs ${b.describe()}: ${why}`).join("; ");
}

/** Check a store entry's shape (the Python StoredCheckpoint rules); throws StateError. */
export function checkStoredEntry(origin, obj) {
  const where = `logs[${JSON.stringify(origin)}]`;
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) throw new StateError(`${where} must be an object`);
  if (!Number.isSafeInteger(obj.size) || obj.size < 0 || isFloatLiteral(obj, "size")) throw new StateError(`${where}.size must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}`);
  if (typeof obj.root !== "string" || typeof obj.checkpoint !== "string") throw new StateError(`${where} needs 'root' and 'checkpoint' strings`);
  return {
    size: obj.size, root: obj.root, checkpoint: obj.checkpoint,
    vkey: typeof obj.vkey === "string" ? obj.vkey : "", updated: typeof obj.updated === "string" ? obj.updated : "",
  };
}

/** The newest checkpoints per log in memory (a Map); the default for one process. */
export class MemoryStore {
  constructor(entries = {}) {
    this.logs = new Map(Object.entries(entries));
  }
  get(origin) {
    return this.logs.get(origin);
  }
  set(origin, entry) {
    this.logs.set(origin, entry);
  }
  toJSON() {
    return { version: 1, logs: Object.fromEntries([...this.logs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) };
  }
}

/**
 * A store in a Web Storage object (localStorage, sessionStorage) under one key, in the state
 * file's JSON format: what a browser verifier remembers between visits.
 */
export class WebStorageStore {
  constructor(storage, key = "mcp-notary/verifier-state") {
    this.storage = storage;
    this.key = key;
  }
  load() {
    const text = this.storage.getItem(this.key);
    if (text === null) return {};
    let doc;
    try {
      doc = parseJson(text);
    } catch (e) {
      if (!(e instanceof JsonError)) throw e;
      throw new StateError(`the stored verifier state (${this.key}) is not valid JSON: ${e.message}`);
    }
    if (doc === null || typeof doc !== "object" || Array.isArray(doc) || doc.version !== 1 || isFloatLiteral(doc, "version") ||
        typeof doc.logs !== "object" || doc.logs === null || Array.isArray(doc.logs)) {
      throw new StateError(`the stored verifier state (${this.key}) is not a version-1 verifier state`);
    }
    return doc.logs;
  }
  get(origin) {
    const logs = this.load();
    return Object.prototype.hasOwnProperty.call(logs, origin) ? logs[origin] : undefined;
  }
  set(origin, entry) {
    const logs = this.load();
    Object.defineProperty(logs, origin, { value: entry, enumerable: true, writable: true, configurable: true });
    this.storage.setItem(this.key, JSON.stringify({ version: 1, logs }));
  }
}
