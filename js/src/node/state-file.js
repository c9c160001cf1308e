// The verifier's memory as a file, in the format of the Python verifier's state file, so that
// `notary verify` and `mcp-notary verify` can share one (~/.config/mcp-notary/verifier-state.json).
// Reads never create anything; writes create the directory (0700) and the file (0600) and
// replace it atomically (temporary file, fsync, rename). Node only.

import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, basename } from "node:path";
import { JsonError, StateError } from "../errors.js";
import { isFloatLiteral, parseJson } from "../json.js";
import { checkStoredEntry } from "../state.js";

export const DEFAULT_STATE_PATH = "~/.config/mcp-notary/verifier-state.json";

export function expandUser(path) {
  return path === "~" || path.startsWith("~/") ? join(homedir(), path.slice(1)) : path;
}

/** A CheckpointStore backed by a JSON state file (version 1). */
export class StateFileStore {
  constructor(path = DEFAULT_STATE_PATH) {
    this.path = expandUser(path);
  }

  load() {
    let raw;
    try {
      raw = readFileSync(this.path);
    } catch (e) {
      if (e.code === "ENOENT") return {};
      throw new StateError(`cannot read the state file ${this.path}: ${e.message}`);
    }
    let doc;
    try {
      doc = parseJson(raw);
    } catch (e) {
      if (!(e instanceof JsonError)) throw e;
      throw new StateError(`the state file ${this.path} is not valid JSON: ${e.message}`);
    }
    if (doc === null || typeof doc !== "object" || Array.isArray(doc) || doc.version !== 1 || isFloatLiteral(doc, "version")) {
      throw new StateError(`the state file ${this.path} is not a version-1 verifier state ({"version": 1, "logs": {...}})`);
    }
    const logs = Object.prototype.hasOwnProperty.call(doc, "logs") ? doc.logs : {}; // null is no object, as in Python
    if (logs === null || typeof logs !== "object" || Array.isArray(logs)) throw new StateError(`the state file ${this.path}: 'logs' must be an object`);
    for (const [origin, entry] of Object.entries(logs)) checkStoredEntry(origin, entry);
    return logs;
  }

  /** The entry under `key`: a log verifier key `<origin>+<id>+<key>` (an origin in older files). */
  get(origin) {
    const logs = this.load();
    return Object.prototype.hasOwnProperty.call(logs, origin) ? logs[origin] : undefined;
  }

  set(origin, entry) {
    try {
      mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
      const logs = this.load();
      const current = Object.prototype.hasOwnProperty.call(logs, origin) ? logs[origin] : undefined;
      if (current !== undefined && current.size > entry.size) return; // never move backwards
      Object.defineProperty(logs, origin, { value: entry, enumerable: true, writable: true, configurable: true });
      // An older file's entry for the origin alone, naming this key, is now kept under the key.
      const legacy = origin.split("+")[0];
      if (legacy !== origin && Object.prototype.hasOwnProperty.call(logs, legacy) && logs[legacy]?.vkey === entry.vkey) delete logs[legacy];
      const sorted = Object.fromEntries(Object.keys(logs).sort().map((k) => [k, logs[k]]));
      const data = JSON.stringify({ version: 1, logs: sorted }, null, 2) + "\n";
      const tmp = join(dirname(this.path), `.${basename(this.path)}.${process.pid}.tmp`);
      const fd = openSync(tmp, "w", 0o600);
      try {
        writeSync(fd, data);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      try {
        renameSync(tmp, this.path);
      } catch (e) {
        try { unlinkSync(tmp); } catch { /* already gone */ }
        throw e;
      }
    } catch (e) {
      if (e instanceof StateError) throw e;
      throw new StateError(`cannot write the state file ${this.path}: ${e.message}`);
    }
  }
}
