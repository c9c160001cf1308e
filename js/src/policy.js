// C2SP tlog-policy: which logs and witnesses a verifier trusts and the quorum over them
// (`log`, `witness`, `group <name> all|any|<k> <member>...`, `quorum <name>|none`), parsed as
// strictly as ledger.core.tlog_policy, and checked against a checkpoint note.

import { NoteError, PolicyError, PolicyNotMet } from "./errors.js";
import { fromUtf8, isWellFormed, toBase64, utf8 } from "./bytes.js";
import { UnverifiedNoteError, openNote, parseNote } from "./note.js";
import { parseLogKey, parseWitnessKey } from "./keys.js";
import { parseCheckpointText } from "./checkpoint.js";

const NONE = "none";
/** Deepest nesting of groups (a group of witnesses is 1): ledger.core.tlog_policy's bound. */
export const MAX_GROUP_DEPTH = 32;
/** Largest policy text accepted (real ones are a few lines). */
export const MAX_POLICY_BYTES = 1 << 20;
// Python's str.split() separators that can occur here (controls are refused before splitting).
const SPLIT_RE = /[ \t\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

/** A parsed policy; `verify(note, logVerifiers)` checks a checkpoint against it. */
export class Policy {
  constructor(logs, witnesses, groups, quorum) {
    this.logs = logs; // [{verifier, url}]
    this.witnesses = witnesses; // Map name -> {verifier, url}
    this.groups = groups; // Map name -> {threshold, members}
    this.quorum = quorum;
    Object.freeze(this);
  }

  get logVerifiers() {
    return this.logs.map((l) => l.verifier);
  }

  get witnessVerifiers() {
    return [...this.witnesses.values()].map((w) => w.verifier);
  }

  /** Whether the witnesses named in `cosigned` (a Set of policy names) meet the quorum. */
  satisfied(cosigned) {
    const holds = (name) => {
      if (name === NONE) return true;
      if (this.witnesses.has(name)) return cosigned.has(name);
      const g = this.groups.get(name);
      return g.members.filter(holds).length >= g.threshold;
    };
    return holds(this.quorum);
  }

  /**
   * Check a checkpoint note: signed by a policy log (or one of `logVerifiers`) for its origin and
   * cosigned by the quorum. Returns {checkpoint, cosigned}; throws PolicyNotMet, or NoteError
   * when a known key's signature does not verify.
   */
  async verify(note, logVerifiers = []) {
    const logs = [...this.logVerifiers];
    for (const v of logVerifiers) {
      if (logs.every((w) => w.name !== v.name || w.keyId !== v.keyId)) logs.push(v);
    }
    let verified;
    try {
      ({ verified } = await openNote(note, [...logs, ...this.witnessVerifiers]));
    } catch (e) {
      if (e instanceof UnverifiedNoteError) throw new PolicyNotMet("the checkpoint carries no signature by a policy key");
      throw e;
    }
    const ids = new Set(verified.map((s) => `${s.name}\n${s.keyId}`));
    const cp = parseCheckpointText(parseNote(note).text);
    if (!logs.some((v) => ids.has(`${v.name}\n${v.keyId}`) && v.name === cp.origin)) {
      throw new PolicyNotMet(`checkpoint of ${JSON.stringify(cp.origin)} is not signed by a policy log`);
    }
    const cosigned = new Set([...this.witnesses].filter(([, w]) => ids.has(`${w.verifier.name}\n${w.verifier.keyId}`)).map(([n]) => n));
    if (!this.satisfied(cosigned)) {
      const names = [...cosigned].sort();
      throw new PolicyNotMet(`the quorum ${JSON.stringify(this.quorum)} is not met (cosigned by ${names.length ? JSON.stringify(names) : "no witness"})`);
    }
    return { checkpoint: cp, cosigned };
  }
}

/** Parse a tlog-policy text (string or bytes). Throws PolicyError. */
export function parsePolicy(data) {
  if (typeof data === "string" && !isWellFormed(data)) throw new PolicyError("the policy is not UTF-8 (a lone surrogate)");
  const raw = typeof data === "string" ? utf8(data) : data;
  if (!(raw instanceof Uint8Array)) throw new PolicyError("a policy must be text");
  if (raw.length > MAX_POLICY_BYTES) throw new PolicyError(`the policy is larger than ${MAX_POLICY_BYTES} bytes`);
  for (const b of raw) {
    if ((b < 0x20 && b !== 0x09 && b !== 0x0a) || b === 0x7f) {
      throw new PolicyError(`policy contains the forbidden byte 0x${b.toString(16).padStart(2, "0")}`);
    }
  }
  // One decoding rule with Python: UTF-8, strictly, without a byte order mark.
  if (raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf) {
    throw new PolicyError("the policy starts with a byte order mark (BOM); write it as UTF-8 without one");
  }
  let text;
  try {
    text = fromUtf8(raw);
  } catch {
    throw new PolicyError("the policy is not UTF-8");
  }
  const depths = new Map(); // each group's nesting depth
  const logs = [];
  const witnesses = new Map();
  const groups = new Map();
  const membersUsed = new Set();
  const keys = new Set();
  let quorum = null;
  const defined = (name) => name === NONE || witnesses.has(name) || groups.has(name);
  text.split("\n").forEach((line, i) => {
    const fields = line.split(SPLIT_RE).filter((f) => f.length > 0);
    if (fields.length === 0 || fields[0].startsWith("#")) return;
    const where = `line ${i + 1}`;
    const [keyword, ...args] = fields;
    if (keyword === "log") {
      if (args.length !== 1 && args.length !== 2) throw new PolicyError(`${where}: want 'log <vkey> [<url>]'`);
      let key;
      try {
        key = parseLogKey(args[0]);
      } catch (e) {
        if (e instanceof NoteError) throw new PolicyError(`${where}: bad log key: ${e.message}`);
        throw e;
      }
      const id = toBase64(key.publicKey);
      if (keys.has(id)) throw new PolicyError(`${where}: duplicate key`);
      keys.add(id);
      logs.push({ verifier: key, url: args[1] ?? null });
    } else if (keyword === "witness") {
      if (args.length !== 2 && args.length !== 3) throw new PolicyError(`${where}: want 'witness <name> <vkey> [<url>]'`);
      const name = args[0];
      if (defined(name)) throw new PolicyError(`${where}: name ${JSON.stringify(name)} is reserved or already defined`);
      let key;
      try {
        key = parseWitnessKey(args[1]);
      } catch (e) {
        if (e instanceof NoteError) throw new PolicyError(`${where}: bad witness key: ${e.message}`);
        throw e;
      }
      const id = toBase64(key.publicKey);
      if (keys.has(id)) throw new PolicyError(`${where}: duplicate key`);
      keys.add(id);
      witnesses.set(name, { verifier: key, url: args[2] ?? null });
    } else if (keyword === "group") {
      if (args.length < 3) throw new PolicyError(`${where}: want 'group <name> all|any|<k> <member>...'`);
      const [name, k, ...members] = args;
      if (defined(name)) throw new PolicyError(`${where}: name ${JSON.stringify(name)} is reserved or already defined`);
      for (const m of members) {
        if (!witnesses.has(m) && !groups.has(m)) throw new PolicyError(`${where}: member ${JSON.stringify(m)} is not defined before`);
        if (membersUsed.has(m)) throw new PolicyError(`${where}: ${JSON.stringify(m)} is already a group member`);
        membersUsed.add(m);
      }
      let threshold;
      if (k === "all") threshold = members.length;
      else if (k === "any") threshold = 1;
      else if (/^[0-9]+$/.test(k) && String(Number(k)) === k) {
        threshold = Number(k);
        if (threshold < 1 || threshold > members.length) throw new PolicyError(`${where}: threshold ${k} is not in 1..${members.length}`);
      } else throw new PolicyError(`${where}: threshold must be all, any or a number`);
      const depth = 1 + members.reduce((d, m) => Math.max(d, depths.get(m) ?? 0), 0);
      if (depth > MAX_GROUP_DEPTH) throw new PolicyError(`${where}: group ${JSON.stringify(name)} nests ${depth} deep, more than ${MAX_GROUP_DEPTH}`);
      depths.set(name, depth);
      groups.set(name, { threshold, members });
    } else if (keyword === "quorum") {
      if (args.length !== 1) throw new PolicyError(`${where}: want 'quorum <name>'`);
      if (quorum !== null) throw new PolicyError(`${where}: a second quorum line`);
      if (!defined(args[0])) throw new PolicyError(`${where}: quorum ${JSON.stringify(args[0])} is not defined before`);
      quorum = args[0];
    } else {
      throw new PolicyError(`${where}: unknown keyword ${JSON.stringify(keyword)}`);
    }
  });
  if (quorum === null) throw new PolicyError("the policy has no quorum line");
  return new Policy(logs, witnesses, groups, quorum);
}
